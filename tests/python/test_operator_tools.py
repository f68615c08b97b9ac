"""The operator's tools, as nodetool users expect them: `hayate info`, `tablestats`, `ring`,
`describecluster`, `flush`, `drain`, `setlogginglevel`, `getlogginglevels` and `defragstats`,
each run as a subprocess against a real node that the real Python driver wrote rows to.

Each node here is on 127.0.0.1 with ports of its own (hayate_node.free_port), never the
defaults. The figures checked are the ones this test caused (the rows it wrote, the deletions,
the reads), so that a constant or a figure of the wrong table cannot pass.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from hayate_node import HAYATE_BIN, free_port

TOOL_TIMEOUT_S = 60


def tool(node, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `hayate ARGS --host 127.0.0.1 --port <the node's metrics port>`."""
    done = subprocess.run(
        [str(HAYATE_BIN), *args, "--host", node.host, "--port", str(node.metrics_port)],
        capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, env={**os.environ, "NO_COLOR": "1"},
    )
    if check:
        assert done.returncode == 0, f"hayate {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def field(text: str, name: str) -> str:
    """The value of `name: value` (nodetool's `Name   : value` or tablestats' tab-indented)."""
    m = re.search(rf"^\s*{re.escape(name)}\s*: (.*)$", text, re.M)
    assert m, f"no {name!r} in:\n{text}"
    return m.group(1).strip()


@pytest.fixture
def ops_node(node_factory):
    return node_factory("ops", metrics_port=free_port())


def make_table(session, name: str) -> None:
    session.execute(f"CREATE KEYSPACE {name} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v text)")
    session.execute(f"CREATE TABLE {name}.other (k int PRIMARY KEY, v text)")


def test_info_shows_the_node(ops_node, node_factory):
    _, session = node_factory.connect(ops_node)
    local = session.execute("SELECT host_id, data_center, rack FROM system.local").one()
    out = tool(ops_node, "info").stdout
    assert field(out, "ID") == str(local.host_id)
    assert field(out, "Gossip active") == "true"
    assert field(out, "Native Transport active") == "true"
    assert field(out, "Data Center") == local.data_center
    assert field(out, "Rack") == local.rack
    assert int(field(out, "Uptime (seconds)")) >= 0
    assert int(field(out, "Generation No")) > 0
    assert float(field(out, "Process memory (MiB)")) > 1
    assert field(out, "Token") == "(invoke with -T/--tokens to see all 16 tokens)"
    assert field(out, "Percent Repaired").startswith("n/a")
    tokens = [line for line in tool(ops_node, "info", "-T").stdout.splitlines() if line.startswith("Token")]
    assert len(tokens) == 16, tokens


def test_tablestats_counts_the_rows_written(ops_node, node_factory):
    _, session = node_factory.connect(ops_node)
    make_table(session, "ts")
    insert = session.prepare("INSERT INTO ts.t (k, v) VALUES (?, ?)")
    for k in range(200):
        session.execute(insert, (k, "x" * 100))
    for k in range(3):
        session.execute("DELETE FROM ts.t WHERE k = %s", (k,))
    session.execute("INSERT INTO ts.other (k, v) VALUES (1, 'y')")
    for k in range(10, 20):
        assert session.execute("SELECT v FROM ts.t WHERE k = %s", (k,)).one().v == "x" * 100

    out = tool(ops_node, "tablestats", "ts.t").stdout
    assert field(out, "Total number of tables") == "1"
    assert field(out, "Keyspace") == "ts"
    assert field(out, "Table") == "t"
    assert field(out, "Rows (estimate)") == "197"
    assert field(out, "Tombstones") == "3"
    assert int(field(out, "Space used (live)")) >= 197 * 100
    assert int(field(out, "Local write count")) == 203
    assert int(field(out, "Local read count")) >= 10
    assert field(out, "Local write latency").endswith(" ms")
    assert "NaN" not in field(out, "Local write latency percentiles")

    whole = tool(ops_node, "tablestats", "ts").stdout
    assert field(whole, "Total number of tables") == "2"
    other = whole[whole.index("Table: other"):]
    assert field(other, "Rows (estimate)") == "1"

    unknown = tool(ops_node, "tablestats", "ts.nope", check=False)
    assert unknown.returncode != 0 and "ts.nope" in unknown.stderr


def test_ring_and_describecluster(ops_node, node_factory):
    _, session = node_factory.connect(ops_node)
    make_table(session, "rd")
    ring = tool(ops_node, "ring").stdout
    rows = [line.split() for line in ring.splitlines() if line.startswith("127.0.0.1")]
    assert len(rows) == 16, ring
    tokens = [int(r[-1]) for r in rows]
    assert tokens == sorted(tokens)
    assert all(r[2:4] == ["Up", "Normal"] and r[-2] == "100.00%" for r in rows), ring

    described = tool(ops_node, "describecluster").stdout
    assert "Partitioner: org.apache.cassandra.dht.Murmur3Partitioner" in described
    version = session.execute("SELECT schema_version FROM system.local").one().schema_version
    assert f"{version}: [127.0.0.1]" in described, described
    assert "\tLive: 1\n" in described and "\tUnreachable: 0\n" in described
    assert "rd -> Replication class: SimpleStrategy {replication_factor=1}" in described


def test_defragstats(ops_node):
    out = tool(ops_node, "defragstats").stdout
    assert re.search(r"^pending tasks: \d+$", out, re.M), out
    assert re.search(r"^free blocks: \d+ of \d+", out, re.M), out


def test_flush_makes_writes_survive_a_crash(node_factory):
    """Without the write buffer and with a flush interval of ten minutes, a write acknowledged
    is only in the open block in RAM: SIGKILL loses it unless `hayate flush` wrote it."""
    node = node_factory("flush", metrics_port=free_port(), write_buffer=False, start=False)
    config = node.config_path.read_text()
    node.config_path.write_text(config.replace("[storage]\n", "[storage]\nflush_interval_ms = 600000\n"))
    node.start()
    cluster, session = node_factory.connect(node)
    make_table(session, "fl")
    insert = session.prepare("INSERT INTO fl.t (k, v) VALUES (?, ?)")
    for k in range(100):
        session.execute(insert, (k, "kept"))
    out = tool(node, "flush", "fl", "t").stdout
    assert out.startswith("flushed"), out
    # Written after the flush: these are the control, lost with the open block.
    for k in range(100, 150):
        session.execute(insert, (k, "unflushed"))
    cluster.shutdown()

    node.kill()
    node.start()
    _, session = node_factory.connect(node)
    kept = {r.k for r in session.execute("SELECT k FROM fl.t")}
    assert set(range(100)) <= kept, f"flushed rows lost: {sorted(set(range(100)) - kept)[:10]}"
    assert len(kept - set(range(100))) < 50, (
        "every unflushed row survived the SIGKILL: this mode did not need the flush, so the test "
        "proves nothing")

    bad = tool(node, "flush", "nope", check=False)
    assert bad.returncode != 0 and "nope" in bad.stderr


def test_drain_refuses_writes_until_a_restart(ops_node, node_factory):
    from cassandra.cluster import NoHostAvailable

    cluster, session = node_factory.connect(ops_node)
    make_table(session, "dr")
    session.execute("INSERT INTO dr.t (k, v) VALUES (1, 'before')")
    out = tool(ops_node, "drain").stdout
    assert out.startswith("drained"), out

    with pytest.raises(Exception) as refused:
        session.execute("INSERT INTO dr.t (k, v) VALUES (2, 'after')")
    assert "drained" in str(refused.value), refused.value
    with pytest.raises(NoHostAvailable) as no_connection:
        node_factory.connect(ops_node)
    assert "drained" in str(no_connection.value), no_connection.value
    info = tool(ops_node, "info").stdout
    assert field(info, "Native Transport active") == "false"
    assert field(info, "Mode") == "DRAINED"
    again = tool(ops_node, "drain").stdout
    assert again.startswith("already drained"), again
    cluster.shutdown()

    assert ops_node.stop() == 0, ops_node.log_tail()
    ops_node.start()
    _, session = node_factory.connect(ops_node)
    assert session.execute("SELECT v FROM dr.t WHERE k = 1").one().v == "before"
    session.execute("INSERT INTO dr.t (k, v) VALUES (2, 'after')")
    assert field(tool(ops_node, "info").stdout, "Native Transport active") == "true"


def test_setlogginglevel_changes_what_the_log_shows(ops_node, node_factory):
    _, session = node_factory.connect(ops_node)
    levels = tool(ops_node, "getlogginglevels").stdout
    assert re.search(r"^ROOT\s+INFO$", levels, re.M), levels

    tool(ops_node, "setlogginglevel", "warn")
    assert re.search(r"^ROOT\s+WARN$", tool(ops_node, "getlogginglevels").stdout, re.M)
    start = len(ops_node.log_path.read_bytes())
    session.execute("CREATE KEYSPACE quiet WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    quiet = ops_node.log_path.read_bytes()[start:].decode(errors="replace")
    assert "schema changed" not in quiet, quiet

    tool(ops_node, "setlogginglevel", "hayate_server::connection", "debug")
    levels = tool(ops_node, "getlogginglevels").stdout
    assert re.search(r"^hayate_server::connection\s+DEBUG$", levels, re.M), levels
    # Back to the filter the node started with: the default level is info again.
    out = tool(ops_node, "setlogginglevel").stdout
    assert out.startswith("log filter now: info"), out
    start = len(ops_node.log_path.read_bytes())
    session.execute("CREATE KEYSPACE loud WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    loud = ops_node.log_path.read_bytes()[start:].decode(errors="replace")
    assert "schema changed" in loud, loud

    bad = tool(ops_node, "setlogginglevel", "loud", check=False)
    assert bad.returncode != 0 and "unknown level" in bad.stderr


@pytest.mark.parametrize("command", [["info"], ["tablestats"], ["ring"], ["describecluster"],
                                     ["flush"], ["drain"], ["getlogginglevels"], ["defragstats"]])
def test_a_dead_address_is_a_clear_error(command):
    port = free_port()
    done = subprocess.run([str(HAYATE_BIN), *command, "--host", "127.0.0.1", "--port", str(port)],
                          capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    assert done.returncode != 0
    assert f"cannot reach 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "--host" in done.stderr, done.stderr
