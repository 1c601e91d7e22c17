"""The gateway's routing table: which deployment units serve which request class of which model,
with what weight, at which URLs. Pure data, built from files (no HTTP here).

Sources, given ``PLAN_OR_OUT_DIR``:

- an OUT folder: ``OUT/router/weights.json`` (the compiled router weights; written by
  ``hetinfra plan``, hand-editable for live weights), else the weights computed from
  ``OUT/plan.json``; endpoints from ``OUT/state.json`` (``endpoints``: deployment unit -> URLs,
  recorded by ``hetinfra apply``);
- a plan.json file: the weights computed from it; endpoints only from ``--endpoint``.

``--endpoint UNIT=URL`` (repeatable; several for one unit add replicas) overrides what state.json
recorded for that unit. ``UNIT`` is an allocation's ``unit`` (``chat-8b|aws|g5.xlarge|...``) or
its ``deployment_unit`` (``chat-8b-aws-us-east-1-g5-xlarge``); the table keys on the latter.

**How a request finds its class** (:meth:`ModelRoutes.classify`): the plan's classes are buckets
``(input <= I, output <= O)`` planned at their upper edges (I, O). At arrival the gateway knows the
prompt's token count and the request's ``max_tokens`` (the most it may generate), not its real
output length; it routes to the *smallest* class (least I + O, then least O) whose I holds the
prompt and whose O holds max_tokens. Because a request never generates more than max_tokens and the
planner sized that class for outputs of O >= max_tokens, max_tokens is a conservative stand-in for
the unknown output length. Requests larger than every class are clipped into the largest one
(as the demand log's ``size_mix`` clips), and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hetinfra.compile.router_doc import parse_weights
from hetinfra.errors import InvalidInputError
from hetinfra.fileio import present, read_json

if TYPE_CHECKING:
    from hetinfra.document import Plan

STATE_FILE = "state.json"  # written by hetinfra.deploy.state (format documented there)


@dataclass(frozen=True)
class RouteClass:
    name: str
    input_tokens: int  # upper edge of the input bucket
    output_tokens: int  # upper edge of the output bucket
    weights: tuple[tuple[str, float], ...]  # (deployment unit, weight), weight > 0


@dataclass(frozen=True)
class ModelRoutes:
    name: str
    classes: tuple[RouteClass, ...]  # sorted smallest first: (I + O, O, I)
    shares: tuple[tuple[str, float], ...]  # each unit's share of all the model's requests (fallback)
    default_max_tokens: int  # the output length assumed when a request carries no max_tokens

    def classify(self, input_tokens: int, max_tokens: int) -> tuple[RouteClass | None, bool]:
        """(class, clipped): the smallest routable class holding both sizes; ``clipped`` when none
        holds them and the request is sent to the largest class that holds the clipped sizes."""
        routable = [c for c in self.classes if c.weights]
        for c in routable:
            if input_tokens <= c.input_tokens and max_tokens <= c.output_tokens:
                return c, False
        if not routable:
            return None, False
        top_in = max(c.input_tokens for c in routable)
        top_out = max(c.output_tokens for c in routable)
        i, o = min(input_tokens, top_in), min(max_tokens, top_out)
        for c in routable:
            if i <= c.input_tokens and o <= c.output_tokens:
                return c, True
        return max(routable, key=lambda c: (c.output_tokens, c.input_tokens)), True


@dataclass(frozen=True)
class RoutingTable:
    service: str
    models: dict[str, ModelRoutes]
    endpoints: dict[str, tuple[str, ...]]  # deployment unit -> base URLs (".../v1" stripped)
    sources: tuple[str, ...] = ()  # the files it was built from (watched for reloads)
    warnings: tuple[str, ...] = field(default_factory=tuple)
    #: routing by origin (hetinfra.gateway.origins): origin -> model -> that origin's routes
    by_origin: dict[str, dict[str, ModelRoutes]] = field(default_factory=dict)
    region: str = ""  # the gateway's own region (--region): the row it serves without an origin header
    #: the regions the plan declares (gateway.origins.declared_regions): the origins a header may name
    declared: frozenset[str] = frozenset()

    def routes_for(self, model: str, origin: str | None = None) -> ModelRoutes | None:
        """The model's routes for a client in ``origin`` (else, or when pooled, the gateway's region; else by class)."""
        row = self.by_origin.get(origin or self.region) or self.by_origin.get(self.region) or {}
        return row.get(model) or self.models.get(model)

    def units(self) -> set[str]:
        out: set[str] = set()
        for m in self.models.values():
            out.update(u for c in m.classes for u, _ in c.weights)
        return out


#: the port a scheme means when its URL names none: ``http://h:80`` and ``http://h`` are one backend
DEFAULT_PORTS = {"http": 80, "https": 443}


def base_url(url: str) -> str:
    """``http://h:8000/v1`` -> ``http://h:8000`` (the gateway adds the request's own path), in one spelling:
    scheme and host in lower case and a scheme's default port dropped, so ``HTTP://H:80/v1/`` and ``http://h``
    are one backend (:func:`_one_unit_per_backend` counts each once)."""
    from urllib.parse import urlsplit, urlunsplit

    from hetinfra.httpget import checked_url

    u = checked_url(url.strip().rstrip("/"), "endpoint URL", hint="e.g. http://10.0.0.5:8000/v1 (a key: VLLM_API_KEY)")
    parts = urlsplit(u)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    port = parts.port if parts.port not in (None, DEFAULT_PORTS.get(scheme)) else None
    path = parts.path.rstrip("/")
    path = path[:-3] if path.endswith("/v1") else path
    return urlunsplit((scheme, host + (f":{port}" if port else ""), path, parts.query, parts.fragment))


def _read_json(path: Path) -> dict:
    """A JSON object from ``path`` (fileio.read_json: any unreadable or over-nested file is exit 2 naming it)."""
    doc = read_json(path, "router weights")
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def routes_from_weights(weights: dict, where: str) -> dict[str, ModelRoutes]:
    """Per model routes from a router weights document (``router_version`` 1, typed by
    hetinfra.compile.router_doc)."""
    if not isinstance(weights, dict) or weights.get("router_version") != 1:
        version = weights.get("router_version") if isinstance(weights, dict) else None
        raise InvalidInputError(f"{where}: router_version {version!r} is not 1")
    doc = parse_weights(weights, where)
    out = {}
    for name, entry in doc.models.items():
        classes = []
        for cname, c in entry.classes.items():
            w = tuple((u, float(x)) for u, x in sorted(c.weights.items()) if x > 0)
            classes.append(RouteClass(cname, c.input_tokens, c.output_tokens, w))
        classes.sort(key=lambda c: (c.input_tokens + c.output_tokens, c.output_tokens, c.input_tokens, c.name))
        shares = tuple((u, float(e.share or 0.0)) for u, e in sorted(entry.endpoints.items()))
        default = entry.default_max_tokens or max((c.output_tokens for c in classes), default=1)
        out[name] = ModelRoutes(name, tuple(classes), shares, max(1, default))
    return out


def unit_aliases(plan: "Plan | None") -> dict[str, str]:
    """``unit`` and ``deployment_unit`` of every allocation -> deployment unit."""
    out: dict[str, str] = {}
    for a in plan.allocations if plan is not None else ():
        out[a.unit] = a.deployment_unit
        out[a.deployment_unit] = a.deployment_unit
    return out


def parse_endpoint_overrides(items: list[str] | tuple[str, ...]) -> dict[str, list[str]]:
    """``["UNIT=URL", ...]`` -> {UNIT: [URL, ...]} (a unit given twice gets both URLs)."""
    out: dict[str, list[str]] = {}
    for item in items:
        unit, sep, url = item.partition("=")
        if not sep or not unit.strip() or not url.strip():
            raise InvalidInputError(f"--endpoint {item!r} is not UNIT=URL",
                                    hint="e.g. --endpoint chat-8b-aws-us-east-1-g5-xlarge=http://10.0.0.5:8000/v1")
        out.setdefault(unit.strip(), []).append(url.strip())
    return out


def load_table(source: str | Path, overrides: dict[str, list[str]] | None = None, region: str = "") -> RoutingTable:
    """The routing table from an OUT folder or a plan.json (see the module docstring); ``region``:
    the gateway's own, whose row of the plan it serves (hetinfra.gateway.origins)."""
    from hetinfra.gateway.origins import check_region, declared_regions, origin_routes

    plan, weights, where, recorded, sources = _read_sources(Path(source))
    declared = declared_regions(plan)
    check_region(region, declared, str(sources[0]))
    models = routes_from_weights(weights, where)
    from hetinfra.gateway.adapter_routes import split_adapter_routes  # LoRA: an adapter's requests only to its holders

    models = split_adapter_routes(models)
    if plan is not None and where != str(sources[0]):  # weights.json beside plan.json: the two must agree
        from hetinfra.document.crosscheck import check_against_plan

        check_against_plan(plan, sources[0], weights=parse_weights(weights, where), weights_path=where)
    aliases = unit_aliases(plan)
    model_of = {u: name for name, m in models.items()  # every routed unit and its model
                for u in {u for c in m.classes for u, _ in c.weights} | {u for u, _ in m.shares}}
    units = set(model_of)
    aliases.update({u: u for u in units})
    endpoints: dict[str, list[str]] = {u: list(urls) for u, urls in recorded.items()}
    given: dict[str, list[str]] = {}  # --endpoint's URLs per unit, a unit named by either of its names
    for unit, urls in (overrides or {}).items():
        if unit not in aliases:
            from hetinfra.errors import did_you_mean

            raise InvalidInputError(f"--endpoint: unknown unit '{unit}'", hint=did_you_mean(unit, sorted(aliases)))
        given.setdefault(aliases[unit], []).extend(urls)
    endpoints.update(given)
    table_endpoints = {u: tuple(base_url(x) for x in urls) for u, urls in sorted(endpoints.items()) if urls}
    _one_unit_per_backend(table_endpoints, {aliases.get(u, u): model for u, model in model_of.items()},
                          {u: "--endpoint" if u in given else str(sources[-1]) for u in endpoints})
    warnings = _no_endpoint_warnings(model_of, units - set(table_endpoints), set(table_endpoints))
    return RoutingTable(service=str(weights.get("service") or (plan.service if plan is not None else "")),
                        models=models, endpoints=table_endpoints, sources=tuple(str(p) for p in sources),
                        warnings=tuple(warnings), by_origin=origin_routes(plan, models), region=region,
                        declared=declared)


def _one_unit_per_backend(endpoints: dict[str, tuple[str, ...]], model_of: dict[str, str], where: dict[str, str]) -> None:
    """Each backend URL (as the gateway sends to it: ``.../v1`` and a trailing ``/`` stripped) is one replica of a
    unit. Given twice for a unit (``--endpoint U=http://a --endpoint U=http://a/v1``) the gateway counted it as two
    replicas, sending it twice its share; given for units of two models, one server took another model's
    requests (each answered 404 by it). Exit 2 naming where. Units of one model may share a server (one stand-in
    for several units, or a balancer in front of them): it is one backend, its health kept once."""
    seen: dict[str, str] = {}
    for unit, urls in sorted(endpoints.items()):
        for url in urls:
            first = seen.setdefault(url, unit)
            if first == unit and urls.count(url) > 1:
                why = "again: each URL is one replica"
            elif first != unit and model_of.get(first) != model_of.get(unit):
                why = f"also for unit {first}, which serves model {model_of.get(first)}, not {model_of.get(unit)}"
            else:
                continue
            raise InvalidInputError(f"{where.get(unit, '--endpoint')}: endpoint {url} of unit {unit} is given {why}",
                                    hint="give each replica's URL once, for units of its model (http://h:8000 and "
                                         "http://h:8000/v1 are one URL)")


def _no_endpoint_warnings(model_of: dict[str, str], missing: set[str], reached: set[str]) -> list[str]:
    """One line per unit with no endpoint (``model_of``: each routed unit's model), saying where its
    traffic goes: to its model's other units where one has an endpoint, else nowhere (the gateway
    answers 503 for that model: hetinfra.gateway.balancer)."""
    served = {model_of[u] for u in reached if u in model_of}
    return [f"unit {u} has no endpoint (not in state.json, no --endpoint): "
            + ("its traffic goes to its model's other units" if model_of.get(u) in served else
               f"no unit of model {model_of.get(u, '?')} has one, so the gateway answers 503 for it")
            for u in sorted(missing)]


def _read_sources(src: Path) -> tuple:
    """(plan model or None, router weights, where they came from, state.json's endpoints, the files read)
    of an OUT folder (plan.json, router/weights.json, state.json) or of a plan.json."""
    from hetinfra.compile.router import router_weights
    from hetinfra.document import Plan, load_plan
    from hetinfra.document.state import State, load_state

    sources: list[Path] = []
    plan: Plan | None = None
    endpoints: dict[str, list[str]] = {}
    if src.is_dir():
        plan_path, weights_path, state_path = src / "plan.json", src / "router" / "weights.json", src / STATE_FILE
        # fileio.present: a link to nothing or a loop is read (and refused by name), never passed over
        if present(plan_path):
            plan = load_plan(plan_path)
            sources.append(plan_path)
        if present(weights_path):
            weights, where = _read_json(weights_path), str(weights_path)
            sources.append(weights_path)
        elif plan is not None:
            weights, where = router_weights(plan), str(plan_path)
        else:
            raise InvalidInputError(f"{src} has neither plan.json nor router/weights.json",
                                    hint="pass the OUT folder `hetinfra plan --out` wrote, or a plan.json")
        if present(state_path):
            state = State.of(load_state(state_path), state_path)
            if plan is not None:
                from hetinfra.document.crosscheck import check_against_plan

                check_against_plan(plan, plan_path, state=state, state_path=state_path)
            endpoints = state.endpoints
            sources.append(state_path)
    elif present(src):
        plan = load_plan(src)
        weights, where = router_weights(plan), str(src)
        sources.append(src)
    else:
        raise InvalidInputError(f"{src} not found", hint="pass the OUT folder of `hetinfra plan --out`, or a plan.json")
    return plan, weights, where, endpoints, sources  # load_plan refused a plan routed to a unit it lacks
