"""The spec's file fields (hetinfra.spec.files, found by their type): a path that can never be read is
exit 2 at the field's line when the spec is loaded, in every file field. deploy.gateway.tls_cert and
tls_key were read only by `apply` (a loop of links refused after `plan` wrote OUT); the profiles,
offers, dataset and architecture readers named the file, not the spec line; ``~nobody/x`` was a
RuntimeError traceback where pathlib expanded it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.spec.load import load_spec

REPO = Path(__file__).resolve().parents[2]
CHAT = (REPO / "services/chat.yaml").read_text()

#: field -> (spec text with {} where the path goes, the field's name in errors)
FIELDS = {
    "tls_cert": ("deploy:\n  gateway:\n    enabled: true\n    tls_cert: '{}'\n    tls_key: k.pem\n", "deploy.gateway.tls_cert"),
    "tls_key": ("deploy:\n  gateway:\n    enabled: true\n    tls_cert: c.pem\n    tls_key: '{}'\n", "deploy.gateway.tls_key"),
    "kubeconfig": ("deploy:\n  kubernetes:\n    kubeconfig: '{}'\n", "deploy.kubernetes.kubeconfig"),
    "profiles": ("profiles: ['{}']\n", "profiles[0]"),
    "offers": ("offers: ['{}']\n", "offers[0]"),
}
#: what a bad path is, made in the folder: (path text, the words of its error)
BAD = {
    "loop": ("loop", "symbolic links"),
    "folder": ("dir", "a folder"),
    "FIFO": ("fifo", "a FIFO"),
    "device": ("/dev/null", "a device"),
    "no user": ("~nosuchuser9/x.pem", "no user"),
    "long name": ("x" * 300, "File name too long"),
    "link to a folder": ("dirlink", "a folder"),
}


def _folder(tmp: Path) -> None:
    if not (tmp / "dir").exists():
        (tmp / "dir").mkdir()
        os.mkfifo(tmp / "fifo")
        os.symlink("loop2", tmp / "loop")
        os.symlink("loop", tmp / "loop2")
        os.symlink("dir", tmp / "dirlink")


@settings(max_examples=35, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(sorted(FIELDS)), bad=st.sampled_from(sorted(BAD)))
def test_a_path_that_can_never_be_read_is_refused_at_its_line(field, bad, tmp_path):
    assume(not (field == "kubeconfig" and bad == "no user"))  # '~' there is refused as a shell character
    _folder(tmp_path)
    text, name = FIELDS[field]
    path, words = BAD[bad]
    spec = tmp_path / "s.yaml"
    spec.write_text(CHAT + text.format(path))
    cwd = os.getcwd()
    os.chdir(tmp_path)  # apply's files are relative to the folder it runs in: here the spec's
    try:
        with pytest.raises(InvalidInputError) as err:
            load_spec(spec)
    finally:
        os.chdir(cwd)
    msg = err.value.message
    assert msg.startswith(f"{spec}:") and name in msg and words in msg, msg
    assert err.value.exit_code == 2 and len(msg.splitlines()) <= 2


def test_a_readable_or_missing_file_passes(tmp_path):
    """A file apply reads may exist only on the deploying machine: a path not there passes the load."""
    (tmp_path / "c.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    spec = tmp_path / "s.yaml"
    spec.write_text(CHAT + FIELDS["tls_cert"][0].format("c.pem"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert load_spec(spec)[0].deploy.gateway.tls_cert == "c.pem"
    finally:
        os.chdir(cwd)


def test_every_file_field_of_the_spec_is_found():
    """The walker finds the fields by their type: the spec's models declare these file fields, and no
    other (a new one is checked without being listed)."""
    from hetinfra.spec.files import file_fields
    from hetinfra.spec.load import parse_spec_text

    text = CHAT.replace("    model: llama-3.1-8b\n", "    architecture: cfg.json\n") + \
        "profiles: [p.csv]\noffers: [o.csv]\n" + \
        "deploy:\n  gateway: {enabled: true, tls_cert: c.pem, tls_key: k.pem}\n  kubernetes: {kubeconfig: kc}\n"
    found = {".".join(str(p) for p in loc): (value, base) for loc, value, base in file_fields(parse_spec_text(text))}
    assert found == {"models.0.architecture": ("cfg.json", "spec"), "profiles.0": ("p.csv", "spec"),
                     "offers.0": ("o.csv", "spec"), "deploy.gateway.tls_cert": ("c.pem", "cwd"),
                     "deploy.gateway.tls_key": ("k.pem", "cwd"), "deploy.kubernetes.kubeconfig": ("kc", "cwd")}
