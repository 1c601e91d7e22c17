"""Preflight of ``hetinfra apply``: everything that can be known before the first step, checked
before anything is asked or changed. A failed check raises; nothing has been written then.

1. **plan.json against its model** (:func:`validate_plan`): the keys, types and invariants of
   hetinfra.document.Plan (``plan_version``, the service name, positive counts, ``instances = count x
   nodes_per_replica``, the SkyPilot task path, the ``deploy`` section's values, no shell
   metacharacter in any string that reaches a VM, a command line or a resource name, every unit's
   --max-model-len within its KV cache and covering the classes routed to it), then what needs the
   catalog: every node type (a heterogeneous bundle's roles, a mixed pipeline's stages) in the offer
   catalog with the GPU and GPU count the plan gives it, in the unit's region (exit 2).
2. **The out dir belongs to the service** (:func:`check_owner`): plan.json's ``service`` and
   ``service_id`` must equal state.json's; another service's out dir is refused without
   ``--force`` (exit 2).
3. **Each cloud's required settings** (:func:`check_cloud_settings`): a GCP project for the gcp
   stack, an SSH public key for Azure VMs (exit 2), and, where credentials let us read them, the
   clouds' GPU quotas against the planned GPUs (exit 4).
4. **Disks** (:func:`check_disks`): an explicit ``deploy.disk_gb`` must hold the model weights,
   the engine and the OS image (exit 2).

Part 2 (tools, settings, credentials, quotas) runs every check through :func:`gather`, cheapest
first, and reports every missing prerequisite with its fix and its class (configuration: exit 2,
provider: exit 4) in one run, not one per run; several exit 2 when any is configuration, else 4.

5. **Health checks from the cron host** (:func:`check_health_paths`): every new unit's health
   must be checkable from the host that runs ``replan --apply`` (through the gateway, the cloud's
   own signal or ``deploy.management_cidrs``: hetinfra.deploy.health); ``apply`` warns,
   ``replan --apply`` refuses (exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from hetinfra.compile.disk import disk_need_gb
from hetinfra.compile.pulumi_project import read_stack_config
from hetinfra.document import Allocation, Plan
from hetinfra.document.engines import length_problems
from hetinfra.document.state import State
from hetinfra.errors import HetinfraError, InvalidInputError, ProviderError, did_you_mean
from hetinfra.price_feeds.offers import KNOWN_CLOUDS

def catalog_types() -> dict[tuple[str, str], set[tuple[str, int, str]]]:
    """(cloud, instance type) -> the (GPU, GPUs per instance, region) the offer catalog sells it with:
    the embedded snapshot and the feeds' cached snapshots (a plan made with ``--feeds live`` may use
    types the snapshot lacks)."""
    from hetinfra.price_feeds.load import load_offers

    offers = list(load_offers("snapshot")[0].offers)
    try:
        offers += load_offers("cache")[0].offers
    except Exception:  # no cache, or an unreadable one: the embedded snapshot alone
        pass
    known: dict[tuple[str, str], set[tuple[str, int, str]]] = {}
    for o in offers:
        known.setdefault((o.cloud, o.instance_type), set()).add((o.gpu, o.gpu_count, o.region))
    return known


def node_types(a: Allocation) -> list[tuple[str, str, str, int | None]]:
    """(plan.json field, instance type, GPU, GPUs per instance or None) of every node type ``a`` deploys:
    a mixed pipeline's stages, else the allocation's and a heterogeneous bundle's other role's."""
    if a.stages:  # a stage's gpus is its TP, not necessarily the node's count
        return [(f"stages[{k}]", s.instance_type, s.gpu, None) for k, s in enumerate(a.stages)]
    roles = a.disaggregation.roles if a.disaggregation else []
    return [("", a.instance_type, a.gpu, a.gpus_per_instance)] + [
        (f"disaggregation.roles[{j}]", r.instance_type, r.gpu, r.gpus_per_node)
        for j, r in enumerate(roles) if r.instance_type]


def catalog_problem(a: Allocation, known: dict) -> str | None:
    """Why a node type of ``a`` is not what the catalog sells (None: every one is): an instance type
    it does not list, one it sells with another GPU or GPU count (the simulator and the planner's
    rates read the GPU; the cloud boots the instance type), or one it does not sell in the unit's
    region (the cloud would refuse the launch after apply began)."""
    for where, t, gpu, gpus in node_types(a):
        field = f"{where}.instance_type" if where else "instance_type"
        if (a.cloud, t) not in known:
            return (f"{field} {t!r} is not a {a.cloud} instance type in the offer catalog; "
                    f"{did_you_mean(str(t), sorted(x for c, x in known if c == a.cloud))}")
        regions = {r for g, n, r in known[(a.cloud, t)] if g == gpu and (gpus is None or n == gpus)}  # sold as planned
        if not regions:
            as_sold = " or ".join(f"{n} x {g}" for g, n in sorted({(g, n) for g, n, _r in known[(a.cloud, t)]}))
            return f"{field} {t!r} is sold with {as_sold}, but the plan gives it {gpus or ''}{' x ' if gpus else ''}{gpu}"
        if a.region not in regions:
            return (f"{field} {t!r} with {gpu} is not sold in region {a.region!r} in the offer catalog; sold in "
                    f"{', '.join(sorted(regions))}")
    return None


def validate_plan(doc: Plan, path: Path, *, catalog: Callable[[], dict] = catalog_types) -> Plan:
    """The plan's model (its keys, types and invariants, the engines' lengths among them:
    hetinfra.document), and every node type of a cloud apply deploys to in the offer catalog with the
    GPUs the plan gives it; InvalidInputError (exit 2) naming the first field of plan.json that is
    wrong. ``doc`` is parsed already (the model's own checks ran then); this adds the catalog and the
    KV transfer's network."""
    known = None
    for i, a in enumerate(doc.allocations):
        if a.custom_cloud or a.cloud not in KNOWN_CLOUDS:
            continue  # offers from the user's own file: planned, never deployed by apply
        known = catalog() if known is None else known
        problem = catalog_problem(a, known)
        if problem:
            raise InvalidInputError(f"{path}: allocations[{i}].{problem}",
                                    hint="plan.json is written by `hetinfra plan`; re-plan instead of editing it")
    for i, a in enumerate(doc.allocations):
        if a.disaggregation is not None:
            problem = split_problem(a)
            if problem:
                raise InvalidInputError(f"{path}: allocations[{i}] ({a.deployment_unit}): {problem}",
                                        hint="re-plan: a split across nodes needs EFA, InfiniBand or RoCE")
    return doc


def split_problem(a: Allocation) -> str | None:
    """Why the instance types cannot carry the prefill/decode bundle's KV transfer (None: they can): a
    bundle over several nodes needs an RDMA network on every role's instance type
    (hetinfra.catalog.interconnect), one network class on all of them (an EFA node has no RDMA path to
    an InfiniBand one), and that class must be the link the plan priced."""
    from hetinfra.catalog.interconnect import interconnect
    from hetinfra.compile.unit import link_problem
    from hetinfra.document.bundle_shape import role_node

    if a.nodes_per_replica <= 1:
        return None  # one node: NVLink or PCIe inside it carries the KV, whatever the network
    roles = a.disaggregation.roles
    types = {(n.instance_type, n.gpu) for n in (role_node(r, a) for r in roles if r.nodes)} or {(a.instance_type, a.gpu)}
    links = {t: interconnect(a.cloud, t, g) for t, g in sorted(types)}
    for t, link in links.items():
        if not link.rdma:
            return (f"a prefill/decode bundle over {a.nodes_per_replica} nodes of {t}, whose network is "
                    f"{link.network} ({link.source}): the KV cache cannot move between its nodes over RDMA")
    networks = {link.network for link in links.values()}
    if len(networks) > 1:
        return (f"a prefill/decode bundle over {' and '.join(links)}, whose networks differ "
                f"({', '.join(sorted(networks))}): no RDMA path joins them")
    if not any(r.nodes for r in roles):
        return None
    link = a.disaggregation.link  # what the plan priced: an RDMA class, and the types' own
    why = link_problem(link)
    if why is None and link not in networks:
        why = f"a prefill/decode bundle priced over {link} on {' and '.join(links)}, whose network is {networks.pop()}"
    return why


def engine_length_problems(doc: Plan) -> list[str]:
    """Units vLLM would refuse to start or that would refuse routed requests: the model's own check
    (hetinfra.document.engines), which every parse of plan.json runs, so a parsed plan has none (a
    plan.json that has one is refused by its parse: InvalidInputError naming the first unit)."""
    return length_problems(doc.models, doc.allocations, doc.routing)


def runs_anything(state: State) -> bool:
    """Whether a state.json records anything running (an empty one, or one destroy emptied, runs nothing)."""
    return bool(state.allocations or state.pulumi or state.skypilot)


def other_service(have: str | None, have_id: str | None, want: str, want_id: str | None) -> str | None:
    """How the service running (``have``, its ``have_id``) differs from the one to apply or re-plan:
    "service" (another name), "id" (the same name from another spec file) or None (the same)."""
    if have and have != want:
        return "service"
    return "id" if have_id and want_id and have_id != want_id else None


def check_owner(plan: Plan, state: State, out: Path, *, force: bool) -> None:
    """plan.json and state.json must describe the same service (exit 2 unless ``force``)."""
    if not runs_anything(state):
        return
    have, want = state.service, plan.service
    have_id, want_id = state.service_id, plan.service_id
    differs = other_service(have, have_id, want, want_id)
    if differs == "service":
        why = f"{out} runs service {have!r}, but its plan.json is for service {want!r}"
    elif differs == "id":
        why = (f"{out} runs service {have!r} id {have_id}, but its plan.json was planned from another spec "
               f"(service id {want_id})")
    else:
        return
    if force:
        return
    raise InvalidInputError(f"{why}: applying it would replace or delete the running service's instances",
                            hint=f"plan into that service's own out dir, or pass --force if {out} really "
                                 f"should now run {want!r}")


def gcp_project(plan: Plan, out: Path, env: dict) -> str | None:
    """The GCP project of the gcp stack: deploy.gcp_project, the stack config's gcp:project (set with
    `pulumi config set gcp:project`), or GOOGLE_CLOUD_PROJECT / CLOUDSDK_CORE_PROJECT."""
    if plan.deploy.gcp_project:
        return plan.deploy.gcp_project
    config = read_stack_config(out / "pulumi" / "gcp" / f"Pulumi.{plan.deploy.stack}.yaml").get("config") or {}
    if config.get("gcp:project"):
        return str(config["gcp:project"])
    return env.get("GOOGLE_CLOUD_PROJECT") or env.get("CLOUDSDK_CORE_PROJECT") or None


def check_cloud_settings(plan: Plan, out: Path, pulumi_clouds: list[str], env: dict) -> None:
    """Settings a cloud's stack cannot do without (exit 2)."""
    clouds = {a.cloud for a in plan.allocations}
    if "gcp" in pulumi_clouds and "gcp" in clouds:
        project = gcp_project(plan, out, env)
        if not project:
            raise InvalidInputError(
                "the gcp stack needs a GCP project and none is set",
                hint="set deploy.gcp_project: <project-id> in the spec and plan again (or export "
                     "GOOGLE_CLOUD_PROJECT=<project-id>)")
        if not re.match(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$", project):
            raise InvalidInputError(f"GCP project {project!r} is not a project id (6-30 lowercase letters, digits, '-')")
    if "azure" in pulumi_clouds and "azure" in clouds and not plan.deploy.ssh_public_key:
        raise InvalidInputError(
            "Azure VMs need an admin SSH public key and deploy.ssh_public_key is not set",
            hint="set deploy.ssh_public_key: \"$(cat ~/.ssh/id_ed25519.pub)\" in the spec and plan again "
                 "(no SSH port is opened unless deploy.ssh_cidrs lists sources)")


def check_disks(plan: Plan, allocs: list[Allocation]) -> None:
    """An explicit ``deploy.disk_gb`` must hold weights + engine + OS image of every unit (exit 2)."""
    explicit = plan.deploy.disk_gb
    if not explicit:
        return
    for a in allocs:
        need, how = disk_need_gb(plan, a)
        if explicit < need:
            raise InvalidInputError(
                f"deploy.disk_gb is {explicit} GB, but a VM of {a.deployment_unit} needs {need} GB ({how})",
                hint=f"set deploy.disk_gb: {need} (or more), or remove it so every unit's disk is sized for it, "
                     "and plan again")


def planned_gpus(allocs: list[Allocation]) -> dict[tuple[str, str, str, str], int]:
    """GPUs the plan runs per (cloud, region, gpu, purchase)."""
    out: dict[tuple[str, str, str, str], int] = {}
    for a in allocs:
        nodes = [(s.gpu, s.gpus) for s in a.stages] if a.stages else [(a.gpu, a.gpus_per_instance)] * a.nodes_per_replica
        for gpu, gpus in nodes:
            k = (a.cloud, a.region, gpu, "spot" if a.spot else "on-demand")
            out[k] = out.get(k, 0) + gpus * a.count
    return out


def check_quotas(allocs: list[Allocation], caps: Callable[[list[Allocation]], list] | None) -> list[str]:
    """Compare planned GPUs with the caps the clouds report where credentials allow reading them
    (``caps(allocs)`` returns AvailabilityCap-like objects: cloud, region, gpu, max_gpus, purchase).
    Raises ProviderError (exit 4) when a quota is below the plan; returns notes."""
    if caps is None:
        return ["quotas not checked: no GOOGLE_OAUTH_ACCESS_TOKEN / AZURE_ACCESS_TOKEN to read them with"]
    try:
        found = caps(allocs)
    except Exception as exc:  # quota APIs are best effort: unreadable is a note, not a failure
        return [f"quotas not checked: {type(exc).__name__}: {exc}"]
    need = planned_gpus(allocs)
    for c in found:
        k = (c.cloud, c.region, c.gpu, getattr(c, "purchase", "on-demand"))
        if k in need and c.max_gpus is not None and need[k] > c.max_gpus:
            raise ProviderError(f"{c.cloud}/{c.region}: the plan runs {need[k]} {k[3]} {c.gpu} GPU(s), the quota "
                                f"allows {c.max_gpus}", hint="request a quota increase, or plan with `--availability` "
                                                             "so the plan stays inside the quotas")
    return [f"quotas checked: {len(found)} cap(s) read"]


def env_quota_caps(env: dict) -> Callable[[list[Allocation]], list] | None:
    """The clouds' own GPU quotas through price_feeds.cloud_quotas when an access token for a read is
    in the environment (GOOGLE_OAUTH_ACCESS_TOKEN with GOOGLE_CLOUD_PROJECT, AZURE_ACCESS_TOKEN with
    AZURE_SUBSCRIPTION_ID); None when none is. ``HETINFRA_PREFLIGHT_QUOTAS=0`` skips the read."""
    if env.get("HETINFRA_PREFLIGHT_QUOTAS", "1") == "0":
        return None
    gcp = bool(env.get("GOOGLE_OAUTH_ACCESS_TOKEN") and (env.get("GOOGLE_CLOUD_PROJECT") or env.get("CLOUDSDK_CORE_PROJECT")))
    az = bool(env.get("AZURE_ACCESS_TOKEN") and env.get("AZURE_SUBSCRIPTION_ID"))
    if not (gcp or az):
        return None

    def read(allocs: list[Allocation]) -> list:
        from hetinfra.price_feeds import cloud_quotas
        from hetinfra.price_feeds.load import load_offers

        offers = load_offers("snapshot")[0].offers
        caps: list = []
        for cloud, ok, fn in (("gcp", gcp, cloud_quotas.gcp_caps), ("azure", az, cloud_quotas.azure_caps)):
            regions = sorted({a.region for a in allocs if a.cloud == cloud})
            if ok and regions:
                caps += list(fn(regions, offers, env=env, timeout_s=10.0)[0])
        return caps

    return read


def check_health_paths(plan: Plan, allocs: list[tuple[Allocation, str | None]], *, refuse: bool) -> list[str]:
    """Units (allocation, deploy path) whose health the cron host could not check
    (hetinfra.deploy.health): exit 2 with ``refuse`` (``replan --apply``), else a note for the preview."""
    from hetinfra.deploy.health import no_check_message, unchecked_units

    missing = unchecked_units(plan, allocs)
    if not missing:
        return []
    msg, hint = no_check_message(missing)
    if refuse:
        raise InvalidInputError(msg, hint=hint)
    return [f"warning: `replan --apply` will refuse to change these units: {msg}; {hint}"]


#: the order :func:`gather` runs checks in: cheap and local first, network reads last
CHECK_ORDER = ("binaries", "settings", "credentials", "quotas")


#: what each exit code among missing prerequisites means, as every line of the listing says it
CLASSES = {2: "configuration", 4: "provider"}


def _class(exc: HetinfraError) -> str:
    return CLASSES.get(exc.exit_code, type(exc).__name__)


def gather(checks: list[tuple[str, Callable[[], object]]]) -> list:
    """Run every ``(kind, check)`` in CHECK_ORDER (binaries on PATH, settings, credentials, quotas),
    keep going past failures, and return the results in the given order. One failure is raised as
    it is; several become one error listing each with its fix (cheapest first) and its class, so a
    user learns everything missing in one run.

    The exit code of several (docs/reference/exit-codes.md): the lowest among them, so 2 when any
    is the user's configuration (InvalidInputError: a setting, the spec, an argument), else 4 (every
    one is a provider's: a tool not installed, a cloud not logged in, a quota). A 2 says the input
    must change before any retry can succeed; a 4 would tell cron to retry a run that no retry fixes."""
    rank = {kind: i for i, kind in enumerate(CHECK_ORDER)}
    order = sorted(range(len(checks)), key=lambda i: (rank[checks[i][0]], i))
    results: list = [None] * len(checks)
    failed: list[tuple[str, HetinfraError]] = []
    for i in order:
        kind, check = checks[i]
        try:
            results[i] = check()
        except HetinfraError as exc:
            if all(exc.message != f.message for _, f in failed):  # one cause, reported by two checks
                failed.append((kind, exc))
    if len(failed) == 1:
        raise failed[0][1]
    if failed:
        first = min((exc for _, exc in failed), key=lambda exc: exc.exit_code)
        raise type(first)(_listing(failed, first), details={"missing": [
            {"kind": kind, "message": exc.message, "fix": exc.hint, "exit_code": exc.exit_code} for kind, exc in failed]})
    return results


def _listing(failed: list[tuple[str, HetinfraError]], decides: HetinfraError) -> str:
    """The message of several missing prerequisites: how many of each class, which one sets the exit
    code, then one line per item naming its check, its class and its fix."""
    counts: dict[tuple[int, str], int] = {}
    for _, exc in failed:
        counts[(exc.exit_code, _class(exc))] = counts.get((exc.exit_code, _class(exc)), 0) + 1
    tally = ", ".join(f"{n} {c}" for (_, c), n in sorted(counts.items()))
    lines = [f"{len(failed)} prerequisites are missing ({tally}: exit {decides.exit_code}, the lowest code among them); "
             "fix them all, then run again:"]
    lines += [f"  {n}. [{kind}] ({_class(exc)}, exit {exc.exit_code}) {exc.message.splitlines()[0]}"
              + (f" (fix: {exc.hint})" if exc.hint else "") for n, (kind, exc) in enumerate(failed, 1)]
    return "\n".join(lines)
