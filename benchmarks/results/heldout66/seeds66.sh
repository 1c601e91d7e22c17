#!/bin/bash
# usage: seeds66.sh OUT|PLAN.json SPEC FIRST_SEED N [REQUESTS] [BURST_CV] (heldout65 seeds_stability.sh, tolerant of units without a drift test) : per seed, the model's verdict, ratio, and each unit's drift / stable flag
export HETINFRA_SHARED=/work/shared
H="$(cd "$(dirname "$0")/../../.." && pwd)/.venv/bin/hetinfra"
P=$1; S=$2; F=$3; N=$4; R=${5:-20000}
for i in $(seq 0 $((N-1))); do s=$((F+i))
  $H simulate $P --spec $S --json --out /tmp/ss$$ --seed $s --load 1.2 --requests $R --burst-cv ${6:-1.0} 2>/dev/null | python3 -c "
import json,sys;d=json.load(sys.stdin)
m=' '.join(f\"{x['model']}:{'met' if x['met'] else 'MISS'}:{x['objective']['ratio']}\" for x in d['models'])
u=' '.join(f\"drift={x['stability'].get('drift')}(ttft mid {(x['stability'].get('ttft_ms') or {}).get('middle')} last {(x['stability'].get('ttft_ms') or {}).get('last')}){'' if x['stability'].get('stable', True) else ' UNSTABLE'}\" for x in d['units'])
print('seed $s', m, u)"
done
