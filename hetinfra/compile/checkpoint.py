"""Which checkpoint an allocation's engine loads: the model's own, or one of its variants'."""

from __future__ import annotations

from hetinfra.errors import InvalidInputError

__all__ = ["served_checkpoint"]


def served_checkpoint(model: dict, alloc: dict) -> dict:
    """The plan.json ``models[]`` entry ``model`` as allocation ``alloc`` serves it: with its
    variant's ``source``, ``precision``, ``model`` and ``params`` when the allocation names one."""
    name = alloc.get("variant")
    if not name:
        return model
    v = next((x for x in model.get("variants") or () if x.get("name") == name), None)
    if v is None:
        raise InvalidInputError(f"plan.json: allocation {alloc.get('deployment_unit')} names variant {name!r}, which "
                                f"model {model.get('name')} does not list", hint="re-plan instead of editing plan.json")
    return dict(model, **{k: v[k] for k in ("source", "precision", "model", "params") if k in v})
