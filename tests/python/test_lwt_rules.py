"""Lightweight transactions (conditional INSERT, UPDATE, DELETE and BATCH; SERIAL reads), as
Cassandra 5.0 answers them (test_lwt.py covers the same ground from hayate's side).

Written from Cassandra's sources (ModificationStatement, BatchStatement, CQL3CasRequest,
ColumnCondition, ColumnConditions), independently of hayate's implementation: each
expectation is Cassandra's rule, stated in the test. Run it against Cassandra itself with
HAYATE_REFERENCE to check an expectation.

The rules the tests lean on:
- the result is a Rows result whose first column is `[applied]` (boolean); applied, it is
  alone; not applied, it is followed by the current values: every column (SELECT * order)
  for IF EXISTS / IF NOT EXISTS, the columns named in the conditions otherwise (regular
  columns first, then static ones, each once), and in a BATCH the primary key columns first;
- a row that does not exist (and no static row to show) gives `[applied] = false` alone;
- `current op value`: null compares equal only to missing, only = and != take null, a
  missing value satisfies only !=; IN holds when = holds for one of its values;
- a whole non-frozen collection with no elements is both null and empty.
"""

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.query import BatchStatement, BatchType, SimpleStatement


def rows(session, cql, params=None):
    return [tuple(r) for r in session.execute(cql, params)]


def lwt(session, cql, params=None):
    """Runs a conditional statement; returns (column names, rows as tuples)."""
    rs = session.execute(cql, params)
    return rs.column_names, [tuple(r) for r in rs]


@pytest.fixture
def t(ks):
    ks.session.execute("CREATE TABLE t (k int, c int, v text, n int, PRIMARY KEY (k, c))")
    return ks.session


@pytest.fixture
def st(ks):
    ks.session.execute("CREATE TABLE st (k int, c int, s text STATIC, v int, PRIMARY KEY (k, c))")
    return ks.session


# INSERT ... IF NOT EXISTS


def test_insert_if_not_exists_applies_once_and_then_shows_the_row(t):
    assert lwt(t, "INSERT INTO t (k, c, v, n) VALUES (1, 1, 'a', 10) IF NOT EXISTS") == (
        ["[applied]"],
        [(True,)],
    )
    # Not applied: every column of the row as it is, in SELECT * order (keys, then the rest
    # by name), and the row unchanged.
    assert lwt(t, "INSERT INTO t (k, c, v, n) VALUES (1, 1, 'b', 20) IF NOT EXISTS") == (
        ["[applied]", "k", "c", "n", "v"],
        [(False, 1, 1, 10, "a")],
    )
    assert rows(t, "SELECT v, n FROM t WHERE k = 1 AND c = 1") == [("a", 10)]


def test_insert_if_not_exists_was_applied_for_the_driver(t):
    assert t.execute("INSERT INTO t (k, c, v) VALUES (2, 1, 'a') IF NOT EXISTS").was_applied
    assert not t.execute("INSERT INTO t (k, c, v) VALUES (2, 1, 'a') IF NOT EXISTS").was_applied


def test_insert_if_not_exists_with_ttl(t):
    assert t.execute(
        "INSERT INTO t (k, c, v) VALUES (3, 1, 'a') IF NOT EXISTS USING TTL 1000"
    ).was_applied
    [(ttl,)] = rows(t, "SELECT TTL(v) FROM t WHERE k = 3 AND c = 1")
    assert 990 <= ttl <= 1000


def test_a_deleted_row_does_not_exist(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (4, 1, 'a')")
    t.execute("DELETE FROM t WHERE k = 4 AND c = 1")
    assert t.execute("INSERT INTO t (k, c, v) VALUES (4, 1, 'b') IF NOT EXISTS").was_applied
    assert rows(t, "SELECT v FROM t WHERE k = 4 AND c = 1") == [("b",)]


def test_a_row_kept_alive_only_by_a_cell_exists(t):
    # An UPDATE writes no row marker, but its cell makes the row exist.
    t.execute("UPDATE t SET n = 1 WHERE k = 5 AND c = 1")
    assert lwt(t, "INSERT INTO t (k, c, v) VALUES (5, 1, 'x') IF NOT EXISTS") == (
        ["[applied]", "k", "c", "n", "v"],
        [(False, 5, 1, 1, None)],
    )


# UPDATE / DELETE ... IF EXISTS


def test_update_if_exists(t):
    # A missing row: [applied] = false alone, and nothing is written.
    assert lwt(t, "UPDATE t SET v = 'x' WHERE k = 10 AND c = 1 IF EXISTS") == (
        ["[applied]"],
        [(False,)],
    )
    assert rows(t, "SELECT * FROM t WHERE k = 10") == []
    t.execute("INSERT INTO t (k, c, v) VALUES (10, 1, 'a')")
    assert lwt(t, "UPDATE t SET v = 'x' WHERE k = 10 AND c = 1 IF EXISTS") == (
        ["[applied]"],
        [(True,)],
    )
    assert rows(t, "SELECT v FROM t WHERE k = 10 AND c = 1") == [("x",)]


def test_delete_if_exists(t):
    assert lwt(t, "DELETE FROM t WHERE k = 11 AND c = 1 IF EXISTS") == (["[applied]"], [(False,)])
    t.execute("INSERT INTO t (k, c, v) VALUES (11, 1, 'a')")
    assert t.execute("DELETE FROM t WHERE k = 11 AND c = 1 IF EXISTS").was_applied
    assert rows(t, "SELECT * FROM t WHERE k = 11") == []


# UPDATE / DELETE ... IF col op value


def test_update_if_equal_shows_the_condition_columns_when_not_applied(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (20, 1, 'a', 1)")
    assert lwt(t, "UPDATE t SET v = 'b' WHERE k = 20 AND c = 1 IF v = 'z'") == (
        ["[applied]", "v"],
        [(False, "a")],
    )
    assert lwt(t, "UPDATE t SET v = 'b' WHERE k = 20 AND c = 1 IF v = 'a'") == (
        ["[applied]"],
        [(True,)],
    )
    assert rows(t, "SELECT v FROM t WHERE k = 20 AND c = 1") == [("b",)]


@pytest.mark.parametrize(
    "condition, holds",
    [
        ("n = 5", True),
        ("n = 4", False),
        ("n != 4", True),
        ("n != 5", False),
        ("n < 6", True),
        ("n < 5", False),
        ("n <= 5", True),
        ("n <= 4", False),
        ("n > 4", True),
        ("n > 5", False),
        ("n >= 5", True),
        ("n >= 6", False),
        ("n IN (1, 5, 9)", True),
        ("n IN (1, 9)", False),
        ("n IN (null, 5)", True),
        ("n = null", False),
        ("n != null", True),
        ("v > 'abc'", True),
        ("v < 'abc'", False),
    ],
)
def test_each_operator(t, condition, holds):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (21, 1, 'abd', 5)")
    rs = t.execute(f"UPDATE t SET v = 'done' WHERE k = 21 AND c = 1 IF {condition}")
    assert rs.was_applied == holds


@pytest.mark.parametrize(
    "condition, holds",
    [
        ("n = null", True),
        ("n != null", False),
        ("n = 1", False),
        ("n != 1", True),  # a missing value is not equal to 1
        ("n > 1", False),
        ("n IN (1, null)", True),
        ("n IN (1, 2)", False),
    ],
)
def test_a_missing_value(t, condition, holds):
    t.execute("INSERT INTO t (k, c, v) VALUES (22, 1, 'a')")
    assert t.execute(f"UPDATE t SET v = 'done' WHERE k = 22 AND c = 1 IF {condition}").was_applied == holds


def test_a_missing_row_meets_a_null_condition_and_the_update_creates_it(t):
    assert lwt(t, "UPDATE t SET v = 'new' WHERE k = 23 AND c = 1 IF n = null") == (
        ["[applied]"],
        [(True,)],
    )
    assert rows(t, "SELECT v, n FROM t WHERE k = 23 AND c = 1") == [("new", None)]
    # And a failed condition on a missing row shows [applied] alone.
    assert lwt(t, "UPDATE t SET v = 'x' WHERE k = 24 AND c = 1 IF n = 3") == (["[applied]"], [(False,)])


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_null_takes_only_equality(t, op):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (25, 1, 'a', 1)")
    with pytest.raises(InvalidRequest, match=f'Invalid comparison with null for operator "{op}"'):
        t.execute(f"UPDATE t SET v = 'x' WHERE k = 25 AND c = 1 IF n {op} null")


def test_several_conditions_and_the_columns_shown(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (26, 1, 'a', 1)")
    # All must hold; the columns shown are those named, each once, in IF order.
    assert lwt(t, "UPDATE t SET v = 'x' WHERE k = 26 AND c = 1 IF n = 1 AND v = 'b' AND n > 0") == (
        ["[applied]", "n", "v"],
        [(False, 1, "a")],
    )
    assert t.execute("UPDATE t SET v = 'x' WHERE k = 26 AND c = 1 IF n = 1 AND v = 'a'").was_applied


def test_delete_if_condition(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (27, 1, 'a', 1)")
    assert lwt(t, "DELETE FROM t WHERE k = 27 AND c = 1 IF n = 2") == (["[applied]", "n"], [(False, 1)])
    assert t.execute("DELETE v FROM t WHERE k = 27 AND c = 1 IF n = 1").was_applied
    assert rows(t, "SELECT v, n FROM t WHERE k = 27 AND c = 1") == [(None, 1)]
    assert t.execute("DELETE FROM t WHERE k = 27 AND c = 1 IF v = null").was_applied
    assert rows(t, "SELECT * FROM t WHERE k = 27") == []


# Collections and user-defined types


@pytest.fixture
def ct(ks):
    ks.session.execute(
        "CREATE TABLE ct (k int PRIMARY KEY, m map<text, int>, l list<int>, s set<int>, "
        "fl frozen<list<int>>)"
    )
    return ks.session


def test_conditions_on_collection_elements(ct):
    ct.execute("INSERT INTO ct (k, m, l, s, fl) VALUES (1, {'a': 1, 'b': 2}, [5, 6], {3}, [1, 2])")
    assert ct.execute("UPDATE ct SET s = {4} WHERE k = 1 IF m['a'] = 1").was_applied
    assert lwt(ct, "UPDATE ct SET s = {5} WHERE k = 1 IF m['a'] = 2") == (
        ["[applied]", "m"],
        [(False, {"a": 1, "b": 2})],
    )
    assert ct.execute("UPDATE ct SET s = {6} WHERE k = 1 IF m['zz'] = null").was_applied
    assert ct.execute("UPDATE ct SET s = {7} WHERE k = 1 IF m['b'] > 1").was_applied
    assert ct.execute("UPDATE ct SET s = {8} WHERE k = 1 IF l[0] = 5 AND l[1] = 6").was_applied
    assert not ct.execute("UPDATE ct SET s = {9} WHERE k = 1 IF l[0] = 6").was_applied
    # An index past the end is a missing value.
    assert ct.execute("UPDATE ct SET s = {10} WHERE k = 1 IF l[7] = null").was_applied
    assert ct.execute("UPDATE ct SET s = {11} WHERE k = 1 IF fl[1] = 2").was_applied


def test_conditions_on_whole_collections(ct):
    ct.execute("INSERT INTO ct (k, l, s) VALUES (2, [1, 2], {1, 2})")
    assert ct.execute("UPDATE ct SET m = {'x': 1} WHERE k = 2 IF l = [1, 2] AND s = {2, 1}").was_applied
    assert ct.execute("UPDATE ct SET m = {'x': 2} WHERE k = 2 IF l > [1] AND l < [1, 3]").was_applied
    assert not ct.execute("UPDATE ct SET m = {'x': 3} WHERE k = 2 IF l = [2, 1]").was_applied
    # A non-frozen collection with no elements is both null and empty.
    ct.execute("INSERT INTO ct (k) VALUES (3)")
    assert ct.execute("UPDATE ct SET s = {1} WHERE k = 3 IF l = []").was_applied
    assert ct.execute("UPDATE ct SET s = {2} WHERE k = 3 IF l = null").was_applied


def test_a_set_has_no_element_access(ct):
    with pytest.raises(InvalidRequest, match="Invalid element access syntax for set column s"):
        ct.execute("UPDATE ct SET l = [1] WHERE k = 4 IF s[1] = 1")


def test_negative_list_index(ct):
    ct.execute("INSERT INTO ct (k, l) VALUES (5, [1])")
    with pytest.raises(InvalidRequest, match="Invalid negative list index -1"):
        ct.execute("UPDATE ct SET s = {1} WHERE k = 5 IF l[-1] = 1")


def test_conditions_on_udt_fields(ks):
    ks.session.execute("CREATE TYPE pt (x int, y text)")
    ks.session.execute("CREATE TABLE ut (k int PRIMARY KEY, p pt, fp frozen<pt>, n int)")
    ks.session.execute("INSERT INTO ut (k, p, fp) VALUES (1, {x: 1, y: 'a'}, {x: 2, y: 'b'})")
    assert ks.session.execute("UPDATE ut SET n = 1 WHERE k = 1 IF p.x = 1 AND fp.y = 'b'").was_applied
    names, [row] = lwt(ks.session, "UPDATE ut SET n = 2 WHERE k = 1 IF p.x > 1")
    assert names == ["[applied]", "p"] and row[0] is False and (row[1].x, row[1].y) == (1, "a")
    assert ks.session.execute("UPDATE ut SET n = 3 WHERE k = 1 IF p.y IN ('z', 'a')").was_applied


# Static columns


def test_static_conditions(st):
    # Only static columns written and conditioned: no clustering key is needed.
    assert st.execute("UPDATE st SET s = 'a' WHERE k = 1 IF s = null").was_applied
    assert lwt(st, "UPDATE st SET s = 'b' WHERE k = 1 IF s = 'z'") == (
        ["[applied]", "s"],
        [(False, "a")],
    )
    # A condition on the static column with a write to a row: the static row is judged.
    assert st.execute("UPDATE st SET v = 1 WHERE k = 1 AND c = 1 IF s = 'a'").was_applied
    assert rows(st, "SELECT c, s, v FROM st WHERE k = 1") == [(1, "a", 1)]


def test_insert_of_statics_alone_if_not_exists(st):
    assert st.execute("INSERT INTO st (k, s) VALUES (2, 'a') IF NOT EXISTS").was_applied
    # The partition holds only its static row: shown with null clustering and regular columns.
    assert lwt(st, "INSERT INTO st (k, s) VALUES (2, 'b') IF NOT EXISTS") == (
        ["[applied]", "k", "c", "s", "v"],
        [(False, 2, None, "a", None)],
    )


def test_regular_and_static_conditions_show_regular_columns_first(st):
    st.execute("INSERT INTO st (k, c, s, v) VALUES (3, 1, 'a', 1)")
    assert lwt(st, "UPDATE st SET v = 2 WHERE k = 3 AND c = 1 IF s = 'z' AND v = 1") == (
        ["[applied]", "v", "s"],
        [(False, 1, "a")],
    )


# Refusals


def test_custom_timestamp_is_refused(t):
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        t.execute("UPDATE t USING TIMESTAMP 5 SET v = 'a' WHERE k = 1 AND c = 1 IF v = 'b'")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'a') IF NOT EXISTS USING TIMESTAMP 5")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        t.execute("DELETE FROM t USING TIMESTAMP 5 WHERE k = 1 AND c = 1 IF EXISTS")


def test_conditions_on_primary_key_columns_are_refused(t):
    with pytest.raises(InvalidRequest, match="PRIMARY KEY column 'k' cannot have IF conditions"):
        t.execute("UPDATE t SET v = 'a' WHERE k = 1 AND c = 1 IF k = 1")
    with pytest.raises(InvalidRequest, match="PRIMARY KEY column 'c' cannot have IF conditions"):
        t.execute("DELETE FROM t WHERE k = 1 AND c = 1 IF c = 1")


def test_in_is_refused(t):
    with pytest.raises(InvalidRequest, match="IN on the partition key is not supported with conditional updates"):
        t.execute("UPDATE t SET v = 'a' WHERE k IN (1, 2) AND c = 1 IF v = 'b'")
    with pytest.raises(InvalidRequest, match="IN on the partition key is not supported with conditional deletions"):
        t.execute("DELETE FROM t WHERE k IN (1, 2) AND c = 1 IF EXISTS")
    with pytest.raises(
        InvalidRequest, match="IN on the clustering key columns is not supported with conditional updates"
    ):
        t.execute("UPDATE t SET v = 'a' WHERE k = 1 AND c IN (1, 2) IF v = 'b'")


def test_partial_key_delete_with_conditions_is_refused(t):
    # Cassandra's own tests (InsertUpdateIfConditionTest, CASSANDRA-6430): a whole-row delete
    # or a regular-column condition without the full primary key.
    msg = "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns"
    for cql in (
        "DELETE FROM t WHERE k = 1 IF EXISTS",
        "DELETE FROM t WHERE k = 1 IF v = 'a'",
        "DELETE v FROM t WHERE k = 1 IF v = 'a'",
        "DELETE FROM t WHERE k = 1 AND c > 0 IF EXISTS",
    ):
        with pytest.raises(InvalidRequest, match=msg):
            t.execute(cql)
    with pytest.raises(
        InvalidRequest, match="IN on the clustering key columns is not supported with conditional deletions"
    ):
        t.execute("DELETE FROM t WHERE k = 1 AND c IN (0, 1) IF v = 'foo'")


def test_static_delete_refusals(st):
    with pytest.raises(
        InvalidRequest,
        match="DELETE statements must restrict all PRIMARY KEY columns with equality relations "
        "in order to use IF condition on non static columns",
    ):
        st.execute("DELETE s FROM st WHERE k = 1 IF v = 2 AND s = 'a'")
    with pytest.raises(
        InvalidRequest,
        match="DELETE statements must restrict all PRIMARY KEY columns with equality relations "
        "in order to delete non static columns",
    ):
        st.execute("DELETE s, v FROM st WHERE k = 1 IF s = 'a'")
    with pytest.raises(
        InvalidRequest,
        match="Invalid restrictions on clustering columns since the DELETE statement modifies only static columns",
    ):
        st.execute("DELETE s FROM st WHERE k = 1 AND c = 1 IF s = 'a'")


def test_static_update_refusals(st):
    with pytest.raises(
        InvalidRequest,
        match="Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns",
    ):
        st.execute("UPDATE st SET s = 'a' WHERE k = 1 AND c = 1 IF s = 'b'")
    for cql in (
        "UPDATE st SET s = 'a', v = 1 WHERE k = 1 IF s = 'b'",
        "UPDATE st SET s = 'a' WHERE k = 1 IF v = 1 AND s = 'b'",
    ):
        with pytest.raises(InvalidRequest, match="Some clustering keys are missing: c"):
            st.execute(cql)


def test_static_row_shown_with_a_missing_regular_row(st):
    # From InsertUpdateIfConditionTest.testConditionalDelete: the regular row is gone but the
    # static row is read (a static column is in a condition): one row, v null.
    st.execute("INSERT INTO st (k, c, s, v) VALUES (7, 0, 's', 1)")
    st.execute("DELETE FROM st WHERE k = 7 AND c = 0")
    assert lwt(st, "DELETE v FROM st WHERE k = 7 AND c = 0 IF s = 'z'") == (["[applied]", "s"], [(False, "s")])
    assert lwt(st, "DELETE v FROM st WHERE k = 7 AND c = 0 IF v = 9") == (["[applied]"], [(False,)])
    assert lwt(st, "DELETE v FROM st WHERE k = 7 AND c = 0 IF v = 9 AND s = 'z'") == (
        ["[applied]", "v", "s"],
        [(False, None, "s")],
    )


def test_static_null_condition_with_a_live_static(st):
    st.execute("INSERT INTO st (k, c, s, v) VALUES (8, 8, 'x', 1)")
    assert lwt(st, "UPDATE st SET s = 'y' WHERE k = 8 IF s = null") == (["[applied]", "s"], [(False, "x")])
    # A deleted partition is not there: its null static meets the condition.
    st.execute("DELETE FROM st WHERE k = 9")
    assert st.execute("UPDATE st SET s = 'y' WHERE k = 9 IF s = null").was_applied
    assert rows(st, "SELECT * FROM st WHERE k = 9") == [(9, None, "y", None)]


def test_empty_and_unset_in_lists(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (28, 1, 'a', 2)")
    assert lwt(t, "UPDATE t SET v = 'b' WHERE k = 28 AND c = 1 IF n IN ()") == (["[applied]", "n"], [(False, 2)])


# BATCH


def test_conditional_batch_all_or_nothing(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (40, 1, 'a')")
    batch = (
        "BEGIN BATCH "
        "UPDATE t SET v = 'b' WHERE k = 40 AND c = 1 IF v = 'a'; "
        "INSERT INTO t (k, c, v) VALUES (40, 2, 'new'); "
        "APPLY BATCH"
    )
    assert lwt(t, batch) == (["[applied]"], [(True,)])
    assert rows(t, "SELECT c, v FROM t WHERE k = 40") == [(1, "b"), (2, "new")]
    # Now the condition fails: nothing of the batch is written, and the result shows the
    # primary key columns and then the condition columns, one row per row conditioned.
    batch2 = (
        "BEGIN BATCH "
        "UPDATE t SET v = 'c' WHERE k = 40 AND c = 1 IF v = 'a'; "
        "UPDATE t SET v = 'd' WHERE k = 40 AND c = 2 IF n = null; "
        "INSERT INTO t (k, c, v) VALUES (40, 3, 'never'); "
        "APPLY BATCH"
    )
    assert lwt(t, batch2) == (
        ["[applied]", "k", "c", "v", "n"],
        [(False, 40, 1, "b", None), (False, 40, 2, "new", None)],
    )
    assert rows(t, "SELECT c, v FROM t WHERE k = 40") == [(1, "b"), (2, "new")]


def test_conditional_batch_with_if_not_exists_shows_every_column(t):
    t.execute("INSERT INTO t (k, c, v, n) VALUES (41, 1, 'a', 1)")
    batch = (
        "BEGIN BATCH "
        "INSERT INTO t (k, c, v) VALUES (41, 1, 'x') IF NOT EXISTS; "
        "INSERT INTO t (k, c, v) VALUES (41, 2, 'y') IF NOT EXISTS; "
        "APPLY BATCH"
    )
    assert lwt(t, batch) == (["[applied]", "k", "c", "n", "v"], [(False, 41, 1, 1, "a")])
    assert rows(t, "SELECT c FROM t WHERE k = 41") == [(1,)]


def test_conditional_batch_through_the_protocol(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (42, 1, 'a')")
    upd = t.prepare("UPDATE t SET v = ? WHERE k = ? AND c = ? IF v = ?")
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    batch.add(upd, ("b", 42, 1, "a"))
    batch.add(SimpleStatement("INSERT INTO t (k, c, v) VALUES (42, 2, 'x')"))
    assert t.execute(batch).was_applied
    batch = BatchStatement()
    batch.add(upd, ("c", 42, 1, "a"))
    rs = t.execute(batch)
    assert not rs.was_applied
    assert rs.column_names == ["[applied]", "k", "c", "v"]
    assert [tuple(r) for r in rs] == [(False, 42, 1, "b")]


def test_batch_with_only_a_static_condition_shows_the_first_row(ks):
    # From InsertUpdateIfConditionStaticsTest: only static conditions read the static row and
    # the partition's first live row; a batch shows the primary key first.
    s = ks.session
    s.execute("CREATE TABLE sv (id int, k text, version int static, v text, PRIMARY KEY (id, k))")
    s.execute("INSERT INTO sv (id, k, version, v) VALUES (0, 'k1', 2, 'foo')")
    s.execute("INSERT INTO sv (id, k, v) VALUES (0, 'k2', 'bar')")
    assert lwt(s, "UPDATE sv SET version = 3 WHERE id = 0 IF version = 1") == (["[applied]", "version"], [(False, 2)])
    assert lwt(
        s,
        "BEGIN BATCH UPDATE sv SET v = 'x' WHERE id = 0 AND k = 'k1'; "
        "UPDATE sv SET version = 3 WHERE id = 0 IF version = 1; APPLY BATCH",
    ) == (["[applied]", "id", "k", "version"], [(False, 0, "k1", 2)])
    # Conditions in statement order, each row conditioned shown once.
    assert lwt(
        s,
        "BEGIN BATCH UPDATE sv SET version = 4 WHERE id = 0 IF version = 3; "
        "UPDATE sv SET v = 'r1' WHERE id = 0 AND k = 'k1' IF v = 'nope'; "
        "UPDATE sv SET v = 'r2' WHERE id = 0 AND k = 'k2' IF v = 'nope'; APPLY BATCH",
    ) == (["[applied]", "id", "k", "version", "v"], [(False, 0, "k1", 2, "foo"), (False, 0, "k2", 2, "bar")])
    # Two conditions on one row: one row shown.
    assert lwt(
        s,
        "BEGIN BATCH UPDATE sv SET v = 'a' WHERE id = 0 AND k = 'k2' IF v = 'x'; "
        "UPDATE sv SET v = 'b' WHERE id = 0 AND k = 'k2' IF v = 'y'; APPLY BATCH",
    ) == (["[applied]", "id", "k", "v"], [(False, 0, "k2", "bar")])


def test_conditional_batch_refusals(ks, t):
    ks.session.execute("CREATE TABLE t2 (k int PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple partitions"):
        t.execute(
            "BEGIN BATCH UPDATE t SET v = 'a' WHERE k = 1 AND c = 1 IF v = 'b'; "
            "UPDATE t SET v = 'a' WHERE k = 2 AND c = 1; APPLY BATCH"
        )
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple tables"):
        t.execute(
            "BEGIN BATCH UPDATE t SET v = 'a' WHERE k = 1 AND c = 1 IF v = 'b'; "
            "UPDATE t2 SET v = 1 WHERE k = 1; APPLY BATCH"
        )
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional BATCH"):
        t.execute(
            "BEGIN BATCH USING TIMESTAMP 5 UPDATE t SET v = 'a' WHERE k = 1 AND c = 1 IF v = 'b'; "
            "APPLY BATCH"
        )


# Prepared statements


def test_prepared_conditional_statements(t):
    ins = t.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?) IF NOT EXISTS")
    # A modification statement's PREPARED result has no result columns.
    assert not ins.result_metadata
    assert t.execute(ins, (50, 1, "a")).was_applied
    rs = t.execute(ins, (50, 1, "b"))
    assert not rs.was_applied and rs.column_names == ["[applied]", "k", "c", "n", "v"]
    upd = t.prepare("UPDATE t SET v = ? WHERE k = ? AND c = ? IF v = ?")
    assert [c.name for c in upd.column_metadata] == ["v", "k", "c", "v"]
    assert not t.execute(upd, ("x", 50, 1, "zz")).was_applied
    assert t.execute(upd, ("x", 50, 1, "a")).was_applied
    inq = t.prepare("UPDATE t SET n = ? WHERE k = ? AND c = ? IF v IN ?")
    assert [c.name for c in inq.column_metadata] == ["n", "k", "c", "in(v)"]
    assert t.execute(inq, (1, 50, 1, ["q", "x"])).was_applied
    with pytest.raises(InvalidRequest, match="Invalid null list in IN condition"):
        t.execute(inq, (1, 50, 1, None))


def test_prepared_element_conditions_name_their_markers(ks):
    ks.session.execute("CREATE TABLE pm (k int PRIMARY KEY, m map<text, int>, l list<int>)")
    p = ks.session.prepare("UPDATE pm SET l = [1] WHERE k = ? IF m[?] = ? AND l[?] = ?")
    assert [c.name for c in p.column_metadata] == ["k", "key(m)", "value(m)", "idx(l)", "value(l)"]


# SERIAL reads


def test_serial_read_of_one_partition(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (60, 1, 'a') IF NOT EXISTS")
    for cl in (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL):
        q = SimpleStatement("SELECT c, v FROM t WHERE k = 60", consistency_level=cl)
        assert rows(t, q) == [(1, "a")]


def test_serial_reads_of_several_partitions_and_ranges(t):
    # Cassandra 5.0 with Paxos v2 reads them (checked against 5.0.6 with HAYATE_REFERENCE).
    t.execute("INSERT INTO t (k, c, v) VALUES (71, 1, 'a')")
    for cql in ("SELECT k, c, v FROM t WHERE k IN (71, 72)",
                "SELECT k, c, v FROM t WHERE token(k) >= token(71) AND token(k) <= token(71)"):
        q = SimpleStatement(cql, consistency_level=ConsistencyLevel.SERIAL)
        assert rows(t, q) == [(71, 1, "a")]


def test_local_serial_for_a_conditional_update(t):
    q = SimpleStatement(
        "INSERT INTO t (k, c, v) VALUES (61, 1, 'a') IF NOT EXISTS",
        serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
    )
    assert t.execute(q).was_applied
    assert not t.execute(q).was_applied
