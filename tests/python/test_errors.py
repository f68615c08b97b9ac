"""Each error a client can cause arrives with Cassandra's code, the driver's exception for that
code, and a message that names the problem.

Drivers decide what to do from the code alone (retry, re-prepare, give up, report a bug in the
query), and people read the message, so both matter. Codes covered here: 0x2000 syntax, 0x2200
invalid, 0x2400 already exists, 0x1000 unavailable, 0x000A protocol. Bad credentials (0x0100)
and unauthorized (0x2100) need a node with PasswordAuthenticator: see test_auth.py. Unprepared
(0x2500) needs a server that has forgotten a statement: test_prepared.py checks the raw error and
the driver re-preparing after a restart.
"""

import struct

import pytest
from cassandra import AlreadyExists, ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.cluster import ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy
from cassandra.protocol import SyntaxException
from cassandra.query import SimpleStatement

import cqlwire


@pytest.fixture
def t(ks):
    ks.session.execute("CREATE TABLE t (k int, c int, v int, s text, PRIMARY KEY (k, c))")
    return ks.session


def test_syntax_error_names_line_and_column(t):
    with pytest.raises(SyntaxException) as e:
        t.execute("SELECT * FROM t WHERE k = 1 AND AND c = 2")
    assert e.value.code == 0x2000
    assert "line 1:" in e.value.message, f"no line:column in {e.value.message!r}"
    with pytest.raises(SyntaxException, match=r"line 2:\d+"):
        t.execute("SELECT *\nFROM t WHERE k = = 1")


def test_unknown_statement_is_a_syntax_error(t):
    with pytest.raises(SyntaxException) as e:
        t.execute("SELEC * FROM t")
    assert "SELEC" in e.value.message


def test_unterminated_string_is_a_syntax_error(t):
    with pytest.raises(SyntaxException):
        t.execute("INSERT INTO t (k, c, s) VALUES (1, 1, 'no end)")


def test_unknown_keyspace(session):
    with pytest.raises(InvalidRequest, match="code=2200") as e:
        session.execute("SELECT * FROM no_such_keyspace.t")
    assert "no_such_keyspace" in str(e.value) and "does not exist" in str(e.value)
    with pytest.raises(InvalidRequest, match="(?i)keyspace '?no_such_keyspace'? (does not|doesn't) exist"):
        session.execute("CREATE TABLE no_such_keyspace.t (k int PRIMARY KEY)")


def test_unknown_table(t):
    with pytest.raises(InvalidRequest, match="code=2200") as e:
        t.execute("SELECT * FROM no_such_table")
    assert "no_such_table" in str(e.value)


def test_unknown_column(t):
    with pytest.raises(InvalidRequest, match="Undefined column name nope"):
        t.execute("SELECT nope FROM t WHERE k = 1")
    with pytest.raises(InvalidRequest, match="(?i)undefined column name nope"):
        t.execute("INSERT INTO t (k, c, nope) VALUES (1, 1, 1)")
    with pytest.raises(InvalidRequest, match="(?i)undefined column name nope"):
        t.execute("UPDATE t SET nope = 1 WHERE k = 1 AND c = 1")


def test_literal_of_the_wrong_type(t):
    with pytest.raises(InvalidRequest, match="code=2200") as e:
        t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'not an int')")
    message = str(e.value)
    assert "v" in message and "int" in message, f"the message should name the column and type: {message}"


def test_bound_value_of_the_wrong_size(t, ks, node):
    """An int bound as 3 bytes (the driver would never; a buggy client could): Cassandra says
    "Expected 4 or 0 byte int (3)", a 0x2200, and the connection keeps working."""
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        reply = conn.query(f"INSERT INTO {ks.name}.t (k, c, v) VALUES (?, ?, ?)",
                           [struct.pack(">i", 1), struct.pack(">i", 1), b"\x00\x00\x01"])
        code, message = reply.error()
        assert code == cqlwire.INVALID, f"{code:#06x} {message}"
        assert "int" in message
        # A text value that is not UTF-8 is refused the same way.
        reply = conn.query(f"INSERT INTO {ks.name}.t (k, c, s) VALUES (?, ?, ?)",
                           [struct.pack(">i", 1), struct.pack(">i", 1), b"\xff\xfe"])
        assert reply.error()[0] == cqlwire.INVALID
        # Too few values for the markers.
        reply = conn.query(f"INSERT INTO {ks.name}.t (k, c, v) VALUES (?, ?, ?)", [struct.pack(">i", 1)])
        assert reply.error()[0] == cqlwire.INVALID
        assert conn.query("SELECT release_version FROM system.local").opcode == cqlwire.RESULT
    assert t.execute("SELECT * FROM t WHERE k = 1").one() is None


def test_missing_primary_key_parts(t):
    with pytest.raises(InvalidRequest, match="(?i)(missing|mandatory).*c|c.*(missing|mandatory)"):
        t.execute("INSERT INTO t (k, v) VALUES (1, 1)")
    with pytest.raises(InvalidRequest):
        t.execute("UPDATE t SET v = 1 WHERE k = 1")


def test_filtering_needs_allow_filtering(t):
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        t.execute("SELECT * FROM t WHERE v = 1")


def test_already_exists_names_the_table(t, ks):
    with pytest.raises(AlreadyExists) as e:
        t.execute("CREATE TABLE t (k int PRIMARY KEY)")
    assert (e.value.keyspace, e.value.table) == (ks.name, "t")
    assert ks.name in str(e.value) and "already exists" in str(e.value)


def test_unavailable(session, node, fresh_name):
    name = fresh_name("err_rf3")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY)")
    cluster, s = node.connect(profile=ExecutionProfile(retry_policy=FallthroughRetryPolicy()))
    try:
        with pytest.raises(Unavailable, match="code=1000") as e:
            s.execute(SimpleStatement(f"INSERT INTO {name}.t (k) VALUES (1)", consistency_level=ConsistencyLevel.ALL))
        assert (e.value.required_replicas, e.value.alive_replicas) == (3, 1)
    finally:
        cluster.shutdown()


def test_query_before_startup_is_a_protocol_error(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        outcome = conn.request(cqlwire.QUERY, cqlwire.query_body("SELECT * FROM system.local"), stream=2)
    code, message = outcome.error()
    assert code == cqlwire.PROTOCOL_ERROR, f"{code:#06x} {message}"
    assert "STARTUP" in message, f"the message should say STARTUP is expected: {message!r}"


def test_unknown_opcode_is_a_protocol_error(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        reply = conn.request(0x42, b"", stream=9)
    assert reply.stream == 9
    assert reply.error()[0] == cqlwire.PROTOCOL_ERROR


def test_response_opcode_sent_as_request_is_a_protocol_error(node):
    """RESULT (0x08) is a response: a client sending it is confused, and is told so."""
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        assert conn.outcome(within_s=0.3) == "silent"
        conn.send_frame(cqlwire.RESULT, struct.pack(">i", 1), stream=4)
        outcome = conn.outcome()
    assert outcome in ("ERROR 0x000a", "closed"), outcome


def test_empty_and_null_partition_keys_are_invalid(ks):
    ks.session.execute("CREATE TABLE tk (k text PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match="(?i)key may not be empty"):
        ks.session.execute("INSERT INTO tk (k, v) VALUES ('', 1)")
    with pytest.raises(InvalidRequest, match="(?i)null"):
        ks.session.execute(ks.session.prepare("INSERT INTO tk (k, v) VALUES (?, ?)"), (None, 1))


def test_partition_key_longer_than_64_kib_is_invalid(ks):
    ks.session.execute("CREATE TABLE tk (k text PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match="65535"):
        ks.session.execute(ks.session.prepare("INSERT INTO tk (k, v) VALUES (?, ?)"), ("x" * 65536, 1))
    ks.session.execute(ks.session.prepare("INSERT INTO tk (k, v) VALUES (?, ?)"), ("x" * 65535, 1))
