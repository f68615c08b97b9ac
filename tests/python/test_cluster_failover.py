"""Replication factor 3 at QUORUM through the loss of one node, then two, and back.

One scenario, in the order the issue gives it, on a cluster of three with --commit-to-device
(without it a node acknowledges from its write buffer and a SIGKILL loses up to a second of its
own writes, by design; this test is about the cluster, not that trade-off):

1. Client threads write unique rows at QUORUM, token-aware, with the driver's default retry
   policy, and read their own earlier rows back at QUORUM. Node 3 is SIGKILLed mid-load. No
   request may fail: not after the survivors have marked node 3 down, and, with the default
   retry policy (a request on a connection that breaks is retried on the next host), not in the
   detection window either. Every acknowledged write then reads back at QUORUM.
2. Node 2 is SIGKILLed too: QUORUM and ALL answer Unavailable with the right consistency,
   required and alive replica counts; ONE still works.
3. Nodes 2 and 3 restart: the hints the survivors wrote for them are replayed (hint metrics),
   and then each node alone (the other two stopped) serves every acknowledged row at ONE.

`HAYATE_CLUSTER_SOAK_S=<seconds>` runs the load after the kill that long instead of a few
seconds.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from cassandra import ConsistencyLevel, Unavailable
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import FallthroughRetryPolicy
from cassandra.query import SimpleStatement

from hayate_cluster import Cluster, ClusterError, ClusterNode, running, whitelisted

THREADS = 4
LOAD_BEFORE_KILL_S = 1.5
LOAD_AFTER_DOWN_S = float(os.environ.get("HAYATE_CLUSTER_SOAK_S", "2.5"))
HINTS_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def three():
    yield from running("failover", commit_to_device=True)


class Load:
    """THREADS writers of unique rows, each reading one of its acknowledged rows back after
    every write; every outcome is recorded with its time."""

    def __init__(self, session):
        self.session = session
        self.insert = session.prepare("INSERT INTO fo.t (k, v) VALUES (?, ?)")
        self.select = session.prepare("SELECT v FROM fo.t WHERE k = ?")
        self.acked: dict[int, int] = {}
        # (when the request was sent, what, the error)
        self.errors: list[tuple[float, str, str]] = []
        self.ops = 0
        self.stale_reads: list[tuple[int, object]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(THREADS)]
        self._lock = threading.Lock()

    def _run(self, thread: int) -> None:
        seq = 0
        mine: list[int] = []
        while not self._stop.is_set():
            key = thread * 10_000_000 + seq
            value = seq * 7 + 1
            seq += 1
            sent = time.monotonic()
            try:
                self.session.execute(self.insert, (key, value))
                with self._lock:
                    self.acked[key] = value
                    self.ops += 1
                mine.append(key)
            except Exception as e:
                self.errors.append((sent, "write", repr(e)))
            if len(mine) > 1:
                back = mine[(seq * 7919) % (len(mine) - 1)]
                sent = time.monotonic()
                try:
                    row = self.session.execute(self.select, (back,)).one()
                    with self._lock:
                        self.ops += 1
                    if row is None or row.v != self.acked[back]:
                        self.stale_reads.append((back, row))
                except Exception as e:
                    self.errors.append((sent, "read", repr(e)))

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)


def missing_rows(session, acked: dict[int, int]) -> list:
    """The acknowledged rows that `session` does not read back with their value."""
    select = session.prepare("SELECT k, v FROM fo.t WHERE k = ?")
    keys = sorted(acked)
    results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=64,
                                           raise_on_first_error=False)
    bad = []
    for key, (ok, result) in zip(keys, results):
        if not ok:
            bad.append((key, repr(result)))
            continue
        row = result.one()
        if row is None or row.v != acked[key]:
            bad.append((key, row))
    return bad


def hint_bytes_on_disk(node: ClusterNode) -> int:
    return sum(p.stat().st_size for p in (node.data_dir / "hints").rglob("*.hints"))


def wait_hints_durable(cluster: Cluster, nodes: list[ClusterNode]) -> None:
    """Hints are appended through a buffer and synced every second (as Cassandra flushes its
    hints periodically): a SIGKILL loses the unsynced tail. Waits until every hint these nodes
    hold is in their files, so that killing one loses none."""
    deadline = time.monotonic() + HINTS_TIMEOUT_S
    while time.monotonic() < deadline:
        pending = {n.host: (n.metric("hayate_hints_pending_bytes"), hint_bytes_on_disk(n)) for n in nodes}
        if all(int(m) == d for m, d in pending.values()):
            return
        time.sleep(0.2)
    raise ClusterError(f"hints not synced within {HINTS_TIMEOUT_S} s (metric, on disk): {pending}")


def test_rf3_quorum_survives_one_node_then_unavailable_then_hints_and_each_node_alone(three):
    session = three.session()  # token-aware, QUORUM, the driver's default retry policy
    session.execute("CREATE KEYSPACE fo WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute("CREATE TABLE fo.t (k bigint PRIMARY KEY, v bigint)")

    # 1. One node killed mid-load.
    load = Load(session)
    load.start()
    armed_s = three.wait_speculation_ready()
    time.sleep(LOAD_BEFORE_KILL_S)
    acked_before = len(load.acked)
    killed_at = three.kill(3)
    down_at = three.wait_seen_down(3)
    time.sleep(LOAD_AFTER_DOWN_S)
    load.stop()
    ops_after_down = load.ops
    detection_s = down_at - killed_at
    window_errors = [e for e in load.errors if e[0] < down_at]
    late_errors = [e for e in load.errors if e[0] >= down_at]
    print(f"\nspeculation armed after {armed_s:.1f} s of load")
    print(f"load: {THREADS} threads, {len(load.acked)} writes acknowledged ({acked_before} before the kill), "
          f"{load.ops} operations; node 3 seen down by both survivors {detection_s:.2f} s after SIGKILL; "
          f"client errors for requests sent in the detection window: {len(window_errors)}, "
          f"after it: {len(late_errors)}")
    for at, op, err in load.errors[:10]:
        print(f"  {at - killed_at:+.2f} s after the kill, {op}: {err[:300]}")
    assert acked_before > 50 and len(load.acked) - acked_before > 50, "the load did too little to test anything"
    assert not late_errors, (
        f"{len(late_errors)} requests sent after the survivors marked node 3 down failed; first: {late_errors[0]}\n"
        f"{three.logs()}")
    assert not window_errors, (
        f"{len(window_errors)} requests sent between the SIGKILL and the survivors marking node 3 down "
        f"failed, with the driver's default retry policy; first: {window_errors[0]}\n{three.logs()}")
    assert not load.stale_reads, f"QUORUM reads missed acknowledged QUORUM writes: {load.stale_reads[:5]}"
    missing = missing_rows(session, load.acked)
    assert not missing, f"{len(missing)} acknowledged writes do not read back at QUORUM: {missing[:5]}"

    # 2. A second node killed: no QUORUM, no ALL; ONE still works.
    survivors = [three.node(1), three.node(2)]
    wait_hints_durable(three, survivors)
    hints_written = {n.host: n.metric("hayate_hints_written_total") for n in survivors}
    three.kill(2)
    three.wait_seen_down(2)
    lone = whitelisted(three, 1, retry_policy=FallthroughRetryPolicy())
    for consistency, required in ((ConsistencyLevel.QUORUM, 2), (ConsistencyLevel.ALL, 3)):
        for cql in ("INSERT INTO fo.t (k, v) VALUES (-1, -1)", "SELECT v FROM fo.t WHERE k = 0"):
            with pytest.raises(Unavailable) as raised:
                lone.execute(SimpleStatement(cql, consistency_level=consistency))
            e = raised.value
            assert (e.consistency, e.required_replicas, e.alive_replicas) == (consistency, required, 1), (
                f"{cql} at {ConsistencyLevel.value_to_name[consistency]}: {e!r}")
    at_one = SimpleStatement("INSERT INTO fo.t (k, v) VALUES (-2, -2)", consistency_level=ConsistencyLevel.ONE)
    lone.execute(at_one)
    load.acked[-2] = -2

    # 3. Back: hints replayed, then each node alone serves every acknowledged row at ONE.
    three.start_node(2, agree=False)
    three.start_node(3, agree=False)
    three.wait_agreement()
    three.wait_hints_replayed(HINTS_TIMEOUT_S, after="the restart")
    replayed = three.metric_by_node("hayate_hints_replayed_total")
    print(f"hints written before node 2 was killed: {hints_written}; replayed after the restart: {replayed}")
    assert hints_written[three.node(1).host] > 0 and hints_written[three.node(2).host] > 0, (
        "both survivors coordinated writes while node 3 was down, so both must have written hints")
    # Node 1 replays its hints for node 3 and those for nodes 2 and 3 of the write at ONE; node 2
    # (restarted, so its counters start again) replays what it kept for node 3.
    assert replayed[three.node(1).host] >= hints_written[three.node(1).host] + 2
    assert replayed[three.node(2).host] >= hints_written[three.node(2).host]

    alone_order = [(1, [2, 3]), (2, [1]), (3, [2])]
    for k, to_stop in alone_order:
        for other in to_stop:
            three.stop(other)
        if not three.node(k).alive():
            three.start_node(k, agree=False)
        single = whitelisted(three, k, consistency=ConsistencyLevel.ONE)
        missing = missing_rows(single, load.acked)
        assert not missing, (
            f"node {k} alone at ONE misses {len(missing)} of {len(load.acked)} acknowledged rows: "
            f"{missing[:5]}\n{three.node(k).log_tail(40)}")
        if k == 2:
            three.start_node(3, agree=False)
    three.start_node(1, agree=False)
    three.start_node(2, agree=False)
    three.wait_agreement()
