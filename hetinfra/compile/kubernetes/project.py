"""The Pulumi project of deploy.target kubernetes, ``OUT/pulumi/kubernetes/``: the VM projects' layout
(hetinfra.compile.pulumi_project: Pulumi.yaml with the file backend ./state, a stack config merged on
re-plan, a copy of plan.json) whose program is hetinfra.stacks.kubernetes. Secrets are set with
``pulumi config set --secret hetinfra:apiKey ...`` (hfToken, gatewayApiKey likewise), never here."""

from __future__ import annotations

import json
from pathlib import Path

from hetinfra.document import Plan
from hetinfra.compile.pulumi_project import pulumi_yaml, read_stack_config, requirements, stack_config
from hetinfra.fileio import atomic_write_text

__all__ = ["write_kube_project"]

PROJECT = "kubernetes"
MAIN_PY = "from hetinfra.stacks.kubernetes import main\nmain()\n"
PULUMI_KUBERNETES = "pulumi-kubernetes==4.34.2"


def write_kube_project(out: Path, plan: dict) -> Path:
    doc = Plan.parse(plan)  # the project files read the typed plan; plan.json is written as the dict is
    d = out / "pulumi" / PROJECT
    (d / "state").mkdir(parents=True, exist_ok=True)
    cfg_path = d / f"Pulumi.{doc.deploy.stack}.yaml"
    existing = read_stack_config(cfg_path)
    atomic_write_text(d / "plan.json", json.dumps(plan, indent=2) + "\n")
    atomic_write_text(d / "__main__.py", MAIN_PY)
    atomic_write_text(d / "requirements.txt", requirements() + PULUMI_KUBERNETES + "\n")
    atomic_write_text(cfg_path, stack_config(doc, PROJECT, existing))
    atomic_write_text(d / "Pulumi.yaml", pulumi_yaml(doc, PROJECT))
    return d
