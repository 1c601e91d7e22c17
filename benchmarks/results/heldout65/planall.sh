#!/bin/bash
# plan each spec given (paths relative to this checkout), one at a time: /work/ho65/NAME.out, NAME.plan.txt; plans.log: exit, wall s, first line
export HETINFRA_SHARED=/work/shared
cd "$(dirname "$0")/../../.."
for f in "$@"; do n=$(basename $f .yaml)
  s=$(date +%s); timeout 300 .venv/bin/hetinfra plan $f --out /work/ho65/$n.out > /work/ho65/$n.plan.txt 2>&1; rc=$?
  echo "$n rc=$rc wall=$(( $(date +%s) - s )) $(head -1 /work/ho65/$n.plan.txt | cut -c1-160)" >> /work/ho65/plans.log
done
