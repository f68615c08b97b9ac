"""Rows larger than a write block, up to what one request can carry (16 MiB frames).

A row must fit in one 1 MiB write block no more: a larger one is written in chunk blocks of its
own under a head record (docs/storage-format.md, "Rows larger than a block"). These tests use the
default configuration, as a user would. The round trips were checked once against Apache
Cassandra 5.0 (HAYATE_REFERENCE); a request larger than the 16 MiB frame limit is refused by both
(Cassandra: "Request is too big"), and the connection keeps serving.
"""

import hashlib
import os
import random
import threading

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import ExecutionProfile

MIB = 1 << 20


def blob(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.fixture
def big(ks):
    ks.session.execute("CREATE TABLE big (k int, c int, a blob, b blob, t text, PRIMARY KEY (k, c))")
    return ks.session


def test_a_15_mib_value_reads_back_whole(big):
    insert = big.prepare("INSERT INTO big (k, c, a) VALUES (?, ?, ?)")
    value = blob(1, 15 * MIB)
    big.execute(insert, (1, 1, value))
    (got,) = big.execute("SELECT a FROM big WHERE k = 1 AND c = 1").one()
    assert len(got) == len(value) and got == value


def test_large_rows_update_delete_and_page(big):
    insert = big.prepare("INSERT INTO big (k, c, a, t) VALUES (?, ?, ?, ?)")
    values = {c: blob(c, (c % 4 + 1) * 2 * MIB) for c in range(6)}
    for c, v in values.items():
        big.execute(insert, (2, c, v, f"row {c}"))
    # One column of a large row changes; the other stays.
    big.execute(big.prepare("UPDATE big SET b = ? WHERE k = 2 AND c = 3"), (blob(99, 3 * MIB),))
    big.execute("UPDATE big SET t = 'changed' WHERE k = 2 AND c = 4")
    # Paging through a partition of large rows, two at a time.
    stmt = big.prepare("SELECT c, a, b, t FROM big WHERE k = 2")
    stmt.fetch_size = 2
    got = {r.c: r for r in big.execute(stmt)}
    assert sorted(got) == list(range(6))
    for c, v in values.items():
        assert got[c].a == v, f"row {c}"
    assert got[3].b == blob(99, 3 * MIB)
    assert got[4].t == "changed" and got[5].t == "row 5"
    # Shrunk below a block, then deleted.
    big.execute("UPDATE big SET a = 0x01 WHERE k = 2 AND c = 0")
    assert big.execute("SELECT a FROM big WHERE k = 2 AND c = 0").one().a == b"\x01"
    big.execute("DELETE FROM big WHERE k = 2 AND c = 1")
    assert big.execute("SELECT a FROM big WHERE k = 2 AND c = 1").one() is None
    assert big.execute("SELECT count(*) FROM big WHERE k = 2").one()[0] == 5


def test_a_request_over_the_frame_limit_is_refused_and_the_node_serves_on(node, ks, big):
    """Incompressible and compressible: the frame itself is too big (Cassandra: "Request is too
    big"), or what it inflates to is (Cassandra: "Rejected an oversized mutation"); both are
    Invalid errors naming the 16 MiB limit, on a connection that keeps serving."""
    cluster, session = node.connect(str(ks))
    try:
        insert = session.prepare("INSERT INTO big (k, c, a) VALUES (?, ?, ?)")
        for value in (blob(4, 17 * MIB), bytes(17 * MIB)):
            with pytest.raises(InvalidRequest) as refused:
                session.execute(insert, (3, 1, value), timeout=30)
            assert "16777216" in str(refused.value), refused.value
            assert session.execute("SELECT a FROM big WHERE k = 3 AND c = 1").one() is None
    finally:
        cluster.shutdown()
    insert = big.prepare("INSERT INTO big (k, c, a) VALUES (?, ?, ?)")
    big.execute(insert, (3, 2, blob(3, 4 * MIB)))
    assert big.execute("SELECT a FROM big WHERE k = 3 AND c = 2").one().a == blob(3, 4 * MIB)
    assert big.execute("SELECT a FROM big WHERE k = 3 AND c = 1").one() is None


def test_acknowledged_large_rows_survive_sigkill(node_factory):
    """Writers keep large rows (1 to 9 MiB) in flight while the node is SIGKILLed; after the
    restart every acknowledged row reads back with exactly what was written last for it."""
    n = node_factory("large_rows_kill")
    profile = ExecutionProfile(request_timeout=30)
    cluster, session = node_factory.connect(n, profile=profile)
    session.execute("CREATE KEYSPACE l WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE l.t (k int PRIMARY KEY, v blob)")
    insert = session.prepare("INSERT INTO l.t (k, v) VALUES (?, ?)")
    # Each key is written by one writer, one write at a time: after the kill a key holds its
    # last acknowledged value, or the one that was in flight after it.
    sent: dict[int, list[bytes]] = {}
    acked: dict[int, int] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(w: int):
        rng = random.Random(w)
        while not stop.is_set():
            k = w * 1000 + rng.randrange(8)
            value = os.urandom(rng.randrange(1, 10) * MIB - rng.randrange(4096))
            with lock:
                sent.setdefault(k, []).append(hashlib.sha256(value).digest())
                index = len(sent[k]) - 1
            try:
                session.execute(insert, (k, value))
            except Exception:
                return
            with lock:
                acked[k] = index

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(3)]
    for t in threads:
        t.start()
    deadline = threading.Event()
    deadline.wait(4)
    n.kill()
    stop.set()
    for t in threads:
        t.join(timeout=60)
    cluster.shutdown()
    assert len(acked) >= 5, f"only {len(acked)} large rows acknowledged before the kill"

    n.start()
    cluster, session = node_factory.connect(n, profile=profile)
    select = session.prepare("SELECT v FROM l.t WHERE k = ?")
    for k, index in sorted(acked.items()):
        row = session.execute(select, (k,)).one()
        assert row is not None, f"acknowledged row {k} lost"
        assert hashlib.sha256(row.v).digest() in sent[k][index:], (
            f"row {k}: neither its last acknowledged value nor the one in flight after it")
