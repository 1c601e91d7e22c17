#!/bin/bash
export HETINFRA_SHARED=/work/shared
cd /work/wt/heldout64b
for f in "$@"; do n=$(basename $f .yaml)
  s=$(date +%s); timeout 300 .venv/bin/hetinfra plan $f --out /work/ho64b/$n.out > /work/ho64b/$n.plan.txt 2>&1; rc=$?
  echo "$n rc=$rc wall=$(( $(date +%s) - s )) $(head -1 /work/ho64b/$n.plan.txt | cut -c1-100)" >> /work/ho64b/plans.log
done
