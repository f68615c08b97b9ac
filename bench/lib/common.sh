# Shared by bench/cassandra/ctl.sh and bench/hayate-ctl.sh; sourced, not run.
#
# A server here is a run folder: it holds the server's pid file, its cgroup's folder (or "none"),
# its logs and data. Start and stop go by that pid, never by process name, since other servers
# may run on the same machine.

bench_lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "${0##*/}: $*" >&2; exit 1; }

# parse_size 2GiB -> 2147483648. Bytes, or a whole number with KiB, MiB, GiB or TiB.
parse_size() {
    local text="$1" number unit
    [[ "$text" =~ ^([0-9]+)(|B|KiB|MiB|GiB|TiB)$ ]] || die "bad size '$text' (use e.g. 2GiB or 512MiB)"
    number="${BASH_REMATCH[1]}"
    unit="${BASH_REMATCH[2]}"
    case "$unit" in
        "" | B) echo "$number" ;;
        KiB) echo $((number << 10)) ;;
        MiB) echo $((number << 20)) ;;
        GiB) echo $((number << 30)) ;;
        TiB) echo $((number << 40)) ;;
    esac
}

# port_open HOST PORT: true when something accepts connections there.
port_open() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# pid_alive RUNDIR: true when the run folder's server process is running.
pid_alive() {
    local pid
    [[ -f "$1/server.pid" ]] || return 1
    pid="$(cat "$1/server.pid")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

# memory_group RUNDIR NAME BYTES ALLOW_UNLIMITED: makes the server's memory cgroup and writes its
# folder (or "none") to RUNDIR/cgroup. Without a writable cgroup this refuses, unless
# ALLOW_UNLIMITED is 1: then it warns loudly and records "none", which compare.py reports.
memory_group() {
    local rundir="$1" name="$2" bytes="$3" allow="$4" dir status=0
    dir="$("$bench_lib/cgroup.sh" create "$name" "$bytes")" || status=$?
    if [[ $status -eq 0 ]]; then
        echo "$dir" >"$rundir/cgroup"
    elif [[ $status -eq 3 && "$allow" == 1 ]]; then
        echo "########################################################################" >&2
        echo "# WARNING: no writable memory cgroup; the server runs WITHOUT a memory #" >&2
        echo "# limit, so the page cache may hold the whole data set.                #" >&2
        echo "########################################################################" >&2
        echo none >"$rundir/cgroup"
    elif [[ $status -eq 3 ]]; then
        die "no writable memory cgroup to limit the server to $bytes bytes; run as root, or pass --allow-unlimited to run without a limit"
    else
        exit "$status"
    fi
}

# launch RUNDIR LOGFILE CMD ARG...: starts CMD in the background in its own session, inside the
# run folder's cgroup when it has one, and writes its pid to RUNDIR/server.pid.
launch() {
    local rundir="$1" log="$2" group pid
    shift 2
    group="$(cat "$rundir/cgroup")"
    if [[ "$group" == none ]]; then
        setsid "$@" >"$log" 2>&1 </dev/null &
    else
        setsid "$bench_lib/cgroup.sh" exec "$group" "$@" >"$log" 2>&1 </dev/null &
    fi
    pid=$!
    echo "$pid" >"$rundir/server.pid"
}

# wait_ready RUNDIR HOST PORT TIMEOUT_S LOG...: waits until the CQL port accepts connections, or
# fails with the logs' tails when the process dies or the time runs out.
wait_ready() {
    local rundir="$1" host="$2" port="$3" timeout_s="$4" waited=0 log
    shift 4
    while ! port_open "$host" "$port"; do
        if ! pid_alive "$rundir"; then
            for log in "$@"; do [[ -f "$log" ]] && tail -20 "$log" >&2; done
            die "the server exited before it listened on $host:$port (logs: $*)"
        fi
        if ((waited >= timeout_s)); then
            for log in "$@"; do [[ -f "$log" ]] && tail -20 "$log" >&2; done
            die "the server did not listen on $host:$port within ${timeout_s}s (logs: $*)"
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

# stop_server RUNDIR TIMEOUT_S: SIGTERM (a clean shutdown), then SIGKILL after TIMEOUT_S, then
# removes the cgroup.
stop_server() {
    local rundir="$1" timeout_s="$2" pid waited=0 group
    if pid_alive "$rundir"; then
        pid="$(cat "$rundir/server.pid")"
        kill -TERM "$pid"
        while kill -0 "$pid" 2>/dev/null && ((waited < timeout_s)); do
            sleep 1
            waited=$((waited + 1))
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "${0##*/}: pid $pid still running after ${timeout_s}s; SIGKILL" >&2
            kill -KILL "$pid"
            sleep 1
        fi
    fi
    rm -f "$rundir/server.pid"
    group="$(cat "$rundir/cgroup" 2>/dev/null || echo none)"
    if [[ "$group" != none && -d "$group" ]]; then
        "$bench_lib/cgroup.sh" remove "$group" || true
    fi
}

# kill_server RUNDIR: SIGKILL, as a crash would end the server (the cluster's node-failure test);
# waits until the process is gone. The data and the cgroup stay, for the restart.
kill_server() {
    local rundir="$1" pid waited=0
    pid_alive "$rundir" || die "no server is running from $rundir"
    pid="$(cat "$rundir/server.pid")"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null && ((waited < 300)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$rundir/server.pid"
    echo "killed pid $pid"
}

status_server() {
    if pid_alive "$1"; then
        echo "running, pid $(cat "$1/server.pid"), cgroup $(cat "$1/cgroup")"
    else
        echo "stopped"
        return 3
    fi
}

# bench_pyenv: the bin folder of the venv compare.py makes ($HAYATE_BENCH_CACHE/pyenv, with
# cqlsh 6.2.2 and its cassandra-driver), made first if it is missing.
bench_pyenv() {
    local env="${HAYATE_BENCH_CACHE:-$HOME/.cache/hayate-bench}/pyenv"
    if [[ ! -x "$env/bin/cqlsh" ]]; then
        { python3 -m venv "$env" && "$env/bin/pip" install -q cqlsh==6.2.2; } >&2
    fi
    echo "$env/bin"
}

# create_usertable HOST PORT: YCSB's keyspace (RF 1) and table, as compare.py makes them for
# hayate.
create_usertable() {
    "$(bench_pyenv)/python" "$bench_lib/cqltool.py" "$1" "$2" exec \
        "CREATE KEYSPACE ycsb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" \
        "CREATE TABLE ycsb.usertable (y_id varchar PRIMARY KEY, $(printf 'field%d varchar, ' $(seq 0 8))field9 varchar)"
}
