"""The spec's ``infrastructure`` section: where the plan may put capacity (clouds, regions, GPUs,
quotas, purchase terms) and the facts of GPUs outside the catalog. Importable from
:mod:`hetinfra.spec.models` too."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from hetinfra.spec.base import ResourceWord, Strict

#: purchase options the spec may allow (``infrastructure.purchase_terms``)
PurchaseTerm = Literal["on_demand", "spot", "committed_1y", "committed_3y"]


class AvailabilityCap(Strict):
    """The most GPUs of one kind the user can get in one cloud region (a quota)."""

    cloud: ResourceWord = Field(description="Cloud name.")
    region: ResourceWord = Field(description="Region name.")
    gpu: ResourceWord = Field(description="GPU (SkyPilot accelerator name).")
    max_gpus: int = Field(ge=0, le=100_000, description="Largest number of these GPUs in use at once.")


class CustomGpuSpec(Strict):
    """Facts of a GPU outside hetinfra's catalog (offered through an offers CSV, rated by a profile):
    what the simulator's step model needs besides the memory, which comes from the offer."""

    name: str = Field(description="The GPU name as the offers CSV and the profile spell it.")
    bandwidth_gbps: float = Field(gt=0, le=100_000, description="Memory bandwidth, GB/s.")
    bf16_tflops: float = Field(gt=0, le=100_000, description="Dense BF16/FP16 tensor TFLOP/s.")
    fp8_tflops: float | None = Field(None, gt=0, le=100_000, description="Dense FP8 TFLOP/s (null: no FP8).")
    nvlink: bool = Field(False, description="GPUs of one instance are linked by NVLink (else PCIe).")
    intra_node_gbps: float = Field(32.0, gt=0, le=10_000, description="Per-GPU bandwidth between GPUs of one "
                                                                     "node, GB/s (PCIe4 x16: 32).")

class InfrastructureSpec(Strict):
    """Where the plan may put capacity."""

    custom_gpus: list[CustomGpuSpec] = Field(
        [], description="Optional facts of GPUs outside the catalog (bandwidth, FLOP/s); their memory comes from "
                        "the offer. Without an entry the simulator uses conservative defaults, rescaled to the "
                        "GPU's profile (docs/verification.md).")

    clouds: list[ResourceWord] = Field(["aws", "gcp", "azure"], min_length=1, max_length=64,
                              description="Allowed clouds: aws, gcp, azure, or custom clouds named in an offers file.")
    regions: list[ResourceWord] | None = Field(None, max_length=1000, description="Optional allowlist of regions (any cloud).")
    gpus: list[ResourceWord] | None = Field(None, max_length=1000, description="Optional allowlist of GPUs, SkyPilot accelerator names.")
    spot: bool = Field(False, description="Also consider spot capacity where offered (cheaper, can be reclaimed).")
    availability: list[AvailabilityCap] = Field([], max_length=10_000, description="GPU caps per (cloud, region, gpu).")
    purchase_terms: list[PurchaseTerm] | None = Field(
        None, min_length=1, description="How capacity may be bought: on_demand, spot, committed_1y, committed_3y "
        "(a 1- or 3-year commitment at the offer's committed price, paid for every hour of the term: reserved "
        "instances, savings plans, committed-use discounts). Unset: on_demand, plus spot with spot: true. A "
        "committed term is used only for offers that publish its price (hetinfra prices --json).")

    def terms(self) -> tuple[str, ...]:
        """The purchase options allowed, in PurchaseTerm order."""
        given = set(self.purchase_terms or ["on_demand"] + (["spot"] if self.spot else []))
        return tuple(t for t in get_args(PurchaseTerm) if t in given)

    @model_validator(mode="after")
    def _spot_terms(self) -> "InfrastructureSpec":
        if self.spot and self.purchase_terms is not None and "spot" not in self.purchase_terms:
            raise ValueError("spot: true but purchase_terms leaves out spot; add spot to purchase_terms (or drop "
                             "spot: true)")
        return self
