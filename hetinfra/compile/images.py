"""The VM images of the generated stacks, and how they are pinned by id (no Pulumi import).

Every fleet region uses two images, by role: ``gpu`` (the fleet's VMs) and ``gateway``. Where a
lookup finds them (the newest image at the time of the lookup):

- AWS: the newest AMI of ``owner`` whose name matches ``name`` (``ec2.get_ami(most_recent=True)``);
- GCP: the newest image of ``family`` in ``project`` (``compute.get_image(family=...)``);
- Azure: the newest version of ``publisher:offer:sku`` (what ``version: latest`` means; resolved by
  ``hetinfra apply`` through the ARM API, hetinfra.deploy.images: azure-native has no lookup).

A lookup that runs at every ``pulumi up`` would move the fleet to each new image release on the
next up. So the images are **pinned**: the stack config ``hetinfra:images`` (a JSON object
``{"<region>": {"gpu": "<id>", "gateway": "<id>"}}``, :data:`CONFIG_KEY`) names the image of each
role, and the program uses a pinned id whatever the lookup finds; the lookup still runs, and the
stack exports both (``images``: ``{"<region>": {"<role>": {"id": used, "latest": found}}}``) so
``hetinfra apply`` can say when a newer image exists. ``hetinfra apply`` records the images used in
state.json (``images``) and sets the config from it before every ``up``; ``apply --update-images``
sets no pin, so that ``up`` takes the lookup's newest image.
"""

from __future__ import annotations

from hetinfra import facts

CONFIG_KEY = "hetinfra:images"
ROLES = ("gpu", "gateway")

#: the image lookups per cloud and role (the registry: hetinfra.facts)
AWS, GCP, AZURE = (c.images for c in (facts.AWS, facts.GCP, facts.AZURE))


def pinned(pins: dict | None, region: str, role: str) -> str | None:
    """The image id pinned for ``role`` in ``region`` by the ``hetinfra:images`` config, or None."""
    value = ((pins or {}).get(region) or {}).get(role)
    return str(value) if value else None


def used(images_output: dict | None) -> dict[str, dict[str, str]]:
    """The ids a stack's ``images`` output says were used: region -> role -> id (what to pin)."""
    return {region: {role: str(info["id"]) for role, info in (roles or {}).items() if info and info.get("id")
                     and info["id"] != "latest"}
            for region, roles in (images_output or {}).items()}
