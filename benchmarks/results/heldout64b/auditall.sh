#!/bin/bash
export HETINFRA_SHARED=/work/shared
cd /work/wt/heldout64b
for f in "$@"; do n=$(basename $f .yaml)
  s=$(date +%s); timeout 900 .venv/bin/python benchmarks/bench_promise.py --spec $f --seeds 10 --long 5 --jobs 1 --work /work/ho64b/audit_$n > /work/ho64b/audit_$n.txt 2>&1; rc=$?
  echo "$n rc=$rc wall=$(( $(date +%s) - s ))" >> /work/ho64b/audits.log
done
