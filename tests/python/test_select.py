"""SELECT as applications write it: projections, key restrictions, token ranges, limits, order,
count, and both kinds of bind markers."""

import datetime
import struct

import pytest
from cassandra.metadata import Murmur3Token

import cqlwire

PARTITIONS = 6
ROWS_PER_PARTITION = 5


@pytest.fixture
def t(ks):
    """t(k, c) holds rows k in 0..5, c in 0..4, with v = 'k:c' and n = 10k + c."""
    s = ks.session
    s.execute("CREATE TABLE t (k int, c int, v text, n int, PRIMARY KEY (k, c))")
    insert = s.prepare("INSERT INTO t (k, c, v, n) VALUES (?, ?, ?, ?)")
    for k in range(PARTITIONS):
        for c in range(ROWS_PER_PARTITION):
            s.execute(insert, (k, c, f"{k}:{c}", 10 * k + c))
    return s


def token_of_int(k: int) -> int:
    """The Murmur3 token Cassandra gives an int partition key (its 4 big-endian bytes)."""
    return Murmur3Token.from_key(struct.pack(">i", k)).value


def test_column_list_and_star(t):
    row = t.execute("SELECT n, v FROM t WHERE k = 1 AND c = 2").one()
    assert row._fields == ("n", "v")
    assert tuple(row) == (12, "1:2")
    row = t.execute("SELECT * FROM t WHERE k = 1 AND c = 2").one()
    assert row._fields == ("k", "c", "n", "v"), "SELECT * lists key columns first, then the rest by name"


def test_aliases_name_the_result_columns(t):
    row = t.execute("SELECT v AS label, n AS number, writetime(v) AS wt FROM t WHERE k = 1 AND c = 2").one()
    assert row._fields == ("label", "number", "wt")
    assert (row.label, row.number) == ("1:2", 12)


def test_partition_key_equality_and_in(t):
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 3")] == [0, 1, 2, 3, 4]
    got = [(r.k, r.c) for r in t.execute("SELECT k, c FROM t WHERE k IN (4, 1, 99) AND c = 0")]
    assert sorted(got) == [(1, 0), (4, 0)]
    assert len(list(t.execute("SELECT * FROM t WHERE k IN (0, 2)"))) == 2 * ROWS_PER_PARTITION


def test_clustering_ranges(t):
    def cs(where):
        return [r.c for r in t.execute(f"SELECT c FROM t WHERE k = 2 AND {where}")]

    assert cs("c > 1") == [2, 3, 4]
    assert cs("c >= 1 AND c < 3") == [1, 2]
    assert cs("c <= 1") == [0, 1]
    assert cs("c > 4") == []
    assert cs("c IN (3, 0)") == [0, 3]


def test_token_of_a_key_is_cassandras_murmur3(t):
    """Token-aware drivers hash keys themselves; the server must agree byte for byte."""
    for k in (0, 1, 5, -1):
        t.execute("INSERT INTO t (k, c, v) VALUES (%s, 0, 'x')", [k])
        assert t.execute("SELECT token(k) FROM t WHERE k = %s", [k]).one()[0] == token_of_int(k)


def test_full_scan_is_in_token_order(t):
    got = [r.k for r in t.execute("SELECT DISTINCT k FROM t")]
    assert got == sorted(range(PARTITIONS), key=token_of_int)
    tokens = [r[0] for r in t.execute("SELECT token(k) FROM t")]
    assert tokens == sorted(tokens)
    assert len(tokens) == PARTITIONS * ROWS_PER_PARTITION


def test_token_ranges_split_the_table(t):
    """Spark-style and YCSB-style scans: `token(k) > a AND token(k) <= b` over split points."""
    keys_by_token = sorted(range(PARTITIONS), key=token_of_int)
    middle = token_of_int(keys_by_token[2])
    low = [r.k for r in t.execute("SELECT DISTINCT k FROM t WHERE token(k) <= %s", [middle])]
    high = [r.k for r in t.execute("SELECT DISTINCT k FROM t WHERE token(k) > %s", [middle])]
    assert low == keys_by_token[:3]
    assert high == keys_by_token[3:]
    # The form YCSB's scan uses: a start key, a token bound and a LIMIT.
    got = [r.k for r in t.execute("SELECT k FROM t WHERE token(k) >= token(%s) LIMIT 7", [keys_by_token[1]])]
    assert got == [keys_by_token[1]] * 5 + [keys_by_token[2]] * 2


def test_limit_and_per_partition_limit(t):
    assert len(list(t.execute("SELECT * FROM t LIMIT 7"))) == 7
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 1 LIMIT 2")] == [0, 1]
    got = [(r.k, r.c) for r in t.execute("SELECT k, c FROM t PER PARTITION LIMIT 2")]
    assert len(got) == 2 * PARTITIONS
    assert all(c in (0, 1) for _, c in got)
    got = list(t.execute("SELECT k, c FROM t PER PARTITION LIMIT 1 LIMIT 3"))
    assert len(got) == 3 and len({r.k for r in got}) == 3


def test_order_by_desc_reverses_clustering(t):
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 4 ORDER BY c DESC")] == [4, 3, 2, 1, 0]
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 4 AND c < 3 ORDER BY c DESC LIMIT 2")] == [2, 1]
    assert [r.c for r in t.execute("SELECT c FROM t WHERE k = 4 ORDER BY c ASC")] == [0, 1, 2, 3, 4]


def test_count_star(t):
    row = t.execute("SELECT count(*) FROM t").one()
    assert row._fields == ("count",)
    assert row.count == PARTITIONS * ROWS_PER_PARTITION
    assert t.execute("SELECT COUNT(*) FROM t WHERE k = 2 AND c > 1").one()[0] == 3
    assert t.execute("SELECT count(*) FROM t WHERE k = 999").one()[0] == 0


def test_select_on_missing_partition_is_empty(t):
    assert list(t.execute("SELECT * FROM t WHERE k = 12345")) == []
    assert list(t.execute("SELECT * FROM t WHERE k = 1 AND c = 99")) == []


def test_positional_bind_markers(t):
    stmt = t.prepare("SELECT v FROM t WHERE k = ? AND c >= ? AND c < ? LIMIT ?")
    assert [r.v for r in t.execute(stmt, (3, 1, 4, 2))] == ["3:1", "3:2"]
    assert [r.v for r in t.execute(stmt, (3, 0, 10, 10))] == [f"3:{c}" for c in range(5)]


def test_named_bind_markers(t):
    stmt = t.prepare("SELECT v FROM t WHERE k = :key AND c = :col")
    assert t.execute(stmt, {"col": 2, "key": 5}).one().v == "5:2"
    update = t.prepare("UPDATE t SET v = :value WHERE k = :key AND c = :col")
    t.execute(update, {"value": "named", "key": 5, "col": 2})
    assert t.execute(stmt, {"key": 5, "col": 2}).one().v == "named"


def test_bind_markers_in_a_simple_statement(t, ks, node):
    """QUERY with `?` and values, no PREPARE: what the Java drivers send for a SimpleStatement
    with values. (The Python driver interpolates values into the text itself, so this test
    writes the frame by hand.)"""
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert conn.startup().opcode == cqlwire.READY
        reply = conn.query(f"SELECT v, n FROM {ks.name}.t WHERE k = ? AND c = ?",
                           [struct.pack(">i", 3), struct.pack(">i", 4)])
        assert reply.opcode == cqlwire.RESULT, reply
        names, rows = cqlwire.parse_rows(reply.body)
    assert names == ["v", "n"]
    assert rows == [[b"3:4", struct.pack(">i", 34)]]


def test_in_with_bind_marker_list(t):
    stmt = t.prepare("SELECT k, c FROM t WHERE k IN ? AND c = ?")
    assert sorted((r.k, r.c) for r in t.execute(stmt, ([0, 5], 3))) == [(0, 3), (5, 3)]


def test_multi_column_clustering_slice(ks):
    """`(c1, c2) > (a, b)`: how applications page by hand through compound clustering keys."""
    s = ks.session
    s.execute("CREATE TABLE m (k int, c1 int, c2 int, PRIMARY KEY (k, c1, c2))")
    for c1 in range(3):
        for c2 in range(3):
            s.execute("INSERT INTO m (k, c1, c2) VALUES (1, %s, %s)", [c1, c2])
    got = [(r.c1, r.c2) for r in s.execute("SELECT c1, c2 FROM m WHERE k = 1 AND (c1, c2) > (0, 1) AND (c1, c2) <= (2, 0)")]
    assert got == [(0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    got = [(r.c1, r.c2) for r in s.execute("SELECT c1, c2 FROM m WHERE k = 1 AND c1 = 1 AND c2 IN (2, 0)")]
    assert got == [(1, 0), (1, 2)]


def test_allow_filtering_on_a_regular_column(t):
    got = sorted((r.k, r.c) for r in t.execute("SELECT k, c FROM t WHERE n = 23 ALLOW FILTERING"))
    assert got == [(2, 3)]
    got = [r.c for r in t.execute("SELECT c FROM t WHERE k = 1 AND n > 12 ALLOW FILTERING")]
    assert got == [3, 4]


def test_aggregates(t):
    row = t.execute("SELECT min(n), max(n), sum(n), avg(n), count(n) FROM t WHERE k = 2").one()
    assert tuple(row) == (20, 24, 110, 22, 5)


def test_functions_in_select_and_insert(ks):
    s = ks.session
    s.execute("CREATE TABLE f (k uuid PRIMARY KEY, at timestamp, id timeuuid, b blob)")
    s.execute("INSERT INTO f (k, at, id, b) VALUES (uuid(), toTimestamp(now()), now(), textAsBlob('hi'))")
    row = s.execute("SELECT k, at, id, blobAsText(b) AS text, toUnixTimestamp(at) AS ms FROM f").one()
    assert row.k.version == 4 and row.id.version == 1
    assert row.text == "hi"
    assert row.ms == int(row.at.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def test_request_with_tracing_flag_is_answered(t):
    """A driver asking for tracing (flag 0x02) must still get its rows."""
    result = t.execute("SELECT v FROM t WHERE k = 1 AND c = 1", trace=True)
    assert [r.v for r in result] == ["1:1"]


def test_in_returns_partitions_in_key_order_not_token_order(ks):
    """Cassandra 5.0 answers an IN on the partition key in the order of the keys' values
    (component by component, each by its type), whatever their tokens and the IN's order."""
    s = ks.session
    s.execute("CREATE TABLE ti (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE tt (k text PRIMARY KEY, v int)")
    s.execute("CREATE TABLE tc (a int, b int, v int, PRIMARY KEY ((a, b)))")
    for k in (9, 10, 1, -3):
        s.execute("INSERT INTO ti (k, v) VALUES (%s, 0)", (k,))
    for k in ("b", "a", "ab", "B"):
        s.execute("INSERT INTO tt (k, v) VALUES (%s, 0)", (k,))
    for a, b in ((2, 1), (1, 2), (1, 1), (-1, 5)):
        s.execute("INSERT INTO tc (a, b, v) VALUES (%s, %s, 0)", (a, b))
    assert [r.k for r in s.execute("SELECT k FROM ti WHERE k IN (10, 9, 1, -3, 9)")] == [-3, 1, 9, 10]
    assert [r.k for r in s.execute("SELECT k FROM tt WHERE k IN ('b', 'ab', 'a', 'B')")] == ["B", "a", "ab", "b"]
    assert [tuple(r) for r in s.execute("SELECT a, b FROM tc WHERE a IN (2, 1, -1) AND b IN (5, 2, 1)")] == [
        (-1, 5), (1, 1), (1, 2), (2, 1)]
    # Paged one row at a time, the order holds across pages.
    from cassandra.query import SimpleStatement

    paged = SimpleStatement("SELECT k FROM ti WHERE k IN (10, 9, 1, -3)", fetch_size=1)
    assert [r.k for r in s.execute(paged)] == [-3, 1, 9, 10]
