"""Interconnect facts (hetinfra.catalog.interconnect): every row sourced, RDMA only for its classes,
unknown types on the safe side."""

from __future__ import annotations

from hetinfra.catalog.gpus import get_gpu
from hetinfra.catalog.interconnect import _FACTS, KV_LINK_EFFICIENCY, RDMA_CLASSES, interconnect


def test_every_fact_names_a_public_source_and_a_known_class():
    for (cloud, itype), row in _FACTS.items():
        assert row.source.startswith("https://"), itype
        assert row.network in RDMA_CLASSES + ("tcp",) and row.network_gbps > 0
        assert cloud in ("aws", "gcp", "azure")


def test_rdma_types_and_tcp_types():
    assert interconnect("aws", "p5en.48xlarge", "H200").rdma
    assert interconnect("gcp", "a3-ultragpu-8g", "H200").network == "roce"
    assert interconnect("azure", "Standard_ND96isr_H100_v5", "H100").network == "infiniband"
    # GPUDirect-TCPX is not RDMA: no split across A3 High nodes
    assert not interconnect("gcp", "a3-highgpu-8g", "H100").rdma
    assert interconnect("aws", "p5en.48xlarge", "H200").network_bytes_s() == 3200 / 8 * 1e9 * KV_LINK_EFFICIENCY
    assert interconnect("gcp", "a3-highgpu-8g", "H100").network_bytes_s() == 0.0


def test_unlisted_type_is_tcp_and_never_rdma():
    row = interconnect("lab", "my-box", "H100")
    assert not row.rdma and row.network_gbps == 0 and row.nvlink  # H100 SXM nodes have NVLink
    assert row.node_link_bytes_s("H100") == get_gpu("H100").intra_node_gbps * 1e9 * KV_LINK_EFFICIENCY


def test_a_gpu_sold_without_nvlink_moves_kv_over_pcie():
    nc = interconnect("azure", "Standard_NC96ads_A100_v4", "A100-80GB")
    nd = interconnect("azure", "Standard_ND96amsr_A100_v4", "A100-80GB")
    assert nc.node_link_bytes_s("A100-80GB") < nd.node_link_bytes_s("A100-80GB")
