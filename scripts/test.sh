#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs).
# It installs what it needs on a fresh machine, then runs, in order: formatting check, every
# Rust test in the workspace (unit tests, the engine's model, crash, corruption and device-full
# tests in crates/storage/tests, and the scylla driver test in crates/server/tests), the driver
# suites against a real node (scripts/driver-tests.sh), and a short run of each fuzz target.
# Long benchmarks are not here: see bench/storage-bench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each part's wall time, printed as it ends (CI keeps this log when a run fails).
phase_start=$SECONDS
phase_done() {
  echo "== $1 took $((SECONDS - phase_start)) s (total $SECONDS s)"
  phase_start=$SECONDS
}

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "test.sh: cargo not found; install Rust (rustup) first" >&2
    exit 1
  fi
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo test"
mkdir -p target
set +e
cargo test --workspace 2>&1 | tee target/test-output.txt
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "cargo test failed (exit $status)" >&2
  exit "$status"
fi

# The driver suites: a real hayate process and real clients (Python driver, cqlsh, Java drivers).
phase_done "cargo test (build included)"

echo "== driver tests"
# `cargo test` built the node and hayate-bench for the crates' own integration tests (test
# profile, the workspace's features): the driver suites run those, with nothing built again.
if [ -x target/debug/hayate ] && [ -x target/debug/hayate-bench ]; then
  export HAYATE_BIN="${HAYATE_BIN:-$PWD/target/debug/hayate}"
  export HAYATE_BENCH_BIN="${HAYATE_BENCH_BIN:-$PWD/target/debug/hayate-bench}"
fi
set +e
scripts/driver-tests.sh 2>&1 | tee target/driver-test-output.txt
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "driver tests failed (exit $status)" >&2
  exit "$status"
fi

phase_done "driver tests (build included)"

echo "== benchmark sittings' size"
scripts/sitting-sizes.sh

if [ -x scripts/fuzz-smoke.sh ]; then
  echo "== fuzz smoke (${FUZZ_SECONDS:-20} s per target)"
  scripts/fuzz-smoke.sh
  phase_done "fuzz smoke (build included)"
fi

# One closing line that CI's runner summary reads (a count with no line to count is 0, not an
# exit: `set -e` and `pipefail` would end the script at a grep that finds nothing).
passed=$({ grep -Eo 'test result: ok\. [0-9]+ passed' target/test-output.txt || true; } | awk '{s+=$4} END {print s+0}')
failed=$({ grep -Eo '[0-9]+ failed' target/test-output.txt || true; } | awk '{s+=$1} END {print s+0}')
skipped=$({ grep -Eo '[0-9]+ ignored' target/test-output.txt || true; } | awk '{s+=$1} END {print s+0}')
# Why each Rust test was ignored: its #[ignore = "..."] reason, as cargo prints it.
grep -E '^test .* \.\.\. ignored' target/test-output.txt | sed 's/^test /ignored: /' || true
# The driver suites report their own counts (pytest's summary line), and their skips' reasons.
if [ -f target/driver-test-output.txt ]; then
  grep -E '^driver-tests: skipped' target/driver-test-output.txt || true
  dp=$({ grep -Eo 'driver-tests: [0-9]+ passed' target/driver-test-output.txt || true; } | awk '{s+=$2} END {print s+0}')
  df=$({ grep -Eo 'driver-tests: [0-9]+ passed, [0-9]+ failed' target/driver-test-output.txt || true; } | awk '{s+=$4} END {print s+0}')
  ds=$({ grep -Eo 'driver-tests: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' target/driver-test-output.txt || true; } | awk '{s+=$6} END {print s+0}')
  passed=$((passed + dp))
  failed=$((failed + df))
  skipped=$((skipped + ds))
fi
echo "tests: $passed passed, $failed failed, $skipped skipped (the reasons are listed just above)"
