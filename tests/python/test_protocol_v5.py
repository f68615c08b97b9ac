"""Native protocol v5: what current drivers ask for first against Cassandra 4 and 5.

The Python driver negotiates v5 when the server speaks it; these tests check that it lands
there and that v5's changes work end to end: frames inside checksummed segments (with LZ4 at
the segment level, and frames larger than one segment), the per-request keyspace, the
`now_in_seconds` flag, and the result metadata id of prepared statements. Raw-socket tests
build segments by hand (native_protocol_v5.spec, section 2) to check what a driver never sends:
a corrupt checksum closes that one connection, and the node serves everyone else.
"""

import os
import socket
import struct
import time
import zlib

import lz4.block
import pytest
from cassandra import ProtocolVersion
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.query import SimpleStatement

import cqlwire

V5 = 5
CRC24_INIT = 0x875060
CRC24_POLY = 0x1974F0B
CRC32_SEED = zlib.crc32(b"\xfa\x2d\x55\xca")
SEGMENT_PAYLOAD_MAX = 128 * 1024 - 1
FLAG_KEYSPACE = 0x80
FLAG_NOW_IN_SECONDS = 0x100
METADATA_CHANGED = 0x0008


def crc24(value: int, length: int) -> int:
    crc = CRC24_INIT
    for _ in range(length):
        crc ^= (value & 0xFF) << 16
        value >>= 8
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= CRC24_POLY
    return crc & 0xFFFFFF


def segment(payload: bytes, self_contained: bool = True) -> bytes:
    """An uncompressed v5 segment: 3-byte header (length, flag), CRC24, payload, CRC32, LE."""
    header = len(payload) | (int(self_contained) << 17)
    return (header.to_bytes(3, "little") + crc24(header, 3).to_bytes(3, "little") + payload
            + zlib.crc32(payload, CRC32_SEED).to_bytes(4, "little"))


def segments_for(frame_bytes: bytes) -> bytes:
    if len(frame_bytes) <= SEGMENT_PAYLOAD_MAX:
        return segment(frame_bytes)
    return b"".join(segment(frame_bytes[i:i + SEGMENT_PAYLOAD_MAX], False)
                    for i in range(0, len(frame_bytes), SEGMENT_PAYLOAD_MAX))


def strip_prefixes(flags: int, body: bytes) -> bytes:
    """The message itself, past a tracing id (0x02) and warnings (0x08), which Cassandra may
    put before it."""
    pos = 0
    if flags & 0x02:
        pos += 16
    if flags & 0x08:
        (n,) = struct.unpack_from(">H", body, pos)
        pos += 2
        for _ in range(n):
            (length,) = struct.unpack_from(">H", body, pos)
            pos += 2 + length
    return body[pos:]


class V5Connection(cqlwire.RawConnection):
    """A raw connection that starts in v5 and then speaks uncompressed segments."""

    def __init__(self, node):
        super().__init__(node.host, node.port)
        self.pending = b""

    def start(self) -> cqlwire.Frame:
        reply = self.request(cqlwire.STARTUP, cqlwire.startup_body(), version=V5)
        assert reply.version == 0x85, reply
        return reply

    def send_v5(self, opcode: int, body: bytes, stream: int = 1, flags: int = 0) -> None:
        self.send(segments_for(cqlwire.frame(opcode, body, stream, V5, flags)))

    def _segment_payload(self) -> bytes:
        head = self._recv_exact(6)
        header = int.from_bytes(head[:3], "little")
        assert int.from_bytes(head[3:], "little") == crc24(header, 3), "bad header CRC from the server"
        payload = self._recv_exact(header & SEGMENT_PAYLOAD_MAX)
        crc = int.from_bytes(self._recv_exact(4), "little")
        assert crc == zlib.crc32(payload, CRC32_SEED), "bad payload CRC from the server"
        return payload

    def recv_v5(self) -> cqlwire.Frame:
        while True:
            if len(self.pending) >= 9:
                version, flags, stream, opcode, length = cqlwire.HEADER.unpack(self.pending[:9])
                if len(self.pending) >= 9 + length:
                    body = self.pending[9:9 + length]
                    self.pending = self.pending[9 + length:]
                    assert version == 0x85, f"response version {version:#x}"
                    return cqlwire.Frame(version, flags, stream, opcode, strip_prefixes(flags, body))
            self.pending += self._segment_payload()

    def query_v5(self, cql: str, flags: int = 0, extra: bytes = b"", stream: int = 1) -> cqlwire.Frame:
        body = cqlwire.long_string(cql) + struct.pack(">Hi", cqlwire.CONSISTENCY_ONE, flags) + extra
        self.send_v5(cqlwire.QUERY, body, stream)
        return self.recv_v5()


def default_cluster(node, **kwargs):
    """A Cluster that leaves the protocol version to negotiation, as applications do."""
    profile = ExecutionProfile(request_timeout=15, load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))
    return Cluster([node.host], port=node.port, connect_timeout=5, control_connection_timeout=5,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **kwargs)


def assert_serves_others(node):
    cluster, session = node.connect()
    try:
        assert session.execute("SELECT release_version FROM system.local").one() is not None
    finally:
        cluster.shutdown()


def test_default_negotiation_lands_on_v5(node):
    cluster = default_cluster(node)
    try:
        session = cluster.connect()
        assert cluster.protocol_version == 5
        assert session.execute("SELECT release_version FROM system.local").one() is not None
        connection = cluster.control_connection._connection
        assert connection._is_checksumming_enabled, "v5 frames should travel in segments"
    finally:
        cluster.shutdown()


@pytest.mark.parametrize("compression", [False, "lz4"])
def test_python_driver_v5_reads_writes_prepares_and_pages(node, fresh_name, session, compression):
    name = fresh_name("v5")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int, c int, v text, PRIMARY KEY (k, c))")
    cluster, s = node.connect(protocol_version=5, compression=compression)
    try:
        connection = cluster.control_connection._connection
        assert connection._is_checksumming_enabled
        if compression:
            assert connection.compressor is not None, "LZ4 should be negotiated"
        insert = s.prepare(f"INSERT INTO {name}.t (k, c, v) VALUES (?, ?, ?)")
        for c in range(250):
            s.execute(insert, (1, c, f"value {c}"))
        # A value far larger than one segment (128 KiB): the frame spans several segments both
        # ways.
        big = "x" * (400 * 1024)
        s.execute(insert, (2, 0, big))
        assert s.execute(f"SELECT v FROM {name}.t WHERE k = 2 AND c = 0").one().v == big
        select = s.prepare(f"SELECT c, v FROM {name}.t WHERE k = ?")
        select.fetch_size = 40
        rows = list(s.execute(select, (1,)))
        assert [r.c for r in rows] == list(range(250))
        # Many requests in flight at once, each answered on its own stream.
        futures = [s.execute_async(select, (1,)) for _ in range(30)]
        assert all(len(list(f.result())) == 250 for f in futures)
    finally:
        cluster.shutdown()


def test_per_request_keyspace_through_the_driver(node, fresh_name, session):
    """The Python driver sends SimpleStatement(keyspace=...) as v5's keyspace flag."""
    name = fresh_name("v5ks")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {name}.t (k, v) VALUES (1, 10)")
    cluster, s = node.connect(protocol_version=5)
    try:
        row = s.execute(SimpleStatement("SELECT v FROM t WHERE k = 1", keyspace=name)).one()
        assert row.v == 10
    finally:
        cluster.shutdown()


def test_raw_segments_query_prepare_and_keyspace_flag(node, fresh_name, session):
    name = fresh_name("v5raw")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {name}.t (k, v) VALUES (7, 70)")
    with V5Connection(node) as conn:
        assert conn.start().opcode == cqlwire.READY
        # QUERY with the keyspace flag: the unqualified table resolves in that keyspace.
        reply = conn.query_v5("SELECT v FROM t WHERE k = 7", FLAG_KEYSPACE, cqlwire.string(name))
        assert reply.opcode == cqlwire.RESULT, reply
        assert cqlwire.parse_rows(reply.body)[1] == [[struct.pack(">i", 70)]]
        # Without it there is no keyspace to resolve in.
        reply = conn.query_v5("SELECT v FROM t WHERE k = 7", stream=2)
        assert reply.error()[0] == cqlwire.INVALID
        # PREPARE with flags [int] and a keyspace, then EXECUTE with the result metadata id.
        conn.send_v5(cqlwire.PREPARE, cqlwire.long_string("SELECT v FROM t WHERE k = ?")
                     + struct.pack(">i", 1) + cqlwire.string(name), stream=3)
        prepared = conn.recv_v5()
        assert prepared.opcode == cqlwire.RESULT, prepared
        kind, = struct.unpack_from(">i", prepared.body, 0)
        assert kind == 0x0004
        id_len, = struct.unpack_from(">H", prepared.body, 4)
        statement_id = prepared.body[6:6 + id_len]
        meta_len, = struct.unpack_from(">H", prepared.body, 6 + id_len)
        metadata_id = prepared.body[8 + id_len:8 + id_len + meta_len]
        assert len(metadata_id) > 0

        def execute(result_metadata_id: bytes, stream: int) -> cqlwire.Frame:
            body = (cqlwire.short_bytes(statement_id) + cqlwire.short_bytes(result_metadata_id)
                    + struct.pack(">Hi", cqlwire.CONSISTENCY_ONE, 0x01 | 0x02)  # values, skip metadata
                    + struct.pack(">H", 1) + cqlwire.value(struct.pack(">i", 7)))
            conn.send_v5(cqlwire.EXECUTE, body, stream=stream)
            return conn.recv_v5()

        current = execute(metadata_id, 4)
        assert current.opcode == cqlwire.RESULT, current
        flags, = struct.unpack_from(">i", current.body, 4)
        assert flags & 0x0004, "metadata skipped, as asked"
        assert not flags & METADATA_CHANGED
        stale = execute(b"\x00" * 16, 5)
        flags, = struct.unpack_from(">i", stale.body, 4)
        assert flags & METADATA_CHANGED, "a stale result metadata id gets METADATA_CHANGED"
        assert not flags & 0x0004, "and the full metadata"
        new_len, = struct.unpack_from(">H", stale.body, 12)
        assert stale.body[14:14 + new_len] == metadata_id


def test_now_in_seconds_judges_ttl(node, fresh_name, session):
    """A write with TTL 100 s made as if 150 s ago is already expired; a read made as if 150 s
    ago still sees a row whose TTL ran out since."""
    name = fresh_name("v5now")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v int)")
    past = int(time.time()) - 150
    with V5Connection(node) as conn:
        assert conn.start().opcode == cqlwire.READY
        reply = conn.query_v5(f"INSERT INTO {name}.t (k, v) VALUES (1, 1) USING TTL 100",
                              FLAG_NOW_IN_SECONDS, struct.pack(">i", past))
        assert reply.opcode == cqlwire.RESULT, reply
        reply = conn.query_v5(f"INSERT INTO {name}.t (k, v) VALUES (2, 2) USING TTL 100", stream=2)
        assert reply.opcode == cqlwire.RESULT, reply
        rows = cqlwire.parse_rows(conn.query_v5(f"SELECT k FROM {name}.t", stream=3).body)[1]
        assert [r[0] for r in rows] == [struct.pack(">i", 2)], "k=1 expired at once"
        later = int(time.time()) + 200
        rows = cqlwire.parse_rows(conn.query_v5(f"SELECT k FROM {name}.t", FLAG_NOW_IN_SECONDS,
                                                struct.pack(">i", later), stream=4).body)[1]
        assert rows == [], "judged 200 s from now, k=2 has expired too"


def test_snappy_is_refused_on_v5(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        body = cqlwire.string_map({"CQL_VERSION": "3.0.0", "COMPRESSION": "snappy"})
        reply = conn.request(cqlwire.STARTUP, body, version=V5)
        code, message = reply.error()
    assert code == cqlwire.PROTOCOL_ERROR
    assert "Snappy compression is not supported in protocol V5" in message


def test_options_is_answered_in_the_version_asked_and_lists_v5(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        for version in (5, 4):
            reply = conn.request(cqlwire.OPTIONS, b"", version=version)
            assert reply.version == 0x80 | version
            assert "5/v5" in cqlwire.parse_string_multimap(reply.body)["PROTOCOL_VERSIONS"]
        reply = conn.request(cqlwire.OPTIONS, b"", version=0x42)
        assert reply.version == 0x85, "a probe above v5 is answered in v5, as Cassandra does"
        assert "Invalid or unsupported protocol version (66)" in reply.error()[1]


@pytest.mark.parametrize("corrupt", ["header", "payload"])
def test_a_bad_crc_closes_that_connection_only(node, corrupt):
    """As Cassandra 5: a ProtocolError naming the CRC mismatch on stream 0, then the close."""
    with V5Connection(node) as conn:
        assert conn.start().opcode == cqlwire.READY
        reply = conn.query_v5("SELECT release_version FROM system.local")
        assert reply.opcode == cqlwire.RESULT
        bad = bytearray(segments_for(cqlwire.frame(cqlwire.QUERY, cqlwire.query_body("SELECT * FROM system.local"), 2, V5)))
        if corrupt == "header":
            bad[4] ^= 0x01  # a bit of the header's CRC24
        else:
            bad[10] ^= 0x01  # a bit of the payload (the frame's stream id)
        conn.send(bytes(bad))
        code, message = conn.recv_v5().error()
        assert code == cqlwire.PROTOCOL_ERROR
        assert "CRC mismatch" in message, message
        assert ("frame header" if corrupt == "header" else "frame body") in message, message
        assert cqlwire.wait_closed(conn, 5), "a segment with a bad CRC must close the connection"
    assert_serves_others(node)


def test_a_frame_of_another_version_after_startup_is_refused(node):
    """As Cassandra 5: a ProtocolError on its stream, and the connection goes on."""
    with V5Connection(node) as conn:
        assert conn.start().opcode == cqlwire.READY
        # A v4 frame inside a well-formed segment.
        conn.send(segment(cqlwire.frame(cqlwire.QUERY, cqlwire.query_body("SELECT * FROM system.local"), 3, 4)))
        reply = conn.recv_v5()
        assert reply.stream == 3
        code, message = reply.error()
        assert code == cqlwire.PROTOCOL_ERROR
        assert "Invalid message version. Got 4/v4" in message, message
        assert conn.query_v5("SELECT release_version FROM system.local", stream=4).opcode == cqlwire.RESULT
    assert_serves_others(node)
