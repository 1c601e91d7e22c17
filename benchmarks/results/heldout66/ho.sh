#!/bin/bash
# usage: ho.sh plan|vbase|audit|min ITEM... : heldout65b's ho.sh with outputs in $W (default /work/ho66) and this round's own
# template cache (/work/ho66/cache); `min` NAME... runs ../heldout64/minimal_check.py on $W/NAME.out against NAME.yaml here.
export HETINFRA_SHARED=/work/shared W=${W:-/work/ho66} HETINFRA_CACHE_DIR=${HETINFRA_CACHE_DIR:-/work/ho66/cache}
HERE="$(cd "$(dirname "$0")" && pwd)"
[ "$1" != min ] && exec "$HERE/../heldout65b/ho.sh" "$@"
shift; cd "$HERE/../../.."; mkdir -p $W
for n in "$@"; do s=$(date +%s)
  .venv/bin/python benchmarks/results/heldout64/minimal_check.py $W/$n.out $HERE/$n.yaml > $W/minimal_$n.txt 2>&1
  echo "$n rc=$? wall=$(( $(date +%s) - s ))" >> $W/minimal.log
done
