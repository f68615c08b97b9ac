"""Paging: drivers fetch large results a page at a time and resume from the server's paging state.

A paging bug loses or repeats rows only at page boundaries, so each test checks that every row
comes back exactly once and in Cassandra's order, with boundaries falling inside partitions, at
their edges, and across partitions of a full-table scan.
"""

import struct

import pytest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement

WIDE_ROWS = 2500
SCAN_PARTITIONS = 357  # with 7 rows each: 2,499 rows, so page boundaries fall inside partitions
SCAN_ROWS_EACH = 7
PAGE = 100


def token_of_int(k: int) -> int:
    return Murmur3Token.from_key(struct.pack(">i", k)).value


@pytest.fixture(scope="module")
def paged(_shared):
    """wide: one partition of 2,500 rows; scan: 357 partitions of 7 rows."""
    from conftest import RUN_ID

    session = _shared.get_session()
    name = f"paging_{RUN_ID}"
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s = _shared.cluster.connect(name)
    s.execute("CREATE TABLE IF NOT EXISTS wide (k int, c int, v text, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE IF NOT EXISTS scan (k int, c int, v text, PRIMARY KEY (k, c))")
    wide = s.prepare("INSERT INTO wide (k, c, v) VALUES (1, ?, ?)")
    scan = s.prepare("INSERT INTO scan (k, c, v) VALUES (?, ?, ?)")
    for ok, result in execute_concurrent_with_args(s, wide, [(c, f"row {c}") for c in range(WIDE_ROWS)],
                                                   concurrency=64, raise_on_first_error=True):
        assert ok
    args = [(k, c, f"{k}/{c}") for k in range(SCAN_PARTITIONS) for c in range(SCAN_ROWS_EACH)]
    for ok, result in execute_concurrent_with_args(s, scan, args, concurrency=64, raise_on_first_error=True):
        assert ok
    yield s
    s.shutdown()


def scan_order():
    return [(k, c) for k in sorted(range(SCAN_PARTITIONS), key=token_of_int) for c in range(SCAN_ROWS_EACH)]


def test_one_partition_pages_through_every_row_once(paged):
    result = paged.execute(SimpleStatement("SELECT c, v FROM wide WHERE k = 1", fetch_size=PAGE))
    first_page = result.current_rows
    assert len(first_page) == PAGE, "the first page holds fetch_size rows"
    assert result.has_more_pages
    got = [r.c for r in result]
    assert got == list(range(WIDE_ROWS))


def test_one_partition_pages_in_reverse(paged):
    stmt = SimpleStatement("SELECT c FROM wide WHERE k = 1 ORDER BY c DESC", fetch_size=PAGE)
    assert [r.c for r in paged.execute(stmt)] == list(reversed(range(WIDE_ROWS)))


def test_prepared_statement_pages_with_a_clustering_range(paged):
    stmt = paged.prepare("SELECT c FROM wide WHERE k = ? AND c >= ? AND c < ?")
    stmt.fetch_size = 77
    assert [r.c for r in paged.execute(stmt, (1, 150, 1850))] == list(range(150, 1850))


def test_full_table_scan_pages_across_partitions(paged):
    result = paged.execute(SimpleStatement("SELECT k, c FROM scan", fetch_size=PAGE))
    got = [(r.k, r.c) for r in result]
    assert len(got) == len(set(got)), "a row came back twice"
    assert got == scan_order()


def test_token_range_scan_pages(paged):
    """YCSB's and Spark's scans: a token range, paged."""
    order = scan_order()
    start_key = order[SCAN_ROWS_EACH * 100][0]
    stmt = SimpleStatement("SELECT k, c FROM scan WHERE token(k) >= token(%s)", fetch_size=PAGE)
    got = [(r.k, r.c) for r in paged.execute(stmt, [start_key])]
    assert got == order[SCAN_ROWS_EACH * 100:]


def test_limit_larger_than_a_page_stops_at_the_limit(paged):
    stmt = SimpleStatement("SELECT c FROM wide WHERE k = 1 LIMIT 250", fetch_size=PAGE)
    assert [r.c for r in paged.execute(stmt)] == list(range(250))
    stmt = SimpleStatement("SELECT k, c FROM scan LIMIT 333", fetch_size=PAGE)
    assert [(r.k, r.c) for r in paged.execute(stmt)] == scan_order()[:333]


def test_per_partition_limit_with_paging(paged):
    stmt = SimpleStatement("SELECT k, c FROM scan PER PARTITION LIMIT 2", fetch_size=PAGE)
    got = [(r.k, r.c) for r in paged.execute(stmt)]
    assert got == [(k, c) for (k, c) in scan_order() if c < 2]


def test_resume_from_paging_state(paged):
    """An application keeps `paging_state` (e.g. in a web page's "next" link) and resumes later,
    on a new statement object."""
    query = "SELECT c FROM wide WHERE k = 1"
    first = paged.execute(SimpleStatement(query, fetch_size=PAGE))
    assert [r.c for r in first.current_rows] == list(range(PAGE))
    state = first.paging_state
    assert state, "a result with more rows must carry a paging state"

    second = paged.execute(SimpleStatement(query, fetch_size=PAGE), paging_state=state)
    assert [r.c for r in second.current_rows] == list(range(PAGE, 2 * PAGE))
    # The same state can be used again: it is a position, not a server-side cursor.
    again = paged.execute(SimpleStatement(query, fetch_size=PAGE), paging_state=state)
    assert [r.c for r in again.current_rows] == list(range(PAGE, 2 * PAGE))


def test_resume_full_scan_from_paging_state(paged):
    query = "SELECT k, c FROM scan"
    seen = []
    state = None
    while True:
        result = paged.execute(SimpleStatement(query, fetch_size=250), paging_state=state)
        seen.extend((r.k, r.c) for r in result.current_rows)
        state = result.paging_state
        if not state:
            break
    assert seen == scan_order()


def test_last_page_has_no_paging_state(paged):
    result = paged.execute(SimpleStatement("SELECT c FROM wide WHERE k = 1 AND c >= 2450", fetch_size=PAGE))
    assert [r.c for r in result.current_rows] == list(range(2450, WIDE_ROWS))
    assert not result.has_more_pages
    assert result.paging_state is None


def test_count_is_not_limited_by_the_page_size(paged):
    stmt = SimpleStatement("SELECT count(*) FROM wide WHERE k = 1", fetch_size=PAGE)
    assert paged.execute(stmt).one()[0] == WIDE_ROWS
    stmt = SimpleStatement("SELECT count(*) FROM scan", fetch_size=PAGE)
    assert paged.execute(stmt).one()[0] == SCAN_PARTITIONS * SCAN_ROWS_EACH


def test_rows_deleted_between_pages_are_not_returned(ks):
    """Each page reads the current data: a row deleted after the first page is not served."""
    s = ks.session
    s.execute("CREATE TABLE t (k int, c int, PRIMARY KEY (k, c))")
    for c in range(30):
        s.execute("INSERT INTO t (k, c) VALUES (1, %s)", [c])
    first = s.execute(SimpleStatement("SELECT c FROM t WHERE k = 1", fetch_size=10))
    assert [r.c for r in first.current_rows] == list(range(10))
    s.execute("DELETE FROM t WHERE k = 1 AND c = 15")
    rest = s.execute(SimpleStatement("SELECT c FROM t WHERE k = 1", fetch_size=10), paging_state=first.paging_state)
    got = [r.c for r in rest]
    assert got == [c for c in range(10, 30) if c != 15]


def test_in_on_partition_keys_pages_across_partitions(paged):
    keys = [5, 17, 3, 200]
    stmt = SimpleStatement(f"SELECT k, c FROM scan WHERE k IN ({', '.join(map(str, keys))})", fetch_size=3)
    got = [(r.k, r.c) for r in paged.execute(stmt)]
    assert sorted(got) == sorted((k, c) for k in keys for c in range(SCAN_ROWS_EACH))
    assert len(got) == len(set(got))


def test_token_bounds_at_the_ends_of_the_ring(paged):
    """The smallest and largest Murmur3 tokens as bounds: everything, or nothing."""
    lowest, highest = -(2**63), 2**63 - 1
    stmt = SimpleStatement("SELECT k FROM scan WHERE token(k) >= %s", fetch_size=500)
    assert len(list(paged.execute(stmt, [lowest]))) == SCAN_PARTITIONS * SCAN_ROWS_EACH
    assert list(paged.execute(SimpleStatement("SELECT k FROM scan WHERE token(k) > %s"), [highest])) == []
    stmt = SimpleStatement("SELECT k FROM scan WHERE token(k) > %s AND token(k) <= %s", fetch_size=500)
    assert len(list(paged.execute(stmt, [lowest, highest]))) == SCAN_PARTITIONS * SCAN_ROWS_EACH
