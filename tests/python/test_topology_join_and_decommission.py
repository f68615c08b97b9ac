"""A ring that holds data grows from three nodes to five, one join at a time, then the last
node to join decommissions; a writer runs at QUORUM through every step.

One cluster, in the issue's order (docs/topology-changes.md, "Join" and "Decommission"):

1. Three nodes hold DATA_ROWS rows (RF 3). A fourth joins, then a fifth: each streams the
   ranges it takes over (every node sends at most 512 KiB/s, so each stream lasts seconds
   and the writer's rows land while it runs), opens its CQL port once normal, and drivers hear
   TOPOLOGY_CHANGE NEW_NODE. After each join: no client error, every acknowledged row at ALL,
   and, once the nodes that gave ranges up have cleaned them up, every node's load within 20%
   of an even share.
2. The fifth node decommissions (`hayate decommission`): the command and the process exit 0,
   the others no longer list it, drivers hear REMOVED_NODE; the same checks after. (The last
   to join: the allocator evens the ring out as each node joins, so taking the last one out
   gives back a ring it evened out; taking one of the first three out leaves a ring nothing
   evened out, which can be ~20% off an even share.)
"""

from __future__ import annotations

import time

import pytest

from hayate_cluster import ClusterError
from topology import (CHANGE_TIMEOUT_S, CLEANUP_LOG, CLEANUP_TIMEOUT_S, Events, Ring, assert_even_loads,
                      assert_rows_read_back, bytes_per_row, create_table, hayate, load, log_offsets, members,
                      on, output, stream_bytes_in, topology_cluster, wait_logged)

DATA_ROWS = 20_000
# Every node's outgoing stream rate: a join then streams for a few seconds.
STREAM_THROUGHPUT = "512KiB"
# Writes the writer must have had acknowledged during a change (while the new node streamed
# or the leaving one handed its ranges over): the test is about writes during a change.
WRITES_DURING_CHANGE_MIN = 50


@pytest.fixture(scope="module")
def ring():
    with topology_cluster("grow", stream_throughput=STREAM_THROUGHPUT) as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        acked = load(session, range(DATA_ROWS))
        # Three nodes, RF 3: every node holds every row.
        yield Ring(cluster, session, acked, row_bytes=bytes_per_row(cluster, DATA_ROWS))


def join_under_load(ring: Ring) -> None:
    cluster = ring.cluster
    old = cluster.live_nodes()
    events = Events(cluster.node(1), cluster.cql_port)
    writer = ring.writer()
    try:
        writer.wait_acked(50)
        offsets = log_offsets(old)
        before = writer.count()
        new = cluster.add_node()
        try:
            cluster.start_node(new.index)
        except ClusterError as e:
            raise ClusterError(f"node {new.index} did not join: {e}") from e
        during = writer.count() - before
        streamed = stream_bytes_in(new)
        events.wait_for("NEW_NODE", new.host)
        # Every node that was there gave ranges up to the new one.
        wait_logged(cluster, old, CLEANUP_LOG, offsets, CLEANUP_TIMEOUT_S)
        writer.wait_acked(50)
    finally:
        writer.stop()
        events.close()
    what = f"the join of node {new.index}"
    print(f"\n{what}: {writer.summary()}, {during} while it joined; it streamed in {streamed:.0f} bytes")
    ring.record(writer)
    writer.assert_no_errors(cluster, what)
    assert during >= WRITES_DURING_CHANGE_MIN, f"only {during} writes were acknowledged during {what}"
    assert streamed > 0, f"node {new.index} joined a ring holding data and streamed nothing\n{new.log_tail(40)}"
    assert_rows_read_back(cluster, ring.session, ring.acked, what, maybe_written=ring.failed, each=writer.acked)
    assert_even_loads(cluster, what, len(ring.acked), ring.row_bytes)


def test_a_ring_with_data_grows_from_three_to_five_under_load(ring):
    join_under_load(ring)
    join_under_load(ring)
    cluster = ring.cluster
    hosts = sorted(n.host for n in cluster.nodes)
    for n in cluster.nodes:
        seen = members(n)
        assert sorted(seen) == hosts and set(seen.values()) == {("up", "normal")}, f"{n.host} lists {seen}"


def test_the_last_node_to_join_decommissions_under_load(ring):
    cluster = ring.cluster
    if len(cluster.live_nodes()) != 5:
        pytest.skip("needs the five nodes of the test before")
    leaving = cluster.node(5)
    events = Events(cluster.node(1), cluster.cql_port)
    writer = ring.writer()
    try:
        writer.wait_acked(50)
        before = writer.count()
        result = hayate("decommission", *on(leaving))
        during = writer.count() - before
        print(f"\n`hayate decommission`: {output(result)}")
        assert result.returncode == 0 and "decommissioned" in result.stdout, (
            f"`hayate decommission` failed: {output(result)}\n{cluster.logs(40)}")
        try:
            code = leaving.proc.wait(timeout=CHANGE_TIMEOUT_S)
        except Exception as e:
            raise ClusterError(f"node 5 left the ring but did not stop\n{leaving.log_tail(40)}") from e
        assert code == 0, f"the decommissioned node exited with status {code}\n{leaving.log_tail(40)}"
        events.wait_for("REMOVED_NODE", leaving.host)
        cluster.forget(5)
        cluster.wait_agreement()
        writer.wait_acked(50)
    finally:
        writer.stop()
        events.close()
    what = "the decommission of node 5"
    print(f"{what}: {writer.summary()}, {during} while it ran")
    remaining = sorted(n.host for n in cluster.live_nodes())
    for n in cluster.live_nodes():
        assert sorted(members(n)) == remaining, f"{n.host} still lists {leaving.host}: {members(n)}"
    deadline = time.monotonic() + 30
    while leaving.host in {h.address for h in ring.session.cluster.metadata.all_hosts()}:
        assert time.monotonic() < deadline, f"the driver still lists {leaving.host} 30 s after REMOVED_NODE"
        time.sleep(0.1)
    ring.record(writer)
    writer.assert_no_errors(cluster, what)
    assert during >= WRITES_DURING_CHANGE_MIN, f"only {during} writes were acknowledged during {what}"
    assert_rows_read_back(cluster, ring.session, ring.acked, what, maybe_written=ring.failed, each=writer.acked)
    # The nodes that stay only gained ranges: nothing to clean up.
    assert_even_loads(cluster, what, len(ring.acked), ring.row_bytes)
