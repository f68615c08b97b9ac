"""A logged batch is all or nothing on one node, across a crash (Cassandra's batchlog).

Writers send logged batches of BATCH_ROWS inserts to as many partitions, several batches in
flight, and the node is SIGKILLed at a seeded random moment, while batches are half applied.
After a restart every batch must have all of its rows or none of them, and every acknowledged
batch all of them. Without the batchlog a kill lands inside some batch nearly every time: the
node applies a batch's rows one after another, and a batch takes about a millisecond.

Replay a failure with HAYATE_SEED=<seed> (printed on failure).
"""

import os
import random
import threading
import time

from cassandra.cluster import ExecutionProfile
from cassandra.query import BatchStatement, BatchType

ROUNDS = 3
BATCH_ROWS = 100
IN_FLIGHT = 8
SEED = int(os.environ.get("HAYATE_SEED", "20261124"))


class BatchWriter:
    """Sends logged batches from a thread, IN_FLIGHT at a time; records which were acknowledged."""

    def __init__(self, session, insert, first_batch):
        self.session, self.insert = session, insert
        self.next_batch = first_batch
        self.acked = set()
        self.lock = threading.Lock()
        self.slots = threading.Semaphore(IN_FLIGHT)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stopped.is_set():
            if not self.slots.acquire(timeout=0.1):
                continue
            batch_id = self.next_batch
            self.next_batch += 1
            batch = BatchStatement(batch_type=BatchType.LOGGED)
            for i in range(BATCH_ROWS):
                batch.add(self.insert, (batch_id * BATCH_ROWS + i, batch_id, f"row {i} of batch {batch_id}"))
            try:
                future = self.session.execute_async(batch)
            except Exception:
                self.slots.release()
                continue
            future.add_callbacks(self.on_ack, self.on_error, callback_args=(batch_id,), errback_args=(batch_id,))

    def on_ack(self, _rows, batch_id):
        with self.lock:
            self.acked.add(batch_id)
        self.slots.release()

    def on_error(self, _exc, _batch_id):
        self.slots.release()

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=30)


def rows_per_batch(session):
    counts = {}
    for row in session.execute("SELECT batch_id FROM b.t"):
        counts[row.batch_id] = counts.get(row.batch_id, 0) + 1
    return counts


def test_a_logged_batch_is_all_or_nothing_after_sigkill(node_factory):
    rng = random.Random(SEED)
    n = node_factory("batch_atomicity")
    profile = ExecutionProfile(request_timeout=10)
    acked, first_batch = set(), 0
    for round_no in range(ROUNDS):
        cluster, session = node_factory.connect(n, profile=profile)
        if round_no == 0:
            session.execute("CREATE KEYSPACE b WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE b.t (k int PRIMARY KEY, batch_id int, v text)")
        insert = session.prepare("INSERT INTO b.t (k, batch_id, v) VALUES (?, ?, ?)")
        writer = BatchWriter(session, insert, first_batch)
        writer.thread.start()
        time.sleep(rng.uniform(0.5, 1.5))
        n.kill()
        writer.stop()
        cluster.shutdown()
        acked |= writer.acked
        first_batch = writer.next_batch
        assert len(writer.acked) >= 10, (
            f"round {round_no}: only {len(writer.acked)} batches acknowledged before the kill (seed {SEED})")

        n.start()
        cluster, session = node_factory.connect(n, profile=profile)
        counts = rows_per_batch(session)
        cluster.shutdown()
        partial = {b: c for b, c in counts.items() if c != BATCH_ROWS}
        assert not partial, (
            f"round {round_no} (seed {SEED}): {len(partial)} batches partly applied after SIGKILL "
            f"(batch: rows present of {BATCH_ROWS}): {dict(list(partial.items())[:5])}")
        missing = sorted(acked - set(counts))
        assert not missing, f"round {round_no} (seed {SEED}): acknowledged batches lost: {missing[:5]}"
