"""Which intervals of a model's rate series the demand log covers in full.

A log is read while it is written (cron runs ``replan`` at any minute), so its last interval is
nearly always cut short, and a log that starts (or a rotation that dropped its oldest rows) mid-
interval cuts its first one. Such an interval's count is of a fraction of its seconds: read as a
rate over the whole interval it looks like a collapse (20 s of a 300 s interval reads as 7% of the
traffic), the backtest holds it out and compares with it, and a forecast error of 100% or more
blocks every removal of the run (hetinfra.replan.run).

The log covers ``[t0, t1]``: its first and last row, of any model (while any model is logged, the
log is being written, so a model's silence there is zero demand). An interval ``[s, s + I)`` is
covered ``(min(t1, s + I) - max(t0, s)) / I``; one covered less than :data:`FULL` is left out of the
series (so of the forecast, its backtest and the origins' series), and a note says which and why.
Only a model's first and last interval can be partly covered: the others lie between two of its
requests. FULL is below 1 because a log's first row comes a little after its interval's start even
when nothing is missing (at 4 req/s, 0.25 s on average); an interval kept at 90% coverage reads at
most 10% low, where the cut one read anything down to 0.
"""

from __future__ import annotations

from datetime import datetime, timezone

FULL = 0.9

__all__ = ["FULL", "covered_range"]


def _when(start: int) -> str:
    return datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def covered_range(log, first_idx: int, n: int, interval_s: int) -> tuple[int, int, list[str]]:
    """``(lo, hi, notes)``: the model's intervals ``first_idx + lo .. first_idx + hi - 1`` (of ``n``,
    numbered in multiples of ``interval_s`` since the epoch) are those the log covers in full. When
    none is, all ``n`` are kept (nothing else to forecast from) and a note says so."""
    t0, t1 = float(log.timestamps[0]), float(log.timestamps[-1])

    def share(k: int) -> float:
        s = (first_idx + k) * interval_s
        return max(0.0, min(t1, s + interval_s) - max(t0, s)) / interval_s

    cut = sorted({k for k in (0, n - 1) if share(k) < FULL})
    lo, hi = int(0 in cut), n - int(n > 1 and n - 1 in cut)
    if lo >= hi:
        return 0, n, [f"no interval of {interval_s} s is covered {FULL:.0%} by the log: the partial one(s) are "
                      "forecast from as they are (their rates read low)"]
    notes = [f"the {'first' if k == 0 else 'last'} interval ({_when((first_idx + k) * interval_s)}, {interval_s} s) "
             f"is covered {share(k) * interval_s:.0f} s by the log (less than {FULL:.0%}): left out of the history "
             "and the backtest" for k in cut]
    return lo, hi, notes
