"""Starting and stopping real `hayate` processes for the acceptance tests.

Every node gets its own data directory under `target/test-nodes/` and its own port on 127.0.0.1,
so tests never share state by accident. A node's stderr goes to `node.log` in its directory and
is quoted in every failure that involves the node, because "connection refused" alone says
nothing about why a server is not there.
"""

from __future__ import annotations

import atexit
import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NODES_ROOT = REPO_ROOT / "target" / "test-nodes"
HAYATE_BIN = Path(os.environ.get("HAYATE_BIN", REPO_ROOT / "target" / "debug" / "hayate"))

# How long a node may take to open its CQL port. A debug build formats a 256 MiB device on first
# start, which takes a moment; a server that needs longer than this is stuck, not slow.
START_TIMEOUT_S = 30
# How long a node may take to exit after SIGTERM before the test calls it hung.
STOP_TIMEOUT_S = 20

# Each node's write buffer (the shared-memory copy of blocks not yet on its device, 8 MiB) lives
# in a directory of its own under this one, so that a node killed at the end of a test does not
# leave its buffer in RAM: `Node.discard` and the exit hook remove them. A machine whose /dev/shm
# is small (a container's 64 MiB) could not hold a run's nodes at once: the buffers then go to
# target/, where they survive a SIGKILL all the same (only not a power failure).
def _shm_root() -> Path:
    try:
        stats = os.statvfs("/dev/shm")
        if stats.f_bavail * stats.f_frsize >= 1 << 30:
            return Path("/dev/shm") / f"hayate-tests-{os.getpid()}"
    except OSError:
        pass
    return REPO_ROOT / "target" / "test-write-buffers" / str(os.getpid())


SHM_ROOT = _shm_root()

_live_processes: set[subprocess.Popen] = set()
_node_counter = itertools.count()


def _kill_leftovers() -> None:
    # The fixtures stop their nodes; this catches an interrupted run (Ctrl-C, a crash in pytest).
    for proc in list(_live_processes):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shutil.rmtree(SHM_ROOT, ignore_errors=True)


atexit.register(_kill_leftovers)


# Ports are picked below Linux's ephemeral range (32768-60999), never by binding port 0: a port
# the kernel hands out is free only until the next port-0 bind or outgoing connection takes it,
# and nodes bind their metrics port as port 0 (one once took a port another node was about to
# bind for CQL, and the readiness check connected to the wrong process).
PORT_RANGE = (20000, 32000)
_port_rng = random.Random(os.getpid())


def _bindable(host: str, port: int) -> bool:
    """Whether both TCP and UDP `host:port` can be bound right now (gossip is UDP)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:
                # As the server binds (connections of an earlier listener in TIME-WAIT do not
                # stop it); UDP gets no such option, so that a bound socket is seen.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def pid_alive(pid: int) -> bool:
    """True if process `pid` runs (a zombie or a dead process does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(") ", 1)[1][:1] not in ("Z", "X")


def free_ports(hosts: list[str], count: int, rng: random.Random | None = None) -> list[int]:
    """`count` distinct ports that are free (TCP and UDP) on every one of `hosts`."""
    rng = rng or _port_rng
    ports: list[int] = []
    for _ in range(2000):
        p = rng.randrange(*PORT_RANGE)
        if p not in ports and all(_bindable(h, p) for h in hosts):
            ports.append(p)
            if len(ports) == count:
                return ports
    raise NodeError(f"found no {count} ports free on all of {hosts}")


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds right now (TCP or UDP)."""
    return free_ports(["127.0.0.1"], 1)[0]


class NodeError(Exception):
    """The node did not do what the test needed from its process (start, stop, stay up)."""


class Endpoint:
    """Where a CQL server listens, and how to point the Python driver at it."""

    host: str
    port: int

    def cluster(self, **kwargs):
        """A `cassandra.cluster.Cluster` for this node, with short timeouts so failures are quick."""
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        # Pinned, so that a run does not spend its time on the driver's version probes;
        # HAYATE_TEST_PROTOCOL_VERSION=5 runs a suite over protocol v5 instead.
        kwargs.setdefault("protocol_version", int(os.environ.get("HAYATE_TEST_PROTOCOL_VERSION", "4")))
        kwargs.setdefault("connect_timeout", 5)
        kwargs.setdefault("control_connection_timeout", 5)
        profile = kwargs.pop("profile", None) or ExecutionProfile(request_timeout=15)
        # The driver's default policy, named so that the driver does not warn on every Cluster.
        profile.load_balancing_policy = TokenAwarePolicy(DCAwareRoundRobinPolicy())
        profile._load_balancing_policy_explicit = True
        kwargs.setdefault("execution_profiles", {EXEC_PROFILE_DEFAULT: profile})
        return Cluster([self.host], port=self.port, **kwargs)

    def connect(self, keyspace: str | None = None, **kwargs):
        """(cluster, session); the caller shuts the cluster down."""
        cluster = self.cluster(**kwargs)
        try:
            session = cluster.connect(keyspace)
        except Exception:
            cluster.shutdown()
            raise
        return cluster, session


class ExternalNode(Endpoint):
    """A server this suite did not start: `HAYATE_REFERENCE=host:port` runs the shared-node tests
    against it, which is how the expectations here were checked against Apache Cassandra."""

    def __init__(self, address: str):
        host, _, port = address.rpartition(":")
        self.name = f"external {address}"
        self.host, self.port = host, int(port)
        self.metrics_port = 0
        self.proc = None

    def alive(self) -> bool:
        return True

    def start(self):
        return self

    def kill(self) -> None:
        pass

    def discard(self) -> None:
        pass

    def log_tail(self, lines: int = 30) -> str:
        return f"(external server {self.host}:{self.port}: no log)"


class Node(Endpoint):
    """One `hayate` process, restartable on the same data directory and port."""

    # Extra environment for the process (a subclass's).
    env: dict[str, str] = {}

    def __init__(
        self,
        name: str,
        *,
        authenticator: str = "AllowAllAuthenticator",
        authorizer: str = "AllowAllAuthorizer",
        metrics_port: int = 0,
        commit_to_device: bool = False,
        data_dir: Path | None = None,
        port: int | None = None,
        device_size: str = "256MiB",
        write_buffer: bool = True,
        write_block_size: str | None = None,
    ):
        self.name = name
        self.host = "127.0.0.1"
        self.port = port or free_port()
        # Every node of the suite is a cluster of its own, with its own internode port.
        self.storage_port = free_port()
        self.metrics_port = metrics_port
        self.authenticator = authenticator
        self.commit_to_device = commit_to_device
        self.dir = NODES_ROOT / f"{name}-{os.getpid()}-{next(_node_counter)}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir or (self.dir / "data")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "node.log"
        self.config_path = self.dir / "hayate.toml"
        self.write_buffer_dir = SHM_ROOT / self.dir.name if write_buffer else None
        if self.write_buffer_dir:
            self.write_buffer_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "[storage]\n"
            f'device_size = "{device_size}"\n'
            + (f'write_block_size = "{write_block_size}"\n' if write_block_size else "")
            + f'write_buffer_dir = "{self.write_buffer_dir or ""}"\n'
            "[metrics]\n"
            f"port = {metrics_port}\n"
            "[auth]\n"
            f'authenticator = "{authenticator}"\n'
            f'authorizer = "{authorizer}"\n'
        )
        self.proc: subprocess.Popen | None = None
        # Where the current start's lines begin in the log: an earlier start's are not its own.
        self._log_start = 0

    # ---- process control -------------------------------------------------------------------

    def command(self) -> list[str]:
        cmd = [
            str(HAYATE_BIN),
            "--config", str(self.config_path),
            "--data-dir", str(self.data_dir),
            "--listen-address", self.host,
            "--cql-port", str(self.port),
            "--storage-port", str(self.storage_port),
        ]
        if self.commit_to_device:
            cmd.append("--commit-to-device")
        return cmd

    def spawn(self) -> subprocess.Popen:
        """Start the process without waiting for it to be ready (for tests that expect failure)."""
        if not HAYATE_BIN.exists():
            raise NodeError(
                f"{HAYATE_BIN} does not exist: build it with `cargo build -p hayate-server` "
                "or point HAYATE_BIN at a binary"
            )
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== {' '.join(self.command())}\n".encode())
            log.flush()
            self._log_start = log.tell()
            proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "RUST_BACKTRACE": "1", **self.env},
            )
        _live_processes.add(proc)
        return proc

    def start(self, timeout_s: float = START_TIMEOUT_S) -> "Node":
        if self.alive():
            raise NodeError(f"{self.name} is already running (pid {self.proc.pid})")
        self.proc = self.spawn()
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Ready means this start's log says the node listens on its CQL address and that
        address accepts TCP; the log line proves the listener is this process."""
        listening = f"listening for CQL clients on {self.host}:{self.port}".encode()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise NodeError(
                    f"{self.name} exited with status {code} before opening port {self.port}.\n"
                    f"{self.log_tail()}"
                )
            if listening in self._log_since_start():
                try:
                    with socket.create_connection((self.host, self.port), timeout=0.5):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise NodeError(
            f"{self.name} did not open CQL port {self.port} within {timeout_s} s.\n{self.log_tail()}"
        )

    def _log_since_start(self) -> bytes:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return log.read()
        except FileNotFoundError:
            return b""

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, as an operator's `systemctl stop` would; returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise NodeError(
                f"{self.name} did not exit within {timeout_s} s of SIGTERM (killed).\n{self.log_tail()}"
            )
        _live_processes.discard(self.proc)
        return code

    def kill(self) -> None:
        """SIGKILL: a process crash (the write buffer in shared memory outlives it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            _live_processes.discard(self.proc)

    def discard(self) -> None:
        """Kills the node for good at the end of a test, and frees its write buffer's RAM and its
        device's disk space, keeping `node.log` (HAYATE_KEEP_DATA=1 keeps the data too)."""
        self.kill()
        if self.write_buffer_dir:
            shutil.rmtree(self.write_buffer_dir, ignore_errors=True)
        # Each device takes 256 MiB and a run makes about a hundred nodes: left in place, a run
        # would fill 10+ GiB of a CI machine's disk.
        if os.environ.get("HAYATE_KEEP_DATA") != "1":
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self) -> "Node":
        code = self.stop()
        if code != 0:
            raise NodeError(f"{self.name} exited with status {code} on SIGTERM.\n{self.log_tail()}")
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return f"(no log at {self.log_path})"
        return f"--- last {lines} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])
