#!/usr/bin/env bash
# After 420 s: cycles of 30 s windows: pause, recover(normal), normal, piece32k, piece1m
pid=$1; out=$2
rm -f /tmp/exp-defrag-pause /tmp/exp-defrag-piece /tmp/exp-defrag-sleep
sleep 420; s=420
while kill -0 $pid 2>/dev/null; do
  touch /tmp/exp-defrag-pause; echo "$s pause" >> $out/toggle.txt; sleep 30; s=$((s+30))
  rm -f /tmp/exp-defrag-pause; echo "$s recover" >> $out/toggle.txt; sleep 30; s=$((s+30))
  echo "$s normal" >> $out/toggle.txt; sleep 30; s=$((s+30))
  echo 32768 > /tmp/exp-defrag-piece; echo "$s p32k" >> $out/toggle.txt; sleep 30; s=$((s+30))
  echo 1048576 > /tmp/exp-defrag-piece; echo "$s p1m" >> $out/toggle.txt; sleep 30; s=$((s+30))
  rm -f /tmp/exp-defrag-piece
done
rm -f /tmp/exp-defrag-pause /tmp/exp-defrag-piece
