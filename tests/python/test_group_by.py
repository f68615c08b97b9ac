"""SELECT ... GROUP BY: groups on the partition key and clustering prefixes, their aggregates,
the first row's value for the other selectors, and paging, LIMIT and PER PARTITION LIMIT counted
in groups. Every expectation here was checked once against Apache Cassandra 5.0
(HAYATE_REFERENCE), which pages by groups and never splits a group across pages."""

import pytest
from cassandra import InvalidRequest
from cassandra.query import SimpleStatement


@pytest.fixture
def g(ks):
    """g((a, b), c, d): partitions (a, b) in {0,1}², each with c in 0..2 and d in 0..1;
    v = 100a + 10b + 2c + d and t = 't<c><d>'."""
    s = ks.session
    s.execute("CREATE TABLE g (a int, b int, c int, d int, v int, t text, PRIMARY KEY ((a, b), c, d))")
    insert = s.prepare("INSERT INTO g (a, b, c, d, v, t) VALUES (?, ?, ?, ?, ?, ?)")
    for a in range(2):
        for b in range(2):
            for c in range(3):
                for d in range(2):
                    s.execute(insert, (a, b, c, d, 100 * a + 10 * b + 2 * c + d, f"t{c}{d}"))
    return s


def rows(session, query, params=None):
    return [tuple(r) for r in session.execute(query, params)]


def pages(session, query, fetch_size):
    """Every page of a query, as lists of tuples, without the empty last page a server may
    send when it could not know that nothing was left."""
    rs = session.execute(SimpleStatement(query, fetch_size=fetch_size))
    out = []
    while True:
        out.append([tuple(r) for r in rs.current_rows])
        if not rs.has_more_pages:
            break
        rs.fetch_next_page()
    while out and not out[-1]:
        out.pop()
    return out


def sorted_by_key(result):
    """Rows in (a, b) order, since partitions come back in token order."""
    return sorted(result, key=lambda r: r[:2])


def test_group_by_partition_key_counts_each_partition(g):
    got = rows(g, "SELECT a, b, count(*) FROM g GROUP BY a, b")
    assert sorted_by_key(got) == [(0, 0, 6), (0, 1, 6), (1, 0, 6), (1, 1, 6)]


def test_group_by_clustering_prefix_runs_every_aggregate(g):
    rs = g.execute("SELECT a, b, c, count(*), sum(v), max(v), min(t), avg(v), count(v) FROM g GROUP BY a, b, c")
    assert rs.column_names == [
        "a", "b", "c", "count", "system.sum(v)", "system.max(v)", "system.min(t)", "system.avg(v)", "system.count(v)",
    ]
    got = sorted_by_key([tuple(r) for r in rs])
    expected = []
    for a in range(2):
        for b in range(2):
            for c in range(3):
                base = 100 * a + 10 * b + 2 * c
                expected.append((a, b, c, 2, 2 * base + 1, base + 1, f"t{c}0", base, 2))
    assert got == expected


def test_non_aggregated_columns_show_the_first_row_of_each_group(g):
    got = sorted_by_key(rows(g, "SELECT a, b, c, d, v, t, count(*) FROM g GROUP BY a, b, c"))
    assert got[0] == (0, 0, 0, 0, 0, "t00", 2)
    assert got[-1] == (1, 1, 2, 0, 114, "t20", 2)
    assert all(r[3] == 0 for r in got), "d of a group's first row is its smallest"
    # Without any aggregate, GROUP BY returns each group's first row.
    plain = sorted_by_key(rows(g, "SELECT a, b, c, d, v FROM g GROUP BY a, b, c"))
    assert plain == [r[:5] for r in got]


def test_group_follows_the_clustering_order_asked(g):
    assert rows(g, "SELECT c, d, count(*) FROM g WHERE a = 0 AND b = 1 GROUP BY c") == [
        (0, 0, 2), (1, 0, 2), (2, 0, 2),
    ]
    # In reverse order the first row of each group is its last in clustering order.
    assert rows(g, "SELECT c, d, count(*) FROM g WHERE a = 0 AND b = 1 GROUP BY c ORDER BY c DESC") == [
        (2, 1, 2), (1, 1, 2), (0, 1, 2),
    ]


def test_columns_restricted_by_equality_may_be_left_out(g):
    # a and b are fixed by the WHERE clause, so grouping may start at c; c fixed, at d.
    assert rows(g, "SELECT c, count(*) FROM g WHERE a = 0 AND b = 1 GROUP BY c") == [(0, 2), (1, 2), (2, 2)]
    assert rows(g, "SELECT c, count(*) FROM g WHERE a = 0 AND b = 1 GROUP BY a, b, c") == [
        (0, 2), (1, 2), (2, 2),
    ]
    assert rows(g, "SELECT c, d, count(*) FROM g WHERE a = 0 AND b = 0 AND c = 1 GROUP BY d") == [
        (1, 0, 1), (1, 1, 1),
    ]
    assert rows(g, "SELECT c, count(*) FROM g WHERE a = 0 AND b = 0 AND c > 0 GROUP BY c") == [(1, 2), (2, 2)]


def test_limit_counts_groups(g):
    got = rows(g, "SELECT a, b, c, count(*) FROM g WHERE a = 0 AND b = 0 GROUP BY c LIMIT 2")
    assert got == [(0, 0, 0, 2), (0, 0, 1, 2)]
    got = rows(g, "SELECT a, b, c, d, count(*) FROM g WHERE a = 1 AND b = 1 GROUP BY c, d LIMIT 3")
    assert got == [(1, 1, 0, 0, 1), (1, 1, 0, 1, 1), (1, 1, 1, 0, 1)]
    assert len(rows(g, "SELECT a, b, c, count(*) FROM g GROUP BY a, b, c LIMIT 5")) == 5


def test_per_partition_limit_counts_groups(g):
    got = sorted_by_key(rows(g, "SELECT a, b, c, count(*) FROM g GROUP BY a, b, c PER PARTITION LIMIT 2"))
    assert got == [(a, b, c, 2) for a in range(2) for b in range(2) for c in range(2)]
    got = rows(g, "SELECT a, b, c, count(*) FROM g GROUP BY a, b, c PER PARTITION LIMIT 1 LIMIT 3")
    assert len(got) == 3 and all(r[2] == 0 for r in got)


def test_paging_never_splits_or_repeats_a_group(g):
    full = rows(g, "SELECT a, b, c, count(*), sum(v) FROM g GROUP BY a, b, c")
    assert len(full) == 12
    for fetch in (1, 2, 5):
        got = pages(g, "SELECT a, b, c, count(*), sum(v) FROM g GROUP BY a, b, c", fetch)
        assert all(len(p) <= fetch for p in got), f"page size {fetch} counts groups"
        assert all(len(p) == fetch for p in got[:-1])
        assert [r for p in got for r in p] == full, f"page size {fetch}"
    # One group per page, each a whole partition.
    got = pages(g, "SELECT a, b, count(*), sum(v) FROM g GROUP BY a, b", 1)
    assert sorted_by_key([p[0] for p in got]) == [(0, 0, 6, 15), (0, 1, 6, 75), (1, 0, 6, 615), (1, 1, 6, 675)]


def test_paging_with_limit_and_per_partition_limit(g):
    got = pages(g, "SELECT a, b, c, count(*) FROM g GROUP BY a, b, c LIMIT 5", 2)
    assert [len(p) for p in got] == [2, 2, 1]
    assert [r for p in got for r in p] == rows(g, "SELECT a, b, c, count(*) FROM g GROUP BY a, b, c LIMIT 5")
    got = pages(g, "SELECT a, b, c, count(*) FROM g GROUP BY a, b, c PER PARTITION LIMIT 1", 3)
    assert [len(p) for p in got] == [3, 1]
    assert sorted_by_key([r for p in got for r in p]) == [(a, b, 0, 2) for a in range(2) for b in range(2)]


def test_paging_within_named_partitions(g):
    q = "SELECT a, b, c, count(*) FROM g WHERE a = 0 AND b IN (0, 1) GROUP BY a, b, c"
    got = pages(g, q, 2)
    assert [r for p in got for r in p] == [(0, b, c, 2) for b in range(2) for c in range(3)]
    assert [len(p) for p in got] == [2, 2, 2]
    got = pages(g, "SELECT c, count(*) FROM g WHERE a = 0 AND b = 0 GROUP BY c", 1)
    assert got == [[(0, 2)], [(1, 2)], [(2, 2)]]


def test_prepared_group_by_with_bound_limit(g):
    stmt = g.prepare("SELECT c, count(*), max(v) FROM g WHERE a = ? AND b = ? GROUP BY c LIMIT ?")
    assert [tuple(r) for r in g.execute(stmt, (1, 0, 2))] == [(0, 2, 101), (1, 2, 103)]


def test_filtering_happens_before_grouping(g):
    got = sorted_by_key(rows(g, "SELECT a, b, avg(v), count(v) FROM g WHERE v > 10 GROUP BY a, b ALLOW FILTERING"))
    assert got == [(0, 1, 13, 5), (1, 0, 102, 6), (1, 1, 112, 6)]


def test_groups_with_no_rows_return_nothing(g):
    assert rows(g, "SELECT a, b, count(*) FROM g WHERE a = 5 AND b = 5 GROUP BY a, b") == []
    # Without GROUP BY, an aggregate returns its one row even over no rows.
    assert rows(g, "SELECT a, b, count(*) FROM g WHERE a = 5 AND b = 5") == [(None, None, 0)]


def test_aggregates_beside_columns_without_group_by(g):
    got = rows(g, "SELECT c, d, count(*), max(v) FROM g WHERE a = 1 AND b = 1")
    assert got == [(0, 0, 6, 115)]
    # LIMIT applies to the result rows, of which an aggregate without GROUP BY has one.
    assert rows(g, "SELECT count(*) FROM g LIMIT 2") == [(24,)]


def test_aggregates_without_group_by_refuse_per_partition_limit(g):
    with pytest.raises(InvalidRequest) as e:
        g.execute("SELECT count(*) FROM g PER PARTITION LIMIT 1")
    assert "PER PARTITION LIMIT is not allowed with aggregate queries." in str(e.value)


def test_distinct_aggregates_count_partitions(g):
    assert rows(g, "SELECT DISTINCT a, b, count(*) FROM g")[0][2] == 4


def test_distinct_groups_by_partition(g):
    assert sorted_by_key(rows(g, "SELECT DISTINCT a, b FROM g GROUP BY a, b")) == [
        (0, 0), (0, 1), (1, 0), (1, 1),
    ]


@pytest.mark.parametrize(
    "query, message",
    [
        ("SELECT a, count(*) FROM g GROUP BY a", "Group by is not supported on only a part of the partition key"),
        ("SELECT a, count(*) FROM g GROUP BY b", "Group by currently only support groups of columns following their declared order in the PRIMARY KEY"),
        ("SELECT a, count(*) FROM g GROUP BY c", "Group by currently only support groups of columns following their declared order in the PRIMARY KEY"),
        ("SELECT a, count(*) FROM g GROUP BY a, b, d", "Group by currently only support groups of columns following their declared order in the PRIMARY KEY"),
        ("SELECT a, count(*) FROM g WHERE a = 0 AND b = 0 GROUP BY a, b, c, a", "Group by currently only support groups of columns following their declared order in the PRIMARY KEY"),
        ("SELECT a, count(*) FROM g GROUP BY a, b, v", "Group by is currently only supported on the columns of the PRIMARY KEY, got v"),
        ("SELECT a, count(*) FROM g GROUP BY a, b, zz", "Undefined column name zz"),
        ("SELECT DISTINCT a, b FROM g GROUP BY a, b, c", "Grouping on clustering columns is not allowed for SELECT DISTINCT queries"),
    ],
)
def test_bad_group_by_is_refused(g, query, message):
    with pytest.raises(InvalidRequest) as e:
        g.execute(query)
    assert message in str(e.value)
    # The node keeps serving.
    assert len(rows(g, "SELECT a, b, count(*) FROM g GROUP BY a, b")) == 4
