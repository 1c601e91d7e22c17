"""Outputs of a simulation: simulation.json (the dict ``simulate_plan`` returns), a hand-written SVG
(per model the TTFT and TPOT CDFs with their SLO lines; KV-cache occupancy and mean batch per unit) and a rich text
rendering for the terminal. Files are written atomically (temp file in the same folder + os.replace).

simulation.json keys: simulator_version, plan_version, service, seed, load, burst_cv, requests,
warmup_fraction, met; models[] (model, offered_rps, requests, warmup_requests, unrouted, slo, count,
ttft_ms / tpot_ms {count, mean, p50, p90, p95, p99, max}, throughput_rps, preempted_requests,
objective {met, ratio, ratios, attainment}, met, classes[] (the same per class), ttft_cdf_ms,
tpot_cdf_ms [[ms, fraction]]); units[] (unit, model, gpu, tp, pp, replicas (the plan's:
allocations[].count), engines (the vLLM engines simulated: replicas x engines per instance, a
prefill/decode bundle's prefill and decode engines), step_model, profile_factor, the same latency
block, utilization (busy fraction), batch {mean running sequences per engine, max (the most one engine
ran at once), max_num_seqs}, waiting
{mean, max}, kv_occupancy {mean, max},
preemptions, steps, stability {stable, tested, offered_rps, completed_rps, throughput_ratio, drift,
ttft_ms {middle, last}, preemptions, preempted_requests, repreemption, repreemption_low}: hetinfra.sim.stability). ``objective.ratio`` > 1 is the factor by which the
statistic misses its bound. Models also carry ``stable``; a judged simulation (``simulate
--replications``: hetinfra.sim.replications.judge) adds seeds, replications, confidence, method and
per model estimate, bound, ratio_bound, decision and per_replication [{seed, met, ratio, attainment}],
and per unit replications and missed_requests (its measured requests outside the model's latency
bounds, over all replications).
A spec that is not the one the plan was made from (sha256 not plan.json inputs.spec_sha256) adds
``spec_changed`` {spec_file, spec_file_sha256, plan_spec_sha256, differs}: hetinfra.sim.spec_drift.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from hetinfra.document.simulation import JudgedModel, SimRun
from hetinfra.errors import InvalidInputError, markup_escaped
from hetinfra.fileio import atomic_write_texts, dumps_strict
from hetinfra.tables import print_table

__all__ = ["write_outputs", "render_svg", "render_text", "verdict", "undecided"]


def write_outputs(doc: dict, out_dir: Path) -> tuple[Path, Path]:
    """simulation.json and simulation.svg in ``out_dir`` (made if missing); a folder that cannot be
    written is InvalidInputError (exit 2), never a traceback."""
    js, svg = out_dir / "simulation.json", out_dir / "simulation.svg"
    try:
        texts = dumps_strict(doc, indent=2) + "\n", render_svg(doc)  # both made before either is written
        # makes out_dir (and removes it again on a failure). A link there is replaced, never written through:
        # --out names a folder (by default the plan's own), whose files are ours; a link planted in a plan
        # folder (a cloned repository) had the simulation overwrite any file it named (review of round eight)
        atomic_write_texts({js: texts[0], svg: texts[1]})
    except OSError as exc:
        raise InvalidInputError(f"cannot write the simulation into {out_dir}: {exc.strerror or exc}",
                                hint="pass a folder you can write with --out") from None
    return js, svg


_W, _PH, _PW, _PAD = 900, 240, 400, 50
_COLORS = ("#1f77b4", "#d62728")


def _cdf_panel(x0: float, y0: float, cdf: list, slo: float, title: str, color: str) -> list[str]:
    """One CDF plot (x: ms, linear up to max(p99 x 1.2, SLO x 1.2); y: fraction) at (x0, y0)."""
    w, h = _PW - 2 * _PAD, _PH - 2 * _PAD
    out = [f'<text x="{x0 + _PW / 2:.0f}" y="{y0 + 20:.0f}" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<rect x="{x0 + _PAD}" y="{y0 + _PAD}" width="{w}" height="{h}" fill="none" stroke="#888"/>']
    if not cdf:
        out.append(f'<text x="{x0 + _PW / 2:.0f}" y="{y0 + _PH / 2:.0f}" text-anchor="middle">no data</text>')
        return out
    p99 = next((v for v, q in cdf if q >= 0.99), cdf[-1][0])
    xmax = max(p99 * 1.2, slo * 1.2, 1e-6)
    def px(v): return x0 + _PAD + w * min(v, xmax) / xmax
    def py(q): return y0 + _PAD + h * (1 - q)
    pts = " ".join(f"{px(v):.1f},{py(q):.1f}" for v, q in cdf)
    out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
    sx = px(slo)
    out.append(f'<line x1="{sx:.1f}" y1="{y0 + _PAD}" x2="{sx:.1f}" y2="{y0 + _PAD + h}" stroke="#2ca02c" '
               f'stroke-dasharray="5,3"/>')
    out.append(f'<text x="{sx + 3:.1f}" y="{y0 + _PAD + 12}" font-size="11" fill="#2ca02c">SLO {slo:g} ms</text>')
    for q in (0.0, 0.5, 0.9, 1.0):  # 0.99 would print over 1
        out.append(f'<text x="{x0 + _PAD - 4}" y="{py(q) + 4:.1f}" text-anchor="end" font-size="10">{q:g}</text>')
    for j in range(5):
        v = xmax * j / 4
        out.append(f'<text x="{px(v):.1f}" y="{y0 + _PAD + h + 14}" text-anchor="middle" font-size="10">{v:.0f}</text>')
    out.append(f'<text x="{x0 + _PAD + w / 2:.0f}" y="{y0 + _PAD + h + 30}" text-anchor="middle" font-size="11">ms</text>')
    return out


def render_svg(doc: dict) -> str:
    """A self-contained SVG: one row of TTFT/TPOT CDFs per model, then utilisation bars per unit."""
    parts: list[str] = []
    y = 40
    head = (f"{doc.get('service') or 'plan'}: simulated {doc['requests']} requests, load {doc['load']:g}, "
            f"burst cv {doc['burst_cv']:g}, seed {doc['seed']} - {verdict(doc)}")
    parts.append(f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(head)}</text>')
    for m in doc["models"]:
        slo = m["slo"]
        tag = f"{m['model']} ({slo['percentile']}{', attainment ' + str(slo['attainment']) if slo['attainment'] else ''}"\
              f"): {'met' if m['met'] else 'missed'}"
        parts.append(f'<text x="10" y="{y + 12}" font-size="13" font-weight="bold">{escape(tag)}</text>')
        parts += _cdf_panel(0, y + 10, m["ttft_cdf_ms"], slo["ttft_ms"], "TTFT CDF", _COLORS[0])
        parts += _cdf_panel(_PW + 50, y + 10, m["tpot_cdf_ms"], slo["tpot_ms"], "TPOT CDF", _COLORS[1])
        y += _PH + 30
    parts.append(f'<text x="10" y="{y + 14}" font-size="13" font-weight="bold">KV cache occupancy per unit '
                 f'(bar: mean, tick: max; text: mean running sequences per replica)</text>')
    y += 26
    bar_w = 300
    for u in doc["units"]:
        kv = u.get("kv_occupancy") or {}
        mean, peak = (max(0.0, min(1.0, kv.get(k) or 0.0)) for k in ("mean", "max"))
        ok = u["objective"]["met"]
        batch = (u.get("batch") or {}).get("mean")
        parts.append(f'<text x="10" y="{y + 13}" font-size="11">{escape(u["unit"])} x{u["replicas"]}</text>')
        parts.append(f'<rect x="470" y="{y}" width="{bar_w}" height="16" fill="#eee" stroke="#999"/>')
        parts.append(f'<rect x="470" y="{y}" width="{bar_w * mean:.1f}" height="16" '
                     f'fill="{"#2ca02c" if ok else "#d62728"}"/>')
        parts.append(f'<line x1="{470 + bar_w * peak:.1f}" y1="{y - 2}" x2="{470 + bar_w * peak:.1f}" y2="{y + 18}" '
                     f'stroke="#333" stroke-width="2"/>')
        parts.append(f'<text x="{470 + bar_w + 6}" y="{y + 13}" font-size="11">{mean:.0%} / {peak:.0%}'
                     + ("" if batch is None else f", batch {batch:.1f}")
                     + ("" if ok else " - miss x" + format(u["objective"]["ratio"] or 0, ".2f")) + '</text>')
        y += 22
    height = y + 20
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}" '
            f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(parts) + "\n</svg>\n")


def _ms(v) -> str:
    return "-" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def render_text(doc: dict, console) -> None:
    """Tables for the terminal (``console`` is a rich Console)."""
    from rich.table import Table

    console.print(f"[bold]{markup_escaped(doc.get('service') or 'plan')}[/]: {doc['requests']} simulated requests, load "
                  f"{doc['load']:g}, burst cv {doc['burst_cv']:g}, seed {doc['seed']} (first "
                  f"{doc['warmup_fraction']:.0%} left out as warm-up) - " + _verdict_markup(doc))
    for e in SimRun.of(doc).models:  # a plan that leaves demand unserved (unmet_rps): its figures are of a part
        if e.unrouted:
            console.print(f"[yellow]{markup_escaped(e.model)}: {e.unrouted:,} of {e.requests:,} requests unrouted "
                          "(demand the plan leaves unserved: unmet_rps); the figures below are of the "
                          f"{e.requests - e.unrouted:,} it serves[/]")
    for m in doc["models"]:
        slo, key = m["slo"], m["slo"]["percentile"]
        t = Table(title=f"{markup_escaped(m['model'])}: {key} TTFT <= {slo['ttft_ms']:g} ms, TPOT <= {slo['tpot_ms']:g} ms"
                        + (f", attainment >= {slo['attainment']:g}" if slo["attainment"] else ""), title_justify="left")
        for col in ("class", "n", "TTFT p50", "p99", "TPOT p50", "p99", "attain", "req/s", "met"):
            t.add_column(col, justify="left" if col == "class" else "right")
        judged = JudgedModel.of(m)
        for c in m["classes"] + [_all_row(m, judged)]:
            o = c["objective"]
            t.add_row(markup_escaped(c["class"]), str(c["count"]), _ms(c["ttft_ms"]["p50"]), _ms(c["ttft_ms"]["p99"]),
                      _ms(c["tpot_ms"]["p50"]), _ms(c["tpot_ms"]["p99"]),
                      "-" if o["attainment"] is None else f"{o['attainment']:.3f}",
                      "-" if c["throughput_rps"] is None else f"{c['throughput_rps']:.2f}",
                      "-" if not c["count"] else _met(o["met"], o["ratio"]))
        if judged is not None:
            t.add_row(*_bound_row(judged))
        print_table(console, t)
    t = Table(title="units", title_justify="left", caption=_units_caption(doc), caption_justify="left")
    for col in ("unit", "repl", "TTFT p99", "TPOT p99", "batch", "queue mean/max", "KV mean/max", "preempt", "met"):
        # a unit id wraps, never cut: two units of one type differ only at its end (purchase option)
        t.add_column(col, justify="left" if col == "unit" else "right", overflow="fold" if col == "unit" else "ellipsis")
    for u in doc["units"]:
        o = u["objective"]
        t.add_row(markup_escaped(u["unit"]) + ("" if u["step_model"] == "estimator" else " (profile-scaled)"), _replicas(u),
                  _ms(u["ttft_ms"]["p99"]), _ms(u["tpot_ms"]["p99"]), f"{(u.get('batch') or {}).get('mean', 0):.1f}",
                  f"{u['waiting']['mean']:.1f}/{u['waiting']['max']}",
                  f"{u['kv_occupancy']['mean']:.0%}/{u['kv_occupancy']['max']:.0%}", str(u["preemptions"]),
                  "-" if not u["count"] else ("[green]yes[/]" if o["met"] else f"[red]{_unstable(u)}x{o['ratio']:.3f}[/]"))
    print_table(console, t)


def _units_caption(doc: dict) -> str | None:
    """What a judged simulation's unit rows show: the first seed's run (hetinfra.sim.replications.
    _unit_entry keeps it), and a met that is the unit's verdict over the replications, not that run's."""
    run = SimRun.of(doc)
    runs = max((j.replications for j in map(JudgedModel.of, (e.raw for e in run.models)) if j), default=0)
    return None if runs < 2 else (f"TTFT/TPOT p99: seed {run.seed}'s run; met: judged over {runs} replications "
                                  "(the bound on their mean)")


def _met(met: bool, ratio) -> str:
    return "[green]yes[/]" if met else "[red]no[/]" if ratio is None else f"[red]x{ratio:.3f}[/]"


def _all_row(m: dict, judged: JudgedModel | None) -> dict:
    """A model's "all" row, judged on the figures it shows. A judged model's figures are its worst
    replication's, and its objective the bound's (the row said p99 TPOT 116 ms against 120 and
    'x1.325', the 95% bound's 159 / 120): the row takes that replication's own verdict, and the
    bound gets a row of its own (:func:`_bound_row`)."""
    if judged is None:
        return dict(m, **{"class": "all"})
    own = {"met": judged.worst_met, "ratio": judged.worst_ratio, "attainment": judged.worst_attainment}
    return dict(m, **{"class": f"all (seed {judged.worst_seed}, worst)", "objective": own})


def _bound_row(judged: JudgedModel) -> list[str]:
    """The row of what a judged model's verdict reads: the pessimistic bound of its objective's
    percentile (under the p99 columns whatever it is) and of its attainment, and the decision."""
    ratio, low = judged.ratio, judged.bound_attainment
    word = (f"[yellow]x{ratio:.3f} undecided[/]" if judged.decision == "undecided"
            else _met(judged.decision == "met", ratio))
    return [f"{judged.confidence:.0%} bound ({judged.percentile})", f"{judged.replications} runs", "-",
            _ms(judged.bound_ttft_ms), "-", _ms(judged.bound_tpot_ms), "-" if low is None else f"{low:.3f}", "-", word]


def verdict(doc: dict) -> str:
    """The simulation's verdict in words, as its models' decisions give it: "objectives met",
    "objectives not shown met (N undecided)" where every model not met is undecided (its bound
    straddles the objective: more replications decide it), else "objectives missed"."""
    if doc["met"]:
        return "objectives met"
    pending = undecided(doc)
    if pending and all(e.met or e.model in pending for e in SimRun.of(doc).models):
        return f"objectives not shown met ({len(pending)} undecided)"
    return "objectives missed"


def undecided(doc: dict) -> list[str]:
    """The models of a judged simulation whose decision is undecided and whose units were stable."""
    return [e.model for e in SimRun.of(doc).models if e.raw.get("decision") == "undecided" and e.stable]


def _verdict_markup(doc: dict) -> str:
    words = verdict(doc)
    colour = "green" if words == "objectives met" else "yellow" if "undecided" in words else "red"
    return f"[{colour}]{words}[/]"


def _replicas(unit: dict) -> str:
    """The plan's replicas of a unit, and its simulated engines where they are more (several engines
    per instance, a prefill/decode bundle); a simulation.json written before ``engines`` existed
    counted engines under ``replicas``."""
    n, engines = unit["replicas"], unit.get("engines", unit["replicas"])
    return str(n) if engines == n else f"{n} ({engines} engines)"


def _unstable(unit: dict) -> str:
    """"unstable " where a unit's stability record says so (a judged one: in some replication)."""
    return "" if (unit.get("stability") or {}).get("stable", True) else "unstable "
