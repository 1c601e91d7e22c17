"""Every path flag or argument that names a file to read (hetinfra.cli.common.UserPath with exists=True
and no folder) takes a regular file or a link to one, found while the command line is parsed: `gateway
--tls-cert FIFO` hung before serving (OpenSSL opens the file itself and waited for a writer), and
/dev/zero was read as a certificate. The flags are found by their type, so a new one is held to it too."""

from __future__ import annotations

import os
import socket

import click
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hetinfra.cli import cli
from hetinfra.cli.common import UserPath


def _file_flags() -> list[tuple[str, click.Command, click.Parameter]]:
    out = []

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, f"{path} {name}".strip())
            return
        for p in cmd.params:
            if isinstance(p.type, UserPath) and p.type.exists and not p.type.dir_okay:
                out.append((f"{path} {p.opts[0]}", cmd, p))

    walk(cli, "")
    return out


FLAGS = _file_flags()


def test_the_file_flags_are_found():
    assert {"gateway --tls-cert", "gateway --tls-key", "plan --caps", "replan --demand-log"} <= {f for f, _, _ in FLAGS}


def _special(tmp, kind: str) -> str:
    if kind == "FIFO" and not (tmp / "fifo").exists():
        os.mkfifo(tmp / "fifo")
    if kind == "socket" and not (tmp / "sock").exists():
        socket.socket(socket.AF_UNIX).bind(str(tmp / "sock"))
    if kind == "link to a FIFO" and not (tmp / "link").exists():
        _special(tmp, "FIFO")
        os.symlink("fifo", tmp / "link")
    return {"FIFO": str(tmp / "fifo"), "socket": str(tmp / "sock"), "device": "/dev/zero",
            "link to a FIFO": str(tmp / "link")}[kind]


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(range(len(FLAGS))), kind=st.sampled_from(["FIFO", "socket", "device", "link to a FIFO"]))
def test_a_file_flag_refuses_what_is_not_a_regular_file(flag, kind, tmp_path):
    name, cmd, param = FLAGS[flag]
    path = _special(tmp_path, kind)
    args = [param.opts[0], path] if param.param_type_name == "option" else [path]
    for other in cmd.params:  # the other required ones, after it: it is converted first
        if other is not param and other.required:
            args += ([other.opts[0]] if other.param_type_name == "option" else []) + [str(tmp_path)]
    with pytest.raises(click.BadParameter) as err:  # parsing only: the command never runs (it would hang)
        cmd.make_context(name.split()[0], args, resilient_parsing=False)
    assert "not a regular file" in err.value.format_message(), (name, err.value.format_message())


def test_a_regular_file_passes(tmp_path):
    (tmp_path / "caps.csv").write_text("cloud,region,gpu,max_gpus\n")
    name, cmd, param = next(f for f in FLAGS if f[0] == "plan --caps")
    ctx = cmd.make_context("plan", [param.opts[0], str(tmp_path / "caps.csv"), str(tmp_path / "s.yaml")])
    assert ctx.params["caps_file"] == str(tmp_path / "caps.csv")
