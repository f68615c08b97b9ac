"""Native protocol v4 frames written by hand, for the tests that must send what no driver sends.

The layout follows the spec (native_protocol_v4.spec, section 2): a 9-byte header
`version:u8 flags:u8 stream:i16 opcode:u8 length:u32` and a body of `length` bytes, all
big-endian. Only what the tests need is here: STARTUP, OPTIONS, QUERY, EXECUTE, AUTH_RESPONSE,
and reading ERROR bodies.
"""

from __future__ import annotations

import socket
import struct
import time

HEADER = struct.Struct(">BBhBI")
# Protocol v1 and v2 had a one-byte stream id. A server answers a v1 or v2 client's first frame
# (with "Invalid or unsupported protocol version") in that client's framing, as Cassandra does.
HEADER_V1_V2 = struct.Struct(">BBbBI")

# Request and response opcodes (spec section 2.4).
ERROR = 0x00
STARTUP = 0x01
READY = 0x02
AUTHENTICATE = 0x03
OPTIONS = 0x05
SUPPORTED = 0x06
QUERY = 0x07
RESULT = 0x08
PREPARE = 0x09
EXECUTE = 0x0A
AUTH_RESPONSE = 0x0F
AUTH_SUCCESS = 0x10

# Error codes (spec section 9).
PROTOCOL_ERROR = 0x000A
BAD_CREDENTIALS = 0x0100
UNAVAILABLE = 0x1000
SYNTAX_ERROR = 0x2000
UNAUTHORIZED = 0x2100
INVALID = 0x2200
ALREADY_EXISTS = 0x2400
UNPREPARED = 0x2500

CONSISTENCY_ONE = 0x0001
CONSISTENCY_QUORUM = 0x0004


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def long_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">I", len(b)) + b


def string_map(m: dict[str, str]) -> bytes:
    return struct.pack(">H", len(m)) + b"".join(string(k) + string(v) for k, v in m.items())


def short_bytes(b: bytes) -> bytes:
    return struct.pack(">H", len(b)) + b


def value(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def startup_body() -> bytes:
    return string_map({"CQL_VERSION": "3.0.0"})


def query_body(cql: str, values: list[bytes | None] | None = None, consistency: int = CONSISTENCY_ONE) -> bytes:
    body = long_string(cql) + struct.pack(">H", consistency)
    if values is None:
        return body + b"\x00"
    return body + b"\x01" + struct.pack(">H", len(values)) + b"".join(value(v) for v in values)


def execute_body(query_id: bytes, values: list[bytes | None] | None = None) -> bytes:
    body = short_bytes(query_id) + struct.pack(">H", CONSISTENCY_ONE)
    if values is None:
        return body + b"\x00"
    return body + b"\x01" + struct.pack(">H", len(values)) + b"".join(value(v) for v in values)


def frame(opcode: int, body: bytes, stream: int = 0, version: int = 4, flags: int = 0) -> bytes:
    return HEADER.pack(version, flags, stream, opcode, len(body)) + body


def parse_error(body: bytes) -> tuple[int, str]:
    """(code, message) of an ERROR body; the code-specific fields that follow are ignored."""
    code, n = struct.unpack_from(">iH", body, 0)
    return code, body[6:6 + n].decode(errors="replace")


def _read_string(body: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">H", body, pos)
    return body[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def parse_string_multimap(body: bytes) -> dict[str, list[str]]:
    """A [string multimap] such as SUPPORTED's body."""
    (n,) = struct.unpack_from(">H", body, 0)
    pos, out = 2, {}
    for _ in range(n):
        key, pos = _read_string(body, pos)
        (count,) = struct.unpack_from(">H", body, pos)
        pos += 2
        values = []
        for _ in range(count):
            v, pos = _read_string(body, pos)
            values.append(v)
        out[key] = values
    return out


def _skip_type(body: bytes, pos: int) -> int:
    """Skips an [option] type (spec 4.2.5.2), including the parameters of collection types."""
    (type_id,) = struct.unpack_from(">H", body, pos)
    pos += 2
    if type_id == 0x0000:  # custom: a class name
        _, pos = _read_string(body, pos)
    elif type_id in (0x0020, 0x0022):  # list, set
        pos = _skip_type(body, pos)
    elif type_id == 0x0021:  # map
        pos = _skip_type(body, _skip_type(body, pos))
    elif type_id == 0x0031:  # tuple
        (n,) = struct.unpack_from(">H", body, pos)
        pos += 2
        for _ in range(n):
            pos = _skip_type(body, pos)
    elif type_id == 0x0030:  # UDT
        _, pos = _read_string(body, pos)
        _, pos = _read_string(body, pos)
        (n,) = struct.unpack_from(">H", body, pos)
        pos += 2
        for _ in range(n):
            _, pos = _read_string(body, pos)
            pos = _skip_type(body, pos)
    return pos


def parse_rows(body: bytes) -> tuple[list[str], list[list[bytes | None]]]:
    """Column names and raw cell values of a RESULT Rows body (spec 4.2.5.2)."""
    kind, flags, count = struct.unpack_from(">iii", body, 0)
    assert kind == 0x0002, f"expected a Rows result, got kind {kind}"
    pos = 12
    if flags & 0x0001:  # global table spec
        _, pos = _read_string(body, pos)
        _, pos = _read_string(body, pos)
    if flags & 0x0002:  # has more pages: a paging state follows
        (n,) = struct.unpack_from(">i", body, pos)
        pos += 4 + max(n, 0)
    names = []
    if not flags & 0x0004:  # metadata present
        for _ in range(count):
            if not flags & 0x0001:
                _, pos = _read_string(body, pos)
                _, pos = _read_string(body, pos)
            name, pos = _read_string(body, pos)
            names.append(name)
            pos = _skip_type(body, pos)
    (row_count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    rows = []
    for _ in range(row_count):
        row = []
        for _ in range(count):
            (n,) = struct.unpack_from(">i", body, pos)
            pos += 4
            if n < 0:
                row.append(None)
            else:
                row.append(body[pos:pos + n])
                pos += n
        rows.append(row)
    return names, rows


class Frame:
    def __init__(self, version: int, flags: int, stream: int, opcode: int, body: bytes):
        self.version, self.flags, self.stream, self.opcode, self.body = version, flags, stream, opcode, body

    def error(self) -> tuple[int, str]:
        assert self.opcode == ERROR, f"expected an ERROR frame, got opcode {self.opcode:#04x}"
        return parse_error(self.body)

    def __repr__(self) -> str:
        detail = ""
        if self.opcode == ERROR:
            code, msg = parse_error(self.body)
            detail = f" code={code:#06x} message={msg!r}"
        return (f"Frame(version={self.version:#04x} stream={self.stream} opcode={self.opcode:#04x} "
                f"len={len(self.body)}{detail})")


class Closed(Exception):
    """The server closed the connection (EOF or reset) before a whole frame arrived."""


class RawConnection:
    """A TCP connection that speaks frames, with no driver logic in between."""

    def __init__(self, host: str, port: int, timeout_s: float = 5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.settimeout(timeout_s)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, opcode: int, body: bytes, stream: int = 0, version: int = 4, flags: int = 0) -> None:
        self.send(frame(opcode, body, stream, version, flags))

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n > 0:
            try:
                chunk = self.sock.recv(min(n, 65536))
            except ConnectionResetError as e:
                raise Closed(f"connection reset: {e}") from e
            if not chunk:
                raise Closed("EOF")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> Frame:
        """The next frame; raises Closed on EOF and socket.timeout if the server says nothing."""
        first = self._recv_exact(1)
        header = HEADER_V1_V2 if first[0] & 0x7F in (1, 2) else HEADER
        version, flags, stream, opcode, length = header.unpack(first + self._recv_exact(header.size - 1))
        assert length < 256 * 1024 * 1024, f"server sent a frame header claiming {length} bytes"
        return Frame(version, flags, stream, opcode, self._recv_exact(length))

    def request(self, opcode: int, body: bytes, stream: int = 0, version: int = 4) -> Frame:
        self.send_frame(opcode, body, stream, version)
        return self.recv_frame()

    def startup(self) -> Frame:
        return self.request(STARTUP, startup_body())

    def query(self, cql: str, values=None, stream: int = 1, consistency: int = CONSISTENCY_ONE) -> Frame:
        return self.request(QUERY, query_body(cql, values, consistency), stream)

    def outcome(self, within_s: float = 5.0) -> str:
        """What the server did next: 'ERROR <code>', 'closed', 'silent', or another opcode.

        For the robustness tests, where either an error or a closed connection is a fine
        answer and only silence (a connection held open forever on garbage) or data is wrong.
        """
        self.sock.settimeout(within_s)
        try:
            f = self.recv_frame()
        except Closed:
            return "closed"
        except socket.timeout:
            return "silent"
        except OSError:
            return "closed"
        if f.opcode == ERROR:
            return f"ERROR {f.error()[0]:#06x}"
        return f"opcode {f.opcode:#04x}"


def wait_closed(conn: RawConnection, within_s: float) -> bool:
    """True if the server closes the connection within the time (frames before EOF are skipped)."""
    deadline = time.monotonic() + within_s
    conn.sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if not conn.sock.recv(65536):
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False
