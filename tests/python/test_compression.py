"""Frame body compression: LZ4 and Snappy, as Cassandra 4 and 5 offer them to protocol v4 clients.

A driver asks for an algorithm in STARTUP only if SUPPORTED lists it, and silently runs
uncompressed otherwise, so these tests check that frames really travel compressed: the driver's
connection holds the algorithm's functions, and raw frames carry the compression flag (0x01).
"""

import os
import struct

import pytest
import lz4.block
import snappy

import cqlwire
from cassandra.connection import locally_supported_compressions

COMPRESSION_FLAG = 0x01
SERVER_ERROR = 0x0000
REFERENCE = os.environ.get("HAYATE_REFERENCE")


def assert_serves_others(node):
    cluster, session = node.connect()
    try:
        assert session.execute("SELECT release_version FROM system.local").one() is not None
    finally:
        cluster.shutdown()


def startup_with(conn, compression):
    body = cqlwire.string_map({"CQL_VERSION": "3.0.0", "COMPRESSION": compression})
    return conn.request(cqlwire.STARTUP, body)


def test_supported_lists_lz4_and_snappy(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        reply = conn.request(cqlwire.OPTIONS, b"")
    options = cqlwire.parse_string_multimap(reply.body)
    assert sorted(options["COMPRESSION"]) == ["lz4", "snappy"], options


def test_python_driver_with_snappy(node, fresh_name, session):
    name = fresh_name("snappy")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    # Protocol v4: over v5 the driver drops Snappy by itself (v5 compresses segments with LZ4
    # only, and the server refuses Snappy there; see test_protocol_v5.py).
    cluster, s = node.connect(compression="snappy", protocol_version=4)
    try:
        connection = cluster.control_connection._connection
        assert connection.compressor is not None, "the server did not agree to Snappy (check SUPPORTED)"
        assert connection.decompressor is locally_supported_compressions["snappy"][1]
        s.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v text)")
        big = "compressible " * 5000
        insert = s.prepare(f"INSERT INTO {name}.t (k, v) VALUES (?, ?)")
        for k in range(20):
            s.execute(insert, (k, f"{k}:{big}"))
        rows = {r.k: r.v for r in s.execute(f"SELECT k, v FROM {name}.t")}
        assert rows == {k: f"{k}:{big}" for k in range(20)}
        futures = [s.execute_async(f"SELECT v FROM {name}.t WHERE k = {k}") for k in range(20)]
        assert [f.result().one().v for f in futures] == [f"{k}:{big}" for k in range(20)]
    finally:
        cluster.shutdown()


def test_raw_snappy_frames_carry_the_flag_both_ways(node):
    """A compressed QUERY is read, and a large answer comes back compressed with the flag set."""
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert startup_with(conn, "snappy").opcode == cqlwire.READY
        body = cqlwire.query_body("SELECT * FROM system_schema.columns")
        conn.send_frame(cqlwire.QUERY, snappy.compress(body), stream=3, flags=COMPRESSION_FLAG)
        reply = conn.recv_frame()
        assert reply.stream == 3
        assert reply.flags & COMPRESSION_FLAG, "a large result should come back compressed"
        plain = snappy.decompress(reply.body)
        assert reply.opcode == cqlwire.RESULT, cqlwire.parse_error(plain)
        names, rows = cqlwire.parse_rows(plain)
        assert "column_name" in names and len(rows) > 20


def test_unknown_compression_is_a_protocol_error(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        reply = startup_with(conn, "zstd")
        code, message = reply.error()
    assert code == cqlwire.PROTOCOL_ERROR
    assert "zstd" in message, message
    assert_serves_others(node)


def decompress(algorithm, body):
    if algorithm == "snappy":
        return snappy.decompress(body)
    # The protocol's LZ4 prefix is big-endian; the lz4 module's is little-endian.
    return lz4.block.decompress(body[:4][::-1] + body[4:])


@pytest.mark.parametrize("algorithm", ["snappy", "lz4"])
def test_corrupt_compressed_body(node, algorithm):
    """A body that does not decompress is answered with an ERROR, and the connection keeps
    serving (the frame's length was honoured, so the stream is still aligned on frames), as
    Cassandra 5 does. Cassandra says ProtocolError for Snappy but a ServerError wrapping the
    codec's exception for LZ4; hayate says ProtocolError for both."""
    garbage = b"\xff\xff\xff\xff\xff\xff\x00" if algorithm == "snappy" else struct.pack(">i", 40) + b"\xf0\xff\xff\x13"
    with cqlwire.RawConnection(node.host, node.port) as conn:
        assert startup_with(conn, algorithm).opcode == cqlwire.READY
        conn.send_frame(cqlwire.QUERY, garbage, stream=4, flags=COMPRESSION_FLAG)
        reply = conn.recv_frame()
        assert reply.opcode == cqlwire.ERROR
        body = decompress(algorithm, reply.body) if reply.flags & COMPRESSION_FLAG else reply.body
        code, message = cqlwire.parse_error(body)
        expected = {cqlwire.PROTOCOL_ERROR} | ({SERVER_ERROR} if REFERENCE and algorithm == "lz4" else set())
        assert code in expected, (code, message)
        # The same connection still answers an uncompressed request.
        after = conn.query("SELECT release_version FROM system.local", stream=5)
        assert after.opcode == cqlwire.RESULT
    assert_serves_others(node)
