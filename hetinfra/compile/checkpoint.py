"""Which checkpoint an allocation's engine loads: the model's own, or one of its variants'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetinfra.errors import InvalidInputError

if TYPE_CHECKING:
    from hetinfra.document import Allocation
    from hetinfra.document.sections import ModelEntry

__all__ = ["served_checkpoint"]

#: what a variant replaces in its model's entry: the checkpoint, not the served name or the objectives
CHECKPOINT_FIELDS = ("source", "precision", "model", "params")


def served_checkpoint(model: "ModelEntry", alloc: "Allocation") -> "ModelEntry":
    """The plan.json ``models[]`` entry ``model`` as allocation ``alloc`` serves it: with its
    variant's ``source``, ``precision``, ``model`` and ``params`` when the allocation names one
    (``model`` itself otherwise). A parsed Plan names only listed variants (its invariant); a pair
    taken apart from one is checked here as well."""
    if not alloc.variant:
        return model
    v = next((x for x in model.variants or () if x.name == alloc.variant), None)
    if v is None:
        raise InvalidInputError(f"plan.json: allocation {alloc.deployment_unit} names variant {alloc.variant!r}, "
                                f"which model {model.name} does not list", hint="re-plan instead of editing plan.json")
    return model.model_copy(update={k: getattr(v, k) for k in CHECKPOINT_FIELDS})
