"""What one request costs the node in repeated work, counted by the node itself: a prepared
one-row SELECT computes its partition's token once, compiles no plan per EXECUTE, and finds
its row with one index lookup (when the node reads the row's record ahead through io_uring,
the read takes the entry its read ahead looked up). The token a row is stored under is the
driver's (`Murmur3Token.from_key` of its routing key): in the debug build these tests run,
every storage address asserts that its token is its key's. A prepared INSERT or UPDATE compiles
no plan per EXECUTE either, until a schema change makes it compile once again.

The figures are the node's `/tablestats` document (`node.tokens_computed`,
`node.plans_compiled`, each table's `index_lookups`), read before and after a run of
requests from the real Python driver, on a node of the test's own (ports of its own).
"""

from __future__ import annotations

import json
import struct
import urllib.request

import pytest
from cassandra import ConsistencyLevel
from cassandra.metadata import Murmur3Token

from hayate_node import free_port

READS = 200


def tablestats(node) -> dict:
    url = f"http://{node.host}:{node.metrics_port}/tablestats"
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def counts(node, keyspace: str, table: str) -> tuple[int, int, int]:
    """(tokens computed, plans compiled, the table's index lookups) on the node."""
    doc = tablestats(node)
    ks = next(k for k in doc["keyspaces"] if k["keyspace"] == keyspace)
    t = next(t for t in ks["tables"] if t["table"] == table)
    return doc["node"]["tokens_computed"], doc["node"]["plans_compiled"], t["index_lookups"]


def start(node_factory, io_uring: bool):
    node = node_factory(start=False, metrics_port=free_port())
    if not io_uring:
        text = node.config_path.read_text().replace("[storage]\n", "[storage]\nio_uring = false\n", 1)
        node.config_path.write_text(text)
    node.start()
    _, session = node_factory.connect(node)
    session.execute("CREATE KEYSPACE rc WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE rc.t (k int PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO rc.t (k, v) VALUES (?, ?)")
    for k in range(READS):
        session.execute(insert, (k, f"value {k}"))
    select = session.prepare("SELECT v FROM rc.t WHERE k = ?")
    select.consistency_level = ConsistencyLevel.ONE
    # The first EXECUTE makes the statement's plan.
    assert session.execute(select, (0,)).one().v == "value 0"
    return node, session, select


def run_reads(session, select) -> None:
    for k in range(READS):
        row = session.execute(select, (k,)).one()
        assert row is not None and row.v == f"value {k}", k


@pytest.mark.parametrize("io_uring", [False, True], ids=["blocking-reads", "reads-ahead"])
def test_a_prepared_one_row_read_repeats_no_work(node_factory, io_uring):
    node, session, select = start(node_factory, io_uring)
    tokens_before, plans_before, lookups_before = counts(node, "rc", "t")
    run_reads(session, select)
    tokens, plans, lookups = counts(node, "rc", "t")

    assert plans - plans_before == 0, "an EXECUTE of a prepared SELECT compiled a plan"
    assert tokens - tokens_before == READS, (
        f"{tokens - tokens_before} tokens computed for {READS} one-row reads: one per partition")
    # With reads ahead, the read takes the entry its read ahead looked up.
    per_read = (lookups - lookups_before) / READS
    assert per_read == 1, f"{per_read} index lookups per one-row read"


def test_a_query_compiles_its_plan_each_time_and_a_prepared_one_once(node_factory):
    node, session, select = start(node_factory, io_uring=False)
    _, plans_before, _ = counts(node, "rc", "t")
    for k in range(10):
        assert session.execute(f"SELECT v FROM rc.t WHERE k = {k}").one().v == f"value {k}"
    _, plans_after_queries, _ = counts(node, "rc", "t")
    assert plans_after_queries - plans_before == 10, "an unprepared SELECT is planned per request"

    # A schema change makes a new table, so the prepared statement is planned again once.
    session.execute("ALTER TABLE rc.t ADD w int")
    _, plans_after_alter, _ = counts(node, "rc", "t")
    run_reads(session, select)
    _, plans_after_reads, _ = counts(node, "rc", "t")
    assert plans_after_reads - plans_after_alter == 1, "the ALTER made the statement plan once more"


def test_every_row_is_stored_under_the_drivers_token(node_factory):
    node, session, _ = start(node_factory, io_uring=True)
    rows = list(session.execute("SELECT k, token(k) FROM rc.t"))
    assert len(rows) == READS
    for k, token in rows:
        driver = Murmur3Token.from_key(struct.pack(">i", k)).value
        assert token == driver, f"k={k}: node token {token}, driver token {driver}"
    # The scan above walked the table in token order: the node's order is the driver's.
    tokens = [t for _, t in rows]
    assert tokens == sorted(tokens)

def test_a_prepared_write_compiles_its_plan_once(node_factory):
    node, session, _ = start(node_factory, io_uring=False)
    insert = session.prepare("INSERT INTO rc.t (k, v) VALUES (?, ?)")
    update = session.prepare("UPDATE rc.t SET v = ? WHERE k = ?")
    # The first EXECUTE of each makes its plan.
    session.execute(insert, (0, "first"))
    session.execute(update, ("first", 0))

    _, plans_before, _ = counts(node, "rc", "t")
    for k in range(READS):
        session.execute(insert, (k, f"inserted {k}"))
        session.execute(update, (f"updated {k}", k))
    _, plans, _ = counts(node, "rc", "t")
    assert plans - plans_before == 0, "an EXECUTE of a prepared INSERT or UPDATE compiled a plan"
    assert session.execute(f"SELECT v FROM rc.t WHERE k = {READS - 1}").one().v == f"updated {READS - 1}"

    # A schema change makes a new table: the next EXECUTE of each compiles once, and then no more.
    session.execute("ALTER TABLE rc.t ADD w int")
    _, plans_after_alter, _ = counts(node, "rc", "t")
    session.execute(insert, (0, "after the alter"))
    _, plans_after_insert, _ = counts(node, "rc", "t")
    assert plans_after_insert - plans_after_alter == 1, "the ALTER made the INSERT compile once more"
    session.execute(update, ("after the alter", 1))
    _, plans_after_update, _ = counts(node, "rc", "t")
    assert plans_after_update - plans_after_insert == 1, "the ALTER made the UPDATE compile once more"
    for k in range(10):
        session.execute(insert, (k, "again"))
        session.execute(update, ("again", k))
    _, plans_after_writes, _ = counts(node, "rc", "t")
    assert plans_after_writes == plans_after_update, "a plan made after the ALTER was not kept"
