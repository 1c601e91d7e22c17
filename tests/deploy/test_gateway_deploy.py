"""`hetinfra apply` prints the one endpoint (the stacks' `gateways` output, kept in state.json) and
hands the gateway its secrets; `hetinfra status` shows each gateway's per-unit health and live
weights from its /admin/weights (a loopback stand-in here), and a clear line when unreachable."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import QuietHandler, loopback_server
from tests.deploy.test_apply_pulumi import _by_project, _plan

WEIGHTS = {"service": "multi", "models": {"chat-8b": {"in<=250,out<=100": {"unit-a": 0.75, "unit-b": 0.25}}},
           "units": {"unit-a": [{"url": "http://10.42.0.5:8000", "healthy": True, "outstanding": 3}],
                     "unit-b": [{"url": "http://10.42.0.6:8000", "healthy": False, "outstanding": 0},
                                {"url": "http://10.42.0.7:8000", "healthy": False, "outstanding": 0}]}}


@pytest.fixture
def admin_server():
    """A stand-in for the gateway's /admin/weights on 127.0.0.1 (client key ck-1); stopped by the test."""
    class Handler(QuietHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path == "/admin/weights" and self.headers.get("authorization") == "Bearer ck-1"
            body = json.dumps(WEIGHTS if ok else {"error": {"message": "no"}}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with loopback_server(Handler) as (server, url):
        yield server, url


def enable_gateway(out, **extra) -> dict:
    plan = _plan(out)
    plan["deploy"]["gateway"] = {"enabled": True, "port": 8443, **extra}
    (out / "plan.json").write_text(json.dumps(plan, indent=2))
    return plan


def test_apply_prints_the_endpoint_and_status_shows_health_and_weights(fake_pulumi, pulumi_stacks, cloud_env, planned_out,
                                                                       run_cli, admin_server, monkeypatch, tmp_path):
    server, base = admin_server
    cert, key = tmp_path / "gw.crt", tmp_path / "gw.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\nCERT\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nKEY\n")
    plan = enable_gateway(planned_out, tls_cert=str(cert), tls_key=str(key))
    monkeypatch.setenv("FAKE_PULUMI_GATEWAY", base)
    monkeypatch.setenv("HETINFRA_API_KEY", "ops:ck-1")
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 0, stderr + stdout
    fleets = sorted(f"{plan['service']}-{a['cloud']}-{a['region']}" for a in plan["allocations"])
    state = json.loads((planned_out / "state.json").read_text())
    assert state["gateways"] == {f: f"{base}/v1" for f in fleets}
    if len(set(fleets)) == 1:
        assert f"Endpoint: {base}/v1" in stdout
    else:
        assert "Endpoints (one gateway per fleet region):" in stdout
        assert all(f"  {f}: {base}/v1" in stdout for f in fleets)
    # the gateway's client keys and TLS files went in as Pulumi secrets, exactly (trailing newline kept)
    for cloud in _by_project(fake_pulumi(), planned_out):
        config = pulumi_stacks()[cloud]["prod"]["config"]
        assert config["hetinfra:gatewayApiKey"] == {"secret": True, "value": "ops:ck-1"}
        assert config["hetinfra:gatewayTlsCert"] == {"secret": True, "value": cert.read_text()}
        assert config["hetinfra:gatewayTlsKey"] == {"secret": True, "value": key.read_text()}

    code, text, _ = run_cli("status", str(planned_out))
    assert code == 0
    assert f"gateway {fleets[0]} {base}/v1: 1 of 2 unit(s) healthy" in text
    assert "up   unit-a" in text and "1/1 replica(s) healthy, 3 in flight" in text
    assert "DOWN unit-b" in text and "0/2 replica(s) healthy" in text
    assert "live weights of chat-8b:" in text and "unit-a 0.75, unit-b 0.25" in text

    monkeypatch.setenv("HETINFRA_API_KEY", "wrong")
    code, text, _ = run_cli("status", str(planned_out))
    assert code == 0 and "answered 401 (set HETINFRA_API_KEY to a client key)" in text

    server.shutdown()
    server.server_close()
    code, text, _ = run_cli("status", str(planned_out))
    assert code == 0 and f"gateway {fleets[0]} {base}/v1: unreachable (" in text
    assert "unit(s) running" in text  # the rest of status is unaffected

    # destroy forgets the gateways with their stacks
    code, _, stderr = run_cli("destroy", str(planned_out), "--yes")
    assert code == 0, stderr
    assert json.loads((planned_out / "state.json").read_text())["gateways"] == {}


def test_without_a_gateway_apply_says_where_clients_go(fake_pulumi, cloud_env, planned_out, run_cli):
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 0, stderr + stdout
    assert "No gateway (deploy.gateway.enabled is false)" in stdout
    code, text, _ = run_cli("status", str(planned_out))
    assert code == 0 and "gateway " not in text


#: what a TLS file path may point at that is no PEM text: each is read by the one file reader
UNREADABLE_TLS = {
    "missing": (lambda p: None, "not found"),
    "a folder": (lambda p: p.mkdir(), "is a directory"),
    "a FIFO": (lambda p: os.mkfifo(p), "not a regular file"),
    "DER (binary)": (lambda p: p.write_bytes(b"\x30\x82\x03\xfe\x30\x82"), "not UTF-8 text"),
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE_TLS))
def test_unreadable_tls_file_stops_before_anything_runs(fake_pulumi, cloud_env, planned_out, run_cli, tmp_path, kind):
    make, words = UNREADABLE_TLS[kind]
    make(tmp_path / "cert.crt")
    (tmp_path / "cert.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    enable_gateway(planned_out, tls_cert=str(tmp_path / "cert.crt"), tls_key=str(tmp_path / "cert.key"))
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 2 and "deploy.gateway.tls_cert" in stderr and words in stderr, stderr + stdout
    assert not [c for c in fake_pulumi() if c["argv"][:1] == ["up"]]


def test_skypilot_units_get_the_gateway_launch_line_filled_in(tmp_path):
    from hetinfra.deploy.endpoints import endpoint_lines
    from hetinfra.document import Plan
    from hetinfra.deploy.state import DeployState
    from tests.plan.golden_plans import golden_allocation, golden_plan_with

    (tmp_path / "skypilot").mkdir()
    (tmp_path / "skypilot" / "chat-gateway.yaml").write_text("name: chat-gateway\n")
    running = [golden_allocation(deployment_unit=u, path="skypilot") for u in ("u1", "u2")]
    plan = golden_plan_with(running, deploy={"gateway": {"enabled": True, "port": 8443}})
    state = DeployState.of(tmp_path / "state.json", {"state_version": 1, "allocations": running, "endpoints": {
        "u1": ["http://1.2.3.4:30001"], "u2": ["http://1.2.3.5:30002"]}})
    lines = endpoint_lines(tmp_path, Plan.parse(plan), state)  # endpoint_lines takes the model
    assert "sky status --endpoint 8443 chat-gateway" in lines[0]
    assert lines[1].endswith('--env HETINFRA_ENDPOINTS="u1=http://1.2.3.4:30001 u2=http://1.2.3.5:30002"')
    assert f"sky launch -c chat-gateway {tmp_path}/skypilot/chat-gateway.yaml --secret VLLM_API_KEY" in lines[1]


#: HETINFRA_API_KEY values the gateway refuses at its start (hetinfra.clientkeys): apply refuses them first
BAD_CLIENT_KEYS = {"a space": "ops:ck 1", "an empty key": "ops:", "one key twice": "a:k1,b:k1", "not ASCII": "ops:cké"}


@pytest.mark.parametrize("kind", sorted(BAD_CLIENT_KEYS))
def test_a_key_the_gateway_would_refuse_stops_apply_before_anything_runs(fake_pulumi, cloud_env, planned_out, run_cli,
                                                                        monkeypatch, kind):
    enable_gateway(planned_out)
    monkeypatch.setenv("HETINFRA_API_KEY", BAD_CLIENT_KEYS[kind])
    code, stdout, stderr = run_cli("apply", str(planned_out), "--yes")
    assert code == 2 and "HETINFRA_API_KEY entry" in stderr, stderr + stdout
    assert not [c for c in fake_pulumi() if c["argv"][:1] == ["up"]]


def test_status_says_when_the_key_cannot_be_sent(admin_server):
    from hetinfra.deploy.destroy import gateway_status

    _, base = admin_server
    lines = gateway_status("f", base + "/v1", env={"HETINFRA_API_KEY": "ops:ck 1"})
    assert lines == [f"gateway f {base}/v1: not asked (HETINFRA_API_KEY entry 1 (client 'ops') has a key holding whitespace U+0020; "
                     "HETINFRA_API_KEY is key or name:key, comma-separated, each key printable ASCII without spaces)"]
    assert gateway_status("f", base + "/v1", env={"HETINFRA_API_KEY": " ,ops:ck-1,"})[0].endswith("1 of 2 unit(s) healthy")


@pytest.mark.parametrize("kind", sorted(BAD_CLIENT_KEYS))
def test_the_cluster_path_checks_the_keys_with_the_same_reader(kind):
    from hetinfra.deploy.kube import secrets_from_env
    from hetinfra.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="HETINFRA_API_KEY entry"):
        secrets_from_env({"VLLM_API_KEY": "vk-1", "HETINFRA_API_KEY": BAD_CLIENT_KEYS[kind]})
    env = {"VLLM_API_KEY": "vk-1", "HETINFRA_API_KEY": "ops:ck-1,"}
    assert secrets_from_env(env)["hetinfra:gatewayApiKey"] == "ops:ck-1,"
