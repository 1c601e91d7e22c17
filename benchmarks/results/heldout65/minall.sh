#!/bin/bash
# minimal_check (../heldout64/minimal_check.py) on each plan given by name: /work/ho65/minimal_NAME.txt
export HETINFRA_SHARED=/work/shared
cd "$(dirname "$0")/../../.."
for n in "$@"; do
  s=$(date +%s); .venv/bin/python benchmarks/results/heldout64/minimal_check.py /work/ho65/$n.out benchmarks/results/heldout65/$n.yaml > /work/ho65/minimal_$n.txt 2>&1
  echo "$n rc=$? wall=$(( $(date +%s) - s ))" >> /work/ho65/minimal.log
done
