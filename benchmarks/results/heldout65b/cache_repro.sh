#!/bin/bash
# F2: the template cache carries one spec's best-effort classes into another that differs only in class shares.
# Plans h141a (4.9%) and h141b (5.1%) in both orders, each order in its own fresh HETINFRA_CACHE_DIR.
export HETINFRA_SHARED=/work/shared
cd "$(dirname "$0")/../../.."; B=benchmarks/results/heldout65b; W=${1:-/tmp/ho65b_cache}; rm -rf $W; mkdir -p $W
for order in "a b" "b a"; do C=$W/cache_${order// /}; echo "order: $order (cache $C)"
  for x in $order; do f=$(ls $B/h141$x-*.yaml); HETINFRA_CACHE_DIR=$C .venv/bin/hetinfra plan $f --no-baselines --out $W/$x.$RANDOM.out 2>&1 | grep -E "^h141|best effort" | cut -c1-110; done
done
# the same with the percentile: h141a (p90) then h141as-strict-p99 (the same classes at p99) in one fresh cache
C=$W/cache_pct; for f in h141a-rare-4p9-p90 h141as-strict-p99; do HETINFRA_CACHE_DIR=$C .venv/bin/hetinfra plan $B/$f.yaml --no-baselines --out $W/$f.$RANDOM.out 2>&1 | grep -E "^h141|best effort|^m:" | cut -c1-140; echo "exit ${PIPESTATUS[0]}"; done
