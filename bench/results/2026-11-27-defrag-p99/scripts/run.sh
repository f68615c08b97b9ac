#!/usr/bin/env bash
# Experiment driver: one hayate node in a 2 GiB cgroup, 4M rows, workload ref.
# usage: run.sh NAME RUN_SECONDS [extra hayate.toml storage lines via EXTRA env]
set -euo pipefail
name=$1; secs=$2
repo=/work/main
bin=${BIN:-$repo/target/release/hayate}
out=/work/exp/$name; rm -rf "$out"; mkdir -p "$out"
rd=$repo/target/bench-work/exp-$name; rm -rf "$rd"; mkdir -p "$rd"
cd $repo
bench/hayate-ctl.sh start "$rd" --memory 2GiB --device-size 14GiB --binary "$bin" ${CTL_ARGS:-} >"$out/ctl.txt" 2>&1
if [ -n "${EXTRA:-}" ]; then echo "extra settings need a restart"; fi
source bench/lib/common.sh
create_usertable 127.0.0.1 9042
wl=$out/ref; sed 's/^requestdistribution=zipfian$/requestdistribution=uniform/' workloads/workloada > $wl
props=(-P $wl -p hosts=127.0.0.1 -p port=9042 -p recordcount=${RECORDS:-4000000} -p cassandra.readconsistencylevel=ONE -p cassandra.writeconsistencylevel=ONE)
target/release/hayate-bench load cql "${props[@]}" -threads 32 -s -p rundir=$out/load >"$out/load.txt" 2>&1
pid=$(cat "$rd/server.pid")
echo "node pid $pid" > $out/info.txt
( t0=$(date +%s); while kill -0 $pid 2>/dev/null; do
    now=$(date +%s); m=$(curl -s http://127.0.0.1:9180/metrics | awk '/^hayate_storage_(device_reads_total|defrag_moved_bytes_total|used_blocks|live_bytes|delta_folds_total|blind_writes_total|deltas|cache_hits_total) /{printf "%s=%s ", $1, $2}')
    echo "$((now-t0)) cpu=$(awk '{print $14+$15}' /proc/$pid/stat) $(awk '/read_bytes|write_bytes/{printf "%s%s ", $1, $2}' /proc/$pid/io) $m" >> $out/samples.txt
    sleep 10; done ) &
sampler=$!
if [ -n "${TOGGLE:-}" ]; then ( $TOGGLE $pid $out ) & toggler=$!; fi
target/release/hayate-bench run cql "${props[@]}" -threads 16 ${RUNARGS:-} -s -p operationcount=2000000000 -p maxexecutiontime=$secs -p rundir=$out/run >"$out/run.txt" 2>&1
[ -n "${toggler:-}" ] && kill $toggler 2>/dev/null || true
bench/hayate-ctl.sh stop "$rd" >>"$out/ctl.txt" 2>&1 || true
kill $sampler 2>/dev/null || true
cp $rd/logs/hayate.log $out/ 2>/dev/null || true
rm -rf "$rd"
echo done
