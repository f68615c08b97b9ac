"""Hostile and broken clients, over raw sockets: the server answers with an error or closes that
one connection, and keeps serving everyone else.

Each test ends by connecting a fresh driver session and running a query, and the `node` fixture
fails the test if the process died. An acceptable reaction to garbage is an ERROR frame or a
closed connection; holding a connection open forever on bytes that can never become a valid
frame, or answering with data, is not.
"""

import os
import random
import socket
import struct
import time

import pytest

import cqlwire

FRAME_MAX_BYTES = 256 * 1024 * 1024  # Cassandra's largest native_transport_max_frame_size


def assert_serves_others(node):
    cluster, session = node.connect()
    try:
        assert session.execute("SELECT release_version FROM system.local").one() is not None
    finally:
        cluster.shutdown()


def open_raw(node):
    return cqlwire.RawConnection(node.host, node.port)


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(node, seed):
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(4096))
    data[0] = rng.choice([0x00, 0x01, 0x02, 0x06, 0x7F, 0xFF])  # never a version the server speaks
    with open_raw(node) as conn:
        conn.send(bytes(data))
        outcome = conn.outcome()
    assert outcome in ("ERROR 0x000a", "closed"), outcome
    assert_serves_others(node)


def test_truncated_frame_then_close(node):
    body = cqlwire.query_body("SELECT * FROM system.local")
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        conn.send(cqlwire.HEADER.pack(4, 0, 1, cqlwire.QUERY, len(body)) + body[:10])
    assert_serves_others(node)


@pytest.mark.hayate_scope
@pytest.mark.parametrize("claimed", [0x7FFFFFF0, 0x80000000, 0xFFFFFFFF, FRAME_MAX_BYTES + 1])
def test_frame_claiming_a_huge_body(node, claimed):
    """A header claiming more than the protocol's 256 MiB (2 GiB, or a negative length as a
    signed int): refused at the header, without waiting for or allocating the body. Stricter
    than Cassandra 5, which reads and discards the claimed bytes before it says "Request is too
    big"; hayate does that only for lengths the protocol allows (the next test)."""
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        conn.send(cqlwire.HEADER.pack(4, 0, 1, cqlwire.QUERY, claimed) + b"\x00" * 64)
        outcome = conn.outcome()
    assert outcome in ("ERROR 0x000a", "closed"), outcome
    if node.proc is not None:
        assert node.rss_bytes() < 1 << 30, "the server allocated memory for a body it will never get"
    assert_serves_others(node)


def test_a_frame_over_the_limit_is_answered_and_skipped(node):
    """A frame larger than max_frame_bytes (16 MiB) but within the protocol's 256 MiB, sent
    whole: answered "Request is too big" on its own stream (an Invalid error, as Cassandra 5
    answers it), its body discarded as it arrives, and the next frame on the same connection
    served, as Cassandra 5 does."""
    with cqlwire.RawConnection(node.host, node.port, timeout_s=30) as conn:
        assert conn.startup().opcode == cqlwire.READY
        conn.send(cqlwire.frame(cqlwire.QUERY, b"\x00" * (17 << 20), stream=5))
        reply = conn.recv_frame()
        assert (reply.opcode, reply.stream) == (cqlwire.ERROR, 5), reply
        code, message = reply.error()
        assert code == cqlwire.INVALID and "Request is too big" in message, message
        conn.send_frame(cqlwire.OPTIONS, b"", stream=6)
        after = conn.recv_frame()
        assert (after.opcode, after.stream) == (cqlwire.SUPPORTED, 6), after
    assert_serves_others(node)


@pytest.mark.parametrize("seed", range(4))
def test_garbage_after_a_valid_header(node, seed):
    """A well-formed QUERY header with a body that does not decode."""
    rng = random.Random(seed)
    garbage = rng.randbytes(rng.randint(1, 64))
    if seed == 0:
        garbage = struct.pack(">I", 0x7FFFFFFF) + b"SELECT"  # a [long string] longer than the body
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        conn.send_frame(cqlwire.QUERY, garbage, stream=11)
        conn.sock.settimeout(5)
        try:
            reply = conn.recv_frame()
        except cqlwire.Closed:
            reply = None
    if reply is not None:
        assert reply.opcode == cqlwire.ERROR, f"garbage must not be answered with data: {reply}"
        assert reply.stream == 11, "the error must answer the stream that sent the garbage"
    assert_serves_others(node)


def test_unknown_opcode(node):
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        reply = conn.request(0x42, b"\x00\x01\x02", stream=12)
        code, message = reply.error()
    assert code == cqlwire.PROTOCOL_ERROR, message
    assert reply.stream == 12
    assert_serves_others(node)


@pytest.mark.parametrize("version", [0x01, 0x02, 0x07, 0x3F])
def test_unsupported_protocol_version(node, version):
    """Drivers downgrade when they see exactly this message: "Invalid or unsupported protocol
    version (N)". Version 1 and 2 are gone since Cassandra 4; 7 and 63 never existed."""
    with open_raw(node) as conn:
        conn.send_frame(cqlwire.OPTIONS, b"", stream=0, version=version)
        reply = conn.recv_frame()
    code, message = reply.error()
    assert code == cqlwire.PROTOCOL_ERROR
    assert "Invalid or unsupported protocol version" in message, message
    assert f"({version})" in message, f"the message should name the version sent: {message!r}"
    assert reply.version & 0x80, "a response has the direction bit set"
    assert_serves_others(node)


def test_client_disconnects_mid_frame(node):
    """Twenty clients each send half a frame and vanish with a reset (SO_LINGER 0)."""
    body = cqlwire.query_body("SELECT * FROM system.local")
    frame = cqlwire.frame(cqlwire.QUERY, body, stream=1)
    for i in range(20):
        conn = open_raw(node)
        assert conn.startup().opcode == cqlwire.READY
        conn.send(frame[: 5 + i])
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    assert_serves_others(node)


def test_frame_sent_one_byte_at_a_time(node):
    """TCP may deliver a frame in pieces; the server must reassemble it."""
    with open_raw(node) as conn:
        for b in cqlwire.frame(cqlwire.STARTUP, cqlwire.startup_body()):
            conn.send(bytes([b]))
            time.sleep(0.001)
        assert conn.recv_frame().opcode == cqlwire.READY
        query = cqlwire.frame(cqlwire.QUERY, cqlwire.query_body("SELECT release_version FROM system.local"), stream=3)
        for i in range(0, len(query), 7):
            conn.send(query[i:i + 7])
            time.sleep(0.001)
        reply = conn.recv_frame()
    assert (reply.opcode, reply.stream) == (cqlwire.RESULT, 3)


def test_pipelined_frames_in_one_write(node):
    """Fifty requests in one TCP write, answered once each on their own streams."""
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        conn.send(b"".join(
            cqlwire.frame(cqlwire.QUERY, cqlwire.query_body("SELECT release_version FROM system.local"), stream=s)
            for s in range(100, 150)))
        replies = [conn.recv_frame() for _ in range(50)]
    assert sorted(r.stream for r in replies) == list(range(100, 150))
    assert all(r.opcode == cqlwire.RESULT for r in replies)


def test_error_does_not_end_the_connection(node):
    """After an ordinary request error (a syntax error) the same connection keeps working."""
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        assert conn.query("SELEKT nothing", stream=1).error()[0] == cqlwire.SYNTAX_ERROR
        assert conn.query("SELECT release_version FROM system.local", stream=2).opcode == cqlwire.RESULT


def test_compressed_flag_without_negotiated_compression(node):
    with open_raw(node) as conn:
        assert conn.startup().opcode == cqlwire.READY
        conn.send_frame(cqlwire.QUERY, os.urandom(32), stream=5, flags=0x01)
        outcome = conn.outcome()
    assert outcome in ("ERROR 0x000a", "closed"), outcome
    assert_serves_others(node)


def test_many_connections_opened_and_closed_leak_nothing(node):
    """Two hundred connections come and go; the server's file descriptors return to where they
    were (a leaked socket per connection would exhaust the process within a day)."""
    if node.proc is None:
        pytest.skip("needs the server's process")

    def fds():
        return len(os.listdir(f"/proc/{node.proc.pid}/fd"))

    assert_serves_others(node)
    baseline = fds()
    conns = [open_raw(node) for _ in range(200)]
    for c in conns:
        assert c.startup().opcode == cqlwire.READY
    for c in conns:
        c.close()
    deadline = time.monotonic() + 5
    while fds() > baseline + 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fds() <= baseline + 5, f"{fds() - baseline} file descriptors still open after the clients left"
    assert_serves_others(node)
