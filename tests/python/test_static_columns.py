"""Static columns: one value per partition, shown on every row of it.

A static column belongs to the partition, not to a row: writing it through any row (or
through the partition key alone) changes what every row of the partition shows. A partition
whose only content is static shows one row with null clustering columns when a query asks for
whole partitions, and none when the query names rows. Static cells have their own timestamps
and TTLs, and DELETE of a static column or of the whole partition removes them. Every
expectation here was checked once against Apache Cassandra 5.0 (HAYATE_REFERENCE).
"""

import time

import pytest
from cassandra import InvalidRequest
from cassandra.query import SimpleStatement

from conftest import REFERENCE


def rows(session, cql, params=None):
    return [tuple(r) for r in session.execute(cql, params)]


@pytest.fixture
def st(ks):
    ks.session.execute(
        "CREATE TABLE st (k int, c int, s text STATIC, n int STATIC, v int, PRIMARY KEY (k, c))"
    )
    return ks.session


def test_a_static_value_is_shown_on_every_row_of_its_partition(st):
    st.execute("INSERT INTO st (k, c, s, v) VALUES (1, 1, 'a', 10)")
    st.execute("INSERT INTO st (k, c, v) VALUES (1, 2, 20)")
    st.execute("INSERT INTO st (k, c, v) VALUES (2, 1, 30)")
    assert rows(st, "SELECT c, s, v FROM st WHERE k = 1") == [(1, "a", 10), (2, "a", 20)]
    # A write through any row, or through the partition key alone, changes it for all.
    st.execute("UPDATE st SET s = 'b', v = 11 WHERE k = 1 AND c = 1")
    assert rows(st, "SELECT c, s, v FROM st WHERE k = 1") == [(1, "b", 11), (2, "b", 20)]
    st.execute("UPDATE st SET s = 'c' WHERE k = 1")
    assert rows(st, "SELECT c, s FROM st WHERE k = 1 AND c = 2") == [(2, "c")]
    # Another partition is untouched: its static is null.
    assert rows(st, "SELECT c, s, v FROM st WHERE k = 2") == [(1, None, 30)]
    # Selecting only static columns still returns one row per CQL row.
    assert rows(st, "SELECT k, s FROM st WHERE k = 1") == [(1, "c"), (1, "c")]
    # Reverse order shows the statics too.
    assert rows(st, "SELECT c, s FROM st WHERE k = 1 ORDER BY c DESC") == [(2, "c"), (1, "c")]


def test_a_partition_with_only_statics_shows_one_row_with_null_clustering(st):
    st.execute("INSERT INTO st (k, s) VALUES (3, 'only')")
    assert rows(st, "SELECT * FROM st WHERE k = 3") == [(3, None, None, "only", None)]
    assert rows(st, "SELECT k, c, s, v FROM st") == [(3, None, "only", None)]
    # A query that names rows gets none: the static row is not a row.
    assert rows(st, "SELECT * FROM st WHERE k = 3 AND c = 1") == []
    assert rows(st, "SELECT * FROM st WHERE k = 3 AND c > 0") == []
    # Once a row exists, the lone static row gives way to it.
    st.execute("INSERT INTO st (k, c, v) VALUES (3, 5, 50)")
    assert rows(st, "SELECT k, c, s, v FROM st WHERE k = 3") == [(3, 5, "only", 50)]


def test_select_distinct_returns_each_partition_and_its_statics(st):
    st.execute("INSERT INTO st (k, c, s, v) VALUES (1, 1, 'one', 1)")
    st.execute("INSERT INTO st (k, c, s, v) VALUES (1, 2, 'one', 2)")
    st.execute("INSERT INTO st (k, s) VALUES (2, 'two')")
    st.execute("INSERT INTO st (k, c, v) VALUES (3, 1, 3)")
    got = sorted(rows(st, "SELECT DISTINCT k, s FROM st"))
    assert got == [(1, "one"), (2, "two"), (3, None)]
    assert rows(st, "SELECT DISTINCT k, s FROM st WHERE k = 2") == [(2, "two")]
    with pytest.raises(InvalidRequest, match="SELECT DISTINCT queries must only request partition key columns and/or static columns"):
        st.execute("SELECT DISTINCT k, v FROM st")


def test_delete_of_a_static_column_and_of_the_partition(st):
    st.execute("INSERT INTO st (k, c, s, n, v) VALUES (1, 1, 'a', 7, 10)")
    st.execute("DELETE s FROM st WHERE k = 1")
    assert rows(st, "SELECT c, s, n, v FROM st WHERE k = 1") == [(1, None, 7, 10)]
    # A partition of statics only vanishes when they are deleted: the static row has no
    # row marker.
    st.execute("INSERT INTO st (k, s) VALUES (2, 'b')")
    st.execute("DELETE s FROM st WHERE k = 2")
    assert rows(st, "SELECT * FROM st WHERE k = 2") == []
    # Deleting the partition deletes its statics too.
    st.execute("DELETE FROM st WHERE k = 1")
    assert rows(st, "SELECT * FROM st WHERE k = 1") == []
    st.execute("INSERT INTO st (k, c, v) VALUES (1, 1, 10)")
    assert rows(st, "SELECT c, s, n, v FROM st WHERE k = 1") == [(1, None, None, 10)]
    # Deleting one row leaves the statics.
    st.execute("INSERT INTO st (k, c, s, v) VALUES (4, 1, 'kept', 1)")
    st.execute("DELETE FROM st WHERE k = 4 AND c = 1")
    assert rows(st, "SELECT k, c, s FROM st WHERE k = 4") == [(4, None, "kept")]


def test_a_clustering_range_delete_leaves_the_statics(st):
    """A range tombstone covers rows, never the partition's static row, even a range open at its
    start (the static row's key is the empty one, which sorts first); only a partition delete
    removes statics."""
    for c in range(1, 6):
        st.execute("INSERT INTO st (k, c, s, v) VALUES (5, %s, 'kept', %s)", (c, c))
    st.execute("DELETE FROM st WHERE k = 5 AND c < 3")
    assert rows(st, "SELECT c, s FROM st WHERE k = 5") == [(3, "kept"), (4, "kept"), (5, "kept")]
    st.execute("DELETE FROM st WHERE k = 5 AND c >= 3")
    assert rows(st, "SELECT k, c, s FROM st WHERE k = 5") == [(5, None, "kept")]
    st.execute("DELETE FROM st WHERE k = 5")
    assert rows(st, "SELECT k, c, s FROM st WHERE k = 5") == []


def test_writes_that_cassandra_refuses(st):
    cases = [
        ("UPDATE st SET s = 'x' WHERE k = 1 AND c IN (1, 2)",
         "Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns"),
        ("UPDATE st SET v = 1 WHERE k = 1", "Some clustering keys are missing: c"),
        ("DELETE s FROM st WHERE k = 1 AND c = 1",
         "Invalid restrictions on clustering columns since the DELETE statement modifies only static columns"),
        ("INSERT INTO st (k, s, v) VALUES (1, 'q', 1)", "Some clustering keys are missing: c"),
    ]
    for cql, message in cases:
        with pytest.raises(InvalidRequest) as e:
            st.execute(cql)
        if message:
            assert message in str(e.value), cql
    # The node still serves.
    st.execute("INSERT INTO st (k, s) VALUES (1, 'fine')")
    assert rows(st, "SELECT s FROM st WHERE k = 1") == [("fine",)]


def test_tables_that_cassandra_refuses(ks):
    s = ks.session
    with pytest.raises(InvalidRequest, match="Static columns are only useful"):
        s.execute("CREATE TABLE nock (k int PRIMARY KEY, s int STATIC)")
    with pytest.raises(InvalidRequest, match="cannot be part of the PRIMARY KEY"):
        s.execute("CREATE TABLE inkey (k int, c int STATIC, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE plain (k int PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match="Static columns are only useful"):
        s.execute("ALTER TABLE plain ADD s int STATIC")


def test_ttl_and_writetime_of_statics(st):
    st.execute("INSERT INTO st (k, s) VALUES (1, 'short') USING TTL 2 AND TIMESTAMP 1000")
    st.execute("INSERT INTO st (k, c, v) VALUES (1, 1, 10)")
    row = st.execute("SELECT s, writetime(s), ttl(s) FROM st WHERE k = 1").one()
    assert row[0] == "short" and row[1] == 1000 and 1 <= row[2] <= 2
    time.sleep(3)
    assert rows(st, "SELECT c, s, v FROM st WHERE k = 1") == [(1, None, 10)]
    # An expired static-only partition is gone.
    st.execute("INSERT INTO st (k, s) VALUES (2, 'gone') USING TTL 1")
    time.sleep(2)
    assert rows(st, "SELECT * FROM st WHERE k = 2") == []


def test_paging_through_a_partition_and_a_table_with_statics(st):
    for c in range(10):
        st.execute("INSERT INTO st (k, c, v) VALUES (1, %s, %s)", [c, c])
    st.execute("UPDATE st SET s = 'p1' WHERE k = 1")
    for k in (2, 3, 4):
        st.execute("INSERT INTO st (k, s) VALUES (%s, %s)", [k, f"alone{k}"])
    st.execute("INSERT INTO st (k, c, v) VALUES (5, 0, 0)")
    one = SimpleStatement("SELECT c, s, v FROM st WHERE k = 1", fetch_size=3)
    assert [tuple(r) for r in st.execute(one)] == [(c, "p1", c) for c in range(10)]
    for size in (1, 2, 3, 7, 100):
        everything = SimpleStatement("SELECT k, c, s, v FROM st", fetch_size=size)
        got = sorted([tuple(r) for r in st.execute(everything)], key=lambda r: (r[0], r[1] if r[1] is not None else -1))
        want = [(1, c, "p1", c) for c in range(10)] + [(k, None, f"alone{k}", None) for k in (2, 3, 4)] + [
            (5, 0, None, 0)
        ]
        assert got == want, size
        distinct = SimpleStatement("SELECT DISTINCT k, s FROM st", fetch_size=size)
        assert sorted(tuple(r) for r in st.execute(distinct)) == [
            (1, "p1"), (2, "alone2"), (3, "alone3"), (4, "alone4"), (5, None)
        ]
    both = SimpleStatement("SELECT k, c, s FROM st WHERE k IN (1, 2, 5)", fetch_size=4)
    got = [tuple(r) for r in st.execute(both)]
    assert sorted(got, key=lambda r: (r[0], r[1] if r[1] is not None else -1)) == (
        [(1, c, "p1") for c in range(10)] + [(2, None, "alone2"), (5, 0, None)]
    )


def test_static_collections(st):
    st.execute("ALTER TABLE st ADD tags set<text> STATIC")
    st.execute("INSERT INTO st (k, c, tags) VALUES (1, 1, {'a'})")
    st.execute("UPDATE st SET tags = tags + {'b'} WHERE k = 1")
    st.execute("INSERT INTO st (k, c, v) VALUES (1, 2, 2)")
    assert rows(st, "SELECT c, tags FROM st WHERE k = 1") == [(1, {"a", "b"}), (2, {"a", "b"})]
    st.execute("DELETE tags['a'] FROM st WHERE k = 1")
    assert rows(st, "SELECT c, tags FROM st WHERE k = 1 AND c = 2") == [(2, {"b"})]


def test_schema_metadata_and_describe(st, ks, cluster):
    kinds = {
        r.column_name: r.kind
        for r in st.execute(
            "SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'st'",
            [ks.name],
        )
    }
    assert kinds == {"k": "partition_key", "c": "clustering", "s": "static", "n": "static", "v": "regular"}
    cluster.refresh_table_metadata(ks.name, "st")
    table = cluster.metadata.keyspaces[ks.name].tables["st"]
    assert table.columns["s"].is_static and not table.columns["v"].is_static
    assert "s text static" in table.export_as_string()
    described = st.execute(f"DESCRIBE TABLE {ks.name}.st").one().create_statement
    assert "    s text static,\n" in described and "    n int static,\n" in described
    st.execute("ALTER TABLE st ADD s2 int STATIC")
    st.execute("ALTER TABLE st DROP n")
    kinds = {
        r.column_name: r.kind
        for r in st.execute(
            "SELECT column_name, kind FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'st'",
            [ks.name],
        )
    }
    assert kinds["s2"] == "static" and "n" not in kinds


def test_prepared_statements_on_statics(st):
    insert = st.prepare("INSERT INTO st (k, s) VALUES (?, ?)")
    assert [c[2] for c in insert.column_metadata] == ["k", "s"]
    assert insert.routing_key_indexes == [0]
    st.execute(insert, (9, "bound"))
    select = st.prepare("SELECT k, c, s FROM st WHERE k = ?")
    assert [c[2] for c in select.result_metadata] == ["k", "c", "s"]
    assert [tuple(r) for r in st.execute(select, (9,))] == [(9, None, "bound")]
    update = st.prepare("UPDATE st SET s = ? WHERE k = ?")
    st.execute(update, ("again", 9))
    assert [tuple(r) for r in st.execute(select, (9,))] == [(9, None, "again")]


@pytest.mark.skipif(bool(REFERENCE), reason="restarts its own hayate node")
def test_statics_survive_a_restart(node_factory):
    n = node_factory("statics_restart")
    cluster, session = node_factory.connect(n)
    session.execute("CREATE KEYSPACE sr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE sr.t (k int, c int, s text STATIC, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO sr.t (k, c, s, v) VALUES (1, 1, 'kept', 1)")
    session.execute("INSERT INTO sr.t (k, s) VALUES (2, 'alone')")
    cluster.shutdown()
    n.stop()
    n.start()
    cluster, session = node_factory.connect(n)
    assert sorted(tuple(r) for r in session.execute("SELECT k, c, s, v FROM sr.t")) == [
        (1, 1, "kept", 1), (2, None, "alone", None)
    ]
    assert cluster.metadata.keyspaces["sr"].tables["t"].columns["s"].is_static
