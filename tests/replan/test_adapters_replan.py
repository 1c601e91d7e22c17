"""Re-planning LoRA adapters (issue 38 point 5): the demand log records each request under the adapter it
named; replan counts those rows as their base's demand, takes each adapter's observed share, and the
re-plan re-places the adapters whose demand moved (routing each only to its holders)."""

from __future__ import annotations

import json

from hetinfra.plan.adapters import fold_adapters, with_adapter_shares
from hetinfra.replan.demand_log import read_demand_log
from hetinfra.spec.load import load_spec
from tests.replan.conftest import toy_spec
from tests.replan.test_replan import _deploy

ADAPTERS = [{"name": "a0", "base": "toy", "source": "org/a0", "rank": 16, "demand": {"share": 0.7}},
            {"name": "a1", "base": "toy", "source": "org/a1", "rank": 16, "demand": {"share": 0.1}},
            {"name": "a2", "base": "toy", "source": "org/a2", "rank": 16, "demand": {"share": 0.1}}]
T0 = 1_790_000_000


def _log(tmp_path, mix: dict[str, float], rps: float = 8.0, seconds: int = 600):
    """``seconds`` of requests at ``rps``, each naming a model or adapter in proportion to ``mix``."""
    names = [n for n, s in mix.items() for _ in range(round(s * 20))]
    rows = ["timestamp,model,input_tokens,output_tokens,region"]
    for i in range(int(seconds * rps)):
        rows.append(f"{T0 + i / rps:.3f},{names[i % len(names)]},480,190,")
    path = tmp_path / "requests.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_adapter_rows_fold_into_their_base_with_their_shares(tmp_path):
    spec, _, _ = load_spec(toy_spec(tmp_path, adapters=ADAPTERS))
    log, shares = fold_adapters(read_demand_log(_log(tmp_path, {"toy": 0.1, "a0": 0.1, "a1": 0.7, "a2": 0.1})), spec)
    assert set(log.models.tolist()) == {"toy"}
    assert shares == {"a0": 0.1, "a1": 0.7, "a2": 0.1}
    moved = with_adapter_shares(spec, shares)
    assert [a.demand.share for a in moved.adapters] == [0.1, 0.7, 0.1] and moved.models == spec.models


def test_an_adapter_missing_from_the_log_keeps_a_small_share_and_shares_stay_at_most_one(tmp_path):
    spec, _, _ = load_spec(toy_spec(tmp_path, adapters=ADAPTERS))
    _, shares = fold_adapters(read_demand_log(_log(tmp_path, {"a0": 0.5, "a1": 0.5})), spec)
    assert 0 < shares["a2"] < 0.01 and sum(shares.values()) <= 1 + 1e-12


def test_replan_re_places_adapters_whose_demand_moved(fake_pulumi, cloud_env, service, run_cli, tmp_path):
    _, offers = service
    spec = toy_spec(tmp_path, adapters=ADAPTERS)
    out = tmp_path / "out"
    day1 = offers("day1", 1.00, 1.20)
    _deploy(run_cli, spec, day1, out)
    log = _log(tmp_path, {"toy": 0.1, "a0": 0.1, "a1": 0.7, "a2": 0.1})
    code, stdout, err = run_cli("replan", str(spec), "--state", str(out), "--feeds", str(day1), "--demand-log",
                                str(log), "--min-history-h", "0.1")
    assert code == 10, stdout + err  # 8.8 req/s observed (8 x 1.1 buffer) needs one more instance
    text = (out / "replan.log").read_text()
    assert "demand of adapter a1: share 0.1 -> 0.7 of toy" in text and "demand of adapter a0: share 0.7 -> 0.1" in text
    # the proposed plan plans the observed shares and routes each adapter only to the units holding it
    plan = json.loads((out / "proposed" / "plan.json").read_text())
    rate = {a: sum(c["rate_rps"] for c in plan["models"][0]["classes"] if c["name"].endswith("~" + a))
            for a in ("a0", "a1")}
    assert rate["a1"] > 5 * rate["a0"] > 0
    holders: dict[str, set[str]] = {}
    for a in plan["allocations"]:
        for h in (a.get("adapters") or {}).get("held", []):
            holders.setdefault(h["name"], set()).add(a["unit"])
    assert set(holders) == {"a0", "a1", "a2"}
    for cls, entries in plan["routing"]["toy"].items():
        if "~" in cls:
            assert {e["unit"] for e in entries} <= holders[cls.split("~")[1]]
