"""A node loses no acknowledged write when its process is killed: with --commit-to-device
(group commit) and in the default mode (the write buffer in /dev/shm, replayed at the next start).

The claim a client relies on: once the driver has the RESULT for a write, the write survives the
process dying at any moment (SIGKILL here, the same as a crash or an OOM kill). A writer keeps
32 writes in flight against the node, records each one acknowledged, and the node is killed at a
seeded random moment; after a restart on the same data directory, every acknowledged row must
read back with its value. Some writes overwrite rows of earlier rounds, so the update path
(each overwrite only sets cells, so it is written as a delta without reading the row, and
the reads after a restart find the delta again) is killed mid-flight too. A write that was in flight at the
kill may or may not be there; an acknowledged one must be.

Replay a failure with HAYATE_SEED=<seed> (printed on failure).
"""

import os
import random
import threading
import time

import pytest
from cassandra.cluster import ExecutionProfile
from cassandra.concurrent import execute_concurrent_with_args

ROUNDS = 4
IN_FLIGHT = 32
SEED = int(os.environ.get("HAYATE_SEED", "20261122"))


class Writer:
    """Writes rows of one round from a thread, with a bounded number in flight.

    `sent[k]` lists the values sent for key k in order; `acked[k]` is the index of the newest
    acknowledged one. Writes to one key are never in flight together, so the value read after
    the crash must be sent[k][acked[k]] or a later one.
    """

    def __init__(self, session, insert, round_no, rng, sent, acked):
        self.session, self.insert, self.round_no, self.rng = session, insert, round_no, rng
        self.sent, self.acked = sent, acked
        self.slots = threading.Semaphore(IN_FLIGHT)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.pending = 0
        self.acked_this_round = 0
        self.errors = 0
        self.busy_keys = set()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        earlier = [k for k in self.sent if k // 1_000_000 < self.round_no]
        while True:
            if not self.slots.acquire(timeout=10):
                break
            if self.stopped.is_set():
                self.slots.release()
                break
            if earlier and self.rng.random() < 0.25:
                key = self.rng.choice(earlier)
            else:
                key = self.round_no * 1_000_000 + i
                i += 1
            with self.lock:
                if key in self.busy_keys:
                    self.slots.release()
                    continue
                self.busy_keys.add(key)
                value = f"r{self.round_no}-{key}-{len(self.sent.get(key, []))}-" + "x" * self.rng.randint(0, 300)
                self.sent.setdefault(key, []).append(value)
                index = len(self.sent[key]) - 1
                self.pending += 1
            future = self.session.execute_async(self.insert, (key, value))
            future.add_callbacks(self.on_ack, self.on_error, callback_args=(key, index), errback_args=(key,))

    def on_ack(self, _rows, key, index):
        with self.lock:
            self.acked[key] = max(self.acked.get(key, -1), index)
            self.acked_this_round += 1
            self.pending -= 1
            self.busy_keys.discard(key)
        self.slots.release()

    def on_error(self, _exc, key):
        with self.lock:
            self.errors += 1
            self.pending -= 1
            # The key stays busy: whether this write landed is unknown, so it is not rewritten.
        self.stopped.set()
        self.slots.release()

    def stop_and_wait(self, timeout_s=30):
        self.stopped.set()
        self.thread.join(timeout_s)
        deadline = time.monotonic() + timeout_s
        while self.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.pending == 0, f"{self.pending} writes never completed or failed"


def read_all(session, select, keys):
    # A bounded number in flight: the default mode acknowledges tens of thousands of writes a
    # round, and as many requests at once would wait past the driver's timeout in its queue.
    results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=64)
    return {k: (r.result_or_exc.one() or [None])[0] for k, r in zip(keys, results)}


@pytest.mark.parametrize("mode", ["commit_to_device", "default", "read_page_cache"])
def test_acknowledged_writes_survive_sigkill(node_factory, mode):
    rng = random.Random(SEED)
    n = node_factory(f"durability_{mode}", commit_to_device=mode == "commit_to_device", start=False)
    if mode == "read_page_cache":
        # The default mode with record reads through the page cache, and a post-write cache of
        # a few blocks, so that the overwrites' reads and the reads after each restart go
        # through it.
        n.config_path.write_text(n.config_path.read_text().replace(
            "[storage]\n", '[storage]\nread_page_cache = true\npost_write_cache = "4MiB"\n'))
    n.start()
    if mode == "read_page_cache":
        assert "read_page_cache=true" in n.log_path.read_text(), "the node did not take the setting"
    sent: dict[int, list[str]] = {}
    acked: dict[int, int] = {}
    profile = ExecutionProfile(request_timeout=5)

    for round_no in range(ROUNDS):
        cluster, session = node_factory.connect(n, profile=profile)
        if round_no == 0:
            session.execute("CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE d.t (k bigint PRIMARY KEY, v text)")
        insert = session.prepare("INSERT INTO d.t (k, v) VALUES (?, ?)")
        writer = Writer(session, insert, round_no, random.Random(SEED * 100 + round_no), sent, acked)
        writer.thread.start()
        time.sleep(rng.uniform(0.5, 1.5))
        n.kill()
        writer.stop_and_wait()
        cluster.shutdown()
        assert writer.acked_this_round >= 50, (
            f"round {round_no}: only {writer.acked_this_round} writes acknowledged before the kill; "
            f"too few to test anything (seed {SEED})")

        n.start()
        cluster, session = node_factory.connect(n, profile=profile)
        select = session.prepare("SELECT v FROM d.t WHERE k = ?")
        got = read_all(session, select, list(acked))
        lost = {k: (sent[k][acked[k]][:24], (got[k] or "")[:24]) for k in acked if got[k] not in sent[k][acked[k]:]}
        assert not lost, (
            f"round {round_no} (seed {SEED}): {len(lost)} of {len(acked)} acknowledged rows lost or "
            f"rolled back after SIGKILL; key: (acknowledged, read back): {dict(list(lost.items())[:5])}")
        cluster.shutdown()


def test_acknowledged_schema_survives_sigkill(node_factory):
    """A CREATE that was answered is there after a crash right after it, with or without
    --commit-to-device (the schema is not in the buffered write path)."""
    n = node_factory("schema_kill")
    cluster, session = node_factory.connect(n)
    session.execute("CREATE KEYSPACE sk WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE sk.t (k int PRIMARY KEY, v text)")
    session.execute("ALTER TABLE sk.t ADD extra int")
    cluster.shutdown()
    n.kill()
    n.start()
    cluster, session = node_factory.connect(n)
    table = cluster.metadata.keyspaces["sk"].tables["t"]
    assert sorted(table.columns) == ["extra", "k", "v"]


def test_without_a_write_buffer_a_crash_loses_at_most_the_flush_interval(node_factory):
    """With `write_buffer_dir = ""` hayate acknowledges writes from the open write block alone
    and flushes every flush_interval_ms (1 s by default); the README promises that a crash then
    loses no write acknowledged more than that long before it (the bound a power failure keeps
    in the default mode too)."""
    rng = random.Random(SEED + 1)
    n = node_factory("unbuffered", write_buffer=False)
    cluster, session = node_factory.connect(n, profile=ExecutionProfile(request_timeout=5))
    session.execute("CREATE KEYSPACE b WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE b.t (k bigint PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO b.t (k, v) VALUES (?, ?)")
    acked_at: dict[int, float] = {}
    deadline = time.monotonic() + rng.uniform(2.5, 3.5)
    k = 0
    while time.monotonic() < deadline:
        futures = [(k + i, session.execute_async(insert, (k + i, f"v{k + i}"))) for i in range(16)]
        for key, f in futures:
            f.result()
            acked_at[key] = time.monotonic()
        k += 16
    n.kill()
    killed_at = time.monotonic()
    cluster.shutdown()

    n.start()
    cluster, session = node_factory.connect(n)
    select = session.prepare("SELECT v FROM b.t WHERE k = ?")
    old_enough = [key for key, at in acked_at.items() if killed_at - at > 1.5]
    assert len(old_enough) > 100, "the writer acknowledged too little before the kill window to test anything"
    got = read_all(session, select, old_enough)
    lost = [key for key in old_enough if got[key] != f"v{key}"]
    assert not lost, (f"{len(lost)} writes acknowledged more than 1.5 s before the SIGKILL were lost "
                      f"(seed {SEED}); first: {lost[:5]}")


def test_sigterm_under_load_keeps_every_acknowledged_write(node_factory):
    """A clean shutdown in the default buffered mode writes out the write buffer: SIGTERM in the
    middle of a load loses no acknowledged write, and the process exits 0."""
    rng = random.Random(SEED + 2)
    n = node_factory("sigterm_load")
    sent: dict[int, list[str]] = {}
    acked: dict[int, int] = {}
    profile = ExecutionProfile(request_timeout=5)
    cluster, session = node_factory.connect(n, profile=profile)
    session.execute("CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE d.t (k bigint PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO d.t (k, v) VALUES (?, ?)")
    writer = Writer(session, insert, 0, random.Random(SEED), sent, acked)
    writer.thread.start()
    time.sleep(rng.uniform(0.5, 1.5))
    code = n.stop()
    writer.stop_and_wait()
    cluster.shutdown()
    assert code == 0, f"SIGTERM under load should exit 0, got {code}.\n{n.log_tail()}"
    assert writer.acked_this_round >= 50

    n.start()
    cluster, session = node_factory.connect(n, profile=profile)
    got = read_all(session, session.prepare("SELECT v FROM d.t WHERE k = ?"), list(acked))
    lost = [k for k in acked if got[k] not in sent[k][acked[k]:]]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes lost across a clean shutdown (seed {SEED})"


@pytest.mark.parametrize("mode", ["commit_to_device", "default"])
def test_acknowledged_increments_survive_sigkill(node_factory, mode):
    """Every acknowledged counter increment is counted after a SIGKILL, and nothing more than
    was sent: after the restart each counter lies between its acknowledged increments and those
    plus the ones still in flight at the kill (which may or may not have been counted)."""
    rng = random.Random(SEED + 7)
    n = node_factory(f"counter_{mode}", commit_to_device=mode == "commit_to_device")
    keys = 200
    acked = [0] * keys
    unknown = [0] * keys
    profile = ExecutionProfile(request_timeout=5)
    for round_no in range(2):
        cluster, session = node_factory.connect(n, profile=profile)
        if round_no == 0:
            session.execute("CREATE KEYSPACE dc WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE dc.c (k int PRIMARY KEY, n counter)")
        inc = session.prepare("UPDATE dc.c SET n = n + 1 WHERE k = ?")
        lock = threading.Lock()
        slots = threading.Semaphore(IN_FLIGHT)
        stopped = threading.Event()
        pending = {"n": 0, "acked": 0}

        def done(_rows, k):
            with lock:
                acked[k] += 1
                unknown[k] -= 1
                pending["n"] -= 1
                pending["acked"] += 1
            slots.release()

        def failed(_exc, _k):
            # Counted or not: the increment stays in `unknown`.
            with lock:
                pending["n"] -= 1
            stopped.set()
            slots.release()

        def run():
            while slots.acquire(timeout=10) and not stopped.is_set():
                k = rng.randrange(keys)
                with lock:
                    unknown[k] += 1
                    pending["n"] += 1
                f = session.execute_async(inc, (k,))
                f.add_callbacks(done, failed, callback_args=(k,), errback_args=(k,))

        writer = threading.Thread(target=run, daemon=True)
        writer.start()
        time.sleep(rng.uniform(0.5, 1.5))
        n.kill()
        stopped.set()
        writer.join(30)
        deadline = time.monotonic() + 30
        while pending["n"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pending["n"] == 0, f"{pending['n']} increments never completed or failed"
        cluster.shutdown()
        assert pending["acked"] >= 50, f"round {round_no}: only {pending['acked']} increments acknowledged"

        n.start()
        cluster, session = node_factory.connect(n, profile=profile)
        got = {k: v for k, v in session.execute("SELECT k, n FROM dc.c")}
        wrong = {
            k: (acked[k], acked[k] + unknown[k], got.get(k, 0))
            for k in range(keys)
            if not acked[k] <= got.get(k, 0) <= acked[k] + unknown[k]
        }
        assert not wrong, (
            f"round {round_no} ({mode}, seed {SEED}): {len(wrong)} counters outside [acknowledged, "
            f"sent]; key: (acknowledged, sent, read): {dict(list(wrong.items())[:5])}")
        # What was read is now the count: an increment in flight at the kill is settled.
        for k in range(keys):
            acked[k], unknown[k] = got.get(k, 0), 0
        cluster.shutdown()
