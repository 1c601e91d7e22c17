"""Resolve a validated spec against its files, the offers and the catalogs.

This is where cross-references are checked (unknown model, GPU, cloud or region; missing files),
so that everything downstream works on consistent, typed data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hetinfra.catalog.accuracy import SCALE, builtin_accuracy, known_checkpoints
from hetinfra.catalog.custom import check_custom_gpus
from hetinfra.spec.clusters import restrict_to_clusters
from hetinfra.catalog.gpus import GPUS
from hetinfra.catalog.models import ModelArch
from hetinfra.errors import InvalidInputError, did_you_mean, dotted
from hetinfra.fileio import sha256_text
from hetinfra.perf.model import ModelContext, model_arch
from hetinfra.perf.profiles import ProfileRow, ProfileTable, load_profiles
from hetinfra.spec.demand import RequestClass, request_classes
from hetinfra.spec.models import ModelSpec, ServiceSpec
from hetinfra.price_feeds.offers import KNOWN_CLOUDS, Offer, OfferSnapshot, load_embedded_snapshot, load_offers_file


@dataclass(frozen=True)
class PlannedModel:
    spec: ModelSpec
    arch: ModelArch | None
    classes: tuple[RequestClass, ...]
    ctx: ModelContext
    #: the spec's variants with their scores; empty for a model with one checkpoint
    variants: tuple["PlannedVariant", ...] = ()

    def checkpoints(self) -> list[tuple[str | None, "PlannedModel"]]:
        """What the plan may serve this model with: (variant name, the model as that variant serves
        it) for every variant meeting ``slo.min_accuracy``; ``[(None, self)]`` without variants."""
        if not self.variants:
            return [(None, self)]
        return [(v.name, v.model) for v in self.variants if v.eligible]

    @property
    def max_model_len(self) -> int:
        """vLLM's --max-model-len: the longest request the spec's sizes allow, within the model's
        context (see ``max_model_len_basis``)."""
        return self._max_len()[0]

    @property
    def max_model_len_basis(self) -> str:
        return self._max_len()[1]

    def _max_len(self) -> tuple[int, str]:
        sizes = self.spec.demand.sizes
        edges = sizes.histogram or sizes.dataset
        contexts = [a.max_context for a in [self.arch] + [v.model.arch for v in self.variants] if a]
        ctx = min(contexts) if contexts else None
        if sizes.dataset is not None and sizes.dataset.outside == "clip" and ctx:
            return ctx, "the model's context: the dataset's rows beyond the last edges are clipped, not dropped"
        if edges is not None:
            need, why = edges.input_edges[-1] + edges.output_edges[-1], "the last input and output edges of the sizes"
        else:
            need, why = max(c.input_tokens + c.output_tokens for c in self.classes), "the largest explicit class"
        if ctx and ctx < need:
            return ctx, f"the model's context ({why} allow {need} tokens)"
        return need, why


@dataclass(frozen=True)
class PlannedVariant:
    """One of a model's variants: its accuracy, whether it meets the floor, and the model as it serves it."""

    name: str
    accuracy: float
    accuracy_from: str  # "spec" (the user's score) or "builtin" (hetinfra.catalog.accuracy)
    eligible: bool  # meets slo.min_accuracy (always, without a floor)
    model: PlannedModel


@dataclass(frozen=True)
class PlanInputs:
    spec: ServiceSpec
    spec_path: Path
    spec_sha256: str
    models: tuple[PlannedModel, ...]
    offers: tuple[Offer, ...]  # after cloud/region/GPU allowlists
    snapshot: OfferSnapshot  # everything loaded, with sources
    profiles: ProfileTable
    profile_files: tuple[str, ...]
    caps: dict[tuple[str, str, str], int]
    warnings: tuple[str, ...]
    #: LoRA, re-planning with --state: adapter -> the units holding it in the running plan (hetinfra.plan.adapters)
    running_holds: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: work the plan stage reuses while these inputs are planned (verification re-solves them round
    #: after round with a few templates derated): derated units and pruned buckets by the identity
    #: of what they came from (hetinfra.plan.planner); never part of a result's content
    reuse: dict = field(default_factory=dict, init=False, compare=False, repr=False)


def _resolve_path(base: Path, raw: str) -> Path:
    from hetinfra.spec.files import spec_file  # the one resolver of a spec's file fields

    return spec_file(repr(raw), raw, base)


def resolve(spec: ServiceSpec, spec_path: Path, spec_text: str, snapshot: OfferSnapshot | None = None,
            locate=None, extra_caps: dict[tuple[str, str, str], int] | None = None) -> PlanInputs:
    """Check the spec against offers, catalogs and files; ``locate(*path)`` gives ``file:line:col``."""
    base = spec_path.parent
    at_ = locate or (lambda *loc: str(spec_path))
    snap = _offer_snapshot(spec, base, snapshot)
    rows: list[ProfileRow] = []
    for raw in spec.profiles:
        rows.extend(load_profiles(_resolve_path(base, raw)))
    profiles = ProfileTable(rows)
    check_custom_gpus(spec, snap.offers, locate)  # one named like a catalog GPU, or nothing offers: an error
    allowed = _AllowedOffers.of(spec.infrastructure, snap, at_)
    caps = _caps(spec.infrastructure, snap, allowed, at_, extra_caps)
    _check_named_places(spec, snap, allowed, at_)  # a mistyped cluster key: its did-you-mean before "no cluster"
    in_clouds, kube_notes = restrict_to_clusters(spec, allowed.offers, locate)  # a region without a cluster: never planned
    if not in_clouds:
        infra = spec.infrastructure
        raise InvalidInputError(f"{spec_path}: no offer matches infrastructure (clouds {', '.join(sorted(allowed.clouds))}"
                                f"{', regions ' + ', '.join(infra.regions) if infra.regions else ''}"
                                f"{', GPUs ' + ', '.join(infra.gpus) if infra.gpus else ''})",
                                hint="widen the allowlists, or add offers with `offers:`")
    warnings = [*kube_notes, *_offer_warnings(spec, in_clouds)]
    models = [_planned_model(spec, i, base, allowed.regions, at_) for i in range(len(spec.models))]
    return PlanInputs(
        spec=spec, spec_path=spec_path, spec_sha256=sha256_text(spec_text),
        models=tuple(models), offers=tuple(in_clouds), snapshot=snap, profiles=profiles,
        profile_files=tuple(spec.profiles), caps=caps, warnings=tuple(warnings),
    )


def _offer_snapshot(spec: ServiceSpec, base: Path, snapshot: OfferSnapshot | None) -> OfferSnapshot:
    """The embedded snapshot (or ``snapshot``) merged with the spec's offers files, and with the
    committed-term prices only where the spec allows a committed term (other plans keep their
    inputs.sources)."""
    snap = snapshot if snapshot is not None else load_embedded_snapshot()
    for raw in spec.offers:
        snap = snap.merged(load_offers_file(_resolve_path(base, raw)))
    if any(t.startswith("committed") for t in spec.infrastructure.terms()):
        from hetinfra.price_feeds.committed import with_committed_prices

        snap = with_committed_prices(snap)
    return snap


@dataclass(frozen=True)
class _AllowedOffers:
    """The offers the spec's allowlists admit, and the names they were checked against."""

    offers: list
    clouds: set[str]  # the allowed clouds, lower case
    all_clouds: list[str]  # every cloud with an offer, and the known ones
    regions: list[str]  # every region with an offer of an allowed cloud
    gpus: list[str]  # every GPU with an offer, and the catalog's

    @classmethod
    def of(cls, infra, snap: OfferSnapshot, at_) -> "_AllowedOffers":
        all_clouds = sorted({o.cloud for o in snap.offers} | set(KNOWN_CLOUDS))
        for c in infra.clouds:
            if c.lower() not in all_clouds:
                raise InvalidInputError(f"{at_('infrastructure', 'clouds', infra.clouds.index(c))}: infrastructure.clouds: unknown cloud '{c}'; {did_you_mean(c, all_clouds)}",
                                        hint="custom clouds must appear in an offers CSV listed under `offers:`")
        clouds = {c.lower() for c in infra.clouds}
        regions = sorted({o.region for o in snap.offers if o.cloud in clouds})
        if infra.regions is not None:
            for r in infra.regions:
                if r not in regions:
                    raise InvalidInputError(f"{at_('infrastructure', 'regions', infra.regions.index(r))}: infrastructure.regions: no offer in region '{r}' for clouds "
                                            f"{', '.join(sorted(clouds))}; {did_you_mean(r, regions)}")
        gpus = sorted({o.gpu for o in snap.offers} | set(GPUS))
        if infra.gpus is not None:
            for g in infra.gpus:
                if g not in gpus:
                    raise InvalidInputError(f"{at_('infrastructure', 'gpus', infra.gpus.index(g))}: infrastructure.gpus: unknown GPU '{g}'; {did_you_mean(g, gpus)}",
                                            hint="use SkyPilot accelerator names (L4, A10G, A100-80GB, H100, ...)")
        return cls(admitted_offers(infra, snap.offers), clouds, all_clouds, regions, gpus)


def admitted_offers(infra, offers) -> list:
    """The ``offers`` that ``infra``'s allowlists (clouds, regions, GPUs) admit, unchecked: the offers
    a plan may use, and the only ones `--availability` asks the clouds about (hetinfra.plan.feeds)."""
    clouds = {c.lower() for c in infra.clouds}
    regions = set(infra.regions) if infra.regions is not None else None
    gpus = set(infra.gpus) if infra.gpus is not None else None
    return [o for o in offers if o.cloud in clouds and (regions is None or o.region in regions)
            and (gpus is None or o.gpu in gpus)]


def _caps(infra, snap: OfferSnapshot, allowed: _AllowedOffers, at_,
          extra_caps: dict[tuple[str, str, str], int] | None) -> dict[tuple[str, str, str], int]:
    """GPUs per (cloud, region, GPU): the spec's availability entries and ``extra_caps`` (--caps FILE,
    --availability, replan's caps on a stalled unit); where several name one key, the tighter wins.
    What a user wrote (the spec's entries, a caps CSV's rows: ``price_feeds.caps.Caps.written``) is
    checked against the offers, at its line: a cap under a mistyped name would bind nothing,
    silently. The others are hetinfra's own names, taken as they are: the clouds' APIs are asked for
    the offers' regions but report quotas on GPUs nothing offers (GCP's P100), and a stalled unit's
    region may have no offer today; such a cap binds nothing and refuses nothing."""
    _one_cap_per_key(infra, at_)
    caps: dict[tuple[str, str, str], int] = {}
    written = getattr(extra_caps, "written", {})
    named = [(f"{at_('infrastructure', 'availability', i)}: infrastructure.availability[{i}]",
              (cap.cloud, cap.region, cap.gpu), cap.max_gpus) for i, cap in enumerate(infra.availability)]
    named += [(written.get(key) and f"{written[key]}: cap {'/'.join(key)}", key, n) for key, n in (extra_caps or {}).items()]
    regions: dict[str, set[str]] = {}  # cloud -> its offers' regions, gathered once for every cap checked
    for o in snap.offers:
        regions.setdefault(o.cloud, set()).add(o.region)
    for at, (cloud, region, gpu), n in named:
        if at:
            _check_cap(at, cloud, region, gpu, regions.get(cloud.lower(), set()), allowed)
        key = (cloud.lower(), region, gpu)
        caps[key] = min(n, caps.get(key, n))
    return caps


def _check_named_places(spec: ServiceSpec, snap: OfferSnapshot, allowed: _AllowedOffers, at_) -> None:
    """The regions the spec names outside ``infrastructure`` and the caps (a mistyped one is exit 2 at its
    line with a did-you-mean): an adapter's residency ``regions``, against the allowed offers as they are
    (``us-east1`` left the adapter no unit: exit 3, "no plan satisfies all constraints"), and each
    ``deploy.network_cidrs`` and ``deploy.kubernetes.clusters`` key, against the regions of its cloud this
    run's offers or the embedded snapshot know (a mistyped network was ignored, the fleet keeping its derived
    one, and a mistyped cluster beside a valid one was a warning, "no allowed offer there; unused": the
    region it was meant for was planned without it, or left out, silently). A known region the
    infrastructure does not allow stays the warning."""
    for i, a in enumerate(spec.adapters or ()):
        for j, region in enumerate(a.regions or ()):
            if region not in allowed.regions:
                raise InvalidInputError(f"{at_('adapters', i, 'regions', j)}: adapters[{i}].regions: no allowed offer "
                                        f"in region '{region}'; {did_you_mean(region, allowed.regions)}")
    by_cloud: dict[str, set[str]] = {}
    for o in snap.offers:
        by_cloud.setdefault(o.cloud, set()).add(o.region)
    keyed = [(("deploy", "network_cidrs"), key) for key in spec.deploy.network_cidrs]
    keyed += [(("deploy", "kubernetes", "clusters"), key) for key in spec.deploy.kubernetes.clusters]
    for path, key in keyed:
        cloud, _, region = key.partition("/")
        if region in by_cloud.get(cloud, ()):
            continue
        # a region the offers of this run lack (a negotiated --feeds file of one region, a live feed missing
        # one) is still a region of its cloud: its network is kept for when a fleet runs there, never refused
        # (a reviewer's finding: a pinned aws/us-west-2 was exit 2 under a one-region --feeds file)
        for o in load_embedded_snapshot().offers:
            by_cloud.setdefault(o.cloud, set()).add(o.region)
        if region not in by_cloud.get(cloud, ()):
            field = ".".join(path)
            raise InvalidInputError(f"{at_(*path, key)}: {field}: no {cloud} offer in region '{region}' (key {key!r}); "
                                    f"{did_you_mean(region, sorted(by_cloud.get(cloud, ())))}",
                                    hint="key each entry by a cloud/region a fleet can run in, e.g. aws/us-east-1")


def _one_cap_per_key(infra, at_) -> None:
    """Two of the spec's availability entries naming one cloud, region and GPU with different caps
    are refused, with both lines: which one the user meant is theirs to say (the tighter would bind,
    silently). An entry repeated as it stands is harmless. Across sources (the spec, --caps,
    --availability) the tightest cap wins, as documented."""
    first: dict[tuple[str, str, str], int] = {}
    for i, cap in enumerate(infra.availability):
        key = (cap.cloud.lower(), cap.region, cap.gpu)
        j = first.setdefault(key, i)
        if infra.availability[j].max_gpus != cap.max_gpus:
            raise InvalidInputError(
                f"{at_('infrastructure', 'availability', i)}: infrastructure.availability[{i}] caps {'/'.join(key)} "
                f"at {cap.max_gpus} GPUs, availability[{j}] ({at_('infrastructure', 'availability', j)}) at "
                f"{infra.availability[j].max_gpus}", hint="keep one entry per cloud, region and GPU")


def _check_cap(at: str, cloud: str, region: str, gpu: str, regions: set[str], allowed: _AllowedOffers) -> None:
    """A cap's cloud, region and GPU must be ones the offers (or the catalog, for a GPU) know;
    ``regions``: the regions of the cloud's offers."""
    if cloud.lower() not in allowed.all_clouds:
        raise InvalidInputError(f"{at}: unknown cloud '{cloud}'; {did_you_mean(cloud, allowed.all_clouds)}")
    if region not in regions:
        raise InvalidInputError(f"{at}: no {cloud} offer in region '{region}'; {did_you_mean(region, sorted(regions))}")
    if gpu not in allowed.gpus:
        raise InvalidInputError(f"{at}: unknown GPU '{gpu}'; {did_you_mean(gpu, allowed.gpus)}")


def _offer_warnings(spec: ServiceSpec, in_clouds: list) -> list[str]:
    """What the plan cannot do with the offers it may use: custom clouds get no deployment files; a
    spot or committed term that no allowed offer prices is planned without."""
    warnings = []
    custom = sorted({o.cloud for o in in_clouds if o.custom_cloud})
    if custom:
        warnings.append(f"custom cloud(s) {', '.join(custom)}: planned, but no SkyPilot/Pulumi files are generated for them")
    terms = spec.infrastructure.terms()
    if "spot" in terms and not any(o.spot_price_per_hour for o in in_clouds):
        warnings.append("spot: true, but no allowed offer has a spot price; planning on-demand only")
    for term in (t for t in terms if t.startswith("committed")):
        if not any(o.purchase_price(term) for o in in_clouds):
            warnings.append(f"purchase_terms allows {term}, but no allowed offer has a {term} price (hetinfra prices "
                            "--json lists them; add yours in an offers CSV); planning without it")
    return warnings


def _planned_model(spec: ServiceSpec, i: int, base: Path, known_regions: list[str], at_) -> PlannedModel:
    """``spec.models[i]`` checked (its architecture, request classes, context, demand origins) with its
    estimator context and variants."""
    m = spec.models[i]
    at = f"{at_('models', i)}: models[{i}] ({m.name})"
    arch = model_arch(m, _arch_where(at_, m, ("models", i)), base)
    classes = tuple(request_classes(m, base))
    _check_context(at, arch, classes)
    for region in (m.demand.origins or {}):
        if region not in known_regions:
            raise InvalidInputError(
                f"{at_('models', i, 'demand', 'origins', region)}: models[{i}].demand.origins: no allowed offer in "
                f"region '{region}'; {did_you_mean(region, known_regions)}")
    names = tuple(dict.fromkeys(n.lower() for n in (m.name, m.model or "", m.source) if n))
    ctx = ModelContext(names=names, arch=arch, precision=m.precision, ttft_ms=m.slo.ttft_ms, tpot_ms=m.slo.tpot_ms,
                       vllm_version=spec.deploy.vllm_version, estimator=spec.planning.estimator)
    variants = _variants(m, i, classes, base, at_, spec.deploy.vllm_version, spec.planning.estimator)
    return PlannedModel(spec=m, arch=arch, classes=classes, ctx=ctx, variants=variants)


def _arch_where(at_, m, path: tuple) -> str:
    """``file:line:col: models[0].architecture`` (or ``.model``): the spec field that gives the
    architecture of ``m`` (a model or a variant at ``path``), for the errors of reading it."""
    field = path + ("architecture" if m.architecture is not None else "model",)
    return f"{at_(*field)}: {dotted(field)}"


def _check_context(at: str, arch: ModelArch | None, classes) -> None:
    if arch is None:
        return
    for c in classes:
        if c.input_tokens + c.output_tokens > arch.max_context:
            raise InvalidInputError(
                f"{at}: requests {c.name} need {c.input_tokens + c.output_tokens} tokens of context; "
                f"{arch.name} supports {arch.max_context}",
                hint="lower the largest size edges, or use dataset outside: clip")


def _variants(m: ModelSpec, i: int, classes, base: Path, at_, vllm_version: str,
              estimator: str = "builtin") -> tuple[PlannedVariant, ...]:
    """Resolve ``m.variants``: each variant's architecture and accuracy score, and whether it meets
    the floor. Profile rows apply to a variant when their ``model`` is ``<served name>:<variant>``, or
    its source when no other variant of the model loads the same source (an fp8 variant quantized
    online shares its source with the bf16 one)."""
    if not m.variants:
        return ()
    given = [v.accuracy is not None for v in m.variants]
    if any(given) and not all(given):
        j = given.index(False)
        raise InvalidInputError(
            f"{at_('models', i, 'variants', j)}: models[{i}].variants[{j}] ({m.variants[j].name}): give `accuracy` "
            "for every variant of the model or for none",
            hint=f"the built-in scores are on one scale ({SCALE}); yours may be on another, and a floor can only "
                 "compare scores on one scale")
    sources = [m.variant_spec(v.name).source.lower() for v in m.variants]
    out = []
    for j, v in enumerate(m.variants):
        at = f"{at_('models', i, 'variants', j)}: models[{i}].variants[{j}] ({v.name})"
        vm = m.variant_spec(v.name)
        own = v.model is not None or v.architecture is not None  # else the model's own architecture
        arch = model_arch(vm, _arch_where(at_, v if own else m, ("models", i, "variants", j) if own else ("models", i)),
                          base)
        _check_context(at, arch, classes)
        score, origin = (v.accuracy, "spec") if v.accuracy is not None else (builtin_accuracy(vm.source), "builtin")
        if score is None:
            raise InvalidInputError(
                f"{at}: no accuracy score for {vm.source}: give `accuracy:`",
                hint=f"the built-in table ({SCALE}) knows only: {', '.join(known_checkpoints())}")
        names = (f"{m.name}:{v.name}".lower(),) + ((sources[j],) if sources.count(sources[j]) == 1 else ())
        ctx = ModelContext(names=names, arch=arch, precision=vm.precision, ttft_ms=vm.slo.ttft_ms,
                           tpot_ms=vm.slo.tpot_ms, vllm_version=vllm_version, estimator=estimator)
        floor = m.slo.min_accuracy
        out.append(PlannedVariant(v.name, float(score), origin, floor is None or score >= floor,
                                  PlannedModel(spec=vm, arch=arch, classes=classes, ctx=ctx)))
    return tuple(out)
