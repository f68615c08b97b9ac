"""A node started after the cluster formed: it joins a cluster that has no tables yet, and is
refused by one that has (hayate cannot stream data to a new node yet).

One cluster serves both, in that order: three nodes form it, a fourth joins (all four up and
normal in every node's /status, the drivers told with TOPOLOGY_CHANGE NEW_NODE), then a table is
created and a fifth is refused: its process exits non-zero, its log saying why (streaming), and
the cluster still has four members.
"""

from __future__ import annotations

import struct
import subprocess

import pytest

import cqlwire
from hayate_cluster import ClusterError, running
from test_cluster_events import EVENT, REGISTER, parse_event

# How long a refused node may take to give up (it asks a member, which answers at once).
REFUSAL_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def three():
    yield from running("join")


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


def test_a_node_is_refused_by_a_cluster_with_tables(three):
    # The previous test left tables; make sure of it whatever ran before.
    session = three.session()
    session.execute("CREATE KEYSPACE IF NOT EXISTS refusing WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE IF NOT EXISTS refusing.t (k int PRIMARY KEY)")
    members_before = len(three.node(1).status()["nodes"])
    late = three.add_node()
    proc = late.spawn()
    late.proc = proc
    try:
        code = proc.wait(timeout=REFUSAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        late.kill()
        raise ClusterError(f"{late.name} was neither refused nor ready within {REFUSAL_TIMEOUT_S} s\n"
                           f"{late.log_tail(40)}")
    finally:
        # Not a member: the agreement checks must not wait for it.
        three.nodes.remove(late)
    log = late.log_path.read_text(errors="replace")
    print(f"\nthe refused node exited with status {code}: "
          f"{[l for l in log.splitlines() if 'stream' in l][:1]}")
    assert code != 0, f"the refused node exited with status 0\n{late.log_tail(40)}"
    assert "already has tables" in log and "stream" in log, f"the log does not say why\n{late.log_tail(40)}"
    assert "refusing.t" in log or "joined.t" in log, "the message should name the tables"
    for n in three.nodes:
        assert len(n.status()["nodes"]) == members_before, f"{n.host} lists the refused node"
    three.wait_agreement()
