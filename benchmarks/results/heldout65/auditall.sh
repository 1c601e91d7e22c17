#!/bin/bash
# audit each spec with bench_promise (10 fresh seeds + 5x requests), one at a time: /work/ho65/audit_NAME.txt; audits.log: exit, wall s
export HETINFRA_SHARED=/work/shared
cd "$(dirname "$0")/../../.."
for f in "$@"; do n=$(basename $f .yaml)
  s=$(date +%s); timeout 900 .venv/bin/python benchmarks/bench_promise.py --spec $f --seeds 10 --long 5 --jobs 1 --work /work/ho65/audit_$n > /work/ho65/audit_$n.txt 2>&1; rc=$?
  echo "$n rc=$rc wall=$(( $(date +%s) - s ))" >> /work/ho65/audits.log
done
