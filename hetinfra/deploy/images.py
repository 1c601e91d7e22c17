"""Images pinned by id at ``apply`` (hetinfra.compile.images says what the stacks do with a pin).

Before each cloud's ``pulumi up`` the stack config ``hetinfra:images`` is set to the images that
earlier applies used, as recorded in state.json (``images``: cloud -> region -> role -> id); after
it, the ids the stack's ``images`` output says it used are recorded. So the first apply takes the
lookup's newest image and every later ``up`` (hetinfra's, replan's or a plain ``pulumi up`` in the
project folder: the config is in ``Pulumi.<stack>.yaml``) keeps it, whatever was released since.
``hetinfra apply --update-images`` sets no pin: that ``up`` takes the newest image, which replaces
the region's VMs (AWS: a new launch template version, used by every instance the group launches
from then on), and records it.

Azure: azure-native has no image lookup, so where an Azure region's image is not pinned yet, apply
resolves ``version: latest`` to the newest version of the image through the ARM API, with the
credentials ``plan --availability`` reads (``AZURE_ACCESS_TOKEN`` + ``AZURE_SUBSCRIPTION_ID``, else
``az``); without them the VMs get ``latest`` and apply says the image is not pinned.
"""

from __future__ import annotations

import urllib.parse

from hetinfra.compile.images import AZURE, ROLES, used
from hetinfra.csvtext import whole_number
from hetinfra.document import Plan
from hetinfra.document.state import State
from hetinfra.deploy.groups import arm_url

ARM_API_VERSION = "2024-07-01"


def _version_key(v: str) -> tuple:
    return tuple(-1 if (n := whole_number(p)) is None else n for p in v.split("."))


def azure_newest_version(region: str, role: str, env: dict, *, base_url: str | None = None) -> tuple[str | None, str]:
    """(the newest version of the role's Azure image in ``region``, or None; why not); the ARM API
    at ``base_url``, else ``HETINFRA_AZURE_ARM_URL`` or management.azure.com."""
    base_url = base_url or arm_url(env)
    from hetinfra.price_feeds.cloud_quotas import BearerClient, azure_credentials
    from hetinfra.price_feeds.http import FetchError

    token, sub = azure_credentials(env)
    if not (token and sub):
        return None, "no Azure token to read image versions with (AZURE_ACCESS_TOKEN and AZURE_SUBSCRIPTION_ID, or az login)"
    img = AZURE[role]
    q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
    url = (f"{base_url.rstrip('/')}/subscriptions/{q(sub)}/providers/Microsoft.Compute/locations/{q(region)}/publishers/"
           f"{q(img['publisher'])}/artifacttypes/vmimage/offers/{q(img['offer'])}/skus/{q(img['sku'])}/versions"
           f"?api-version={ARM_API_VERSION}")
    try:
        found = BearerClient(token, base_url, timeout_s=20.0).get_json(url)
    except FetchError as exc:
        return None, f"the ARM API did not list the image's versions ({exc.message})"
    names = [str(v.get("name")) for v in (found if isinstance(found, list) else []) if isinstance(v, dict)]
    return (max(names, key=_version_key), "") if names else (None, "the ARM API lists no version of it")


def pins_for_up(state: State, plan: Plan, cloud: str, *, update: bool, env: dict,
                notes: list[str], azure_url: str | None = None) -> dict:
    """The ``hetinfra:images`` value to set before ``cloud``'s ``up``: region -> role -> id (what
    ``state``, state.json, pinned; none with ``update``)."""
    pins = {} if update else {r: dict(roles) for r, roles in state.images.get(cloud, {}).items()}
    if cloud != "azure":
        return pins
    for region in sorted({a.region for a in plan.allocations if a.cloud == "azure"}):
        for role in ROLES if plan.deploy.gateway.enabled else ("gpu",):
            if (pins.get(region) or {}).get(role):
                continue
            version, why = azure_newest_version(region, role, env, base_url=azure_url)
            if version:
                pins.setdefault(region, {})[role] = version
            else:
                notes.append(f"azure/{region} {role} image not pinned: {why}; its VMs get version 'latest'")
    return pins


def record(state, cloud: str, outputs: dict) -> list[str]:
    """Record the images the stack used in ``state`` (hetinfra.deploy.state.DeployState); returns lines
    for the newer images it found and did not use."""
    found = outputs.get("images") or {}
    state.record_images(cloud, used(found))
    lines = []
    for region, roles in sorted(found.items()):
        for role, info in sorted((roles or {}).items()):
            latest = (info or {}).get("latest")
            if latest and latest != "latest" and latest != info.get("id"):
                lines.append(f"a newer {role} image exists for {cloud}/{region}: {latest} (running {info['id']}); "
                             "`hetinfra apply OUT --update-images` rolls it out (a replacement of those VMs)")
    return lines


def preview_lines(state: State, clouds: list[str], update: bool) -> list[str]:
    """What the preview says about images: with ``update``, each pinned image to be replaced."""
    recorded = state.images
    if not update:
        return []
    lines = []
    for cloud in clouds:
        for region, roles in sorted((recorded.get(cloud) or {}).items()):
            for role, image in sorted(roles.items()):
                lines.append(f"--update-images: {cloud}/{region} {role} image {image} -> the newest at `up`; "
                             "a newer one replaces the VMs that use it")
    return lines or ["--update-images: no image is pinned yet; `up` takes the newest"]
