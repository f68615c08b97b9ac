"""Lightweight transactions: INSERT ... IF NOT EXISTS, UPDATE and DELETE ... IF EXISTS or IF
conditions, conditional BATCH, and reads at SERIAL, answered as Cassandra 5.0 answers them.

Every conditional statement answers with rows whose first column is `[applied]` (a boolean).
When the write was made that column is alone. When it was not, the columns after it are the
current values Cassandra read to decide: every column of the row for IF EXISTS and IF NOT
EXISTS, the columns named in the conditions otherwise (in a BATCH, the primary key columns
first, one row per row the conditions looked at). A row that does not exist gives
`[applied] = false` alone. The expectations are Cassandra's (ModificationStatement,
BatchStatement, CQL3CasRequest, ColumnCondition); HAYATE_REFERENCE runs them against it.
"""

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, SimpleStatement


def answer(rs):
    """(column names, rows as tuples) of a result, leaving it readable (`was_applied`)."""
    return list(rs.column_names), [tuple(r) for r in rs.current_rows]


@pytest.fixture
def kv(ks):
    ks.session.execute("CREATE TABLE kv (k int PRIMARY KEY, v int, w text)")
    return ks.session


@pytest.fixture
def ck(ks):
    ks.session.execute("CREATE TABLE ck (k int, c int, v int, s int static, PRIMARY KEY (k, c))")
    return ks.session


# --- INSERT ... IF NOT EXISTS ---------------------------------------------------------------


def test_insert_if_not_exists_applies_once_and_then_shows_the_row(kv):
    rs = kv.execute("INSERT INTO kv (k, v, w) VALUES (1, 10, 'a') IF NOT EXISTS")
    assert answer(rs) == (["[applied]"], [(True,)])
    assert rs.was_applied
    rs = kv.execute("INSERT INTO kv (k, v, w) VALUES (1, 20, 'b') IF NOT EXISTS")
    assert answer(rs) == (["[applied]", "k", "v", "w"], [(False, 1, 10, "a")])
    assert not rs.was_applied
    assert list(kv.execute("SELECT k, v, w FROM kv WHERE k = 1")) == [(1, 10, "a")]


def test_insert_if_not_exists_with_ttl_expires_and_can_be_inserted_again(kv):
    rs = kv.execute("INSERT INTO kv (k, v) VALUES (2, 1) IF NOT EXISTS USING TTL 1000")
    assert rs.was_applied
    ttl = kv.execute("SELECT ttl(v) FROM kv WHERE k = 2").one()[0]
    assert 990 <= ttl <= 1000
    assert not kv.execute("INSERT INTO kv (k, v) VALUES (2, 5) IF NOT EXISTS").was_applied


def test_insert_if_not_exists_with_custom_timestamp_is_refused(kv):
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        kv.execute("INSERT INTO kv (k, v) VALUES (3, 1) IF NOT EXISTS USING TIMESTAMP 5")


# --- UPDATE ... IF EXISTS / IF conditions ---------------------------------------------------


def test_update_if_exists_on_a_missing_row_is_applied_false_alone(kv):
    assert answer(kv.execute("UPDATE kv SET v = 1 WHERE k = 7 IF EXISTS")) == (["[applied]"], [(False,)])
    assert kv.execute("SELECT * FROM kv WHERE k = 7").one() is None
    kv.execute("INSERT INTO kv (k, v) VALUES (7, 0)")
    assert answer(kv.execute("UPDATE kv SET v = 1 WHERE k = 7 IF EXISTS")) == (["[applied]"], [(True,)])
    assert kv.execute("SELECT v FROM kv WHERE k = 7").one()[0] == 1


def test_update_if_column_condition_shows_the_condition_columns_when_false(kv):
    kv.execute("INSERT INTO kv (k, v, w) VALUES (1, 10, 'a')")
    rs = kv.execute("UPDATE kv SET v = 11 WHERE k = 1 IF v = 9")
    assert answer(rs) == (["[applied]", "v"], [(False, 10)])
    rs = kv.execute("UPDATE kv SET v = 11 WHERE k = 1 IF w = 'a' AND v = 10")
    assert answer(rs) == (["[applied]"], [(True,)])
    rs = kv.execute("UPDATE kv SET v = 12 WHERE k = 1 IF w = 'b' AND v = 11")
    assert answer(rs) == (["[applied]", "w", "v"], [(False, "a", 11)])
    assert kv.execute("SELECT v FROM kv WHERE k = 1").one()[0] == 11


@pytest.mark.parametrize(
    "condition, holds",
    [
        ("v = 10", True),
        ("v = 11", False),
        ("v != 11", True),
        ("v != 10", False),
        ("v < 11", True),
        ("v < 10", False),
        ("v <= 10", True),
        ("v <= 9", False),
        ("v > 9", True),
        ("v > 10", False),
        ("v >= 10", True),
        ("v >= 11", False),
        ("v IN (1, 10)", True),
        ("v IN (1, 2)", False),
        ("v IN (null, 10)", True),
        ("v = null", False),
        ("v != null", True),
        ("w > 'a'", True),
        ("w < 'a'", False),
    ],
)
def test_each_operator(kv, condition, holds):
    kv.execute("INSERT INTO kv (k, v, w) VALUES (1, 10, 'b')")
    rs = kv.execute(f"UPDATE kv SET v = 10 WHERE k = 1 IF {condition}")
    assert rs.was_applied is holds


def test_conditions_on_a_null_column(kv):
    kv.execute("INSERT INTO kv (k, w) VALUES (1, 'x')")
    # A null column satisfies `= null` and `!= value`, nothing else.
    assert kv.execute("UPDATE kv SET w = 'y' WHERE k = 1 IF v = null").was_applied
    assert kv.execute("UPDATE kv SET w = 'y' WHERE k = 1 IF v != 3").was_applied
    assert not kv.execute("UPDATE kv SET w = 'y' WHERE k = 1 IF v > 3").was_applied
    assert answer(kv.execute("UPDATE kv SET w = 'y' WHERE k = 1 IF v = 3")) == (
        ["[applied]", "v"],
        [(False, None)],
    )
    assert not kv.execute("UPDATE kv SET w = 'y' WHERE k = 1 IF v != null").was_applied


def test_a_missing_row_has_every_column_null(kv):
    # `IF v = null` holds on a row that does not exist, and the update creates it.
    assert kv.execute("UPDATE kv SET w = 'new' WHERE k = 5 IF v = null").was_applied
    assert list(kv.execute("SELECT k, v, w FROM kv WHERE k = 5")) == [(5, None, "new")]
    # A condition that fails on a missing row shows [applied] alone.
    assert answer(kv.execute("UPDATE kv SET w = 'z' WHERE k = 6 IF v = 1")) == (["[applied]"], [(False,)])


def test_comparison_with_null_is_refused_for_slices(kv):
    with pytest.raises(InvalidRequest, match='Invalid comparison with null for operator "<"'):
        kv.execute("UPDATE kv SET v = 1 WHERE k = 1 IF v < null")


def test_conditions_on_primary_key_columns_are_refused(kv, ck):
    with pytest.raises(InvalidRequest, match="PRIMARY KEY column 'k' cannot have IF conditions"):
        kv.execute("UPDATE kv SET v = 1 WHERE k = 1 IF k = 1")
    with pytest.raises(InvalidRequest, match="PRIMARY KEY column 'c' cannot have IF conditions"):
        ck.execute("UPDATE ck SET v = 1 WHERE k = 1 AND c = 1 IF c = 1")


def test_custom_timestamp_with_conditions_is_refused(kv):
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        kv.execute("UPDATE kv USING TIMESTAMP 5 SET v = 1 WHERE k = 1 IF v = 1")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        kv.execute("UPDATE kv USING TIMESTAMP 5 SET v = 1 WHERE k = 1 IF EXISTS")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        kv.execute("DELETE FROM kv USING TIMESTAMP 5 WHERE k = 1 IF EXISTS")


def test_in_on_the_key_is_refused_with_conditions(kv, ck):
    with pytest.raises(InvalidRequest, match="IN on the partition key is not supported with conditional updates"):
        kv.execute("UPDATE kv SET v = 1 WHERE k IN (1, 2) IF v = 1")
    with pytest.raises(InvalidRequest, match="IN on the partition key is not supported with conditional deletions"):
        kv.execute("DELETE FROM kv WHERE k IN (1, 2) IF v = 1")
    with pytest.raises(
        InvalidRequest, match="IN on the clustering key columns is not supported with conditional updates"
    ):
        ck.execute("UPDATE ck SET v = 1 WHERE k = 1 AND c IN (1, 2) IF v = 1")


# --- DELETE ... IF ----------------------------------------------------------------------------


def test_delete_if_exists_and_if_condition(kv):
    assert answer(kv.execute("DELETE FROM kv WHERE k = 1 IF EXISTS")) == (["[applied]"], [(False,)])
    kv.execute("INSERT INTO kv (k, v, w) VALUES (1, 10, 'a')")
    assert answer(kv.execute("DELETE FROM kv WHERE k = 1 IF v = 11")) == (["[applied]", "v"], [(False, 10)])
    assert answer(kv.execute("DELETE w FROM kv WHERE k = 1 IF v = 10")) == (["[applied]"], [(True,)])
    assert list(kv.execute("SELECT k, v, w FROM kv WHERE k = 1")) == [(1, 10, None)]
    assert kv.execute("DELETE FROM kv WHERE k = 1 IF EXISTS").was_applied
    assert kv.execute("SELECT * FROM kv WHERE k = 1").one() is None


def test_delete_of_a_range_with_regular_conditions_is_refused(ck):
    with pytest.raises(
        InvalidRequest,
        match="DELETE statements must restrict all PRIMARY KEY columns with equality relations",
    ):
        ck.execute("DELETE FROM ck WHERE k = 1 IF v = 1")


# --- collections and user types ------------------------------------------------------------


@pytest.fixture
def coll(ks):
    ks.session.execute("CREATE TYPE addr (street text, n int)")
    ks.session.execute(
        "CREATE TABLE coll (k int PRIMARY KEY, l list<text>, m map<text, int>, st set<int>, "
        "fl frozen<list<int>>, a addr, fa frozen<addr>)"
    )
    ks.session.execute(
        "INSERT INTO coll (k, l, m, st, fl, a, fa) VALUES (1, ['x', 'y'], {'a': 1, 'b': 2}, {1, 2}, "
        "[1, 2], {street: 'main', n: 5}, {street: 'side', n: 7})"
    )
    return ks.session


@pytest.mark.parametrize(
    "condition, holds",
    [
        ("m['a'] = 1", True),
        ("m['a'] = 2", False),
        ("m['zz'] = null", True),
        ("m['b'] > 1", True),
        ("m['a'] IN (5, 1)", True),
        ("l[0] = 'x'", True),
        ("l[1] = 'x'", False),
        ("l[5] = null", True),
        ("fl[1] = 2", True),
        ("m = {'a': 1, 'b': 2}", True),
        ("m = {'a': 1}", False),
        ("m > {'a': 1}", True),
        ("l = ['x', 'y']", True),
        ("l < ['x', 'z']", True),
        ("st = {2, 1}", True),
        ("st != {1}", True),
        ("fl = [1, 2]", True),
        ("a.street = 'main'", True),
        ("a.n > 5", False),
        ("fa.n = 7", True),
        ("fa.street IN ('side', 'x')", True),
        ("a = {street: 'main', n: 5}", True),
        ("m CONTAINS KEY 'b'", True),
        ("st CONTAINS 3", False),
    ],
)
def test_collection_and_field_conditions(coll, condition, holds):
    assert coll.execute(f"UPDATE coll SET m['c'] = 3 WHERE k = 1 IF {condition}").was_applied is holds


def test_an_empty_collection_compares_as_null_and_as_empty(coll):
    coll.execute("INSERT INTO coll (k) VALUES (2)")
    assert coll.execute("UPDATE coll SET m['c'] = 3 WHERE k = 2 IF l = null").was_applied
    assert coll.execute("UPDATE coll SET m['d'] = 4 WHERE k = 2 IF st = {}").was_applied
    # To an ordering, an absent collection is null (Cassandra 5.0.6 answers false).
    assert not coll.execute("UPDATE coll SET m['e'] = 5 WHERE k = 2 IF l < ['a']").was_applied


def test_element_access_on_a_set_is_refused(coll):
    with pytest.raises(InvalidRequest, match="Invalid element access syntax for set column st"):
        coll.execute("UPDATE coll SET m['c'] = 3 WHERE k = 1 IF st[1] = 1")


def test_failed_collection_condition_shows_the_whole_column(coll):
    rs = coll.execute("UPDATE coll SET l = ['q'] WHERE k = 1 IF m['a'] = 9")
    assert answer(rs) == (["[applied]", "m"], [(False, {"a": 1, "b": 2})])


def test_list_element_set_by_index_in_a_conditional_update(coll):
    assert coll.execute("UPDATE coll SET l[1] = 'Y' WHERE k = 1 IF m['a'] = 1").was_applied
    assert coll.execute("SELECT l FROM coll WHERE k = 1").one()[0] == ["x", "Y"]


# --- static columns ------------------------------------------------------------------------


def test_static_column_conditions(ck):
    # A static-only update with a static condition: the partition's static row.
    assert ck.execute("UPDATE ck SET s = 1 WHERE k = 1 IF s = null").was_applied
    assert answer(ck.execute("UPDATE ck SET s = 2 WHERE k = 1 IF s = 5")) == (["[applied]", "s"], [(False, 1)])
    ck.execute("INSERT INTO ck (k, c, v) VALUES (1, 1, 10)")
    # A row update conditioned on the static column and a regular one.
    rs = ck.execute("UPDATE ck SET v = 11 WHERE k = 1 AND c = 1 IF s = 1 AND v = 10")
    assert rs.was_applied
    rs = ck.execute("UPDATE ck SET v = 12 WHERE k = 1 AND c = 1 IF s = 1 AND v = 99")
    # The regular column's condition is shown before the static one's, whatever their order.
    assert answer(rs) == (["[applied]", "v", "s"], [(False, 11, 1)])


def test_insert_if_not_exists_of_a_clustering_row_under_a_static_row(ck):
    ck.execute("UPDATE ck SET s = 1 WHERE k = 1")
    assert ck.execute("INSERT INTO ck (k, c, v) VALUES (1, 1, 10) IF NOT EXISTS").was_applied
    rs = ck.execute("INSERT INTO ck (k, c, v, s) VALUES (1, 1, 20, 2) IF NOT EXISTS")
    assert answer(rs) == (["[applied]", "k", "c", "s", "v"], [(False, 1, 1, 1, 10)])


# --- prepared statements -------------------------------------------------------------------


def test_prepared_conditional_statements_bind_condition_values(kv):
    insert = kv.prepare("INSERT INTO kv (k, v, w) VALUES (?, ?, ?) IF NOT EXISTS")
    update = kv.prepare("UPDATE kv SET v = ? WHERE k = ? IF v = ? AND w IN ?")
    # Cassandra prepares a conditional statement with no result columns: each EXECUTE sends
    # the columns of its own answer.
    assert not insert.result_metadata
    assert not update.result_metadata
    assert [c.name for c in update.column_metadata] == ["v", "k", "v", "in(w)"]
    assert kv.execute(insert, (1, 10, "a")).was_applied
    rs = kv.execute(insert, (1, 11, "b"))
    assert answer(rs) == (["[applied]", "k", "v", "w"], [(False, 1, 10, "a")])
    assert kv.execute(update, (20, 1, 10, ["a", "z"])).was_applied
    rs = kv.execute(update, (30, 1, 10, ["a"]))
    assert answer(rs) == (["[applied]", "v", "w"], [(False, 20, "a")])
    assert kv.execute(update, (30, 1, 20, ["a"])).was_applied


def test_prepared_condition_on_a_map_element(ks):
    ks.session.execute("CREATE TABLE pm (k int PRIMARY KEY, m map<text, int>)")
    ks.session.execute("INSERT INTO pm (k, m) VALUES (1, {'a': 1})")
    stmt = ks.session.prepare("UPDATE pm SET m[?] = ? WHERE k = ? IF m[?] = ?")
    assert [c.name for c in stmt.column_metadata] == ["key(m)", "value(m)", "k", "key(m)", "value(m)"]
    assert ks.session.execute(stmt, ("b", 2, 1, "a", 1)).was_applied
    assert not ks.session.execute(stmt, ("c", 3, 1, "a", 5)).was_applied


# --- BATCH ---------------------------------------------------------------------------------


def test_conditional_batch_is_all_or_nothing(ck):
    ck.execute("INSERT INTO ck (k, c, v) VALUES (1, 1, 10)")
    rs = ck.execute(
        "BEGIN BATCH "
        "UPDATE ck SET v = 11 WHERE k = 1 AND c = 1 IF v = 10; "
        "INSERT INTO ck (k, c, v) VALUES (1, 2, 20); "
        "APPLY BATCH"
    )
    assert answer(rs) == (["[applied]"], [(True,)])
    rs = ck.execute(
        "BEGIN BATCH "
        "UPDATE ck SET v = 12 WHERE k = 1 AND c = 1 IF v = 11; "
        "UPDATE ck SET v = 21 WHERE k = 1 AND c = 2 IF v = 99; "
        "APPLY BATCH"
    )
    # Not applied: the primary key columns first, then the condition columns, one row per row.
    assert answer(rs) == (["[applied]", "k", "c", "v"], [(False, 1, 1, 11), (False, 1, 2, 20)])
    assert list(ck.execute("SELECT c, v FROM ck WHERE k = 1")) == [(1, 11), (2, 20)]


def test_conditional_batch_with_if_not_exists_shows_every_column(kv):
    kv.execute("INSERT INTO kv (k, v, w) VALUES (1, 10, 'a')")
    rs = kv.execute(
        "BEGIN BATCH "
        "INSERT INTO kv (k, v) VALUES (1, 5) IF NOT EXISTS; "
        "UPDATE kv SET w = 'q' WHERE k = 1; "
        "APPLY BATCH"
    )
    assert answer(rs) == (["[applied]", "k", "v", "w"], [(False, 1, 10, "a")])


def test_conditional_batch_across_partitions_or_tables_is_refused(kv, ck):
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple partitions"):
        kv.execute(
            "BEGIN BATCH "
            "UPDATE kv SET v = 1 WHERE k = 1 IF v = 1; "
            "UPDATE kv SET v = 1 WHERE k = 2; "
            "APPLY BATCH"
        )
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple tables"):
        kv.execute(
            "BEGIN BATCH "
            "UPDATE kv SET v = 1 WHERE k = 1 IF v = 1; "
            "UPDATE ck SET v = 1 WHERE k = 1 AND c = 1; "
            "APPLY BATCH"
        )


def test_conditional_batch_with_custom_timestamp_is_refused(kv):
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional BATCH"):
        kv.execute(
            "BEGIN BATCH USING TIMESTAMP 5 "
            "UPDATE kv SET v = 1 WHERE k = 1 IF v = 1; "
            "APPLY BATCH"
        )


def test_conditional_batch_message_of_prepared_statements(kv):
    insert = kv.prepare("INSERT INTO kv (k, v) VALUES (?, ?) IF NOT EXISTS")
    update = kv.prepare("UPDATE kv SET w = ? WHERE k = ?")
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    batch.add(insert, (4, 40))
    batch.add(update, ("w4", 4))
    rs = kv.execute(batch)
    assert rs.was_applied
    assert list(kv.execute("SELECT k, v, w FROM kv WHERE k = 4")) == [(4, 40, "w4")]
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    batch.add(insert, (4, 41))
    batch.add(update, ("never", 4))
    rs = kv.execute(batch)
    assert answer(rs) == (["[applied]", "k", "v", "w"], [(False, 4, 40, "w4")])
    assert kv.execute("SELECT w FROM kv WHERE k = 4").one()[0] == "w4"


# --- SERIAL reads and serial consistency ---------------------------------------------------


def test_select_at_serial_reads_one_partition(kv):
    kv.execute("INSERT INTO kv (k, v) VALUES (1, 10) IF NOT EXISTS")
    for level in (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL):
        stmt = SimpleStatement("SELECT k, v FROM kv WHERE k = 1", consistency_level=level)
        assert list(kv.execute(stmt)) == [(1, 10)]
    # Cassandra 5.0 (Paxos v2) reads several partitions, and ranges, at SERIAL too.
    stmt = SimpleStatement("SELECT k, v FROM kv WHERE k IN (1, 2)", consistency_level=ConsistencyLevel.SERIAL)
    assert list(kv.execute(stmt)) == [(1, 10)]
    stmt = SimpleStatement("SELECT k, v FROM kv WHERE token(k) >= token(1) AND token(k) <= token(1)",
                           consistency_level=ConsistencyLevel.SERIAL)
    assert list(kv.execute(stmt)) == [(1, 10)]


def test_local_serial_conditional_update(kv):
    stmt = SimpleStatement(
        "INSERT INTO kv (k, v) VALUES (9, 1) IF NOT EXISTS",
        serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
    )
    assert kv.execute(stmt).was_applied
    assert not kv.execute(stmt).was_applied


def test_static_only_insert_if_not_exists_and_partition_delete_if_static(ck):
    assert ck.execute("INSERT INTO ck (k, s) VALUES (2, 5) IF NOT EXISTS").was_applied
    assert answer(ck.execute("INSERT INTO ck (k, s) VALUES (2, 6) IF NOT EXISTS")) == (
        ["[applied]", "k", "c", "s", "v"],
        [(False, 2, None, 5, None)],
    )
    ck.execute("INSERT INTO ck (k, c, v) VALUES (2, 1, 10)")
    # A DELETE of the whole partition deletes regular columns: refused with any condition.
    with pytest.raises(
        InvalidRequest,
        match="DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to "
        "delete non static columns",
    ):
        ck.execute("DELETE FROM ck WHERE k = 2 IF s = 4")


def test_conditional_batch_message_with_bound_conditions(ck):
    update = ck.prepare("UPDATE ck SET v = ? WHERE k = ? AND c = ? IF v = ?")
    ck.execute("INSERT INTO ck (k, c, v) VALUES (3, 1, 1)")
    ck.execute("INSERT INTO ck (k, c, v) VALUES (3, 2, 2)")
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    batch.add(update, (10, 3, 1, 1))
    batch.add(update, (20, 3, 2, 99))
    rs = ck.execute(batch)
    assert answer(rs) == (["[applied]", "k", "c", "v"], [(False, 3, 1, 1), (False, 3, 2, 2)])
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    batch.add(update, (10, 3, 1, 1))
    batch.add(update, (20, 3, 2, 2))
    assert ck.execute(batch).was_applied
    assert list(ck.execute("SELECT c, v FROM ck WHERE k = 3")) == [(1, 10), (2, 20)]
    other = BatchStatement(batch_type=BatchType.LOGGED)
    other.add(update, (1, 3, 1, 10))
    other.add(update, (1, 4, 1, 1))
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple partitions"):
        ck.execute(other)


@pytest.fixture
def ver(ks):
    ks.session.execute("CREATE TABLE ver (id int, k text, version int static, v text, PRIMARY KEY (id, k))")
    return ks.session


def test_static_conditions_in_a_batch_show_the_partition_s_first_row(ver):
    ver.execute("INSERT INTO ver (id, k, v) VALUES (0, 'k1', 'foo')")
    ver.execute("INSERT INTO ver (id, k, v, version) VALUES (0, 'k2', 'bar', 2)")
    # Only the static row is judged: the answer shows the partition's first row with it.
    rs = ver.execute(
        "BEGIN BATCH "
        "UPDATE ver SET v = 'foobar' WHERE id = 0 AND k = 'k1'; "
        "UPDATE ver SET version = 3 WHERE id = 0 IF version = 1; "
        "APPLY BATCH"
    )
    assert answer(rs) == (["[applied]", "id", "k", "version"], [(False, 0, "k1", 2)])
    rs = ver.execute(
        "BEGIN BATCH "
        "UPDATE ver SET version = 4 WHERE id = 0 IF version = 2; "
        "UPDATE ver SET v = 'row1' WHERE id = 0 AND k = 'k1' IF v = 'nope'; "
        "UPDATE ver SET v = 'row2' WHERE id = 0 AND k = 'k2' IF v = 'bar'; "
        "APPLY BATCH"
    )
    assert answer(rs) == (
        ["[applied]", "id", "k", "version", "v"],
        [(False, 0, "k1", 2, "foo"), (False, 0, "k2", 2, "bar")],
    )


def test_static_column_set_under_a_condition_on_a_row(ver):
    ver.execute("INSERT INTO ver (id, k, v) VALUES (1, 'a', 'x')")
    # Setting only the static column, conditioned on a regular column of one row.
    assert answer(ver.execute("UPDATE ver SET version = 5 WHERE id = 1 AND k = 'a' IF v = 'y'")) == (
        ["[applied]", "v"],
        [(False, "x")],
    )
    assert ver.execute("UPDATE ver SET version = 5 WHERE id = 1 AND k = 'a' IF v = 'x'").was_applied
    assert list(ver.execute("SELECT id, k, version, v FROM ver WHERE id = 1")) == [(1, "a", 5, "x")]
    assert ver.execute("DELETE version FROM ver WHERE id = 1 AND k = 'a' IF v = 'x'").was_applied
    assert list(ver.execute("SELECT id, k, version, v FROM ver WHERE id = 1")) == [(1, "a", None, "x")]
    with pytest.raises(InvalidRequest, match="Some clustering keys are missing: k"):
        ver.execute("UPDATE ver SET version = 6 WHERE id = 1 IF v = 'x'")
    with pytest.raises(
        InvalidRequest,
        match="DELETE statements must restrict all PRIMARY KEY columns with equality relations "
        "in order to use IF condition on non static columns",
    ):
        ver.execute("DELETE version FROM ver WHERE id = 1 IF v = 'x' AND version = 1")
    with pytest.raises(InvalidRequest, match="Invalid 'unset' value in condition"):
        ver.execute(ver.prepare("UPDATE ver SET version = 6 WHERE id = 1 IF version = ?"), [UNSET_VALUE])


def test_static_only_insert_if_not_exists_under_existing_rows(ver):
    ver.execute("INSERT INTO ver (id, k, v) VALUES (2, 'foo', 'foo')")
    rs = ver.execute("INSERT INTO ver (id, k, version) VALUES (2, 'foo', 1) IF NOT EXISTS")
    assert answer(rs) == (["[applied]", "id", "k", "version", "v"], [(False, 2, "foo", None, "foo")])
    assert ver.execute("INSERT INTO ver (id, version) VALUES (2, 1) IF NOT EXISTS").was_applied
    assert list(ver.execute("SELECT * FROM ver WHERE id = 2")) == [(2, "foo", 1, "foo")]
