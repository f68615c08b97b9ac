#!/usr/bin/env bash
# Probe (not a benchmark): does keeping the node's CPU from halting lower hayate's latency at a
# low rate? One node pinned to CPU 0, hayate-bench pinned to CPU 1, 400k rows, workload `ref` at
# 3,600 ops/s with 8 threads for 30 s, three ways: as is; with a SCHED_IDLE busy loop on CPU 0
# (it runs only when nothing else wants that CPU, so the CPU never halts); with one on both CPUs.
# Run from the repository's root after `cargo build --release -p hayate-server -p hayate-bench`.
set -euo pipefail
source bench/lib/common.sh
H=target/release/hayate; B=target/release/hayate-bench
D=target/bench-work/idle-probe; rm -rf $D; mkdir -p $D
printf '[storage]\npost_write_cache = "8MiB"\ndelta_buffer = "16MiB"\n' > $D/hayate.toml
taskset -c 0 $H local start --nodes 1 --dir $D -- --config $D/hayate.toml --device-size 4GiB >/dev/null
create_usertable 127.0.0.1 9042 >/dev/null
W=bench/results/2026-11-28-cluster-shares/workloads/ref
common="-P $W -p hosts=127.0.0.1 -p port=9042 -p recordcount=400000 -p cassandra.readconsistencylevel=ONE -p cassandra.writeconsistencylevel=ONE"
taskset -c 1 $B load cql $common -threads 32 -s -p rundir=$D/load -p label=load > /dev/null 2>&1
run() {
  out=$(taskset -c 1 $B run cql $common -threads 8 -s -p rundir=$D/run-$RANDOM -p label=x -target $2 -p operationcount=2000000000 -p maxexecutiontime=30 2>/dev/null)
  echo "$1 t=$2 $(echo "$out" | awk -F', ' '/Throughput/{printf "ops=%.0f ",$3} /^\[READ\], AverageLatency/{printf "r_avg=%.0f ",$3} /^\[READ\], 95th/{printf "r95=%s ",$3} /^\[READ\], 99th/{printf "r99=%s ",$3} /^\[UPDATE\], AverageLatency/{printf "u_avg=%.0f ",$3} /^\[UPDATE\], 95th/{printf "u95=%s ",$3} /^\[UPDATE\], 99th/{printf "u99=%s ",$3}')"
}
spin() { chrt -i 0 taskset -c "$1" sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!; }
for _ in 1 2; do
  run base 3600
  p=$(spin 0); run spin-node 3600; kill "$p"
  p=$(spin 0); q=$(spin 1); run spin-both 3600; kill "$p" "$q"
done
$H local stop --dir $D >/dev/null
