"""Safe change for replan: one run at a time, make-before-break stages, a journal to resume from.

- **Lock**: ``OUT/.replan.lock`` is held with ``flock`` for the whole run; a second run exits at
  once (exit 75, EX_TEMPFAIL) and touches nothing. The kernel drops the lock when a process
  dies, so a killed run never leaves a stale lock.
- **Stages**: without a cap, ``make`` (what runs ∪ the new plan: every new instance is added
  while the old ones still serve) then, once the new endpoints answer ``/health``, ``break``
  (the new plan). With ``--max-changes N`` a run makes at most N instance changes: additions
  first (safe: capacity only grows), removals only when nothing is left to add (safe: what
  remains still contains the new plan); the next cron run continues from there.
- **Journal**: ``OUT/replan.json`` (atomic) holds the target plan and each stage's status; a run
  that finds an unfinished journal finishes it before anything else. It is first written when a
  stage's first step begins: a run that fails before (a preflight) leaves no half-way state.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from pathlib import Path
from typing import Iterator, Literal, Optional

from pydantic import BaseModel, ConfigDict

from hetinfra.fileio import atomic_write_text, dumps_strict, present
from hetinfra.deploy.state import now
from hetinfra.document import Allocation, Plan
from hetinfra.document.consistency import unit_cost
from hetinfra.errors import HetinfraError
from hetinfra.spec.adapters import adapter_of, base_class

JOURNAL = "replan.json"
LOCK = ".replan.lock"


class LockedError(HetinfraError):
    """Another replan holds the lock; this one did nothing (exit 75, EX_TEMPFAIL)."""

    exit_code = 75


@contextlib.contextmanager
def replan_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/.replan.lock``; a missing OUT is an error (the lock never creates the state dir)."""
    if not out.is_dir():
        from hetinfra.errors import InvalidInputError

        raise InvalidInputError(f"--state {out}: no such directory", hint="pass the --out directory of the running "
                                                                         "deployment")
    fd = _lock_file(out / LOCK)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            raise LockedError(f"another replan is running on {out} ({holder}); this run did nothing",
                              hint="it exits 75 so cron can tell; the next scheduled run will go ahead") from None
        try:  # who holds it, for the run that finds it held (a full disk: exit 2 naming the file)
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} since {now()}".encode())
        except OSError as exc:
            from hetinfra.errors import WriteError

            raise WriteError.of(exc, out / LOCK) from None
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _lock_file(path: Path) -> int:
    """A descriptor of the regular file ``path`` (created where there is none). Anything else there (a
    folder, a FIFO, a link, which a run would follow) is exit 2 naming it: os.open or ftruncate on it
    was a traceback."""
    from hetinfra.errors import InvalidInputError

    fix = f"remove {path} (replan creates it; a running replan holds it only while it runs)"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        why = "it is a symbolic link" if path.is_symlink() else exc.strerror or exc
        raise InvalidInputError(f"cannot take the replan lock {path}: {why}", hint=fix) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InvalidInputError(f"the replan lock {path} is not a regular file (a pipe, socket or device)", hint=fix)
    return fd


def _fleets(running: list[Allocation], new_plan: Plan) -> tuple[dict[str, Allocation], dict[str, int]]:
    """(unit id -> its allocation, the new plan's record first; unit id -> replicas running)."""
    info = {a.unit: a for a in running} | {a.unit: a for a in new_plan.allocations}
    return info, {a.unit: a.count for a in running}


def stage_counts(running: list[Allocation], new_plan: Plan,
                 max_changes: int | None) -> tuple[list[tuple[str, dict]], bool]:
    """The stages of this run as (name, unit id -> replicas), and whether they reach the new plan."""
    info, run = _fleets(running, new_plan)
    new = {a.unit: a.count for a in new_plan.allocations}
    units = sorted(set(run) | set(new))
    union = {u: max(run.get(u, 0), new.get(u, 0)) for u in units}
    if max_changes is None:
        target = {u: new.get(u, 0) for u in units}
        stages = [] if union == {u: run.get(u, 0) for u in units} else [("make", union)]
        return stages + ([("break", target)] if target != union else []), True
    budget = max_changes
    counts = {u: run.get(u, 0) for u in units}
    adds = [u for u in units if new.get(u, 0) > run.get(u, 0)]
    name = "make" if adds else "break"
    for u in adds or [u for u in units if run.get(u, 0) > new.get(u, 0)]:
        step = info[u].nodes_per_replica
        k = min(abs(new.get(u, 0) - run.get(u, 0)), budget // step)
        counts[u] += k if adds else -k
        budget -= k * step
    done = counts == {u: new.get(u, 0) for u in units}
    return [(name, counts)], done


def fleet_gpus(counts: dict, info: dict[str, Allocation]) -> int:
    """GPUs of a fleet given as unit id -> replicas (``info``: unit id -> its allocation)."""
    return sum(n * info[u].gpus_per_replica() for u, n in counts.items())


def running_kept(counts: dict, run: dict[str, int], info: dict[str, Allocation]) -> int:
    """GPUs of the running fleet ``run`` that ``counts`` keeps: new replicas (a unit that does not
    run yet, or grows) are not counted, so a cut cannot be hidden behind what the same run adds."""
    return fleet_gpus({u: min(counts.get(u, 0), n) for u, n in run.items()}, info)


def cap_cut(stages: list[tuple[str, dict]], running: list[Allocation], new_plan: Plan,
            max_cut: float, why: str | None = None) -> tuple[list[tuple[str, dict]], bool, str | None]:
    """Keep >= (1 - max_cut) of the running fleet's GPUs running through the last stage of this run:
    replicas the cut removes are kept back (units in id order, one replica at a time) until it is.
    Only GPUs that run now count (:func:`running_kept`): ten running GPUs of which seven go are a
    70% cut, whatever the run adds; the one exception is a fleet so small that one replica exceeds
    the cap (1 GPU of 1), which may move one replica per run to capacity this run adds. Returns the
    stages, whether they were capped, and a line saying so. A scheduled replan that trusts a bad
    forecast or a broken feed can then halve the fleet at most, never empty it in one run."""
    if not stages:
        return stages, False, None
    info, run = _fleets(running, new_plan)
    before = fleet_gpus(run, info)
    floor = before * (1 - max_cut)
    name, counts = stages[-1]
    counts = dict(counts)
    planned_kept = running_kept(counts, run, info)
    if planned_kept >= floor - 1e-9:
        return stages, False, None
    cut = sorted(u for u in counts if counts[u] < run.get(u, 0))
    for u in cut:
        while counts[u] < run[u] and running_kept(counts, run, info) < floor - 1e-9:
            counts[u] += 1
    rule = why or f"at most {max_cut:.0%} removed per run, --max-cut-pct"
    smallest = min(cut, key=lambda x: (info[x].gpus_per_replica(), x))
    moved = {**counts, smallest: run[smallest] - 1}
    if max_cut > 0 and all(counts[u] == run[u] for u in cut) and fleet_gpus(moved, info) >= floor - 1e-9:
        # a fleet so small that one replica is more than the cap (1 GPU of 1) would never move to
        # new capacity: one replica per run may go when what this run adds makes up for it
        counts = moved
        rule += "; one replaced replica per run may always go"
        if counts == stages[-1][1]:
            return stages, False, None
    line = (f"capacity cut capped: this run keeps {running_kept(counts, run, info)} of {before} running GPUs "
            f"(the new plan keeps {planned_kept} of them; {rule}); the next run continues, or use --force")
    return stages[:-1] + [(name, counts)], True, line


def stage_moves(stages: list[tuple[str, dict]], running: list[Allocation], new_plan: Plan) -> tuple[int, int]:
    """(instances launched, instances removed) by ``stages`` from what runs, stage after stage: what
    this run does, which --max-changes or the cut cap may make less than the whole change."""
    info, prev = _fleets(running, new_plan)
    up = down = 0
    for _, counts in stages:
        for u in set(prev) | set(counts):
            delta = (counts.get(u, 0) - prev.get(u, 0)) * info[u].nodes_per_replica
            up, down = up + max(0, delta), down + max(0, -delta)
        prev = dict(counts)
    return up, down


def stage_cost(stages: list[tuple[str, dict]], running: list[Allocation], new_plan: Plan) -> float:
    """$/h of the fleet ``stages`` leave running (their last stage's replicas; what runs where there is
    none), each replica at its allocation's $/h per replica (the new plan's record first): what a
    capped run leaves until the next, which may cost more than both ends (its additions are made
    before the capped removals: make-before-break)."""
    info, run = _fleets(running, new_plan)
    counts = stages[-1][1] if stages else run
    return sum(n * info[u].cost_usd_per_hour / info[u].count for u, n in counts.items() if n and info[u].count)


def render_stages(stages: list[tuple[str, dict]], running: list[Allocation]) -> list[str]:
    """The replica changes this run makes, stage by stage (what a dry run shows it would apply)."""
    run = {a.unit: a.count for a in running}
    lines, prev = [], dict(run)
    for name, counts in stages:
        moves = [f"{u} {prev.get(u, 0)} -> {n}" for u, n in sorted(counts.items()) if n != prev.get(u, 0)]
        lines.append(f"stage {name}: " + ("; ".join(moves) if moves else "no replica changes"))
        prev = dict(counts)
    return lines


def stage_plan(new_plan: dict, running: list[dict], counts: dict) -> dict:
    """A plan.json whose allocations have ``counts`` replicas (new plan's records first), routed only
    to them, as every plan.json is (hetinfra.document.consistency): a stage cut short by --max-changes
    may not yet run a unit the new plan routes to. Its routes are dropped; a class left with none goes
    to its model's staged units whose engines take it, in equal shares, or is listed unmet."""
    info = {a["unit"]: a for a in running} | {a["unit"]: a for a in new_plan["allocations"]}
    allocations = []
    for uid in sorted(counts):
        if counts[uid] <= 0:
            continue
        a = {k: v for k, v in info[uid].items() if k != "path"}
        a["count"] = counts[uid]
        a["instances"] = counts[uid] * int(a.get("nodes_per_replica") or 1)
        if a.get("counts_by_period"):  # a top-up staged short of its peak runs at most what is staged
            a["counts_by_period"] = [min(int(c), counts[uid]) for c in a["counts_by_period"]]
        a["cost_usd_per_hour"] = round(unit_cost(a["price_per_instance_usd_per_hour"], a["instances"],
                                                 int(a.get("nodes_per_replica") or 1), a.get("counts_by_period")), 4)
        allocations.append(a)
    cost = round(sum(a["cost_usd_per_hour"] for a in allocations), 4)
    models = [dict(m, cost_usd_per_hour=round(sum(a["cost_usd_per_hour"] for a in allocations
                                                  if a["model"] == m["name"]), 4)) for m in new_plan["models"]]
    staged = {a["unit"] for a in allocations}
    sizes = {(m["name"], c["name"]): (c["input_tokens"] + c["output_tokens"], m["max_model_len"])
             for m in new_plan["models"] for c in m["classes"]}
    unmet = dict(new_plan.get("unmet_rps") or {})

    def routed(model: str, cls: str, rows: list[dict], origin: bool) -> list[dict]:
        kept = [e for e in rows if e["unit"] in staged]
        if kept or not rows:
            return kept
        need, default = sizes.get((model, base_class(cls)), (0, 0))
        adapter = adapter_of(cls)  # an adapter's class goes only to staged units that hold it
        takers = [a for a in allocations if a["model"] == model and (a.get("max_model_len") or default) >= need
                  and (adapter is None or adapter in {h["name"] for h in ((a.get("adapters") or {}).get("held") or ())})]
        rps = sum(float(e["rps"]) for e in rows)
        if not takers:
            if not origin:  # the class's whole rate: its origins' rows split the same requests
                unmet[f"{model}/{cls}"] = round(unmet.get(f"{model}/{cls}", 0.0) + rps, 6)
            return []
        extra = (lambda a: {"deployment_unit": a["deployment_unit"], "region": a["region"], "network_ms": None}) \
            if origin else (lambda a: {})
        return [{"unit": a["unit"], **extra(a), "share": round(1 / len(takers), 6), "rps": round(rps / len(takers), 6)}
                for a in takers]

    routing = {m: {c: routed(m, c, rows, False) for c, rows in per.items()} for m, per in new_plan["routing"].items()}
    doc = dict(new_plan, allocations=allocations, cost_usd_per_hour=cost, models=models, routing=routing)
    if new_plan.get("routing_by_origin"):
        doc["routing_by_origin"] = {m: {o: {c: routed(m, c, rows, True) for c, rows in classes.items()}
                                        for o, classes in per.items()} for m, per in new_plan["routing_by_origin"].items()}
    if unmet != (new_plan.get("unmet_rps") or {}):
        doc["unmet_rps"] = unmet
    return doc


class JournalStage(BaseModel):
    """One stage of a replan run: its name (make or break), the replicas per unit it applies, how far it got."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str
    counts: dict[str, int]
    status: Literal["pending", "running", "failed", "done"]


class JournalDoc(BaseModel):
    """``OUT/replan.json``: the target plan, what ran before, and each stage's status (written whole
    after every change; keys of other hetinfra versions are kept)."""

    model_config = ConfigDict(extra="allow", strict=True)

    status: Literal["running", "failed", "done"]
    started_at: Optional[str] = None
    pid: Optional[int] = None
    complete: Optional[bool] = None
    new_plan: dict  # plan.json's dict of the target (parsed where it is applied)
    running_before: list[dict] = []  # state.json's allocations when the run started
    error: Optional[str] = None
    stages: list[JournalStage]
    finished_at: Optional[str] = None


def _read_journal(path: Path) -> JournalDoc:
    """replan.json through the one reader (a FIFO or a nest is exit 2, not a hang or a RecursionError),
    parsed as the journal a run writes (exit 2 naming the first wrong field otherwise)."""
    from hetinfra.document.load import parse_document
    from hetinfra.fileio import read_json

    hint = f"it is written by replan --apply; if no replan is running, move {path.name} aside to start afresh"
    return parse_document(JournalDoc, read_json(path, "replan journal", hint=hint), path, hint=hint)


class Journal:
    def __init__(self, out: Path):
        self.path = out / JOURNAL
        self.doc: JournalDoc | None = _read_journal(self.path) if present(self.path) else None
        #: whether this doc is on disk: a journal started by this run is written once its first stage runs
        self.recorded = self.doc is not None

    @property
    def unfinished(self) -> bool:
        return self.doc is not None and self.doc.status != "done"

    def start(self, new_plan: dict, stages: list[tuple[str, dict]], complete: bool, running: list[dict]) -> None:
        self.doc = JournalDoc(status="running", started_at=now(), pid=os.getpid(), complete=complete,
                              new_plan=new_plan, running_before=running, error=None,
                              stages=[JournalStage(name=n, counts=c, status="pending") for n, c in stages])
        self.recorded = False

    def set(self, stage: JournalStage, status: str, error: str | None = None) -> None:
        stage.status = status
        if error:
            self.doc.status, self.doc.error = "failed", f"{stage.name}: {error}"
        self.save()

    def finish(self) -> None:
        self.doc.status, self.doc.finished_at = "done", now()
        self.save()

    def save(self) -> None:
        # a link (to a share, as state.json may be: deploy.state.DeployState.save) is written through and kept
        atomic_write_text(self.path, dumps_strict(self.doc.model_dump(mode="json", exclude_unset=True), indent=2) + "\n",
                          through_links=True)
        self.recorded = True
