"""Interconnect facts per instance type (issue 37, point 2): how fast a prompt's KV cache can move
from a prefill engine to a decode engine.

Two links matter. Inside a node: NVLink (or NVSwitch) between the GPUs, else PCIe; its per-GPU
bandwidth is the GPU catalog's ``intra_node_gbps`` (hetinfra.catalog.gpus, with its sources), and
``nvlink`` here overrides the GPU's default where a cloud sells the GPU without NVLink. Between
nodes: the network class and its bandwidth per instance. Only an RDMA class (EFA, InfiniBand,
RoCE) lets a decode engine pull KV straight from the prefill GPU's memory (NIXL over UCX / libfabric);
plain TCP (including GCP's GPUDirect-TCPX, which is not RDMA) is not offered for a split across
nodes (llm-d's P/D guide: "needs RDMA"; at 25 Gb/s a 4k Llama-3-70B prompt takes 0.43 s).

Every row states its source: the clouds' public instance-type pages, restated in our own words (no
table is copied, so no third-party licence applies). An instance type not listed here is treated
as plain TCP with no stated bandwidth: a split stays inside one of its nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from hetinfra.catalog.gpus import get_gpu
from hetinfra.facts import CLOUDS

__all__ = ["ACROSS_NODE_CLOUDS", "ACROSS_NODES_REFUSED", "RDMA_CLASSES", "Interconnect", "KV_LINK_EFFICIENCY",
           "KV_TRANSFER_LATENCY_S", "interconnect"]

RDMA_CLASSES = ("efa", "infiniband", "roce")


class _Refusal(NamedTuple):
    """Why one cloud's deploy targets do not place a bundle's nodes together."""

    pulumi: str  # the cloud's Pulumi stack
    kubernetes: str  # its managed Kubernetes


#: why each cloud's deploy targets do not place a prefill/decode bundle's nodes in one placement group
#: over RDMA, per target (hetinfra.compile and stacks refuse such a plan; the planner does not offer it:
#: hetinfra.plan.templates_pd.across_nodes_gate). A cloud not listed here runs them on both targets: AWS,
#: by the Pulumi stack's cluster placement group with every EFA interface, and by EKS's LeaderWorkerSet
#: group with exclusive-topology on EC2's network node (docs/concepts/disaggregation.md)
ACROSS_NODES_REFUSED = {
    "gcp": _Refusal(
        pulumi="a compact placement policy (COLLOCATED) needs its vm_count VMs created at once, not one per node "
               "group, and A3 Ultra's RoCE needs a VPC per RDMA NIC on Google's RoCE network profile, which the GCP "
               "stack does not create",
        kubernetes="GKE gives pods A3 Ultra's RoCE only through its RDMA multi-networking objects, which hetinfra "
                   "does not write"),
    "azure": _Refusal(
        pulumi="InfiniBand joins only the VMs of one scale set or availability set, and the Azure stack gives each "
               "node its own scale set",
        kubernetes="InfiniBand joins only the VMs of one scale set or availability set, and AKS's node "
                   "auto-provisioning launches standalone VMs"),
}
#: the IaC clouds whose targets place a bundle's nodes together: every one of the clouds' registry
#: (hetinfra.facts.CLOUDS) not refused above
ACROSS_NODE_CLOUDS = tuple(c for c in CLOUDS if c not in ACROSS_NODES_REFUSED)

#: share of a link's nominal bandwidth a KV transfer achieves: Mooncake's Transfer Engine measured
#: 190 GB/s on 8 x 400 Gb/s RoCE (400 GB/s nominal, 0.475) and 87 GB/s on 4 x 200 Gb/s (0.87)
#: (kvcache-ai/Mooncake README); the lower figure is used on every link, NVLink included
KV_LINK_EFFICIENCY = 0.475
#: fixed cost of one transfer (NIXL's notification and descriptor exchange), seconds: an
#: assumption (no public per-transfer figure found); 2 ms is also the simulator seam's example
KV_TRANSFER_LATENCY_S = 0.002
#: PCIe4 x16 per direction, GB/s (the GPU catalog's figure for PCIe4 GPUs)
PCIE4_GBPS = 32.0

_AWS = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (network bandwidth, EFA support)"
_AWS_EFA = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html (supported instance types)"
_GCP = "https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth"
_GCP_A3U = ("https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms (A3 Ultra: 8 x CX-7 "
            "GPU NICs with RDMA over RoCE)")
_AZ_ND5 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-h100-v5-series"
_AZ_ND4 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndasra100v4-series"
_AZ_NDM4 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndma100v4-series"
_AZ_NC4 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nca100v4-series"


@dataclass(frozen=True)
class Interconnect:
    """One instance type's links: ``nvlink`` inside the node, the ``network`` class between nodes
    and its nominal bandwidth (Gb/s per instance; 0 where not stated), and the sources."""

    instance_type: str
    nvlink: bool
    network: str  # efa | infiniband | roce | tcp
    network_gbps: float
    source: str

    @property
    def rdma(self) -> bool:
        return self.network in RDMA_CLASSES

    def node_link_bytes_s(self, gpu: str) -> float:
        """Bytes/s one KV transfer gets between two GPUs of one node (NVLink or PCIe), after
        ``KV_LINK_EFFICIENCY``."""
        spec = get_gpu(gpu)
        gbps = spec.intra_node_gbps if spec is not None else PCIE4_GBPS
        if spec is not None and spec.nvlink and not self.nvlink:  # the GPU sold here without NVLink
            gbps = min(gbps, PCIE4_GBPS)
        return gbps * 1e9 * KV_LINK_EFFICIENCY

    def network_bytes_s(self) -> float:
        """Bytes/s of the whole instance's network after ``KV_LINK_EFFICIENCY`` (0: no RDMA)."""
        return self.network_gbps / 8.0 * 1e9 * KV_LINK_EFFICIENCY if self.rdma else 0.0


def _row(itype: str, nvlink: bool, network: str, gbps: float, source: str) -> Interconnect:
    return Interconnect(itype, nvlink, network, gbps, source)


_FACTS: dict[tuple[str, str], Interconnect] = {(cloud, r.instance_type): r for cloud, r in (
    # AWS: NVSwitch on p4/p5/p6; EFA where the EFA page lists the type
    ("aws", _row("p4d.24xlarge", True, "efa", 400, f"{_AWS}; {_AWS_EFA}")),
    ("aws", _row("p4de.24xlarge", True, "efa", 400, f"{_AWS}; {_AWS_EFA}")),
    ("aws", _row("p5.48xlarge", True, "efa", 3200, f"{_AWS}; {_AWS_EFA}")),
    ("aws", _row("p5en.48xlarge", True, "efa", 3200, f"{_AWS}; {_AWS_EFA} (EFAv3)")),
    ("aws", _row("p6-b200.48xlarge", True, "efa", 3200, f"{_AWS}; {_AWS_EFA} (EFAv4)")),
    ("aws", _row("g6e.48xlarge", False, "efa", 400, f"{_AWS}; {_AWS_EFA}; L40S has no NVLink")),
    ("aws", _row("g5.48xlarge", False, "efa", 100, f"{_AWS}; {_AWS_EFA}; A10G has no NVLink")),
    ("aws", _row("g6.48xlarge", False, "efa", 100, f"{_AWS}; {_AWS_EFA}; L4 has no NVLink")),
    ("aws", _row("g5.12xlarge", False, "tcp", 40, f"{_AWS}")),
    ("aws", _row("g6.12xlarge", False, "tcp", 40, f"{_AWS}")),
    ("aws", _row("g6e.12xlarge", False, "tcp", 100, f"{_AWS} (EFA not assumed)")),
    # GCP: A3 Ultra is RoCE; A3 High's GPUDirect-TCPX is TCP; A2 and G2 are plain VPC networking
    ("gcp", _row("a3-ultragpu-8g", True, "roce", 3200, f"{_GCP}; {_GCP_A3U}")),
    ("gcp", _row("a3-highgpu-8g", True, "tcp", 1000, f"{_GCP} (GPUDirect-TCPX, not RDMA)")),
    ("gcp", _row("a2-highgpu-8g", True, "tcp", 100, _GCP)),
    ("gcp", _row("a2-ultragpu-8g", True, "tcp", 100, _GCP)),
    ("gcp", _row("a2-megagpu-16g", True, "tcp", 100, _GCP)),
    ("gcp", _row("g2-standard-96", False, "tcp", 100, _GCP)),
    # Azure: the ND series carry one InfiniBand HCA per GPU; NC A100 v4 is PCIe without NVLink
    ("azure", _row("Standard_ND96isr_H100_v5", True, "infiniband", 3200, f"{_AZ_ND5} (8 x 400 Gb/s NDR)")),
    ("azure", _row("Standard_ND96asr_v4", True, "infiniband", 1600, f"{_AZ_ND4} (8 x 200 Gb/s HDR)")),
    ("azure", _row("Standard_ND96amsr_A100_v4", True, "infiniband", 1600, f"{_AZ_NDM4} (8 x 200 Gb/s HDR)")),
    ("azure", _row("Standard_NC96ads_A100_v4", False, "tcp", 80, f"{_AZ_NC4} (PCIe, no NVLink)")),
    ("azure", _row("Standard_NC48ads_A100_v4", False, "tcp", 40, f"{_AZ_NC4} (PCIe, no NVLink)")),
)}


def interconnect(cloud: str, instance_type: str, gpu: str) -> Interconnect:
    """The facts of ``instance_type``; an unlisted type: NVLink as its GPU usually has it, plain TCP
    with no stated bandwidth between nodes (so no split across its nodes)."""
    row = _FACTS.get((cloud, instance_type))
    if row is not None:
        return row
    spec = get_gpu(gpu)
    return Interconnect(instance_type, bool(spec and spec.nvlink), "tcp", 0.0,
                        "not listed in hetinfra.catalog.interconnect: TCP assumed (no split across nodes)")
