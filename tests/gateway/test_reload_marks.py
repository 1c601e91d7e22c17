"""The gateway reloads a source whose contents changed though its mtime did not (Gateway._source_marks: mtime,
size and inode). A file rewritten within one tick of the clock the file system stamps with (a `cp` over
plan.json that the gateway read half-way: its failed reload kept that mtime, and the rest landed in the same
tick), or replaced by a copy that keeps its time (`cp -p`, `rsync -t` through a temporary name), kept the same
mtime, which was all the gateway compared: it served the old table until the next change or a SIGHUP."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.gateway.server import GatewayConfig, create_app
from tests.gateway.conftest import CLIENT_KEY, write_out

SOURCES = ("plan.json", "router/weights.json")


def _rewrite(path: Path, how: str, pad: int) -> None:
    """New bytes at ``path`` (the same JSON, ``pad`` more spaces), its mtime set back to the old one."""
    before = path.stat()
    text = path.read_text() + " " * pad
    if how == "in place":
        path.write_text(text)  # truncated and written again, as cp and editors that write in place do
    else:  # a copy renamed over it, keeping its time
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(path.read_text())
        os.replace(tmp, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


async def _reloads_after(out: Path, change) -> int:
    app = create_app(GatewayConfig(str(out), client_keys={CLIENT_KEY: "tests"}, health_interval_s=3600,
                                   reload_interval_s=0.02))
    gw = app.state.gateway
    calls: list[int] = []
    gw.reload = lambda: calls.append(1) or True
    await gw.start()
    try:
        await asyncio.sleep(0.1)
        calls.clear()
        change()
        for _ in range(25):
            await asyncio.sleep(0.02)
            if calls:
                break
    finally:
        await gw.stop()
    return len(calls)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from(SOURCES), how=st.sampled_from(["in place", "renamed over"]), pad=st.integers(1, 64))
def test_property_a_source_changed_within_its_mtime_is_reloaded(tmp_path_factory, source, how, pad):
    out = write_out(tmp_path_factory.mktemp("reload") / "out")
    assert asyncio.run(_reloads_after(out, lambda: _rewrite(out / source, how, pad))) >= 1


def test_an_unchanged_source_is_not_reloaded(tmp_path):
    out = write_out(tmp_path / "out")
    assert asyncio.run(_reloads_after(out, lambda: None)) == 0
