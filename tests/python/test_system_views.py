"""Cassandra 5.0's `system_views` virtual tables, read with the Python driver and cqlsh.

`SELECT * FROM system_views.clients` lists the open connections, the reader's own among them
with its driver's name; every table answers a SELECT with Cassandra 5.0's columns, and the
keyspace is listed in system_virtual_schema as drivers and cqlsh DESCRIBE read it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE

CQLSH = Path(sys.executable).parent / "cqlsh"

pytestmark = pytest.mark.skipif(bool(REFERENCE), reason="checks what hayate fills in")

COLUMNS = {
    "clients": {
        "address", "port", "authentication_metadata", "authentication_mode", "client_options",
        "connection_stage", "driver_name", "driver_version", "hostname", "keyspace_name",
        "protocol_version", "request_count", "ssl_cipher_suite", "ssl_enabled", "ssl_protocol",
        "username",
    },
    "settings": {"name", "value"},
    "thread_pools": {
        "name", "active_tasks", "active_tasks_limit", "blocked_tasks", "blocked_tasks_all_time",
        "completed_tasks", "pending_tasks",
    },
    "caches": {
        "name", "capacity_bytes", "entry_count", "hit_count", "hit_ratio",
        "recent_hit_rate_per_second", "recent_request_rate_per_second", "request_count", "size_bytes",
    },
    "disk_usage": {"keyspace_name", "table_name", "mebibytes"},
    "local_read_latency": {"keyspace_name", "table_name", "count", "50th_ms", "99th_ms", "max_ms", "per_second"},
    "local_write_latency": {"keyspace_name", "table_name", "count", "50th_ms", "99th_ms", "max_ms", "per_second"},
}


@pytest.fixture
def own(node_factory):
    """A node of its own, so that the connections it lists are this test's."""
    n = node_factory()
    cluster, session = node_factory.connect(n)
    return n, session


@pytest.mark.parametrize("table", sorted(COLUMNS))
def test_each_view_answers_with_cassandras_columns(session, table):
    result = session.execute(f"SELECT * FROM system_views.{table}")
    assert set(result.column_names) == COLUMNS[table]
    list(result)


def test_clients_lists_this_connection_with_its_driver(own):
    node, session = own
    session.execute("CREATE KEYSPACE sv WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.set_keyspace("sv")
    rows = list(session.execute("SELECT * FROM system_views.clients"))
    assert rows, "no client listed"
    ours = [r for r in rows if r.driver_name == "DataStax Python Driver"]
    assert ours, [r.driver_name for r in rows]
    # The driver's control connection and its pool connection: both ready, both this address.
    for r in ours:
        assert str(r.address) == "127.0.0.1"
        assert r.connection_stage == "ready"
        assert r.protocol_version == int(os.environ.get("HAYATE_TEST_PROTOCOL_VERSION", "4"))
        assert r.username == "anonymous" and r.authentication_mode == "Unauthenticated"
        assert r.ssl_enabled is False and r.ssl_protocol is None
        assert r.driver_version and r.client_options["DRIVER_NAME"] == "DataStax Python Driver"
        assert r.client_options["CQL_VERSION"]
    local_ports = {s.getsockname()[1] for s in _driver_sockets(session)}
    assert local_ports <= {r.port for r in ours}, (local_ports, [r.port for r in ours])
    assert any(r.keyspace_name == "sv" for r in ours), "the pool connection's USE keyspace"
    assert max(r.request_count for r in ours) >= 3


def _driver_sockets(session):
    """The sockets of the session's pool (driver internals: one connection per host in the
    driver 3.x, a dict of them in later versions)."""
    sockets = []
    for pool in session._pools.values():
        conns = getattr(pool, "_connections", None)
        conns = list(conns.values()) if isinstance(conns, dict) else [getattr(pool, "_connection", None)]
        sockets += [c._socket for c in conns if c is not None and getattr(c, "_socket", None) is not None]
    assert sockets, "found no socket of the session's pool"
    return sockets


def test_a_closed_connection_leaves_the_list(own, node_factory):
    node, session = own
    before = len(list(session.execute("SELECT * FROM system_views.clients")))
    other, _ = node_factory.connect(node)
    during = len(list(session.execute("SELECT * FROM system_views.clients")))
    assert during > before
    other.shutdown()
    import time
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if len(list(session.execute("SELECT * FROM system_views.clients"))) == before:
            return
        time.sleep(0.1)
    pytest.fail("the closed connections are still listed")


def test_settings_show_cassandra_names(session):
    settings = {r.name: r.value for r in session.execute("SELECT * FROM system_views.settings")}
    assert settings["batch_size_warn_threshold"] == "5KiB"
    assert settings["batch_size_fail_threshold"] == "50KiB"
    assert settings["authenticator"] == "AllowAllAuthenticator"
    assert settings["write_request_timeout"] == "2000ms"
    assert "storage.write_block_size" in settings
    one = session.execute("SELECT value FROM system_views.settings WHERE name = 'num_tokens'").one()
    assert one.value == "16"


def test_caches_threads_and_latency_have_figures(own):
    node, session = own
    session.execute("CREATE KEYSPACE lat WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE lat.t (k int PRIMARY KEY, v int)")
    for k in range(20):
        session.execute("INSERT INTO lat.t (k, v) VALUES (%s, %s)", (k, k))
        session.execute("SELECT * FROM lat.t WHERE k = %s", (k,))
    caches = {r.name: r for r in session.execute("SELECT * FROM system_views.caches")}
    assert set(caches) == {"post_write_cache", "prepared_statements"}
    assert caches["post_write_cache"].capacity_bytes > 0
    pools = {r.name: r for r in session.execute("SELECT * FROM system_views.thread_pools")}
    assert {"service", "flusher", "defrag", "expiry"} <= set(pools)
    assert pools["service"].active_tasks_limit >= 1
    writes = session.execute("SELECT * FROM system_views.local_write_latency").one()
    assert writes.keyspace_name == "*" and writes.count >= 20
    reads = list(session.execute("SELECT * FROM system_views.local_read_latency"))
    assert reads and reads[0].count >= 20 and reads[0].max_ms >= 0
    disk = {(r.keyspace_name, r.table_name) for r in session.execute("SELECT * FROM system_views.disk_usage")}
    assert ("lat", "t") in disk


def test_the_keyspace_is_listed_for_drivers(session, cluster):
    names = {r.keyspace_name for r in session.execute("SELECT * FROM system_virtual_schema.keyspaces")}
    assert "system_views" in names
    tables = {r.table_name for r in session.execute(
        "SELECT * FROM system_virtual_schema.tables WHERE keyspace_name = 'system_views'")}
    assert set(COLUMNS) <= tables
    cluster.refresh_schema_metadata()
    assert "clients" in cluster.metadata.keyspaces["system_views"].tables


def test_cqlsh_shows_its_own_connection(node, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        [str(CQLSH), node.host, str(node.port), "-e", "SELECT * FROM system_views.clients"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Error" not in proc.stderr, proc.stderr
    header = next(ln for ln in proc.stdout.splitlines() if "|" in ln)
    assert "driver_name" in header and "connection_stage" in header
    # cqlsh runs on the Python driver and names itself in STARTUP's client options.
    assert "DataStax Python Driver" in proc.stdout or "cqlsh" in proc.stdout, proc.stdout
    assert "ready" in proc.stdout
