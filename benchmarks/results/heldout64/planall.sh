#!/bin/bash
export HETINFRA_SHARED=/work/shared
cd /work/wt/heldout64
for f in "$@"; do n=$(basename $f .yaml)
  s=$(date +%s.%N); timeout 600 .venv/bin/hetinfra plan $f --out /work/ho64/$n.out > /work/ho64/$n.plan.txt 2>&1; rc=$?
  e=$(date +%s.%N); echo "$n rc=$rc wall=$(echo "$e - $s" | bc)" >> /work/ho64/plans.log
done
