"""apply's and destroy's steps are typed (hetinfra.deploy.steps); their ids, which state.json and the
--json error record and a resumed run matches, are the strings they have always been."""

from __future__ import annotations

import ast
from pathlib import Path

from hetinfra.deploy.steps import PulumiDestroy, PulumiUp, SkyDown, SkyUp

REPO = Path(__file__).resolve().parents[2]


def test_step_ids_are_the_published_strings():
    assert PulumiUp("aws").id == "pulumi:aws" == PulumiDestroy("aws").id
    assert PulumiUp("kubernetes").id == "pulumi:kubernetes"
    assert SkyUp("chat-8b-aws-us-east-1-g6e-xlarge").id == "skypilot:up:chat-8b-aws-us-east-1-g6e-xlarge"
    assert SkyDown(("a", "b")).id == "skypilot:down:a,b"


def test_no_step_is_parsed_back_from_its_id():
    """The runners dispatch on the step's type: no module splits an id string to find what to do."""
    for rel in ("hetinfra/deploy/apply.py", "hetinfra/deploy/destroy.py", "hetinfra/deploy/kube.py"):
        tree = ast.parse((REPO / rel).read_text())
        parsed = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "split")
                  and "step" in ast.unparse(node.func.value)]
        assert not parsed, f"{rel} parses step ids: {parsed}"
