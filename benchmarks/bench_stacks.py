"""Pulumi program cost under mocks: import time of the three provider SDKs and the time to build a
fleet of N VMs (in self-healing groups) across AWS, GCP and Azure (what `pulumi up` would spend in our Python before the
engine talks to the clouds). Run: python benchmarks/bench_stacks.py"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


# The fleets' self-healing groups and how many VMs each keeps (the planned count).
GROUP_SIZE = {"aws:autoscaling/group:Group": lambda i: i["desiredCapacity"],
              "gcp:compute/instanceGroupManager:InstanceGroupManager": lambda i: i["targetSize"],
              "azure-native:compute:VirtualMachineScaleSet": lambda i: i["sku"]["capacity"]}


def main() -> None:
    t = time.perf_counter()
    import pulumi  # noqa: F401
    from pulumi.runtime.mocks import MockMonitor

    from tests.stacks.conftest import HetMocks, _alloc
    t_import = time.perf_counter() - t

    def plan(replicas: int) -> dict:
        return {"service": "bench", "models": [{"name": "m", "source": "org/m", "precision": "bf16", "max_model_len": 4096}],
                "allocations": [_alloc("m", "aws", "us-east-1", "g6e.xlarge", "L40S", 1, tp=1, count=replicas),
                                _alloc("m", "gcp", "us-central1", "a2-highgpu-4g", "A100", 4, tp=4, pp=2, count=replicas),
                                _alloc("m", "azure", "eastus", "Standard_NC24ads_A100_v4", "A100-80GB", 1, tp=1,
                                       count=replicas)],
                "deploy": {"ingress_cidrs": ["10.0.0.0/8"], "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHetinfraTestKeyOnly bench@host", "gcp_project": "p"}}

    from hetinfra.stacks.common import FleetSecrets
    from hetinfra.stacks.program import build

    for replicas in (1, 10, 25):
        mocks = HetMocks()
        pulumi.runtime.set_mocks(mocks, project="bench", stack="b", preview=False, monitor=MockMonitor(mocks))
        t = time.perf_counter()

        @pulumi.runtime.test
        def run():
            fleets = []
            for cloud in ("aws", "gcp", "azure"):
                fleets += build(plan(replicas), cloud, FleetSecrets(api_key=pulumi.Output.secret("k")), gcp_project="p")
            return pulumi.Output.from_input({k: v for f in fleets for k, v in f.endpoints.items()})

        run()
        sizes = [GROUP_SIZE[a.typ](a.inputs) for a in mocks.created if a.typ in GROUP_SIZE]
        print(f"program under mocks: {int(sum(sizes)):4d} VMs in {len(sizes):3d} groups, {len(mocks.created):4d} resources "
              f"in {time.perf_counter() - t:.2f} s")
    print(f"import pulumi + mocks + providers (first use included above for 1 replica): {t_import:.2f} s")


if __name__ == "__main__":
    main()
