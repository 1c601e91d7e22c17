#!/bin/bash
# usage: seeds_stability.sh OUT|PLAN.json SPEC FIRST_SEED N [REQUESTS] : per seed, the model's verdict, ratio, and each unit's drift / stable flag
export HETINFRA_SHARED=/work/shared
H="$(cd "$(dirname "$0")/../../.." && pwd)/.venv/bin/hetinfra"
P=$1; S=$2; F=$3; N=$4; R=${5:-20000}
for i in $(seq 0 $((N-1))); do s=$((F+i))
  $H simulate $P --spec $S --json --out /tmp/ss$$ --seed $s --load 1.2 --requests $R 2>/dev/null | python3 -c "
import json,sys;d=json.load(sys.stdin)
m=' '.join(f\"{x['model']}:{'met' if x['met'] else 'MISS'}:{x['objective']['ratio']}\" for x in d['models'])
u=' '.join(f\"drift={x['stability']['drift']}(ttft mid {x['stability']['ttft_ms']['middle']} last {x['stability']['ttft_ms']['last']}){'' if x['stability']['stable'] else ' UNSTABLE'}\" for x in d['units'])
print('seed $s', m, u)"
done
