#!/usr/bin/env bash
# A probe, not a benchmark: hayate's latency at a few fixed rates, 8 client threads, on a small
# cluster from `hayate local start`. Run from the repository root after
# `cargo build --release -p hayate-server -p hayate-bench` and `bench/compare.py` has installed
# its Python environment (for cqltool.py).
#
#   probe.sh LABEL CONSISTENCY "RATES" [extra lines for [storage]] [extra sections]
#
# Environment: NODES (3), RF (2), HOSTS (127.0.0.1,127.0.0.2,127.0.0.3), PWC (post-write cache,
# 8MiB), THREADS (8), SECS (45 per rate). 400k rows of workload `ref` (1 KB, 50/50 uniform).
set -euo pipefail
LABEL=$1; CL=$2; RATES=$3; STORAGE_EXTRA=${4:-}; OTHER_EXTRA=${5:-}
H=target/release/hayate; B=target/release/hayate-bench
D=${PROBE_DIR:-target/probe}; rm -rf "$D"; mkdir -p "$D"
printf '[storage]\npost_write_cache = "%s"\ndelta_buffer = "16MiB"\n%b\n%b\n' \
  "${PWC:-8MiB}" "$STORAGE_EXTRA" "$OTHER_EXTRA" > "$D/hayate.toml"
$H local start --nodes "${NODES:-3}" --dir "$D" -- --config "$D/hayate.toml" --device-size 4GiB >/dev/null
PY=~/.cache/hayate-bench/pyenv/bin/python
$PY bench/lib/cqltool.py 127.0.0.1 9042 exec \
  "CREATE KEYSPACE ycsb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': ${RF:-2}}" \
  "CREATE TABLE ycsb.usertable (y_id varchar PRIMARY KEY, $(printf 'field%d varchar, ' $(seq 0 8))field9 varchar)" >/dev/null
W=bench/results/2026-11-28-cluster-shares/workloads/ref
common="-P $W -p hosts=${HOSTS:-127.0.0.1,127.0.0.2,127.0.0.3} -p port=9042 -p recordcount=400000
  -p cassandra.readconsistencylevel=$CL -p cassandra.writeconsistencylevel=$CL"
# shellcheck disable=SC2086
$B load cql $common -threads 64 -s -p rundir="$D/load" -p label=load >/dev/null 2>&1
for t in $RATES; do
  # shellcheck disable=SC2086
  out=$($B run cql $common -threads "${THREADS:-8}" -s -p rundir="$D/run-$t-$RANDOM" -p label=x \
    -target "$t" -p operationcount=2000000000 -p maxexecutiontime="${SECS:-45}" 2>/dev/null)
  echo "$LABEL t=$t $(echo "$out" | awk -F', ' '
    /Throughput/ {printf "ops=%.0f ", $3}
    /^\[READ\], AverageLatency/ {printf "r_avg=%.0f ", $3}
    /^\[READ\], 95th/ {printf "r95=%s ", $3}
    /^\[READ\], 99th/ {printf "r99=%s ", $3}
    /^\[UPDATE\], AverageLatency/ {printf "u_avg=%.0f ", $3}
    /^\[UPDATE\], 95th/ {printf "u95=%s ", $3}
    /^\[UPDATE\], 99th/ {printf "u99=%s ", $3}')"
done
$H local stop --dir "$D" >/dev/null
