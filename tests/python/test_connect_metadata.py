"""A Cassandra driver connects and finds what it expects in the system tables.

On connect every driver reads `system.local`, `system.peers(_v2)` and the `system_schema` tables,
builds a token map from the tokens and the partitioner, and keeps table metadata current by
re-reading `system_schema` after each schema change. If any of that is off, applications break in
ways far from the cause (token-aware routing silently off, `cluster.metadata` stale), so these
tests look at each piece directly.
"""

import uuid

import pytest
from cassandra.cluster import Cluster

import cqlwire

MURMUR3 = "org.apache.cassandra.dht.Murmur3Partitioner"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def local_row(session):
    rows = list(session.execute("SELECT * FROM system.local WHERE key = 'local'"))
    assert len(rows) == 1, f"system.local must have exactly the row 'local', got {rows}"
    return rows[0]


def test_system_local_has_the_fields_drivers_read(session, node):
    row = local_row(session)
    assert row.key == "local"
    assert row.cluster_name, "cluster_name must be set"
    assert row.partitioner == MURMUR3
    assert row.data_center == "datacenter1"
    assert row.rack, "rack must be set"
    assert isinstance(row.host_id, uuid.UUID)
    assert isinstance(row.schema_version, uuid.UUID)
    assert row.cql_version.startswith("3."), f"cql_version {row.cql_version!r} should be 3.x"
    # cqlsh 6 sends DESCRIBE to the server only if release_version is 4.0 or later.
    major = int(row.release_version.split(".")[0])
    assert major >= 4, f"release_version {row.release_version!r} must report Cassandra 4 or later"
    assert str(row.rpc_address) == node.host
    assert str(row.broadcast_address) == node.host
    assert str(row.listen_address) == node.host


def test_system_local_tokens_are_murmur3_tokens(session):
    tokens = local_row(session).tokens
    assert tokens, "a node must own at least one token, or token-aware drivers have no ring"
    for t in tokens:
        assert isinstance(t, str), "tokens is a set<text> in Cassandra"
        assert INT64_MIN <= int(t) <= INT64_MAX, f"token {t} is outside Murmur3's range"


def test_one_node_has_no_peers(session):
    assert list(session.execute("SELECT * FROM system.peers")) == []
    assert list(session.execute("SELECT * FROM system.peers_v2")) == []


@pytest.mark.parametrize(
    "table",
    ["keyspaces", "tables", "columns", "types", "functions", "aggregates", "triggers", "indexes", "views"],
)
def test_driver_schema_queries_answer(session, table):
    """Each query the Python driver runs on connect; one failing makes `connect()` fail."""
    session.execute(f"SELECT * FROM system_schema.{table}")


def test_system_keyspaces_are_listed(session):
    names = {r.keyspace_name for r in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert {"system", "system_schema"} <= names


def test_cluster_metadata_describes_the_node(cluster, session):
    local = local_row(session)
    hosts = cluster.metadata.all_hosts()
    assert len(hosts) == 1
    host = hosts[0]
    assert host.is_up
    assert host.datacenter == "datacenter1"
    assert host.release_version == local.release_version
    assert cluster.metadata.cluster_name == local.cluster_name
    assert cluster.metadata.partitioner == MURMUR3


def test_token_map_routes_every_token_to_the_node(cluster, ks):
    """Token-aware routing needs the driver's token map: built from system.local's tokens."""
    token_map = cluster.metadata.token_map
    assert token_map is not None, "the driver built no token map (tokens or partitioner unusable)"
    assert len(token_map.ring) == len(local_row(ks.session).tokens)
    host = cluster.metadata.all_hosts()[0]
    for key in (b"a", b"\x00\x00\x00\x01", b"some longer partition key"):
        token = token_map.token_class.from_key(key)
        assert token_map.get_replicas(ks.name, token) == [host]


def test_metadata_follows_ddl(cluster, ks):
    ks.session.execute(
        "CREATE TABLE events (tenant text, day int, at timestamp, seq int, body text, tags set<text>, "
        "PRIMARY KEY ((tenant, day), at, seq)) WITH CLUSTERING ORDER BY (at DESC, seq ASC)"
    )
    table = cluster.metadata.keyspaces[ks.name].tables["events"]
    assert [c.name for c in table.partition_key] == ["tenant", "day"]
    assert [c.name for c in table.clustering_key] == ["at", "seq"]
    assert [c.is_reversed for c in table.clustering_key] == [True, False]
    types = {name: c.cql_type for name, c in table.columns.items()}
    assert types == {
        "tenant": "text", "day": "int", "at": "timestamp", "seq": "int", "body": "text", "tags": "set<text>",
    }
    assert "CLUSTERING ORDER BY (at DESC, seq ASC)" in table.export_as_string()

    ks.session.execute("ALTER TABLE events ADD note text")
    assert "note" in cluster.metadata.keyspaces[ks.name].tables["events"].columns
    ks.session.execute("DROP TABLE events")
    assert "events" not in cluster.metadata.keyspaces[ks.name].tables


def test_system_schema_columns_describe_key_kinds(ks):
    ks.session.execute("CREATE TABLE t (p1 int, p2 text, c1 int, c2 text, v blob, PRIMARY KEY ((p1, p2), c1, c2)) "
                       "WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC)")
    rows = ks.session.execute(
        "SELECT column_name, kind, position, clustering_order, type FROM system_schema.columns "
        "WHERE keyspace_name = %s AND table_name = 't'", [ks.name])
    got = {r.column_name: (r.kind, r.position, r.clustering_order, r.type) for r in rows}
    assert got == {
        "p1": ("partition_key", 0, "none", "int"),
        "p2": ("partition_key", 1, "none", "text"),
        "c1": ("clustering", 0, "asc", "int"),
        "c2": ("clustering", 1, "desc", "text"),
        "v": ("regular", -1, "none", "blob"),
    }


def test_driver_with_default_protocol_negotiates_down(node):
    """Most applications do not pin a protocol version: the driver starts at its newest (v5) and
    downgrades when the server answers with "Invalid or unsupported protocol version"."""
    cluster = Cluster([node.host], port=node.port, connect_timeout=5)
    try:
        session = cluster.connect()
        assert session.execute("SELECT release_version FROM system.local").one() is not None
        assert cluster.protocol_version in (4, 5)
    finally:
        cluster.shutdown()


def test_schema_and_data_survive_restart(node_factory):
    n = node_factory("restart_schema")
    cluster, session = node_factory.connect(n)
    session.execute("CREATE KEYSPACE kept WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE kept.t (k int, c text, v double, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")
    session.execute("INSERT INTO kept.t (k, c, v) VALUES (1, 'a', 1.5)")
    session.execute("INSERT INTO kept.t (k, c, v) VALUES (1, 'b', 2.5)")
    cluster.shutdown()

    n.restart()

    cluster, session = node_factory.connect(n)
    table = cluster.metadata.keyspaces["kept"].tables["t"]
    assert [c.name for c in table.primary_key] == ["k", "c"]
    assert [c.is_reversed for c in table.clustering_key] == [True]
    assert [tuple(r) for r in session.execute("SELECT c, v FROM kept.t WHERE k = 1")] == [("b", 2.5), ("a", 1.5)]


@pytest.mark.parametrize("options", [
    {"CQL_VERSION": "3.0.0"},
    {"CQL_VERSION": "3.4.6"},
    # The scylla Rust driver sends 4.0.0; Cassandra takes any version from 3.0.0 up.
    {"CQL_VERSION": "4.0.0"},
    {"CQL_VERSION": "3.0.0", "DRIVER_NAME": "test", "DRIVER_VERSION": "1.0", "THROW_ON_OVERLOAD": "1"},
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_startup_options_drivers_send_are_accepted(node, options):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        reply = conn.request(cqlwire.STARTUP, cqlwire.string_map(options))
    assert reply.opcode == cqlwire.READY, reply


@pytest.mark.parametrize("options,says", [
    ({}, "CQL_VERSION"),
    ({"CQL_VERSION": "2.0.0"}, "2.0.0"),
], ids=["missing", "2.0.0"])
def test_startup_without_a_usable_cql_version_is_a_protocol_error(node, options, says):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        reply = conn.request(cqlwire.STARTUP, cqlwire.string_map(options))
    code, message = reply.error()
    assert code == cqlwire.PROTOCOL_ERROR
    assert says in message, message


def test_schema_change_made_elsewhere_reaches_the_driver(node, fresh_name, session, cluster):
    """The driver REGISTERs for SCHEMA_CHANGE events on its control connection; a table created
    by another client shows up in its metadata without the application asking."""
    name = fresh_name("events")
    other_cluster, other = node.connect()
    try:
        other.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
        other.execute(f"CREATE TABLE {name}.made_elsewhere (k int PRIMARY KEY)")
    finally:
        other_cluster.shutdown()
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ks_meta = cluster.metadata.keyspaces.get(name)
        if ks_meta is not None and "made_elsewhere" in ks_meta.tables:
            return
        time.sleep(0.1)
    pytest.fail("the driver's metadata never saw the table created by another client (no SCHEMA_CHANGE event)")


def test_schema_version_changes_with_ddl(ks):
    before = local_row(ks.session).schema_version
    ks.session.execute("CREATE TABLE sv (k int PRIMARY KEY)")
    after = local_row(ks.session).schema_version
    assert before != after, "drivers detect schema changes by system.local's schema_version"


# system_schema.tables as Cassandra 5.0 defines it (SchemaKeyspace in cassandra-all 5.0.6).
# `read_repair_chance` and `dclocal_read_repair_chance` are no longer options but still columns,
# always 0: the DataStax Java driver 3.x, YCSB's, reads them for every table.
TABLES_COLUMNS_5_0 = {
    "keyspace_name", "table_name", "additional_write_policy", "allow_auto_snapshot",
    "bloom_filter_fp_chance", "caching", "cdc", "comment", "compaction", "compression",
    "crc_check_chance", "dclocal_read_repair_chance", "default_time_to_live", "extensions", "flags",
    "gc_grace_seconds", "id", "incremental_backups", "max_index_interval", "memtable",
    "memtable_flush_period_in_ms", "min_index_interval", "read_repair", "read_repair_chance",
    "speculative_retry",
}


def test_system_schema_tables_has_cassandra_5_columns(ks):
    ks.session.execute("CREATE TABLE cols (k int PRIMARY KEY, v text)")
    rows = ks.session.execute(
        "SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'cols'", [ks.name])
    row = rows.one()
    assert set(rows.column_names) == TABLES_COLUMNS_5_0
    assert row.read_repair_chance == 0.0 and row.dclocal_read_repair_chance == 0.0
    assert row.allow_auto_snapshot is True and row.incremental_backups is True


def test_release_version_is_the_5_0_line(session):
    """hayate claims the Cassandra release line it speaks and is checked against: 5.0."""
    assert local_row(session).release_version.startswith("5.0.")


def test_reading_schema_metadata_logs_no_warning(node, ks, caplog):
    """The driver reads every keyspace, table, column and option at connect; anything it cannot
    parse it logs (and then leaves the metadata out), which applications only notice later."""
    ks.session.execute(
        "CREATE TABLE wide (k int, c1 text, c2 timeuuid, v map<text, frozen<list<int>>>, s set<inet>, "
        "PRIMARY KEY ((k), c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC) "
        "AND comment = 'all kinds' AND gc_grace_seconds = 3600 AND default_time_to_live = 60 "
        "AND allow_auto_snapshot = false")
    caplog.set_level("WARNING", logger="cassandra")
    cluster, _ = node.connect()
    try:
        cluster.refresh_schema_metadata()
        exported = cluster.metadata.export_schema_as_string()
    finally:
        cluster.shutdown()
    assert f"CREATE TABLE {ks.name}.wide" in exported
    # The driver starts at its newest protocol (DSE v2) and warns as it steps down: it does so
    # against Apache Cassandra too, and it is about the handshake, not the metadata.
    complaints = [r.getMessage() for r in caplog.records
                  if r.levelname in ("WARNING", "ERROR") and "Downgrading core protocol version" not in r.getMessage()]
    assert not complaints, complaints
