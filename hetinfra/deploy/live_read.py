"""A recorded live read (state.json's ``live``, written by :mod:`hetinfra.deploy.drift`) as its
readers use it: the lines ``hetinfra status`` prints, and what runs for a re-plan (``replan``: the
replicas whose instances are gone or stalled taken out of state.json's allocations).

Split from hetinfra.deploy.drift, which reads the clouds and writes the record; these read only the
record."""

from __future__ import annotations

from hetinfra.document.state import allocation_of


def _replicas(instances: int, nodes: int) -> int:
    return -(-instances // max(1, nodes))


def _money(v: float | None) -> str:
    return "?" if v is None else f"{v:,.2f}"


def live_lines(live: dict | None, *, updated_at: str | None = None) -> list[str]:
    """Text lines of a ``live`` document for ``hetinfra status``, read through its model
    (hetinfra.document.state.LiveRead: a key an older or hand-edited read lacks prints '?')."""
    from hetinfra.document.state import LiveRead

    if not live:
        return ["live replicas: not read (run `hetinfra status OUT` without --no-refresh)"]
    read = LiveRead.model_validate(live)
    how = "read from the clouds" if read.refreshed else "read from the Pulumi state without a refresh"
    lines = [f"live: {read.live_replicas} of {read.desired_replicas} replica(s); "
             f"${_money(read.cost_usd_per_hour)}/h running (planned ${_money(read.planned_cost_usd_per_hour)}/h); "
             f"{how} at {read.read_at or '?'}"]
    lines.append(f"  {'path':<8} {'unit':<52} {'desired':>7} {'live':>4} {'unhealthy':>9} {'lost':>4} "
                 f"{'replacing':>9} {'$/h now':>9}")
    for name, u in sorted(read.units.items(), key=lambda kv: (kv[1].path or "?", kv[0])):
        live_n = "?" if u.live is None else str(u.live)
        lines.append(f"  {u.path or '?':<8} {name:<52} {u.desired:>7} {live_n:>4} {u.unhealthy:>9} {u.lost:>4} "
                     f"{u.replacing:>9} {_money(u.cost_usd_per_hour):>9}")
    lines += [f"drift: {d}" for d in read.drift]
    return lines


def running_now(allocations: list[dict], live: dict) -> tuple[list[dict], list[str], list[str]]:
    """What runs for a re-plan: ``allocations`` (state.json's) less the replicas whose instances
    are gone (only `pulumi up` brings them back) or stalled (their groups find no capacity); a unit
    left with none is dropped. Returns it, lines that force the move, and lines on what groups and
    SkyServe are replacing by themselves (no move: they heal)."""
    units = live.get("units") or {}
    out, forced, notes = [], [], []
    for raw in allocations:
        a = allocation_of(raw)
        unit = a.deployment_unit
        u = units.get(unit) or {}
        if u.get("replacing") and not u.get("stalled"):
            notes.append(f"{unit}: {u['live']} of {u['desired']} replica(s) live; the "
                         f"{'SkyServe service' if u['path'] == 'skypilot' else 'group'} is replacing "
                         f"{u['replacing']} instance(s) by itself")
        if u.get("live") is None:
            out.append(raw)
            continue
        lost = min(a.count, _replicas(u.get("lost") or 0, u["nodes"]))
        stalled = min(a.count - lost, _replicas(u.get("stalled") or 0, u["nodes"]))
        if lost:
            forced.append(f"{unit}: {u['lost']} instance(s) gone (preempted or deleted); {lost} replica(s) to restore")
        if stalled:
            forced.append(f"{unit}: its groups have lacked {u['stalled']} instance(s) since {u['short_since']} "
                          f"(no capacity?); {stalled} replica(s) planned elsewhere")
        count = a.count - lost - stalled
        if count == a.count:
            out.append(raw)
        elif count > 0:
            out.append(dict(raw, count=count, instances=count * a.nodes_per_replica,
                            cost_usd_per_hour=round(a.cost_usd_per_hour * count / a.count, 4)))
    return out, forced, notes
