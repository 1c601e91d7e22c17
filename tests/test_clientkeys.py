"""hetinfra.clientkeys: every key HETINFRA_API_KEY yields is one an HTTP client can send, so the
gateway that reads it and the clients that send it agree; anything else is exit 2 naming the entry,
never the key."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.clientkeys import first_client_key, parse_client_keys
from hetinfra.gateway.steps import client_name
from tests.fuzz.conftest import budget

entry = st.one_of(st.text(max_size=12), st.from_regex(r"[a-z]{1,5}:[!-~]{1,10}", fullmatch=True),
                  st.sampled_from(["alice:", "clé", "k1\u200b", "k1\r", ":k1", "a:b:c", "k 1", "\u00a0k1"]))


def _sent_by_curl(key: str) -> dict[str, str]:
    """The header a client sends (UTF-8 bytes) as an ASGI server hands it over (decoded as Latin-1)."""
    return {"authorization": ("Bearer " + key).encode("utf-8").decode("latin-1")}


@budget(80)
@given(st.lists(entry, max_size=4))
def test_property_every_key_read_authenticates_its_client_over_http(entries):
    value = ",".join(entries)
    try:
        keys = parse_client_keys(value)
    except InvalidInputError as exc:  # the message names the entry and its client, never the key
        msg = str(exc)
        n = int(msg.split("entry ", 1)[1].split(" ", 1)[0])
        refused = value.split(",")[n - 1]
        key = (refused.partition(":")[2] if ":" in refused else refused).strip()
        why = re.sub(r"client '[^']*'", "", msg.split("') ", 1)[1])  # client names are not keys
        assert len(key) < 4 or key not in why, msg
        return
    for key, name in keys.items():
        assert client_name(keys, _sent_by_curl(key)) == name, (value, key)


@pytest.mark.parametrize("value, fragment", [
    ("alice:", "entry 1 (client 'alice') has an empty key"),
    ("ok,clé", "entry 2 (client 'client1') has a key holding the character U+00E9"),
    ("k1\u200b", "U+200B"),
    ("a:k1,b:k1", "entry 2 (client 'b') has the key of client 'a'"),
    ("a:" + "x" * 300, "longer than 256"),
])
def test_a_key_no_client_could_send_is_refused_naming_the_entry(value, fragment):
    with pytest.raises(InvalidInputError, match=re.escape(fragment)):
        parse_client_keys(value)


def test_keys_and_names_are_read_as_before():
    assert parse_client_keys(" alice:k1 , k2,\r\n") == {"k1": "alice", "k2": "client1"}
    assert parse_client_keys("a:b:c") == {"b:c": "a"} and first_client_key(None) is None
