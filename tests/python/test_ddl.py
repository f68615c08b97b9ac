"""Schema statements as a Cassandra user writes them, and what they leave in system_schema."""

import pytest
from cassandra import AlreadyExists, InvalidRequest

SIMPLE = "org.apache.cassandra.locator.SimpleStrategy"
NTS = "org.apache.cassandra.locator.NetworkTopologyStrategy"


def replication(session, name):
    row = session.execute("SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = %s",
                          [name]).one()
    assert row is not None, f"keyspace {name} is not in system_schema.keyspaces"
    return dict(row.replication), row.durable_writes


ONE_REPLICA = "{'class': 'SimpleStrategy', 'replication_factor': 1}"


def test_create_keyspace_simple_strategy_is_stored(session, fresh_name):
    name = fresh_name("ddl_simple")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    assert replication(session, name) == ({"class": SIMPLE, "replication_factor": "1"}, True)


def test_create_keyspace_network_topology_is_stored(session, fresh_name):
    name = fresh_name("ddl_nts")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = "
                    "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1} AND durable_writes = false")
    assert replication(session, name) == ({"class": NTS, "datacenter1": "1"}, False)


def test_alter_keyspace_changes_replication(session, cluster, fresh_name):
    name = fresh_name("ddl_alter")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    session.execute(f"ALTER KEYSPACE {name} WITH replication = "
                    "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}")
    assert replication(session, name)[0] == {"class": NTS, "datacenter1": "1"}
    assert cluster.metadata.keyspaces[name].replication_strategy.dc_replication_factors == {"datacenter1": 1}


def test_drop_keyspace_removes_it_and_its_tables(session, cluster, fresh_name):
    name = fresh_name("ddl_drop")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {name}.t (k, v) VALUES (1, 1)")
    session.execute(f"DROP KEYSPACE {name}")
    names = {r.keyspace_name for r in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert name not in names
    assert name not in cluster.metadata.keyspaces
    assert list(session.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s", [name])) == []
    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT * FROM {name}.t")


def test_recreated_keyspace_does_not_resurrect_old_rows(session, fresh_name):
    """Dropping a keyspace drops its data: a new table of the same name starts empty."""
    name = fresh_name("ddl_again")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {name}.t (k, v) VALUES (1, 1)")
    session.execute(f"DROP KEYSPACE {name}")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    assert list(session.execute(f"SELECT * FROM {name}.t")) == []


def test_duplicate_keyspace_is_already_exists(session, fresh_name):
    name = fresh_name("ddl_dup")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    with pytest.raises(AlreadyExists) as e:
        session.execute(f"CREATE KEYSPACE {name} WITH replication = {ONE_REPLICA}")
    assert e.value.keyspace == name
    assert e.value.table in ("", None)
    # IF NOT EXISTS turns the same statement into a no-op, and keeps the first definition.
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = "
                    "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}")
    assert replication(session, name)[0]["class"] == SIMPLE


def test_duplicate_table_is_already_exists(ks):
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    with pytest.raises(AlreadyExists) as e:
        ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    assert (e.value.keyspace, e.value.table) == (ks.name, "t")
    ks.session.execute("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY, v text)")
    assert ks.session.cluster.metadata.keyspaces[ks.name].tables["t"].columns["v"].cql_type == "int"


def test_drop_if_exists_on_missing_objects_is_a_no_op(ks):
    ks.session.execute("DROP TABLE IF EXISTS never_made")
    ks.session.execute("DROP KEYSPACE IF EXISTS never_made_ks")
    with pytest.raises(InvalidRequest):
        ks.session.execute("DROP TABLE never_made")
    with pytest.raises(InvalidRequest):
        ks.session.execute("DROP KEYSPACE never_made_ks")


def test_composite_partition_key_and_clustering_order(ks):
    ks.session.execute("CREATE TABLE t (a int, b text, c int, d int, v text, PRIMARY KEY ((a, b), c, d)) "
                       "WITH CLUSTERING ORDER BY (c DESC, d ASC)")
    for c in range(3):
        for d in range(3):
            ks.session.execute("INSERT INTO t (a, b, c, d, v) VALUES (1, 'x', %s, %s, %s)", [c, d, f"{c}{d}"])
    ks.session.execute("INSERT INTO t (a, b, c, d, v) VALUES (1, 'y', 0, 0, 'other partition')")
    rows = [(r.c, r.d) for r in ks.session.execute("SELECT c, d FROM t WHERE a = 1 AND b = 'x'")]
    assert rows == [(2, 0), (2, 1), (2, 2), (1, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2)]
    # The whole partition key is needed to name a partition.
    with pytest.raises(InvalidRequest):
        ks.session.execute("SELECT * FROM t WHERE a = 1")


def test_alter_table_add_and_drop_columns(ks):
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    ks.session.execute("INSERT INTO t (k, v) VALUES (1, 10)")
    ks.session.execute("ALTER TABLE t ADD extra text")
    assert tuple(ks.session.execute("SELECT k, v, extra FROM t WHERE k = 1").one()) == (1, 10, None)
    ks.session.execute("UPDATE t SET extra = 'hello' WHERE k = 1")
    assert ks.session.execute("SELECT extra FROM t WHERE k = 1").one().extra == "hello"

    ks.session.execute("ALTER TABLE t DROP v")
    row = ks.session.execute("SELECT * FROM t WHERE k = 1").one()
    assert row._fields == ("k", "extra")
    with pytest.raises(InvalidRequest, match="Undefined column name v"):
        ks.session.execute("SELECT v FROM t")


def test_dropped_column_data_does_not_return_when_readded(ks):
    """Cassandra records drop time: cells written before a DROP stay dead after a re-ADD."""
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    ks.session.execute("INSERT INTO t (k, v) VALUES (1, 10)")
    ks.session.execute("ALTER TABLE t DROP v")
    ks.session.execute("ALTER TABLE t ADD v int")
    assert ks.session.execute("SELECT v FROM t WHERE k = 1").one().v is None


def test_alter_table_with_options_is_stored(ks):
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int) WITH comment = 'first' AND gc_grace_seconds = 3600")
    ks.session.execute("ALTER TABLE t WITH comment = 'second' AND default_time_to_live = 86400")
    row = ks.session.execute(
        "SELECT comment, gc_grace_seconds, default_time_to_live FROM system_schema.tables "
        "WHERE keyspace_name = %s AND table_name = 't'", [ks.name]).one()
    assert (row.comment, row.gc_grace_seconds, row.default_time_to_live) == ("second", 3600, 86400)
    assert ks.session.cluster.metadata.keyspaces[ks.name].tables["t"].options["comment"] == "second"


def test_use_sets_the_default_keyspace(session, ks):
    ks.session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    session.execute(f"USE {ks.name}")
    try:
        session.execute("INSERT INTO t (k, v) VALUES (1, 2)")
        assert session.execute("SELECT v FROM t WHERE k = 1").one().v == 2
        assert session.keyspace == ks.name
    finally:
        session.execute("USE system")


def test_use_of_missing_keyspace_is_invalid(session):
    with pytest.raises(InvalidRequest, match="(?i)keyspace '?no_such_ks'? does not exist"):
        session.execute("USE no_such_ks")


def test_truncate_removes_every_row(ks):
    ks.session.execute("CREATE TABLE t (k int, c int, v int, PRIMARY KEY (k, c))")
    for k in range(20):
        for c in range(5):
            ks.session.execute("INSERT INTO t (k, c, v) VALUES (%s, %s, 0)", [k, c])
    ks.session.execute("TRUNCATE t")
    assert list(ks.session.execute("SELECT * FROM t")) == []
    ks.session.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 1)")
    assert [tuple(r) for r in ks.session.execute("SELECT * FROM t")] == [(1, 1, 1)]
    ks.session.execute("TRUNCATE TABLE t")
    assert list(ks.session.execute("SELECT * FROM t")) == []


def test_quoted_identifiers_keep_their_case(ks):
    ks.session.execute('CREATE TABLE "MixedCase" ("Key" int PRIMARY KEY, "Value" text, plain int)')
    ks.session.execute('INSERT INTO "MixedCase" ("Key", "Value", PLAIN) VALUES (1, \'v\', 2)')
    row = ks.session.execute('SELECT "Key", "Value", plain FROM "MixedCase"').one()
    assert row._asdict() == {"Key": 1, "Value": "v", "plain": 2}
    assert "MixedCase" in ks.session.cluster.metadata.keyspaces[ks.name].tables
    with pytest.raises(InvalidRequest):
        ks.session.execute("SELECT * FROM mixedcase")


def test_concurrent_creates_of_the_same_table(node, ks):
    """Eight clients race to create one table: IF NOT EXISTS succeeds for all of them, exactly
    one plain CREATE wins and the others get AlreadyExists, and one table results."""
    import threading

    outcomes = []
    lock = threading.Lock()

    def create(cql):
        cluster, s = node.connect(ks.name)
        try:
            s.execute(cql)
            result = "created"
        except AlreadyExists:
            result = "exists"
        except Exception as e:  # reported in the assertion below
            result = repr(e)
        finally:
            cluster.shutdown()
        with lock:
            outcomes.append(result)

    def race(cql):
        outcomes.clear()
        threads = [threading.Thread(target=create, args=(cql,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        return sorted(outcomes)

    assert race("CREATE TABLE IF NOT EXISTS racy (k int PRIMARY KEY, v int)") == ["created"] * 8
    assert race("CREATE TABLE plain (k int PRIMARY KEY, v int)") == ["created"] + ["exists"] * 7
    names = [r.table_name for r in ks.session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", [ks.name])]
    assert sorted(names) == ["plain", "racy"]
