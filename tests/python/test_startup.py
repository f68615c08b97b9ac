"""Starting and stopping a node the way an operator does, including the mistakes."""

import socket
import time

import pytest


def wait_exit(proc, timeout_s=15):
    try:
        return proc.wait(timeout=timeout_s)
    except Exception:
        proc.kill()
        proc.wait()
        pytest.fail(f"the process was still running after {timeout_s} s")


def test_second_node_on_the_same_data_dir_refuses_to_start(node_factory):
    first = node_factory("owner")
    second = node_factory("intruder", data_dir=first.data_dir, start=False)
    code = wait_exit(second.spawn())
    log = second.log_path.read_text(errors="replace")
    assert code != 0, f"a second node started on a data directory in use.\n{log}"
    assert str(first.data_dir) in log or any(w in log.lower() for w in ("lock", "in use", "already")), (
        f"the error should say the data directory is in use:\n{log}")
    # And the first node was not disturbed.
    cluster, session = node_factory.connect(first)
    assert session.execute("SELECT release_version FROM system.local").one() is not None


def test_sigterm_exits_cleanly_and_restart_finds_the_data(node_factory):
    n = node_factory("sigterm")
    cluster, session = node_factory.connect(n)
    session.execute("CREATE KEYSPACE st WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE st.t (k int PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO st.t (k, v) VALUES (?, ?)")
    for k in range(200):
        session.execute(insert, (k, f"v{k}"))
    # The driver stays connected: shutdown must not wait for clients to leave.
    code = n.stop()
    assert code == 0, f"SIGTERM should exit 0, got {code}.\n{n.log_tail()}"
    cluster.shutdown()

    n.start()
    cluster, session = node_factory.connect(n)
    rows = {r.k: r.v for r in session.execute("SELECT k, v FROM st.t")}
    assert rows == {k: f"v{k}" for k in range(200)}


def test_restart_is_repeatable(node_factory):
    """Three stop/start cycles with writes between: nothing lost, nothing duplicated."""
    n = node_factory("cycles")
    for cycle in range(3):
        cluster, session = node_factory.connect(n)
        if cycle == 0:
            session.execute("CREATE KEYSPACE cy WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.execute("CREATE TABLE cy.t (k int, c int, PRIMARY KEY (k, c))")
        session.execute(f"INSERT INTO cy.t (k, c) VALUES (1, {cycle})")
        cluster.shutdown()
        assert n.stop() == 0
        n.start()
    cluster, session = node_factory.connect(n)
    assert [r.c for r in session.execute("SELECT c FROM cy.t WHERE k = 1")] == [0, 1, 2]


def test_port_in_use_is_a_clear_error(node_factory):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        n = node_factory("port_taken", port=taken.getsockname()[1], start=False)
        code = wait_exit(n.spawn())
    log = n.log_path.read_text(errors="replace")
    assert code != 0
    assert str(n.port) in log, f"the error should name the port:\n{log}"


def test_missing_config_file_is_a_clear_error(node_factory):
    n = node_factory("no_config", start=False)
    n.config_path.unlink()
    code = wait_exit(n.spawn())
    log = n.log_path.read_text(errors="replace")
    assert code != 0
    assert str(n.config_path) in log, f"the error should name the missing file:\n{log}"


def test_misspelt_config_key_is_refused(node_factory):
    n = node_factory("bad_key", start=False)
    n.config_path.write_text(n.config_path.read_text() + "\n[storage2]\ncomit_to_device = true\n")
    code = wait_exit(n.spawn())
    log = n.log_path.read_text(errors="replace")
    assert code != 0, "an unknown config key must stop the node, not be ignored"
    assert "storage2" in log, f"the error should name the unknown key:\n{log}"


def test_startup_is_quick(node_factory):
    """A fresh node with a 256 MiB device opens its port within a few seconds."""
    n = node_factory("quick", start=False)
    start = time.monotonic()
    n.start()
    elapsed = time.monotonic() - start
    assert elapsed < 10, f"the node took {elapsed:.1f} s to open its CQL port"
