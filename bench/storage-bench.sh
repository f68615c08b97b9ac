#!/usr/bin/env bash
# Runs the storage benchmark and appends its results to a markdown file in bench/results/.
#
#   bench/storage-bench.sh RECORDS THREADS SECONDS DIR [ENGINE]
#
# ENGINE is hayate, rocksdb or both (default both). DIR is scratch space for the engines' files
# and fio's test file, on the file system to measure; it must not be inside the git tree, and is
# deleted at the end unless KEEP_DIR=1. The results go to $OUT (default
# bench/results/storage-<today>.md); a second run with the same $OUT adds a section to it.
#
# ROCKSDB=system links the system's RocksDB (Debian's librocksdb-dev, 7.8) instead of building
# the one librocksdb-sys bundles (10.4, which takes 10 to 80 minutes to compile on two cores).
# CARGO_TARGET_DIR is honoured.
#
# Steps: install fio if missing; build storage-bench (with RocksDB unless ENGINE=hayate); measure
# the device with fio (4 KiB direct random reads, one synchronous read in flight per job, THREADS
# jobs, SECONDS long, on a file in DIR); run storage-bench; write the machine, the commands, the
# fio figures, storage-bench's tables and its JSON line.
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,15p' "$0" >&2
    exit 2
fi
records=$1 threads=$2 seconds=$3 dir=$4 engine=${5:-both}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/bench/results/storage-$(date +%F).md}

case "$(realpath -m "$dir")/" in
"$repo"/*)
    echo "DIR $dir is inside the git tree; put it elsewhere (e.g. /work/bench-data)" >&2
    exit 2
    ;;
esac

if ! command -v fio >/dev/null; then
    apt-get update && apt-get install -y fio
fi

features=(--features rocksdb)
[ "$engine" = hayate ] && features=()
build=(cargo build --release -p hayate-storage "${features[@]}" --bin storage-bench)
# librocksdb-sys generates its bindings with bindgen, which loads libclang, whichever RocksDB
# it links: a fresh machine lacks it.
if [ "$engine" != hayate ] && ! dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null | grep -q "ok installed"; then
    apt-get update && apt-get install -y libclang-dev
fi
if [ "${ROCKSDB:-bundled}" = system ] && [ "$engine" != hayate ]; then
    [ -e /usr/include/rocksdb/c.h ] || { apt-get update && apt-get install -y librocksdb-dev; }
    version=$(dpkg-query -W -f='${Version}' librocksdb-dev)
    build=(env ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu
        RUSTFLAGS="--cfg storage_bench_system_rocksdb"
        STORAGE_BENCH_ROCKSDB_VERSION="$version (Debian librocksdb-dev, dynamically linked)"
        "${build[@]}")
fi
(cd "$repo" && "${build[@]}")
bench_bin=${CARGO_TARGET_DIR:-$repo/target}/release/storage-bench

mkdir -p "$dir" "$(dirname "$out")"
log=$(mktemp)
trap 'rm -f "$log" "$log.fio"' EXIT

# fio's file: as large as the data set (at least 1 GiB), so the reads spread as widely.
fio_size_mib=$((records * 1024 / 1048576))
[ "$fio_size_mib" -lt 1024 ] && fio_size_mib=1024
fio_cmd=(fio --name=randread --filename="$dir/fio.dat" --size="${fio_size_mib}M"
    --direct=1 --rw=randread --bs=4k --iodepth=1 --numjobs="$threads" --ioengine=psync
    --time_based --runtime="$seconds" --group_reporting --output-format=json)
echo "fio: ${fio_cmd[*]}" >&2
"${fio_cmd[@]}" >"$log.fio"
rm -f "$dir/fio.dat"
fio_summary=$(python3 - "$log.fio" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
job = json.loads(text[text.index("{"):])["jobs"][0]["read"]
p = job["clat_ns"]["percentile"]
us = lambda k: p[k] / 1000
print(f"| fio 4 KiB randread | {job['iops']:.0f} | {us('50.000000'):.1f} | {us('95.000000'):.1f} | "
      f"{us('99.000000'):.1f} | {us('99.900000'):.1f} |")
EOF
)

bench_cmd=("$bench_bin" --engine "$engine" --records "$records" --threads "$threads" --dir "$dir"
    --seconds "$seconds")
echo "storage-bench: ${bench_cmd[*]}" >&2
"${bench_cmd[@]}" | tee "$log"

[ "${KEEP_DIR:-0}" = 1 ] || rm -rf "$dir"

{
    [ -s "$out" ] || printf '# Storage engine benchmark\n\n'
    printf '## Run of %s: %s records, %s threads, %s s per phase\n\n' "$(date -u +%FT%TZ)" \
        "$records" "$threads" "$seconds"
    printf '### Machine\n\n```\n'
    printf 'nproc: %s\nkernel: %s\n' "$(nproc)" "$(uname -srm)"
    grep -m1 'model name' /proc/cpuinfo || true
    free -h
    df -h "$(dirname "$(realpath -m "$dir")")"
    printf '```\n\n### Commands\n\n```\n'
    printf 'cd %s && CARGO_TARGET_DIR=%s %s\n' "$repo" "${CARGO_TARGET_DIR:-target}" "${build[*]}"
    printf '%s\n' "${fio_cmd[*]}" "${bench_cmd[*]}"
    printf '```\n\n### Device (fio, same file system, %s jobs = same concurrency)\n\n' "$threads"
    printf '| test | IOPS | p50 us | p95 us | p99 us | p99.9 us |\n|---|---:|---:|---:|---:|---:|\n'
    printf '%s\n\n' "$fio_summary"
    printf '### storage-bench\n\n'
    sed '$d' "$log"
    printf '\n### JSON\n\n```json\n%s\n```\n\n' "$(tail -n 1 "$log")"
} >>"$out"
echo "results appended to $out" >&2
