"""A dead node whose disk is lost is replaced, on its own address and then on a new one, while a
writer runs at QUORUM (docs/topology-changes.md, "Replace").

One cluster of three holding DATA_ROWS rows (RF 3), in order:

1. Node 3 is SIGKILLed and its data directory deleted; a fresh node on the same address starts
   with `--replace-address` (its own address): it takes node 3's tokens, streams its data from
   nodes 1 and 2, and serves once the replacement finishes. No client error; every
   acknowledged row reads back at ALL; the old host id is gone from every node's ring; and the
   replacement alone (nodes 1 and 2 stopped) serves every row at ONE, which it can only do if
   the streams and the writes during the change brought it everything (RF 3 on three nodes).
2. Nodes 1 and 2 start again; node 2 is SIGKILLed for good and replaced by a node on a new
   address (node 4): the same checks, and drivers hear NEW_NODE for the new address and
   REMOVED_NODE for the old.

With one node dead, QUORUM still has two replicas of three, and during a replacement a write
waits for the pending replica as well (three acknowledgements of three live): the writer's
errors are counted all the same, and there must be none.
"""

from __future__ import annotations


import pytest

from topology import (Events, Ring, Writer, assert_alone_serves_everything, assert_rows_read_back, create_table,
                      host_id, load, members, restart, stream_bytes_in, topology_cluster)

DATA_ROWS = 20_000


@pytest.fixture(scope="module")
def ring():
    with topology_cluster("replace") as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        yield Ring(cluster, session, load(session, range(DATA_ROWS)))


def replace_under_load(ring: Ring, dead: int, *, same_address: bool) -> tuple[int, Writer, str]:
    """SIGKILLs node `dead`, deletes its data, and starts its replacement (on its address, or
    the next new one); returns the replacement's index, the stopped writer, and the host ids
    of the ring before the kill."""
    cluster = ring.cluster
    victim = cluster.node(dead)
    old_id = host_id(victim)
    writer = ring.writer()
    try:
        writer.wait_acked(50)
        cluster.kill(dead)
        cluster.wait_seen_down(dead)
        writer.wait_acked(50)  # writes while it is down, before its replacement starts
        args = ["--replace-address", victim.host]
        if same_address:
            new = cluster.renew_node(dead, args)
        else:
            cluster.forget(dead)
            new = cluster.add_node(args)
        before = writer.count()
        cluster.start_node(new.index)
        during = writer.count() - before
        writer.wait_acked(50)
    finally:
        writer.stop()
    print(f"\nthe replacement of node {dead} ({old_id}) by node {new.index} at {new.host}: {writer.summary()}, "
          f"{during} while it streamed; it streamed in {stream_bytes_in(new):.0f} bytes")
    ring.record(writer)
    return new.index, writer, old_id


def check_replaced(ring: Ring, new: int, writer: Writer, old_id: str, what: str) -> None:
    cluster = ring.cluster
    writer.assert_no_errors(cluster, what)
    replacement = cluster.node(new)
    new_id = host_id(replacement)
    assert new_id != old_id, "the replacement has the dead node's host id"
    for n in cluster.live_nodes():
        ids = {m["host_id"] for m in n.status()["nodes"]}
        assert old_id not in ids and new_id in ids, (
            f"after {what}, {n.host} lists host ids {sorted(ids)}: {old_id} should be gone, {new_id} there")
        seen = members(n)
        assert set(seen.values()) == {("up", "normal")}, f"after {what}, {n.host} lists {seen}"
    assert stream_bytes_in(replacement) > 0, f"the replacement streamed nothing\n{replacement.log_tail(40)}"
    assert_rows_read_back(cluster, ring.session, ring.acked, what, maybe_written=ring.failed, each=writer.acked)
    assert_alone_serves_everything(cluster, new, ring.acked, ring.failed, what)


def test_a_dead_node_is_replaced_on_its_own_address(ring):
    cluster = ring.cluster
    address = cluster.node(3).host
    events = Events(cluster.node(1), cluster.cql_port)
    try:
        new, writer, old_id = replace_under_load(ring, 3, same_address=True)
        # To drivers the node at that address was down and is back (as Cassandra tells them of
        # a replacement on the same address): UP, and neither NEW_NODE nor REMOVED_NODE, which
        # would have them drop a node that serves.
        events.wait_for("UP", address)
        sent = events.of(address)
    finally:
        events.close()
    print(f"events for {address}: {sent}")
    assert "REMOVED_NODE" not in sent and "NEW_NODE" not in sent, (
        f"drivers were told {sent} of {address}, which left the ring only to be replaced on the same address")
    check_replaced(ring, new, writer, old_id, "the replacement of node 3 on its own address")
    restart(cluster, [1, 2])


def test_a_dead_node_is_replaced_by_a_node_on_a_new_address(ring):
    cluster = ring.cluster
    if len(cluster.live_nodes()) != 3:
        pytest.skip("needs the three nodes of the test before")
    events = Events(cluster.node(1), cluster.cql_port)
    try:
        new, writer, old_id = replace_under_load(ring, 2, same_address=False)
        events.wait_for("NEW_NODE", cluster.node(new).host)
        events.wait_for("REMOVED_NODE", cluster.node(2).host)
    finally:
        events.close()
    check_replaced(ring, new, writer, old_id, "the replacement of node 2 by a node on a new address")
