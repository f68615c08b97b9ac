"""gocql's own integration tests, against a hayate node of their own (issue 34).

Another driver's test suite checks what our own tests might share a blind spot with: the tests of
github.com/gocql/gocql v1.7.0 about lightweight transactions, counters and secondary indexes. The
version is pinned by tests/go/go.mod and go.sum; gocql's code stays in Go's module cache and is
never copied here. One `go test` run covers them all, and each becomes one pytest result:

    cd tests/go && go test -tags cassandra -count=1 -json -run '^(TestCAS|...)$' \\
        github.com/gocql/gocql -args -cluster 127.0.0.1:PORT -proto 4 -rf 1 -clusterSize 1

`-tags cassandra` is the build tag v1.7.0 puts these tests under (`integration` holds others:
authentication, ring discovery, UDFs). The flags after -args are gocql's own (common_test.go):
the contact point as host:port, so that the node needs no port 9042; protocol v4; the keyspace
`gocql_test` (which the first test drops and creates) with replication factor 1; and one node.
Protocol v5 is not run: v1.7.0 sends v5 without the segment framing Cassandra 4.0 made part of v5,
so Cassandra 5.0 and hayate alike read its first request as a damaged segment and gocql cannot
connect ("unsupported protocol response version").
The same command with `-cluster 127.0.0.1:9042` runs them against Apache Cassandra: 5.0.6 gives
the same results as hayate except that it passes TestGetColumnMetadata (CREATE INDEX).

What v1.7.0 leaves out: its one counter test (TestUnpreparedBatch, 100 increments in an unlogged
batch) starts with t.Skip, and TestCAS stops at its last step, a conditional batch over two rows,
on the dateOf() that Cassandra 5.0 removed. Both are listed below rather than patched: these are
gocql's tests as gocql ships them.

Go itself is not installed by the suite: without `go` (on PATH, at /usr/local/go/bin/go, or named
by HAYATE_GO) these tests skip and say so. The first run downloads gocql and its three dependencies
through GOPROXY (proxy.golang.org by default) into the module cache and builds the test binary
(about a minute on 2 cores); later runs need no network. go.sum lists every module the build
needs, so `go test` runs with its default -mod=readonly and no GOFLAGS.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REFERENCE
from hayate_node import REPO_ROOT, Node

GO_MODULE_DIR = REPO_ROOT / "tests" / "go"
GOCQL_PACKAGE = "github.com/gocql/gocql"
# The `go test -json` stream of the last run, for reading a failure in full.
REPORT = REPO_ROOT / "target" / "gocql-tests" / "go-test.json"
# The whole run: building the test binary (a minute from a cold cache), then the tests, which take
# a few seconds against a healthy node. gocql's -gocql.timeout bounds each request.
GO_TEST_TIMEOUT_S = 300
REQUEST_TIMEOUT = "20s"

# The selected tests, in the order gocql runs them, with what each covers.
SELECTED = {
    # Lightweight transactions: INSERT IF NOT EXISTS and DELETE IF through ScanCAS with
    # serial consistency LOCAL_SERIAL, ExecuteBatchCAS and MapExecuteBatchCAS on conditional
    # batches, and a conditional batch over two rows that answers a row for each.
    "TestCAS": "lwt",
    # INSERT IF NOT EXISTS through MapScanCAS: the existing row comes back by column name.
    "TestMapScanCAS": "lwt",
    # An unlogged batch of 100 counter increments, read back as 100.
    "TestUnpreparedBatch": "counter",
    # ScanCAS with nil destinations for the existing row's columns.
    "TestScanCASWithNilArguments": "lwt",
    # CREATE INDEX, then the columns' metadata from system_schema.
    "TestGetColumnMetadata": "index",
    # Java UDFs and an aggregate, a UDT, CREATE INDEX, then KeyspaceMetadata.
    "TestKeyspaceMetadata": "index",
}

# gocql v1.7.0 skips these itself, whatever the server; they stay selected so that a newer
# pinned version that runs them again is noticed.
UPSTREAM_SKIPS = {
    "TestUnpreparedBatch": 'its first line is t.Skip("FLAKE skipping"): gocql v1.7.0 runs no counter test',
}


@dataclass(frozen=True)
class ExpectedFailure:
    reason: str
    # The failure must say this (a regex over the test's output): failing for another reason,
    # earlier in the test, is a real failure.
    output: str


# Tests hayate fails, each with its reason: a feature hayate lacks yet, or a statement that
# Cassandra 5.0 refuses as well.
EXPECTED_FAILURES = {
    "TestCAS": ExpectedFailure(
        "its last step writes DATEOF(NOW()), and dateOf() is gone since Cassandra 5.0 "
        "(toTimestamp() replaces it): Cassandra 5.0.6 fails it at the same line. Every LWT "
        "step before it passed: INSERT IF NOT EXISTS and DELETE IF through ScanCAS at "
        "LOCAL_SERIAL, ExecuteBatchCAS and MapExecuteBatchCAS",
        r"insert: Unknown function dateof called"),
    "TestKeyspaceMetadata": ExpectedFailure(
        "it makes Java UDFs and an aggregate before its CREATE INDEX: hayate refuses them with "
        "Cassandra 5.0's own message, as Cassandra 5.0 does unless user_defined_functions_enabled "
        "is set",
        r"failed to create function with err"),
}


def find_go() -> str | None:
    """The `go` command: HAYATE_GO, else `go` on PATH, else where Go's own installer puts it."""
    named = os.environ.get("HAYATE_GO")
    if named:
        assert os.access(named, os.X_OK), f"HAYATE_GO={named} is not an executable go command"
        return named
    return shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go",) if os.access(p, os.X_OK)), None)


@dataclass
class GoTest:
    """One test's outcome in a `go test -json` stream: pass, fail, skip, or None if it never
    finished (the test binary died in an earlier test, or did not build)."""
    action: str | None = None
    output: list[str] = field(default_factory=list)

    def text(self, lines: int = 40) -> str:
        return "".join(self.output[-lines:]).rstrip()


@dataclass
class GoRun:
    tests: dict[str, GoTest]
    # Output that belongs to no single test: build errors, a panic's trace, the final FAIL.
    package_output: str
    returncode: int
    command: list[str]
    # The end of the node's log once the run was over, quoted with each failure.
    node_log: str

    def describe(self) -> str:
        return (f"`{' '.join(self.command)}` (in {GO_MODULE_DIR}) exited {self.returncode}.\n"
                f"{self.package_output[-4000:]}\nThe full -json stream is in {REPORT}.")


def parse_go_test_json(stream: str) -> tuple[dict[str, GoTest], str]:
    """Each test's action and output from `go test -json`; lines that are not JSON (a build
    failure's text on older Go releases) count as package output."""
    tests: dict[str, GoTest] = {}
    package: list[str] = []
    for line in stream.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            package.append(line + "\n")
            continue
        name = event.get("Test")
        # Subtests ("TestX/case") report under their parent.
        test = tests.setdefault(name.split("/")[0], GoTest()) if name else None
        if "Output" in event:
            (test.output if test else package).append(event["Output"])
        if test and "/" not in name and event.get("Action") in ("pass", "fail", "skip"):
            test.action = event["Action"]
    return tests, "".join(package)


@pytest.fixture(scope="module")
def gocql_run(request):
    if REFERENCE:
        pytest.skip("starts its own hayate node (HAYATE_REFERENCE is set); run the go test "
                    "command of this file's docstring against the reference server instead")
    go = find_go()
    if go is None:
        pytest.skip("Go is not installed (no `go` on PATH nor at /usr/local/go/bin/go): these "
                    "tests run gocql's own suite with `go test`; install Go 1.21 or later "
                    "(https://go.dev/dl/) or set HAYATE_GO to run them")
    node = Node("gocql")
    request.addfinalizer(node.discard)
    node.start()
    run_pattern = "^(" + "|".join(SELECTED) + ")$"
    command = [go, "test", "-tags", "cassandra", "-count=1", "-json",
               f"-timeout={GO_TEST_TIMEOUT_S}s", "-run", run_pattern, GOCQL_PACKAGE,
               "-args", "-cluster", f"{node.host}:{node.port}", "-proto", "4",
               "-rf", "1", "-clusterSize", "1", f"-gocql.timeout={REQUEST_TIMEOUT}"]
    # GOWORK=off: tests/go/go.mod decides the versions, whatever go.work lies above the checkout.
    env = {**os.environ, "GOWORK": "off"}
    proc = subprocess.run(command, cwd=GO_MODULE_DIR, env=env, capture_output=True, text=True,
                          timeout=GO_TEST_TIMEOUT_S + 300)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(proc.stdout + proc.stderr)
    tests, package_output = parse_go_test_json(proc.stdout)
    run = GoRun(tests, package_output + proc.stderr, proc.returncode, command, node.log_tail())
    if not node.alive():
        pytest.fail(f"the hayate node died while gocql's tests ran.\n{run.node_log}\n"
                    f"{run.describe()}")
    return run


@pytest.mark.slow
@pytest.mark.timeout(GO_TEST_TIMEOUT_S + 400)
@pytest.mark.parametrize("name", list(SELECTED))
def test_gocql(gocql_run, name):
    result = gocql_run.tests.get(name)
    assert result is not None and result.action is not None, (
        f"gocql's {name} gave no result.\n{gocql_run.describe()}")
    expected = EXPECTED_FAILURES.get(name)
    if result.action == "skip":
        if name in UPSTREAM_SKIPS:
            pytest.skip(f"gocql v1.7.0 skips {name}: {UPSTREAM_SKIPS[name]}")
        pytest.fail(f"gocql skipped {name}, which this suite expects to run:\n{result.text()}")
    if result.action == "pass":
        assert expected is None, (
            f"{name} passes now: remove it from EXPECTED_FAILURES ({expected.reason})")
        return
    if expected is not None and re.search(expected.output, result.text(200)):
        pytest.xfail(expected.reason)
    pytest.fail(f"gocql's {name} failed:\n{result.text()}\n\n{gocql_run.node_log}",
                pytrace=False)
