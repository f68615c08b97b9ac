"""Cassandra 5.0's limits on one request, with its defaults and messages, seen by the Python driver.

- batch_size_warn_threshold (5KiB): a batch over several partitions whose data is larger
  succeeds, with "Batch for [ks.t] is of size X, exceeding specified threshold of Y by Z." in the
  response's warnings (`response_future.warnings`).
- batch_size_fail_threshold (50KiB): larger still, it is refused with InvalidRequest "Batch too
  large" and nothing of it is applied.
- A batch within one partition is one mutation in Cassandra's terms and is never checked.
- partition_keys_in_select_* (off by default) and in_select_cartesian_product_* (fail at 100000
  in hayate, off in Cassandra): warn and refuse with the "Guardrail ... violated: ..." messages.
- A node started with its own [guardrails] thresholds honours them.
"""

import pytest
from cassandra import InvalidRequest
from cassandra.query import BatchStatement, BatchType

VALUE = "x" * 100


@pytest.fixture
def t(ks):
    ks.session.execute("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
    return ks


def batch_of(session, rows, *, partitions=True, kind=BatchType.UNLOGGED, offset=0):
    """A BATCH message of `rows` inserts of a 100-byte value: one partition per row, or all rows
    in partition `offset`."""
    insert = session.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?)")
    batch = BatchStatement(batch_type=kind)
    for i in range(rows):
        key, c = (offset + i, 0) if partitions else (offset, i)
        batch.add(insert, (key, c, VALUE))
    return batch


def warnings_of(result):
    return result.response_future.warnings or []


def count(session, where):
    return session.execute(f"SELECT COUNT(*) FROM t WHERE {where}").one()[0]


def test_a_small_batch_has_no_warning(t):
    result = t.session.execute(batch_of(t.session, 10))
    assert warnings_of(result) == []


@pytest.mark.parametrize("kind", [BatchType.LOGGED, BatchType.UNLOGGED])
def test_a_big_batch_warns(t, kind):
    result = t.session.execute(batch_of(t.session, 50, kind=kind))
    warnings = warnings_of(result)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"Batch for [{t.name}.t] is of size "), warnings
    assert "exceeding specified threshold of 5120 by" in warnings[0], warnings
    assert count(t.session, "k IN (0, 49)") == 2, "a warned batch is applied"


def test_a_big_batch_in_cql_text_warns(t):
    statements = " ".join(f"INSERT INTO t (k, c, v) VALUES ({k}, 0, '{VALUE}');" for k in range(50))
    result = t.session.execute(f"BEGIN BATCH {statements} APPLY BATCH")
    assert any("exceeding specified threshold of 5120" in w for w in warnings_of(result))


@pytest.mark.parametrize("kind", [BatchType.LOGGED, BatchType.UNLOGGED])
def test_a_huge_batch_is_refused_and_nothing_of_it_is_applied(t, kind):
    # 20,000 rows: accepted before the thresholds existed.
    with pytest.raises(InvalidRequest, match="Batch too large"):
        t.session.execute(batch_of(t.session, 20_000, kind=kind, offset=1000))
    assert count(t.session, "k IN (1000, 1001, 10000, 20999)") == 0
    rows = list(t.session.execute("SELECT k FROM t"))
    assert rows == [], f"{len(rows)} rows of a refused batch were applied"


def test_a_huge_batch_in_cql_text_is_refused(t):
    statements = " ".join(f"INSERT INTO t (k, c, v) VALUES ({k}, 0, '{VALUE}');" for k in range(500))
    with pytest.raises(InvalidRequest, match="Batch too large"):
        t.session.execute(f"BEGIN UNLOGGED BATCH {statements} APPLY BATCH")
    assert list(t.session.execute("SELECT k FROM t")) == []


@pytest.mark.parametrize("kind", [BatchType.LOGGED, BatchType.UNLOGGED])
def test_a_batch_within_one_partition_is_not_checked(t, kind):
    """Cassandra checks only batches of more than one mutation (CASSANDRA-10876): one partition,
    whatever its size and whether logged or not, is neither warned nor refused."""
    result = t.session.execute(batch_of(t.session, 1000, partitions=False, kind=kind, offset=7))
    assert warnings_of(result) == []
    assert count(t.session, "k = 7") == 1000


def test_an_in_list_over_the_cartesian_default_is_refused(ks):
    """hayate keeps its bound of 100000 keys a statement makes as in_select_cartesian_product's
    fail threshold; (k1, k2) IN lists of 400 and 300 values make 120000 partition keys."""
    ks.session.execute("CREATE TABLE t2 (k1 int, k2 int, v int, PRIMARY KEY ((k1, k2)))")
    k1 = ", ".join(str(i) for i in range(400))
    k2 = ", ".join(str(i) for i in range(300))
    with pytest.raises(InvalidRequest) as e:
        ks.session.execute(f"SELECT * FROM t2 WHERE k1 IN ({k1}) AND k2 IN ({k2})")
    assert (
        "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product "
        "of the IN restrictions on partition key produces 120000 values, this exceeds fail threshold of 100000."
    ) in str(e.value)


def test_in_lists_within_the_defaults_have_no_warning(t):
    keys = ", ".join(str(i) for i in range(200))
    result = t.session.execute(f"SELECT * FROM t WHERE k IN ({keys})")
    assert warnings_of(result) == []


GUARDRAILS = """
[guardrails]
batch_size_warn_threshold = "1KiB"
batch_size_fail_threshold = "2KiB"
partition_keys_in_select_warn_threshold = 3
partition_keys_in_select_fail_threshold = 5
in_select_cartesian_product_warn_threshold = 10
in_select_cartesian_product_fail_threshold = 25
"""


@pytest.fixture
def tuned(node_factory, fresh_name):
    """A node of its own with the thresholds above, and a session in a fresh keyspace."""
    n = node_factory(start=False)
    n.config_path.write_text(n.config_path.read_text() + GUARDRAILS)
    n.start()
    _, session = node_factory.connect(n)
    name = fresh_name("guardrails")
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    session.set_keyspace(name)
    session.execute("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))")
    return n, session


def test_a_node_honours_its_own_thresholds(tuned):
    node, session = tuned
    # 8 rows of 129 bytes: over 1KiB; 20 rows: over 2KiB.
    result = session.execute(batch_of(session, 8))
    assert any("exceeding specified threshold of 1024 by" in w for w in warnings_of(result))
    with pytest.raises(InvalidRequest, match="Batch too large"):
        session.execute(batch_of(session, 20, offset=100))
    assert count(session, "k IN (100, 119)") == 0
    assert "exceeding specified threshold of 2.000KiB" in node.log_tail(200), "the refusal is logged"

    result = session.execute("SELECT * FROM t WHERE k IN (1, 2, 3, 4)")
    assert warnings_of(result) == [
        "Guardrail partition_keys_in_select violated: Query with partition keys in IN clause on table t, "
        "with number of partition keys 4 exceeds warning threshold of 3."
    ]
    with pytest.raises(InvalidRequest) as e:
        session.execute("SELECT * FROM t WHERE k IN (1, 2, 3, 4, 5, 6)")
    assert (
        "Guardrail partition_keys_in_select violated: Aborting query with partition keys in IN clause on "
        "table t, number of partition keys 6 exceeds fail threshold of 5."
    ) in str(e.value)

    result = session.execute("SELECT * FROM t WHERE k = 1 AND c IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)")
    assert warnings_of(result) == [
        "Guardrail in_select_cartesian_product violated: The cartesian product of the IN restrictions on "
        "clustering key produces 11 values, this exceeds warning threshold of 10."
    ]
    cs = ", ".join(str(i) for i in range(26))
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"DELETE FROM t WHERE k = 1 AND c IN ({cs})")
    assert (
        "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product of the "
        "IN restrictions on clustering key produces 26 values, this exceeds fail threshold of 25."
    ) in str(e.value)


def test_a_bad_threshold_stops_the_node_with_its_key(node_factory):
    n = node_factory(start=False)
    n.config_path.write_text(
        n.config_path.read_text()
        + "[guardrails]\nin_select_cartesian_product_warn_threshold = 30\n"
        + "in_select_cartesian_product_fail_threshold = 25\n"
    )
    proc = n.spawn()
    assert proc.wait(timeout=30) != 0
    log = n.log_tail(50)
    assert "guardrails.in_select_cartesian_product_warn_threshold = 30" in log, log
