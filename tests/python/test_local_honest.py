"""`hayate local` never lies about its nodes (issue 35).

It once reported three healthy nodes (exit 0) when every node had died on `Address already in
use`: its readiness check accepted whatever answered on 127.0.0.K, and the user's writes went
into another cluster. Two of its nodes once joined a standalone node on 127.0.0.1, which could
never run DDL again. A rolling restart failed because a node stopped on purpose was waited for.

Each test runs its clusters on loopback blocks of its own (`--address-prefix 127.A.B.`, from
hayate_cluster.next_block), with every port at its default there: nothing here depends on the
machine's default addresses being free.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hayate_cluster import next_block
from hayate_node import HAYATE_BIN, NODES_ROOT, pid_alive as alive

COMMAND_TIMEOUT_S = 60
DEVICE = ("--", "--device-size", "64MiB")
WRITE_BUFFER_DIR = Path("/dev/shm")


def run(*args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([str(HAYATE_BIN), *args], capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "NO_COLOR": "1"})


def pids(directory: Path) -> dict[int, int]:
    out = {}
    for pid_file in directory.glob("node*/hayate.pid"):
        try:
            out[int(pid_file.parent.name[4:])] = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            pass
    return out


def logs(directory: Path, lines: int = 20) -> str:
    out = []
    for log in sorted(directory.glob("node*/node.log")) + sorted(directory.glob("*.log")):
        out.append(f"--- {log} ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(out)


def write_buffers_of(directory: Path) -> list[Path]:
    """The write-buffer files in /dev/shm whose device lives under `directory` (the header holds
    the device's canonical path)."""
    wanted = str(directory.resolve()).encode()
    found = []
    for f in WRITE_BUFFER_DIR.glob("hayate-*.wbuf"):
        try:
            with open(f, "rb") as fh:
                if wanted in fh.read(2048):
                    found.append(f)
        except OSError:
            pass
    return found


@pytest.fixture
def dirs():
    """Directories for local clusters and nodes; every node under them is killed at the end."""
    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("starts its own hayate clusters (HAYATE_REFERENCE is set)")
    made: list[Path] = []
    extra_pids: list[int] = []

    def make(name: str) -> Path:
        d = NODES_ROOT / f"honest-{name}-{os.getpid()}-{len(made)}"
        shutil.rmtree(d, ignore_errors=True)
        made.append(d)
        return d

    make.pids = extra_pids
    yield make
    for d in made:
        for pid in list(pids(d).values()):
            if alive(pid) and b"hayate" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
    for pid in extra_pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    for d in made:
        for data in d.glob("**/data"):
            shutil.rmtree(data, ignore_errors=True)


def test_a_taken_port_is_refused_before_anything_starts(dirs):
    prefix = next_block()
    directory = dirs("taken")
    # A plain listener on node 2's CQL port, as another program would hold it.
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind((f"{prefix}.2", 9042))
    holder.listen()
    try:
        started = run("local", "start", "--nodes", "3", "--dir", str(directory), "--address-prefix", f"{prefix}.",
                      *DEVICE)
    finally:
        holder.close()
    assert started.returncode != 0, f"start succeeded on a taken port:\n{started.stdout}\n{started.stderr}"
    assert f"{prefix}.2:9042" in started.stderr, started.stderr
    assert f"held by pid {os.getpid()}" in started.stderr, started.stderr
    # Refused before anything started: no node ran, nothing was written, the name is free to
    # start again (with other addresses, say).
    assert pids(directory) == {}
    assert not (directory / "cluster.json").exists()
    assert write_buffers_of(directory) == []


def test_a_node_that_fails_to_start_leaves_no_write_buffer(dirs):
    # The node opens its engine (and its write buffer in /dev/shm) before it binds its metrics
    # port: taken, the start fails, and the buffer must go with it.
    prefix = next_block()
    directory = dirs("wbuf")
    directory.mkdir(parents=True)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind((f"{prefix}.1", 9180))
    holder.listen()
    try:
        node = run("--data-dir", str(directory / "data"), "--listen-address", f"{prefix}.1",
                   "--device-size", "64MiB")
    finally:
        holder.close()
    assert node.returncode != 0, node.stderr
    assert "9180" in node.stderr, node.stderr
    assert (directory / "data" / "hayate.dat").exists(), "the node failed before it opened its engine"
    assert write_buffers_of(directory) == [], "a failed start left its write buffer in /dev/shm"


def test_two_local_clusters_and_a_single_node_side_by_side_never_merge(dirs):
    a_prefix, b_prefix, single_prefix = next_block(), next_block(), next_block()
    a, b, single = dirs("a"), dirs("b"), dirs("single")
    for d, prefix, n in ((a, a_prefix, 2), (b, b_prefix, 1)):
        started = run("local", "start", "--nodes", str(n), "--dir", str(d), "--address-prefix", f"{prefix}.",
                      *DEVICE)
        assert started.returncode == 0, f"{started.stdout}\n{started.stderr}\n{logs(d)}"
    names = {d: re.search(r'"cluster_name": "([^"]+)"', (d / "cluster.json").read_text()).group(1) for d in (a, b)}
    assert names[a] != names[b]
    # A standalone node (the default cluster name) that has cluster A's node 1 among its seeds,
    # as a mistyped seed list would: it must neither join A nor let A's nodes join it.
    single.mkdir(parents=True)
    with open(single / "node.log", "ab") as log:
        proc = subprocess.Popen([str(HAYATE_BIN), "--data-dir", str(single / "data"), "--listen-address",
                                 f"{single_prefix}.1", "--seeds", f"{a_prefix}.1,{single_prefix}.1",
                                 "--device-size", "64MiB"], stdout=log, stderr=log)
    dirs.pids.append(proc.pid)
    a_log = a / "node1" / "node.log"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if "refusing gossip" in a_log.read_text() and "refused this node's gossip" in (single / "node.log").read_text():
            break
        time.sleep(0.2)
    assert f"refusing gossip from {single_prefix}.1:7000: it is a node of cluster 'hayate', this node of " \
           f"'{names[a]}'" in a_log.read_text(), logs(a)
    assert f"{a_prefix}.1:7000 refused this node's gossip" in (single / "node.log").read_text(), logs(single)
    for d, prefix, n in ((a, a_prefix, 2), (b, b_prefix, 1)):
        status = run("status", "--host", f"{prefix}.1")
        assert status.returncode == 0, status.stderr
        rows = re.findall(r"^UN\s+(\S+)", status.stdout, re.M)
        assert sorted(rows) == [f"{prefix}.{k}" for k in range(1, n + 1)], status.stdout
    for d in (a, b):
        assert run("local", "stop", "--dir", str(d)).returncode == 0


def test_restarting_node2_while_node3_is_down_reports_node3_and_succeeds(dirs):
    prefix = next_block()
    directory = dirs("rolling")
    started = run("local", "start", "--nodes", "3", "--dir", str(directory), "--address-prefix", f"{prefix}.",
                  *DEVICE)
    assert started.returncode == 0, f"{started.stdout}\n{started.stderr}\n{logs(directory)}"
    for k in (3, 2):
        stopped = run("local", "stop", "--dir", str(directory), "--node", str(k))
        assert stopped.returncode == 0, stopped.stderr
    again = run("local", "start", "--dir", str(directory), "--node", "2")
    assert again.returncode == 0, f"{again.stdout}\n{again.stderr}\n{logs(directory)}"
    assert re.search(rf"node3 \({re.escape(prefix)}\.3\) is down", again.stdout), again.stdout
    assert re.search(rf"^UN\s+{re.escape(prefix)}\.2\s", again.stdout, re.M), again.stdout
    assert re.search(rf"^DN\s+{re.escape(prefix)}\.3\s", again.stdout, re.M), again.stdout
    # A node that died on its own (its pid file outlived it) is not up: reported with its log,
    # and the exit code says so.
    node1 = pids(directory)[1]
    os.kill(node1, signal.SIGKILL)
    while alive(node1):
        time.sleep(0.05)
    crashed = run("local", "start", "--dir", str(directory), "--node", "2")
    assert crashed.returncode != 0, crashed.stdout
    assert f"node1 ({prefix}.1) is down: its process (pid {node1}) exited" in crashed.stderr, crashed.stderr
    assert "already running" in crashed.stdout, crashed.stdout
    assert run("local", "stop", "--dir", str(directory)).returncode == 0


def test_start_piped_into_head_does_not_panic(dirs):
    prefix = next_block()
    directory = dirs("head")
    # `head -c 1` closes the pipe after the first byte, long before start has said everything.
    piped = subprocess.run(
        ["bash", "-c", f"set -o pipefail; '{HAYATE_BIN}' local start --nodes 1 --dir '{directory}' "
                       f"--address-prefix {prefix}. -- --device-size 64MiB | head -c 1 >/dev/null"],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert "panicked" not in piped.stderr, piped.stderr
    assert piped.returncode == 0, f"{piped.stderr}\n{logs(directory)}"
    status = run("status", "--host", f"{prefix}.1")
    assert status.returncode == 0 and re.search(r"^UN\s", status.stdout, re.M), status.stdout + status.stderr
    assert run("local", "stop", "--dir", str(directory)).returncode == 0
