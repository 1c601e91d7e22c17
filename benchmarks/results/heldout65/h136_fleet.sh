#!/bin/bash
# F1 reproduce: h136's demand served by the units the planner itself sizes for its two parts (h136b: chat on L40S, the 100k-token
# 'hay' class on H100 TP1 with TTFT 60 s), grafted into h136's plan.json as one model, then audited on h136's own spec.
# usage: h136_fleet.sh [HAY_REPLICAS]   (default: h136b's own 7; 6 also meets, 5 and 4 do not)
set -e
export HETINFRA_SHARED=/work/shared
B="$(cd "$(dirname "$0")" && pwd)"; R="$B/../../.."; O=/work/ho65; mkdir -p $O/fleets
[ -f $O/h136-needle-100k-p90.out/plan.json ] || $R/.venv/bin/hetinfra plan $B/h136-needle-100k-p90.yaml --out $O/h136-needle-100k-p90.out > /dev/null
[ -f $O/h136b-needle-split-models.out/plan.json ] || $R/.venv/bin/hetinfra plan $B/h136b-needle-split-models.yaml --out $O/h136b-needle-split-models.out > /dev/null
n=${1:-7}
$R/.venv/bin/python $B/graft.py $O/h136-needle-100k-p90.out $O/h136b-needle-split-models.out needle chat,hay $O/fleets/h136_split$n.json "hay|aws|p5.4xlarge|tp1x1|us-east-1|ondemand=$n"
$B/plan_audit.sh $O/fleets/h136_split$n.json $B/h136-needle-100k-p90.yaml 1.2 20000
