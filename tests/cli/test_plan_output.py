"""What `hetinfra plan` tells its user beside the summary: the line naming what it wrote to --out,
and the availability warnings (each once, and only of clouds the spec allows)."""

from __future__ import annotations

from pathlib import Path

from hetinfra.cli.plan import wrote_line

REPO = Path(__file__).resolve().parents[2]


def test_a_custom_cloud_plan_names_only_what_was_written(run_cli, tmp_path):
    """Every unit of services/custom-gpu is on the custom cloud neocloud: no SkyPilot task, no Pulumi
    project. The line said "0 SkyPilot task(s) in skypilot/, Pulumi project(s) in pulumi/{}"."""
    out = tmp_path / "cg"
    code, stdout, _ = run_cli("plan", str(REPO / "services" / "custom-gpu" / "service.yaml"), "--out", str(out))
    assert code == 0
    assert f"wrote {out}/: plan.json, router/weights.json\n" in stdout
    assert not list((out / "skypilot").glob("*.yaml")) and not (out / "pulumi").exists()


def test_the_written_line_names_each_kind_it_wrote():
    out = Path("out/chat")
    written = {"plan": [out / "plan.json"], "skypilot": [out / "skypilot" / "a.yaml", out / "skypilot" / "b.yaml"],
               "pulumi": [out / "pulumi" / "aws", out / "pulumi" / "gcp"], "router": []}
    assert wrote_line(out, written) == ("wrote out/chat/: plan.json, 2 SkyPilot task(s) in skypilot/, "
                                        "Pulumi project(s) in pulumi/{aws,gcp}, router/weights.json")
    assert wrote_line(out, {**written, "skypilot": [], "pulumi": []}) == "wrote out/chat/: plan.json, router/weights.json"
