#!/bin/bash
# usage: ho.sh plan|vbase|audit|min ITEM...  (run from anywhere; outputs in $W, default /work/ho65b)
#   plan  SPEC...  hetinfra plan SPEC --out $W/NAME.out > $W/NAME.plan.txt; plans.log: exit, wall s, first line
#   vbase SPEC...  the same with --verify-baselines and the template cache off: $W/vb_NAME.*; vbase.log
#   audit SPEC...  bench_promise --seeds 10 --long 5 --jobs 1: $W/audit_NAME.txt; audits.log
#   min   NAME...  ../heldout64/minimal_check.py on $W/NAME.out against NAME.yaml here: $W/minimal_NAME.txt; minimal.log
# The fleet tools (graft.py, plan_audit.sh, seeds_stability.sh) are heldout65's, used as they are.
export HETINFRA_SHARED=/work/shared
HERE="$(cd "$(dirname "$0")" && pwd)"; cd "$HERE/../../.."; W=${W:-/work/ho65b}; mkdir -p $W
mode=$1; shift
for x in "$@"; do n=$(basename $x .yaml); s=$(date +%s)
  case $mode in
    plan)  timeout 300 .venv/bin/hetinfra plan $x --out $W/$n.out > $W/$n.plan.txt 2>&1; rc=$?; log=plans.log; first=$(head -1 $W/$n.plan.txt | cut -c1-160);;
    vbase) HETINFRA_CACHE_DIR=off timeout 600 .venv/bin/hetinfra plan $x --verify-baselines --out $W/vb_$n.out > $W/vb_$n.plan.txt 2>&1; rc=$?
           log=vbase.log; first=$(head -1 $W/vb_$n.plan.txt | cut -c1-160);;
    audit) timeout 900 .venv/bin/python benchmarks/bench_promise.py --spec $x --seeds 10 --long 5 --jobs 1 --work $W/audit_$n > $W/audit_$n.txt 2>&1; rc=$?; log=audits.log; first=;;
    min)   .venv/bin/python benchmarks/results/heldout64/minimal_check.py $W/$n.out $HERE/$n.yaml > $W/minimal_$n.txt 2>&1; rc=$?; log=minimal.log; first=;;
    *) echo "usage: ho.sh plan|vbase|audit|min ITEM..." >&2; exit 2;;
  esac
  echo "$n rc=$rc wall=$(( $(date +%s) - s )) $first" >> $W/$log
done
