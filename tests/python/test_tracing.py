"""Request tracing: the tracing flag gets a session id back, and the session with its events is
in `system_traces.sessions` and `system_traces.events`, where drivers and cqlsh look for it.

hayate keeps the newest sessions in memory on the coordinating node (src/trace.rs says how many
and for how long); Cassandra writes them to a replicated keyspace. What a driver sees is the same.
"""

import os
import struct
import uuid

import pytest

import cqlwire
from test_cqlsh import cqlsh  # noqa: F401 (the fixture that runs cqlsh)

TRACING_FLAG = 0x02
# Cassandra's events name its own stages (memtables, sstables); the events hayate adds about its
# storage engine are checked only against hayate.
REFERENCE = os.environ.get("HAYATE_REFERENCE")


@pytest.fixture(params=[4, 5])
def traced_session(request, node):
    cluster, session = node.connect(protocol_version=request.param)
    yield session
    cluster.shutdown()


def test_python_driver_trace_finds_the_session_and_its_events(traced_session, fresh_name, session):
    name = fresh_name("tr")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v text)")
    s = traced_session
    s.execute(f"INSERT INTO {name}.t (k, v) VALUES (1, 'one')", trace=True)
    result = s.execute(f"SELECT v FROM {name}.t WHERE k = 1", trace=True)
    assert result.one().v == "one"
    trace = result.get_query_trace(max_wait_sec=10)
    assert trace.request_type == "Execute CQL3 query"
    assert trace.parameters.get("consistency_level") == "LOCAL_ONE", trace.parameters
    assert trace.duration is not None and trace.duration.total_seconds() > 0
    assert f"SELECT v FROM {name}.t WHERE k = 1" in trace.parameters.get("query", "")
    activities = [e.description for e in trace.events]
    assert activities[0].startswith("Parsing SELECT"), activities
    assert any(a.startswith("Read 1 live rows") for a in activities), activities
    if not REFERENCE:
        assert any(a.startswith("Storage engine: ") and "post-write cache hits" in a for a in activities), activities
    elapsed = [e.source_elapsed.total_seconds() for e in trace.events]
    assert elapsed == sorted(elapsed), "events are in the order they happened"


def test_prepared_execute_is_traced(traced_session, fresh_name, session):
    name = fresh_name("trp")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    s = traced_session
    insert = s.prepare(f"INSERT INTO {name}.t (k, v) VALUES (?, ?)")
    result = s.execute(insert, (3, 30), trace=True)
    trace = result.get_query_trace(max_wait_sec=10)
    activities = [e.description for e in trace.events]
    assert activities, "a traced EXECUTE has events"
    if not REFERENCE:
        assert any(a.startswith("Looking up prepared statement") for a in activities), activities
        assert "Write applied" in activities, activities


def test_untraced_requests_get_no_flag_and_traced_ones_get_a_session_id(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        body = cqlwire.query_body("SELECT release_version FROM system.local")
        plain = conn.request(cqlwire.QUERY, body, stream=1)
        assert plain.opcode == cqlwire.RESULT and not plain.flags & TRACING_FLAG
        conn.send_frame(cqlwire.QUERY, body, stream=2, flags=TRACING_FLAG)
        traced = conn.recv_frame()
        assert traced.opcode == cqlwire.RESULT
        assert traced.flags & TRACING_FLAG, "a traced request's answer carries the flag"
        session_id = uuid.UUID(bytes=traced.body[:16])
        kind, = struct.unpack_from(">i", traced.body, 16)
        assert kind == 0x0002, "the Rows result follows the session id"
        rows = conn.query(f"SELECT session_id, duration, command FROM system_traces.sessions WHERE session_id = {session_id}", stream=3)
        assert rows.opcode == cqlwire.RESULT, rows
        _, cells = cqlwire.parse_rows(rows.body)
        assert len(cells) == 1 and cells[0][0] == session_id.bytes
        assert struct.unpack(">i", cells[0][1])[0] > 0
        events = conn.query(f"SELECT activity FROM system_traces.events WHERE session_id = {session_id}", stream=4)
        assert len(cqlwire.parse_rows(events.body)[1]) >= 3


def test_system_traces_is_in_the_drivers_schema_metadata(cluster):
    cluster.refresh_schema_metadata()
    keyspace = cluster.metadata.keyspaces["system_traces"]
    assert set(keyspace.tables) >= {"sessions", "events"}
    events = keyspace.tables["events"]
    assert [c.name for c in events.partition_key] == ["session_id"]
    assert [c.name for c in events.clustering_key] == ["event_id"]
    assert events.columns["source_elapsed"].cql_type == "int"


def test_cqlsh_tracing_on(cqlsh, fresh_name, session):
    name = fresh_name("trc")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    out = cqlsh("-e", f"TRACING ON; SELECT * FROM {name}.t WHERE k = 1; TRACING OFF;").stdout
    assert "Tracing session:" in out, out
    assert "Request complete" in out, out
    assert "Parsing SELECT" in out, out
    if not REFERENCE:
        assert "Storage engine:" in out, out
