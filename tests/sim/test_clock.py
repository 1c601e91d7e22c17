"""A replica's window of steps (hetinfra.sim.clock.Window): its span, and where an arrival cuts it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hetinfra.sim.clock import Window


@settings(max_examples=100, deadline=None)
@given(d0=st.floats(1e-4, 1.0), a=st.floats(0.0, 1e-2), k=st.integers(2, 5000), frac=st.floats(0.0, 1.0))
def test_a_cut_ends_the_window_at_the_step_in_progress(d0, a, k, frac):
    win = Window()
    win.open(10.0, d0, a, k, None, 10.0 + k * d0 + a * k * (k - 1) * 0.5)
    t = 10.0 + frac * win.span(k)
    h = t - win.start  # what cut measures
    j = win.steps_until(h)
    assert j >= 1 and win.span(j) >= h and (j == 1 or win.span(j - 1) < h)
    version = win.version
    win.cut(t)
    assert win.k == min(j, k)
    assert (win.version != version) == (j < k)
    assert win.busy_until == 10.0 + win.span(win.k) or win.k == k


def test_idle_and_wake():
    win = Window()
    win.wake(3.0)
    assert (win.busy_until, win.k, win.chunks) == (3.0, 0, [])
    win.idle()
    assert win.busy_until is None and win.version == 2
