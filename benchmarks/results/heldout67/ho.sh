#!/bin/bash
# usage: ho.sh plan|vbase|audit|min ITEM... : heldout66's ho.sh with outputs in /work/ho67 and this round's own template cache;
# `min NAME...` checks $W/NAME.out against NAME.yaml in this folder (../heldout64/minimal_check.py; minimal.log: exit status)
export W=${W:-/work/ho67} HETINFRA_CACHE_DIR=${HETINFRA_CACHE_DIR:-/work/ho67/cache} HETINFRA_SHARED=/work/shared
HERE="$(cd "$(dirname "$0")" && pwd)"
[ "$1" = min ] || exec "$HERE/../heldout66/ho.sh" "$@"
shift; cd "$HERE/../../.."
for n; do .venv/bin/python benchmarks/results/heldout64/minimal_check.py "$W/$n.out" "$HERE/$n.yaml" > "$W/minimal_$n.txt" 2>&1; echo "$n rc=$?" >> "$W/minimal.log"; done
