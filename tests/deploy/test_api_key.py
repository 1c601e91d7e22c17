"""VLLM_API_KEY is read once for every deploy path (pulumi_driver.secrets_from_env) and by the
gateway, by the rule of the gateway's client keys (hetinfra.facts.key_problem): a key that survives
the VMs' env file and an HTTP header as it is, or exit 2. A key holding a newline was dropped from
the VMs' secrets.env (boot.py keeps one-line values only), and vLLM started without a key."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from hetinfra.deploy.pulumi_driver import secrets_from_env
from hetinfra.errors import InvalidInputError

keys = st.text(min_size=1, max_size=20) | st.from_regex(r"\A[0-9a-f]{48}\Z") | st.sampled_from(
    ["abc\n", "abc\r", "a b", "clé", "k\u200b", "x" * 257, "\t"])


@given(key=keys)
def test_a_key_is_one_header_and_env_file_value_or_refused(key):
    try:
        got = secrets_from_env({"VLLM_API_KEY": key})["hetinfra:apiKey"]
    except InvalidInputError as exc:
        assert exc.message.startswith("VLLM_API_KEY has ") and key not in exc.message.replace("VLLM_API_KEY", "")
        return
    assert got == key and key.isascii() and key.isprintable() and not any(c.isspace() for c in key)
    assert len(key) <= 256


def test_the_gateway_refuses_such_a_backend_key(monkeypatch):
    from hetinfra.cli.gateway import _backend_key

    monkeypatch.setenv("VLLM_API_KEY", "abc\ndef")
    with pytest.raises(InvalidInputError, match="U\\+000A"):
        _backend_key()
    monkeypatch.setenv("VLLM_API_KEY", "abc")
    assert _backend_key() == "abc"


@given(token=keys)
def test_an_hf_token_is_one_env_file_value_or_refused(token):
    try:
        got = secrets_from_env({"VLLM_API_KEY": "k", "HF_TOKEN": token}).get("hetinfra:hfToken")
    except InvalidInputError as exc:
        assert exc.message.startswith("HF_TOKEN has ")
        return
    assert got == token and token.isascii() and token.isprintable() and not any(c.isspace() for c in token)
