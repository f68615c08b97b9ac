#!/usr/bin/env bash
# Does hayate-bench report what YCSB reports? Runs the same throttled workload against the same
# hayate node with both clients, one after the other:
#
#   bench/client-check.sh [RECORDS] [TARGET_OPS] [SECONDS]     # default 300000 3000 60
#
# The node is pinned to CPU 0 and each client to CPU 1 (taskset), so that the Java client's
# larger CPU cost does not land on the server's core: on 2 shared cores an unpinned comparison
# measures the clients' CPU more than their figures. Both runs use the repository's workloada
# with uniform keys, 16 threads and -target TARGET_OPS; the second client reads the rows the
# first one's load wrote. Results go to bench/results/<date>-client-check-<HHMM>/ (a run folder per
# client and a table in client-check.md). Needs a release build and bench/ycsb-java/install.sh
# (run here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib/common.sh
records=${1:-300000}
target=${2:-3000}
seconds=${3:-60}
out="bench/results/$(date +%F)-client-check-$(date +%H%M)"
work="target/bench-work/client-check"
rm -rf "$work"; mkdir -p "$out" "$work"
ycsb_home=$(bench/ycsb-java/install.sh | tail -1)
[[ -d "$ycsb_home" ]] || { echo "client-check: YCSB install failed" >&2; exit 1; }
bench=target/release/hayate-bench
[[ -x "$bench" && -x target/release/hayate ]] || { echo "client-check: cargo build --release -p hayate-server -p hayate-bench first" >&2; exit 1; }

port=9342
cat >"$work/hayate.toml" <<TOML
data_dir = "$PWD/$work/data"
cql_port = $port
[storage]
device_size = "4GiB"
[metrics]
port = 0
TOML
taskset -c 0 target/release/hayate --config "$work/hayate.toml" >"$work/hayate.log" 2>&1 &
node=$!
trap 'kill $node 2>/dev/null; wait $node 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
create_usertable 127.0.0.1 $port

props=(-P workloads/workloada -p requestdistribution=uniform -p hosts=127.0.0.1 -p port=$port
       -p recordcount="$records" -p cassandra.readconsistencylevel=ONE -p cassandra.writeconsistencylevel=ONE)
taskset -c 1 "$bench" load cql "${props[@]}" -threads 16 >"$work/load.txt" 2>&1

run() {  # name program...
    local name=$1; shift
    mkdir -p "$out/$name"
    taskset -c 1 "$@" run cassandra-cql "${props[@]}" -threads 16 -target "$target" \
        -p operationcount=2000000000 -p maxexecutiontime="$seconds" -p rundir="$PWD/$out/$name" -p label="$name" \
        >"$out/$name/summary.txt" 2>"$out/$name/client-stderr.txt"
}
run hayate-bench "$bench"
run ycsb bench/ycsb-java/ycsb

{
  echo "# hayate-bench and YCSB 0.17.0 against the same hayate node"
  echo
  echo "$(date -u +%FT%TZ), hayate $(git rev-parse --short HEAD), $records records, workloada with uniform keys,"
  echo "16 threads, -target $target, $seconds s each; node on CPU 0, client on CPU 1 (taskset)."
  echo "Command: bench/client-check.sh $records $target $seconds"
  echo
  echo "| client | ops/s | read avg (us) | read p95 (us) | read p99 (us) | update avg (us) | update p95 (us) | update p99 (us) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for name in hayate-bench ycsb; do
    s="$out/$name/summary.txt"
    f() { grep -F "[$1], $2" "$s" | head -1 | awk -F', ' '{printf "%.0f", $3}'; }
    echo "| $name | $(f OVERALL 'Throughput(ops/sec)') | $(f READ 'AverageLatency(us)') | $(f READ '95thPercentileLatency(us)') | $(f READ '99thPercentileLatency(us)') | $(f UPDATE 'AverageLatency(us)') | $(f UPDATE '95thPercentileLatency(us)') | $(f UPDATE '99thPercentileLatency(us)') |"
  done
} >"$out/client-check.md"
cat "$out/client-check.md"
