"""Secondary indexes on three nodes, replication factor 3: each node indexes the rows it holds,
and a query by an indexed column walks the token ranges at the request's consistency level,
paged, through any coordinator; with a node killed, written past (hints), and started again (its
index is built again from its device, then fed by the hints and by writes).

The answer is checked against a model of the rows written (every write is acknowledged at ALL or
QUORUM before the checks), so a row missing from a page, or given twice, or a stale row fails.
"""

from __future__ import annotations

import random
import time

from cassandra import ConsistencyLevel, ReadFailure
from cassandra.cluster import NoHostAvailable
from cassandra.query import SimpleStatement

from hayate_cluster import running, whitelisted

import pytest

ROWS = 400
VALUES = 7


@pytest.fixture(scope="module")
def three():
    yield from running("indexes")


def labelled(name, index):
    return f'{name}{{keyspace="ix",table="t",index="{index}"}}'


def entries(index):
    return labelled("hayate_index_entries", index)


def by_index(session, where, cl, fetch_size=13, timeout_s=60):
    """`SELECT k, c FROM ix.t WHERE ...` at `cl`, paged; retried while an index is being built
    on some replica (a read failure, as Cassandra's INDEX_NOT_AVAILABLE) or the session
    reconnects."""
    stmt = SimpleStatement(f"SELECT k, c FROM ix.t WHERE {where}", consistency_level=cl, fetch_size=fetch_size)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = [tuple(r) for r in session.execute(stmt)]
            assert len(got) == len(set(got)), f"{where} at {cl}: a row came twice"
            return sorted(got)
        except (ReadFailure, NoHostAvailable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def check(session, model, cl, label):
    for v in range(VALUES):
        want = sorted(key for key, (val, _) in model.items() if val == v)
        assert by_index(session, f"v = {v}", cl) == want, f"{label}: v = {v} at {ConsistencyLevel.value_to_name[cl]}"
    want = sorted(key for key, (_, n) in model.items() if 100 <= n < 200)
    assert by_index(session, "n >= 100 AND n < 200", cl) == want, f"{label}: n range"


def test_index_queries_walk_the_ring_through_a_kill_and_a_restart(three):
    first = three.session()
    first.execute("CREATE KEYSPACE ix WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    first.execute("CREATE TABLE ix.t (k int, c int, v int, n int, PRIMARY KEY (k, c))")
    first.execute("CREATE INDEX ON ix.t (v)")
    first.execute("CREATE INDEX ON ix.t (n) USING 'sai'")
    three.wait_agreement()
    sessions = [whitelisted(three, k) for k in (1, 2, 3)]
    rng = random.Random(11)
    model: dict[tuple[int, int], tuple[int, int]] = {}
    ins = first.prepare("INSERT INTO ix.t (k, c, v, n) VALUES (?, ?, ?, ?)")
    ins.consistency_level = ConsistencyLevel.ALL
    for i in range(ROWS):
        key = (i // 4, i % 4)
        row = (rng.randrange(VALUES), rng.randrange(ROWS))
        first.execute(ins, (*key, *row))
        model[key] = row
    # Every node holds every row (RF 3) and indexes each once.
    for k in (1, 2, 3):
        assert three.node(k).metric(entries("t_v_idx")) == ROWS, f"node {k}"
        assert three.node(k).metric(entries("t_n_idx")) == ROWS, f"node {k}"
    for k, session in enumerate(sessions, start=1):
        for cl in (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM, ConsistencyLevel.ALL):
            check(session, model, cl, f"through node {k}")
    # At ALL every replica answered by its index (not by a scan of the table).
    for k in (1, 2, 3):
        assert three.node(k).metric(labelled("hayate_index_rows_read_total", "t_v_idx")) > 0, f"node {k}"

    # RF 2: each range has its own pair of replicas, so a lookup reads many pieces of the ring
    # (at once, for an index read); pages and limits must still come out in token order.
    first.execute("CREATE KEYSPACE ix2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
    first.execute("CREATE TABLE ix2.t (k int, c int, v int, n int, PRIMARY KEY (k, c))")
    first.execute("CREATE INDEX ON ix2.t (v)")
    three.wait_agreement()
    ins2 = first.prepare("INSERT INTO ix2.t (k, c, v, n) VALUES (?, ?, ?, ?)")
    ins2.consistency_level = ConsistencyLevel.ALL
    for (k, c), (v, n) in model.items():
        first.execute(ins2, (k, c, v, n))
    for k, session in enumerate(sessions, start=1):
        for cl in (ConsistencyLevel.ONE, ConsistencyLevel.ALL):
            for v in range(VALUES):
                want = sorted(key for key, (val, _) in model.items() if val == v)
                for fetch_size in (5, 1000):
                    stmt = SimpleStatement(f"SELECT token(k), k, c FROM ix2.t WHERE v = {v}",
                                           consistency_level=cl, fetch_size=fetch_size)
                    got = [tuple(r) for r in session.execute(stmt)]
                    tokens = [r[0] for r in got]
                    assert tokens == sorted(tokens), f"node {k}, v = {v}: rows out of token order"
                    keys = [r[1:] for r in got]
                    assert len(keys) == len(set(keys)) and sorted(keys) == want, f"node {k}, v = {v}"
                    if fetch_size == 1000:
                        ordered = keys
            # A LIMIT takes the first rows in token order, wherever in the ring they are.
            limited = [tuple(r) for r in session.execute(
                SimpleStatement("SELECT k, c FROM ix2.t WHERE v = 6 LIMIT 3", consistency_level=cl))]
            assert limited == ordered[:3], f"node {k}: LIMIT 3"

    # Node 3 down: QUORUM still answers, and writes go on (node 3 gets them as hints).
    three.kill(3)
    three.wait_seen_down(3, by=[three.node(1), three.node(2)])
    upd = sessions[0].prepare("UPDATE ix.t SET v = ?, n = ? WHERE k = ? AND c = ?")
    upd.consistency_level = ConsistencyLevel.QUORUM
    dele = sessions[0].prepare("DELETE FROM ix.t WHERE k = ? AND c = ?")
    dele.consistency_level = ConsistencyLevel.QUORUM
    for _ in range(150):
        key = rng.choice(sorted(model))
        if rng.random() < 0.2:
            sessions[0].execute(dele, key)
            model.pop(key)
        else:
            row = (rng.randrange(VALUES), rng.randrange(ROWS))
            sessions[0].execute(upd, (*row, *key))
            model[key] = row
    check(sessions[1], model, ConsistencyLevel.QUORUM, "node 3 down")

    # Node 3 back: its index is built again from its device, the hints bring the writes it
    # missed, and it answers alone (at ONE through itself the local replica is enough).
    three.start_node(3)
    three.wait_hints_replayed(60, after="node 3 restarted")
    assert three.node(3).metric(labelled("hayate_index_ready", "t_v_idx")) == 1
    # Built again from the device: at least an entry per live row (hints add stale ones).
    assert three.node(3).metric(entries("t_v_idx")) >= len(model)
    for cl in (ConsistencyLevel.ONE, ConsistencyLevel.ALL):
        check(sessions[2], model, cl, "node 3 restarted")
