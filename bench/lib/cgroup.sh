#!/usr/bin/env bash
# Memory limits for benchmark servers, with cgroup v2 or v1:
#
#   cgroup.sh create NAME BYTES   make (or remake, empty) the group; prints its folder
#   cgroup.sh exec DIR CMD ARG... move this process into the group, then exec CMD in it
#   cgroup.sh remove DIR          remove the group (it must hold no process)
#
# Each server runs under the same limit so that a benchmark measures storage rather than the
# page cache: both cgroup versions count a group's page cache against its limit, and reclaim
# that cache when the group reaches it. The server is started inside the group (exec), so every
# thread and every page it touches from its first instruction is charged there.
#
# `create` exits 3 when neither cgroup v2 (/sys/fs/cgroup/cgroup.controllers with the memory
# controller) nor v1 (/sys/fs/cgroup/memory) is writable: the caller decides whether to refuse
# or to run unlimited, and says so.
set -euo pipefail

die() { echo "cgroup.sh: $*" >&2; exit 1; }

v2_root=/sys/fs/cgroup
v1_root=/sys/fs/cgroup/memory

create() {
    local name="$1" bytes="$2" dir
    [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad group name '$name'"
    [[ "$bytes" =~ ^[0-9]+$ ]] || die "bad byte count '$bytes'"
    if [[ -f "$v2_root/cgroup.controllers" ]] && grep -qw memory "$v2_root/cgroup.controllers"; then
        # The memory controller must be enabled for the root's children.
        grep -qw memory "$v2_root/cgroup.subtree_control" 2>/dev/null \
            || echo +memory >"$v2_root/cgroup.subtree_control" 2>/dev/null \
            || { echo "cgroup.sh: cannot enable the memory controller in $v2_root" >&2; exit 3; }
        dir="$v2_root/$name"
        fresh "$dir"
        echo "$bytes" >"$dir/memory.max"
        # No swap: this is a limit on memory, not a push to swap.
        [[ -f "$dir/memory.swap.max" ]] && echo 0 >"$dir/memory.swap.max"
    elif [[ -d "$v1_root" && -w "$v1_root" ]]; then
        dir="$v1_root/$name"
        fresh "$dir"
        echo "$bytes" >"$dir/memory.limit_in_bytes"
        [[ -f "$dir/memory.memsw.limit_in_bytes" ]] && echo "$bytes" >"$dir/memory.memsw.limit_in_bytes"
    else
        echo "cgroup.sh: no writable memory cgroup (neither v2 $v2_root/cgroup.controllers nor v1 $v1_root)" >&2
        exit 3
    fi
    echo "$dir"
}

# Makes DIR a new, empty group, so that its peak-usage counters start from zero. A group that
# still holds a process is someone's running server: refuse rather than take it over.
fresh() {
    local dir="$1"
    if [[ -d "$dir" ]]; then
        [[ -z "$(cat "$dir/cgroup.procs")" ]] || die "$dir still holds processes: $(tr '\n' ' ' <"$dir/cgroup.procs")"
        rmdir "$dir" || { echo "cgroup.sh: cannot remove $dir" >&2; exit 3; }
    fi
    mkdir "$dir" 2>/dev/null || { echo "cgroup.sh: cannot create $dir" >&2; exit 3; }
}

case "${1:-}" in
    create)
        [[ $# -eq 3 ]] || die "usage: cgroup.sh create NAME BYTES"
        create "$2" "$3"
        ;;
    exec)
        [[ $# -ge 3 ]] || die "usage: cgroup.sh exec DIR CMD [ARG]..."
        dir="$2"
        shift 2
        echo $$ >"$dir/cgroup.procs"
        exec "$@"
        ;;
    remove)
        [[ $# -eq 2 ]] || die "usage: cgroup.sh remove DIR"
        [[ -d "$2" ]] && rmdir "$2"
        ;;
    *)
        die "usage: cgroup.sh create NAME BYTES | exec DIR CMD [ARG]... | remove DIR"
        ;;
esac
