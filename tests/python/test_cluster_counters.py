"""Counters across coordinators: three nodes, replication factor 3, clients pinned to each node
incrementing the same counters at once, while one node is SIGKILLed and started again.

A counter's increments are added by one replica (the leader) to its own shard, whose new state
the others merge, so increments through any coordinators must sum exactly: after the load, each
counter read at ALL lies between its acknowledged increments and those plus the ones whose
outcome is unknown (timed out, or in flight on the killed node's connections), and every node
alone answers the same sum once hints are replayed.
"""

from __future__ import annotations

import random
import threading
import time

from cassandra import ConsistencyLevel
from cassandra.cluster import NoHostAvailable
from cassandra.query import SimpleStatement

from hayate_cluster import running, whitelisted

import pytest

KEYS = 20


@pytest.fixture(scope="module")
def three():
    yield from running("counters")


def test_increments_through_every_coordinator_sum_exactly_across_a_kill(three):
    first = three.session()
    first.execute(
        "CREATE KEYSPACE cnt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
    )
    first.execute("CREATE TABLE cnt.c (k int PRIMARY KEY, n counter)")
    three.wait_agreement()
    sessions = [whitelisted(three, k) for k in (1, 2, 3)]
    acked = [0] * KEYS
    unknown = [0] * KEYS
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(i: int) -> None:
        session = sessions[i % 3]
        inc = session.prepare("UPDATE cnt.c SET n = n + 1 WHERE k = ?")
        inc.consistency_level = ConsistencyLevel.QUORUM
        rng = random.Random(i)
        while not stop.is_set():
            k = rng.randrange(KEYS)
            try:
                session.execute(inc, (k,), timeout=5)
            except Exception as e:  # the outcome is unknown: counted or not
                with lock:
                    unknown[k] += 1
                    errors.append(f"client {i} (node {i % 3 + 1}): {type(e).__name__}")
                # The killed node's clients wait for it to come back.
                time.sleep(0.2)
                continue
            with lock:
                acked[k] += 1

    clients = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(6)]
    for t in clients:
        t.start()
    time.sleep(2)
    three.kill(3)
    time.sleep(3)
    three.start_node(3, agree=False)
    time.sleep(2)
    stop.set()
    for t in clients:
        t.join(30)
    three.wait_agreement()
    three.wait_hints_replayed(60, after="the load")
    assert sum(acked) > 100, f"only {sum(acked)} increments acknowledged"
    # Only the killed node's own clients may have seen errors.
    assert all("(node 3)" in e for e in errors), errors[:10]

    at_all = SimpleStatement("SELECT k, n FROM cnt.c", consistency_level=ConsistencyLevel.ALL)
    got = dict(tuple(r) for r in sessions[0].execute(at_all))
    wrong = {
        k: (acked[k], acked[k] + unknown[k], got.get(k, 0))
        for k in range(KEYS)
        if not acked[k] <= got.get(k, 0) <= acked[k] + unknown[k]
    }
    assert not wrong, f"counters outside [acknowledged, sent]: (acknowledged, sent, read) {wrong}"
    # Once hints are replayed and the read at ALL repaired, a read at ONE through each node
    # gives the same sums.
    one = SimpleStatement("SELECT k, n FROM cnt.c", consistency_level=ConsistencyLevel.ONE)
    for k, session in enumerate(sessions, start=1):
        deadline = time.monotonic() + 30
        while True:  # the restarted node's session reconnects with a backoff
            try:
                alone = dict(tuple(r) for r in session.execute(one))
                break
            except NoHostAvailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert alone == got, f"node {k} alone"
