"""Benchmark the AWS price list adapter on a synthetic ~100 MB bulk CSV (not a test).

    python benchmarks/bench_feeds.py [--size-mb 100] [--mode http|file|both] [--gpu-share 0.08] [--tracemalloc]

Writes a synthetic EC2 bulk CSV with the real preamble and header (feeds.md section 1a) to a temp
file (streamed, so generation itself stays small), then parses it with the AWS adapter:
- http: served by a loopback http.server and streamed through AwsBulkAdapter.fetch (urllib,
  TextIOWrapper line iterator, pre-filter, csv.reader, validation);
- file: parse_bulk_csv over the open file.
Prints rows, offers, wall time, MB/s and peak RSS (resource.getrusage; tracemalloc's peak of
Python allocations with --tracemalloc, which slows parsing). Target: peak RSS < 200 MB.
"""

from __future__ import annotations

import argparse
import importlib
import csv
import random
import resource
import sys
import tempfile
import threading
import time
import tracemalloc
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from hetinfra.price_feeds.aws import BULK_HEADER as HEADER
GPU_TYPES = [("g6.xlarge", "4", "16 GiB", "1"), ("g6.12xlarge", "48", "192 GiB", "4"), ("g5.xlarge", "4", "16 GiB", "1"),
             ("g6e.xlarge", "4", "32 GiB", "1"), ("p4d.24xlarge", "96", "1152 GiB", "8"),
             ("p5.48xlarge", "192", "2048 GiB", "8"), ("g4dn.xlarge", "4", "16 GiB", "1")]
CPU_TYPES = [(f"{fam}.{size}", "4", "16 GiB", "") for fam in ("m5", "m6i", "m7i", "c5", "c6i", "c7g", "r5", "r6i", "t3")
             for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")]


def write_csv(path: Path, size_mb: float, region: str = "us-east-1", seed: int = 7, gpu_share: float = 0.08) -> int:
    """Write a synthetic bulk CSV of about size_mb MB; returns the number of data rows."""
    rnd = random.Random(seed)
    target = int(size_mb * 1e6)
    rows = 0
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(["FormatVersion", "v1.0"])
        w.writerow(["Disclaimer", "This pricing list is for informational purposes only."])
        w.writerow(["Publication Date", "2025-11-14T21:04:53Z"])
        w.writerow(["Version", "20251114210453"])
        w.writerow(["OfferCode", "AmazonEC2"])
        w.writerow(HEADER)
        while fh.tell() < target:
            gpu = rnd.random() < gpu_share
            itype, vcpu, mem, ngpu = rnd.choice(GPU_TYPES if gpu else CPU_TYPES)
            term = "OnDemand" if rnd.random() < 0.35 else "Reserved"
            os_ = rnd.choice(("Linux", "Linux", "Windows", "RHEL", "SUSE", "Ubuntu Pro"))
            tenancy = rnd.choice(("Shared", "Shared", "Dedicated", "Host"))
            cap = rnd.choice(("Used", "Used", "UnusedCapacityReservation", "AllocatedCapacityReservation"))
            sw = rnd.choice(("NA", "NA", "NA", "SQL Web", "SQL Std"))
            sku = "".join(rnd.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(16))
            price = f"{rnd.uniform(0.05, 60):.10f}"
            rec = {
                "SKU": sku, "OfferTermCode": "JRTCKXETXF", "RateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                "TermType": term, "PriceDescription": f"${price} per {term} {os_} {itype} Instance Hour",
                "EffectiveDate": "2025-11-01", "StartingRange": "0", "EndingRange": "Inf", "Unit": "Hrs",
                "PricePerUnit": price, "Currency": "USD",
                "LeaseContractLength": "" if term == "OnDemand" else "1yr",
                "PurchaseOption": "" if term == "OnDemand" else "No Upfront",
                "OfferingClass": "" if term == "OnDemand" else "standard", "Product Family": "Compute Instance",
                "serviceCode": "AmazonEC2", "Location": "US East (N. Virginia)", "Location Type": "AWS Region",
                "Instance Type": itype, "Current Generation": "Yes",
                "Instance Family": "GPU instance" if gpu else "General purpose", "vCPU": vcpu,
                "Physical Processor": "AMD EPYC 7R13 Processor", "Clock Speed": "3.6 GHz", "Memory": mem,
                "Storage": "EBS only", "Network Performance": "Up to 12500 Megabit",
                "Processor Architecture": "64-bit", "Tenancy": tenancy, "EBS Optimized": "Yes",
                "Operating System": os_, "License Model": "No License required",
                "usageType": f"BoxUsage:{itype}", "operation": "RunInstances", "CapacityStatus": cap,
                "Classic Network Platform": "No", "Dedicated EBS Throughput": "Up to 10000 Mbps",
                "ECU": "NA", "Enhanced Networking Supported": "Yes", "GPU": ngpu,
                "GPU Memory": "24 GB" if gpu else "NA", "Instance": itype.split(".")[0],
                "Intel AVX Available": "Yes", "Intel AVX2 Available": "Yes", "Intel Turbo Available": "Yes",
                "MarketOption": "OnDemand", "Normalization Size Factor": "8", "Physical Cores": "24",
                "Pre Installed S/W": sw, "Processor Features": "AMD Turbo; AVX; AVX2",
                "Region Code": region, "serviceName": "Amazon Elastic Compute Cloud", "VPCNetworkingSupport": "true",
            }
            w.writerow([rec.get(c, "") for c in HEADER])
            rows += 1
    return rows


def rss_mb() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path):
    handler = partial(_QuietHandler, directory=str(directory))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def bench_http(root: Path, size: int) -> dict:
    from hetinfra.price_feeds.aws import AwsBulkAdapter
    from hetinfra.price_feeds.config import FeedConfig

    httpd = serve(root)
    try:
        cfg = FeedConfig(cache_dir=root / "cache", aws_pricing_url=f"http://127.0.0.1:{httpd.server_address[1]}",
                         aws_regions=("us-east-1",), aws_spot="off", timeout_s=20, deadline_s=600)
        t0 = time.perf_counter()
        res = AwsBulkAdapter(cfg).fetch()
        dt = time.perf_counter() - t0
    finally:
        httpd.shutdown()
        httpd.server_close()
    return {"mode": "http", "offers": len(res.offers), "dropped": sum(res.drops.values()), "seconds": dt,
            "mb_per_s": size / 1e6 / dt}


def bench_file(path: Path, size: int) -> dict:
    from hetinfra.price_feeds.aws import parse_bulk_csv
    from hetinfra.price_feeds.validate import Validator

    t0 = time.perf_counter()
    v = Validator()
    with path.open(newline="") as fh:
        for row in parse_bulk_csv(fh, region="us-east-1", as_of="bench", source="bench"):
            v.add(row)
    dt = time.perf_counter() - t0
    return {"mode": "file", "offers": len(v.offers), "dropped": v.dropped, "seconds": dt, "mb_per_s": size / 1e6 / dt}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--mode", choices=("http", "file", "both"), default="both")
    ap.add_argument("--gpu-share", type=float, default=0.08,
                    help="fraction of rows of GPU types (1.0: every row reaches the CSV parser's filters)")
    ap.add_argument("--tracemalloc", action="store_true", help="also report tracemalloc's peak (slower)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

    with tempfile.TemporaryDirectory(prefix="hetinfra-bench-feeds-") as tmp:
        root = Path(tmp)
        path = root / "offers/v1.0/aws/AmazonEC2/current/us-east-1/index.csv"
        path.parent.mkdir(parents=True)
        t0 = time.perf_counter()
        rows = write_csv(path, args.size_mb, gpu_share=args.gpu_share)
        size = path.stat().st_size
        print(f"generated {size / 1e6:.1f} MB, {rows} rows in {time.perf_counter() - t0:.1f} s")
        importlib.import_module("hetinfra.price_feeds.aws")  # imports counted in the baseline

        base = rss_mb()
        print(f"baseline peak RSS (after generation and imports): {base:.1f} MB")
        modes = ("http", "file") if args.mode == "both" else (args.mode,)
        for mode in modes:
            if args.tracemalloc:
                tracemalloc.start()
            r = bench_http(root, size) if mode == "http" else bench_file(path, size)
            tm = ""
            if args.tracemalloc:
                tm = f", tracemalloc peak {tracemalloc.get_traced_memory()[1] / 1e6:.1f} MB"
                tracemalloc.stop()
            print(f"{r['mode']:>4}: {r['offers']} offers ({r['dropped']} dropped) in {r['seconds']:.2f} s "
                  f"({r['mb_per_s']:.0f} MB/s), peak RSS {rss_mb():.1f} MB{tm}")
        peak = rss_mb()
        print(f"peak RSS {peak:.1f} MB (target < 200 MB): {'OK' if peak < 200 else 'OVER'}")
        return 0 if peak < 200 else 1


if __name__ == "__main__":
    sys.exit(main())
