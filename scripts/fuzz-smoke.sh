#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ briefly: a smoke test that the decoders survive arbitrary bytes.
#
#   scripts/fuzz-smoke.sh                 # each target for 20 s
#   FUZZ_SECONDS=300 scripts/fuzz-smoke.sh
#   FUZZ_TOOLCHAIN=nightly scripts/fuzz-smoke.sh   # a nightly toolchain instead of stable
#
# Prints one line per target and exits 0, or prints the failing target's log tail and the path
# of the input that crashed it, and exits 1.
#
# cargo-fuzz passes nightly-only flags (-Zsanitizer=address) to rustc. Without FUZZ_TOOLCHAIN
# this runs the default (stable) toolchain with RUSTC_BOOTSTRAP=1, which unlocks them on stable,
# so nothing has to be downloaded besides cargo-fuzz itself and the crates from crates.io.
# CARGO_CACHE_RUSTC_INFO=0: cargo caches rustc's answers keyed by the flags but not by
# RUSTC_BOOTSTRAP, so one earlier run without it would otherwise fail every later one.

set -euo pipefail

seconds="${FUZZ_SECONDS:-20}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi

export CARGO_CACHE_RUSTC_INFO=0
fuzz=(cargo fuzz)
if [[ -n "${FUZZ_TOOLCHAIN:-}" ]]; then
    fuzz=(cargo "+$FUZZ_TOOLCHAIN" fuzz)
else
    export RUSTC_BOOTSTRAP=1
fi

logs="$root/fuzz/target/fuzz-smoke"
mkdir -p "$logs"

# One build of every target, so each run below starts at once.
# The lines that say what went wrong: a panic and its message, a sanitizer or libFuzzer error
# (crash, timeout, out of memory), or a compiler error; else the end of the log.
explain() {
    grep -m1 -A4 -E 'panicked at|ERROR: |^error(\[|:)' "$1" || tail -n 20 "$1"
}

if ! "${fuzz[@]}" build >"$logs/build.log" 2>&1; then
    explain "$logs/build.log"
    echo "fuzz-smoke: building the fuzz targets failed (full log: $logs/build.log)"
    exit 1
fi

status=0
for target in $("${fuzz[@]}" list); do
    log="$logs/$target.log"
    # corpus/<target> first: libFuzzer writes what it finds into the first directory, and
    # seeds/<target> is committed.
    mkdir -p "corpus/$target"
    if "${fuzz[@]}" run "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
        echo "fuzz-smoke: $target ok (${runs:-?} inputs in ${seconds} s)"
    else
        status=1
        explain "$log"
        artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
        echo "fuzz-smoke: $target FAILED (full log: $log)"
        if [[ -n "$artifact" ]]; then
            case "$artifact" in
                /*) ;;
                *) artifact="$root/fuzz/${artifact#./}" ;;
            esac
            echo "fuzz-smoke: reproducer: $artifact"
            echo "fuzz-smoke: replay: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run $target $artifact"
        fi
    fi
done
exit "$status"
