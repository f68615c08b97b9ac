#!/usr/bin/env bash
pid=$1; out=$2
rm -f /tmp/exp-defrag-pause
ticks() { for t in /proc/$pid/task/*; do printf "%s:%s " "$(cat $t/comm)" "$(awk '{print $14+$15}' $t/stat)"; done; }
sleep 420; s=420; n=0
while kill -0 $pid 2>/dev/null; do
  echo "$s normal $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt
  if [ $n = 1 ]; then sleep 5; /work/exp/offcpu.sh $pid $out/off-normal 10; sleep 15; else sleep 30; fi; s=$((s+30))
  touch /tmp/exp-defrag-pause; echo "$s pause $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30))
  rm -f /tmp/exp-defrag-pause; echo "$s recover $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30))
  n=$((n+1))
done
rm -f /tmp/exp-defrag-pause
