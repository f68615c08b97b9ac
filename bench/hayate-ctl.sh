#!/usr/bin/env bash
# Starts, stops and reports one hayate node for the benchmark, by pid:
#
#   bench/hayate-ctl.sh start RUNDIR [--host 127.0.0.1] [--cql-port 9042] [--metrics-port 9180]
#                       [--memory 2GiB] [--device-size 8GiB] [--binary target/release/hayate]
#                       [--allow-unlimited] [--seeds 127.0.0.1,127.0.0.2,127.0.0.3]
#                       [--storage-port 7000] [--commit-to-device] [--read-page-cache]
#                       [--delta-buffer SIZE] [--stream-throughput 24MiB]
#                       [--replace-address IP]
#   bench/hayate-ctl.sh stop RUNDIR
#   bench/hayate-ctl.sh status RUNDIR
#   bench/hayate-ctl.sh kill RUNDIR     SIGKILL, for the cluster's node-failure test
#
# `start` writes RUNDIR/hayate.toml (every setting at its default but the addresses, the data
# folder RUNDIR/data and the device size), makes a memory cgroup of --memory and starts the node
# inside it, in the background, with its pid in RUNDIR/server.pid; it returns once CQL answers.
# It does not build: compare.py runs `cargo build --release` first. The log goes to
# RUNDIR/logs/hayate.log.
#
# A cluster is several nodes, each on its own loopback address with the same ports and the same
# --seeds (every node's address), each in its own cgroup (named by address and port); nodes
# started together with the same seeds form one ring with hayate's default 16 tokens each.
# Without --seeds the node is a cluster of one, as before. A node started later with --seeds
# joins the ring (the topology benchmark, bench/topology.py), and returns once it is normal;
# --stream-throughput sets [cluster] stream_throughput ("0" unthrottled; hayate's default,
# 24MiB, when not given) and --replace-address [cluster] replace_address (a fresh node taking a
# dead one's place).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/common.sh
source "$here/lib/common.sh"

usage() {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[[ $# -ge 2 ]] || usage
command="$1"
rundir="$2"
shift 2
host=127.0.0.1
cql_port=9042
metrics_port=9180
memory=2GiB
device_size=8GiB
binary="$here/../target/release/hayate"
allow_unlimited=0
seeds=""
storage_port=7000
commit_to_device=false
read_page_cache=false
delta_buffer=""
stream_throughput=""
replace_address=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --host) host="$2"; shift 2 ;;
        --cql-port) cql_port="$2"; shift 2 ;;
        --metrics-port) metrics_port="$2"; shift 2 ;;
        --memory) memory="$2"; shift 2 ;;
        --device-size) device_size="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        --allow-unlimited) allow_unlimited=1; shift ;;
        --seeds) seeds="$2"; shift 2 ;;
        --storage-port) storage_port="$2"; shift 2 ;;
        --commit-to-device) commit_to_device=true; shift ;;
        --read-page-cache) read_page_cache=true; shift ;;
        --delta-buffer) delta_buffer="$2"; shift 2 ;;
        --stream-throughput) stream_throughput="$2"; shift 2 ;;
        --replace-address) replace_address="$2"; shift 2 ;;
        *) usage ;;
    esac
done

start() {
    mkdir -p "$rundir"
    rundir="$(cd "$rundir" && pwd)"
    pid_alive "$rundir" && die "a server is already running from $rundir (pid $(cat "$rundir/server.pid"))"
    [[ "$host" == 127.* ]] || die "--host must be a loopback address (127.x.x.x), not $host"
    [[ -x "$binary" ]] || die "no hayate binary at $binary (cargo build --release -p hayate-server)"
    port_open "$host" "$cql_port" && die "something already listens on $host:$cql_port"
    port_open "$host" "$metrics_port" && die "something already listens on $host:$metrics_port"

    local bytes seed seed_toml="" cluster_toml=""
    local -a seed_hosts
    bytes="$(parse_size "$memory")"
    if [[ -n "$seeds" ]]; then
        port_open "$host" "$storage_port" && die "something already listens on $host:$storage_port"
        IFS=, read -ra seed_hosts <<<"$seeds"
        for seed in "${seed_hosts[@]}"; do
            [[ "$seed" == 127.* ]] || die "--seeds must be loopback addresses (127.x.x.x), not $seed"
            seed_toml+="${seed_toml:+, }\"$seed\""
        done
        cluster_toml="
[cluster]
# Every node of the benchmark's cluster; tokens (16 per node) and the rest at their defaults.
seeds = [$seed_toml]
storage_port = $storage_port"
        if [[ -n "$stream_throughput" ]]; then
            cluster_toml+="
# Bytes a second this node streams to others at most (bench/topology.py; \"0\": unthrottled).
stream_throughput = \"$stream_throughput\""
        fi
        if [[ -n "$replace_address" ]]; then
            [[ "$replace_address" == 127.* ]] || die "--replace-address must be a loopback address (127.x.x.x), not $replace_address"
            cluster_toml+="
# First start only: this node replaces the dead node at this address (bench/topology.py).
replace_address = \"$replace_address\""
        fi
    elif [[ -n "$stream_throughput$replace_address" ]]; then
        die "--stream-throughput and --replace-address need --seeds (a cluster)"
    fi
    parse_size "$device_size" >/dev/null
    mkdir -p "$rundir/data" "$rundir/logs"
    local delta_toml=""
    if [[ -n "$delta_buffer" ]]; then
        delta_toml="# RAM for updates written without reading the row (compare.py --delta-buffer;
# \"0\" makes every update read its row first).
delta_buffer = \"$delta_buffer\""
    fi
    cat >"$rundir/hayate.toml" <<EOF
# Written by bench/hayate-ctl.sh: hayate's defaults (hayate.toml.example) except for these.
listen_address = "$host"
cql_port = $cql_port
data_dir = "$rundir/data"
log_level = "info"

[storage]
# Sized by compare.py to hold the data set several times over, so that defragmentation has
# room as it would on a real device.
device_size = "$device_size"
# Acknowledge writes once synced to the device (compare.py --durability device); false is the
# default.
commit_to_device = $commit_to_device
# Read records through the page cache, so that the memory the node leaves unused in its cgroup
# holds recently read pages, as Cassandra's does (compare.py --read-page-cache; false is the
# default).
read_page_cache = $read_page_cache
$delta_toml

[metrics]
listen_address = "$host"
port = $metrics_port
$cluster_toml
EOF
    cat >"$rundir/settings.env" <<EOF
hayate_binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
memory_limit_bytes=$bytes
device_size=$device_size
commit_to_device=$commit_to_device
read_page_cache=$read_page_cache
delta_buffer=${delta_buffer:-default}
host=$host
cql_port=$cql_port
metrics_port=$metrics_port
seeds=$seeds
storage_port=$storage_port
stream_throughput=${stream_throughput:-default}
replace_address=$replace_address
EOF

    memory_group "$rundir" "hayate-bench-hayate-$host-$cql_port" "$bytes" "$allow_unlimited"
    launch "$rundir" "$rundir/logs/hayate.log" "$binary" --config "$rundir/hayate.toml"
    wait_ready "$rundir" "$host" "$cql_port" 300 "$rundir/logs/hayate.log"
    echo "hayate running: pid $(cat "$rundir/server.pid"), $host:$cql_port, cgroup $(cat "$rundir/cgroup")"
}

case "$command" in
    start) start ;;
    stop) stop_server "$rundir" 120 ;;
    kill) kill_server "$rundir" ;;
    status) status_server "$rundir" ;;
    *) usage ;;
esac
