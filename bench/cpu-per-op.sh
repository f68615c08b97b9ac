#!/usr/bin/env bash
# Server CPU per operation: one hayate node pinned to CPU 0, hayate-bench pinned to CPU 1, a
# load of RECORDS rows then workload A (uniform, 50/50 read/update, 16 threads) for OPS
# operations unthrottled. The node's CPU (user + system, from /proc/<pid>/stat) is taken over the
# run phase only and divided by the operations done:
#
#   bench/cpu-per-op.sh [RECORDS] [OPS] ['storage_key = value' ...]     # default 200000 600000
#
# Each extra argument is a line added to the node's [storage] section, for example
# 'post_write_cache = "8MiB"' (reads go to the device), 'write_buffer_dir = ""' (no write
# buffer) or 'io_uring = false' (blocking device reads, five service threads per core); with the
# defaults the 256 MiB post-write cache leaves about 0.06 device reads per operation, and
# 'post_write_cache = "1GiB"' holds every row in RAM. Prints one line: settings, ops/s, node CPU
# µs per operation, device reads per operation. Needs a release build (cargo build --release
# -p hayate-server -p hayate-bench).
# On 2 shared cores figures move by 10-15% from run to run: compare settings in one sitting.
# HAYATE_NODE_BIN=path runs another build of the node (two commits compared in one sitting).
# HAYATE_WORKLOAD=workloade runs another workload file of workloads/ (still uniform; for
# workload E, short scans, the figure is per operation, 95% of them scans), HAYATE_ADDRESS the
# node on another loopback address (127.0.0.1 by default), and HAYATE_RUN_S=60 ends the run
# phase after that many seconds even if OPS operations are not done.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh
records=${1:-200000}
ops=${2:-600000}
shift $(( $# < 2 ? $# : 2 ))
bench=target/release/hayate-bench
node_bin=${HAYATE_NODE_BIN:-target/release/hayate}
[[ -x "$bench" && -x "$node_bin" ]] || { echo "cpu-per-op: cargo build --release -p hayate-server -p hayate-bench first" >&2; exit 1; }
work="target/bench-work/cpu-per-op-$$"
rm -rf "$work"; mkdir -p "$work"
port=$((20000 + $$ % 10000)); metrics=$((port + 1)); storage=$((port + 2))
address=${HAYATE_ADDRESS:-127.0.0.1}
workload=${HAYATE_WORKLOAD:-workloada}
{
    echo "data_dir = \"$PWD/$work/data\""
    echo "listen_address = \"$address\""
    echo "cql_port = $port"
    echo "[storage]"
    echo 'device_size = "4GiB"'
    for line in "$@"; do echo "$line"; done
    echo "[metrics]"
    echo "port = $metrics"
    echo "[cluster]"
    echo "storage_port = $storage"
} >"$work/hayate.toml"
taskset -c 0 "$node_bin" --config "$work/hayate.toml" >"$work/hayate.log" 2>&1 &
node=$!
trap 'kill $node 2>/dev/null; wait $node 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 150); do grep -q "listening for CQL clients" "$work/hayate.log" && break; sleep 0.2; done
props=(-P "workloads/$workload" -p requestdistribution=uniform -p hosts="$address" -p port=$port
       -p recordcount="$records" -p cassandra.readconsistencylevel=ONE -p cassandra.writeconsistencylevel=ONE)
create_usertable "$address" $port
taskset -c 1 "$bench" load cql "${props[@]}" -threads 16 >"$work/load.txt" 2>&1

cpu_ticks() { awk '{print $14 + $15}' "/proc/$node/stat"; }
device_reads() { curl -s "http://$address:$metrics/metrics" | awk '$1 == "hayate_storage_device_reads_total" {print $2}'; }
ticks_before=$(cpu_ticks); reads_before=$(device_reads); start=$(date +%s.%N)
taskset -c 1 "$bench" run cql "${props[@]}" -threads 16 -p operationcount="$ops" \
    ${HAYATE_RUN_S:+-p maxexecutiontime="$HAYATE_RUN_S"} >"$work/run.txt" 2>&1
end=$(date +%s.%N); ticks_after=$(cpu_ticks); reads_after=$(device_reads)
hz=$(getconf CLK_TCK)
done_ops=$(awk -F', ' '/^\[(READ|UPDATE|INSERT|SCAN)\], Operations/ {s += $3} END {if (s) print s}' "$work/run.txt")
[[ -n "$done_ops" ]] || { echo "cpu-per-op: no operation counts in the run's output:" >&2; tail -20 "$work/run.txt" >&2; exit 1; }
errors=$(grep -c "FAILED\|ERROR" "$work/run.txt" || true)
awk -v t0="$ticks_before" -v t1="$ticks_after" -v hz="$hz" -v ops="$done_ops" -v s="$start" -v e="$end" \
    -v r0="${reads_before:-0}" -v r1="${reads_after:-0}" -v settings="${*:-defaults}" -v errors="$errors" \
    'BEGIN { printf "%s: %.0f ops/s, node CPU %.1f µs/op, %.2f device reads/op, %d error lines\n",
             settings, ops / (e - s), (t1 - t0) / hz * 1e6 / ops, (r1 - r0) / ops, errors }'
