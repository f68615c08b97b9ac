"""Schema changes in a cluster of three: they go through the metadata log, from any node.

A schema statement made on one node and then on another leaves every node with the same schema:
the driver's schema agreement (it compares `schema_version` in `system.local` and
`system.peers`) holds when the response arrives, and every node's own `/status` reports the
same version within a second of it. Statements made on all three nodes at once lose no table.
Without a majority of the log's voters, a schema statement fails at once with a clear error and
changes nothing: once the nodes are back, the table does not exist, and the same statement then
succeeds.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from cassandra.policies import FallthroughRetryPolicy
from cassandra.protocol import ServerError

import cqlwire
from hayate_cluster import Cluster, running, whitelisted

# How long after a schema statement's response every node may take to report the new version
# itself (the figure): the statement commits on a majority, and the others apply it
# with the log's next heartbeat.
LOCAL_AGREEMENT_S = 1.0
# How long a schema change may keep failing once the nodes that were down are back.
RETRY_AFTER_RETURN_S = 10
REGISTER = 0x0B
EVENT = 0x0C


@pytest.fixture(scope="module")
def three():
    yield from running("schema")


@pytest.fixture(autouse=True)
def _nodes_survive(three):
    yield
    three.check_alive()


def tables_on(session, keyspace: str) -> list[str]:
    rows = session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))
    return sorted(r.table_name for r in rows)


def wait_local_versions_equal(cluster: Cluster, within_s: float) -> tuple[float, dict]:
    """Polls every node's own schema version until they are equal; (seconds, versions)."""
    start = time.monotonic()
    while True:
        versions = cluster.local_schema_versions()
        elapsed = time.monotonic() - start
        if len(set(versions.values())) == 1 and len(versions) == len(cluster.live_nodes()):
            return elapsed, versions
        if elapsed > within_s:
            return elapsed, versions
        time.sleep(0.02)


def schema_listener(cluster: Cluster, k: int) -> cqlwire.RawConnection:
    """A raw connection to node k registered for SCHEMA_CHANGE events."""
    conn = cqlwire.RawConnection(cluster.node(k).host, cluster.cql_port)
    assert conn.startup().opcode == cqlwire.READY
    body = struct.pack(">H", 1) + cqlwire.string("SCHEMA_CHANGE")
    assert conn.request(REGISTER, body).opcode == cqlwire.READY
    return conn


def next_schema_event(conn: cqlwire.RawConnection, within_s: float) -> list[str]:
    """The strings of the next SCHEMA_CHANGE event: change, target, keyspace[, name]."""
    conn.sock.settimeout(within_s)
    frame = conn.recv_frame()
    assert frame.opcode == EVENT, f"expected an EVENT, got {frame}"
    out, pos = [], 0
    while pos < len(frame.body):
        (n,) = struct.unpack_from(">H", frame.body, pos)
        out.append(frame.body[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    return out


def test_ddl_on_one_node_then_another_agrees_everywhere(three):
    # One token-aware driver connected to every node (its schema agreement then compares all
    # three), each statement sent to a chosen node.
    session = three.session()
    hosts = {h.address: h for h in session.cluster.metadata.all_hosts()}
    assert sorted(hosts) == sorted(n.host for n in three.nodes), f"the driver sees {sorted(hosts)}"
    steps = [
        (1, "CREATE KEYSPACE agree WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"),
        (2, "CREATE TABLE agree.t1 (k int PRIMARY KEY, v text)"),
        (3, "CREATE TABLE agree.t2 (k int PRIMARY KEY, v text)"),
        (1, "ALTER TABLE agree.t1 ADD extra int"),
        (2, "CREATE TABLE agree.t3 (k int PRIMARY KEY)"),
        (3, "DROP TABLE agree.t3"),
    ]
    figures = []
    for k, cql in steps:
        started = time.monotonic()
        rs = session.execute(cql, host=hosts[three.node(k).host])
        took = time.monotonic() - started
        assert rs.response_future.coordinator_host == hosts[three.node(k).host]
        # The driver waits for agreement after each schema change; it must not have given up.
        assert rs.response_future.is_schema_agreed, f"the driver saw no schema agreement after {cql!r} on node {k}"
        elapsed, versions = wait_local_versions_equal(three, LOCAL_AGREEMENT_S)
        figures.append((round(took, 3), round(elapsed, 3)))
        assert len(set(versions.values())) == 1, (
            f"{elapsed:.2f} s after {cql!r} on node {k} the nodes report different schema versions: "
            f"{versions}\n{three.logs()}")
    print(f"\n(seconds to the response with the driver's agreement wait, then to every node reporting "
          f"the new version): {figures}")
    assert session.cluster.control_connection.wait_for_schema_agreement(wait_time=5)
    for k in (1, 2, 3):
        s = whitelisted(three, k)
        assert tables_on(s, "agree") == ["t1", "t2"], f"node {k} lists other tables"
        # The driver's own refresh (it also follows events, but after a random delay of up to
        # 2 s, its schema_event_refresh_window) reads each node's system_schema.
        s.cluster.refresh_schema_metadata()
        columns = s.cluster.metadata.keyspaces["agree"].tables["t1"].columns
        assert sorted(columns) == ["extra", "k", "v"], f"node {k}'s driver metadata: {sorted(columns)}"
    # A table made through node 2 takes writes through node 3 and reads through node 1.
    session.execute("INSERT INTO agree.t1 (k, v, extra) VALUES (1, 'one', 7)", host=hosts[three.node(3).host])
    row = session.execute("SELECT v, extra FROM agree.t1 WHERE k = 1", host=hosts[three.node(1).host]).one()
    assert tuple(row) == ("one", 7)


def test_every_node_tells_its_drivers_of_a_schema_change_made_elsewhere(three):
    """Drivers keep their metadata current from SCHEMA_CHANGE events, and a driver registers on
    one node only (its control connection): each node must announce changes made through any."""
    whitelisted(three, 1).execute(
        "CREATE KEYSPACE events WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    listeners = {k: schema_listener(three, k) for k in (1, 2, 3)}
    try:
        whitelisted(three, 1).execute("CREATE TABLE events.made_on_1 (k int PRIMARY KEY)")
        for k, conn in listeners.items():
            try:
                event = next_schema_event(conn, within_s=5)
            except socket.timeout:
                pytest.fail(f"node {k} sent no SCHEMA_CHANGE within 5 s of a table created through node 1")
            assert event == ["SCHEMA_CHANGE", "CREATED", "TABLE", "events", "made_on_1"], f"node {k}: {event}"
    finally:
        for conn in listeners.values():
            conn.close()


def test_concurrent_ddl_on_every_node_loses_no_table(three):
    sessions = {k: whitelisted(three, k) for k in (1, 2, 3)}
    sessions[1].execute(
        "CREATE KEYSPACE concurrent WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    errors = []
    barrier = threading.Barrier(3)

    def make(k):
        barrier.wait()
        for i in range(4):
            try:
                sessions[k].execute(f"CREATE TABLE concurrent.n{k}_{i} (k int PRIMARY KEY, v int)")
            except Exception as e:  # reported below, with the node's log
                errors.append(f"node {k} table {i}: {e!r}")

    threads = [threading.Thread(target=make, args=(k,)) for k in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "\n".join(errors) + "\n" + three.logs()
    want = sorted(f"n{k}_{i}" for k in (1, 2, 3) for i in range(4))
    for k, s in sessions.items():
        assert tables_on(s, "concurrent") == want, f"node {k} lost a table"
    elapsed, versions = wait_local_versions_equal(three, 5)
    assert len(set(versions.values())) == 1, f"the nodes did not converge: {versions}"


@pytest.mark.parametrize("survivor_role", ["leader", "follower"])
def test_ddl_without_a_majority_fails_clearly_and_changes_nothing(three, survivor_role):
    three.wait_agreement()
    leader = three.leader()
    if survivor_role == "leader":
        survivor = leader
    else:
        survivor = next(n for n in three.nodes if n is not leader)
    others = [n for n in three.nodes if n is not survivor]
    # No retry on another host: the test wants the survivor's own answer, not NoHostAvailable.
    session = whitelisted(three, survivor.index, retry_policy=FallthroughRetryPolicy())
    session.execute(
        "CREATE KEYSPACE IF NOT EXISTS nomajority WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    three.wait_agreement()
    table = f"t_{survivor_role}"
    for n in others:
        three.kill(n.index)
    for n in others:
        three.wait_seen_down(n.index, by=[survivor])
    started = time.monotonic()
    with pytest.raises(ServerError) as raised:
        session.execute(f"CREATE TABLE nomajority.{table} (k int PRIMARY KEY)")
    elapsed = time.monotonic() - started
    message = str(raised.value)
    print(f"schema change on the {survivor_role} without a majority failed in {elapsed:.3f} s: {message}")
    assert "Cannot change the schema" in message and "Nothing was changed" in message, (
        f"the error must say the schema cannot change and that nothing changed; got {message!r} "
        f"after {elapsed:.2f} s\n{survivor.log_tail(40)}")
    assert "1 of the 3 voting nodes" in message, f"the error should count the voters that answer: {message!r}"

    for n in others:
        three.start_node(n.index, agree=False)
    three.wait_agreement()
    for k in (1, 2, 3):
        s = whitelisted(three, k)
        assert table not in tables_on(s, "nomajority"), f"node {k} has the table whose creation failed"
    # Nothing half-done blocks the same statement now. (Right after the restart the leader's
    # quorum check may miss the restarted followers for a moment; the statement is retried then.)
    retry_started = time.monotonic()
    failures = []
    while True:
        try:
            session.execute(f"CREATE TABLE nomajority.{table} (k int PRIMARY KEY)")
            break
        except ServerError as e:
            failures.append(f"{time.monotonic() - retry_started:.2f} s: {e}")
            if time.monotonic() - retry_started > RETRY_AFTER_RETURN_S:
                raise AssertionError(
                    f"the schema change still fails {RETRY_AFTER_RETURN_S} s after every node is back: {e}\n"
                    f"{three.logs()}") from e
            time.sleep(0.1)
    print(f"the same statement succeeded {time.monotonic() - retry_started:.2f} s after the nodes were back, "
          f"after {len(failures)} failures: {failures[:1]}")
    elapsed, versions = wait_local_versions_equal(three, LOCAL_AGREEMENT_S)
    assert len(set(versions.values())) == 1, (
        f"{elapsed:.2f} s after the statement the nodes report different schema versions: {versions}")
    for k in (1, 2, 3):
        assert table in tables_on(whitelisted(three, k), "nomajority"), f"node {k} lacks the table"


def test_ddl_on_a_node_restarted_while_the_others_are_down_fails_clearly(three):
    """A node that restarts alone (the other two still down) remembers who led the metadata log;
    a schema change there must fail as clearly and as fast as on a node that watched the others
    go, not wait out the proposal deadline for a leader gossip has never heard from."""
    three.wait_agreement()
    leader = three.leader()
    survivor = next(n for n in three.nodes if n is not leader)
    session = whitelisted(three, survivor.index)
    session.execute("CREATE KEYSPACE IF NOT EXISTS restarted WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    three.wait_agreement()
    for n in three.nodes:
        three.stop(n.index)
    three.start_node(survivor.index, agree=False)
    lone = whitelisted(three, survivor.index, retry_policy=FallthroughRetryPolicy())
    started = time.monotonic()
    with pytest.raises(ServerError) as raised:
        lone.execute("CREATE TABLE restarted.t (k int PRIMARY KEY)")
    elapsed = time.monotonic() - started
    message = str(raised.value)
    print(f"\nschema change on a follower restarted alone failed in {elapsed:.2f} s: {message}")
    try:
        assert "Cannot change the schema" in message and "Nothing was changed" in message, (
            f"after {elapsed:.2f} s the error was {message!r}\n{survivor.log_tail(40)}")
    finally:
        for n in three.nodes:
            if not n.alive():
                three.start_node(n.index, agree=False)
        three.wait_agreement()
    for k in (1, 2, 3):
        assert "t" not in tables_on(whitelisted(three, k), "restarted"), f"node {k} has the table"
