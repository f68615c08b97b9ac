#!/usr/bin/env bash
# Driver acceptance tests: real Cassandra clients against real hayate processes.
#
#   scripts/driver-tests.sh                    # everything
#   scripts/driver-tests.sh -k paging -x       # extra arguments go to pytest
#   HAYATE_BIN=target/release/hayate scripts/driver-tests.sh
#   HAYATE_BENCH_BIN=target/release/hayate-bench scripts/driver-tests.sh -k hayate_bench
#
# Runs tests/python (the Python cassandra-driver, cqlsh, raw protocol frames) and, from inside
# pytest, tests/java (the DataStax 3.11 and Apache 4.18 Java drivers, through Maven). The Rust
# driver test (crates/server/tests/scylla_driver.rs) runs with `cargo test`.
#
# tests/python/test_cluster_*.py start clusters of three nodes, each on a loopback block of its
# own (127.A.B.1-3, tests/python/hayate_cluster.py), kill and restart nodes under load, and cut
# the network between two of them inside a private namespace (root, unshare, nft; skipped
# without). `scripts/driver-tests.sh -k test_cluster_` runs just those;
# HAYATE_CLUSTER_SOAK_S=600 keeps their loads going that long. HAYATE_KEEP_DATA=1 keeps the
# nodes' data directories (by default a node keeps only its log once its test ends).
#
# On a fresh machine with Python 3.11, Java 17 and Maven it installs what it needs: a venv in
# target/pyenv with the pinned packages of tests/python/requirements.txt (reinstalled when that
# file changes), and Maven fetches the Java drivers into ~/.m2 on the first run. Node data and
# logs go to target/test-nodes/ (removed at the start of each run). Ends with one line,
# `driver-tests: N passed, M failed, K skipped` (after a line per reason for a skip), and exits
# non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
python=${PYTHON:-python3}
venv=target/pyenv
requirements=tests/python/requirements.txt
results=target/driver-tests
mkdir -p target "$results"

# 1. The Python environment. Debian ships `venv` without ensurepip unless python3-venv is
#    installed; install it when we can (root with apt), else say what is missing.
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== python venv ($venv)"
  rm -rf "$venv"
  if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "driver-tests: installing python3-venv with apt-get"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$python" -m venv "$venv"
    else
      echo "driver-tests: '$python -m venv' failed; install python3-venv (Debian: apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
  echo "$want" >"$stamp"
fi

# 2. Java and Maven, needed by tests/java (checked here so that a missing tool is named at once).
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "driver-tests: $tool is not on PATH; tests/java needs Java 17 and Maven 3.8" >&2
    exit 1
  fi
done

# 2b. The network partition test (tests/python/test_cluster_partition.py) drops traffic between
#     two nodes with nft inside a private network namespace (unshare -n, ip link): install
#     Debian's nftables and iproute2 when we can (root with apt); without them that test skips
#     and says why.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  command -v nft >/dev/null 2>&1 || missing+=(nftables)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "driver-tests: installing ${missing[*]} with apt-get (for the network partition test)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
      echo "driver-tests: could not install ${missing[*]}; the partition test will be skipped" >&2
  fi
fi

# 2c. The Grafana dashboard's test (tests/python/test_dashboard.py) runs every panel's query on
#     a real Prometheus scraping a cluster: install Debian's prometheus when we can (root with
#     apt); without it that test skips and says why. The package also enables a prometheus
#     service on port 9090 where systemd runs; the test starts its own on a free port.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v prometheus >/dev/null 2>&1; then
  echo "driver-tests: installing prometheus with apt-get (for the dashboard test)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } ||
    echo "driver-tests: could not install prometheus; the dashboard test will be skipped" >&2
fi

# 2d. gocql's own tests (tests/python/test_gocql.py) run with Go 1.21 or later, which this script
#     does not install: without `go` (on PATH, at /usr/local/go/bin/go, or named by HAYATE_GO)
#     they skip and say so. With it, the pinned gocql v1.7.0 and its dependencies (tests/go/go.sum)
#     are fetched here through GOPROXY (proxy.golang.org by default; no GOFLAGS needed), so that
#     an unreachable proxy is named at once rather than as a failing test; later runs use the
#     module cache offline.
go=${HAYATE_GO:-$(command -v go || true)}
if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then
  go=/usr/local/go/bin/go
fi
if [ -n "$go" ]; then
  if ! (cd tests/go && GOWORK=off "$go" mod download); then
    echo "driver-tests: 'go mod download' in tests/go failed (is GOPROXY reachable?); test_gocql will fail" >&2
  fi
else
  echo "driver-tests: go is not on PATH; gocql's tests (test_gocql.py) will be skipped"
fi

# 3. The binaries under test, built with the test profile (debug assertions on, opt-level 1):
#    after `cargo test --workspace` (scripts/test.sh) every dependency is already built so, and
#    the dev profile would build them all a second time.
if [ -z "${HAYATE_BIN:-}" ]; then
  echo "== cargo build --profile test -p hayate-server"
  if ! cargo build -q --profile test -p hayate-server; then
    echo "driver-tests: 0 passed, 1 failed (cargo build -p hayate-server failed)"
    exit 1
  fi
  export HAYATE_BIN="$PWD/target/debug/hayate"
fi
# The YCSB-compatible client, which tests/python/test_hayate_bench.py runs against the node.
if [ -z "${HAYATE_BENCH_BIN:-}" ]; then
  echo "== cargo build --profile test -p hayate-bench"
  if ! cargo build -q --profile test -p hayate-bench; then
    echo "driver-tests: 0 passed, 1 failed (cargo build -p hayate-bench failed)"
    exit 1
  fi
  export HAYATE_BENCH_BIN="$PWD/target/debug/hayate-bench"
fi

# 4. The tests. Leftover node directories from an earlier run are removed first; each node of
#    this run kills its process when its test ends.
rm -rf target/test-nodes
echo "== pytest tests/python (HAYATE_BIN=$HAYATE_BIN)"
set +e
"$venv/bin/python" -m pytest tests/python --junitxml="$results/pytest.xml" "$@"
status=$?
set -e

# One closing line, as scripts/test.sh prints for cargo test.
"$venv/bin/python" - "$results/pytest.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("driver-tests: 0 passed, 1 failed (pytest wrote no report)")
    sys.exit()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
# Why each was skipped, grouped by reason (pytest's "Skipped: " prefix dropped).
reasons = {}
for case in root.iter("testcase"):
    for skip in case.findall("skipped"):
        reason = (skip.get("message") or "no reason given").removeprefix("Skipped: ").strip()
        reasons.setdefault(reason, []).append(case.get("name", "?"))
for reason, names in sorted(reasons.items(), key=lambda r: -len(r[1])):
    print(f"driver-tests: skipped {len(names)} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): {reason}")
print(f"driver-tests: {total - failed - skipped} passed, {failed} failed, {skipped} skipped")
PY
exit "$status"
