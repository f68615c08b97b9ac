#!/usr/bin/env bash
pid=$1; out=$2
rm -f /tmp/exp-defrag-pause /tmp/exp-nowipesync /tmp/exp-nosync
sleep 420; s=420
while kill -0 $pid 2>/dev/null; do
  echo "$s normal" >> $out/toggle.txt; sleep 30; s=$((s+30))
  touch /tmp/exp-nowipesync; echo "$s nowipesync" >> $out/toggle.txt; sleep 30; s=$((s+30))
  touch /tmp/exp-nosync; echo "$s nosync" >> $out/toggle.txt; sleep 30; s=$((s+30))
  rm -f /tmp/exp-nosync /tmp/exp-nowipesync
  touch /tmp/exp-defrag-pause; echo "$s pause" >> $out/toggle.txt; sleep 30; s=$((s+30))
  rm -f /tmp/exp-defrag-pause; echo "$s recover" >> $out/toggle.txt; sleep 30; s=$((s+30))
done
rm -f /tmp/exp-defrag-pause /tmp/exp-nowipesync /tmp/exp-nosync
