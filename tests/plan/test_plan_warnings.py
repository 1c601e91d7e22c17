"""hetinfra.plan.plan_warnings.idle_warnings: units the plan buys that carry none of their model's
traffic are said, with the rule that buys them (a held-out spec bought 8 idle on-demand T4s, $4.21/h,
so that its model's GPUs were at most half spot, and said nothing)."""

from __future__ import annotations

from types import SimpleNamespace as Ns

from hetinfra.plan.plan_warnings import idle_warnings


def _plan(n: dict, flow: dict, spot_cap: float):
    rates = Ns(rates={"c": 10.0})
    units = {"big|spot": Ns(model="m", gpus=8, cost=10.0, spot=True, template=rates),
             "t4|od": Ns(model="m", gpus=1, cost=0.5, spot=False, template=rates),
             "other|od": Ns(model="o", gpus=1, cost=1.0, spot=False, template=rates)}
    models = [Ns(spec=Ns(name="m", max_spot_fraction=spot_cap)), Ns(spec=Ns(name="o", max_spot_fraction=1.0))]
    return Ns(result=Ns(n=n, flow=flow), units=units, inputs=Ns(models=models))


def test_idle_on_demand_units_beside_spot_are_said_with_the_spot_fraction_that_buys_them():
    pr = _plan({"big|spot": 1, "t4|od": 8, "other|od": 1},
               {("big|spot", "m", "c"): 25.0, ("t4|od", "m", "c"): 0.0, ("other|od", "o", "c"): 2.0}, 0.5)
    [line] = idle_warnings(pr)
    assert line.startswith("model m: 8 GPU(s) ($4.00/h: t4|od) carry none of its traffic; bought so that at most "
                           "0.5 of its GPUs are spot")


def test_every_unit_carrying_traffic_says_nothing_and_another_rule_is_named_generally():
    busy = {("big|spot", "m", "c"): 20.0, ("t4|od", "m", "c"): 5.0, ("other|od", "o", "c"): 2.0}
    assert idle_warnings(_plan({"big|spot": 1, "t4|od": 8, "other|od": 1}, busy, 0.5)) == []
    idle_other = {("big|spot", "m", "c"): 25.0, ("t4|od", "m", "c"): 1.0}
    [line] = idle_warnings(_plan({"big|spot": 1, "t4|od": 8, "other|od": 1}, idle_other, 1.0))
    assert line.startswith("model o: 1 GPU(s)") and "a rule of the spec" in line


def test_weaker_rows_are_named_as_runs_of_lines():
    from hetinfra.plan.plan_warnings import _lines

    assert _lines({"7"}) == "line 7 was"
    assert _lines({"100", "38", "39", "40", "42"}) == "lines 38-40, 42, 100 (5 rows) were"
    assert _lines({"3", "x"}) == "lines 3, x (2 rows) were"
