"""h109b probe: the cap-100 plan (/tmp/h109b100, 10 x H100 in us-east4) without big's a3-highgpu-2g unit: big's
requests from both origins all go to its a3-highgpu-4g (2 x TP2), so the fleet is 8 x H100, within h109b's cap."""
import json, sys
sys.path.insert(0, "/work/wt/heldout64")
d = json.load(open(sys.argv[1]))
drop = "big|gcp|a3-highgpu-2g|tp2x1|us-east4|ondemand"; keep = "big|gcp|a3-highgpu-4g|tp2x2|us-east4|ondemand"
d["allocations"] = [a for a in d["allocations"] if a["unit"] != drop]
for a in d["allocations"]:
    if a["unit"] == keep: a["routed_rps"] = 4.0
d["routing"]["big"] = {"a": [{"unit": keep, "share": 1.0, "rps": 4.0}]}
for o, r in d["routing_by_origin"]["big"].items():
    r["a"] = [dict(e, share=1.0, rps=2.0) for e in r["a"] if e["unit"] == keep]
tot = round(sum(a["cost_usd_per_hour"] for a in d["allocations"]), 4)
d["cost_usd_per_hour"] = tot; d["gpus"] = 8
for m in d["models"]: m["cost_usd_per_hour"] = round(sum(a["cost_usd_per_hour"] for a in d["allocations"] if a["model"] == m["name"]), 4)
bm = d["breakdown"]["by_model"]; bm["big"].update(cost_usd_per_hour=43.9162, gpus=4, instances=1)
d["breakdown"]["by_region"]["gcp/us-east4"].update(cost_usd_per_hour=tot, gpus=8, instances=2)
json.dump(d, open(sys.argv[2], "w"), indent=1); print(tot)
