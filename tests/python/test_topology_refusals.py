"""Topology changes that must not happen are refused, with a message that says why, and change
nothing (docs/topology-changes.md, sections 1 and 5), while a writer runs at QUORUM.

1. On three nodes with a keyspace of RF 3: a decommission (two nodes would remain for RF 3);
   `removenode` of a live node, and of a host id that is no member; a node started with
   `--replace-address` naming a live node (it exits non-zero, its log saying why).
2. On four nodes, while a fifth joins and streams (every node sends at most STREAM_THROUGHPUT):
   a decommission of node 1 (RF 3 allows it on its own, but one change at a time), and a
   sixth node's join. Both refused naming the join in progress; the join then finishes.

After each refusal every node lists the same members with the same statuses and the same
change in progress as before it, and the writer saw no error.
"""

from __future__ import annotations

import subprocess
import time

from hayate_cluster import Cluster, ClusterError, ClusterNode
from topology import (CHANGE_TIMEOUT_S, Writer, create_table, hayate, host_id, load, netstats, on, output,
                      topology_cluster)

DATA_ROWS = 20_000
# The join in progress must outlast the refusals by far: 4 nodes send about 3.5 MB to a fifth.
STREAM_THROUGHPUT = "128KiB"
# How long a refused node may take to give up (it asks a member, which answers at once).
REFUSAL_TIMEOUT_S = 60


def ring_view(nodes: list[ClusterNode]) -> dict[str, tuple]:
    """host -> (the members it lists as (host id, address, state, status), the change in
    progress), for each of `nodes`."""
    view = {}
    for n in nodes:
        doc = n.status()
        view[n.host] = (sorted((m["host_id"], m["address"], m["state"], m["status"]) for m in doc["nodes"]),
                        doc["change"])
    return view


def assert_unchanged(cluster: Cluster, before: dict, what: str) -> None:
    after = ring_view([n for n in cluster.nodes if n.host in before])
    assert after == before, f"{what} changed the ring:\nbefore: {before}\nafter:  {after}\n{cluster.logs(30)}"


def assert_refused(result: subprocess.CompletedProcess, words: list[str], what: str) -> None:
    print(f"{what}: {output(result).strip()}")
    assert result.returncode != 0, f"{what} was not refused: {output(result)}"
    missing = [w for w in words if w not in result.stderr]
    assert not missing, f"the refusal of {what} does not say {missing}: {output(result)}"


def refused_start(cluster: Cluster, node: ClusterNode, words: list[str], what: str) -> None:
    """Starts `node`, which must exit non-zero with `words` in its log; it is then no member."""
    node.proc = node.spawn()
    try:
        code = node.proc.wait(timeout=REFUSAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"{what}: the node was not refused within {REFUSAL_TIMEOUT_S} s\n{node.log_tail(40)}")
    finally:
        cluster.forget(node.index)  # not a member: the agreement checks must not wait for it
    log = node.log_path.read_text(errors="replace")
    said = [line for line in log.splitlines() if words[0] in line]
    print(f"{what}: exit status {code}; {said[-1:] or 'no reason logged'}")
    assert code != 0, f"{what}: the node exited with status 0\n{node.log_tail(40)}"
    missing = [w for w in words if w not in log]
    assert not missing, f"{what}: the node's log does not say {missing}\n{node.log_tail(40)}"


def test_a_change_that_would_break_the_ring_is_refused_and_changes_nothing():
    with topology_cluster("refusals", nodes=3) as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        writer = Writer(session, 0).start()
        try:
            writer.wait_acked(50)
            before = ring_view(cluster.live_nodes())
            print()

            result = hayate("decommission", *on(cluster.node(3)), timeout_s=60)
            assert_refused(result, ["refused", "topo has replication factor 3", "only 2 nodes would remain"],
                           "a decommission leaving 2 nodes for RF 3")
            assert_unchanged(cluster, before, "a refused decommission")
            assert cluster.node(3).alive() and netstats(cluster.node(3))["mode"] == "NORMAL"

            live = host_id(cluster.node(2))
            result = hayate("removenode", live, *on(cluster.node(1)), timeout_s=60)
            assert_refused(result, ["refused", f"{live} is alive", "removenode is for dead nodes"],
                           "removenode of a live node")
            assert_unchanged(cluster, before, "a refused removenode")

            stranger = "00000000-0000-4000-8000-000000000001"
            result = hayate("removenode", stranger, *on(cluster.node(1)), timeout_s=60)
            assert_refused(result, ["refused", f"{stranger} is not a member of the ring"],
                           "removenode of a host id that is no member")
            assert_unchanged(cluster, before, "a refused removenode")

            impostor = cluster.add_node(["--replace-address", cluster.node(3).host])
            refused_start(cluster, impostor, [f"the node at {cluster.node(3).host}", "is alive",
                                              "only a dead node can be replaced"],
                          "a replacement of a live node")
            assert_unchanged(cluster, before, "a refused replacement")
            cluster.wait_agreement()
            writer.wait_acked(50)
        finally:
            writer.stop()
        print(writer.summary())
        writer.assert_no_errors(cluster, "the refusals")


def test_a_second_change_is_refused_while_a_join_streams():
    with topology_cluster("refusals_busy", nodes=4, spare=3, stream_throughput=STREAM_THROUGHPUT) as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        load(session, range(DATA_ROWS))
        writer = Writer(session, 10_000_000).start()
        try:
            writer.wait_acked(50)
            members = cluster.live_nodes()
            joining = cluster.add_node()
            joining.proc = joining.spawn()
            # Wait until the join is under way: every node knows it and the new node streams.
            deadline = time.monotonic() + CHANGE_TIMEOUT_S
            while True:
                cluster.check_alive()
                try:
                    streams = netstats(joining)["streams"]
                except OSError:
                    streams = []
                view = ring_view(members)
                if streams and all(change for _, change in view.values()):
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"the fifth node did not start streaming within {CHANGE_TIMEOUT_S} s\n"
                                       f"{joining.log_tail(40)}")
                time.sleep(0.05)
            change = next(iter(view.values()))[1]
            print(f"\nin progress: {change}")
            assert change.startswith("the join of"), change

            result = hayate("decommission", *on(cluster.node(1)), timeout_s=60)
            assert_refused(result, ["refused", change, "one topology change at a time"],
                           "a decommission during a join")
            assert_unchanged(cluster, view, "a decommission refused during a join")

            second = cluster.add_node()
            refused_start(cluster, second, ["one topology change at a time", change], "a second join")
            assert_unchanged(cluster, view, "a second join refused during a join")

            # The join that was in progress goes on, unharmed, to its end.
            try:
                joining.wait_ready(CHANGE_TIMEOUT_S)
            except Exception as e:
                raise ClusterError(f"the join in progress did not finish after the refusals: {e}") from e
            cluster.wait_agreement()
            writer.wait_acked(50)
        finally:
            writer.stop()
        print(writer.summary())
        writer.assert_no_errors(cluster, "the refusals during a join")
