"""hayate-bench load/run: the YCSB-compatible client against a real node.

What a benchmark user relies on: a YCSB command line works with the program name changed; the
summary block parses as YCSB's does and its counts add up; the rows really are in the table, under
YCSB's key names and with `fieldlength`-byte values; `-p rundir=` leaves well-formed files for
`hayate-bench report`; `-target` throttles; `insertstart`/`insertcount` load in parts; and a
missing table or a wrong host fails the way a user can understand, without a crash.

The client runs as a subprocess (`HAYATE_BENCH_BIN`, built by scripts/driver-tests.sh) against
the shared node, each test in its own keyspace.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from hayate_node import REPO_ROOT, free_port

BENCH_BIN = Path(os.environ.get("HAYATE_BENCH_BIN", REPO_ROOT / "target" / "debug" / "hayate-bench"))
WORKLOADS = REPO_ROOT / "workloads"
# The key YCSB names record number 0 (CoreWorkload.buildKeyName with insertorder=hashed), and
# record number 999, as YCSB 0.17.0 computes them.
KEY_0 = "user6284781860667377211"
KEY_999 = "user2071219101098386137"
# No single invocation here should come near this; a hang is a failure, not a slow test.
BENCH_TIMEOUT_S = 60

SUMMARY_LINE = re.compile(r"^\[([^\]]+)\], ([^,]+), (.+)$")


def bench(*args: str, timeout: float = BENCH_TIMEOUT_S) -> subprocess.CompletedProcess:
    if not BENCH_BIN.exists():
        pytest.fail(f"{BENCH_BIN} does not exist: build it with `cargo build -p hayate-bench`")
    return subprocess.run(
        [str(BENCH_BIN), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def summary(stdout: str) -> dict[tuple[str, str], float]:
    """Every `[METRIC], Measurement, value` line, as a YCSB results parser reads them."""
    out = {}
    for line in stdout.splitlines():
        m = SUMMARY_LINE.match(line)
        assert m, f"not a YCSB summary line: {line!r}"
        out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def connection(node, ks) -> list[str]:
    return ["-p", f"hosts={node.host}", "-p", f"port={node.port}", "-p", f"cassandra.keyspace={ks.name}"]


@pytest.fixture
def usertable(ks):
    fields = ", ".join(f"field{i} varchar" for i in range(10))
    ks.session.execute(f"CREATE TABLE usertable (y_id varchar PRIMARY KEY, {fields})")
    return ks


def count_rows(ks) -> int:
    return ks.session.execute("SELECT count(*) FROM usertable").one()[0]


def test_load_then_run_workloada_with_a_run_directory(node, usertable, tmp_path):
    ks = usertable
    load_dir = tmp_path / "load"
    load = bench(
        "load", "cassandra-cql", "-P", str(WORKLOADS / "workloada"), *connection(node, ks),
        "-p", "recordcount=3000", "-threads", "8", "-p", f"rundir={load_dir}",
    )
    assert load.returncode == 0, load.stderr
    s = summary(load.stdout)
    assert s[("INSERT", "Operations")] == 3000
    assert s[("INSERT", "Return=OK")] == 3000
    assert s[("CLEANUP", "Operations")] == 8
    assert s[("OVERALL", "Throughput(ops/sec)")] > 0
    assert ("INSERT", "95thPercentileLatency(us)") in s and ("INSERT", "99thPercentileLatency(us)") in s

    assert count_rows(ks) == 3000
    row = ks.session.execute("SELECT field0, field9 FROM usertable WHERE y_id = %s", [KEY_0]).one()
    assert row is not None, f"YCSB's key for record 0 ({KEY_0}) was not written"
    assert len(row.field0) == 100 and len(row.field9) == 100
    assert all(" " <= c <= "~" for c in row.field0)

    run_dir = tmp_path / "run"
    run = bench(
        "run", "cql", "-P", str(WORKLOADS / "workloada"), *connection(node, ks),
        "-p", "recordcount=3000", "-p", "operationcount=0", "-p", "maxexecutiontime=3",
        "-threads", "4", "-s", "-p", "status.interval=1", "-p", f"rundir={run_dir}",
        "-p", "label=workloada-test",
    )
    assert run.returncode == 0, run.stderr
    s = summary(run.stdout)
    runtime_ms = s[("OVERALL", "RunTime(ms)")]
    assert 2500 <= runtime_ms <= 20_000, runtime_ms
    ops = round(s[("OVERALL", "Throughput(ops/sec)")] * runtime_ms / 1000)
    reads, updates = s[("READ", "Return=OK")], s[("UPDATE", "Return=OK")]
    assert s[("READ", "Operations")] == reads and s[("UPDATE", "Operations")] == updates
    assert reads + updates == ops, (reads, updates, ops)
    assert reads > 0 and updates > 0
    assert ("READ", "Return=NOT_FOUND") not in s, "every key read was loaded"
    assert ("READ", "Return=ERROR") not in s and ("UPDATE", "Return=ERROR") not in s
    # -s prints YCSB's status line on stderr.
    assert re.search(r" \d+ sec: \d+ operations; [\d.]+ current ops/sec; .*\[READ: Count=\d+, Max=\d+", run.stderr)
    assert count_rows(ks) == 3000, "workload A updates, it does not insert"

    # summary.txt is the block printed at the end.
    assert (run_dir / "summary.txt").read_text() == run.stdout

    # timeseries.csv: one row per second per operation of the workload, plus ALL.
    with open(run_dir / "timeseries.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0].keys()) == [
        "elapsed_s", "operation", "count", "mean_us", "p50_us", "p95_us", "p99_us", "p999_us", "max_us", "length_s",
    ]
    seconds = sorted({int(r["elapsed_s"]) for r in rows})
    assert seconds == list(range(1, len(seconds) + 1)) and 3 <= len(seconds) <= 21, seconds
    for second in seconds:
        names = {r["operation"] for r in rows if int(r["elapsed_s"]) == second}
        assert {"READ", "UPDATE", "ALL"} <= names, (second, names)
    for r in rows:
        if int(r["count"]) == 0:
            assert r["mean_us"] == r["max_us"] == ""
        else:
            p50, p95, p99, p999, mx = (int(r[k]) for k in ("p50_us", "p95_us", "p99_us", "p999_us", "max_us"))
            assert 0 < p50 <= p95 <= p99 <= p999 <= mx, r
    assert sum(int(r["count"]) for r in rows if r["operation"] == "ALL") == ops
    # Every second is whole but the last, which says how much of it the run had.
    for r in rows:
        length = float(r["length_s"])
        if int(r["elapsed_s"]) < seconds[-1]:
            assert length == 1.0, r
        else:
            assert 0.0 < length <= 1.0, r
    assert sum(int(r["count"]) for r in rows if r["operation"] == "READ") == reads

    # meta.json: what the report and the harness need to know about the run.
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["label"] == "workloada-test" and meta["phase"] == "run"
    assert meta["threads"] == 4 and meta["target_ops"] is None
    assert meta["hosts"] == node.host and meta["version"].startswith("hayate-bench ")
    assert meta["argv"][1:3] == ["run", "cql"]
    assert meta["properties"]["requestdistribution"] == "zipfian"
    assert meta["properties"]["fieldcount"] == "10"
    assert meta["start_unix_ms"] < meta["end_unix_ms"]
    load_meta = json.loads((load_dir / "meta.json").read_text())
    assert load_meta["phase"] == "load" and load_meta["label"] == node.host

    # histogram.hlog: HdrHistogram's interval log, one tagged interval per second per operation.
    lines = (run_dir / "histogram.hlog").read_text().splitlines()
    assert any(line.startswith("#[StartTime: ") for line in lines)
    assert any(line.startswith('"StartTimestamp"') for line in lines)
    intervals = [line for line in lines if line.startswith("Tag=")]
    tags = {line.split(",")[0] for line in intervals}
    assert {"Tag=READ", "Tag=UPDATE", "Tag=ALL"} <= tags, tags
    ends: dict[str, float] = {}
    for line in intervals:
        tag, start, length, max_value, encoded = line.split(",")
        # About a second each (status.interval=1); a reporter that a busy machine wakes late
        # makes an interval longer, never shorter than the time it covers.
        assert float(start) >= 0 and 0 < float(length) <= 3 and float(max_value) >= 0
        # Each tag's intervals follow one another without overlapping.
        assert float(start) >= ends.get(tag, 0.0) - 0.001, (line, ends.get(tag))
        ends[tag] = float(start) + float(length)
        assert encoded.startswith("HISTFAA"), "a compressed V2 histogram, as Java's reader expects"


def test_target_throttles_and_reports_intended_latency(node, usertable, tmp_path):
    ks = usertable
    load = bench("load", "-P", str(WORKLOADS / "workloadc"), *connection(node, ks), "-p", "recordcount=200", "-threads", "4")
    assert load.returncode == 0, load.stderr
    started = time.monotonic()
    run = bench(
        "run", "-P", str(WORKLOADS / "workloadc"), *connection(node, ks), "-p", "recordcount=200",
        "-p", "operationcount=400", "-threads", "4", "-target", "200", "-p", f"rundir={tmp_path}",
    )
    took = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    s = summary(run.stdout)
    assert s[("READ", "Return=OK")] == 400
    # 400 operations at 200 per second: about two seconds. Generous bounds, no tight timing.
    assert s[("OVERALL", "RunTime(ms)")] >= 1500, s[("OVERALL", "RunTime(ms)")]
    assert s[("OVERALL", "Throughput(ops/sec)")] <= 270
    assert took < 30
    assert s[("Intended-READ", "Operations")] == 400
    assert s[("Intended-READ", "AverageLatency(us)")] >= s[("READ", "AverageLatency(us)")] * 0.5
    names = {r["operation"] for r in csv.DictReader(open(tmp_path / "timeseries.csv", newline=""))}
    assert {"READ", "ALL", "Intended-READ", "Intended-ALL"} <= names
    assert json.loads((tmp_path / "meta.json").read_text())["target_ops"] == 200


def test_insertstart_and_insertcount_load_in_parts(node, usertable):
    ks = usertable
    common = ["load", "-P", str(WORKLOADS / "workloada"), *connection(node, ks), "-p", "recordcount=1000", "-threads", "4"]
    first = bench(*common, "-p", "insertstart=0", "-p", "insertcount=400")
    assert first.returncode == 0, first.stderr
    assert summary(first.stdout)[("INSERT", "Return=OK")] == 400
    assert count_rows(ks) == 400
    second = bench(*common, "-p", "insertstart=400", "-p", "insertcount=600")
    assert second.returncode == 0, second.stderr
    assert summary(second.stdout)[("INSERT", "Return=OK")] == 600
    assert count_rows(ks) == 1000
    for key in (KEY_0, KEY_999):
        assert ks.session.execute("SELECT y_id FROM usertable WHERE y_id = %s", [key]).one() is not None, key


def test_createtable_makes_the_keyspace_and_table_a_load_needs(node, session, fresh_name):
    """`-p hayate.createtable=true`: a load on a node with no keyspace works as written."""
    name = fresh_name("bench_create")
    args = ["-P", str(WORKLOADS / "workloada"), "-p", f"hosts={node.host}", "-p", f"port={node.port}",
            "-p", f"cassandra.keyspace={name}", "-p", "recordcount=100", "-p", "hayate.createtable=true"]
    load = bench("load", "cassandra-cql", *args)
    assert load.returncode == 0, load.stderr
    assert session.execute(f"SELECT count(*) FROM {name}.usertable").one()[0] == 100
    again = bench("load", "cassandra-cql", *args)
    assert again.returncode == 0, f"a second createtable over the same table fails: {again.stderr}"
    bad = bench("load", "cassandra-cql", *args[:-2], "-p", "hayate.createtable=true", "-p",
                "hayate.replicationfactor=0")
    assert bad.returncode != 0 and "hayate.replicationfactor" in bad.stderr, bad.stderr
    session.execute(f"DROP KEYSPACE {name}")


def test_counter_mode_increments_each_field_it_writes(node, session, fresh_name):
    """`-p hayate.counter=true`: the fields are counters, each insert and update adds one to
    the fields it writes, so the counters' total is the fields written, none lost."""
    name = fresh_name("bench_counter")
    args = ["-P", str(WORKLOADS / "workloada"), "-p", f"hosts={node.host}", "-p", f"port={node.port}",
            "-p", f"cassandra.keyspace={name}", "-p", "recordcount=100", "-p", "operationcount=400",
            "-p", "fieldcount=2", "-p", "hayate.createtable=true", "-p", "hayate.counter=true"]
    load = bench("load", "cassandra-cql", *args)
    assert load.returncode == 0, load.stderr
    run = bench("run", "cassandra-cql", *args)
    assert run.returncode == 0, run.stderr
    ops = summary(run.stdout)
    assert ("UPDATE", "Return=OK") in ops and ("UPDATE", "Return=ERROR") not in ops, run.stdout
    total = sum(r.field0 + r.field1 for r in session.execute(f"SELECT * FROM {name}.usertable"))
    # The load writes both fields of 100 rows; each update writes one field (writeallfields=false).
    assert total == 200 + ops[("UPDATE", "Return=OK")]
    bad = bench("load", "cassandra-cql", *args, "-p", "hayate.lwt=true")
    assert bad.returncode != 0 and "hayate.counter" in bad.stderr, bad.stderr
    session.execute(f"DROP KEYSPACE {name}")


@pytest.mark.parametrize("kind", ["legacy", "sai"])
def test_index_mode_reads_every_row_by_its_indexed_column(node, session, fresh_name, kind):
    """`-p hayate.index=legacy|sai`: the table has an indexed column holding the key, and
    every read looks its row up by it (no partition key): each read finds its row."""
    name = fresh_name("bench_index")
    args = ["-P", str(WORKLOADS / "workloadc"), "-p", f"hosts={node.host}", "-p", f"port={node.port}",
            "-p", f"cassandra.keyspace={name}", "-p", "recordcount=100", "-p", "operationcount=300",
            "-p", "fieldcount=2", "-p", "hayate.createtable=true", "-p", f"hayate.index={kind}"]
    load = bench("load", "cassandra-cql", *args)
    assert load.returncode == 0, load.stderr
    run = bench("run", "cassandra-cql", *args)
    assert run.returncode == 0, run.stderr
    ops = summary(run.stdout)
    assert ops.get(("READ", "Return=OK")) == 300, run.stdout
    index = session.execute(
        "SELECT kind, options FROM system_schema.indexes WHERE keyspace_name = %s", (name,)).one()
    assert index.options["target"] == "y_ix"
    assert index.kind == ("CUSTOM" if kind == "sai" else "COMPOSITES")
    bad = bench("load", "cassandra-cql", *args, "-p", "hayate.counter=true")
    assert bad.returncode != 0 and "hayate.index" in bad.stderr, bad.stderr
    session.execute(f"DROP KEYSPACE {name}")


def test_a_missing_table_counts_errors_and_exits_cleanly(node, ks):
    load = bench("load", "-P", str(WORKLOADS / "workloada"), *connection(node, ks), "-p", "recordcount=100", "-threads", "2")
    assert load.returncode == 0, load.stderr
    s = summary(load.stdout)
    # As in YCSB, a failed insert stops its thread: one error per thread.
    assert s[("INSERT", "Return=ERROR")] == 2
    assert s[("INSERT-FAILED", "Operations")] == 2
    assert "usertable" in load.stderr and "panicked" not in load.stderr

    run = bench("run", "-P", str(WORKLOADS / "workloada"), *connection(node, ks), "-p", "recordcount=100",
                "-p", "operationcount=40", "-threads", "2")
    assert run.returncode == 0, run.stderr
    s = summary(run.stdout)
    errors = s.get(("READ", "Return=ERROR"), 0) + s.get(("UPDATE", "Return=ERROR"), 0)
    assert errors == 40
    assert ("READ", "Return=OK") not in s


def test_a_wrong_host_is_a_clear_error():
    port = free_port()
    started = time.monotonic()
    r = bench("run", "-P", str(WORKLOADS / "workloada"), "-p", "hosts=127.0.0.1", "-p", f"port={port}", timeout=30)
    assert r.returncode != 0
    assert f"cannot connect to the CQL hosts 127.0.0.1:{port}" in r.stderr, r.stderr
    assert "panicked" not in r.stderr
    assert r.stdout == "", "no summary for a run that never started"
    assert time.monotonic() - started < 25

    missing = bench("run", "-P", str(WORKLOADS / "workloada"))
    assert missing.returncode == 2 and "hosts is required" in missing.stderr, missing.stderr
    unknown = bench("run", "mongodb", "-p", "hosts=127.0.0.1")
    assert unknown.returncode == 2 and "speaks CQL only" in unknown.stderr, unknown.stderr
