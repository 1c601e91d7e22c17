"""``hetinfra estimate``: the analytical estimator for one model x layout x request size x SLO."""

from __future__ import annotations

import json
from dataclasses import dataclass

import click

from hetinfra.cli.common import COMMAND_SETTINGS, MAX_PARALLEL, MAX_TOKENS, MAX_TPOT_MS, MAX_TTFT_MS, FiniteFloat, UserPath, WholeRange, fail
from hetinfra.fileio import dumps_strict


@click.command("estimate", context_settings=COMMAND_SETTINGS)
@click.option("--model", "model_name", default=None,
              help="Built-in model name (e.g. llama-3.1-70b) or a Hugging Face repo id (config.json from the HF cache).")
@click.option("--architecture", "arch_file", type=UserPath(dir_okay=False), default=None,
              help="A Hugging Face config.json to estimate instead of --model.")
@click.option("--gpu", "gpu_name", required=True, help="GPU (SkyPilot accelerator name), e.g. H100.")
@click.option("--tp", type=WholeRange(1, MAX_PARALLEL), default=1, show_default=True, help="Tensor parallel degree.")
@click.option("--pp", type=WholeRange(1, MAX_PARALLEL), default=1, show_default=True, help="Pipeline stages.")
@click.option("--input", "input_tokens", type=WholeRange(1, MAX_TOKENS), required=True, help="Prompt tokens.")
@click.option("--output", "output_tokens", type=WholeRange(1, MAX_TOKENS), required=True, help="Generated tokens.")
@click.option("--ttft-ms", type=FiniteFloat(min=0, min_open=True, max=MAX_TTFT_MS), required=True, help="TTFT SLO, ms.")
@click.option("--tpot-ms", type=FiniteFloat(min=0, min_open=True, max=MAX_TPOT_MS), required=True, help="TPOT SLO, ms.")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp8", "int8", "int4"]), default="bf16",
              show_default=True, help="Weight precision.")
@click.option("--compare", is_flag=True,
              help="Also estimate with the measured-kernel backend (aiconfigurator; pip install "
                   "'hetinfra[aiconfigurator]') and print both figures, the limit that binds in each, and the "
                   "confidence interval widened where they disagree.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def estimate_command(model_name, arch_file, gpu_name, tp, pp, input_tokens, output_tokens, ttft_ms, tpot_ms, precision,
                     compare, as_json):
    """Largest request rate one vLLM engine (TP x PP GPUs) sustains for a request size under
    TTFT/TPOT SLOs, with the predicted latencies and the binding constraint; or why it sustains
    none (exit 0, "feasible": false). A layout vLLM cannot start (--tp not dividing the model's
    attention heads, or not dividing nor a multiple of its KV heads; --pp above its layers) or a
    request past its context exits 2."""
    from hetinfra.errors import HetinfraError

    try:
        from hetinfra.perf.estimator import estimate, weights_gb_per_gpu

        model, gpu = _model_and_gpu(model_name, arch_file, gpu_name)
        est = estimate(model, gpu, tp=tp, pp=pp, input_tokens=input_tokens, output_tokens=output_tokens,
                       ttft_ms=ttft_ms, tpot_ms=tpot_ms, precision=precision)
        _refuse_impossible(est, model, tp, pp)
        other = _kernel_estimate(model, gpu, tp, pp, input_tokens, output_tokens, ttft_ms, tpot_ms, precision) \
            if compare else None
    except HetinfraError as exc:
        fail(exc, as_json)
        return
    doc = {
        "model": model.name, "gpu": gpu.name, "tp": tp, "pp": pp, "precision": precision,
        "input_tokens": input_tokens, "output_tokens": output_tokens,
        "slo": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms},
        "feasible": est.feasible, "max_rps": round(est.max_rps, 4), "batch": est.batch,
        "ttft_ms": round(est.ttft_ms, 2), "tpot_ms": round(est.tpot_ms, 2), "binding": est.binding,
        "min_ttft_ms": round(est.min_ttft_ms, 2), "min_tpot_ms": round(est.min_tpot_ms, 2),
        "weights_gb_per_gpu": round(weights_gb_per_gpu(model, tp, pp, precision), 2),
        "gpus": tp * pp, "max_rps_per_gpu": round(est.max_rps / (tp * pp), 4),
    }
    if est.reason:
        doc["reason"] = est.reason
    cmp = _comparison(est, other, gpu.name, tp, pp) if other is not None else None
    if cmp is not None:
        doc["compare"] = cmp.doc()
    if as_json:
        click.echo(dumps_strict(doc, indent=2))
        return
    click.echo(f"{model.name} on {tp * pp}x {gpu.name} (TP{tp} PP{pp}, {precision}), "
               f"requests in={input_tokens} out={output_tokens}")
    _echo_estimate(est, doc, ttft_ms, tpot_ms, cmp)


def _refuse_impossible(est, model, tp: int, pp: int) -> None:
    """An estimate whose binding is the layout or the request's context is no capacity figure: vLLM
    would refuse to start that engine (TP not dividing the heads, more stages than layers) or the
    request (past the model's context). Those are arguments this model cannot take (exit 2, naming
    the flag); the weights, the KV cache or an SLO out of reach stay answers (exit 0, feasible false)."""
    from hetinfra.architecture import tp_problem
    from hetinfra.errors import InvalidInputError

    if est.binding == "layout" and tp_problem(model.name, model.heads, model.kv_heads, tp):
        tps = [str(d) for d in range(1, min(model.heads, 64) + 1)
               if tp_problem(model.name, model.heads, model.kv_heads, d) is None]
        raise InvalidInputError(f"--tp {tp}: {est.reason}, so vLLM cannot start the engine",
                                hint=f"use a --tp vLLM can shard {model.name}'s attention over: {', '.join(tps)}")
    if est.binding == "layout":
        raise InvalidInputError(f"--pp {pp}: {est.reason}, so vLLM cannot start the engine",
                                hint=f"use a --pp of at most {model.layers}")
    if est.binding == "context":
        raise InvalidInputError(f"--input/--output: {est.reason}",
                                hint=f"keep --input + --output within {model.max_context} tokens")


def _model_and_gpu(model_name: str | None, arch_file: str | None, gpu_name: str):
    """The model (a built-in name, a Hugging Face repo id, or a config.json) and the GPU to estimate."""
    from hetinfra.catalog.gpus import GPUS, get_gpu
    from hetinfra.errors import InvalidInputError, did_you_mean

    if (model_name is None) == (arch_file is None):
        raise InvalidInputError("give exactly one of --model and --architecture")
    if arch_file is not None:
        from hetinfra.catalog.hf import arch_from_file

        try:
            model = arch_from_file(arch_file, model_name or arch_file)
        except InvalidInputError as exc:
            raise InvalidInputError(f"--architecture: {exc.message}", hint=exc.hint) from None
    else:
        from hetinfra.perf.model import resolve_model_name

        model = resolve_model_name(model_name, "--model")
    gpu = get_gpu(gpu_name)
    if gpu is None:
        raise InvalidInputError(f"--gpu: unknown GPU '{gpu_name}'; {did_you_mean(gpu_name, GPUS)}")
    return model, gpu


def _echo_estimate(est, doc: dict, ttft_ms: float, tpot_ms: float, cmp: Comparison | None) -> None:
    """The lines under the heading: the built-in estimate's rate and latencies, then the measured-kernel
    comparison, if any; or why the estimate is infeasible."""
    if not est.feasible:
        click.echo(f"  infeasible ({est.binding}): {est.reason}")
        click.echo(f"  try         {_INFEASIBLE_FIX.get(est.binding, 'another GPU or layout')}")
        return
    click.echo(f"  max rate    {est.max_rps:.3f} req/s per engine ({doc['max_rps_per_gpu']:.3f} per GPU), "
               f"{est.batch} requests in flight")
    click.echo(f"  TTFT        {est.ttft_ms:.1f} ms at that rate (SLO {ttft_ms:g}; {est.min_ttft_ms:.1f} ms unloaded)")
    click.echo(f"  TPOT        {est.tpot_ms:.1f} ms at that rate (SLO {tpot_ms:g}; {est.min_tpot_ms:.1f} ms at batch 1)")
    click.echo(f"  weights     {doc['weights_gb_per_gpu']:.1f} GB per GPU")
    click.echo(f"  binding     {est.binding}")
    if cmp is not None:
        _echo_comparison(cmp)


#: what changes an infeasible answer, by its binding (the text output's last line)
_INFEASIBLE_FIX = {
    "weights": "more GPUs (--tp, --pp), a GPU with more memory, or a lower --precision (fp8, int4)",
    "kv_memory": "more GPUs (--tp, --pp), a GPU with more memory, a lower --precision, or shorter requests",
    "tpot": "a looser --tpot-ms, a faster GPU or more tensor parallelism (--tp)",
    "ttft": "a looser --ttft-ms, a faster GPU, more tensor parallelism (--tp) or shorter prompts (--input)",
}


def _echo_comparison(cmp: Comparison) -> None:
    k = cmp.other
    if not k.feasible:
        click.echo(f"  kernels     infeasible ({k.binding}) with aiconfigurator's measured kernels")
        return
    click.echo(f"  kernels     {k.max_rps:.3f} req/s with aiconfigurator's measured kernels ({cmp.ratio:.2f}x), "
               f"binding {k.binding}, TTFT {k.ttft_ms:.1f} ms, TPOT {k.tpot_ms:.1f} ms")
    mark = " (widened: the sources disagree beyond it)" if cmp.widened else ""
    click.echo(f"  interval    {cmp.interval.low:.2f}-{cmp.interval.high:.2f}x of the built-in rate{mark}; "
               f"confidence safe plans {cmp.safe_rps:.3f} req/s")


def _kernel_estimate(model, gpu, tp, pp, input_tokens, output_tokens, ttft_ms, tpot_ms, precision):
    """The same estimate with the measured-kernel backend's constants for this layout."""
    from hetinfra.errors import InvalidInputError
    from hetinfra.perf import aic_backend
    from hetinfra.perf.estimator import estimate

    aic_backend.require()
    calib = aic_backend.layout_calibration(model.name, gpu.name, tp, precision) if pp == 1 else None
    if calib is None:
        raise InvalidInputError(f"--compare: aiconfigurator's kernel database does not cover {model.name} on "
                                f"{gpu.name} (tp={tp}, pp={pp}, {precision})",
                                hint="it covers " + ", ".join(aic_backend.SYSTEMS) + " with "
                                     + ", ".join(aic_backend.MODELS) + ", tp 1/2/4/8, no pipelines")
    return estimate(model, gpu, tp=tp, pp=pp, input_tokens=input_tokens, output_tokens=output_tokens, ttft_ms=ttft_ms,
                    tpot_ms=tpot_ms, precision=precision, calib=calib)


@dataclass(frozen=True)
class Comparison:
    """The measured-kernel figure beside the built-in one, and the built-in interval widened to cover it."""
    other: object  # the backend's Estimate
    ratio: float  # its rate over the built-in rate (0: either infeasible)
    interval: object  # RateInterval, widened where the sources disagree
    widened: bool
    safe_rps: float  # the built-in rate as planning.confidence: safe plans it (planning_factor)

    def doc(self) -> dict:
        o, i = self.other, self.interval
        return {"aiconfigurator": {"feasible": o.feasible, "max_rps": round(o.max_rps, 4), "binding": o.binding,
                                   "ttft_ms": round(o.ttft_ms, 2), "tpot_ms": round(o.tpot_ms, 2)},
                "ratio": round(self.ratio, 4), "interval": [i.low, i.middle, i.high], "widened": self.widened,
                "interval_basis": i.basis, "safe_rps": round(self.safe_rps, 4)}


def _comparison(est, other, gpu: str, tp: int, pp: int) -> Comparison:
    """Both figures, the binding limit of each, and the built-in estimate's interval widened to cover
    the other source where they disagree (hetinfra.perf.confidence.widen_for_disagreement)."""
    from hetinfra.perf.confidence import confidence_detail, planning_factor, rate_interval, widen_for_disagreement

    ratio = other.max_rps / est.max_rps if est.feasible and other.feasible and est.max_rps > 0 else 0.0
    conf = confidence_detail(gpu, tp, pp, est.batch)
    wide, marked = widen_for_disagreement(rate_interval(conf), ratio, "aiconfigurator")
    # what the planner plans this estimate at under planning.confidence: safe (hetinfra.plan.planner)
    safe = planning_factor(conf.level, "safe", (wide.low, wide.middle, wide.high), wide.other_factor)
    return Comparison(other, ratio, wide, marked, est.max_rps * safe)
