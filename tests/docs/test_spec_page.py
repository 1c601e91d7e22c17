"""docs/reference/spec.md names every key of the service spec (the schema the pydantic models give)."""

from __future__ import annotations

import re

from hetinfra.spec.models import ServiceSpec
from tests.docs.pages import REPO


def test_the_spec_page_names_every_key():
    schema = ServiceSpec.model_json_schema()
    keys = {("ServiceSpec", key) for key in schema["properties"]}
    keys |= {(model, key) for model, body in schema["$defs"].items() for key in body.get("properties", {})}
    page = (REPO / "docs" / "reference" / "spec.md").read_text()
    missing = sorted(f"{model}.{key}" for model, key in keys if not re.search(rf"\b{re.escape(key)}\b", page))
    assert not missing, f"docs/reference/spec.md does not mention: {missing}"


def test_the_spec_page_states_each_key_once():
    """Every yaml block of the page parses, and no mapping in it names a key twice (issue 34: the
    reference showed `deploy.kubernetes` twice, and `deploy.gateway.kind`)."""
    import yaml

    from tests.docs.pages import fenced_blocks

    class Strict(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
            twice = sorted({str(k) for k in keys if keys.count(k) > 1})
            assert not twice, f"docs/reference/spec.md:{node.start_mark.line + 1}: {twice} stated twice"
            return super().construct_mapping(node, deep=deep)

    page = REPO / "docs" / "reference" / "spec.md"
    blocks = [block for block in fenced_blocks(page) if block.lang in ("yaml", "yml")]
    assert blocks
    for block in blocks:
        yaml.load("\n".join(block.lines), Loader=Strict)


def test_the_spec_page_lists_every_built_in_model_and_gpu():
    """The page's list of built-in names is the catalogs' (it lacked qwen3-235b-a22b, qwen3-30b-a3b,
    V100-32GB and H100-MEGA, all of which a spec may name)."""
    from hetinfra.catalog.gpus import GPUS
    from hetinfra.catalog.models import MODELS

    page = (REPO / "docs" / "reference" / "spec.md").read_text()
    section = page.split("## Built-in models and GPUs", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`([\w.-]+)`", section))
    missing = sorted(set(MODELS) - listed) + sorted(set(GPUS) - listed)
    assert not missing, f"docs/reference/spec.md's built-in list lacks {missing}"
