#!/usr/bin/env bash
pid=$1; out=$2
rm -f /tmp/exp-defrag-pause
ticks() { for t in /proc/$pid/task/*; do printf "%s:%s " "$(cat $t/comm)" "$(awk '{print $14+$15}' $t/stat)"; done; }
sleep 420; s=420
bpftrace /work/exp/blk.bt > $out/blk.txt 2>&1 &
bp=$!
while kill -0 $pid 2>/dev/null; do
  echo "$s normal $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30))
  touch /tmp/exp-defrag-pause; echo "$s pause $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30))
  rm -f /tmp/exp-defrag-pause; echo "$s recover $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30))
  touch /tmp/exp-defrag-pause; python3 /work/exp/burn.py 0.3 & b=$!; echo "$s pauseburn $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30)); kill $b
  rm -f /tmp/exp-defrag-pause; echo "$s recover2 $(date +%H:%M:%S) $(ticks)" >> $out/toggle.txt; sleep 30; s=$((s+30))
done
kill $bp
rm -f /tmp/exp-defrag-pause
