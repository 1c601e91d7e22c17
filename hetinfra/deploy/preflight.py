"""Preflight of ``hetinfra apply``: everything that can be known before the first step, checked
before anything is asked or changed. A failed check raises; nothing has been written then.

1. **plan.json against its schema** (:func:`validate_plan`): ``plan_version``, the service name,
   every allocation's keys and types (counts are positive integers, ``instances = count x
   nodes_per_replica``, the SkyPilot task path is ``skypilot/<unit>.yaml``), instance types and
   GPUs from the offer catalog, the ``deploy`` section's values, and no shell metacharacter in any
   string that reaches a VM, a command line or a resource name (exit 2).
2. **The out dir belongs to the service** (:func:`check_owner`): plan.json's ``service`` and
   ``service_id`` must equal state.json's; another service's out dir is refused without
   ``--force`` (exit 2).
3. **Each cloud's required settings** (:func:`check_cloud_settings`): a GCP project for the gcp
   stack, an SSH public key for Azure VMs (exit 2), and, where credentials let us read them, the
   clouds' GPU quotas against the planned GPUs (exit 4).
4. **Disks** (:func:`check_disks`): an explicit ``deploy.disk_gb`` must hold the model weights,
   the engine and the OS image (exit 2).
Part 2 (tools, settings, credentials, quotas) runs every check through :func:`gather`, cheapest
first, and reports every missing prerequisite with its fix in one run, not one per run.

5. **Health checks from the cron host** (:func:`check_health_paths`): every new unit's health
   must be checkable from the host that runs ``replan --apply`` (through the gateway, the cloud's
   own signal or ``deploy.management_cidrs``: hetinfra.deploy.health); ``apply`` warns,
   ``replan --apply`` refuses (exit 2).
"""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path
from typing import Callable, Iterable

from hetinfra import PLAN_VERSION
from hetinfra.compile.disk import disk_need_gb
from hetinfra.deploy.state import ALLOC_FIELDS
from hetinfra.errors import HetinfraError, InvalidInputError, ProviderError
from hetinfra.price_feeds.offers import KNOWN_CLOUDS

DNS = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: identifiers that end up in commands, scripts and resource names
IDENT = re.compile(r"^[A-Za-z0-9._:/@+=,-]+$")
#: characters a shell gives a meaning to: refused in every string apply reads
SHELL_META = re.compile(r"[;&|$`\\\"'<>(){}\[\]*?!#~\s]")
SSH_KEY = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com)"
                     r" [A-Za-z0-9+/=]+( [A-Za-z0-9._@+=:-]+)?$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([a-z0-9.+-]*)$")
PRECISIONS = {"bf16", "fp16", "fp8", "int8", "int4"}

# plan.json sections apply builds artifacts from, and which free-text keys in them are only prose
READ_SECTIONS = ("allocations", "models", "deploy", "routing")
LOOSE_KEYS = {"unit", "template", "ssh_public_key", "tls_cert", "tls_key", "package", "confidence"}
PROSE_KEYS = {"max_model_len_basis", "confidence_reason", "reason", "description", "note"}


def _where(path: Path, key: str) -> str:
    return f"{path}: {key}"


def _bad(path: Path, key: str, msg: str, hint: str | None = None) -> InvalidInputError:
    return InvalidInputError(f"{_where(path, key)} {msg}",
                             hint=hint or "plan.json is written by `hetinfra plan`; re-plan instead of editing it")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _strings(doc, key: str = "") -> Iterable[tuple[str, str]]:
    """(dotted key, string) of every string in ``doc``, dict keys included."""
    if isinstance(doc, str):
        yield key, doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield f"{key}.{k}" if key else str(k), str(k)
            if str(k) in PROSE_KEYS:
                continue
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _strings(v, f"{key}[{i}]")


def catalog_types() -> set[tuple[str, str]]:
    """(cloud, instance type) pairs the offer catalog knows: the embedded snapshot and the feeds'
    cached snapshots (a plan made with ``--feeds live`` may use types the snapshot lacks)."""
    from hetinfra.price_feeds.load import load_offers

    known = {(o.cloud, o.instance_type) for o in load_offers("snapshot")[0].offers}
    try:
        known |= {(o.cloud, o.instance_type) for o in load_offers("cache")[0].offers}
    except Exception:  # no cache, or an unreadable one: the embedded snapshot alone
        pass
    return known


def validate_plan(plan: dict, path: Path, *, catalog: Callable[[], set] = catalog_types) -> None:
    """Raise InvalidInputError (exit 2) naming the first field of plan.json that is wrong."""
    if not isinstance(plan, dict):
        raise _bad(path, "(top level)", "is not a JSON object")
    v = plan.get("plan_version")
    if v != PLAN_VERSION:
        raise _bad(path, "plan_version", f"is {v!r}; this hetinfra reads plan_version {PLAN_VERSION}",
                   hint="plan again with this hetinfra version (`hetinfra plan SPEC --out OUT`)")
    service = plan.get("service")
    if not isinstance(service, str) or not DNS.match(service):
        raise _bad(path, "service", f"{service!r} is not a service name (lowercase letters, digits, '-')")
    sid = plan.get("service_id")
    if sid is not None and (not isinstance(sid, str) or not IDENT.match(sid)):
        raise _bad(path, "service_id", f"{sid!r} is not a service id")
    allocs = plan.get("allocations")
    if not isinstance(allocs, list):
        raise _bad(path, "allocations", "must be a list")
    # no shell metacharacter in anything apply turns into scripts, commands or names
    for section in READ_SECTIONS:
        for key, s in _strings(plan.get(section), section):
            leaf = re.sub(r"\[\d+\]$", "", key.rsplit(".", 1)[-1])
            if "\x00" in s or "\n" in s or "\r" in s:
                raise _bad(path, key, f"{s!r} contains a control character")
            if leaf in LOOSE_KEYS or section == "routing" or ".classes[" in key or key.endswith(".classes"):
                # internal keys ('model|cloud|type|...'), class names ('in<=500,out<=200'), key files and
                # the public key: never interpolated into a shell, but no quoting or expansion either
                if re.search(r"[;&$`\\\"']", s):
                    raise _bad(path, key, f"{s!r} contains a shell metacharacter")
                continue
            if SHELL_META.search(s):
                raise _bad(path, key, f"{s!r} contains a shell metacharacter or whitespace")
    models = {}
    for i, m in enumerate(plan.get("models") or []):
        if not isinstance(m, dict) or not isinstance(m.get("name"), str):
            raise _bad(path, f"models[{i}]", "must be an object with a name")
        if m.get("precision") not in PRECISIONS:
            raise _bad(path, f"models[{i}].precision", f"{m.get('precision')!r} is not one of {sorted(PRECISIONS)}")
        if not isinstance(m.get("source"), str) or not IDENT.match(m["source"]):
            raise _bad(path, f"models[{i}].source", f"{m.get('source')!r} is not a model id or path")
        models[m["name"]] = m
    known = None
    for i, a in enumerate(allocs):
        key = f"allocations[{i}]"
        if not isinstance(a, dict):
            raise _bad(path, key, "must be an object")
        for f, typ in ALLOC_FIELDS.items():
            val = a.get(f)
            if f not in a or (typ is int and not _is_int(val)) or (typ is not int and not isinstance(val, typ)) \
                    or (typ is bool and not isinstance(val, bool)):
                raise _bad(path, f"{key}.{f}", f"is {val!r}; expected {getattr(typ, '__name__', 'a number')}")
        for f in ("count", "gpus_per_instance", "tp", "pp", "engines_per_instance", "nodes_per_replica"):
            if a[f] < 1:
                raise _bad(path, f"{key}.{f}", f"is {a[f]}; must be a positive integer")
        for f in ("price_per_instance_usd_per_hour", "cost_usd_per_hour"):
            if not math.isfinite(a[f]) or a[f] < 0:
                raise _bad(path, f"{key}.{f}", f"is {a[f]!r}; must be a number >= 0")
        if a["pp"] % a["nodes_per_replica"]:  # a pipeline spans whole nodes (several stages on one node allowed)
            raise _bad(path, f"{key}.nodes_per_replica", f"is {a['nodes_per_replica']}, which does not divide "
                                                         f"pp {a['pp']}")
        if a["instances"] != a["count"] * a["nodes_per_replica"]:
            raise _bad(path, f"{key}.instances", f"is {a['instances']}; count x nodes_per_replica is "
                                                 f"{a['count'] * a['nodes_per_replica']}")
        unit = a["deployment_unit"]
        if not DNS.match(unit):
            raise _bad(path, f"{key}.deployment_unit", f"{unit!r} is not a unit name")
        task = a.get("skypilot_task")
        if task is not None and task != f"skypilot/{unit}.yaml":
            raise _bad(path, f"{key}.skypilot_task", f"is {task!r}; expected 'skypilot/{unit}.yaml'")
        if a["model"] not in models:
            raise _bad(path, f"{key}.model", f"{a['model']!r} is not among the plan's models ({', '.join(models)})")
        if a.get("custom_cloud") or a["cloud"] not in KNOWN_CLOUDS:
            continue  # offers from the user's own file: planned, never deployed by apply
        known = catalog() if known is None else known
        types = [s.get("instance_type") for s in a["stages"]] if a.get("stages") else [a["instance_type"]]
        for t in types:
            if (a["cloud"], t) not in known:
                from hetinfra.errors import did_you_mean

                raise _bad(path, f"{key}.instance_type", f"{t!r} is not a {a['cloud']} instance type in the offer "
                           f"catalog; {did_you_mean(str(t), sorted(x for c, x in known if c == a['cloud']))}")
    units = [a["deployment_unit"] for a in allocs]
    dup = sorted({u for u in units if units.count(u) > 1})
    if dup:
        raise _bad(path, "allocations", f"repeat deployment unit(s) {', '.join(dup)}")
    _validate_deploy(plan.get("deploy") or {}, path)


def _validate_deploy(d: dict, path: Path) -> None:
    if not isinstance(d, dict):
        raise _bad(path, "deploy", "must be an object")
    port = d.get("port", 8000)
    if not _is_int(port) or not 1024 <= port <= 65535:
        raise _bad(path, "deploy.port", f"is {port!r}; must be an integer 1024..65535")
    for key in ("ingress_cidrs", "ssh_cidrs", "management_cidrs"):
        for c in d.get(key) or []:
            try:
                ipaddress.ip_network(c, strict=False)
            except (ValueError, TypeError):
                raise _bad(path, f"deploy.{key}", f"{c!r} is not a CIDR") from None
    for where, c in (d.get("network_cidrs") or {}).items():
        try:
            ipaddress.ip_network(c, strict=True)
        except (ValueError, TypeError):
            raise _bad(path, f"deploy.network_cidrs.{where}", f"{c!r} is not a network CIDR") from None
    if d.get("runtime", "container") not in ("container", "virtualenv"):
        raise _bad(path, "deploy.runtime", f"is {d.get('runtime')!r}; container or virtualenv")
    ver = d.get("vllm_version")
    if ver is not None and (not isinstance(ver, str) or not VERSION.match(ver)):
        raise _bad(path, "deploy.vllm_version", f"is {ver!r}; must look like 0.11.0")
    disk = d.get("disk_gb")
    if disk is not None and (not _is_int(disk) or not 50 <= disk <= 16384):
        raise _bad(path, "deploy.disk_gb", f"is {disk!r}; an integer 50..16384, or unset (sized per unit)")
    stack = d.get("stack", "prod")
    if not isinstance(stack, str) or not DNS.match(stack):
        raise _bad(path, "deploy.stack", f"{stack!r} is not a stack name")
    key = d.get("ssh_public_key")
    if key is not None and (not isinstance(key, str) or not SSH_KEY.match(key.strip())):
        raise _bad(path, "deploy.ssh_public_key", "is not one OpenSSH public key line (e.g. 'ssh-ed25519 AAAA... me@host')")


def check_owner(plan: dict, state_doc: dict | None, out: Path, *, force: bool) -> None:
    """plan.json and state.json must describe the same service (exit 2 unless ``force``)."""
    if not state_doc or not state_doc.get("allocations") and not state_doc.get("pulumi") and not state_doc.get("skypilot"):
        return
    have, want = state_doc.get("service"), plan["service"]
    have_id, want_id = state_doc.get("service_id"), plan.get("service_id")
    if have and have != want:
        why = f"{out} runs service {have!r}, but its plan.json is for service {want!r}"
    elif have_id and want_id and have_id != want_id:
        why = (f"{out} runs service {have!r} id {have_id}, but its plan.json was planned from another spec "
               f"(service id {want_id})")
    else:
        return
    if force:
        return
    raise InvalidInputError(f"{why}: applying it would replace or delete the running service's instances",
                            hint=f"plan into that service's own out dir, or pass --force if {out} really "
                                 f"should now run {want!r}")


def gcp_project(plan: dict, out: Path, env: dict) -> str | None:
    """The GCP project of the gcp stack: deploy.gcp_project, the stack config's gcp:project (set with
    `pulumi config set gcp:project`), or GOOGLE_CLOUD_PROJECT / CLOUDSDK_CORE_PROJECT."""
    d = plan.get("deploy") or {}
    if d.get("gcp_project"):
        return d["gcp_project"]
    cfg = out / "pulumi" / "gcp" / f"Pulumi.{d.get('stack', 'prod')}.yaml"
    if cfg.exists():
        import yaml

        try:
            doc = yaml.safe_load(cfg.read_text()) or {}
        except yaml.YAMLError:
            doc = {}
        project = ((doc.get("config") or {}) if isinstance(doc, dict) else {}).get("gcp:project")
        if project:
            return str(project)
    return env.get("GOOGLE_CLOUD_PROJECT") or env.get("CLOUDSDK_CORE_PROJECT") or None


def check_cloud_settings(plan: dict, out: Path, pulumi_clouds: list[str], env: dict) -> None:
    """Settings a cloud's stack cannot do without (exit 2)."""
    d = plan.get("deploy") or {}
    if "gcp" in pulumi_clouds and any(a["cloud"] == "gcp" for a in plan["allocations"]):
        project = gcp_project(plan, out, env)
        if not project:
            raise InvalidInputError(
                "the gcp stack needs a GCP project and none is set",
                hint="set deploy.gcp_project: <project-id> in the spec and plan again (or export "
                     "GOOGLE_CLOUD_PROJECT=<project-id>)")
        if not re.match(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$", project):
            raise InvalidInputError(f"GCP project {project!r} is not a project id (6-30 lowercase letters, digits, '-')")
    if "azure" in pulumi_clouds and any(a["cloud"] == "azure" for a in plan["allocations"]):
        if not d.get("ssh_public_key"):
            raise InvalidInputError(
                "Azure VMs need an admin SSH public key and deploy.ssh_public_key is not set",
                hint="set deploy.ssh_public_key: \"$(cat ~/.ssh/id_ed25519.pub)\" in the spec and plan again "
                     "(no SSH port is opened unless deploy.ssh_cidrs lists sources)")


def check_disks(plan: dict, allocs: list[dict]) -> None:
    """An explicit ``deploy.disk_gb`` must hold weights + engine + OS image of every unit (exit 2)."""
    explicit = (plan.get("deploy") or {}).get("disk_gb")
    if not explicit:
        return
    for a in allocs:
        need, how = disk_need_gb(plan, a)
        if explicit < need:
            raise InvalidInputError(
                f"deploy.disk_gb is {explicit} GB, but a VM of {a['deployment_unit']} needs {need} GB ({how})",
                hint=f"set deploy.disk_gb: {need} (or more), or remove it so every unit's disk is sized for it, "
                     "and plan again")


def planned_gpus(allocs: list[dict]) -> dict[tuple[str, str, str, str], int]:
    """GPUs the plan runs per (cloud, region, gpu, purchase)."""
    out: dict[tuple[str, str, str, str], int] = {}
    for a in allocs:
        stages = a.get("stages") or [{"gpu": a["gpu"], "gpus": a["gpus_per_instance"]}] * a["nodes_per_replica"]
        for s in stages:
            k = (a["cloud"], a["region"], s["gpu"], "spot" if a["spot"] else "on-demand")
            out[k] = out.get(k, 0) + int(s.get("gpus", a["gpus_per_instance"])) * a["count"]
    return out


def check_quotas(allocs: list[dict], caps: Callable[[list[dict]], list] | None) -> list[str]:
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


def env_quota_caps(env: dict) -> Callable[[list[dict]], list] | None:
    """The clouds' own GPU quotas through price_feeds.cloud_quotas when an access token for a read is
    in the environment (GOOGLE_OAUTH_ACCESS_TOKEN with GOOGLE_CLOUD_PROJECT, AZURE_ACCESS_TOKEN with
    AZURE_SUBSCRIPTION_ID); None when none is. ``HETINFRA_PREFLIGHT_QUOTAS=0`` skips the read."""
    if env.get("HETINFRA_PREFLIGHT_QUOTAS", "1") == "0":
        return None
    gcp = bool(env.get("GOOGLE_OAUTH_ACCESS_TOKEN") and (env.get("GOOGLE_CLOUD_PROJECT") or env.get("CLOUDSDK_CORE_PROJECT")))
    az = bool(env.get("AZURE_ACCESS_TOKEN") and env.get("AZURE_SUBSCRIPTION_ID"))
    if not (gcp or az):
        return None

    def read(allocs: list[dict]) -> list:
        from hetinfra.price_feeds import cloud_quotas
        from hetinfra.price_feeds.load import load_offers

        offers = load_offers("snapshot")[0].offers
        caps: list = []
        for cloud, ok, fn in (("gcp", gcp, cloud_quotas.gcp_caps), ("azure", az, cloud_quotas.azure_caps)):
            regions = sorted({a["region"] for a in allocs if a["cloud"] == cloud})
            if ok and regions:
                caps += list(fn(regions, offers, env=env, timeout_s=10.0)[0])
        return caps

    return read


def check_health_paths(plan: dict, allocs: list[tuple[dict, str]], *, refuse: bool) -> list[str]:
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


def gather(checks: list[tuple[str, Callable[[], object]]]) -> list:
    """Run every ``(kind, check)`` in CHECK_ORDER (binaries on PATH, settings, credentials, quotas),
    keep going past failures, and return the results in the given order. One failure is raised as
    it is; several become one error listing each with its fix (cheapest first), so a user learns
    everything missing in one run. Its class, and so the exit code, is the lowest code among them:
    a missing setting (2, the user's input) before a missing tool or credential (4)."""
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
        lines = [f"{len(failed)} prerequisites are missing; fix them all, then run again:"]
        lines += [f"  {n}. [{kind}] {exc.message.splitlines()[0]}" + (f" (fix: {exc.hint})" if exc.hint else "")
                  for n, (kind, exc) in enumerate(failed, 1)]
        first = min((exc for _, exc in failed), key=lambda exc: exc.exit_code)
        raise type(first)("\n".join(lines), details={"missing": [
            {"kind": kind, "message": exc.message, "fix": exc.hint, "exit_code": exc.exit_code} for kind, exc in failed]})
    return results
