"""User-defined types: CREATE/ALTER/DROP TYPE, frozen and non-frozen UDT columns, literals and
bound values, metadata the drivers read, and persistence.

A frozen UDT value is one opaque value; a non-frozen one (a column's own type, declared
without frozen<>) is stored field by field, so `SET a.zip = 1` changes one field and
`DELETE a.zip` removes one. A type may not be dropped while a table or another type uses it,
and `ALTER TYPE` changes every column that uses it. Every expectation here was checked once
against Apache Cassandra 5.0 (HAYATE_REFERENCE).
"""

import pytest
from cassandra import InvalidRequest

from conftest import REFERENCE


def rows(session, cql, params=None):
    return [tuple(r) for r in session.execute(cql, params)]


@pytest.fixture
def u(ks):
    s = ks.session
    s.execute("CREATE TYPE address (street text, zip int)")
    s.execute("CREATE TYPE person (name text, home frozen<address>, tags list<text>)")
    s.execute(
        "CREATE TABLE u (k int PRIMARY KEY, a address, fa frozen<address>, l list<frozen<address>>, "
        "t tuple<int, frozen<address>>, p frozen<person>, m map<text, frozen<address>>)"
    )
    return s


def test_literals_of_frozen_and_non_frozen_udts_nested_and_in_collections(u):
    u.execute(
        "INSERT INTO u (k, a, fa, l, t, p, m) VALUES (1, {street: 'Main', zip: 1}, {street: 'B'}, "
        "[{zip: 3}], (1, {street: 'T', zip: 4}), {name: 'ann', home: {street: 'H', zip: 5}, tags: ['x']}, "
        "{'work': {street: 'W', zip: 6}})"
    )
    row = u.execute("SELECT a, fa, l, t, p, m FROM u WHERE k = 1").one()
    assert (row.a.street, row.a.zip) == ("Main", 1)
    assert (row.fa.street, row.fa.zip) == ("B", None)
    assert [(x.street, x.zip) for x in row.l] == [(None, 3)]
    assert row.t[0] == 1 and (row.t[1].street, row.t[1].zip) == ("T", 4)
    assert (row.p.name, row.p.home.street, row.p.home.zip, row.p.tags) == ("ann", "H", 5, ["x"])
    assert (row.m["work"].street, row.m["work"].zip) == ("W", 6)
    assert rows(u, "SELECT a.zip, fa.street FROM u WHERE k = 1") == [(1, "B")]


def test_field_updates_and_deletes_of_a_non_frozen_udt(u):
    u.execute("INSERT INTO u (k, a) VALUES (1, {street: 'Main', zip: 1})")
    u.execute("UPDATE u SET a.zip = 2 WHERE k = 1")
    row = u.execute("SELECT a FROM u WHERE k = 1").one()
    assert (row.a.street, row.a.zip) == ("Main", 2)
    u.execute("DELETE a.street FROM u WHERE k = 1")
    row = u.execute("SELECT a FROM u WHERE k = 1").one()
    assert (row.a.street, row.a.zip) == (None, 2)
    # A UDT with no field left reads as null.
    u.execute("DELETE a.zip FROM u WHERE k = 1")
    assert rows(u, "SELECT a FROM u WHERE k = 1") == [(None,)]
    # Setting the whole value replaces every field.
    u.execute("UPDATE u SET a = {street: 'New'} WHERE k = 1")
    row = u.execute("SELECT a FROM u WHERE k = 1").one()
    assert (row.a.street, row.a.zip) == ("New", None)
    u.execute("INSERT INTO u (k, a) VALUES (2, {street: null})")
    assert rows(u, "SELECT a FROM u WHERE k = 2") == [(None,)]


def test_frozen_udts_as_primary_key_columns_sort_field_by_field(ks):
    s = ks.session
    s.execute("CREATE TYPE pt (x int, y text)")
    s.execute("CREATE TABLE keyed (k frozen<pt>, c frozen<pt>, v int, PRIMARY KEY (k, c))")
    for i, (x, y) in enumerate([(2, "a"), (1, "b"), (1, "a"), (1, None)]):
        s.execute("INSERT INTO keyed (k, c, v) VALUES ({x: 0, y: 'p'}, {x: %s, y: %s}, %s)", [x, y, i])
    got = [(r.c.x, r.c.y, r.v) for r in s.execute("SELECT c, v FROM keyed WHERE k = {x: 0, y: 'p'}")]
    assert got == [(1, None, 3), (1, "a", 2), (1, "b", 1), (2, "a", 0)]
    got = [r.v for r in s.execute("SELECT v FROM keyed WHERE k = {x: 0, y: 'p'} AND c > {x: 1, y: 'a'}")]
    assert got == [1, 0]
    with pytest.raises(InvalidRequest, match="Invalid non-frozen user-defined type"):
        s.execute("CREATE TABLE bad (k pt PRIMARY KEY)")


def test_bad_udt_writes_get_cassandras_errors(u):
    cases = [
        ("UPDATE u SET fa.zip = 2 WHERE k = 1", "Invalid operation (fa.zip = 2) for frozen UDT column fa"),
        ("INSERT INTO u (k, a) VALUES (2, {street: 'x', nope: 1})",
         "Unknown field 'nope' in value of user defined type address"),
        ("INSERT INTO u (k, a) VALUES (2, {zip: 'x'})", "Invalid user type literal for a: field zip is not of type int"),
    ]
    for cql, message in cases:
        with pytest.raises(InvalidRequest) as e:
            u.execute(cql)
        assert message in str(e.value), cql
    u.execute("INSERT INTO u (k, fa) VALUES (3, {zip: 3})")
    assert u.execute("SELECT fa FROM u WHERE k = 3").one().fa.zip == 3


def test_bound_udt_values_and_prepared_metadata(u, ks, cluster):
    insert = u.prepare("INSERT INTO u (k, a, fa) VALUES (?, ?, ?)")
    assert [c[2] for c in insert.column_metadata] == ["k", "a", "fa"]
    address = cluster.metadata.keyspaces[ks.name].user_types["address"]
    assert address.field_names == ["street", "zip"]
    # The driver encodes a bound UDT (here a tuple of its fields, in order) from the prepared
    # metadata (wire type 0x0030).
    u.execute(insert, (5, ("Bound", 9), ("F", None)))
    select = u.prepare("SELECT a, fa FROM u WHERE k = ?")
    row = u.execute(select, (5,)).one()
    assert (row.a.street, row.a.zip, row.fa.street, row.fa.zip) == ("Bound", 9, "F", None)
    field = u.prepare("UPDATE u SET a.zip = ? WHERE k = ?")
    assert [c[2] for c in field.column_metadata] == ["a.zip", "k"]
    u.execute(field, (10, 5))
    assert u.execute(select, (5,)).one().a.zip == 10
    inner = u.prepare("INSERT INTO u (k, fa) VALUES (?, {street: ?, zip: ?})")
    u.execute(inner, (6, "inner", 6))
    row = u.execute("SELECT fa FROM u WHERE k = 6").one()
    assert (row.fa.street, row.fa.zip) == ("inner", 6)


def test_alter_type_add_and_rename_reach_existing_columns(u, ks, cluster):
    u.execute("INSERT INTO u (k, a, fa) VALUES (1, {street: 'Main', zip: 1}, {street: 'F', zip: 2})")
    u.execute("ALTER TYPE address ADD country text")
    u.execute("ALTER TYPE address RENAME zip TO postcode")
    row = u.execute("SELECT a, fa FROM u WHERE k = 1").one()
    assert (row.a.street, row.a.postcode, row.a.country) == ("Main", 1, None)
    assert (row.fa.street, row.fa.postcode, row.fa.country) == ("F", 2, None)
    u.execute("UPDATE u SET a.country = 'JP' WHERE k = 1")
    assert u.execute("SELECT a FROM u WHERE k = 1").one().a.country == "JP"
    with pytest.raises(InvalidRequest, match="a field with name country already exists"):
        u.execute("ALTER TYPE address ADD country text")
    with pytest.raises(InvalidRequest, match="Unkown field nosuch in user type"):
        u.execute("ALTER TYPE address RENAME nosuch TO x")
    fields = u.execute(
        "SELECT field_names, field_types FROM system_schema.types WHERE keyspace_name = %s AND type_name = 'address'",
        [ks.name],
    ).one()
    assert fields.field_names == ["street", "postcode", "country"]
    assert fields.field_types == ["text", "int", "text"]


def test_type_ddl_that_cassandra_refuses(ks):
    s = ks.session
    s.execute("CREATE TYPE address (street text, zip int)")
    s.execute("CREATE TYPE IF NOT EXISTS address (street text, zip int)")
    with pytest.raises(InvalidRequest, match="A user type with name 'address' already exists"):
        s.execute("CREATE TYPE address (street text)")
    with pytest.raises(InvalidRequest, match="A user type cannot contain non-frozen UDTs"):
        s.execute("CREATE TYPE bad (home address)")
    with pytest.raises(InvalidRequest, match="Non-frozen UDTs are not allowed inside collections: list<address>"):
        s.execute("CREATE TABLE bad (k int PRIMARY KEY, l list<address>)")
    s.execute("CREATE TYPE holder (tags list<text>)")
    with pytest.raises(InvalidRequest, match="Non-frozen UDTs with nested non-frozen collections are not supported"):
        s.execute("CREATE TABLE bad2 (k int PRIMARY KEY, h holder)")
    with pytest.raises(InvalidRequest, match="Unknown type"):
        s.execute("CREATE TYPE selfref (a frozen<selfref>)")
    with pytest.raises(InvalidRequest, match="Type '.*nosuch' doesn't exist"):
        s.execute("DROP TYPE nosuch")
    s.execute("DROP TYPE IF EXISTS nosuch")
    # In use by another type, then by a table: refused until neither uses it.
    s.execute("CREATE TYPE person (home frozen<address>)")
    with pytest.raises(InvalidRequest, match="still used by user types person"):
        s.execute("DROP TYPE address")
    s.execute("DROP TYPE person")
    s.execute("CREATE TABLE uses (k int PRIMARY KEY, a frozen<address>)")
    with pytest.raises(InvalidRequest, match="Cannot drop user type .*address. as it is still used by tables uses"):
        s.execute("DROP TYPE address")
    s.execute("DROP TABLE uses")
    s.execute("DROP TYPE address")
    assert rows(s, "SELECT type_name FROM system_schema.types WHERE keyspace_name = %s", [ks.name]) == [("holder",)]


def test_schema_metadata_and_describe(u, ks, cluster):
    types = {
        r.column_name: r.type
        for r in u.execute(
            "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'u'",
            [ks.name],
        )
    }
    assert types["a"] == "address" and types["fa"] == "frozen<address>"
    assert types["l"] == "list<frozen<address>>"
    assert types["t"] == "frozen<tuple<int, frozen<address>>>"
    cluster.refresh_schema_metadata()
    meta = cluster.metadata.keyspaces[ks.name]
    assert set(meta.user_types) == {"address", "person"}
    assert meta.user_types["person"].field_types == ["text", "frozen<address>", "list<text>"]
    described = u.execute(f"DESCRIBE TYPE {ks.name}.address").one().create_statement
    assert described == f"CREATE TYPE {ks.name}.address (\n    street text,\n    zip int\n);"
    keyspace = [r.create_statement for r in u.execute(f"DESCRIBE KEYSPACE {ks.name}")]
    address = next(i for i, c in enumerate(keyspace) if c.startswith(f"CREATE TYPE {ks.name}.address"))
    person = next(i for i, c in enumerate(keyspace) if c.startswith(f"CREATE TYPE {ks.name}.person"))
    table = next(i for i, c in enumerate(keyspace) if c.startswith(f"CREATE TABLE {ks.name}.u"))
    assert address < person < table


@pytest.mark.skipif(bool(REFERENCE), reason="restarts its own hayate node")
def test_types_survive_a_restart(node_factory):
    n = node_factory("udt_restart")
    cluster, session = node_factory.connect(n)
    session.execute("CREATE KEYSPACE ur WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TYPE ur.address (street text, zip int)")
    session.execute("CREATE TYPE ur.person (name text, home frozen<address>)")
    session.execute("CREATE TABLE ur.t (k int PRIMARY KEY, a address, p frozen<person>)")
    session.execute("INSERT INTO ur.t (k, a, p) VALUES (1, {street: 'S', zip: 1}, {name: 'n', home: {zip: 2}})")
    cluster.shutdown()
    n.stop()
    n.start()
    cluster, session = node_factory.connect(n)
    row = session.execute("SELECT a, p FROM ur.t WHERE k = 1").one()
    assert (row.a.street, row.a.zip, row.p.name, row.p.home.zip) == ("S", 1, "n", 2)
    session.execute("ALTER TYPE ur.address ADD country text")
    session.execute("UPDATE ur.t SET a.country = 'JP' WHERE k = 1")
    assert session.execute("SELECT a FROM ur.t WHERE k = 1").one().a.country == "JP"
    assert set(cluster.metadata.keyspaces["ur"].user_types) == {"address", "person"}


@pytest.fixture(scope="module")
def three():
    from hayate_cluster import running

    yield from running("udt")


def test_types_and_statics_through_a_three_node_cluster(three):
    """Types go through the schema log like tables: made on one node, used on another, with
    values and static rows replicated to all three (RF 3, written and read at ALL)."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    from hayate_cluster import whitelisted

    def run(k, cql):
        return whitelisted(three, k).execute(SimpleStatement(cql, consistency_level=ConsistencyLevel.ALL))

    run(1, "CREATE KEYSPACE cu WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    run(2, "CREATE TYPE cu.address (street text, zip int)")
    run(3, "CREATE TABLE cu.t (k int, c int, home address STATIC, v frozen<address>, PRIMARY KEY (k, c))")
    run(1, "INSERT INTO cu.t (k, c, home, v) VALUES (1, 1, {street: 'S', zip: 1}, {zip: 2})")
    run(2, "UPDATE cu.t SET home.zip = 5 WHERE k = 1")
    run(3, "ALTER TYPE cu.address ADD country text")
    for k in (1, 2, 3):
        row = run(k, "SELECT c, home, v FROM cu.t WHERE k = 1").one()
        assert (row.c, row.home.street, row.home.zip, row.home.country, row.v.zip) == (1, "S", 5, None, 2), k
        s = whitelisted(three, k)
        s.cluster.refresh_schema_metadata()
        assert s.cluster.metadata.keyspaces["cu"].user_types["address"].field_names == ["street", "zip", "country"]
