"""`gateway --tokenizer MODEL=PATH` is checked before serving: a path no file can have (Path.is_dir
raised on a 300-byte name), a file the tokenizers package cannot read (its own exception) and a
model the plan does not serve (loaded, never used: that model's prompts were counted by the
approximation, silently) are each exit 2 naming the flag. The tokenizers package is optional (not
installed here): a stand-in with its interface reads a file holding "tokenizer" and fails otherwise."""

from __future__ import annotations

import sys
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from tests.gateway.conftest import MODEL, write_out


class _Tokenizer:
    @staticmethod
    def from_file(path: str):
        with open(path, "rb") as fh:
            if b"tokenizer" not in fh.read():
                raise Exception("data did not match any variant of untagged enum ModelWrapper at line 1 column 2")
        return _Tokenizer()


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", types.SimpleNamespace(Tokenizer=_Tokenizer))


def _gateway(out, tokenizers):
    from hetinfra.gateway.server import Gateway, GatewayConfig

    return Gateway(GatewayConfig(source=str(out), tokenizers=tokenizers))


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(["long", "garbage", "model"]), data=st.binary(max_size=64), n=st.integers(256, 400))
def test_a_tokenizer_the_gateway_cannot_use_is_refused_naming_the_flag(tmp_path, stand_in, case, data, n):
    out = write_out(tmp_path / "out")
    good = tmp_path / "tokenizer.json"
    good.write_text('{"tokenizer": 1}')
    bad = tmp_path / "garbage.json"
    bad.write_bytes(data.replace(b"tokenizer", b""))
    tokenizers = {"long": {MODEL: "x" * n}, "garbage": {MODEL: str(bad)}, "model": {MODEL + "-typo": str(good)}}[case]
    with pytest.raises(InvalidInputError) as refused:
        _gateway(out, tokenizers)
    assert refused.value.message.startswith("--tokenizer")


def test_a_tokenizer_of_a_served_model_loads(tmp_path, stand_in):
    out = write_out(tmp_path / "out")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text('{"tokenizer": 1}')
    assert _gateway(out, {MODEL: str(tmp_path / "tok")}).counter.exact(MODEL)
