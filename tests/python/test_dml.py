"""Writes: INSERT, UPDATE, DELETE, TTL, client timestamps and batches, with Cassandra's semantics.

Cassandra's rules that applications rely on, and that a row-rewriting engine could easily get
wrong: every cell carries its own timestamp and the newer one wins (even if it arrives first);
an INSERT creates the row (a row marker) but an UPDATE only sets cells, so a row kept alive only
by updated cells disappears when they are deleted; a TTL applies per cell.
"""

import time

import pytest
from cassandra import InvalidRequest
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from conftest import REFERENCE


@pytest.fixture
def t(ks):
    ks.session.execute("CREATE TABLE t (k int, c int, v text, n int, PRIMARY KEY (k, c))")
    return ks.session


def rows(session, cql, params=None):
    return [tuple(r) for r in session.execute(cql, params)]


def test_insert_then_select(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'one', 10)")
    assert rows(t, "SELECT k, c, v, n FROM t WHERE k = 1") == [(1, 1, "one", 10)]


def test_insert_overwrites_only_the_columns_it_names(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'one', 10)")
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'uno')")
    assert rows(t, "SELECT v, n FROM t WHERE k = 1 AND c = 1") == [("uno", 10)]


def test_update_creates_and_modifies_rows(t):
    t.execute("UPDATE t SET v = 'made by update' WHERE k = 2 AND c = 1")
    assert rows(t, "SELECT v, n FROM t WHERE k = 2 AND c = 1") == [("made by update", None)]
    t.execute("UPDATE t SET n = 5, v = 'changed' WHERE k = 2 AND c = 1")
    assert rows(t, "SELECT v, n FROM t WHERE k = 2 AND c = 1") == [("changed", 5)]


def test_delete_whole_row(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'a')")
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 2, 'b')")
    t.execute("DELETE FROM t WHERE k = 1 AND c = 1")
    assert rows(t, "SELECT c, v FROM t WHERE k = 1") == [(2, "b")]


def test_delete_whole_partition(t):
    for c in range(5):
        t.execute("INSERT INTO t (k, c, v) VALUES (1, %s, 'x')", [c])
    t.execute("INSERT INTO t (k, c, v) VALUES (2, 0, 'kept')")
    t.execute("DELETE FROM t WHERE k = 1")
    assert rows(t, "SELECT * FROM t WHERE k = 1") == []
    assert rows(t, "SELECT v FROM t WHERE k = 2") == [("kept",)]


def test_delete_single_columns_keeps_an_inserted_row(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'a', 1)")
    t.execute("DELETE v, n FROM t WHERE k = 1 AND c = 1")
    # The INSERT's row marker keeps the row alive with its columns null.
    assert rows(t, "SELECT k, c, v, n FROM t WHERE k = 1") == [(1, 1, None, None)]


def test_row_made_by_update_vanishes_when_its_cells_are_deleted(t):
    t.execute("UPDATE t SET v = 'only cell' WHERE k = 3 AND c = 1")
    t.execute("DELETE v FROM t WHERE k = 3 AND c = 1")
    # No row marker (UPDATE writes none) and no live cell: Cassandra returns no row at all.
    assert rows(t, "SELECT * FROM t WHERE k = 3") == []


def test_setting_a_column_to_null_deletes_the_cell(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'a', 1)")
    t.execute("UPDATE t SET v = null WHERE k = 1 AND c = 1")
    assert rows(t, "SELECT v, n FROM t WHERE k = 1 AND c = 1") == [(None, 1)]


def test_delete_clustering_range(t):
    for c in range(8):
        t.execute("INSERT INTO t (k, c, v) VALUES (1, %s, 'x')", [c])
    t.execute("DELETE FROM t WHERE k = 1 AND c > 2 AND c < 5")
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 1")] == [0, 1, 2, 5, 6, 7]
    t.execute("DELETE FROM t WHERE k = 1 AND c >= 6")
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 1")] == [0, 1, 2, 5]
    # A range tombstone shadows only older writes: a row written after it is visible.
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 3, 'after')")
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 1")] == [0, 1, 2, 3, 5]


def test_insert_with_ttl_expires(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'short', 1) USING TTL 2")
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 2, 'forever', 2)")
    ttl = t.execute("SELECT ttl(v) FROM t WHERE k = 1 AND c = 1").one()[0]
    assert 1 <= ttl <= 2, f"ttl(v) should count down from 2, got {ttl}"
    assert t.execute("SELECT ttl(v) FROM t WHERE k = 1 AND c = 2").one()[0] is None
    time.sleep(3)
    # The whole row expires: its row marker had the TTL too.
    assert rows(t, "SELECT c, v FROM t WHERE k = 1") == [(2, "forever")]


def test_update_with_ttl_expires_only_that_cell(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'stays', 7)")
    t.execute("UPDATE t USING TTL 2 SET v = 'goes' WHERE k = 1 AND c = 1")
    assert 1 <= t.execute("SELECT ttl(v) FROM t WHERE k = 1 AND c = 1").one()[0] <= 2
    time.sleep(3)
    assert rows(t, "SELECT k, c, v, n FROM t WHERE k = 1") == [(1, 1, None, 7)]


def test_table_default_ttl_applies_when_none_given(ks):
    ks.session.execute("CREATE TABLE d (k int PRIMARY KEY, v int) WITH default_time_to_live = 2")
    ks.session.execute("INSERT INTO d (k, v) VALUES (1, 1)")
    ks.session.execute("INSERT INTO d (k, v) VALUES (2, 2) USING TTL 0")  # TTL 0: never expires
    assert 1 <= ks.session.execute("SELECT ttl(v) FROM d WHERE k = 1").one()[0] <= 2
    time.sleep(3)
    assert rows(ks.session, "SELECT k FROM d") == [(2,)]


def test_older_timestamp_loses(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'newer') USING TIMESTAMP 2000")
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'older') USING TIMESTAMP 1000")
    row = t.execute("SELECT v, writetime(v) FROM t WHERE k = 1 AND c = 1").one()
    assert tuple(row) == ("newer", 2000)


def test_delete_with_older_timestamp_does_not_delete(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'survives') USING TIMESTAMP 2000")
    t.execute("DELETE FROM t USING TIMESTAMP 1000 WHERE k = 1 AND c = 1")
    assert rows(t, "SELECT v FROM t WHERE k = 1") == [("survives",)]
    t.execute("DELETE FROM t USING TIMESTAMP 3000 WHERE k = 1 AND c = 1")
    assert rows(t, "SELECT v FROM t WHERE k = 1") == []
    # A later write with an older timestamp than the tombstone stays shadowed.
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'too old') USING TIMESTAMP 2500")
    assert rows(t, "SELECT v FROM t WHERE k = 1") == []


def test_timestamps_are_per_cell(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (1, 1, 'a', 1) USING TIMESTAMP 100")
    t.execute("UPDATE t USING TIMESTAMP 200 SET v = 'b' WHERE k = 1 AND c = 1")
    t.execute("UPDATE t USING TIMESTAMP 50 SET n = 99 WHERE k = 1 AND c = 1")
    row = t.execute("SELECT v, writetime(v), n, writetime(n) FROM t WHERE k = 1 AND c = 1").one()
    assert tuple(row) == ("b", 200, 1, 100)


def test_writetime_defaults_to_now_in_microseconds(t):
    before_us = int(time.time() * 1e6)
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'x')")
    after_us = int(time.time() * 1e6)
    wt = t.execute("SELECT writetime(v) FROM t WHERE k = 1 AND c = 1").one()[0]
    # The Python driver sends a client timestamp with each request (protocol v3+), so it is ours.
    assert before_us - 1_000_000 <= wt <= after_us + 1_000_000


def test_logged_batch_in_cql_text(t):
    t.execute("""
        BEGIN BATCH
          INSERT INTO t (k, c, v) VALUES (1, 1, 'a');
          INSERT INTO t (k, c, v) VALUES (2, 1, 'b');
          UPDATE t SET n = 5 WHERE k = 1 AND c = 1;
          DELETE FROM t WHERE k = 3 AND c = 1;
        APPLY BATCH
    """)
    assert rows(t, "SELECT k, c, v, n FROM t WHERE k IN (1, 2)") == [(1, 1, "a", 5), (2, 1, "b", None)]


def test_unlogged_batch_with_timestamp(t):
    t.execute("""
        BEGIN UNLOGGED BATCH USING TIMESTAMP 5000
          INSERT INTO t (k, c, v) VALUES (1, 1, 'a');
          INSERT INTO t (k, c, v) VALUES (1, 2, 'b');
        APPLY BATCH
    """)
    got = rows(t, "SELECT c, v, writetime(v) FROM t WHERE k = 1")
    assert got == [(1, "a", 5000), (2, "b", 5000)]


@pytest.mark.parametrize("batch_type", [BatchType.LOGGED, BatchType.UNLOGGED])
def test_batch_message_mixes_prepared_and_simple(t, batch_type):
    """The BATCH opcode (not BEGIN BATCH text), as drivers send `BatchStatement`."""
    insert = t.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?)")
    batch = BatchStatement(batch_type=batch_type)
    for c in range(10):
        batch.add(insert, (7, c, f"p{c}"))
    batch.add(SimpleStatement("UPDATE t SET n = %s WHERE k = %s AND c = %s"), (42, 7, 3))
    batch.add(SimpleStatement("DELETE FROM t WHERE k = 7 AND c = 9"))
    t.execute(batch)
    got = rows(t, "SELECT c, v, n FROM t WHERE k = 7")
    assert got == [(c, f"p{c}", 42 if c == 3 else None) for c in range(9)]


def test_batch_statements_share_one_timestamp(t):
    """All statements of a batch get the same timestamp, so a later delete in it wins over an
    insert of the same cell in it only by Cassandra's tie-break (a tombstone beats a value)."""
    t.execute("""
        BEGIN BATCH
          INSERT INTO t (k, c, v) VALUES (9, 1, 'written');
          DELETE v FROM t WHERE k = 9 AND c = 1;
        APPLY BATCH
    """)
    assert rows(t, "SELECT v FROM t WHERE k = 9 AND c = 1") == [(None,)]


def test_static_columns_are_shared_by_the_partition(ks):
    s = ks.session
    s.execute("CREATE TABLE st (k int, c int, owner text STATIC, v int, PRIMARY KEY (k, c))")
    s.execute("INSERT INTO st (k, c, owner, v) VALUES (1, 1, 'ann', 10)")
    s.execute("INSERT INTO st (k, c, v) VALUES (1, 2, 20)")
    s.execute("UPDATE st SET owner = 'bob' WHERE k = 1")
    assert rows(s, "SELECT c, owner, v FROM st WHERE k = 1") == [(1, "bob", 10), (2, "bob", 20)]
    # A partition with only its static column set still shows one row, clustering null.
    s.execute("INSERT INTO st (k, owner) VALUES (2, 'cy')")
    assert rows(s, "SELECT k, c, owner, v FROM st WHERE k = 2") == [(2, None, "cy", None)]
    assert rows(s, "SELECT DISTINCT k, owner FROM st") in ([(1, "bob"), (2, "cy")], [(2, "cy"), (1, "bob")])


def test_ttl_and_timestamp_as_bind_markers(t):
    """Drivers bind `USING TTL ? AND TIMESTAMP ?` like any other value."""
    insert = t.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?")
    t.execute(insert, (1, 1, "bound", 1000, 123456))
    row = t.execute("SELECT v, ttl(v), writetime(v) FROM t WHERE k = 1 AND c = 1").one()
    assert row[0] == "bound" and 990 <= row[1] <= 1000 and row[2] == 123456
    update = t.prepare("UPDATE t USING TTL ? SET n = ? WHERE k = ? AND c = ?")
    t.execute(update, (2, 5, 1, 1))
    time.sleep(3)
    assert rows(t, "SELECT v, n FROM t WHERE k = 1 AND c = 1") == [("bound", None)]


def test_delete_then_reinsert_with_newer_timestamp(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'first')")
    t.execute("DELETE FROM t WHERE k = 1")
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'second')")
    assert rows(t, "SELECT v FROM t WHERE k = 1") == [("second",)]
