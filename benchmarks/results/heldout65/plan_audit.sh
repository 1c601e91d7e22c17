#!/bin/bash
# usage: plan_audit.sh PLAN.json SPEC LOAD REQUESTS [BURST]: the 10 audit seeds + 5x requests at seed 1032, as bench_promise does
export HETINFRA_SHARED=/work/shared
H="$(cd "$(dirname "$0")/../../.." && pwd)/.venv/bin/hetinfra"
P=$1; S=$2; L=$3; R=$4; B=${5:-1.0}
for s in 1002 1005 1008 1011 1014 1017 1020 1023 1026 1029 x1032; do
  req=$R; seed=$s; if [ "$s" = x1032 ]; then req=$((R*5)); seed=1032; fi
  echo -n "seed $s: "; $H simulate $P --spec $S --json --out /tmp/pa$$ --seed $seed --load $L --burst-cv $B --requests $req 2>&1 | python3 -c "
import json,sys
t=sys.stdin.read()
try: d=json.loads(t)
except Exception: print(t[-300:]); sys.exit()
print('; '.join(f\"{m['model']} {'met' if m['met'] else 'MISS'} {100*((m['objective'].get('ratio') or float('inf'))-1):+.1f}%\" for m in d.get('models',[])) or str(d)[:300])"
done
