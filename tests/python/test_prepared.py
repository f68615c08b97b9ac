"""Prepared statements: the path every production driver uses for its hot queries."""

import time

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import NoHostAvailable
from cassandra.policies import ConstantReconnectionPolicy
from cassandra.protocol import SyntaxException
from cassandra.query import UNSET_VALUE

import cqlwire


def test_prepare_reports_bind_and_result_metadata(ks):
    ks.session.execute("CREATE TABLE t (k int, c text, v double, PRIMARY KEY (k, c))")
    stmt = ks.session.prepare("SELECT c, v FROM t WHERE k = ? AND c > ?")
    assert [(m.name, m.type.typename) for m in stmt.column_metadata] == [("k", "int"), ("c", "varchar")]
    assert [m[2] for m in stmt.result_metadata] == ["c", "v"]
    # The partition key's position among the markers: what token-aware routing uses.
    assert stmt.routing_key_indexes == [0]


def test_same_text_prepares_to_the_same_id(ks):
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    a = ks.session.prepare("SELECT v FROM t WHERE k = ?")
    b = ks.session.prepare("SELECT v FROM t WHERE k = ?")
    assert a.query_id == b.query_id


def test_unset_values_leave_columns_untouched(ks):
    """Protocol v4's `unset`: a bound statement that does not set a column must not null it."""
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, a text, b text)")
    insert = ks.session.prepare("INSERT INTO t (k, a, b) VALUES (?, ?, ?)")
    ks.session.execute(insert, (1, "first a", "first b"))
    ks.session.execute(insert, (1, UNSET_VALUE, "second b"))
    assert tuple(ks.session.execute("SELECT a, b FROM t WHERE k = 1").one()) == ("first a", "second b")


def test_prepared_statement_of_another_keyspace(ks, session):
    """A statement prepared with a qualified name works from a session with no keyspace."""
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    insert = session.prepare(f"INSERT INTO {ks.name}.t (k, v) VALUES (?, ?)")
    session.execute(insert, (5, 50))
    assert ks.session.execute("SELECT v FROM t WHERE k = 5").one().v == 50


def test_preparing_bad_statements_fails_at_prepare_time(ks):
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    with pytest.raises(SyntaxException):
        ks.session.prepare("SELEC v FROM t WHERE k = ?")
    with pytest.raises(InvalidRequest, match="Undefined column name nope"):
        ks.session.prepare("SELECT nope FROM t WHERE k = ?")
    with pytest.raises(InvalidRequest):
        ks.session.prepare("SELECT v FROM missing_table WHERE k = ?")


def test_executing_an_unknown_id_is_unprepared(node):
    """ERROR 0x2500 carries the unknown id back, so a driver knows which statement to re-prepare."""
    unknown_id = bytes(range(16))
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        reply = conn.request(cqlwire.EXECUTE, cqlwire.execute_body(unknown_id, []), stream=3)
    assert reply.stream == 3
    code, message = reply.error()
    assert code == cqlwire.UNPREPARED, f"{code:#06x} {message}"
    # After code and message comes the id as [short bytes].
    n = 6 + len(message.encode())
    assert reply.body[n:n + 2 + 16] == cqlwire.short_bytes(unknown_id)


def wait_until_usable(session, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            session.execute("SELECT release_version FROM system.local")
            return
        except NoHostAvailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_prepared_statement_works_after_server_restart(node_factory):
    """The server forgets (or may forget) its prepared statements on restart. The driver must get
    UNPREPARED for an unknown id, re-prepare by itself, and the query succeed; the application
    sees nothing. `reprepare_on_up=False` keeps the driver from re-preparing eagerly on
    reconnect, so the UNPREPARED path is the one taken."""
    n = node_factory("reprepare")
    cluster, session = node_factory.connect(
        n, reprepare_on_up=False, reconnection_policy=ConstantReconnectionPolicy(0.2, max_attempts=None))
    session.execute("CREATE KEYSPACE rp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE rp.t (k int PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO rp.t (k, v) VALUES (?, ?)")
    select = session.prepare("SELECT v FROM rp.t WHERE k = ?")
    session.execute(insert, (1, "before restart"))

    n.restart()
    wait_until_usable(session)

    session.execute(insert, (2, "after restart"))
    assert session.execute(select, [1]).one().v == "before restart"
    assert session.execute(select, [2]).one().v == "after restart"
