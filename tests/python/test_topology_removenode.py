"""A dead node is removed from the ring (`hayate removenode <host id>`) while a writer runs at
QUORUM (docs/topology-changes.md, "Remove a dead node").

Four nodes hold DATA_ROWS rows (RF 3). Node 4 is SIGKILLed for good (its disk is lost), and
once the others see it down, `hayate removenode` asked of node 1 has the other replicas stream
its ranges to their new owners, then the ring forgets it. The command exits 0 and says so; the
three others list each other only, all normal; drivers hear REMOVED_NODE; no client error;
every acknowledged row reads back at ALL; each node's load is an even share (with RF 3 on three
nodes, every row on every node), which it only is if the streams brought node 4's ranges.
"""

from __future__ import annotations

from hayate_cluster import ClusterError
from topology import (Events, Writer, assert_even_loads, assert_rows_read_back, bytes_per_row, create_table,
                      hayate, host_id, load, members, on, output, stream_bytes_in, topology_cluster)

DATA_ROWS = 20_000
WRITES_DURING_CHANGE_MIN = 50


def test_a_dead_node_is_removed_and_its_ranges_streamed_from_the_other_replicas():
    with topology_cluster("removenode", nodes=4) as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        acked = load(session, range(DATA_ROWS))
        row_bytes = bytes_per_row(cluster, DATA_ROWS)
        dead = cluster.node(4)
        dead_id = host_id(dead)
        streamed_before = {n.host: stream_bytes_in(n) for n in cluster.nodes[:3]}
        events = Events(cluster.node(1), cluster.cql_port)
        writer = Writer(session, 10_000_000).start()
        try:
            writer.wait_acked(50)
            cluster.kill(4)
            cluster.forget(4)  # the disk is lost
            cluster.wait_seen_down(4)
            writer.wait_acked(50)
            before = writer.count()
            result = hayate("removenode", dead_id, *on(cluster.node(1)))
            during = writer.count() - before
            print(f"\n`hayate removenode {dead_id}`: {output(result)}")
            if result.returncode != 0 or "no longer in the ring" not in result.stdout:
                raise ClusterError(f"`hayate removenode` failed: {output(result)}\n{cluster.logs(40)}")
            events.wait_for("REMOVED_NODE", dead.host)
            cluster.wait_agreement()
            writer.wait_acked(50)
        finally:
            writer.stop()
            events.close()
        what = f"the removal of node 4 ({dead_id})"
        streamed = {n.host: stream_bytes_in(n) - streamed_before[n.host] for n in cluster.live_nodes()}
        print(f"{what}: {writer.summary()}, {during} while it ran; bytes streamed in: {streamed}")
        writer.assert_no_errors(cluster, what)
        assert during >= WRITES_DURING_CHANGE_MIN, f"only {during} writes were acknowledged during {what}"
        hosts = sorted(n.host for n in cluster.live_nodes())
        for n in cluster.live_nodes():
            seen = members(n)
            assert sorted(seen) == hosts and set(seen.values()) == {("up", "normal")}, (
                f"after {what}, {n.host} lists {seen}")
        # Every one of the three was missing the ranges node 4 held as one of three replicas.
        assert all(b > 0 for b in streamed.values()), f"a node took nothing over: {streamed}"
        acked |= writer.acked
        assert_rows_read_back(cluster, session, acked, what, maybe_written=writer.failed_keys(), each=writer.acked)
        assert_even_loads(cluster, what, len(acked), row_bytes)
