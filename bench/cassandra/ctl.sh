#!/usr/bin/env bash
# Starts, stops and reports one Cassandra node for the benchmark, by pid:
#
#   bench/cassandra/ctl.sh start RUNDIR [--host 127.0.0.1] [--cql-port 9042]
#                          [--storage-port 7000] [--memory 2GiB] [--cores N] [--allow-unlimited]
#                          [--seeds 127.0.0.1,127.0.0.2,127.0.0.3] [--token-rf 3]
#                          [--commitlog-sync periodic|group|batch] [--jvm-opt OPT]...
#   bench/cassandra/ctl.sh stop RUNDIR
#   bench/cassandra/ctl.sh status RUNDIR
#   bench/cassandra/ctl.sh kill RUNDIR     SIGKILL, for the cluster's node-failure test
#
# `start` installs Cassandra if needed (install.sh), writes RUNDIR/conf/cassandra.yaml from
# cassandra.yaml.template, makes a memory cgroup of --memory and starts CassandraDaemon inside
# it, in the background, with its pid in RUNDIR/server.pid; it returns once CQL answers. Data and
# commit log go to RUNDIR/data (use a folder on a real disk, not tmpfs), the log to
# RUNDIR/logs/system.log. RUNDIR/settings.env records the derived settings (heap, key cache,
# write threads) for the results.
#
# The heap is what conf/cassandra-env.sh computes for the memory the server is given (--memory,
# not the machine's): max(min(1/2 of it, 1 GiB), min(1/4 of it, 8 GiB)), 1 GiB at 2 GiB, as
# -Xms = -Xmx; the key cache is 1/8 of the heap (the reference: 1 GB of 8 GB); read and write
# threads follow cassandra.yaml's own rules: 16 per data drive (one here) and 8 per core.
#
# A cluster is several nodes started one after another, each on its own loopback address with
# the same ports and the same --seeds (every node's address), each in its own cgroup (named by
# address and port). A node that is its own only seed (the default) starts without waiting for
# gossip to settle; a cluster node waits as Cassandra does by default, so that each node sees
# the others' tokens before it allocates its own. --token-rf is
# allocate_tokens_for_local_replication_factor (3 as 5.0 ships it; 2 for a keyspace of RF 2).
#
# --jvm-opt adds one JVM option (repeatable), after the shipped ones: the topology benchmark
# (bench/topology.py) gives each node a local JMX port for nodetool
# (-Dcassandra.jmx.local.port=N) and a replacement its -Dcassandra.replace_address_first_boot=IP.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/common.sh
source "$here/../lib/common.sh"

usage() {
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[[ $# -ge 2 ]] || usage
command="$1"
rundir="$2"
shift 2
host=127.0.0.1
cql_port=9042
storage_port=7000
memory=2GiB
cores="$(nproc)"
allow_unlimited=0
seeds=""
token_rf=3
commitlog_sync=periodic
jvm_extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --host) host="$2"; shift 2 ;;
        --cql-port) cql_port="$2"; shift 2 ;;
        --storage-port) storage_port="$2"; shift 2 ;;
        --memory) memory="$2"; shift 2 ;;
        --cores) cores="$2"; shift 2 ;;
        --allow-unlimited) allow_unlimited=1; shift ;;
        --seeds) seeds="$2"; shift 2 ;;
        --token-rf) token_rf="$2"; shift 2 ;;
        --commitlog-sync) commitlog_sync="$2"; shift 2 ;;
        --jvm-opt) jvm_extra+=("$2"); shift 2 ;;
        *) usage ;;
    esac
done

start() {
    mkdir -p "$rundir"
    rundir="$(cd "$rundir" && pwd)"
    pid_alive "$rundir" && die "a server is already running from $rundir (pid $(cat "$rundir/server.pid"))"
    [[ "$host" == 127.* ]] || die "--host must be a loopback address (127.x.x.x), not $host"
    port_open "$host" "$cql_port" && die "something already listens on $host:$cql_port"
    port_open "$host" "$storage_port" && die "something already listens on $host:$storage_port"

    local home bytes heap_mib quarter_mib key_cache_mib concurrent_reads concurrent_writes options seed seed_list="" lone=()
    local -a seed_hosts
    [[ -n "$seeds" ]] || seeds="$host"
    [[ "$token_rf" =~ ^[1-9]$ ]] || die "--token-rf must be 1 to 9, not $token_rf"
    local sync_lines
    case "$commitlog_sync" in
        # Cassandra's default.
        periodic) sync_lines='commitlog_sync: periodic\ncommitlog_sync_period: 10000ms' ;;
        # Acknowledged once synced; the window as a Cassandra operations vendor's tooling sets
        # it for group mode (AxonOps' Ansible collection: 15ms), where 5.0's commented default
        # of 1000ms would put most of a second on every write. Cassandra refuses a period here.
        group) sync_lines='commitlog_sync: group\ncommitlog_sync_group_window: 15ms' ;;
        # Acknowledged once synced, the log synced as soon as a write waits for it, every write
        # waiting then sharing the sync: what hayate's commit_to_device does. 5.0 takes no
        # window for batch mode (commitlog_sync_batch_window_in_ms is deprecated).
        batch) sync_lines='commitlog_sync: batch' ;;
        *) die "--commitlog-sync must be periodic, group or batch, not $commitlog_sync" ;;
    esac
    IFS=, read -ra seed_hosts <<<"$seeds"
    for seed in "${seed_hosts[@]}"; do
        [[ "$seed" == 127.* ]] || die "--seeds must be loopback addresses (127.x.x.x), not $seed"
        seed_list+="${seed_list:+,}$seed:$storage_port"
    done
    if [[ "$seeds" == "$host" ]]; then
        # A lone node has no peers to wait for: start without the gossip settling wait and with
        # a 100 ms ring delay (5.0's defaults: wait for gossip to settle, a 30 s ring delay).
        lone=(-Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.ring_delay_ms=100)
    fi
    home="$("$here/install.sh" | tail -1)"
    bytes="$(parse_size "$memory")"
    # cassandra-env.sh's calculate_heap_sizes: max(min(1/2 ram, 1024MB), min(1/4 ram, 8GB)).
    heap_mib=$((bytes / 2 >> 20)); ((heap_mib > 1024)) && heap_mib=1024
    quarter_mib=$((bytes / 4 >> 20)); ((quarter_mib > 8192)) && quarter_mib=8192
    ((quarter_mib > heap_mib)) && heap_mib=$quarter_mib
    ((heap_mib >= 512)) || die "--memory $memory gives a heap of ${heap_mib} MiB; give at least 1GiB"
    key_cache_mib=$((heap_mib / 8))
    # cassandra.yaml: concurrent_reads "(16 * number_of_drives)", concurrent_writes
    # "(8 * number_of_cores)"; data and commit log share one drive here.
    concurrent_reads=16
    concurrent_writes=$((8 * cores))

    mkdir -p "$rundir/conf" "$rundir/data" "$rundir/logs"
    sed -e "s|@HOST@|$host|g" -e "s|@SEEDS@|$seed_list|g" -e "s|@TOKEN_RF@|$token_rf|g" -e "s|@CQL_PORT@|$cql_port|g" -e "s|@STORAGE_PORT@|$storage_port|g" \
        -e "s|@DATA_DIR@|$rundir/data|g" -e "s|@KEY_CACHE_MIB@|$key_cache_mib|g" \
        -e "s|@COMMITLOG_SYNC@|$sync_lines|g" \
        -e "s|@CONCURRENT_READS@|$concurrent_reads|g" -e "s|@CONCURRENT_WRITES@|$concurrent_writes|g" \
        "$here/cassandra.yaml.template" >"$rundir/conf/cassandra.yaml"
    grep -qE "@[A-Z_]+@" "$rundir/conf/cassandra.yaml" && die "a placeholder was left in $rundir/conf/cassandra.yaml"
    cp "$here/logback.xml" "$rundir/conf/logback.xml"
    cp "$here/jvm-options" "$rundir/conf/jvm-options"
    cat >"$rundir/settings.env" <<EOF
cassandra_version=$(cat "$home/.installed")
memory_limit_bytes=$bytes
heap_mib=$heap_mib
key_cache_mib=$key_cache_mib
concurrent_writes=$concurrent_writes
concurrent_reads=$concurrent_reads
commitlog_sync=$commitlog_sync
cores=$cores
host=$host
cql_port=$cql_port
storage_port=$storage_port
seeds=$seeds
allocate_tokens_for_local_replication_factor=$token_rf
lone_node_startup=$([[ ${#lone[@]} -gt 0 ]] && echo yes || echo no)
jvm_extra=${jvm_extra[*]}
EOF

    memory_group "$rundir" "hayate-bench-cassandra-$host-$cql_port" "$bytes" "$allow_unlimited"
    # One argument per option; "--add-opens X" as written in Cassandra's files is "--add-opens=X".
    mapfile -t options < <(grep -E '^-' "$here/jvm-options" | sed -E 's/^(--add-[a-z]+) /\1=/')
    launch "$rundir" "$rundir/logs/stdout.log" \
        java "-Xms${heap_mib}m" "-Xmx${heap_mib}m" "${options[@]}" "${lone[@]}" "${jvm_extra[@]}" \
        "-Dcassandra.config=file://$rundir/conf/cassandra.yaml" \
        "-Dlogback.configurationFile=$rundir/conf/logback.xml" \
        "-Dcassandra.logdir=$rundir/logs" "-Dcassandra.storagedir=$rundir/data" \
        -Dcassandra-foreground=yes \
        -cp "$home/lib/*" org.apache.cassandra.service.CassandraDaemon
    wait_ready "$rundir" "$host" "$cql_port" 300 "$rundir/logs/stdout.log" "$rundir/logs/system.log"
    echo "cassandra running: pid $(cat "$rundir/server.pid"), $host:$cql_port, heap ${heap_mib} MiB, cgroup $(cat "$rundir/cgroup")"
}

case "$command" in
    start) start ;;
    stop) stop_server "$rundir" 120 ;;
    kill) kill_server "$rundir" ;;
    status) status_server "$rundir" ;;
    *) usage ;;
esac
