"""Allocation ILP at Coral's scales (issue 4). Prints model size, build and solve time, gap.

    python benchmarks/bench_scale.py

extended: 6 models, 5 GPU kinds x {1,2,4,8}-GPU instances (20 configurations), 3 regions,
          up to 4 nodes per template. Target: gap <= 1% within 20 s in total.
core:     3 models, 3 GPU kinds x 4 sizes (12 configurations), 2 regions. Target: 2 s.
mixed:    extended with planning.allow_mixed_pipelines (mixed-GPU pipeline templates too).
Offers are the embedded snapshot's real prices per GPU, scaled to the instance size, on one
cloud with made-up regions so every configuration exists in every region. Each row also shows
the library build (cold, then from the template cache) and the same ILP solved without the
warm start ("cold solve").

    python benchmarks/bench_scale.py --fleet [--models 1,8,16,32,64] [--repeat 3]

fleet:    1..64 models (the six architectures above in turn) over 12 made-up regions and 11 GPU
          types x {1,2,4,8}-GPU instances: "unlinked" (nothing couples the models), "linked"
          (L4, A10G, L40S and H100 capped at 16 GPUs per region, shared by every model, and a
          budget), and 8 models x 12 regions with those caps and locality 0.5 over three origin
          regions. Each row: wall time of plan() (medians over --repeat runs; template library
          cached), solve time, method, blocks, gap, $/h. Works against older hetinfra versions too
          (no method/blocks there).

    python benchmarks/bench_scale.py --front [--repeat 3] [--versus OTHER/.venv/bin/python]

front:    the front door (issue 26): `hetinfra plan` (verified; and --no-verify) and `hetinfra --help` on
          Mélange V1 at 32 req/s, each a fresh process timed start to exit, beside a bare PuLP+HiGHS
          process that builds and solves Mélange's own ILP for the same case
          (benchmarks/bare_pulp_melange.py); medians and ratios to the bare solve. --versus: another
          checkout's processes in the same rounds, each after this one's, and this one's ratio to them.

    python benchmarks/bench_scale.py --shared [--models 8,32] [--repeat 3]

shared:   issue 26's cases, the whole `hetinfra plan` (a fresh process, baselines included, template
          cache warm), verified and --no-verify: median wall and CPU seconds (user + system, every thread)
          over --repeat runs, then gap, status, block
          methods, blocks and verification rounds of the last run. Coral's extended case; the fleet's
          8 and 32 models with nothing linking them ("independent"); and the linked fleet: the same
          models and offers, H100 and A100-80GB capped at 8 GPUs in each of the 5 cheapest regions
          (shared by every model) and a budget of $60/h per model. `--mix other --seed K` puts other
          fleets in the independent and linked cases (write_other: other architectures in another order,
          log-uniform rates, a class histogram and objective per model; linked: caps binding in three regions).
          --versus: each round runs both checkouts (their order swapped every round) and a last line per case
          gives the medians of the rounds' this/versus ratios of wall and of CPU seconds.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
GPU_PRICE = {"L4": 0.80, "A10G": 1.01, "L40S": 1.86, "A100-80GB": 3.67, "H100": 6.88}  # $/GPU-h, snapshot-like
MEM = {"L4": 24, "A10G": 24, "L40S": 48, "A100-80GB": 80, "H100": 80}
MODELS = ["llama-3.1-8b", "mistral-7b", "phi-4", "qwen3-32b", "llama-3.1-70b", "mixtral-8x7b"]
HIST = {"input_edges": [0, 250, 1000, 4000], "output_edges": [0, 100, 500, 1000],
        "weights": [[0.2, 0.25, 0.05], [0.1, 0.2, 0.05], [0.05, 0.08, 0.02]]}


def write_case(d: Path, n_models: int, gpus: list[str], regions: list[str], mixed: bool = False) -> Path:
    rows = ["cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"]
    for r in regions:
        for g in gpus:
            for n in (1, 2, 4, 8):
                price = GPU_PRICE[g] * n * (1.0 + 0.03 * regions.index(r))
                rows.append(f"{'aws' if mixed else 'bench'},{r},{g.lower()}-x{n},{g},{n},{MEM[g]},{8 * n},{32 * n},{price:.4f},")
    (d / "offers.csv").write_text("\n".join(rows) + "\n")
    models = [{"name": f"m{i}-{m.replace('.', '')}", "model": m, "source": f"org/{m}",
               "slo": {"ttft_ms": 3000, "tpot_ms": 150},
               "demand": {"rate_rps": 4 + 3 * i, "sizes": {"histogram": HIST}}} for i, m in enumerate(MODELS[:n_models])]
    spec = {"name": "bench", "models": models,
            "infrastructure": {"clouds": ["aws" if mixed else "bench"], "regions": regions},
            "planning": {"mip_gap": 0.01, "time_limit_s": 20, "max_nodes_per_template": 4,
                         "allow_mixed_pipelines": mixed}, "offers": ["offers.csv"]}
    (d / "s.yaml").write_text(yaml.safe_dump(spec))
    return d / "s.yaml"


def run(label: str, n_models: int, gpus: list[str], regions: list[str], mixed: bool = False) -> None:
    import os

    from hetinfra.plan.inputs import resolve
    from hetinfra.perf.model import PerformanceModel
    from hetinfra.plan.planner import plan
    from hetinfra.solver.solve import solve
    from hetinfra.spec.load import load_spec
    from hetinfra.plan.template_cache import TemplateCache
    from hetinfra.plan.templates import build_units

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HETINFRA_CACHE_DIR"] = str(Path(tmp) / "cache")
        path = write_case(Path(tmp), n_models, gpus, regions, mixed)
        spec, text, locate = load_spec(path)
        inputs = resolve(spec, path, text, None, locate)
        cache = TemplateCache(Path(tmp) / "cache")
        t = time.perf_counter()
        units, _ = build_units(inputs, PerformanceModel(inputs.profiles), cache)
        lib_cold = time.perf_counter() - t
        t = time.perf_counter()
        build_units(inputs, PerformanceModel(inputs.profiles), cache)
        lib_cached = time.perf_counter() - t
        t = time.perf_counter()
        pr = plan(path, with_baselines=False)  # the library comes from the cache now
        total = time.perf_counter() - t
    r = pr.result
    cold = solve(pr.problem, time_limit_s=20, mip_gap=0.01, warm=False)
    n_mixed = sum(1 for u in units if u.template.mixed)
    chosen = sum(1 for u in r.n if pr.units[u].template.mixed)
    print(f"{label:<9} models {n_models}, configs {4 * len(gpus)}, regions {len(regions)}: "
          f"library {len({u.template.id for u in units})} templates / {len(units)} units"
          + (f" ({n_mixed} mixed)" if mixed else "") + f" in {lib_cold:.2f} s, cached {lib_cached:.3f} s; "
          f"after pruning {len(pr.units)} units, vars {r.size['variables']} ({r.size['integer_variables']} int), "
          f"cons {r.size['constraints']}; build {r.build_s:.2f} s, solve {r.solve_s:.2f} s "
          f"(warm start: {r.warm_start}), gap {100 * (r.gap or 0):.3f}%, {r.status}, ${r.objective:.2f}/h"
          + (f", {chosen} mixed unit(s) chosen" if mixed else "")
          + f"; plan total {total:.2f} s | cold solve {cold.solve_s:.2f} s, gap {100 * (cold.gap or 0):.3f}%, "
          f"{cold.status}, ${cold.objective:.2f}/h")


# --- front door (issue 26 point 5): `hetinfra plan` against a bare PuLP+HiGHS process --------------

def front_case(d: Path) -> Path:
    """Mélange V1 at 32 req/s (the shared regression fixtures, sliced routing, slice factor 8) as a
    hetinfra spec in ``d``: the case tests/solver/test_melange_regression.py checks against Mélange's optimum."""
    from tests.solver.test_melange_regression import _write_case

    import os

    # the shared reference data beside the checkout, or where HETINFRA_SHARED says (a git worktree)
    data = Path(os.environ.get("HETINFRA_SHARED") or REPO.parent / "shared") / "data" / "melange-release"
    fixtures = json.loads((data / "melange_regression_fixtures.json").read_text())
    profiles = json.loads((data / "melange_profiles_llama2-7b_feb2024.json").read_text())
    (d / "s.yaml").write_text(yaml.safe_dump(_write_case(d, fixtures, profiles, "V1", 32, "sliced")))
    return d / "s.yaml"


def front_commands(spec: Path, python: str = sys.executable, tag: str = "") -> dict[str, list[str]]:
    """Each process the front door is timed on, process start to exit (the CLI as installed beside
    ``python``); ``tag`` marks the labels of another checkout's (--versus)."""
    exe = str(Path(python).parent / "hetinfra")
    return {"hetinfra plan" + tag: [exe, "plan", str(spec)],
            "hetinfra plan --no-verify" + tag: [exe, "plan", str(spec), "--no-verify"],
            "hetinfra --help" + tag: [exe, "--help"],
            "stages" + tag: [python, __file__, "--front-stages", str(spec)]}


def front(repeat: int, versus: str | None = None) -> None:
    """Median wall of each front_commands process over ``repeat`` rounds, run in turn within each round
    (so load hits all alike), after one untimed round that fills the template cache and the OS's file
    cache; each one's ratio to the bare solve; then where `hetinfra plan`'s time goes (front_stages).
    ``versus``: another checkout's Python (its .venv/bin/python): its processes run in the same rounds,
    each right after this one's, and each figure is also given as a ratio of this one's to its."""
    import os
    import statistics

    with tempfile.TemporaryDirectory() as tmp:
        spec = front_case(Path(tmp))
        cmds = {"bare PuLP+HiGHS": [sys.executable, str(REPO / "benchmarks" / "bare_pulp_melange.py"), "V1", "32"]}
        envs = {"bare PuLP+HiGHS": dict(os.environ, HETINFRA_CACHE_DIR=str(Path(tmp) / "cache"))}
        for python, tag in [(sys.executable, "")] + ([(versus, " [versus]")] if versus else []):
            for label, cmd in front_commands(spec, python, tag).items():
                cmds[label] = cmd
                envs[label] = dict(os.environ, HETINFRA_CACHE_DIR=str(Path(tmp) / f"cache{tag.strip(' []')}"))
        # each of this one's processes beside the other's: this one's first in even rounds, second in odd ones
        order = sorted(cmds, key=lambda k: (k.replace(" [versus]", ""), k))
        flipped = sorted(cmds, key=lambda k: (k.replace(" [versus]", ""), not k.endswith(" [versus]")))
        walls: dict[str, list[float]] = {k: [] for k in cmds}
        cpus: dict[str, list[float]] = {k: [] for k in cmds}
        stages: dict[str, list[dict]] = {}
        for i in range(repeat + 1):
            for label in order if i % 2 == 0 else flipped:
                wall, cpu, stdout = _timed(cmds[label], tmp, envs[label])
                if i:
                    walls[label].append(wall)
                    cpus[label].append(cpu)
                if label.startswith("stages") and i:
                    run = stages.setdefault(label, [])
                    run.append(json.loads(stdout))
                    run[-1]["the rest: python start and exit, the bench script"] = tuple(round(total - sum(
                        v[j] for v in run[-1].values()), 4) for j, total in enumerate((wall, cpu)))
                if label.startswith("bare"):  # it must have found Mélange's optimum (the fixtures' $32.12/h)
                    assert json.loads(stdout.splitlines()[-1])["cost"] == 32.12, stdout
    _front_report(repeat, walls, cpus, stages, versus)


def _front_report(repeat: int, walls: dict, cpus: dict, stages: dict, versus: str | None) -> None:
    import statistics

    med = {k: statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    bare, bare_cpu = med["bare PuLP+HiGHS"], cpu["bare PuLP+HiGHS"]
    print(f"Mélange V1 at 32 req/s, medians of {repeat} (template cache warm; process start to exit):", flush=True)
    for label, runs in walls.items():
        other = label + " [versus]"
        than = (f"   this/versus wall {med[label] / med[other]:5.2f}x cpu {cpu[label] / cpu[other]:5.2f}x"
                if other in med else "")
        print(f"  {label:<36} wall {med[label]:6.3f} s  {med[label] / bare:5.2f}x bare   cpu {cpu[label]:6.3f} s  "
              f"{cpu[label] / bare_cpu:5.2f}x bare   (walls {', '.join(f'{w:.2f}' for w in runs)}){than}", flush=True)
    if versus:
        print(f"  [versus]: {versus}", flush=True)
    for label, runs in stages.items():
        print(f"where `hetinfra plan` spends it ({label}: the process, stage by stage; medians):", flush=True)
        for stage in runs[0]:
            print(f"  {stage:<66} wall {statistics.median(r[stage][0] for r in runs):6.3f} s  "
                  f"cpu {statistics.median(r[stage][1] for r in runs):6.3f} s", flush=True)


def ensure_bytecode(python: str = sys.executable) -> None:
    """Byte-compile the hetinfra this interpreter runs where its bytecode is missing or stale, as
    installing it does (pip for a wheel; setup.py's BuildPy for an editable install): the processes
    timed here are what an installed hetinfra costs, beside a bare process whose PuLP pip compiled,
    not the compilation of sources edited since (every call pays that where PYTHONDONTWRITEBYTECODE
    is set, as on these machines)."""
    import subprocess

    find = ("import importlib.util as u, os\n"
            "for n in ('hetinfra', 'hetinfra.solver', 'hetinfra.price_feeds', 'hetinfra.stacks'):\n"
            "    s = u.find_spec(n)\n"
            "    print(os.path.dirname(s.origin)) if s else None")
    # run outside the checkout: `-c` puts the working directory first on sys.path, whose hetinfra would win
    dirs = subprocess.run([python, "-c", find], capture_output=True, text=True, check=True,
                          cwd=tempfile.gettempdir()).stdout.splitlines()
    subprocess.run([python, "-m", "compileall", "-q", *dirs], check=True, stdout=subprocess.DEVNULL)
    print(f"bytecode: current in {', '.join(dirs)} (compiled where missing or stale, as installing does)", flush=True)


def _timed(cmd: list[str], cwd: str, env: dict) -> tuple[float, float, str]:
    """(wall seconds from process start to exit, its CPU seconds (user + system), stdout) of ``cmd``,
    which must succeed. CPU time is what a loaded machine distorts least."""
    wall, cpu, done = _child(cmd, cwd, env)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return wall, cpu, done.stdout


def _child(cmd: list[str], cwd: str, env: dict):
    """(wall seconds from process start to exit, CPU seconds (user + system, every thread), the
    completed process) of ``cmd``."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done


def front_stages(spec: Path) -> dict[str, tuple[float, float]]:
    """What `hetinfra plan SPEC` does, stage by stage in this process: stage -> (wall s, CPU s). The
    first plan (load, resolve, templates, solve) ends where verification calls its first round; load
    and resolve are also timed on their own, before. The rest (python start and exit, this script) is
    the process's time minus these stages: see `front`."""
    import io

    out: dict[str, tuple[float, float]] = {}
    mark = [time.perf_counter(), time.process_time()]

    def lap(stage: str) -> None:
        now = [time.perf_counter(), time.process_time()]
        out[stage] = (round(now[0] - mark[0], 4), round(now[1] - mark[1], 4))
        mark[:] = now

    import gc
    import os

    try:  # what the `hetinfra` entry point sets before anything loads numpy (absent in older versions)
        from hetinfra.cli import BLAS_THREADS
    except ImportError:
        BLAS_THREADS = {}
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    import hetinfra.cli.app  # what `hetinfra` imports before the command runs

    # as hetinfra.cli.app.main() sets it (absent in older versions)
    gc.set_threshold(getattr(hetinfra.cli.app, "GC_GEN0_THRESHOLD", gc.get_threshold()[0]), *gc.get_threshold()[1:])
    from hetinfra.plan.feeds import load_feeds
    from hetinfra.plan.inputs import resolve
    from hetinfra.plan.pipeline import plan_document as verified_plan
    from hetinfra.spec.load import load_spec
    lap("import (click, the CLI, the plan stack)")
    snapshot, _ = load_feeds("snapshot")
    loaded, text, locate = load_spec(spec)
    resolve(loaded, spec, text, snapshot, locate)
    lap("load spec + offers + profiles, resolve")
    preloader = _cli_preloader()

    class FirstRound:  # hetinfra.plan.progress.Progress's hooks: lap once the first round is solved
        def round(self, rnd: int, _max_rounds: int, _result) -> None:
            if rnd == 1:
                lap("first plan: load, resolve, templates, solve")
            if preloader is not None:  # where no MIP started it (hetinfra.cli.preload.SolveStarts)
                preloader.start()

        def stage(self, _name: str) -> None: ...

        def budget(self, _budget) -> None: ...

        def requests(self, _n: int) -> None: ...

        def close(self) -> None: ...

    if preloader is None:
        _, doc = verified_plan(spec, verify=True, snapshot=snapshot, progress=FirstRound())
    else:  # `plan` starts its preloader as the first MIP starts (hetinfra.solver.mip_hooks, added with it)
        from hetinfra.solver.mip_hooks import on_mip_start

        with preloader, on_mip_start(preloader.start):
            _, doc = verified_plan(spec, verify=True, snapshot=snapshot, progress=FirstRound())
    lap("verification (rounds, trim, sustained load), baselines, plan.json")
    from rich.console import Console

    from hetinfra.plan.summary import render_summary

    render_summary(doc, Console(file=io.StringIO(), width=132, highlight=False))  # what `plan` prints on a pipe
    lap("output: the summary (Rich: imported here unless preloaded)")
    return out


def _cli_preloader():
    """What `hetinfra plan` loads beside its first solve (hetinfra.cli.preload), so that the stages are
    the command's; None for a hetinfra without it."""
    try:
        from hetinfra.cli.plan import PLAN_ASSEMBLY, SUMMARY, VERIFICATION
        from hetinfra.cli.preload import Preloader
    except ImportError:
        return None
    return Preloader(VERIFICATION + PLAN_ASSEMBLY + SUMMARY)


FLEET_PRICE = {"T4": 0.53, "L4": 0.80, "A10G": 1.01, "A10": 0.90, "L40S": 1.86, "V100": 3.06, "V100-32GB": 3.40,
               "A100": 3.00, "A100-80GB": 3.67, "H100": 6.88, "H200": 8.00}
FLEET_MEM = {"T4": 16, "L4": 24, "A10G": 24, "A10": 24, "L40S": 48, "V100": 16, "V100-32GB": 32, "A100": 40,
             "A100-80GB": 80, "H100": 80, "H200": 141}
REGIONS = [f"r{i:02d}" for i in range(12)]
CAPPED = ["L4", "A10", "A10G", "L40S", "H100"]
#: GPUs per (region, capped type), shared by all models: small enough that the per-model plans break
#: several caps from 16 models on (everyone wants the cheapest regions), so the linked case binds
LINKED_CAP = 8


def write_fleet(d: Path, n_models: int, linked: bool, locality: bool = False, budget: float | None = None) -> Path:
    rows = ["cloud,region,instance_type,gpu,gpu_count,gpu_memory_gb,vcpus,memory_gb,price_per_hour,spot_price_per_hour"]
    for i, r in enumerate(REGIONS):
        for g, price in FLEET_PRICE.items():
            for n in (1, 2, 4, 8):
                rows.append(f"bench,{r},{g.lower()}-x{n},{g},{n},{FLEET_MEM[g]},{8 * n},{32 * n},"
                            f"{price * n * (1.0 + 0.01 * i):.4f},")
    (d / "offers.csv").write_text("\n".join(rows) + "\n")
    models = []
    for i in range(n_models):
        m = MODELS[i % len(MODELS)]
        demand = {"rate_rps": 2 + (i * 7) % 11, "sizes": {"histogram": HIST}}
        if locality:
            demand["origins"] = {REGIONS[(i + j) % 12]: share for j, share in enumerate((0.5, 0.3, 0.2))}
        models.append({"name": f"m{i:02d}-{m.replace('.', '')}", "model": m, "source": f"org/{m}",
                       "slo": {"ttft_ms": 3000, "tpot_ms": 150}, "demand": demand})
    infra = {"clouds": ["bench"], "regions": REGIONS}
    if linked:
        infra["availability"] = [{"cloud": "bench", "region": r, "gpu": g, "max_gpus": LINKED_CAP}
                                 for r in REGIONS for g in CAPPED]
    elif locality:  # the caps+locality case keeps issue 16's caps (16 GPUs of L4, A10G, L40S, H100)
        infra["availability"] = [{"cloud": "bench", "region": r, "gpu": g, "max_gpus": 16}
                                 for r in REGIONS for g in ("L4", "A10G", "L40S", "H100")]
    planning = {"mip_gap": 0.01, "max_nodes_per_template": 4}
    if locality:
        planning["locality"] = 0.5
    spec = {"name": "fleet", "models": models, "infrastructure": infra, "planning": planning, "offers": ["offers.csv"]}
    if budget is not None:
        spec["budget_usd_per_hour"] = round(budget, 2)
    (d / "s.yaml").write_text(yaml.safe_dump(spec))
    return d / "s.yaml"


#: ``--mix other``: architectures (small ones more often), drawn in another order than MODELS'
OTHER_MODELS = {"llama-2-7b": 3, "llama-3.1-8b": 3, "mistral-7b": 2, "qwen3-30b-a3b": 2, "phi-4": 2, "llama-2-13b": 2,
                "qwen3-32b": 1, "mixtral-8x7b": 1, "llama-3.1-70b": 1, "llama-2-70b": 1}
OTHER_EDGES = ([0, 128, 512, 1536, 3000], [0, 64, 256, 1000])  # within llama-2's 4k context


def other_models(n_models: int, seed: int) -> list[dict]:
    """``n_models`` spec models unlike the benchmark's (``--mix other --seed K``): their architectures
    drawn by OTHER_MODELS' weights, rates log-uniform in 0.5..40 req/s, each its own class histogram
    (4 x 3 buckets of OTHER_EDGES, random weights, some empty) and objectives from tight to loose."""
    import random

    rng = random.Random(seed)
    names, weights = list(OTHER_MODELS), list(OTHER_MODELS.values())
    out = []
    for i in range(n_models):
        m = rng.choices(names, weights)[0]
        cells = [[rng.choice([0.0, rng.random(), rng.random() ** 2]) for _ in OTHER_EDGES[1][1:]]
                 for _ in OTHER_EDGES[0][1:]]
        cells[rng.randrange(len(cells))][0] += 0.5  # never an empty histogram
        total = sum(map(sum, cells))
        hist = {"input_edges": OTHER_EDGES[0], "output_edges": OTHER_EDGES[1],
                "weights": [[round(w / total, 4) for w in row] for row in cells]}
        slo = rng.choice([{"ttft_ms": 1500, "tpot_ms": 80}, {"ttft_ms": 3000, "tpot_ms": 120},
                          {"ttft_ms": 6000, "tpot_ms": 200}])
        rate = round(0.5 * (80.0 ** rng.random()), 2)
        out.append({"name": f"o{i:02d}-{m.replace('.', '')}", "model": m, "source": f"org/{m}", "slo": slo,
                    "demand": {"rate_rps": rate, "sizes": {"histogram": hist}}})
    return out


def other_caps(seed: int) -> list[dict]:
    """The linked ``--mix other`` fleet's caps: binding in a few regions only (three of the cheapest
    regions, 4 to 16 GPUs of four GPU types each), the rest open."""
    import random

    rng = random.Random(seed + 1)
    regions = rng.sample(REGIONS[:6], 3)
    return [{"cloud": "bench", "region": r, "gpu": g, "max_gpus": rng.choice([4, 8, 16])}
            for r in regions for g in rng.sample(["L4", "A10G", "L40S", "A100-80GB", "H100"], 4)]


def write_other(d: Path, n_models: int, linked: bool, seed: int) -> Path:
    """The fleet of ``write_fleet`` (same offers) with ``other_models`` (``--mix other --seed K``);
    linked: ``other_caps`` and a budget of $60/h per model."""
    path = write_fleet(d, n_models, linked=False)
    spec = yaml.safe_load(path.read_text())
    spec["models"] = other_models(n_models, seed)
    if linked:
        spec["infrastructure"]["availability"] = other_caps(seed)
        spec["budget_usd_per_hour"] = BUDGET_PER_MODEL * n_models
    path.write_text(yaml.safe_dump(spec))
    return path


def forget_solves() -> None:
    """Clear the in-process memo of solves (hetinfra.solver.memo; absent in older versions)."""
    try:
        from hetinfra.solver.memo import clear
    except ImportError:
        return
    clear()


def gpu_use(pr) -> dict:
    """GPUs per (cloud, region, gpu) group of a plan."""
    used: dict = {}
    for uid, c in pr.result.n.items():
        for g, n in pr.units[uid].gpu_use.items():
            used[g] = used.get(g, 0) + n * c
    return used


def fleet_row(label: str, n_models: int, linked: bool, repeat: int, locality: bool = False,
              budget: float | None = None, unlinked_use: dict | None = None):
    import os
    import statistics

    from hetinfra.errors import HetinfraError
    from hetinfra.plan.planner import plan

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HETINFRA_CACHE_DIR"] = str(Path(tmp) / "cache")
        path = write_fleet(Path(tmp), n_models, linked, locality, budget)
        walls, solves, pr, err = [], [], None, None
        try:
            plan(path, with_baselines=False)  # fills the template cache
            for _ in range(repeat):
                forget_solves()  # each run solves afresh, as a new `hetinfra plan` process would
                t = time.perf_counter()
                pr = plan(path, with_baselines=False)
                walls.append(time.perf_counter() - t)
                solves.append(pr.result.solve_s)
        except HetinfraError as exc:
            err = f"{type(exc).__name__} (exit {exc.exit_code}): {str(exc)[:70]}"
    if err:
        print(f"{label:<28} {err}", flush=True)
        return None
    r = pr.result
    method = getattr(r, "method", "joint")
    blocks = getattr(r, "blocks", [])
    joint = sum(1 for b in blocks if not b["method"].startswith("independent"))
    how = ",".join(sorted({b["method"] for b in blocks if not b["method"].startswith("independent")})) or method
    caps = pr.problem.caps
    binding = ""
    if caps:
        used = gpu_use(pr)
        full = sum(1 for g, c in caps.items() if used.get(g, 0) >= c)
        broken = sum(1 for g, c in caps.items() if (unlinked_use or {}).get(g, 0) > c)
        binding = f"  caps {len(caps)}: {full} full" + (f", {broken} broken by the unlinked plan" if unlinked_use else "")
    print(f"{label:<28} wall {statistics.median(walls):7.2f} s  solve {statistics.median(solves):7.2f} s  "
          f"{how:<12} blocks {len(blocks) or 1:>3} ({joint} linked)  gap {100 * (r.gap or 0):6.3f}%  "
          f"{r.status:<10} ${r.objective:10.2f}/h  units {len(pr.units)}{binding}", flush=True)
    return r.cost(pr.problem), gpu_use(pr)


def fleet(models: list[int], repeat: int) -> None:
    for n in models:
        cost, use = fleet_row(f"fleet {n:>2} models unlinked", n, False, repeat) or (None, None)
        fleet_row(f"fleet {n:>2} models linked", n, True, repeat, budget=1.5 * cost if cost else None,
                  unlinked_use=use)
    fleet_row("fleet  8 x 12 caps+locality", 8, False, repeat, locality=True)


#: issue 26's linked fleet: H100 and A100-80GB capped in the 5 cheapest regions (r00..r04, prices rise 1%
#: per region), shared by every model, and a budget per model
SHARED_CAPPED, SHARED_REGIONS, SHARED_CAP, BUDGET_PER_MODEL = ("H100", "A100-80GB"), REGIONS[:5], 8, 60.0


def write_shared(d: Path, n_models: int) -> Path:
    """The fleet spec of ``write_fleet`` with issue 26's caps and a budget of $60/h per model."""
    path = write_fleet(d, n_models, linked=False, budget=BUDGET_PER_MODEL * n_models)
    spec = yaml.safe_load(path.read_text())
    spec["infrastructure"]["availability"] = [{"cloud": "bench", "region": r, "gpu": g, "max_gpus": SHARED_CAP}
                                              for r in SHARED_REGIONS for g in SHARED_CAPPED]
    path.write_text(yaml.safe_dump(spec))
    return path


def shared_row(n_models: int, verify: bool, repeat: int, kind: str = "linked", versus: str | None = None,
               mix: tuple[str, int] = ("bench", 0)) -> None:
    """``hetinfra plan`` (the CLI, a fresh process each run, baselines included, template cache warm):
    median wall over ``repeat`` runs, and the last run's gap, method, blocks, rounds. ``kind``:
    "linked" (issue 26's capped fleet, write_shared), "independent" (the same models and offers with
    nothing linking them, write_fleet) or "coral" (Coral's extended case, write_case). ``versus``:
    another checkout's Python (its ``.venv/bin/python``): each run of this one is followed by one of
    that one on the same spec, and both rows are printed (before/after side by side). ``mix``:
    ("other", K) puts write_other's models (and, linked, its caps) in the independent and linked
    fleets instead of the benchmark's."""
    import os

    pythons = [sys.executable] + ([versus] if versus else [])
    with tempfile.TemporaryDirectory() as tmp:
        if mix[0] == "other" and kind in ("linked", "independent"):
            write_other(Path(tmp), n_models, kind == "linked", mix[1])
        elif kind == "linked":
            write_shared(Path(tmp), n_models)
        elif kind == "independent":
            write_fleet(Path(tmp), n_models, linked=False)
        else:
            write_case(Path(tmp), 6, list(GPU_PRICE), ["r-east", "r-west", "r-eu"])
        runs = {py: ([], [], None) for py in pythons}
        for py in pythons:  # each interpreter its own template cache, filled first
            env = dict(os.environ, HETINFRA_CACHE_DIR=str(Path(tmp) / f"cache-{pythons.index(py)}"))
            _plan_run(py, tmp, env, False)
        for i in range(repeat):  # this one first in even rounds, the other first in odd ones
            for py in pythons if i % 2 == 0 else pythons[::-1]:
                env = dict(os.environ, HETINFRA_CACHE_DIR=str(Path(tmp) / f"cache-{pythons.index(py)}"))
                wall, cpu, out = _plan_run(py, tmp, env, verify)
                runs[py] = (runs[py][0] + [wall], runs[py][1] + [cpu], out)
    label = (f"{kind} {n_models:>2} models" + (f" other-{mix[1]}" if mix[0] == "other" else "")
             if kind != "coral" else "coral extended") + \
        f" {'verified' if verify else '--no-verify'}"
    for py in pythons:
        walls, cpus, out = runs[py]
        _shared_line(label + ("" if not versus else " [this]" if py == sys.executable else " [versus]"),
                     walls, cpus, out, verify)
    if versus and all(runs[py][2].returncode in (0, 10) for py in pythons):
        import statistics

        (w0, c0, _), (w1, c1, _) = runs[pythons[0]], runs[pythons[1]]
        print(f"{label + ' this/versus':<34} wall {statistics.median(a / b for a, b in zip(w0, w1)):5.2f}x  "
              f"cpu {statistics.median(a / b for a, b in zip(c0, c1)):5.2f}x  (medians of the rounds' ratios)",
              flush=True)


def _plan_run(python: str, cwd: str, env: dict, verify: bool):
    """One `hetinfra plan` process: (its wall seconds, its CPU seconds, the completed process)."""
    return _child([python, "-m", "hetinfra.cli", "plan", "s.yaml", "--json"] + ([] if verify else ["--no-verify"]),
                  cwd, env)


def _shared_line(label: str, walls: list[float], cpus: list[float], out, verify: bool) -> None:
    import json
    import statistics

    if out.returncode not in (0, 10):
        print(f"{label:<34} exit {out.returncode}: {out.stderr.strip()[-200:]}", flush=True)
        return
    doc = json.loads(out.stdout)
    sv = doc["solver"]
    fid = doc.get("fidelity") or {}
    rounds = fid.get("rounds", 0) if verify else 0
    reps = (fid.get("replications") or {}).get("simulated")
    how = ",".join(sorted({b["method"] for b in sv.get("blocks", [])})) or sv.get("method", "joint")
    print(f"{label:<34} wall {statistics.median(walls):7.2f} s (runs {', '.join(f'{w:.1f}' for w in walls)})  "
          f"cpu {statistics.median(cpus):6.2f} s  "
          f"gap {100 * (sv['gap'] or 0):6.3f}%  {sv['status']:<10} {how:<24} blocks {len(sv.get('blocks', [])):>2}  "
          f"rounds {rounds}  ${doc['cost_usd_per_hour']:.2f}/h" + (f"  replications {reps}" if reps else ""), flush=True)


def solver_seconds(n_models: int, verify: bool) -> tuple[float, float, float, float, int]:
    """One in-process `plan` of the linked fleet (baselines included, template cache warm, solve memo
    cleared): its wall and CPU seconds, the wall and CPU seconds spent in ``solve()`` (every
    verification round's and baseline's solve), and how many solves. CPU seconds (this process's)
    are what a shared, loaded machine distorts least."""
    import os

    import hetinfra.solver.solve as solve_mod
    from hetinfra.plan.pipeline import plan_document as verified_plan

    spent = []
    real = solve_mod.solve

    def timed(*args, **kw):
        t, c = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kw)
        finally:
            spent.append((time.perf_counter() - t, time.process_time() - c))

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HETINFRA_CACHE_DIR"] = str(Path(tmp) / "cache")
        path = write_shared(Path(tmp), n_models)
        verified_plan(path, verify=False, with_baselines=False)  # fills the template cache
        forget_solves()
        solve_mod.solve = timed  # the planner looks solve up at each call
        try:
            t, c = time.perf_counter(), time.process_time()
            verified_plan(path, verify=verify, with_baselines=True)
            wall, cpu = time.perf_counter() - t, time.process_time() - c
        finally:
            solve_mod.solve = real
    return wall, cpu, sum(w for w, _ in spent), sum(c for _, c in spent), len(spent)


def shared(models: list[int], repeat: int, versus: str | None = None, kinds: str = "coral,independent,linked",
           mix: tuple[str, int] = ("bench", 0)) -> None:
    for verify in (False, True) if "coral" in kinds else ():
        shared_row(6, verify, repeat, kind="coral", versus=versus)
    for n in models if "independent" in kinds else ():
        for verify in (False, True):
            shared_row(n, verify, repeat, kind="independent", versus=versus, mix=mix)
    for n in models if "linked" in kinds else ():
        for verify in (False, True):
            shared_row(n, verify, repeat, versus=versus, mix=mix)
            if versus or mix[0] != "bench":
                continue
            wall, cpu, solve_wall, solve_cpu, solves = solver_seconds(n, verify)
            print(f"{'':<30} one in-process run: wall {wall:7.2f} s (CPU {cpu:6.2f} s), in solve() {solve_wall:6.2f} s "
                  f"(CPU {solve_cpu:6.2f} s, {solves} solves)", flush=True)


def main() -> None:
    import argparse

    if sys.argv[1:2] == ["--front-stages"]:  # front()'s child: the hetinfra of this interpreter, not REPO's
        print(json.dumps(front_stages(Path(sys.argv[2]))), flush=True)
        import gc

        gc.freeze()  # as hetinfra.cli.app.main leaves (absent in older versions: harmless there)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleet", action="store_true", help="the 1..64-model fleet cases instead of Coral's")
    ap.add_argument("--shared", action="store_true",
                    help="issue 26's linked fleet (H100, A100-80GB capped in 5 regions, $60/h per model), "
                         "`hetinfra plan` verified and --no-verify")
    ap.add_argument("--models", default=None, help="fleet sizes (default 1,8,16,32,64; --shared: 8,32)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--versus", default=None,
                    help="--shared, --front: another checkout's Python (e.g. /work/main/.venv/bin/python): its "
                         "`hetinfra plan` runs in turn with this one's on the same specs (before/after side by side)")
    ap.add_argument("--kinds", default="coral,independent,linked", help="--shared: which cases")
    ap.add_argument("--mix", choices=("bench", "other"), default="bench",
                    help="--shared: the fleets' models: the benchmark's (MODELS in turn), or `other` (write_other: "
                         "other architectures, rates, class histograms and objectives; linked: caps binding in a few "
                         "regions), drawn from --seed")
    ap.add_argument("--seed", type=int, default=0, help="--mix other: which fleet")
    ap.add_argument("--front", action="store_true",
                    help="the front door: `hetinfra plan` on Mélange V1 at 32 req/s against a bare PuLP+HiGHS process")
    args = ap.parse_args()
    if args.front:
        sys.path.insert(0, str(REPO))  # front_case writes the case with the tests' Mélange helper
        ensure_bytecode()
        if args.versus:
            ensure_bytecode(args.versus)
        front(args.repeat, args.versus)
        return
    if args.shared:
        ensure_bytecode()
        shared([int(x) for x in (args.models or "8,32").split(",")], args.repeat, args.versus, args.kinds,
               (args.mix, args.seed))
        return
    sys.path.insert(0, str(REPO))
    if args.fleet:
        fleet([int(x) for x in (args.models or "1,8,16,32,64").split(",")], args.repeat)
        return
    run("core", 3, ["L4", "A100-80GB", "H100"], ["r-east", "r-west"])
    run("extended", 6, list(GPU_PRICE), ["r-east", "r-west", "r-eu"])
    run("mixed", 6, list(GPU_PRICE), ["r-east", "r-west", "r-eu"], mixed=True)


if __name__ == "__main__":
    main()
