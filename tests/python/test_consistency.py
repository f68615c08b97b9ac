"""Consistency levels on one node, answered as Cassandra answers them.

With RF 1 every level a client may ask for is met by the one replica. With RF 3 on one node the
replica set has one live member, so a level that needs more replicas than are alive fails at once
with Unavailable (0x1000) naming the level, how many replicas it required and how many were
alive, which is what a driver's retry policy reads to decide what to do; ONE still succeeds.
"""

import pytest
from cassandra import ConsistencyLevel, Unavailable
from cassandra.cluster import ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy
from cassandra.query import SimpleStatement

import cqlwire

CL = ConsistencyLevel


@pytest.mark.parametrize("level", [CL.ONE, CL.LOCAL_ONE, CL.QUORUM, CL.LOCAL_QUORUM, CL.ALL, CL.ANY])
def test_every_level_succeeds_with_one_replica(ks, level):
    ks.session.execute("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY, v int)")
    ks.session.execute(SimpleStatement("INSERT INTO t (k, v) VALUES (1, 1)", consistency_level=level))
    if level != CL.ANY:  # ANY is for writes only
        row = ks.session.execute(SimpleStatement("SELECT v FROM t WHERE k = 1", consistency_level=level)).one()
        assert row.v == 1


@pytest.fixture(params=["SimpleStrategy", "NetworkTopologyStrategy"])
def rf3(request, session, node, fresh_name):
    """A session on an RF 3 keyspace. Its retry policy lets Unavailable through: the default
    one retries on the next host, which on a one-node cluster ends in NoHostAvailable."""
    name = fresh_name("rf3")
    if request.param == "SimpleStrategy":
        replication = "{'class': 'SimpleStrategy', 'replication_factor': 3}"
    else:
        replication = "{'class': 'NetworkTopologyStrategy', 'datacenter1': 3}"
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {replication}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    profile = ExecutionProfile(request_timeout=15, retry_policy=FallthroughRetryPolicy())
    c, s = node.connect(name, profile=profile)
    yield s
    c.shutdown()


@pytest.mark.parametrize("level", [CL.ONE, CL.LOCAL_ONE])
def test_rf3_on_one_node_succeeds_at_one(rf3, level):
    rf3.execute(SimpleStatement("INSERT INTO t (k, v) VALUES (1, 1)", consistency_level=level))
    assert rf3.execute(SimpleStatement("SELECT v FROM t WHERE k = 1", consistency_level=level)).one().v == 1


@pytest.mark.parametrize("level,required", [(CL.QUORUM, 2), (CL.LOCAL_QUORUM, 2), (CL.ALL, 3), (CL.TWO, 2)])
@pytest.mark.parametrize("kind", ["write", "read"])
def test_rf3_on_one_node_is_unavailable_above_one(rf3, level, required, kind):
    cql = "INSERT INTO t (k, v) VALUES (1, 1)" if kind == "write" else "SELECT v FROM t WHERE k = 1"
    with pytest.raises(Unavailable) as e:
        rf3.execute(SimpleStatement(cql, consistency_level=level))
    assert e.value.consistency == level
    assert e.value.required_replicas == required
    assert e.value.alive_replicas == 1


def test_unavailable_is_code_0x1000_on_the_wire(session, node, fresh_name):
    name = fresh_name("rf3wire")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        reply = conn.query(f"INSERT INTO {name}.t (k, v) VALUES (1, 1)", consistency=cqlwire.CONSISTENCY_QUORUM)
    code, message = reply.error()
    assert code == cqlwire.UNAVAILABLE, message
    # consistency [short], required [int], alive [int] follow the message.
    n = 6 + len(message.encode())
    assert reply.body[n:n + 10] == b"\x00\x04" + (2).to_bytes(4, "big") + (1).to_bytes(4, "big")


def test_failed_unavailable_write_is_not_applied(rf3):
    """Unavailable is decided before any replica is written: the row must not appear."""
    with pytest.raises(Unavailable):
        rf3.execute(SimpleStatement("INSERT INTO t (k, v) VALUES (9, 9)", consistency_level=CL.ALL))
    assert rf3.execute(SimpleStatement("SELECT v FROM t WHERE k = 9", consistency_level=CL.ONE)).one() is None
