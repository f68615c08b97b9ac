"""Column types named by their Java class, as some drivers' test suites create them.

`v 'org.apache.cassandra.db.marshal.BytesType'` is Cassandra's spelling of `blob`: a known
marshal class is the native type it stands for, everywhere (metadata, DESCRIBE, values). A
class hayate does not know is kept as an opaque blob, reported on the wire as the custom type
(option 0x0000 with the class name); Cassandra refuses classes it cannot load, so that part is
hayate's own behaviour and is not run against Cassandra.
"""

import pytest
from cassandra import InvalidRequest

from conftest import REFERENCE

MARSHAL = "org.apache.cassandra.db.marshal."


def test_known_marshal_classes_are_the_native_types(ks):
    s = ks.session
    s.execute(
        f"CREATE TABLE c (k int PRIMARY KEY, v '{MARSHAL}BytesType', w '{MARSHAL}Int32Type', "
        f"u '{MARSHAL}UTF8Type', t '{MARSHAL}TimestampType')"
    )
    types = {
        r.column_name: r.type
        for r in s.execute(
            "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'c'",
            [ks.name],
        )
    }
    assert types == {"k": "int", "v": "blob", "w": "int", "u": "text", "t": "timestamp"}
    s.execute("INSERT INTO c (k, v, w, u) VALUES (1, 0x01, 2, 'x')")
    assert tuple(s.execute("SELECT v, w, u FROM c WHERE k = 1").one()) == (b"\x01", 2, "x")
    described = s.execute(f"DESCRIBE TABLE {ks.name}.c").one().create_statement
    assert "    v blob,\n" in described


@pytest.mark.skipif(bool(REFERENCE), reason="Cassandra refuses a class it cannot load; hayate keeps it opaque")
def test_an_unknown_class_is_an_opaque_custom_type(ks, cluster):
    s = ks.session
    s.execute("CREATE TABLE c (k int PRIMARY KEY, x 'com.example.Foo')")
    row = s.execute(
        "SELECT type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'c' AND column_name = 'x'",
        [ks.name],
    ).one()
    assert row.type == "'com.example.Foo'"
    s.execute("INSERT INTO c (k, x) VALUES (1, 0xcafe)")
    prepared = s.prepare("INSERT INTO c (k, x) VALUES (?, ?)")
    # The driver sees the custom type by its class name (option 0x0000).
    assert "com.example.Foo" in prepared.column_metadata[1][3].cass_parameterized_type()
    s.execute(prepared, (2, b"\x00\x01"))
    got = {r.k: r.x for r in s.execute("SELECT k, x FROM c")}
    assert got == {1: b"\xca\xfe", 2: b"\x00\x01"}
    cluster.refresh_table_metadata(ks.name, "c")
    assert "com.example.Foo" in cluster.metadata.keyspaces[ks.name].tables["c"].columns["x"].cql_type
    with pytest.raises(InvalidRequest):
        s.execute("INSERT INTO c (k, x) VALUES (3, 'text is not bytes')")
