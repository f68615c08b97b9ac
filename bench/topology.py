#!/usr/bin/env python3
"""The topology benchmark: how long each system takes to change the shape of its ring while it
serves, and what the change does to the clients. Apache Cassandra 5.0 and hayate, one after the
other, in one sitting (bench/README.md, "The topology benchmark").

    bench/topology.py --records 20000 --before-s 10 --throttles 0      # a smoke run, minutes
    bench/topology.py --records 1000000                                  # a sitting

For each system (Cassandra first): three nodes on 127.0.0.1-3 (compare.py's cluster: same
ports, a memory cgroup per node, the same Cassandra settings), keyspace `ycsb` at RF 3, --records
rows of 1 KB loaded, a short unthrottled run at QUORUM for the system's own maximum (or
--max-ops), then, for each stream throttle of --throttles (MiB/s per node, 0 unthrottled; 24 is
both systems' default), a client at --load (70%) of that maximum (workload `ref`: YCSB
workloada with uniform keys, 50/50, QUORUM) running throughout while each step of --steps runs:

- add: a new node on the next free address joins (Cassandra: auto_bootstrap; hayate: --seeds);
  time from its start to NORMAL (its CQL port opens once it is normal, on both systems);
- decommission: the second member leaves (nodetool decommission; hayate decommission);
- replace: the second member gets SIGKILL, its data is deleted, and once the others have marked
  it down a fresh node on its address replaces it (-Dcassandra.replace_address_first_boot;
  hayate --replace-address); time from the replacement's start to NORMAL;
- resume (hayate only, in the last throttle setting): a new node joins, gets SIGKILL once it has
  received about half of what the add step streamed, is started again on its data, and resumes
  its join; the bytes it receives after the restart, against what it had before.

Each step is preceded by --before-s of the client alone (its p99 then is the step's "before"),
and followed by --after-s. Per step: time to NORMAL, bytes streamed (hayate: the receivers'
`hayate_stream_bytes_total{direction="in"}`; Cassandra: the receivers' system_views.streaming
`bytes_received`) and the stream's rate, the client's p99 per second before and during, its
errors, and the machine's load average. The device's own sequential rates come from fio.

The client's raw files (time series, HDR logs) and the servers' data stay in --work-dir and are
deleted; the results folder gets results.md, small CSV and JSON summaries and one chart.
Runs with the harness's venv Python (compare.py's, with the cassandra-driver and matplotlib),
which it makes and re-executes itself under when needed.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import signal
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the peer harness: clusters, the client, provenance)
from compare import BENCH, CACHE, COMMANDS, PYENV, REPO, log, run  # noqa: E402

# Cassandra 5.0's stream throttle (stream_throughput_outbound and
# entire_sstable_stream_throughput_outbound) and hayate's ([cluster] stream_throughput): 24 MiB/s.
DEFAULT_THROTTLE_MIB = 24
# The client's share of each system's own maximum throughput.
LOAD_SHARE_DEFAULT = 0.7
# A step that has not reached NORMAL after this long has failed (Cassandra's bootstrap at 24 MiB/s
# of a few GB takes minutes; this is the bound, not an expectation).
STEP_TIMEOUT_S = 1800
# The goals of the issue.
GOAL_TIME_SHARE = 1 / 3          # unthrottled: at most a third of Cassandra's time
GOAL_DEVICE_SHARE = 0.5          # unthrottled: at least half the device's sequential read rate
GOAL_P99_RATIO = 1.5             # default throttle: p99 during at most 1.5x before
GOAL_RESEND_SHARE = 0.10         # a resumed join re-sends less than 10% of what it had
# Local JMX ports for nodetool: one per node, by the last byte of its address (all bind to
# 127.0.0.1, where Cassandra's local JMX listens).
JMX_PORT_BASE = 7200
SAMPLE_INTERVAL_S = 0.5


# ---- the nodes -----------------------------------------------------------------------------

def throttle_text(mib):
    return "unthrottled" if mib == 0 else f"{mib} MiB/s"


def jmx_port(host):
    return JMX_PORT_BASE + int(host.rsplit(".", 1)[1])


ORIGINAL_CTL_ARGV = compare.ctl_argv


def node_argv(system, args, topology, host, rundir, replace=None):
    """compare.py's ctl command for one node, with what this benchmark adds: the build of
    --target-dir, the device size, the stream throughput in force (hayate reads it at start),
    a local JMX port for nodetool (Cassandra), and the dead node a replacement takes over."""
    argv = ORIGINAL_CTL_ARGV(system, args, topology, host, rundir)
    if system == "hayate":
        argv += ["--binary", args.bin_dir / "hayate", "--device-size", args.device_size,
                 "--stream-throughput", f"{args.throttle_now}MiB" if args.throttle_now else "0"]
        if replace:
            argv += ["--replace-address", replace]
    else:
        argv += ["--jvm-opt", f"-Dcassandra.jmx.local.port={jmx_port(host)}"]
        if replace:
            argv += ["--jvm-opt", f"-Dcassandra.replace_address_first_boot={replace}"]
    return argv


# compare.start_nodes starts the first three nodes through ctl_argv: give it ours.
compare.ctl_argv = node_argv


def cassandra_home():
    homes = sorted(p for p in CACHE.glob("cassandra-*") if (p / "lib").is_dir())
    if not homes:
        raise SystemExit("topology.py: Cassandra is not installed (bench/cassandra/install.sh)")
    return homes[-1]


def cassandra_tool(main_class, argv, timeout_s=STEP_TIMEOUT_S, jvm=()):
    """One of Cassandra's tools (a class of the installed jars: NodeTool, BulkLoader) run to
    completion; its stdout."""
    home = cassandra_home()
    # The module exports and opens the server runs with (ctl.sh reads the same file): without
    # them 5.0's tools refuse to start on Java 17.
    modules = [re.sub(r"^(--add-[a-z]+) ", r"\1=", line.strip())
               for line in (BENCH / "cassandra" / "jvm-options").read_text().splitlines()
               if line.startswith("--add-")]
    return run(["java", "-Xms64m", "-Xmx256m", *modules, *jvm, "-cp", f"{home}/lib/*",
                main_class, *argv], timeout=timeout_s)


def nodetool(host, *argv, timeout_s=STEP_TIMEOUT_S):
    """nodetool against one node's local JMX port (the NodeTool class of the installed jars)."""
    output = cassandra_tool("org.apache.cassandra.tools.NodeTool",
                            ["-h", "127.0.0.1", "-p", jmx_port(host), *argv], timeout_s)
    # Without a logging configuration the tool's libraries log at DEBUG on stdout.
    return "\n".join(line for line in output.splitlines()
                     if not re.match(r"\d\d:\d\d:\d\d\.\d+ \[", line))


def set_cassandra_throttle(servers, mib):
    """Both of Cassandra's stream throttles on every live node: the streaming one and the
    entire-SSTable (zero-copy) one, which is what moves whole SSTables."""
    for server in servers:
        nodetool(server.host, "setstreamthroughput", "--mib", str(mib))
        nodetool(server.host, "setstreamthroughput", "--entire-sstable-throughput", str(mib))
    if servers:
        return nodetool(servers[0].host, "getstreamthroughput", "--mib").strip() + "; " + \
            nodetool(servers[0].host, "getstreamthroughput", "--entire-sstable-throughput").strip()
    return ""


def metric_samples(host, port, timeout_s=2):
    """Every sample of a hayate node's /metrics, labels included: {(name, labels): value}."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout_s) as response:
            text = response.read().decode()
    except OSError:
        return None
    samples = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)", line)
        if match and not line.startswith("#"):
            try:
                samples[(match.group(1), match.group(2) or "")] = float(match.group(3))
            except ValueError:
                pass
    return samples


def stream_bytes(samples, direction):
    return (samples or {}).get(("hayate_stream_bytes_total", f'{{direction="{direction}"}}'))


def port_open(host, port):
    import socket
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class Sampler(threading.Thread):
    """Every half second: the load average, and each hayate node's stream counters (bytes in and
    out). The last value seen per node is kept, so a node that stops (a decommission, a kill)
    still counts what it had streamed."""

    def __init__(self, system, args):
        super().__init__(daemon=True)
        self.system, self.args = system, args
        self.hosts = {}  # host -> metrics port, the nodes to sample
        self.rows = []   # (t, loadavg1, {host: (in, out)})
        self.last = {}   # (host, incarnation) -> (in, out)
        self.incarnation = {}
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def watch(self, host):
        with self.lock:
            self.hosts[host] = self.args.hayate_metrics_port
            self.incarnation[host] = self.incarnation.get(host, -1) + 1

    def unwatch(self, host):
        with self.lock:
            self.hosts.pop(host, None)

    def sample(self):
        t = time.time()
        load1 = float(Path("/proc/loadavg").read_text().split()[0])
        counters = {}
        if self.system == "hayate":
            with self.lock:
                hosts = dict(self.hosts)
            for host, port in hosts.items():
                samples = metric_samples(host, port, timeout_s=1)
                if samples is None:
                    continue
                value = (stream_bytes(samples, "in") or 0, stream_bytes(samples, "out") or 0)
                counters[host] = value
                self.last[(host, self.incarnation.get(host, 0))] = value
        self.rows.append((t, load1, counters))

    def run(self):
        while not self.stopping.is_set():
            started = time.monotonic()
            self.sample()
            self.stopping.wait(max(0.0, SAMPLE_INTERVAL_S - (time.monotonic() - started)))

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)

    def totals(self):
        """Bytes in and out so far, summed over every node and incarnation seen."""
        return (sum(v[0] for v in self.last.values()), sum(v[1] for v in self.last.values()))

    def load_between(self, t0, t1):
        values = [load for t, load, _ in self.rows if t0 <= t <= t1]
        if not values:
            return {}
        return {"load1_mean": round(statistics.mean(values), 2), "load1_max": max(values)}

    def stream_span(self, t0, t1):
        """The first and last sample in [t0, t1] at which the summed bytes-in grew (hayate)."""
        previous, first, last = None, None, None
        running = {}
        for t, _, counters in self.rows:
            running.update(counters)
            total = sum(v[0] for v in running.values())
            if previous is not None and total > previous and t0 <= t <= t1:
                first = first or t
                last = t
            previous = total
        return first, last


# ---- Cassandra's own record of its streams --------------------------------------------------

def cassandra_streams(hosts, port, since_unix):
    """The rows of each node's system_views.streaming (Cassandra 4.0+: every stream session
    this node took part in, kept after it ends) updated since `since_unix`."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy
    rows = []
    for host in hosts:
        session = None
        # A node that just opened its CQL port on a loaded machine can take longer than the
        # driver's 2 s to answer the control connection's first queries: wait longer, retry.
        for attempt in range(3):
            profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]),
                                       request_timeout=60)
            cluster = Cluster([host], port=port, protocol_version=4, connect_timeout=30,
                              control_connection_timeout=30,
                              execution_profiles={EXEC_PROFILE_DEFAULT: profile})
            try:
                session = cluster.connect()
                break
            except Exception as error:  # noqa: BLE001  reported, then tried again
                cluster.shutdown()
                log(f"{host}: system_views.streaming not read (try {attempt + 1}): {error}")
                time.sleep(5)
        if session is None:
            continue
        try:
            for row in session.execute("SELECT * FROM system_views.streaming"):
                record = row._asdict()
                updated = record.get("last_updated_at")
                if updated is not None and updated.replace(
                        tzinfo=datetime.timezone.utc).timestamp() < since_unix - 1:
                    continue
                record["node"] = host
                rows.append(record)
        finally:
            cluster.shutdown()
    return rows


def cassandra_incoming(hosts):
    """Each node's Streaming TotalIncomingBytes (the bytes it has received in streams since it
    started, zero-copy included), read over JMX. system_views.streaming's bytes_received is not
    used for the bytes: in the smoke runs it gave 71.6 MB for a join whose node then held 22 MB,
    while this counter gave what the data folders say."""
    counters = {}
    for host in hosts:
        try:
            output = nodetool(host, "sjk", "mx", "-b",
                              "org.apache.cassandra.metrics:type=Streaming,name=TotalIncomingBytes",
                              "-mg", "-f", "Count", timeout_s=120)
            counters[host] = int(output.strip().splitlines()[-1])
        except (SystemExit, subprocess.SubprocessError, ValueError, IndexError) as error:
            log(f"{host}: TotalIncomingBytes not read: {error}")
    return counters


def summarize_cassandra_streams(rows):
    """Bytes received over every session, and the span from the first session's start to the
    last one's end (the sessions of one bootstrap run side by side)."""
    def ts(value):
        return value.replace(tzinfo=datetime.timezone.utc).timestamp() if value else None

    received = sum(int(r.get("bytes_received") or 0) for r in rows)
    sent = sum(int(r.get("bytes_sent") or 0) for r in rows)
    starts = [ts(r.get("status_start_timestamp") or r.get("status_init_timestamp")) for r in rows]
    ends = [ts(r.get("status_success_timestamp") or r.get("status_failure_timestamp")
               or r.get("last_updated_at")) for r in rows]
    starts, ends = [s for s in starts if s], [e for e in ends if e]
    span = (max(ends) - min(starts)) if starts and ends else None
    durations = [int(r["duration_millis"]) / 1000 for r in rows if r.get("duration_millis")]
    if not span and durations:
        span = max(durations)
    compact = [{k: (v.isoformat() if isinstance(v, datetime.datetime) else
                    str(v) if not isinstance(v, (int, float, str, type(None))) else v)
                for k, v in r.items()
                if k in ("node", "operation", "peers", "status", "follower", "duration_millis",
                         "bytes_received", "bytes_sent", "files_received", "files_sent",
                         "failure_cause")} for r in rows]
    return {"bytes": received, "bytes_sent": sent, "stream_s": round(span, 2) if span else None,
            "sessions": compact}


# ---- one system --------------------------------------------------------------------------

class Cluster:
    """The members of one system's ring as the steps change it: compare.py's Server objects."""

    def __init__(self, system, args, workdir, nodes):
        self.system, self.args, self.workdir = system, args, workdir
        self.members = list(nodes.servers)
        self.gone = []  # servers that left (for their logs' tails in a failure)
        self.next_octet = 1 + max(int(s.host.rsplit(".", 1)[1]) for s in self.members)
        self.rf = nodes.rf

    def hosts(self):
        return [s.host for s in self.members]

    def rundir(self, host):
        return self.workdir / f"{self.system}-{host}"

    def start_argv(self, host, replace=None):
        seeds = [h for h in self.hosts() if h != host]
        topology = {"hosts": seeds, "rf": self.rf}
        return node_argv(self.system, self.args, topology, host, self.rundir(host), replace)


def wait_normal(host, port, process, started, timeout_s=STEP_TIMEOUT_S):
    """Waits until a starting node's CQL port opens (both systems open it once the node is
    normal: Cassandra after its bootstrap, hayate after its join or replacement finished).
    Returns the seconds from `started`. The ctl script's own wait is 300 s; past it, it exits but
    the node goes on, and this keeps waiting."""
    while True:
        if port_open(host, port):
            return time.time() - started
        if time.time() - started > timeout_s:
            raise SystemExit(f"topology.py: {host} was not normal after {timeout_s} s")
        if process is not None and process.poll() not in (None, 0):
            output = process.stdout.read() if process.stdout else ""
            log(f"{host}: the ctl script exited {process.returncode}: {output.strip()[-500:]}")
            process = None  # the node may still be streaming: keep polling its port
        time.sleep(0.2)


def cassandra_normal_unix(rundir, host, since_unix):
    """When a Cassandra node's own log says it went NORMAL ("Node /IP:PORT state jump to
    NORMAL", from its main thread), after `since_unix`; None if it does not say. Its CQL port opens
    some seconds later (12.7-20.7 s in the sitting of 2026-12-01)."""
    path = rundir / "logs" / "system.log"
    if not path.exists():
        return None
    pattern = re.compile(rf"\[main\].*Node /{re.escape(host)}:\d+ state jump to NORMAL")
    found = None
    for line in path.read_text(errors="replace").splitlines():
        stamp = compare.LOG_TIME.search(line)
        if stamp and pattern.search(line):
            when = datetime.datetime.strptime(stamp.group(1).replace("T", " ").replace(",", ".")[:23],
                                              "%Y-%m-%d %H:%M:%S.%f").timestamp()
            if when >= since_unix:
                found = found or when
    return found


def launch_node(cluster, host, replace=None):
    argv = cluster.start_argv(host, replace)
    COMMANDS.append(shlex.join(str(a) for a in argv))
    return subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish_launch(process, host):
    if process is None or process.returncode is not None and process.stdout.closed:
        return
    output, _ = process.communicate(timeout=120)
    log(f"{host}: {output.strip()[-300:]}")


def step_add(cluster, sampler, step, resume_at_bytes=None):
    """A new node on the next free address joins. With `resume_at_bytes` (hayate), it gets
    SIGKILL once it has received that many bytes, then starts again on its data."""
    system, args = cluster.system, cluster.args
    host = f"127.0.0.{cluster.next_octet}"
    cluster.next_octet += 1
    rundir = cluster.rundir(host)
    shutil.rmtree(rundir, ignore_errors=True)
    step["node"] = host
    sampler.watch(host)
    started = time.time()
    step["start_unix"] = started
    process = launch_node(cluster, host)
    if resume_at_bytes is not None:
        metrics_port = args.hayate_metrics_port
        received = 0
        while received < resume_at_bytes:
            if port_open(host, args.port):
                raise SystemExit(f"topology.py: {host} finished its join before the kill "
                                 f"({received:,} of {resume_at_bytes:,} bytes)")
            samples = metric_samples(host, metrics_port, timeout_s=1)
            received = stream_bytes(samples, "in") or received
            if time.time() - started > STEP_TIMEOUT_S:
                raise SystemExit(f"topology.py: {host} did not reach {resume_at_bytes} bytes")
            time.sleep(0.1)
        log(f"{host}: " + run([compare.ctl_script(system), "kill", rundir]).strip())
        step["kill_unix"] = time.time()
        step["received_before_kill_bytes"] = int(received)
        process.communicate(timeout=60)
        time.sleep(args.resume_down_s)
        sampler.watch(host)  # a new incarnation: its counters start again from zero
        step["restart_unix"] = time.time()
        process = launch_node(cluster, host)
        started = step["restart_unix"]
    step["normal_s"] = round(wait_normal(host, args.port, process, started), 2)
    step["normal_unix"] = time.time()
    finish_launch(process, host)
    if system == "cassandra":
        logged = cassandra_normal_unix(rundir, host, started)
        step["normal_logged_s"] = round(logged - started, 2) if logged else None
    cluster.members.append(compare.Server(system, rundir, host, args.port))
    if resume_at_bytes is not None:
        samples = metric_samples(host, args.hayate_metrics_port)
        step["received_after_restart_bytes"] = int(stream_bytes(samples, "in") or 0)


def step_decommission(cluster, sampler, step):
    """The second member leaves the ring (not the first, the client's first contact point)."""
    system, args = cluster.system, cluster.args
    leaving = cluster.members[1]
    step["node"] = leaving.host
    step["start_unix"] = time.time()
    if system == "cassandra":
        log(nodetool(leaving.host, "decommission").strip() or f"{leaving.host}: decommissioned")
    else:
        log(run([args.bin_dir / "hayate", "decommission", "--host", leaving.host,
                 "--port", args.hayate_metrics_port]).strip()[-300:])
    step["normal_unix"] = time.time()
    step["normal_s"] = round(step["normal_unix"] - step["start_unix"], 2)
    cluster.members.remove(leaving)
    time.sleep(2)  # the last samples of its counters
    sampler.unwatch(leaving.host)
    compare.stop_server(leaving)
    cluster.gone.append(leaving)
    shutil.rmtree(leaving.rundir, ignore_errors=True)


def step_replace(cluster, sampler, step):
    """The second member is killed (SIGKILL) and its data deleted; once every other member has
    marked it down, a fresh node on its address replaces it."""
    system, args = cluster.system, cluster.args
    victim = cluster.members[1]
    survivors = [s for s in cluster.members if s is not victim]
    step["node"] = victim.host
    step["kill_unix"] = time.time()
    log(f"{victim.host}: " + run([compare.ctl_script(system), "kill", victim.rundir]).strip())
    sampler.unwatch(victim.host)
    # The cgroup stays for the replacement (ctl.sh makes it again); the data goes.
    shutil.rmtree(victim.rundir / "data", ignore_errors=True)
    while True:
        events = compare.log_events(system, survivors, victim, step["kill_unix"] - 1)
        seen = {e["node"] for e in events["down"]}
        if len(seen) == len(survivors):
            step["detected_s"] = round(max(e["t"] for e in events["down"]) - step["kill_unix"], 2)
            break
        if time.time() - step["kill_unix"] > 300:
            raise SystemExit(f"topology.py: the survivors did not mark {victim.host} down in 300 s")
        time.sleep(0.5)
    cluster.members.remove(victim)
    shutil.rmtree(victim.rundir, ignore_errors=True)
    sampler.watch(victim.host)
    step["start_unix"] = time.time()
    process = launch_node(cluster, victim.host, replace=victim.host)
    step["normal_s"] = round(wait_normal(victim.host, args.port, process, step["start_unix"]), 2)
    step["normal_unix"] = time.time()
    finish_launch(process, victim.host)
    if system == "cassandra":
        logged = cassandra_normal_unix(victim.rundir, victim.host, step["start_unix"])
        step["normal_logged_s"] = round(logged - step["start_unix"], 2) if logged else None
    cluster.members.insert(1, compare.Server(system, victim.rundir, victim.host, args.port))


STEPS = {"add": step_add, "decommission": step_decommission, "replace": step_replace,
         "resume": step_add}


def client_window(seconds, t0, start, end):
    """The client's per-second p99s (µs) and failures in [start, end) (unix times), its seconds
    being (n-1, n] after t0."""
    p99, intended, failed, count = [], [], 0, 0
    for second, entry in seconds.items():
        t = t0 + second
        if start < t <= end + 1e-9:
            if entry.get("p99_us"):
                p99.append(entry["p99_us"])
            if entry.get("intended_p99_us"):
                intended.append(entry["intended_p99_us"])
            failed += entry.get("failed", 0)
            count += entry.get("count", 0)
    return p99, intended, failed, count


def analyse_steps(steps, rundir, figures, sampler, system, args):
    seconds, _ = compare.client_series(rundir)
    meta = json.loads((rundir / "meta.json").read_text()) if (rundir / "meta.json").exists() else {}
    t0 = meta["start_unix_ms"] / 1000 if meta.get("start_unix_ms") else figures["client_started_unix"]
    for step in steps:
        if "normal_unix" not in step:
            continue
        start, end = step["start_unix"], step["normal_unix"]
        before_p99, before_int, before_failed, _ = client_window(
            seconds, t0, start - args.before_s + min(5, args.before_s / 4), start)
        during_p99, during_int, during_failed, during_ops = client_window(seconds, t0, start, end)
        # Errors from the kill (replace) or the step's start to the end of its --after-s.
        err_from = step.get("kill_unix", start)
        _, _, errors, _ = client_window(seconds, t0, err_from, end + args.after_s)
        step.update({
            "p99_before_ms": round(statistics.median(before_p99) / 1000, 2) if before_p99 else None,
            "p99_during_ms": round(statistics.median(during_p99) / 1000, 2) if during_p99 else None,
            "p99_during_max_ms": round(max(during_p99) / 1000, 2) if during_p99 else None,
            "intended_p99_before_ms": round(statistics.median(before_int) / 1000, 2) if before_int else None,
            "intended_p99_during_ms": round(statistics.median(during_int) / 1000, 2) if during_int else None,
            "intended_p99_during_max_ms": round(max(during_int) / 1000, 2) if during_int else None,
            "client_errors": errors,
            "client_ops_during": during_ops,
            **sampler.load_between(step.get("kill_unix", start), end),
        })
        if step["p99_before_ms"] and step["p99_during_ms"]:
            step["p99_ratio"] = round(step["p99_during_ms"] / step["p99_before_ms"], 2)
            step["p99_max_ratio"] = round(step["p99_during_max_ms"] / step["p99_before_ms"], 2)
        step["t_start_s"] = round(start - t0, 1)
        step["t_normal_s"] = round(end - t0, 1)
        if "kill_unix" in step:
            step["t_kill_s"] = round(step["kill_unix"] - t0, 1)
    series = [{"second": s, "p99_us": e.get("p99_us"), "intended_p99_us": e.get("intended_p99_us"),
               "ops": e.get("count"), "failed": e.get("failed")} for s, e in sorted(seconds.items())]
    return series


def measure_streams(cluster, sampler, step, before_totals, counters):
    """Bytes the step streamed and the stream's rate (MB/s = 10^6 bytes a second). `counters`:
    Cassandra's TotalIncomingBytes per node as the previous step left them (updated here)."""
    if cluster.system == "hayate":
        time.sleep(1.5)  # a last sample of every counter
        after = sampler.totals()
        step["stream_bytes"] = int(after[0] - before_totals[0])
        step["stream_bytes_sent"] = int(after[1] - before_totals[1])
        first, last = sampler.stream_span(step.get("restart_unix", step["start_unix"]),
                                          step["normal_unix"] + 2)
        if first and last and last > first:
            # The span between the first and last sample that saw bytes arrive, plus one
            # sampling interval (the bytes before the first sample arrived after the one before).
            step["stream_s"] = round(last - first + SAMPLE_INTERVAL_S, 2)
    else:
        after = cassandra_incoming(cluster.hosts())
        baseline = dict(counters)
        if step["step"] == "replace":
            baseline[step["node"]] = 0  # a new process on the dead node's address
        missing = [h for h in after if h not in baseline and h != step.get("node")]
        step["stream_bytes"] = sum(after[h] - baseline.get(h, 0) for h in after)
        if missing or len(after) < len(cluster.hosts()):
            step["stream_bytes_note"] = (f"TotalIncomingBytes missing before for {missing} or "
                                         f"after for {sorted(set(cluster.hosts()) - set(after))}")
        counters.clear()
        counters.update(after)
        rows = cassandra_streams(cluster.hosts(), cluster.args.port, step["start_unix"])
        summary = summarize_cassandra_streams(rows)
        step["vtable_bytes_received"] = summary["bytes"]
        step["stream_s"] = summary["stream_s"]
        step["cassandra_sessions"] = summary["sessions"]
    # A resumed join's rate is that of its second half: the span is measured from the restart.
    rate_bytes = step.get("received_after_restart_bytes", step.get("stream_bytes"))
    if rate_bytes and step.get("stream_s"):
        step["stream_mb_s"] = round(rate_bytes / step["stream_s"] / 1e6, 1)
    if step.get("stream_bytes") and step.get("normal_s"):
        step["bytes_over_normal_mb_s"] = round(step["stream_bytes"] / step["normal_s"] / 1e6, 1)


def set_throttle(cluster, mib):
    """The stream throttle in force for the steps to come. Cassandra: nodetool on every member.
    hayate reads [cluster] stream_throughput at start, so its members restart one at a time
    with the new setting (SIGTERM, start on the same data, normal again)."""
    args = cluster.args
    args.throttle_now = mib
    if cluster.system == "cassandra":
        return set_cassandra_throttle(cluster.members, mib)
    restarted = []
    for server in cluster.members:
        if server.settings().get("stream_throughput") == (f"{mib}MiB" if mib else "0"):
            continue
        compare.stop_server(server)
        argv = cluster.start_argv(server.host)
        log(run(argv).strip())
        server.reload()
        restarted.append(server.host)
    return f"hayate restarted with stream_throughput {throttle_text(mib)}: {', '.join(restarted) or 'none'}"


def throttle_set(cluster, client, sampler, args, workload_file, mib, steps_wanted, target,
                 threads, last_set):
    """One client run at `target` ops/s through the steps at one stream throttle."""
    system = cluster.system
    note = set_throttle(cluster, mib)
    log(f"{system}: stream throttle {throttle_text(mib)}: {note}")
    rundir = cluster.workdir / f"run-{system}-{mib}"
    shutil.rmtree(rundir, ignore_errors=True)
    steps = []
    nodes = compare.Nodes(system, "cluster", list(cluster.members), "QUORUM", cluster.rf)
    add_bytes = {}
    # Cassandra's stream counters, read between steps (nodetool starts a JVM: not in a window
    # whose p99 is measured).
    counters = cassandra_incoming(cluster.hosts()) if system == "cassandra" else {}

    def orchestrate(process):
        for name in steps_wanted:
            if name == "resume" and (system != "hayate" or not last_set):
                continue
            time.sleep(args.before_s)
            if process.poll() is not None:
                raise SystemExit(f"topology.py: the client stopped before the {name} step")
            step = {"step": name, "system": system, "throttle_mib": mib,
                    "members_before": cluster.hosts(), "loadavg_start": Path("/proc/loadavg").read_text().split()[0]}
            steps.append(step)
            log(f"{system} ({throttle_text(mib)}): {name} on {cluster.hosts()}")
            before = sampler.totals()
            try:
                if name == "resume":
                    full = add_bytes.get("add")
                    if not full:
                        step["error"] = "no add step at this throttle to size the kill"
                        continue
                    step["full_join_bytes"] = full
                    step_add(cluster, sampler, step, resume_at_bytes=int(full * args.resume_at))
                else:
                    STEPS[name](cluster, sampler, step)
            except (SystemExit, subprocess.SubprocessError, OSError) as error:
                # The step failed (the error says how): the run ends here for this system, with
                # the client's figures up to now kept; the other system still runs.
                step["error"] = str(error).strip()[-400:]
                log(f"{system}: {name} failed: {error}")
                break
            measure_streams(cluster, sampler, step, before, counters)
            if name == "add":
                add_bytes["add"] = step.get("stream_bytes")
            if name == "resume":
                full = step["full_join_bytes"]
                before_kill = step["received_before_kill_bytes"]
                after = step.get("received_after_restart_bytes", 0)
                resent = before_kill + after - full
                step["resent_bytes_estimate"] = resent
                step["resent_share"] = round(resent / before_kill, 3) if before_kill else None
            step["members_after"] = cluster.hosts()
            step["loadavg_end"] = Path("/proc/loadavg").read_text().split()[0]
            log(f"{system} ({throttle_text(mib)}): {name} normal after {step.get('normal_s')} s, "
                f"{step.get('stream_bytes', 0) / 1e6:,.0f} MB at {step.get('stream_mb_s')} MB/s")
        time.sleep(args.after_s)
        process.send_signal(signal.SIGINT)

    figures = client.run("run", workload_file, nodes, threads, rundir, f"{system}-{mib}",
                         {"operationcount": 2_000_000_000, "maxexecutiontime": 4 * 3600},
                         during=orchestrate, target=target, consistency="QUORUM")
    series = analyse_steps(steps, rundir, figures, sampler, system, args)
    run_figures = {k: figures.get(k) for k in ("throughput_ops", "errors", "not_found", "runtime_s",
                                                "read_p99_us", "update_p99_us")}
    run_figures["target_ops"] = target
    # What each failed operation returned (YCSB's Return= lines), for the report.
    summary = compare.parse_summary((rundir / "summary.txt").read_text())
    run_figures["returns"] = {f"{section} {metric}": int(value)
                              for (section, metric), value in summary.items()
                              if metric.startswith("Return=") and metric != "Return=OK"}
    return steps, series, run_figures


def one_system(system, client, args, out, workdir, workload_file, record):
    args.throttle_now = args.throttles[0]
    log(f"{system}: starting 3 nodes")
    nodes = compare.start_nodes(system, "cluster", args, workdir)
    record["start_s"] = nodes.start_s
    sampler = Sampler(system, args)
    cluster = Cluster(system, args, workdir, nodes)
    try:
        compare.create_schema(nodes)
        runs = workdir / "runs"
        load = client.run("load", workload_file, nodes, args.load_threads, runs / f"{system}-load",
                          system, {})
        record["load"] = {k: load.get(k) for k in ("throughput_ops", "runtime_s", "errors")}
        if system == "cassandra":
            record["settle"] = compare.settle(nodes, args, "after the load")
            record["version"] = compare.cqltool(nodes, "version").strip().splitlines()[-1]
        record["disk_after_load"] = nodes.disk_bytes()
        if args.max_ops.get(system):
            record["max_ops"] = args.max_ops[system]
            record["max_ops_source"] = "--max-ops"
        else:
            peak = client.run("run", workload_file, nodes, args.threads, runs / f"{system}-max",
                              f"{system}-max", {"operationcount": 2_000_000_000,
                                                "maxexecutiontime": args.max_seconds},
                              consistency="QUORUM")
            # The second half of the run: a JVM freshly started still compiles its hot code in
            # the first seconds (Cassandra's first 10 s at 32 threads ran at a fraction of its
            # later rate in the smoke runs).
            seconds, _ = compare.client_series(runs / f"{system}-max")
            counts = [seconds[s]["count"] for s in sorted(seconds)][1:-1]
            late = counts[len(counts) // 2:]
            record["max_ops"] = round(statistics.median(late)) if late else round(peak["throughput_ops"])
            record["max_ops_whole_run"] = round(peak["throughput_ops"])
            record["max_ops_source"] = (f"median ops/s of the second half of a {args.max_seconds} s "
                                        f"unthrottled run at {args.threads} threads")
        target = max(1, int(record["max_ops"] * args.load))
        record["target_ops"] = target
        for host in cluster.hosts():
            sampler.watch(host)
        sampler.start()
        record["sets"] = []
        for index, mib in enumerate(args.throttles):
            steps, series, run_figures = throttle_set(
                cluster, client, sampler, args, workload_file, mib, args.steps, target,
                args.threads, index == len(args.throttles) - 1)
            record["sets"].append({"throttle_mib": mib, "steps": steps, "client": run_figures,
                                   "series": series})
            write_partial(out, record, system)
            if any(step.get("error") for step in steps):
                record["failure"] = "a step failed: the throttle settings after it were not run"
                break
    finally:
        sampler.stop()
        # Every node this system started, members or not (a join that failed half-way too).
        for folder in sorted(workdir.glob(f"{system}-127.*")):
            if (folder / "server.pid").exists():
                try:
                    log(run([compare.ctl_script(system), "stop", folder]).strip())
                except SystemExit as error:
                    log(f"{folder.name}: {error}")
            shutil.rmtree(folder, ignore_errors=True)


def write_partial(out, record, system):
    """What a system has so far, in case the sitting is cut short."""
    (out / f"{system}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")


# ---- the device ----------------------------------------------------------------------------

def fio_rates(workdir, size="2G", runtime_s=15):
    """fio's sequential write and read rates (1 MiB blocks, O_DIRECT, libaio at depth 16) of a
    file on the disk the nodes' data lives on."""
    if not shutil.which("fio"):
        run(["apt-get", "install", "-y", "fio"], record=False)
    path = workdir / "fio.seq"
    rates = {}
    try:
        for mode in ("write", "read"):
            argv = ["fio", "--name=seq" + mode, f"--filename={path}", f"--size={size}",
                    f"--rw={mode}", "--bs=1M", "--direct=1", "--ioengine=libaio", "--iodepth=16",
                    f"--runtime={runtime_s}", "--time_based", "--output-format=json"]
            result = json.loads(run(argv))
            job = result["jobs"][0][mode]
            rates[f"seq_{mode}_mb_s"] = round(job["bw_bytes"] / 1e6, 1)
        rates["command"] = "fio --rw=read|write --bs=1M --direct=1 --ioengine=libaio " \
                           f"--iodepth=16 --size={size} --runtime={runtime_s} --time_based"
        rates["loadavg"] = Path("/proc/loadavg").read_text().split()[0]
    finally:
        path.unlink(missing_ok=True)
    return rates


# ---- the report ----------------------------------------------------------------------------

def cell(value, digits=1, suffix=""):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{suffix}"
    return f"{value:,}{suffix}"


def ratio_text(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def goals(state, args):
    """Each goal of the issue, per step: met or missed, and by how much."""
    lines = []
    systems = state["systems"]
    device = state.get("fio", {}).get("seq_read_mb_s")

    def step_of(system, mib, name):
        for s in systems.get(system, {}).get("sets", []):
            if s["throttle_mib"] == mib:
                for step in s["steps"]:
                    if step["step"] == name:
                        return step
        return None

    if 0 in args.throttles:
        for name in ("add", "decommission", "replace"):
            h, c = step_of("hayate", 0, name), step_of("cassandra", 0, name)
            if h and c and h.get("normal_s") and c.get("normal_s"):
                share = h["normal_s"] / c["normal_s"]
                ok = share <= GOAL_TIME_SHARE
                lines.append(f"- unthrottled {name}, time to NORMAL at most 1/3 of Cassandra's: "
                             f"hayate {h['normal_s']:.1f} s, Cassandra {c['normal_s']:.1f} s, "
                             f"{share:.2f} of it: **{'met' if ok else 'missed'}**"
                             + ("" if ok else f" ({share / GOAL_TIME_SHARE:.2f}x the allowed time)"))
            if h and device and h.get("stream_mb_s"):
                share = h["stream_mb_s"] / device
                ok = share >= GOAL_DEVICE_SHARE
                lines.append(f"- unthrottled {name}, hayate streams at least 50% of the device's "
                             f"sequential read rate ({device:,.0f} MB/s): {h['stream_mb_s']:,.1f} MB/s, "
                             f"{share:.0%}: **{'met' if ok else 'missed'}**"
                             + ("" if ok else f" (short by {GOAL_DEVICE_SHARE * device - h['stream_mb_s']:,.0f} MB/s)"))
    if DEFAULT_THROTTLE_MIB in args.throttles:
        for name in ("add", "decommission", "replace", "resume"):
            h = step_of("hayate", DEFAULT_THROTTLE_MIB, name)
            if not h or "p99_ratio" not in h:
                continue
            ok = h["p99_ratio"] <= GOAL_P99_RATIO
            lines.append(f"- default throttle, {name}: hayate's p99 during at most 1.5x before "
                         f"(median of the per-second p99s): {h['p99_before_ms']} ms before, "
                         f"{h['p99_during_ms']} ms during, {h['p99_ratio']}x: "
                         f"**{'met' if ok else 'missed'}**; the worst second "
                         f"{h['p99_during_max_ms']} ms ({h.get('p99_max_ratio')}x)")
            ok = h.get("client_errors") == 0
            lines.append(f"- default throttle, {name}: 0 client errors: {h.get('client_errors')}: "
                         f"**{'met' if ok else 'missed'}**")
    for s in systems.get("hayate", {}).get("sets", []):
        for step in s["steps"]:
            if step["step"] == "resume" and step.get("resent_share") is not None:
                ok = step["resent_share"] < GOAL_RESEND_SHARE
                lines.append(
                    f"- resumed join ({throttle_text(s['throttle_mib'])}) re-sends less than 10% of "
                    f"what it had received: {step['received_before_kill_bytes'] / 1e6:,.1f} MB before "
                    f"the kill, {step['received_after_restart_bytes'] / 1e6:,.1f} MB after the restart, "
                    f"{step['full_join_bytes'] / 1e6:,.1f} MB for an uninterrupted join (the add step): "
                    f"about {step['resent_bytes_estimate'] / 1e6:,.1f} MB again, "
                    f"{step['resent_share']:.1%}: **{'met' if ok else 'missed'}**")
    return lines


def write_results(out, args, state):
    """results.md, steps.csv, p99.csv, summary.json and the chart."""
    fields = ["system", "throttle", "step", "node", "normal_s", "normal_logged_s", "detected_s",
              "stream_bytes",
              "stream_s", "stream_mb_s", "bytes_over_normal_mb_s", "p99_before_ms",
              "p99_during_ms", "p99_during_max_ms", "p99_ratio", "intended_p99_before_ms",
              "intended_p99_during_ms", "client_errors", "load1_mean", "load1_max",
              "received_before_kill_bytes", "received_after_restart_bytes", "full_join_bytes",
              "resent_bytes_estimate", "resent_share", "error"]
    rows = []
    with open(out / "p99.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["system", "throttle_mib", "second", "p99_us", "intended_p99_us", "ops",
                         "failed"])
        for system, record in state["systems"].items():
            for s in record.get("sets", []):
                for e in s.get("series", []):
                    writer.writerow([system, s["throttle_mib"], e["second"], e["p99_us"],
                                     e["intended_p99_us"], e["ops"], e["failed"]])
                for step in s["steps"]:
                    rows.append({**{k: step.get(k) for k in fields}, "system": system,
                                 "throttle": throttle_text(s["throttle_mib"])})
    with open(out / "steps.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    compact = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "env": state["env"], "fio": state.get("fio"), "commands": state.get("commands"),
               "systems": {system: {k: v for k, v in record.items() if k != "sets"} |
                           {"sets": [{k: v for k, v in s.items() if k != "series"}
                                     for s in record.get("sets", [])]}
                           for system, record in state["systems"].items()}}
    (out / "summary.json").write_text(json.dumps(compact, indent=1, default=str) + "\n")
    chart = draw_chart(out, state)

    env = state["env"]
    md = [f"# Topology changes under load: hayate and Apache Cassandra ({env['date']})", ""]
    if state.get("failure"):
        md += [f"**The sitting did not finish: {state['failure']}**", ""]
    md += [
        "What ran: `" + state["command"] + "`", "",
        f"- Rows: {args.records:,} (YCSB usertable, 10 fields x 100 B), keyspace `ycsb` RF 3, "
        f"3 nodes on 127.0.0.1-3 per system, one system at a time (Cassandra first); each node "
        f"in its own memory cgroup of {args.memory}; hayate's devices {args.device_size}.",
        f"- Client: hayate-bench, workload `ref` (YCSB workloada with uniform keys: 50% reads, "
        f"50% updates), QUORUM, {args.threads} threads, `-target` at {args.load:.0%} of each "
        f"system's own maximum, running through every step of a throttle setting; "
        f"{args.before_s} s of client alone before each step, {args.after_s} s after the last.",
        f"- Steps: {', '.join(args.steps)}; stream throttles (MiB/s per node, 0 = unthrottled): "
        f"{', '.join(str(t) for t in args.throttles)}.",
        "",
        "**The machine was shared**: other engineers compiled Rust on its 2 cores during the "
        "sitting; the load average during each step is in the tables (a quiet machine would "
        "read about 1-2 with our own processes alone). The figures are noisy and single "
        "samples.", "",
    ]
    fio = state.get("fio") or {}
    md += ["## The device", "",
           f"fio on the disk the nodes' data is on: sequential read **{cell(fio.get('seq_read_mb_s'))} MB/s**, "
           f"sequential write {cell(fio.get('seq_write_mb_s'))} MB/s (`{fio.get('command', '-')}`; "
           f"load average then {fio.get('loadavg', '-')}). MB = 10^6 bytes throughout.", ""]
    md += ["## Per system", "", "| | Cassandra | hayate |", "|---|---:|---:|"]
    sysrec = state["systems"]

    def both(key, fn=lambda v: cell(v)):
        return " | ".join(fn(sysrec.get(s, {}).get(key)) for s in ("cassandra", "hayate"))

    md += [f"| version | {sysrec.get('cassandra', {}).get('version', '-')} | {env.get('hayate_commit')} |",
           f"| start of 3 nodes (s, slowest) | {both('start_s')} |",
           "| load (rows/s) | " + " | ".join(cell((sysrec.get(s, {}).get('load') or {}).get('throughput_ops'))
                                       for s in ("cassandra", "hayate")) + " |",
           f"| maximum at QUORUM (ops/s) | {both('max_ops')} |",
           f"| client target, {args.load:.0%} (ops/s) | {both('target_ops')} |", ""]
    for mib in args.throttles:
        md += [f"## Stream throttle: {throttle_text(mib)}", "",
               "| step | system | node | time to NORMAL (s) | streamed (MB) | stream time (s) | "
               "stream rate (MB/s) | vs device read | p99 before (ms) | p99 during, median / worst second (ms) | "
               "ratio | intended p99 before / during (ms) | client errors | load avg (mean / max) |",
               "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name in args.steps:
            for system in ("cassandra", "hayate"):
                for s in sysrec.get(system, {}).get("sets", []):
                    if s["throttle_mib"] != mib:
                        continue
                    for step in (x for x in s["steps"] if x["step"] == name):
                        device = fio.get("seq_read_mb_s")
                        share = (f"{step['stream_mb_s'] / device:.0%}"
                                 if step.get("stream_mb_s") and device else "-")
                        extra = f" (killed; detected after {step['detected_s']} s)" if step.get("detected_s") is not None else ""
                        md.append(
                            f"| {name} | {system} | {step.get('node', '-')}{extra} | {cell(step.get('normal_s'))} | "
                            f"{cell((step.get('stream_bytes') or 0) / 1e6)} | {cell(step.get('stream_s'))} | "
                            f"{cell(step.get('stream_mb_s'))} | "
                            f"{share} | "
                            f"{cell(step.get('p99_before_ms'), 2)} | {cell(step.get('p99_during_ms'), 2)} / "
                            f"{cell(step.get('p99_during_max_ms'), 2)} | {cell(step.get('p99_ratio'), 2)} | "
                            f"{cell(step.get('intended_p99_before_ms'), 2)} / {cell(step.get('intended_p99_during_ms'), 2)} | "
                            f"{cell(step.get('client_errors'))} | {cell(step.get('load1_mean'), 1)} / {cell(step.get('load1_max'), 1)} |"
                            + (f" **failed: {step['error']}**" if step.get("error") else ""))
        for system in ("cassandra", "hayate"):
            for s in sysrec.get(system, {}).get("sets", []):
                c = s.get("client") or {}
                if s["throttle_mib"] != mib or not c.get("target_ops"):
                    continue
                share = (c.get("throughput_ops") or 0) / c["target_ops"]
                md.append("")
                md.append(f"{system}'s client over the whole run: {cell(c.get('throughput_ops'), 0)} ops/s of "
                          f"its target {c['target_ops']:,} ({share:.1%}), {cell(c.get('errors'), 0)} errors "
                          f"({', '.join(f'{k}: {v}' for k, v in (c.get('returns') or {}).items()) or 'none'})"
                          + (". It fell behind its target, so its intended latency measures the client's "
                             "growing backlog rather than the server" if share < 0.999 else "") + ".")
        ratios = []
        for name in ("add", "decommission", "replace"):
            h = next((x for s in sysrec.get("hayate", {}).get("sets", []) if s["throttle_mib"] == mib
                      for x in s["steps"] if x["step"] == name), None)
            c = next((x for s in sysrec.get("cassandra", {}).get("sets", []) if s["throttle_mib"] == mib
                      for x in s["steps"] if x["step"] == name), None)
            if h and c:
                ratios.append(f"| {name} | {ratio_text(h.get('normal_s'), c.get('normal_s'))} | "
                              f"{ratio_text(h.get('stream_mb_s'), c.get('stream_mb_s'))} | "
                              f"{ratio_text(h.get('stream_bytes'), c.get('stream_bytes'))} |")
        if ratios:
            md += ["", "hayate ÷ Cassandra:", "", "| step | time to NORMAL | stream rate | bytes streamed |",
                   "|---|---:|---:|---:|", *ratios]
        md.append("")
    md += ["## Goals", ""] + (goals(state, args) or ["- no pair of steps to judge"]) + [""]
    md += ["## How each figure is taken", "",
           "- **Time to NORMAL**: add, replace and resume: from the new node's start (the ctl "
           "script's command) until its CQL port accepts connections, which both systems open "
           "only once the node is normal (Cassandra after its bootstrap, hayate after its join "
           "or replacement finished). Cassandra's includes what 5.0 does by default before "
           "streaming: JVM start, waiting for gossip to settle and the 30 s ring delay. "
           "Decommission: `nodetool decommission` / `hayate decommission` until it returns "
           "(the node has left the ring). Replace: from the replacement's start, once every "
           "survivor's log had marked the killed node down (that detection time is given beside it).",
           "- **Streamed bytes**: hayate: `hayate_stream_bytes_total{direction=\"in\"}` summed over "
           "every node (records as stored, uncompressed); Cassandra: the JMX counter "
           "`org.apache.cassandra.metrics:type=Streaming,name=TotalIncomingBytes` of every node "
           "(`nodetool sjk mx`), read between the steps (with zero-copy streaming: whole SSTable "
           "files, LZ4-compressed data plus index, filter and summary components). "
           "`system_views.streaming`'s `bytes_received` is kept in summary.json only: in the smoke "
           "runs it gave 71.6 MB for a join whose node then held 22 MB. The two systems' bytes "
           "are not the same unit of data: compare times for the same rows.",
           "- **Stream time**: hayate: from the first to the last half-second sample at which the "
           "receivers' byte counters grew; Cassandra: from the first session's start to the last "
           "one's end in `system_views.streaming`. Rate = bytes ÷ stream time.",
           "- **p99**: hayate-bench's per-second p99 of all operations (`ALL`, from each request's "
           "send) and the intended p99 (`Intended-ALL`, from when the throttle meant it to start, "
           "which also counts time a request waited in the client). *Before*: median of the "
           f"per-second p99s over the last {args.before_s} s before the step (its first few "
           "seconds left out); *during*: median and worst second from the step's start to NORMAL.",
           "- **Client errors**: failed operations (`*-FAILED`) from the step's start (the kill, "
           f"for replace) to {args.after_s} s after NORMAL.",
           "- **Load average**: /proc/loadavg's 1-minute figure sampled every half second over the "
           "step (the machine's, other engineers' builds included).",
           "- **Resumed join**: the joining node gets SIGKILL once its `stream_bytes_total{in}` "
           f"passes {args.resume_at:.0%} of the add step's bytes at the same throttle, is started "
           f"again {args.resume_down_s} s later on its data; re-sent ≈ (before the kill + after "
           "the restart) − the add step's uninterrupted join, as a share of what it had before the "
           "kill. The two joins take different tokens, so the estimate carries a few percent of "
           "noise either way.", ""]
    if chart:
        md += ["## p99 over time", "", f"![p99 per second]({chart})", "",
               "Each panel: one system at one throttle; shaded spans are the steps (start to "
               "NORMAL); the per-second p99 in ms (log scale). Data: `p99.csv`.", ""]
    md += ["## What favours either side", "",
           "- One machine, 2 cores, one disk for every node: a stream's sender, its receiver and "
           "the client share the cores, so the stream rate is bound by CPU, not the network or "
           "the device; Cassandra's zero-copy streaming sends files with little CPU, which favours it "
           "here more than on separate machines, and hayate's record-by-record stream pays CPU "
           "on both ends.",
           "- Cassandra's time to NORMAL includes its default startup waits (gossip settling, "
           "30 s ring delay), which an operator would not shorten in production; hayate has none.",
           "- Cassandra's bytes are LZ4-compressed SSTables, hayate's uncompressed records: "
           "hayate moves more bytes for the same rows.",
           "- The data set is small (each node holds the whole data set at RF 3 on 3 nodes); "
           "a longer stream would weigh startup waits less.",
           "- Each system's client runs at 70% of its own maximum, so hayate's streams compete "
           "with a larger foreground load than Cassandra's.", ""]
    md += ["## Environment and provenance", ""]
    md += [f"- {k}: {v}" for k, v in env.items()]
    md += ["", "## Commands", "", "```"] + state.get("commands", [])[:200] + ["```", ""]
    (out / "results.md").write_text("\n".join(md))


def pyplot():
    """matplotlib's pyplot drawing into files (Agg), or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def draw_chart(out, state):
    plt = pyplot()
    if plt is None:
        return None
    panels = [(system, s) for system in ("cassandra", "hayate")
              for s in state["systems"].get(system, {}).get("sets", [])]
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.2 * len(panels)), squeeze=False)
    colours = {"add": "#2ca02c", "decommission": "#ff7f0e", "replace": "#9467bd", "resume": "#8c564b"}
    for ax, (system, s) in zip(axes[:, 0], panels):
        xs = [e["second"] for e in s["series"] if e["p99_us"]]
        ys = [e["p99_us"] / 1000 for e in s["series"] if e["p99_us"]]
        ax.plot(xs, ys, lw=0.8, color="#d62728" if system == "hayate" else "#1f77b4")
        ax.set_yscale("log")
        for step in s["steps"]:
            if step.get("t_start_s") is None:
                continue
            ax.axvspan(step.get("t_kill_s", step["t_start_s"]), step["t_normal_s"], alpha=0.2,
                       color=colours.get(step["step"], "#888"))
            ax.text(step.get("t_kill_s", step["t_start_s"]), ax.get_ylim()[1] if ys else 1,
                    step["step"], fontsize=7, va="top")
        ax.set_ylabel("p99 (ms)", fontsize=8)
        ax.set_title(f"{system}, stream throttle {throttle_text(s['throttle_mib'])}, client at "
                     f"{state['systems'][system].get('target_ops', 0):,} ops/s", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("seconds into the client's run", fontsize=8)
    fig.tight_layout()
    path = out / "p99.png"
    fig.savefig(path, dpi=70)
    plt.close(fig)
    return path.name


# ---- main ----------------------------------------------------------------------------------

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--name", default="topology", help="results folder suffix")
    parser.add_argument("--records", type=int, default=1_000_000, help="rows loaded")
    parser.add_argument("--memory", default="2GiB", help="memory limit of each node (cgroup)")
    parser.add_argument("--device-size", default=None,
                        help="hayate's device per node (default: records x 1.1 KB x 3, in GiB: "
                             "each node may hold the whole data set at RF 3)")
    parser.add_argument("--threads", type=int, default=32, help="client threads")
    parser.add_argument("--load-threads", type=int, default=32, help="client threads of the load")
    parser.add_argument("--max-seconds", type=int, default=30,
                        help="length of the unthrottled run that measures each system's maximum")
    parser.add_argument("--max-ops", default="",
                        help="each system's maximum, given rather than measured: cassandra=N,hayate=M")
    parser.add_argument("--load", type=float, default=LOAD_SHARE_DEFAULT,
                        help="the client's target as a share of the system's maximum")
    parser.add_argument("--before-s", type=int, default=60, help="client alone before each step")
    parser.add_argument("--after-s", type=int, default=30, help="client alone after the last step")
    parser.add_argument("--steps", default="add,decommission,replace,resume",
                        help="in order; resume runs on hayate only, at the last throttle")
    parser.add_argument("--throttles", default=f"0,{DEFAULT_THROTTLE_MIB}",
                        help="stream throttles, MiB/s per node, in order (0 = unthrottled)")
    parser.add_argument("--resume-at", type=float, default=0.5,
                        help="the resumed join is killed at this share of the add step's bytes")
    parser.add_argument("--resume-down-s", type=int, default=5,
                        help="seconds between the joining node's kill and its restart")
    parser.add_argument("--skip-cassandra", action="store_true", help="hayate only")
    parser.add_argument("--skip-hayate", action="store_true", help="Cassandra only")
    parser.add_argument("--settle-quiet-s", type=int, default=30)
    parser.add_argument("--settle-timeout-s", type=int, default=900)
    parser.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", str(REPO / "target")),
                        help="the cargo target dir whose release hayate and hayate-bench run")
    parser.add_argument("--build", action="store_true", help="cargo build --release first")
    parser.add_argument("--built-from-commit", default=None,
                        help="the commit --target-dir's binaries were built from, when they were "
                             "built from a clean export of it rather than from this work tree "
                             "(recorded as the provenance)")
    parser.add_argument("--allow-unlimited", action="store_true")
    parser.add_argument("--work-dir", default=str(REPO / "target" / "bench-work"))
    parser.add_argument("--results-dir", default=str(BENCH / "results"))
    args = parser.parse_args()
    args.steps = [s for s in args.steps.split(",") if s]
    for name in args.steps:
        if name not in STEPS:
            parser.error(f"unknown step {name!r}; known: {', '.join(STEPS)}")
    args.throttles = [int(t) for t in args.throttles.split(",")]
    args.max_ops = {k: int(v) for k, v in (item.split("=") for item in args.max_ops.split(",") if item)}
    args.systems = [s for s in ("cassandra", "hayate")
                    if not (s == "cassandra" and args.skip_cassandra)
                    and not (s == "hayate" and args.skip_hayate)]
    args.memory_bytes = compare.parse_size(args.memory)
    args.bin_dir = Path(args.target_dir) / "release"
    if args.device_size is None:
        args.device_size = f"{max(1, -(-args.records * 1100 * 3 // (1 << 30)))}GiB"
    # What compare.py's cluster functions read.
    args.cluster_hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    args.cluster_rf, args.cluster_consistency = 3, "QUORUM"
    args.port, args.cassandra_storage_port = 9042, 7000
    args.hayate_metrics_port, args.hayate_storage_port = 9180, 7000
    args.durability, args.commitlog_sync = "default", "batch"
    args.read_page_cache, args.delta_buffer, args.target = False, None, None
    return args


def reexec_in_pyenv(script=__file__):
    """The cassandra-driver (system_views.streaming) and matplotlib come from the harness's venv:
    runs `script` (this one, or a peer that imports it) again under the venv's Python."""
    try:
        # cassandra.cluster, not cassandra: bench/cassandra/ (the scripts) is on the path too,
        # and would pass for a namespace package.
        import cassandra.cluster  # noqa: F401
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if Path(sys.prefix).resolve() == PYENV.resolve():  # the venv already (its python links out)
        run([PYENV / "bin" / "pip", "install", "-q", "matplotlib"], record=False)
        return
    compare.ensure_pyenv()
    if subprocess.run([PYENV / "bin" / "python", "-c", "import matplotlib"],
                      capture_output=True).returncode != 0:
        run([PYENV / "bin" / "pip", "install", "-q", "matplotlib"], record=False)
    os.execv(PYENV / "bin" / "python", [str(PYENV / "bin" / "python"), script, *sys.argv[1:]])


def check_addresses(args):
    """Nothing may listen where the nodes will: the CQL, storage, metrics and JMX ports of
    127.0.0.1-9 (others' servers on 127.0.0.1:9042 would take the client's requests)."""
    busy = []
    for octet in range(1, 10):
        host = f"127.0.0.{octet}"
        for port in (args.port, args.cassandra_storage_port, args.hayate_metrics_port):
            if port_open(host, port):
                busy.append(f"{host}:{port}")
        if port_open("127.0.0.1", JMX_PORT_BASE + octet):
            busy.append(f"127.0.0.1:{JMX_PORT_BASE + octet}")
    if busy:
        raise SystemExit(f"topology.py: something already listens on {', '.join(busy)}")


def begin_sitting(args, script):
    """What a sitting of topology.py or backup.py does first: its results folder (today's date
    and --name, numbered if taken) and its work folder, the build (--build) and Cassandra's
    install, the provenance (commit, binaries' hashes, a dirty tree), and the client."""
    commit = compare.git_commit()
    stem = f"{datetime.date.today().isoformat()}-{args.name}"
    out = next(Path(args.results_dir) / (stem if n == 1 else f"{stem}-{n}") for n in range(1, 100)
               if not (Path(args.results_dir) / (stem if n == 1 else f"{stem}-{n}")).exists())
    out.mkdir(parents=True)
    workdir = Path(args.work_dir) / f"{script}-{out.name}"
    workdir.mkdir(parents=True, exist_ok=True)
    log(f"results in {out}, the nodes' data in {workdir}")
    if args.build:
        run(["cargo", "build", "--release", "-p", "hayate-server", "-p", "hayate-bench"], cwd=REPO,
            env={**os.environ, "CARGO_TARGET_DIR": args.target_dir})
    for binary in ("hayate", "hayate-bench") if "hayate" in args.systems else ("hayate-bench",):
        if not (args.bin_dir / binary).exists():
            raise SystemExit(f"{script}.py: no {args.bin_dir / binary} (build it, or --build)")
    if "cassandra" in args.systems:
        run([BENCH / "cassandra" / "install.sh"], record=False)
    env = compare.environment(workdir, commit)
    env["hayate_binary_sha256"] = compare.sha256_of(args.bin_dir / "hayate")
    env["hayate_bench_binary_sha256"] = compare.sha256_of(args.bin_dir / "hayate-bench")
    env["binaries"] = str(args.bin_dir)
    env["cassandra_home"] = str(cassandra_home())
    env["harness_commit"] = commit  # the scripts', compare.py's and the ctl scripts' tree
    dirty = ", ".join(line.split(maxsplit=1)[-1] for line in compare.git_dirty().splitlines())
    if getattr(args, "built_from_commit", None):
        env["hayate_commit"] = (f"{args.built_from_commit} (the binaries were built from a clean "
                                f"`git archive` export of this commit)")
        if dirty:
            env["work_tree"] = f"dirty, but not in the binaries: {dirty}"
    elif dirty:
        env["work_tree"] = ("dirty: uncommitted changes to tracked files (other engineers' work "
                            f"in progress; binaries built from this tree may include them): {dirty}")
    client = compare.Client("hayate-bench", args)
    client.program = [args.bin_dir / "hayate-bench"]
    return out, workdir, env, client


def main():
    reexec_in_pyenv()
    sys.path.insert(0, str(BENCH / "lib"))
    args = parse_args()
    check_addresses(args)
    out, workdir, env, client = begin_sitting(args, "topology")
    state = {"env": env, "systems": {},
             "command": shlex.join(["bench/topology.py", *sys.argv[1:]])}
    workload_file = compare.write_workload("ref", workdir / "workload-ref")
    signal.signal(signal.SIGTERM, compare.on_sigterm)
    try:
        log("fio: the device's sequential rates")
        state["fio"] = fio_rates(workdir)
        log(f"fio: {state['fio']}")
        for system in args.systems:
            record = state["systems"].setdefault(system, {})
            one_system(system, client, args, out, workdir, workload_file, record)
    except (SystemExit, KeyboardInterrupt, Exception) as error:  # noqa: BLE001
        state["failure"] = f"{type(error).__name__}: {error}"
        log(f"the sitting stopped: {state['failure']}")
        raise
    finally:
        state["commands"] = list(COMMANDS)
        write_results(out, args, state)
        for system in args.systems:
            (out / f"{system}.json").unlink(missing_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)
        log(f"results in {out}")
    print((out / "results.md").read_text())


if __name__ == "__main__":
    main()
