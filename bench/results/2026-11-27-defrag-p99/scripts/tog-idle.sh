#!/usr/bin/env bash
# After 420 s, alternate the defrag thread between SCHED_OTHER and SCHED_IDLE every 30 s.
pid=$1; out=$2
tid=$(grep -l hayate-defrag /proc/$pid/task/*/comm | head -1 | cut -d/ -f5)
echo "defrag tid $tid" >> $out/toggle.txt
sleep 420
s=420
while kill -0 $pid 2>/dev/null; do
  chrt --idle -p 0 $tid; echo "$s idle" >> $out/toggle.txt; sleep 30; s=$((s+30))
  chrt --other -p 0 $tid; echo "$s other" >> $out/toggle.txt; sleep 30; s=$((s+30))
done
