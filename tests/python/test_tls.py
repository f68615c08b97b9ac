"""Client TLS: the `[client_encryption]` section, with the Python driver and cqlsh as clients.

Each test makes its own CA and certificates (with the `cryptography` package, so a fresh
machine needs nothing else) and a node that serves TLS with them. What a user relies on:
a driver with an SSL context connects and queries; cqlsh --ssl does; with
require_client_auth a client needs a certificate from the CA; a plain client on a TLS port
gets a clear error at once, not a hang, and does not disturb the node; optional mode takes both
on one port; and a mistake in the files stops the node at start with a message that names the
file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cassandra.cluster import NoHostAvailable
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import cqlwire
from hayate_node import REPO_ROOT, free_port
from test_client_limits import FLOOD_REQUESTS, ROW_VALUE_BYTES, RSS_GROWTH_MAX_BYTES, flood, value
from test_metrics import scrape

CQLSH = Path(sys.executable).parent / "cqlsh"
PROTOCOL_ERROR = 0x000A
# A refused client must hear so within this, not hang until its own timeout.
REFUSAL_MAX_S = 5.0


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class Pki:
    """A CA, and certificates it signs, as PEM files in one directory."""

    def __init__(self, directory: Path, name: str = "hayate test CA"):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_path = self.dir / "ca.crt"
        _write_cert(self.cert, self.ca_path)

    def issue(self, name: str, *, server: bool) -> tuple[Path, Path]:
        """(certificate, key) files for a server (127.0.0.1, localhost) or a client."""
        key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        _write_cert(cert, cert_path)
        _write_key(key, key_path)
        return cert_path, key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    base = tmp_path_factory.mktemp("pki")
    ca = Pki(base / "ca")
    ca.server_cert, ca.server_key = ca.issue("node", server=True)
    ca.client_cert, ca.client_key = ca.issue("client", server=False)
    rogue = Pki(base / "rogue", name="someone else's CA")
    ca.rogue_client_cert, ca.rogue_client_key = rogue.issue("rogue-client", server=False)
    return ca


def tls_section(pki: Pki, **settings) -> str:
    values = {"enabled": True, "certificate": pki.server_cert, "private_key": pki.server_key, **settings}
    lines = ["[client_encryption]"]
    for key, value in values.items():
        lines.append(f"{key} = {str(value).lower()}" if isinstance(value, bool) else f'{key} = "{value}"')
    return "\n".join(lines) + "\n"


@pytest.fixture
def tls_node(node_factory, pki):
    """`tls_node(**settings)`: a started node with a [client_encryption] section."""

    def make(**settings):
        n = node_factory("tls", start=False)
        with open(n.config_path, "a") as f:
            f.write(tls_section(pki, **settings))
        return n.start()

    return make


def ssl_context(pki: Pki, client_cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """What an application gives the driver: verify the node against the CA, by its address."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(pki.ca_path))
    if client_cert:
        context.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
    return context


def tls_connect(node_factory, node, pki, client_cert=None, **kwargs):
    return node_factory.connect(
        node,
        ssl_context=ssl_context(pki, client_cert),
        ssl_options={"server_hostname": node.host},
        **kwargs,
    )


def round_trip(session, name: str) -> None:
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(f"CREATE TABLE IF NOT EXISTS {name}.t (k int PRIMARY KEY, v text)")
    session.execute(f"INSERT INTO {name}.t (k, v) VALUES (1, 'over tls')")
    assert session.execute(f"SELECT v FROM {name}.t WHERE k = 1").one().v == "over tls"


def test_the_driver_connects_with_an_ssl_context_and_queries(tls_node, node_factory, pki):
    node = tls_node()
    log = node._log_since_start().decode()
    assert "client TLS on (required)" in log and str(pki.server_cert) in log, log
    _, session = tls_connect(node_factory, node, pki)
    round_trip(session, "tls_driver")
    # Many requests in flight on the one TLS connection come back whole and in their streams.
    select = session.prepare("SELECT v FROM tls_driver.t WHERE k = ?")
    futures = [session.execute_async(select, [1]) for _ in range(500)]
    assert all(f.result().one().v == "over tls" for f in futures)


def test_a_plain_client_on_a_tls_port_fails_at_once_and_the_node_goes_on(tls_node, node_factory, pki):
    node = tls_node()
    # Raw frames: the node answers the first frame with a protocol error that says why.
    with cqlwire.RawConnection(node.host, node.port) as conn:
        started = time.monotonic()
        reply = conn.request(cqlwire.OPTIONS, b"", stream=7)
        code, message = reply.error()
        assert (reply.stream, code) == (7, PROTOCOL_ERROR)
        assert "requires TLS" in message, message
        assert cqlwire.wait_closed(conn, REFUSAL_MAX_S), "the node kept the refused connection open"
        assert time.monotonic() - started < REFUSAL_MAX_S
    # The driver reports it as a connection error, promptly.
    started = time.monotonic()
    with pytest.raises(NoHostAvailable) as refused:
        node_factory.connect(node)
    assert time.monotonic() - started < REFUSAL_MAX_S
    assert "requires TLS" in str(refused.value), refused.value
    # Bytes that are neither TLS nor CQL are dropped just as quickly.
    with socket.create_connection((node.host, node.port), timeout=REFUSAL_MAX_S) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        s.settimeout(REFUSAL_MAX_S)
        while s.recv(4096):
            pass
    # TLS clients are served as before.
    _, session = tls_connect(node_factory, node, pki)
    round_trip(session, "tls_after_plain")
    assert node.alive()


def test_optional_mode_serves_plain_and_tls_on_one_port(tls_node, node_factory, pki):
    node = tls_node(optional=True)
    assert "client TLS on (optional" in node._log_since_start().decode()
    _, plain = node_factory.connect(node)
    _, secure = tls_connect(node_factory, node, pki)
    round_trip(plain, "tls_optional")
    assert secure.execute("SELECT v FROM tls_optional.t WHERE k = 1").one().v == "over tls"


def test_require_client_auth_refuses_clients_without_a_certificate_from_the_ca(tls_node, node_factory, pki):
    node = tls_node(ca=pki.ca_path, require_client_auth=True)
    # No certificate: the handshake fails, and the driver says so at once.
    started = time.monotonic()
    with pytest.raises(NoHostAvailable):
        tls_connect(node_factory, node, pki)
    assert time.monotonic() - started < REFUSAL_MAX_S
    # A certificate from another CA is refused too.
    with pytest.raises(NoHostAvailable):
        tls_connect(node_factory, node, pki, client_cert=(pki.rogue_client_cert, pki.rogue_client_key))
    assert "TLS handshake failed" in node._log_since_start().decode()
    # The CA's client is served.
    _, session = tls_connect(node_factory, node, pki, client_cert=(pki.client_cert, pki.client_key))
    round_trip(session, "tls_client_auth")


def test_cqlsh_with_ssl(tls_node, pki, tmp_path):
    node = tls_node(ca=pki.ca_path, require_client_auth=True)
    home = tmp_path / "home"
    (home / ".cassandra").mkdir(parents=True)
    (home / ".cassandra" / "cqlshrc").write_text(
        "[ssl]\n"
        f"certfile = {pki.ca_path}\n"
        "validate = true\n"
        f"userkey = {pki.client_key}\n"
        f"usercert = {pki.client_cert}\n"
    )

    def cqlsh(*args, env=None):
        return subprocess.run(
            [str(CQLSH), node.host, str(node.port), *args],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "HOME": str(home), **(env or {})},
        )

    ok = cqlsh("--ssl", "-e", "SELECT cluster_name FROM system.local")
    assert ok.returncode == 0, f"stdout:\n{ok.stdout}\nstderr:\n{ok.stderr}"
    assert "(1 rows)" in ok.stdout
    # Without a client certificate cqlsh is refused. (cqlsh 6.2 with driver 3.29 does not check
    # the node's certificate whatever `validate` says: the driver sets the context's options, not
    # its verify_mode, from cert_reqs; the driver tests above check the node's certificate.)
    (home / ".cassandra" / "cqlshrc").write_text(f"[ssl]\ncertfile = {pki.ca_path}\nvalidate = true\n")
    refused = cqlsh("--ssl", "-e", "SELECT cluster_name FROM system.local")
    assert refused.returncode != 0, refused.stdout
    assert "Unable to connect" in refused.stderr, refused.stderr
    plain = cqlsh("-e", "SELECT cluster_name FROM system.local")
    assert plain.returncode != 0
    assert "requires TLS" in plain.stderr, plain.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_java_drivers_with_client_certificates(tls_node, pki):
    """tests/java TlsTest: both Java drivers with an SSLContext, with and without a certificate."""
    node = tls_node(ca=pki.ca_path, require_client_auth=True)
    mvn = shutil.which("mvn")
    assert mvn, "Maven (mvn) is not on PATH; tests/java needs Maven 3.8 and Java 17"
    report = REPO_ROOT / "target" / "java-tests" / "surefire-reports" / "TEST-hayate.TlsTest.xml"
    report.unlink(missing_ok=True)
    cmd = [mvn, "-q", "-B", "-f", str(REPO_ROOT / "tests" / "java" / "pom.xml"), "test",
           "-Dtest=TlsTest", f"-Dhayate.host={node.host}", f"-Dhayate.port={node.port}",
           f"-Dhayate.tls.ca={pki.ca_path}", f"-Dhayate.tls.cert={pki.client_cert}",
           f"-Dhayate.tls.key={pki.client_key}", "-Dmaven.test.failure.ignore=true"]
    if os.environ.get("HAYATE_MVN_OFFLINE") == "1":
        cmd.insert(1, "-o")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert report.exists(), f"Maven wrote no TlsTest report (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    suite = ET.parse(report).getroot()
    failures = [
        f"{case.get('name')}: {(el.get('message') or el.text or '').strip()[:300]}"
        for case in suite.iter("testcase")
        for el in [*case.findall("failure"), *case.findall("error"), *case.findall("skipped")]
    ]
    assert int(suite.get("tests")) == 3 and not failures, "\n".join(failures)


def _start_fails(node_factory, pki, tmp_path, **settings) -> str:
    """The log of a node that must refuse to start with these settings."""
    n = node_factory("tls_bad", start=False)
    with open(n.config_path, "a") as f:
        f.write(tls_section(pki, **settings))
    proc = n.spawn()
    code = proc.wait(timeout=30)
    assert code != 0, "the node started with bad TLS settings"
    return n._log_since_start().decode()


@pytest.mark.parametrize(
    "case",
    ["missing certificate", "certificate not PEM", "key not PEM", "key of another certificate",
     "missing ca"],
)
def test_bad_tls_files_stop_the_node_naming_the_file(node_factory, pki, tmp_path, case):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("this is not a certificate\n")
    other_cert, other_key = pki.issue("other-node", server=True)
    settings, setting, path, says = {
        "missing certificate": (
            {"certificate": tmp_path / "nope.crt"}, "client_encryption.certificate", tmp_path / "nope.crt",
            "No such file",
        ),
        "certificate not PEM": (
            {"certificate": garbage}, "client_encryption.certificate", garbage, "holds no certificate",
        ),
        "key not PEM": ({"private_key": garbage}, "client_encryption.private_key", garbage, "holds no private key"),
        "key of another certificate": (
            {"private_key": other_key}, "client_encryption.private_key", other_key, "is not the key of",
        ),
        "missing ca": (
            {"ca": tmp_path / "nope-ca.crt", "require_client_auth": True}, "client_encryption.ca",
            tmp_path / "nope-ca.crt", "No such file",
        ),
    }[case]
    log = _start_fails(node_factory, pki, tmp_path, **settings)
    assert setting in log and str(path) in log and says in log, log
    assert "listening for CQL clients" not in log


class TlsRawConnection(cqlwire.RawConnection):
    """Raw frames over TLS."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, timeout_s: float = 5.0):
        self.sock = context.wrap_socket(socket.create_connection((host, port), timeout=timeout_s), server_hostname=host)
        self.sock.settimeout(timeout_s)


def test_a_tls_client_that_never_reads_is_paused_like_a_plain_one(node_factory, pki):
    """The bound on unread responses (test_client_limits.py) holds over TLS too, where the
    writer and reader share one TLS session."""
    node = node_factory("tls_flood", start=False, metrics_port=free_port())
    with open(node.config_path, "a") as f:
        f.write(tls_section(pki))
    node.start()
    _, session = tls_connect(node_factory, node, pki)
    session.execute(
        "CREATE KEYSPACE limits WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute("CREATE TABLE limits.t (k int PRIMARY KEY, v blob)")
    session.execute("INSERT INTO limits.t (k, v) VALUES (0, %s)", [b"v" * ROW_VALUE_BYTES])
    for _ in range(200):
        session.execute("SELECT v FROM limits.t WHERE k = 0")
    baseline = node.rss_bytes()

    flooder = TlsRawConnection(node.host, node.port, ssl_context(pki))
    assert flooder.startup().opcode == cqlwire.READY
    sent = [0]
    flood(flooder.sock, sent)
    try:
        assert sent[0] < FLOOD_REQUESTS, "the node read the whole flood"
        started = time.monotonic()
        assert len(session.execute("SELECT v FROM limits.t WHERE k = 0").one().v) == ROW_VALUE_BYTES
        assert time.monotonic() - started < 2.0
        grown = node.rss_bytes() - baseline
        assert grown < RSS_GROWTH_MAX_BYTES, f"resident memory grew by {grown >> 20} MiB"
        samples, _ = scrape(node.metrics_port)
        assert value(samples, "hayate_connections_paused") == 1
    finally:
        flooder.sock.close()
    deadline = time.monotonic() + 10
    while value(scrape(node.metrics_port)[0], "hayate_connections_paused") != 0:
        assert time.monotonic() - deadline < 0, "the closed TLS connection is still paused"
        time.sleep(0.1)
    round_trip(session, "tls_after_flood")
