"""A node started after the cluster formed joins it: first a cluster that has no tables yet,
then one that has tables, whose rows it streams before it serves.

One cluster serves both, in that order: three nodes form it, a fourth joins (all four up and
normal in every node's /status, the drivers told with TOPOLOGY_CHANGE NEW_NODE), then a table
of RF 3 gets rows and a fifth joins: it streams exactly the rows it now replicates, and every
row reads back at ALL. The tests of joins under load, with more data, are test_topology_*.py.
"""

from __future__ import annotations

import struct

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args

import cqlwire
from hayate_cluster import running
from test_cluster_events import EVENT, REGISTER, parse_event

# Rows of the table a node joins with.
ROWS = 1000


@pytest.fixture(scope="module")
def three():
    yield from running("join", spare_nodes=2)


def test_a_fourth_node_joins_a_cluster_without_tables(three):
    listener = cqlwire.RawConnection(three.node(1).host, three.cql_port)
    try:
        assert listener.startup().opcode == cqlwire.READY
        body = struct.pack(">H", 1) + cqlwire.string("TOPOLOGY_CHANGE")
        assert listener.request(REGISTER, body).opcode == cqlwire.READY
        fourth = three.add_node()
        three.start_node(fourth.index)
        for n in three.nodes:
            doc = n.status()
            assert len(doc["nodes"]) == 4, f"{n.host} lists {len(doc['nodes'])} members"
            assert {m["tokens"] for m in doc["nodes"]} == {16}
        owns = [m["owns"] for m in three.node(1).status()["nodes"]]
        print(f"\nownership after the join: {[round(o, 3) for o in owns]}")
        assert abs(sum(owns) - 1.0) < 1e-6
        listener.sock.settimeout(10)
        frame = listener.recv_frame()
        assert frame.opcode == EVENT
        assert parse_event(frame.body) == ("TOPOLOGY_CHANGE", "NEW_NODE", fourth.host, three.cql_port)
    finally:
        listener.close()
    session = three.session()
    assert sorted(h.address for h in session.cluster.metadata.all_hosts()) == sorted(n.host for n in three.nodes)
    # The four serve RF 3 together.
    session.execute("CREATE KEYSPACE joined WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute("CREATE TABLE joined.t (k int PRIMARY KEY, v int)")
    insert = session.prepare("INSERT INTO joined.t (k, v) VALUES (?, ?)")
    for k in range(100):
        session.execute(insert, (k, k))
    assert sorted(r.k for r in session.execute("SELECT k FROM joined.t")) == list(range(100))


def test_a_node_joins_a_cluster_with_tables_and_its_rows_arrive(three):
    # The previous test left a table with rows; make sure of it whatever ran before.
    session = three.session()
    session.execute("CREATE KEYSPACE IF NOT EXISTS joined WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute("CREATE TABLE IF NOT EXISTS joined.t (k int PRIMARY KEY, v int)")
    insert = session.prepare("INSERT INTO joined.t (k, v) VALUES (?, ?)")
    execute_concurrent_with_args(session, insert, [(k, k) for k in range(ROWS)], concurrency=32)
    late = three.add_node()
    three.start_node(late.index)
    # The driver's token map, refreshed with the new ring, says which rows the node now holds;
    # no row was written since it joined, so every one of them came by stream.
    session.cluster.refresh_nodes()
    metadata = session.cluster.metadata
    hosts = {h.address: h for h in metadata.all_hosts()}
    assert late.host in hosts, f"the driver does not list {late.host}: {sorted(hosts)}"
    routing = [metadata.token_map.token_class.from_key(struct.pack(">i", k)) for k in range(ROWS)]
    held = sum(1 for token in routing
               if hosts[late.host] in metadata.token_map.get_replicas("joined", token))
    streamed = late.metric('hayate_stream_records_total{direction="in"}')
    print(f"\nthe new node replicates {held} of {ROWS} rows and streamed in {streamed:.0f} records")
    assert held > 0, "the new node replicates none of the rows: the test proves nothing"
    assert streamed == held, (f"the new node holds {held} rows of joined.t, and streamed in {streamed:.0f} "
                              f"records\n{late.log_tail(40)}")
    select = session.prepare("SELECT k, v FROM joined.t WHERE k = ?")
    select.consistency_level = ConsistencyLevel.ALL
    results = execute_concurrent_with_args(session, select, [(k,) for k in range(ROWS)], concurrency=32)
    missing = [k for k, (ok, r) in zip(range(ROWS), results) if not ok or r.one() is None]
    assert not missing, f"{len(missing)} rows do not read back at ALL after the join: {missing[:5]}"
