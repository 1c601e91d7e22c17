#!/bin/bash
export HETINFRA_SHARED=/work/shared
cd /work/ho64b
while pgrep -f "auditall.sh /work/ho64b/h122" >/dev/null; do sleep 5; done
P=/work/wt/heldout64b/.venv/bin/python
for n in h122-gcp-int4-awq-150ms h123-mean-long-outputs-a10g h125-periods-spot-gcp-az-tight h117-origins-4-regions-3-clouds; do
  timeout 400 $P ../heldout64/minimal_check.py /work/ho64b/$n.out /work/ho64b/$n.yaml > minimal_$n.txt 2>&1; echo "minimal $n rc=$?" >> queue2.log
done
timeout 300 $P ../heldout64/period_audit.py /work/ho64b/h118-committed-gcp-l4-12periods.out 3,4,5,9,10 10 > period_h118.txt 2>&1; echo "period h118 rc=$?" >> queue2.log
timeout 200 $P ../heldout64/period_audit.py /work/ho64b/h125-periods-spot-gcp-az-tight.out 0,1,2,3,4,5 5 > period_h125.txt 2>&1; echo "period h125 rc=$?" >> queue2.log
