#!/bin/bash
# audit seeds of bench_promise (1002..1029 step 3, 5x at 1032) on an edited plan, its spec given
export HETINFRA_SHARED=/work/shared
P=$1; S=$2; L=${3:-1.2}; N=${4:-20000}
for s in 1002 1005 1008 1011 1014 1017 1020 1023 1026 1029 X1032; do
  n=$N; seed=$s; [ "$s" = X1032 ] && { n=$((5*N)); seed=1032; }
  /work/wt/heldout64b/.venv/bin/hetinfra simulate $P --spec $S --json --out /tmp/aud_$$ --seed $seed --requests $n --load $L 2>/dev/null |
    python3 -c "import json,sys; d=json.load(sys.stdin); print('$s', $n, ' '.join(f\"{m['model']}:{'met' if m['met'] else 'MISS'}:{100*(m['objective']['ratio']-1):+.1f}%\" for m in d['models']))"
done
