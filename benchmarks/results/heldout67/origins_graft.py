"""Probe tool (stop 67): ../heldout66/graft2.py's output for a model with demand.origins gets its per-origin routes
(plan.json `routing_by_origin`, which the simulator routes by) from the donors too: each donor class's routes per origin,
the unit ids renamed to TARGET as graft2.py renames them. usage: origins_graft.py GRAFT.json TARGET DONOR_OUT:MODEL..."""
import json, sys
from pathlib import Path

dest, target = sys.argv[1], sys.argv[2]
doc = json.loads(Path(dest).read_text())
routes = {}
for arg in sys.argv[3:]:
    out, model = arg.rsplit(":", 1)
    donor = json.loads((Path(out) / "plan.json").read_text())
    for origin, classes in donor["routing_by_origin"][model].items():
        for cls, legs in classes.items():
            routes.setdefault(origin, {})[cls] = [dict(leg, unit=target + leg["unit"][leg["unit"].index("|"):]) for leg in legs]
doc["routing_by_origin"][target] = routes
Path(dest).write_text(json.dumps(doc, indent=1))
print({o: sorted(c) for o, c in routes.items()})
