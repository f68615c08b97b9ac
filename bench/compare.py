#!/usr/bin/env python3
"""Runs the same YCSB workloads against Apache Cassandra and hayate in one sitting, under the
same memory limit, and writes the comparison table of the reference benchmark ("Aerospike and
Cassandra: Benchmarking for Real", Table 1) with server CPU per operation beside it.

    bench/compare.py                       # full size, about 45-60 minutes on 2 cores
    bench/compare.py --quick               # a few minutes: checks the pipeline, not the servers
    bench/compare.py --records 4000000 --memory 2GiB --run-seconds 300 --workloads ref,b
    bench/compare.py --topology single,cluster   # also the reference's 3 nodes, RF 2, TWO

For each topology (--topology: `single`, one node at RF 1 and consistency ONE; `cluster`, three
nodes on 127.0.0.1-3 at RF 2 and consistency TWO, as the reference ran) and each system in turn
(Cassandra first): start it under the memory limit (each node its own) with fresh data,
create ycsb.usertable, load --records rows with the client's `load`, (Cassandra) wait for
compactions to settle, and run each workload for --run-seconds. Each system's client thread
count comes from a sweep on that system, as the reference tuned its clients: raise the threads
until two counts in a row gain 5% or less on the best so far, and run with the best, so that
each system's throughput is its maximum. The load finds its count the same way on its own first
rows, in steps, and loads the rest at the best count.
The runs at equal throughput use one count on every system, the same offered load from the
same client: the fewest threads in the first system's sweep that can carry the target with room
to spare (equal_load_threads). In the cluster, a node-failure test follows the workloads: under
a throttled load one node is killed, restarted, and its hints replayed, with the client's
latency each second.

Everything lands in bench/results/<date>-<name>/: results.md (the tables, the environment and
every command), each phase's run folder (the client's summary and, with hayate-bench, its time
series and HDR log), the servers' configuration and logs.

Python 3.11 standard library only. Linux only (/proc, cgroups).
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CACHE = Path(os.environ.get("HAYATE_BENCH_CACHE", Path.home() / ".cache" / "hayate-bench"))
PYENV = CACHE / "pyenv"
CQLSH_VERSION = "6.2.2"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The runs at equal throughput use the fewest threads whose unthrottled throughput in the sweep
# was at least the target ÷ this (equal_load_threads).
EQUAL_HEADROOM = 0.8
# A run at equal throughput reached its target if it did at least this share of it; the first
# system's run that does not is run again at a larger thread count (equal_load_retry).
EQUAL_REACHED = 0.98
# The most times one share's run is repeated on the first system for falling short.
EQUAL_RETRIES_MAX = 2
# A throttled run kept up with its target if it did at least this share of it. Below it a
# backlog grows in the client all run (0.5% short over 300 s is 1.5 s of backlog by the end),
# and the intended latency measures that backlog rather than the server.
EQUAL_KEPT_UP = 0.999

# YCSB's workload files as shipped with YCSB 0.17.0 (workloads/workloada, workloadb), except
# where the reference departs from them. Written into the results folder and passed with -P, so
# that both clients read the same file.
CORE = """workload=site.ycsb.workloads.CoreWorkload
fieldcount=10
fieldlength=100
readallfields=true
scanproportion=0
insertproportion=0
"""
WORKLOADS = {
    # The reference: YCSB's workloada (50/50 read/update) with the uniform distribution instead
    # of zipfian, "as the former covers the case of a highly diverse read/write workload" and
    # sends most operations to storage rather than to a cache.
    "ref": ("YCSB workloada with requestdistribution=uniform (the reference's workload): "
            "50% reads, 50% updates, uniform keys, 1 KB records (10 x 100 B), readallfields",
            CORE + "readproportion=0.5\nupdateproportion=0.5\nrequestdistribution=uniform\n"),
    # YCSB's workloada as shipped.
    "a": ("YCSB workloada as shipped: 50% reads, 50% updates, zipfian keys",
          CORE + "readproportion=0.5\nupdateproportion=0.5\nrequestdistribution=zipfian\n"),
    # YCSB's workloadb as shipped: 95/5, zipfian (kept, as the issue asks for workload B itself).
    "b": ("YCSB workloadb as shipped: 95% reads, 5% updates, zipfian keys",
          CORE + "readproportion=0.95\nupdateproportion=0.05\nrequestdistribution=zipfian\n"),
    # YCSB's workloadc as shipped: read only.
    "c": ("YCSB workloadc as shipped: 100% reads, zipfian keys",
          CORE + "readproportion=1\nupdateproportion=0\nrequestdistribution=zipfian\n"),
    # Issue 34's lightweight transactions (hayate-bench only: `hayate.lwt` makes each write
    # conditional; the Java YCSB would ignore it and run plain writes).
    "lwt-insert": ("lightweight transactions: INSERT ... IF NOT EXISTS of fresh keys (hayate-bench)",
                   CORE + "readproportion=0\nupdateproportion=0\ninsertproportion=1\n"
                   "hayate.lwt=true\n"),
    "lwt-update": ("lightweight transactions: UPDATE ... IF EXISTS, uniform keys (hayate-bench)",
                   CORE + "readproportion=0\nupdateproportion=1\nrequestdistribution=uniform\n"
                   "hayate.lwt=true\n"),
    # Contended: the same updates on the first 10 loaded keys only (YCSB's insertcount bounds
    # the keys a run chooses from), so that concurrent transactions race on each partition.
    # The issue's shape is 16 threads: run it in its own sitting with --threads 16, after a
    # load by another workload (its insertcount would make the load write 10 rows).
    "lwt-contended": ("contended lightweight transactions: UPDATE ... IF EXISTS on 10 keys, "
                      "uniform (hayate-bench)",
                      CORE + "readproportion=0\nupdateproportion=1\nrequestdistribution=uniform\n"
                      "insertcount=10\nhayate.lwt=true\n"),
    # Counter increments (hayate-bench only: `hayate.counter` makes the fields counters, each
    # write `SET f = f + 1`), uniform over the loaded counters.
    "counter": ("counter increments: UPDATE ... SET f = f + 1, uniform keys (hayate-bench)",
                CORE + "readproportion=0\nupdateproportion=1\nrequestdistribution=uniform\n"
                "hayate.counter=true\n"),
    # Issue 34's indexed lookups (hayate-bench only: `hayate.index` adds the column y_ix, which
    # the load fills with each row's key, and reads the row by it without the partition key),
    # uniform, with Cassandra 5.0's storage-attached index on both systems (DataStax's advice
    # for 5.0). It must come first: the load writes its column.
    "index": ("indexed lookups: SELECT ... WHERE y_ix = ? by a storage-attached index, uniform "
              "keys (hayate-bench)",
              CORE + "readproportion=1\nupdateproportion=0\nrequestdistribution=uniform\n"
              "hayate.index=sai\n"),
}

# Every command that touched a server or a client, in order, for results.md.
COMMANDS = []


def log(message):
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", file=sys.stderr, flush=True)


def run(argv, record=True, **kwargs):
    """Runs a command to completion; fails loudly with its output when it fails."""
    if record:
        COMMANDS.append(shlex.join(str(a) for a in argv))
    result = subprocess.run([str(a) for a in argv], text=True, capture_output=True, **kwargs)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
        raise SystemExit(f"compare.py: `{shlex.join(str(a) for a in argv)}` failed "
                         f"with status {result.returncode}")
    return result.stdout


def parse_size(text):
    match = re.fullmatch(r"(\d+)(B|KiB|MiB|GiB|TiB)?", text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use e.g. 2GiB or 512MiB")
    shift = {None: 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[match.group(2)]
    return int(match.group(1)) << shift


# ---- measurements of a server process and its cgroup ----------------------------------------

def proc_cpu_s(pid):
    """CPU seconds (user + system) of a process, all its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15


def machine_cpu_s():
    """The whole machine's busy and stolen CPU seconds so far (/proc/stat): busy is user, nice,
    system, irq and softirq (the server, the client and anything else); steal is time the
    hypervisor gave this VM's CPUs to others, which slows everything without showing as busy."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return {"machine_busy_s": (user + nice + system + irq + softirq) / CLK_TCK,
            "machine_steal_s": steal / CLK_TCK}


def proc_io(pid):
    """Bytes the process made the block layer read and write (direct I/O included)."""
    io = {}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        name, value = line.split(":")
        io[name] = int(value)
    return io.get("read_bytes", 0), io.get("write_bytes", 0)


def proc_counters(pid):
    """A process's CPU seconds and block-layer bytes so far."""
    read_bytes, write_bytes = proc_io(pid)
    return {"cpu_s": proc_cpu_s(pid), "read_bytes": read_bytes, "write_bytes": write_bytes}


def compress_histogram_logs(rundir):
    """Gzips a run's raw HdrHistogram logs (`*.hlog`, up to tens of MB each) in place, to keep
    the disk they take small; `zcat` gives the log back for HdrHistogram's tools. `.gitignore`
    keeps them out of the repository (a sitting stays under 5 MB there). Nothing here reads
    them: the charts and summaries come from the time series and summaries."""
    import gzip
    for path in sorted(rundir.glob("*.hlog")):
        with open(path, "rb") as raw, gzip.open(f"{path}.gz", "wb", compresslevel=9) as packed:
            shutil.copyfileobj(raw, packed)
        path.unlink()


def du_bytes(path):
    """Bytes allocated on disk under `path`."""
    return int(run(["du", "-s", "-B1", path], record=False).split()[0])


def hayate_storage_bytes(metrics):
    """hayate's blocks in use, live data and device size, in bytes, from its /metrics."""
    block = metrics.get("hayate_storage_block_size_bytes", 0)
    return {"used_bytes": int(metrics.get("hayate_storage_used_blocks", 0) * block),
            "live_bytes": int(metrics.get("hayate_storage_live_bytes", 0)),
            "device_bytes": int(metrics.get("hayate_storage_total_blocks", 0) * block)}


def proc_hwm_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


class Server:
    """One running server: its run folder, pid and cgroup, as ctl.sh left them."""

    def __init__(self, system, rundir, host, port):
        self.system = system
        self.rundir = rundir
        self.host = host
        self.port = port
        self.reload()

    def reload(self):
        """Reads the pid and cgroup ctl.sh wrote (again after a restart)."""
        self.pid = int((self.rundir / "server.pid").read_text())
        group = (self.rundir / "cgroup").read_text().strip()
        self.cgroup = None if group == "none" else Path(group)
        self.v2 = self.cgroup is not None and (self.cgroup / "memory.max").exists()

    def settings(self):
        values = {}
        for line in (self.rundir / "settings.env").read_text().splitlines():
            key, _, value = line.partition("=")
            values[key] = value
        return values

    def drop_cache(self):
        """Empties the page cache charged to the server's cgroup, as the reference cleared the
        OS file cache before its run phase; the process's own memory stays."""
        if self.cgroup is None:
            return "no cgroup: page cache not dropped"
        try:
            if self.v2:
                (self.cgroup / "memory.reclaim").write_text(str(1 << 40))
            else:
                (self.cgroup / "memory.force_empty").write_text("0")
        except OSError as error:  # v2 reclaim reports EAGAIN when it could not free it all
            return f"page cache reclaim: {error.strerror}"
        return "page cache of the cgroup reclaimed"

    def begin(self):
        """Marks a phase's start: CPU, I/O, and peak-memory counters reset where possible."""
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # resets VmHWM
        except OSError:
            pass
        if self.cgroup is not None and not self.v2:
            (self.cgroup / "memory.max_usage_in_bytes").write_text("0")
        return {**proc_counters(self.pid), "t": time.monotonic(), "pid": self.pid,
                "coordinator": self.coordinator_counters()}

    def coordinator_counters(self):
        """hayate's coordinator and hint counters (`hayate_coordinator_*`, `hayate_hints_*`
        totals), to tell per phase how requests were coordinated; empty for Cassandra."""
        if self.system != "hayate":
            return {}
        metrics = hayate_metrics(self.host, int(self.settings()["metrics_port"]), timeout_s=5)
        return {name.removeprefix("hayate_"): value for name, value in metrics.items()
                if name.startswith(("hayate_coordinator_", "hayate_hints_")) and name.endswith("_total")}

    def delta_bytes(self):
        """RAM held by hayate's pending deltas (updates written without reading their row);
        None for Cassandra or when the metrics cannot be read."""
        if self.system != "hayate":
            return None
        metrics = hayate_metrics(self.host, int(self.settings()["metrics_port"]), timeout_s=5)
        value = metrics.get("hayate_storage_delta_bytes")
        return None if value is None else int(value)

    def end(self, mark):
        if mark["pid"] != self.pid or not Path(f"/proc/{self.pid}").exists():
            # Killed (and restarted) during the phase: its counters started again from zero.
            return {"host": self.host, "restarted": True}
        read_bytes, write_bytes = proc_io(self.pid)
        figures = {
            "host": self.host,
            "server_cpu_s": round(proc_cpu_s(self.pid) - mark["cpu_s"], 2),
            "server_read_bytes": read_bytes - mark["read_bytes"],
            "server_write_bytes": write_bytes - mark["write_bytes"],
            "server_peak_rss_bytes": proc_hwm_bytes(self.pid),
            "wall_s": round(time.monotonic() - mark["t"], 1),
        }
        after = self.coordinator_counters()
        if after:
            figures["coordinator"] = {name: after[name] - mark["coordinator"].get(name, 0)
                                      for name in after}
        if self.cgroup is not None:
            if self.v2:
                peak = self.cgroup / "memory.peak"
                figures["cgroup_peak_bytes"] = int(peak.read_text()) if peak.exists() else None
                figures["cgroup_peak_scope"] = "since the server started (cgroup v2 memory.peak)"
            else:
                figures["cgroup_peak_bytes"] = int(
                    (self.cgroup / "memory.max_usage_in_bytes").read_text())
                figures["cgroup_peak_scope"] = "this phase (cgroup v1 max_usage_in_bytes)"
        return figures

    def disk_bytes(self):
        """Bytes allocated on disk under the data folder (du), and the engine's own figure."""
        figures = {"host": self.host, "disk_allocated_bytes": du_bytes(self.rundir / "data")}
        if self.system == "hayate":
            metrics = hayate_metrics(self.host, int(self.settings()["metrics_port"]))
            if metrics:
                figures.update({f"hayate_{name}": value
                                for name, value in hayate_storage_bytes(metrics).items()})
        return figures


class Nodes:
    """The servers of one system in one topology: one node, or the nodes of a cluster. Phase
    figures are summed over the nodes (CPU, device bytes) or given per node (peak memory)."""

    def __init__(self, system, topology, servers, consistency, rf):
        self.system = system
        self.topology = topology
        self.servers = servers
        self.consistency = consistency
        self.rf = rf

    @property
    def hosts(self):
        return [server.host for server in self.servers]

    @property
    def port(self):
        return self.servers[0].port

    def begin(self):
        return [server.begin() for server in self.servers]

    def end(self, marks):
        nodes = [server.end(mark) for server, mark in zip(self.servers, marks)]
        whole = [n for n in nodes if not n.get("restarted")]
        figures = {"nodes": nodes, "node_count": len(nodes),
                   "wall_s": max((n["wall_s"] for n in whole), default=None)}
        if len(whole) == len(nodes):
            for key in ("server_cpu_s", "server_read_bytes", "server_write_bytes"):
                figures[key] = round(sum(n[key] for n in nodes), 2)
        else:
            figures["note"] = "a node was restarted in this phase: no summed server figures"
        for key in ("server_peak_rss_bytes", "cgroup_peak_bytes"):
            values = [n.get(key) for n in whole if n.get(key) is not None]
            figures[key] = max(values) if values else None
        counters = [n["coordinator"] for n in whole if n.get("coordinator")]
        if counters and len(counters) == len(nodes):
            figures["coordinator"] = {name: sum(c.get(name, 0) for c in counters)
                                      for name in counters[0]}
        if len(nodes) == 1 and whole:
            figures["cgroup_peak_scope"] = nodes[0].get("cgroup_peak_scope")
        return figures

    def delta_bytes(self):
        values = [server.delta_bytes() for server in self.servers]
        return None if None in values else sum(values)

    def drop_cache(self):
        said = [server.drop_cache() for server in self.servers]
        return "; ".join(sorted(set(said)))

    def disk_bytes(self):
        nodes = [server.disk_bytes() for server in self.servers]
        total = {"nodes": nodes}
        for key in ("disk_allocated_bytes", "hayate_used_bytes", "hayate_live_bytes",
                    "hayate_device_bytes"):
            if all(key in n for n in nodes):
                total[key] = sum(n[key] for n in nodes)
        return total


def hayate_metrics(host, port, timeout_s=10):
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout_s) as response:
            text = response.read().decode()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.partition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                pass
    return values


def hayate_status(host, port, timeout_s=2):
    """A hayate node's /status document (every member's state and schema), or None."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/status", timeout=timeout_s) as response:
            return json.loads(response.read().decode())
    except (OSError, ValueError):
        return None


# ---- the client ----------------------------------------------------------------------------

def parse_summary(text):
    """YCSB's summary lines, `[SECTION], Metric, value`, as {(section, metric): value}."""
    summary = {}
    for line in text.splitlines():
        match = re.match(r"\[([A-Za-z_-]+)\], ([^,]+), (.+)$", line.strip())
        if match:
            try:
                summary[(match.group(1), match.group(2))] = float(match.group(3))
            except ValueError:
                pass
    return summary


class Client:
    def __init__(self, kind, args):
        self.kind = kind
        self.args = args
        if kind == "ycsb":
            self.program = [BENCH / "ycsb-java" / "ycsb"]
            self.binding = "cassandra-cql"
        else:
            self.program = [REPO / "target" / "release" / "hayate-bench"]
            self.binding = "cql"

    def command(self, phase, workload_file, nodes, threads, rundir, label, extra, target=None,
                consistency=None):
        # One node: one replica, so ONE is the only level. The cluster: TWO of RF 2, as the
        # reference ("a consistency level of 2 for writes and 2 for reads"). The client knows
        # every node and routes each request to a replica of its key (both drivers are
        # token-aware).
        level = consistency or nodes.consistency
        argv = [*self.program, phase, self.binding, "-P", workload_file,
                "-p", f"hosts={','.join(nodes.hosts)}", "-p", f"port={nodes.port}",
                "-p", f"recordcount={self.args.records}",
                "-p", f"cassandra.readconsistencylevel={level}",
                "-p", f"cassandra.writeconsistencylevel={level}",
                "-threads", str(threads), "-s",
                "-p", f"rundir={rundir}", "-p", f"label={label}"]
        if self.kind == "ycsb":
            # Java YCSB: an HDR log per operation kind, and a status line every second on stderr.
            argv += ["-p", "hdrhistogram.fileoutput=true",
                     "-p", f"hdrhistogram.output.path={rundir}/",
                     "-p", "status.interval=1"]
        target = target or (self.args.target if phase == "run" else None)
        if target:
            # Throttled runs, for comparing clients at the same offered load, and the cluster's
            # node-failure test: YCSB's -target.
            argv += ["-target", str(target)]
        for key, value in extra.items():
            argv += ["-p", f"{key}={value}"]
        return argv

    def run(self, phase, workload_file, nodes, threads, rundir, label, extra, during=None,
            target=None, consistency=None):
        """Runs one client phase against a system's nodes; returns its summary and the CPU
        figures. `during(process)`, if given, runs once the client has started (a profiler, or
        the node-failure test's kill and restart) and before the harness waits for it."""
        rundir.mkdir(parents=True, exist_ok=True)
        argv = self.command(phase, workload_file, nodes, threads, rundir, label, extra, target,
                            consistency)
        COMMANDS.append(shlex.join(str(a) for a in argv))
        log(f"{label}: {phase} {workload_file.name}, {threads} threads -> {rundir.name}")
        mark = nodes.begin()
        with open(rundir / "client-stdout.txt", "w") as out, \
                open(rundir / "client-stderr.txt", "w") as err:
            started_unix = time.time()
            process = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=err)
            try:
                if during is not None:
                    during(process)
                # wait4 rather than wait: the rusage is the client's CPU, all threads included.
                _, status, usage = os.wait4(process.pid, 0)
                process.returncode = os.waitstatus_to_exitcode(status)
            except BaseException:
                # Interrupted: the client must not outlive the sitting.
                process.kill()
                process.wait()
                raise
        figures = nodes.end(mark)
        figures["client_started_unix"] = started_unix
        compress_histogram_logs(rundir)
        stdout = (rundir / "client-stdout.txt").read_text()
        if not (rundir / "summary.txt").exists():
            (rundir / "summary.txt").write_text(stdout)
        if not (rundir / "meta.json").exists():
            # Java YCSB writes no run directory: the label and phase `hayate-bench report`
            # reads from hayate-bench's meta.json are written for it.
            (rundir / "meta.json").write_text(json.dumps(
                {"label": label, "phase": phase, "threads": threads,
                 "argv": [str(a) for a in argv], "version": "YCSB 0.17.0"}, indent=2) + "\n")
        if process.returncode != 0:
            errors = (rundir / "client-stderr.txt").read_text()
            if process.returncode == 2 and "not built yet" in errors:
                raise SystemExit("compare.py: hayate-bench's YCSB client is not built yet "
                                 "(it exited 2); use --client ycsb meanwhile")
            sys.stderr.write(errors[-3000:])
            raise SystemExit(f"compare.py: the client failed ({process.returncode}) in {rundir}")
        summary = parse_summary((rundir / "summary.txt").read_text())
        runtime_s = summary.get(("OVERALL", "RunTime(ms)"), 0) / 1000
        throughput = summary.get(("OVERALL", "Throughput(ops/sec)"), 0)
        operations = round(runtime_s * throughput)
        errors = sum(v for (section, metric), v in summary.items()
                     if metric.startswith("Return=") and metric != "Return=OK"
                     and metric != "Return=NOT_FOUND")
        # Every key a run reads was loaded: a read that finds nothing is a lost row, not a miss.
        not_found = sum(v for (section, metric), v in summary.items()
                        if metric == "Return=NOT_FOUND")
        figures.update({
            "phase": phase, "label": label, "threads": threads, "workload": workload_file.name,
            "operations": operations, "runtime_s": runtime_s, "throughput_ops": throughput,
            "errors": errors, "not_found": not_found,
            "read_p95_us": summary.get(("READ", "95thPercentileLatency(us)")),
            "update_p95_us": summary.get(("UPDATE", "95thPercentileLatency(us)")),
            "insert_p95_us": summary.get(("INSERT", "95thPercentileLatency(us)")),
            "read_p99_us": summary.get(("READ", "99thPercentileLatency(us)")),
            "update_p99_us": summary.get(("UPDATE", "99thPercentileLatency(us)")),
            # From when the throttle meant each operation to start (with -target only).
            "intended_read_p95_us": summary.get(("Intended-READ", "95thPercentileLatency(us)")),
            "intended_update_p95_us": summary.get(("Intended-UPDATE", "95thPercentileLatency(us)")),
            "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        })
        if operations:
            figures["client_cpu_us_per_op"] = round(figures["client_cpu_s"] * 1e6 / operations, 1)
        if operations and "server_cpu_s" in figures:
            figures["server_cpu_us_per_op"] = round(figures["server_cpu_s"] * 1e6 / operations, 1)
            figures["server_read_bytes_per_op"] = round(figures["server_read_bytes"] / operations)
            figures["server_write_bytes_per_op"] = round(figures["server_write_bytes"] / operations)
        (rundir / "phase.json").write_text(json.dumps(figures, indent=2) + "\n")
        log(f"{label}: {throughput:,.0f} ops/s, server {figures.get('server_cpu_us_per_op')} "
            f"us/op, p95 read {figures['read_p95_us']} us, update {figures['update_p95_us']} us")
        return figures


# ---- the servers ---------------------------------------------------------------------------

def cqltool(nodes, *argv):
    return run([PYENV / "bin" / "python", BENCH / "lib" / "cqltool.py", ",".join(nodes.hosts),
                nodes.port, *argv])


def ensure_pyenv():
    python = PYENV / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import cassandra"],
                                          capture_output=True).returncode == 0:
        return
    log(f"installing cqlsh {CQLSH_VERSION} (and the Python cassandra-driver) into {PYENV}")
    run([sys.executable, "-m", "venv", PYENV], record=False)
    run([PYENV / "bin" / "pip", "install", "-q", f"cqlsh=={CQLSH_VERSION}"], record=False)


def topology_of(name, args):
    """The hosts, replication factor and consistency level of a topology."""
    if name == "single":
        return {"hosts": [args.host], "rf": 1, "consistency": "ONE"}
    return {"hosts": args.cluster_hosts, "rf": args.cluster_rf,
            "consistency": args.cluster_consistency}


def ctl_argv(system, args, topology, host, rundir):
    """The ctl.sh command that starts one node of `system` on `host`."""
    common = ["--host", host, "--cql-port", args.port, "--memory", args.memory_bytes]
    if args.allow_unlimited:
        common.append("--allow-unlimited")
    clustered = len(topology["hosts"]) > 1
    if system == "cassandra":
        argv = [BENCH / "cassandra" / "ctl.sh", "start", rundir, *common,
                "--storage-port", args.cassandra_storage_port]
        if clustered:
            # Tokens allocated for the keyspace's replication factor, as an operator would set
            # allocate_tokens_for_local_replication_factor for RF 2 (cassandra.yaml.template).
            argv += ["--seeds", ",".join(topology["hosts"]), "--token-rf", topology["rf"]]
        if args.durability == "device":
            argv += ["--commitlog-sync", args.commitlog_sync]
        return argv
    # Each node holds rf / nodes of the data set; its device three times that, as one node's.
    share = args.records * 1100 * 3 * topology["rf"] / len(topology["hosts"])
    if any(w.startswith("lwt") for w in args.workloads):
        # Each partition a transaction touched keeps its Paxos state, with a copy of its last
        # update, for 10 days: twice the live data.
        share *= 2
    device_gib = args.hayate_device_gib or max(1, -(-int(share) // (1 << 30)))
    if "lwt-insert" in args.workloads and not args.hayate_device_gib:
        # It adds rows (and their states) at up to 20,000 a second, which outgrow any size
        # drawn from the load: two sittings filled 1 GiB within a minute. 8 GiB held 90 s.
        device_gib = max(device_gib, 8)
    argv = [BENCH / "hayate-ctl.sh", "start", rundir, *common,
            "--metrics-port", args.hayate_metrics_port,
            "--device-size", f"{device_gib}GiB"]
    if clustered:
        argv += ["--seeds", ",".join(topology["hosts"]),
                 "--storage-port", args.hayate_storage_port]
    if args.durability == "device":
        argv.append("--commit-to-device")
    if args.read_page_cache:
        argv.append("--read-page-cache")
    if args.delta_buffer is not None:
        argv += ["--delta-buffer", args.delta_buffer]
    return argv


def node_dir(rundir, system, topology, host):
    return rundir / (system if len(topology["hosts"]) == 1 else f"{system}-{host}")


def start_nodes(system, topology_name, args, workdir):
    """Starts one node, or the nodes of a cluster, with fresh data; waits until every node
    lists every other with its tokens and all agree on the schema."""
    topology = topology_of(topology_name, args)
    dirs = [node_dir(workdir, system, topology, host) for host in topology["hosts"]]
    for folder in dirs:
        if folder.exists():
            shutil.rmtree(folder)
    argvs = [ctl_argv(system, args, topology, host, folder)
             for host, folder in zip(topology["hosts"], dirs)]
    servers = []
    started = time.monotonic()
    slowest_s = 0.0
    try:
        if system == "hayate" and len(argvs) > 1:
            # hayate's nodes form their ring when started together (the first seed waits for
            # the others), as `hayate local start` starts them.
            for argv in argvs:
                COMMANDS.append(shlex.join(str(a) for a in argv))
            processes = [subprocess.Popen([str(a) for a in argv], text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                         for argv in argvs]
            failed = []
            for argv, process in zip(argvs, processes):
                output, _ = process.communicate()
                log(output.strip())
                if process.returncode != 0:
                    failed.append(shlex.join(str(a) for a in argv))
            for host, folder in zip(topology["hosts"], dirs):
                if (folder / "server.pid").exists():
                    servers.append(Server(system, folder, host, args.port))
            if failed:
                raise SystemExit(f"compare.py: `{failed[0]}` failed")
        else:
            # Cassandra's nodes join one after another, each seeing the tokens of those before
            # it when it allocates its own (starting several at once is what Cassandra's
            # documentation warns against).
            for argv, host, folder in zip(argvs, topology["hosts"], dirs):
                one = time.monotonic()
                log(run(argv).strip())
                slowest_s = max(slowest_s, time.monotonic() - one)
                servers.append(Server(system, folder, host, args.port))
    except BaseException:
        for server in servers:
            stop_server(server)
        raise
    nodes = Nodes(system, topology_name, servers, topology["consistency"], topology["rf"])
    # The slowest node's start, for sizing the node-failure test's restart allowance.
    nodes.start_s = round(slowest_s or time.monotonic() - started, 1)
    if len(servers) > 1:
        try:
            nodes.ring = wait_ring(nodes, "after the start")
        except BaseException:
            stop_nodes(nodes)
            raise
    return nodes


def wait_ring(nodes, why):
    log(f"{nodes.system}: waiting until every node lists the others and agrees on the schema ({why})")
    result = json.loads(cqltool(nodes, "ring", "--rf", nodes.rf).strip().splitlines()[-1])
    if not result.get("agreed"):
        raise SystemExit(f"compare.py: {nodes.system}'s nodes did not agree {why}: "
                         f"{result.get('problems')}")
    log(f"{nodes.system}: agreed after {result['waited_s']} s; ownership "
        + ", ".join(f"{h} {o['replica']:.1%}" for h, o in result["ownership"].items()))
    result["why"] = why
    return result


def ctl_script(system):
    return BENCH / "cassandra" / "ctl.sh" if system == "cassandra" else BENCH / "hayate-ctl.sh"


def stop_server(server):
    run([ctl_script(server.system), "stop", server.rundir])


def stop_nodes(nodes):
    for server in nodes.servers:
        try:
            stop_server(server)
        except SystemExit as error:
            log(f"{server.host}: {error}")


def create_schema(nodes, workloads=()):
    # Leveled compaction (the reference's choice for a 50/50 workload) and 4 KiB compression
    # chunks: a read decompresses a whole chunk, and DataStax's CQL reference says to size chunks
    # by "how much data is typically requested at once" and "the average size of rows" (1 KB
    # here; 5.0 ships 16 KiB). See bench/README.md.
    compaction = (" WITH compaction = {'class': 'LeveledCompactionStrategy'}"
                  " AND compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 4}"
                  if nodes.system == "cassandra" else "")
    # The counter workload's fields are counters (a counter table holds nothing else).
    kind = "counter" if "counter" in workloads else "varchar"
    fields = ", ".join(f"field{i} {kind}" for i in range(10))
    indexed = "index" in workloads
    if indexed:
        fields += ", y_ix varchar"
    # SimpleStrategy: one data center and one rack, where NetworkTopologyStrategy
    # {'datacenter1': N} would place the same replicas (the next distinct nodes clockwise).
    cqltool(nodes, "exec",
            "CREATE KEYSPACE ycsb WITH replication = "
            f"{{'class': 'SimpleStrategy', 'replication_factor': {nodes.rf}}}",
            f"CREATE TABLE ycsb.usertable (y_id varchar PRIMARY KEY, {fields}){compaction}",
            *(["CREATE INDEX ON ycsb.usertable (y_ix) USING 'sai'"] if indexed else []))
    if len(nodes.servers) > 1:
        return wait_ring(nodes, "after the schema")
    return None


def settle(nodes, args, why):
    if nodes.system != "cassandra":
        return None
    log(f"cassandra: waiting for compactions to settle on {len(nodes.servers)} node(s) ({why})")
    started = time.monotonic()
    result = json.loads(cqltool(nodes, "settle", "--quiet-s", args.settle_quiet_s,
                                "--timeout-s", args.settle_timeout_s).strip().splitlines()[-1])
    result["why"] = why
    result["total_s"] = round(time.monotonic() - started, 1)
    log(f"cassandra: settled={result['settled']} after {result['waited_s']} s")
    return result


# ---- the sitting ---------------------------------------------------------------------------

def threads_text(sitting, args):
    """The client threads of a topology's load and runs, as the report's first paragraph says
    them."""
    loads = [f"{record['load_threads']} on {system}" for system, record in sitting["systems"].items()
             if record.get("load_threads")]
    how = "from each system's load sweep" if not args.load_threads else "given"
    load = f"; the load's threads {how}: {', '.join(loads)}" if loads else ""
    if sitting.get("threads"):
        return f"{sitting['threads']} client threads{load}"
    counts = [f"{record['threads']} on {system}" for system, record in sitting["systems"].items()
              if record.get("threads")]
    equal = ""
    if equal_shares(args):
        equal = f", the runs at equal throughput {equal_counts(sitting, args)} on every system"
    return f"client threads from each system's sweep: {', '.join(counts) or 'none'}{equal}{load}"


def phase_dir(out, nodes, name):
    """`<system>-<phase>` for one node (as before the cluster existed), `cluster-<system>-<phase>`."""
    prefix = "" if nodes.topology == "single" else f"{nodes.topology}-"
    return out / f"{prefix}{nodes.system}-{name}"


def best_count(counts, measure):
    """The reference's client tuning, shared by the load and the runs: raise the thread count
    until throughput tops off. `measure(threads)` runs one step and returns its point (with
    `throughput_ops`), or None when no step is left to run. A count is chosen over the best so
    far only if it gains more than 5% on it; the sweep ends once two counts in a row have not,
    so that one step caught by background work (a compaction, the delta buffer filling) does
    not end it. Returns the chosen count and every point."""
    points = []
    chosen = None
    misses = 0
    for threads in counts:
        point = measure(threads)
        if point is None:
            break
        points.append(point)
        if chosen is None or point["throughput_ops"] > chosen[1] * 1.05:
            chosen, misses = (threads, point["throughput_ops"]), 0
            continue
        misses += 1
        if misses == 2:
            break
    return chosen[0], points


def sweep_threads(client, nodes, args, out, workload_file):
    """The run's sweep (best_count): the chosen count runs this system's unthrottled workloads.
    Each point keeps the server's CPU per operation, which changes with the count (on hayate it
    falls as more requests share each system call), so that a reader can also compare the
    systems at one count."""
    def measure(threads):
        figures = client.run("run", workload_file, nodes, threads,
                             phase_dir(out, nodes, f"sweep-t{threads}"),
                             f"{nodes.system}-sweep-t{threads}",
                             {"operationcount": 2_000_000_000,
                              "maxexecutiontime": args.sweep_seconds})
        return {"threads": threads, "read_p95_us": figures["read_p95_us"],
                "update_p95_us": figures["update_p95_us"], **step_figures(figures, nodes)}

    return best_count(args.sweep, measure)


def step_figures(figures, nodes):
    """What a sweep or warm-up step keeps of its phase: throughput, failures, the server's CPU
    and device bytes per operation, and hayate's delta buffer at its end, which tell whether
    the engine's state changed between steps."""
    return {"throughput_ops": figures["throughput_ops"],
            "errors": figures["errors"], "not_found": figures["not_found"],
            "server_cpu_us_per_op": figures.get("server_cpu_us_per_op"),
            "server_read_bytes_per_op": figures.get("server_read_bytes_per_op"),
            "delta_bytes": nodes.delta_bytes()}


def equal_shares(args):
    """The shares of the first system's throughput that the runs at equal throughput are
    throttled to, in order (--equal-load; results.json of sittings before the list hold one
    number)."""
    shares = args.equal_load if isinstance(args.equal_load, list) else [args.equal_load]
    return [share for share in shares if share]


def equal_phases(args):
    """(workload, share, phase) of each run at equal throughput: `<workload>-equal` with one
    share, as before the list, `<workload>-equal-<percent>` with several."""
    shares = equal_shares(args)
    return [(name, share, f"{name}-equal" if len(shares) == 1 else f"{name}-equal-{share * 100:.0f}")
            for name in args.workloads for share in shares]


def equal_load_threads(first, args, share):
    """The client threads of the runs at equal throughput, one count for every system, and the
    rule that chose it, for one share of --equal-load. --equal-threads if given. Otherwise the
    fewest threads in the first system's sweep whose unthrottled throughput was at least that
    share's target on the first workload ÷ EQUAL_HEADROOM, so that the target is at most 80% of
    what that many threads could do: room to catch up after a stall, and no more requests in
    flight than the target needs. A count with far more in flight than the target needs
    measures the queue those requests wait in, not the server: in the 2026-11-28 cluster
    sitting, Cassandra's own best count, 512 threads at 1,756 ops/s, put each read behind a few
    hundred others (a p95 of 524 ms, against 11 ms at 8 threads unthrottled). Without a sweep
    (--threads), the first system's count."""
    if args.equal_threads:
        return {"threads": args.equal_threads, "rule": "given (--equal-threads)"}
    base = first.get("phases", {}).get(args.workloads[0], {}).get("throughput_ops")
    points = (first.get("sweep") or {}).get("points") or []
    if base and points:
        need = base * share / EQUAL_HEADROOM
        fits = [p["threads"] for p in points if p["throughput_ops"] >= need]
        if fits:
            return {"threads": min(fits),
                    "rule": f"the fewest in {first['system']}'s sweep that reached "
                            f"{need:,.0f} ops/s, the target ÷ {EQUAL_HEADROOM}"}
    why = f", as no step of its sweep reached the target ÷ {EQUAL_HEADROOM}" if points else ""
    return {"threads": first.get("threads"), "rule": f"{first.get('system')}'s own count{why}"}


def equal_load_retry(first, args, threads, target, achieved):
    """The thread count to run a share at equal throughput again at, or None. The count of
    equal_load_threads comes from the sweep, which runs before the long unthrottled run, and a
    system can be slower after it (Cassandra's compactions behind, its rate falling late in the
    run): in two sittings of 2026-11-28 its run at 70% did 93% and 95% of the target, so its
    latencies there measured a client backlog, not the server at that load. When the first
    system does less than EQUAL_REACHED of the target, the run is repeated at the next larger
    count of its sweep (twice the count without a sweep), and every system after it runs at
    that count, so both still see one offered load from one client (as do later workloads at
    the same share). Not with --equal-threads, which the operator fixed."""
    if args.equal_threads or achieved >= EQUAL_REACHED * target:
        return None
    points = (first.get("sweep") or {}).get("points") or []
    larger = sorted(p["threads"] for p in points if p["threads"] > threads)
    if points:
        return larger[0] if larger else None
    return threads * 2


def set_aside_short_try(out, nodes, record, phase, threads):
    """Keeps a run at equal throughput that fell short as `<phase>-short-t<threads>/` and in
    record["equal_short"], so that its repeat takes the phase's own folder and record."""
    short = phase_dir(out, nodes, f"{phase}-short-t{threads}")
    shutil.rmtree(short, ignore_errors=True)
    phase_dir(out, nodes, phase).rename(short)
    record.setdefault("equal_short", {}).setdefault(phase, []).append(
        {**record["phases"][phase], "folder": short.name})


def warm_up(client, nodes, args, workdir, workload_file, threads):
    """Brings the store to the state the measured phases will meet before any is measured: the
    first workload runs unthrottled at `threads` in steps of --warmup-step-s for at least
    --warmup-seconds. On hayate it goes on, up to --warmup-max-seconds, while the delta buffer
    (updates written without reading their row) still grows by more than 2% over a step: until
    it is full, updates skip the device read that they cost in the steady state, so a sweep step
    or a run measured while it fills sees a cheaper engine than the rest of the sitting (the
    2026-11-28 sweeps: 2.5 KB read per operation up to the third step, 4.2 KB from the fourth
    on). Cassandra has no such buffer; its background work is compaction, which the harness
    lets settle after the warm-up. The steps' client output stays in the work folder; each
    step's figures are returned."""
    steps = []
    while True:
        n = len(steps) + 1
        figures = client.run("run", workload_file, nodes, threads,
                             workdir / f"{nodes.topology}-{nodes.system}-warmup-{n}",
                             f"{nodes.system}-warmup-{n}",
                             {"operationcount": 2_000_000_000,
                              "maxexecutiontime": args.warmup_step_s})
        step = {"end_s": n * args.warmup_step_s, **step_figures(figures, nodes)}
        steps.append(step)
        if step["end_s"] >= args.warmup_max_seconds:
            break
        if step["end_s"] < args.warmup_seconds:
            continue
        if nodes.system != "hayate" or len(steps) < 2:
            break
        grown = (step["delta_bytes"] or 0) - (steps[-2]["delta_bytes"] or 0)
        if grown <= 0.02 * (step["delta_bytes"] or 0):
            break
    log(f"warm-up on {nodes.system} ({nodes.topology}): {steps[-1]['end_s']} s at {threads} threads")
    return steps


def load_rows(client, nodes, args, out, workload_file):
    """Loads --records rows; returns the load's thread count, its sweep (None when given) and
    the load phase whose throughput is the insert rate. With --load-threads the whole load runs
    at that count. Without it the load sweeps as the runs do (best_count over --sweep), on the
    load itself: the first rows go in steps of --load-sweep-rows (YCSB's insertstart and
    insertcount), one count per step, for at most half the rows; the rest go in at the chosen
    count, and that phase is the insert rate, so each system loads at its own best count and
    the rate comes from the larger part of the load."""
    if args.load_threads:
        return args.load_threads, None, client.run(
            "load", workload_file, nodes, args.load_threads, phase_dir(out, nodes, "load"),
            nodes.system, {})
    step = args.load_sweep_rows
    loaded = 0

    def measure(threads):
        nonlocal loaded
        if loaded + step > args.records // 2:
            return None
        figures = client.run("load", workload_file, nodes, threads,
                             phase_dir(out, nodes, f"load-sweep-t{threads}"),
                             f"{nodes.system}-load-sweep-t{threads}",
                             {"insertstart": loaded, "insertcount": step})
        loaded += step
        return {"threads": threads, "insert_p95_us": figures["insert_p95_us"],
                **step_figures(figures, nodes)}

    threads, points = best_count(args.sweep, measure)
    log(f"load sweep on {nodes.system} ({nodes.topology}): {threads} threads for the last "
        f"{args.records - loaded:,} rows")
    return threads, {"rows_per_step": step, "points": points}, client.run(
        "load", workload_file, nodes, threads, phase_dir(out, nodes, "load"), nodes.system,
        {"insertstart": loaded, "insertcount": args.records - loaded})


class FreshKeys:
    """Where each run phase of a workload that only inserts (lwt-insert) starts its keys.

    YCSB's run phase inserts from `recordcount` on, so every phase would insert the keys of the
    phase before it: an `IF NOT EXISTS` at equal load would find the rows the unthrottled run
    made, and measure transactions that are not applied (one round trip) instead of inserts.
    Each phase starts past every key the system's earlier phases could have inserted."""

    INSERTING = ("lwt-insert",)
    # Operations are counted from the client's throughput and run time: rounding, and failed
    # inserts that may have been applied, stay below this.
    MARGIN = 10_000

    def __init__(self, records):
        self.next = records

    def props(self, workload):
        return {"recordcount": self.next} if workload in self.INSERTING else {}

    def ran(self, workload, phase):
        if workload in self.INSERTING:
            self.next += phase.get("operations", 0) + phase.get("errors", 0) + self.MARGIN


def one_system(system, topology, client, args, out, workdir, workload_files, state):
    sitting = state["topologies"][topology]
    record = {"system": system, "topology": topology, "settles": [], "phases": {}}
    sitting["systems"][system] = record
    nodes = start_nodes(system, topology, args, workdir)
    label = system
    try:
        record["hosts"] = nodes.hosts
        record["rf"], record["consistency"] = nodes.rf, nodes.consistency
        record["settings"] = nodes.servers[0].settings()
        record["cgroup"] = ", ".join(str(s.cgroup) for s in nodes.servers if s.cgroup) or None
        record["version"] = (cqltool(nodes, "version").strip() if system == "cassandra"
                             else state["commit"])
        if getattr(nodes, "ring", None):
            record["ring"] = nodes.ring
        schema = create_schema(nodes, args.workloads)
        if schema:
            record["schema_agreement"] = schema
        first = args.workloads[0]
        record["load_threads"], load_sweep, record["phases"]["load"] = load_rows(
            client, nodes, args, out, workload_files[first])
        if load_sweep:
            record["load_sweep"] = load_sweep
        record["disk_after_load"] = nodes.disk_bytes()
        if system == "cassandra":
            record["settles"].append(settle(nodes, args, "after the load"))
            record["disk_after_settle"] = nodes.disk_bytes()
        record["threads"] = sitting["threads"]
        if args.warmup_seconds:
            threads = record["threads"] or args.warmup_threads
            record["warmup"] = {"threads": threads, "steps": warm_up(
                client, nodes, args, workdir, workload_files[first], threads)}
            if system == "cassandra":
                record["settles"].append(settle(nodes, args, "after the warm-up"))
        if record["threads"] is None:
            threads, points = sweep_threads(client, nodes, args, out, workload_files[first])
            record["threads"] = threads
            record["sweep"] = {"seconds": args.sweep_seconds, "points": points}
            log(f"thread sweep on {system} ({topology}): {threads} threads")
            if system == "cassandra":
                record["settles"].append(settle(nodes, args, "after the thread sweep"))
        fresh = FreshKeys(args.records)
        for index, name in enumerate(args.workloads):
            if system == "cassandra" and index > 0:
                record["settles"].append(settle(nodes, args, f"before workload {name}"))
            record.setdefault("cache_drops", []).append(nodes.drop_cache())
            stem = "hayate" if topology == "single" else f"{topology}-hayate"
            profiling = args.profile and system == "hayate" and index == 0
            timeline = Timeline(nodes, phase_dir(out, nodes, name) / "timeline.csv", args.timeline_s)

            def during(process, profiling=profiling, timeline=timeline, stem=stem):
                timeline.start()
                if profiling:
                    start_profile(nodes.servers[0], out, args, stem)

            record["phases"][name] = client.run(
                "run", workload_files[name], nodes, record["threads"],
                phase_dir(out, nodes, name), label,
                {"operationcount": 2_000_000_000, "maxexecutiontime": args.run_seconds,
                 **fresh.props(name)},
                during=during)
            fresh.ran(name, record["phases"][name])
            record["phases"][name]["steady"] = timeline.finish()
            first, last = p99_first_and_last(phase_dir(out, nodes, name), 300)
            record["phases"][name]["steady"]["p99_first_us"] = first
            record["phases"][name]["steady"]["p99_last_us"] = last
            if profiling:
                finish_profile(out, stem)
        # Latency at equal throughput: each workload again, throttled to a share of what the
        # first system measured on it unthrottled, with one thread count on every system
        # (equal_load_threads), so that p95 and p99 compare the same offered load from the
        # same client.
        first_system = sitting["systems"].get(args.systems[0], {})
        reference = first_system.get("phases", {})
        chosen = sitting.setdefault("equal_threads_by_share", {})
        for share in equal_shares(args):
            if str(share) not in chosen:
                chosen[str(share)] = equal_load_threads(first_system or record, args, share)
        for name, share, phase in equal_phases(args):
            base = (reference.get(name) or {}).get("throughput_ops")
            if not base:
                continue
            target = max(1, round(base * share))
            for attempt in range(EQUAL_RETRIES_MAX + 1):
                if system == "cassandra":
                    record["settles"].append(settle(nodes, args, f"before {name} at {target} ops/s"))
                record.setdefault("cache_drops", []).append(nodes.drop_cache())
                threads = chosen[str(share)]["threads"]
                # A timeline here too, at most 5 s apart, so that a stretch of high p99 at a
                # fixed rate can be set beside the device and defragmentation at that time.
                timeline = Timeline(nodes, phase_dir(out, nodes, phase) / "timeline.csv",
                                    min(args.timeline_s, 5))
                record["phases"][phase] = client.run(
                    "run", workload_files[name], nodes, threads,
                    phase_dir(out, nodes, phase), label,
                    {"operationcount": 2_000_000_000, "maxexecutiontime": args.equal_seconds or args.run_seconds,
                     **fresh.props(name)},
                    target=target, during=lambda process, timeline=timeline: timeline.start())
                fresh.ran(name, record["phases"][phase])
                record["phases"][phase].update(target_ops=target, share=share,
                                               steady=timeline.finish())
                if system != args.systems[0] or attempt == EQUAL_RETRIES_MAX:
                    break
                achieved = record["phases"][phase]["throughput_ops"]
                retry = equal_load_retry(first_system or record, args, threads, target, achieved)
                if retry is None:
                    break
                set_aside_short_try(out, nodes, record, phase, threads)
                chosen[str(share)] = {"threads": retry,
                                      "rule": f"{chosen[str(share)]['rule']}; at {threads} threads "
                                              f"{system} did {achieved:,.0f} ops/s of the "
                                              f"{target:,} targeted, so the run was repeated at {retry}"}
                log(f"{system} fell short of {target:,} ops/s at {threads} threads; "
                    f"running {phase} again at {retry}")
        record["disk_at_end"] = nodes.disk_bytes()
        if topology == "cluster" and args.kill_test:
            for level in args.kill_consistency:
                if system == "cassandra":
                    record["settles"].append(settle(nodes, args, f"before the kill test at {level}"))
                name = f"kill-{level.lower()}"
                record.setdefault("kill", {})[level] = kill_test(
                    client, nodes, args, out, workload_files[first], record["threads"],
                    record["phases"][first]["throughput_ops"], level, name)
    finally:
        stop_nodes(nodes)
        for server in nodes.servers:
            rundir = server.rundir
            suffix = "" if topology == "single" else f"-{server.host}"
            prefix = "" if topology == "single" else f"{topology}-"
            logs = rundir / "logs"
            if logs.exists():
                shutil.copytree(logs, out / f"{prefix}{system}-server-logs{suffix}",
                                dirs_exist_ok=True)
            for name in ("conf/cassandra.yaml", "conf/jvm-options", "hayate.toml", "settings.env"):
                if (rundir / name).exists():
                    config = out / f"{prefix}{system}-server-config{suffix}"
                    config.mkdir(exist_ok=True)
                    shutil.copy(rundir / name, config / Path(name).name)
            if not args.keep_data:
                shutil.rmtree(rundir, ignore_errors=True)


# ---- steady state over a run -----------------------------------------------------------------

class Timeline(threading.Thread):
    """Samples every node every `interval_s` during a run phase, into `timeline.csv`: CPU and
    device bytes from /proc, and for hayate its engine (blocks in use, live bytes, records moved
    by defragmentation, device reads); for Cassandra the bytes of its data folder. Enough to show
    whether background work (defragmentation, compaction) has reached a steady rate."""

    FIELDS = ("t_s", "host", "cpu_s", "read_bytes", "write_bytes", "used_bytes", "live_bytes",
              "defrag_moved_bytes", "device_reads", "delta_bytes", "disk_bytes",
              "machine_busy_s", "machine_steal_s")

    def __init__(self, nodes, path, interval_s):
        super().__init__(daemon=True)
        self.nodes, self.path, self.interval_s = nodes, path, interval_s
        self.rows = []
        self.stopping = threading.Event()
        self.started = time.time()

    def sample(self):
        t = round(time.time() - self.started, 1)
        # The machine's counters go on the first row of each sample only, so that the sums
        # over a sample's rows count them once.
        machine = machine_cpu_s()
        for server in self.nodes.servers:
            try:
                row = {"t_s": t, "host": server.host, **proc_counters(server.pid), **machine}
            except (OSError, IndexError, ValueError):
                continue
            machine = {}
            if self.nodes.system == "hayate":
                m = hayate_metrics(server.host, int(server.settings()["metrics_port"]), timeout_s=2)
                storage = hayate_storage_bytes(m)
                row["used_bytes"], row["live_bytes"] = storage["used_bytes"], storage["live_bytes"]
                row["defrag_moved_bytes"] = int(m.get("hayate_storage_defrag_moved_bytes_total", 0))
                row["device_reads"] = int(m.get("hayate_storage_device_reads_total", 0))
                row["delta_bytes"] = int(m.get("hayate_storage_delta_bytes", 0))
            else:
                # The SSTables alone (the commit log beside them has its own folder). A sample
                # that cannot be taken is left empty rather than ending the sampling thread.
                try:
                    row["disk_bytes"] = du_bytes(server.rundir / "data" / "data")
                except SystemExit:
                    row["disk_bytes"] = None
            self.rows.append(row)

    def run(self):
        while not self.stopping.is_set():
            self.sample()
            self.stopping.wait(self.interval_s)

    def finish(self):
        """Stops sampling (one last sample), writes timeline.csv, returns the figures of the
        first and the last fifth of the run (at most 5 minutes each), summed over the nodes."""
        import csv
        self.stopping.set()
        self.join(timeout=30)
        self.sample()
        with open(self.path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.FIELDS)
            writer.writeheader()
            writer.writerows(self.rows)
        times = sorted({row["t_s"] for row in self.rows})
        if len(times) < 3:
            return {}
        window = min(300.0, (times[-1] - times[0]) / 5)

        def totals(t):
            # One row per node at a time (the last, should a sample repeat the time).
            at = {row["host"]: row for row in self.rows if row["t_s"] == t}
            return {key: sum(row.get(key) or 0 for row in at.values()) for key in self.FIELDS[2:]}

        def at_or_after(t):
            return min((x for x in times if x >= t), default=times[-1])

        def at_or_before(t):
            return max((x for x in times if x <= t), default=times[0])

        def rates(a, b):
            ta, tb = totals(a), totals(b)
            span = max(b - a, 1e-9)
            return {"span_s": round(span, 1),
                    "cpu_s_per_s": round((tb["cpu_s"] - ta["cpu_s"]) / span, 3),
                    "machine_busy_cores": round((tb["machine_busy_s"] - ta["machine_busy_s"]) / span, 3),
                    "machine_steal_cores": round((tb["machine_steal_s"] - ta["machine_steal_s"]) / span, 3),
                    "device_read_mib_s": round((tb["read_bytes"] - ta["read_bytes"]) / span / 2**20, 2),
                    "device_write_mib_s": round((tb["write_bytes"] - ta["write_bytes"]) / span / 2**20, 2),
                    "defrag_mib_s": round((tb["defrag_moved_bytes"] - ta["defrag_moved_bytes"]) / span / 2**20, 2),
                    "used_over_live": (round(tb["used_bytes"] / tb["live_bytes"], 2)
                                       if tb["live_bytes"] else None),
                    "disk_bytes": tb["disk_bytes"] or None}

        return {"first": rates(times[0], at_or_after(times[0] + window)),
                "last": rates(at_or_before(times[-1] - window), times[-1])}


def p99_first_and_last(rundir, window_s):
    """The median per-second p99 (µs) of the client's first and last `window_s` seconds."""
    seconds, _ = client_series(rundir)
    ordered = [seconds[k].get("p99_us") for k in sorted(seconds) if seconds[k].get("p99_us")]
    if len(ordered) < 4:
        return None, None
    n = max(1, min(int(window_s), len(ordered) // 5))
    return statistics.median(ordered[:n]), statistics.median(ordered[-n:])


# ---- the node-failure test (cluster) ---------------------------------------------------------

class Monitor(threading.Thread):
    """Samples every node once a second during the node-failure test: alive or not, its CPU,
    and what tells of hints and of the victim's state. hayate: /metrics (hints pending, written
    and replayed; Unavailable and timeouts) and each survivor's /status (the victim up or down).
    Cassandra: the bytes in each node's hints folder (its hints files; the failure detector's
    verdicts come from the survivors' logs afterwards). Every sample is a line of monitor.jsonl."""

    def __init__(self, nodes, victim, path):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.victim = victim
        self.path = path
        self.samples = []
        self.stopping = threading.Event()
        self.metrics_port = {s.host: int(s.settings().get("metrics_port", 0)) for s in nodes.servers}

    def sample(self):
        now = time.time()
        row = {"t": round(now, 3), "nodes": {}}
        for server in self.nodes.servers:
            node = {}
            try:
                node["cpu_s"] = proc_cpu_s(server.pid)
                node["alive"] = True
            except (OSError, IndexError, ValueError):
                node["alive"] = False
            if self.nodes.system == "hayate":
                if node["alive"]:
                    metrics = hayate_metrics(server.host, self.metrics_port[server.host], timeout_s=2)
                    for key in ("hayate_hints_pending_bytes", "hayate_hints_written_total",
                                "hayate_hints_replayed_total", "hayate_hints_dropped_total",
                                "hayate_coordinator_unavailable_total",
                                "hayate_coordinator_write_timeouts_total",
                                "hayate_coordinator_read_timeouts_total"):
                        if key in metrics:
                            node[key.removeprefix("hayate_")] = metrics[key]
                    if server is not self.victim:
                        status = hayate_status(server.host, self.metrics_port[server.host])
                        for member in (status or {}).get("nodes", []):
                            if member.get("address") == self.victim.host:
                                node["victim_state"] = member.get("state")
            else:
                hints = server.rundir / "data" / "hints"
                total = 0
                for path in hints.glob("*.hints") if hints.exists() else []:
                    try:
                        total += path.stat().st_size
                    except OSError:
                        pass  # dispatched and deleted meanwhile
                node["hints_file_bytes"] = total
            row["nodes"][server.host] = node
        return row

    def run(self):
        with open(self.path, "w") as out:
            while not self.stopping.is_set():
                started = time.monotonic()
                row = self.sample()
                self.samples.append(row)
                out.write(json.dumps(row) + "\n")
                out.flush()
                self.stopping.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)


def client_series(rundir):
    """The client's seconds: {second: {count, failed, p99_us, intended_p99_us}}, second n being
    (n-1, n] after the client's start. hayate-bench: timeseries.csv (`ALL` counts every
    operation, failed ones included; `*-FAILED` the failures). Java YCSB: its status lines,
    where the p99 of a second is the largest of its operations' p99s (it prints no overall)."""
    import csv
    seconds = {}
    path = rundir / "timeseries.csv"
    if path.exists():
        with open(path) as f:
            for row in csv.DictReader(f):
                second = int(float(row["elapsed_s"]))
                entry = seconds.setdefault(second, {"count": 0, "failed": 0})
                op = row["operation"]
                count = int(row["count"] or 0)
                p99 = int(row["p99_us"]) if row.get("p99_us") else None
                if op == "ALL":
                    entry["count"], entry["p99_us"] = count, p99
                elif op == "Intended-ALL":
                    entry["intended_p99_us"] = p99
                elif op.endswith("-FAILED") and not op.startswith("Intended-"):
                    entry["failed"] += count
        return seconds, "hayate-bench timeseries.csv (ALL, Intended-ALL, *-FAILED)"
    status = re.compile(r" (\d+) sec: \d+ operations;.*?((?:\[[^\]]*\] ?)+)$")
    for line in (rundir / "client-stderr.txt").read_text().splitlines():
        match = status.search(line)
        if not match:
            continue
        entry = {"count": 0, "failed": 0}
        for op, body in re.findall(r"\[([A-Za-z-]+): ([^\]]*)\]", match.group(2)):
            fields = dict(item.split("=", 1) for item in body.split(", ") if "=" in item)
            count = int(float(fields.get("Count", 0)))
            if op.startswith("Intended-") or op == "CLEANUP":
                continue
            if op.endswith("-FAILED"):
                entry["failed"] += count
            elif count:
                entry["count"] += count
                p99 = float(fields.get("99", 0))
                entry["p99_us"] = max(entry.get("p99_us") or 0, p99)
        seconds[int(match.group(1))] = entry
    return seconds, "Java YCSB status lines (largest per-operation p99 of each second)"


ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOG_TIME = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{3,9})(Z?)")


def log_events(system, survivors, victim, since):
    """What the survivors' logs say of the victim after `since`, to the millisecond: when their
    failure detector marked it DOWN and UP, and each finished hint delivery. Cassandra (Gossiper,
    HintsDispatcher): "InetAddress /ADDR:PORT is now DOWN", "... is now UP", "Finished hinted
    handoff of file ... to endpoint /ADDR". hayate (cluster tasks): "node is down node=ADDR",
    "node is up node=ADDR", "replayed hints host=ID delivered=N"."""
    events = {"down": [], "up": [], "hints_finished": []}
    address = re.escape(victim.host)
    if system == "cassandra":
        name = "system.log"
        patterns = {"down": re.compile(rf"InetAddress /?{address}\S* is now DOWN"),
                    "up": re.compile(rf"InetAddress /?{address}\S* is now UP"),
                    "hints_finished": re.compile(rf"Finished hinted handoff of file .*/?{address}\b")}
    else:
        name = "hayate.log"
        host_id = ""
        node_json = victim.rundir / "data" / "node.json"
        if node_json.exists():
            # node.json keeps the host id as 16 bytes; the log writes it as a UUID.
            raw = json.loads(node_json.read_text()).get("host_id")
            if isinstance(raw, list) and len(raw) == 16:
                hexed = bytes(raw).hex()
                host_id = "-".join((hexed[:8], hexed[8:12], hexed[12:16], hexed[16:20], hexed[20:]))
        patterns = {"down": re.compile(rf"node is down node={address}\b"),
                    "up": re.compile(rf"node is up node={address}\b"),
                    "hints_finished": re.compile(rf"replayed hints host={re.escape(host_id) or 'NONE'}\b")}
    for server in survivors:
        path = server.rundir / "logs" / name
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            line = ANSI.sub("", line)
            stamp = LOG_TIME.search(line)
            if not stamp:
                continue
            text = stamp.group(1).replace("T", " ").replace(",", ".")
            text = text[:26]  # microseconds at most
            when = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
            if stamp.group(2) == "Z":  # hayate logs UTC; Cassandra's logback, local time
                when = when.replace(tzinfo=datetime.timezone.utc)
            when = when.timestamp()
            if when < since:
                continue
            for kind, pattern in patterns.items():
                if pattern.search(line):
                    events[kind].append({"t": round(when, 3), "node": server.host,
                                         "line": line.strip()[-160:]})
    return events


def kill_test(client, nodes, args, out, workload_file, threads, max_ops, level, name):
    """The node-failure test: a throttled run of the first workload at --kill-load of the
    throughput this system just measured, consistency `level`; --kill-before-s in, node
    --kill-node is killed (SIGKILL); --kill-down-s later it is restarted with its data and the
    run goes on for at least --kill-return-s while the survivors replay its hints."""
    topology = topology_of(nodes.topology, args)
    victim = nodes.servers[args.kill_node - 1]
    survivors = [s for s in nodes.servers if s is not victim]
    target = max(1, int(max_ops * args.kill_load))
    # The client runs for a fixed time (both clients' maxexecutiontime), so the restart gets an
    # allowance: 1.5 times the slowest start this system's nodes took, plus 5 s. --kill-return-s
    # is then at least the time from the node listening again to the end.
    allowance_s = math.ceil(nodes.start_s * 1.5) + 5
    total_s = args.kill_before_s + args.kill_down_s + allowance_s + args.kill_return_s
    rundir = phase_dir(out, nodes, name)
    rundir.mkdir(parents=True, exist_ok=True)
    events = {}
    monitor = Monitor(nodes, victim, rundir / "monitor.jsonl")
    log(f"{nodes.system}: node-failure test at {level}, {target:,} ops/s "
        f"({args.kill_load:.0%} of {max_ops:,.0f}); {victim.host} is killed after "
        f"{args.kill_before_s} s and restarted {args.kill_down_s} s later")

    def timeline(process):
        monitor.start()
        time.sleep(args.kill_before_s)
        if process.poll() is not None:
            return
        events["kill"] = time.time()
        log(f"{victim.host}: " + run([ctl_script(nodes.system), "kill", victim.rundir]).strip())
        time.sleep(args.kill_down_s)
        if process.poll() is not None:
            return
        events["restart"] = time.time()
        log(run(ctl_argv(nodes.system, args, topology, victim.host, victim.rundir)).strip())
        victim.reload()
        events["restart_ready"] = time.time()

    try:
        figures = client.run("run", workload_file, nodes, threads, rundir, nodes.system,
                             {"operationcount": 2_000_000_000, "maxexecutiontime": total_s},
                             during=timeline, target=target, consistency=level)
    finally:
        monitor.stop()
        if "kill" in events and "restart_ready" not in events \
                and not (victim.rundir / "server.pid").exists():
            # Interrupted while the victim was down: bring it back, so that the sitting stops
            # (and copies the logs of) three nodes as it started them.
            try:
                run(ctl_argv(nodes.system, args, topology, victim.host, victim.rundir))
                victim.reload()
            except SystemExit as error:
                log(f"{victim.host}: could not be restarted after the interruption: {error}")
    figures.update({"target_ops": target, "consistency": level, "victim": victim.host,
                    "events_unix": events, "restart_allowance_s": allowance_s,
                    "client_run_s": total_s})
    ring = getattr(nodes, "ring", None) or {}
    figures["victim_replica_share"] = ring.get("ownership", {}).get(victim.host, {}).get("replica")
    if "restart_ready" not in events:
        figures["analysis"] = {"note": "the client ended before the kill and restart were done"}
    else:
        figures["analysis"] = analyse_kill(nodes, victim, survivors, monitor.samples, events,
                                           rundir, figures, args)
    (rundir / "phase.json").write_text(json.dumps(figures, indent=2) + "\n")
    a = figures["analysis"]
    log(f"{nodes.system} kill test ({level}): detection {a.get('detect_after_kill_s')} s, "
        f"errors after detection {a.get('errors_detect_to_up')}, recovery "
        f"{a.get('recovery_after_detect_s')} s, replay p99 {a.get('replay_p99_max_ratio')}x")
    return figures


def analyse_kill(nodes, victim, survivors, samples, events, rundir, figures, args):
    """The node-failure test's figures, from the client's seconds and the monitor's samples."""
    meta = json.loads((rundir / "meta.json").read_text()) if (rundir / "meta.json").exists() else {}
    t0 = meta["start_unix_ms"] / 1000 if meta.get("start_unix_ms") else figures["client_started_unix"]
    seconds, series_source = client_series(rundir)
    a = {"client_series": series_source, "t0_unix": t0}
    kill, ready = events["kill"], events["restart_ready"]

    # When the survivors saw the victim down, and up again: their logs, to the millisecond.
    said = log_events(nodes.system, survivors, victim, kill - 1)
    a["log_events"] = said
    a["detect_method"] = (
        "the first survivor's log line marking the victim down (Cassandra: Gossiper's "
        "'InetAddress /ADDR is now DOWN'; hayate: 'node is down node=ADDR'); back up: the last "
        "survivor's line marking it up after the restart")
    detect = min((e["t"] for e in said["down"] if e["t"] >= kill), default=None)
    ups = {}
    for e in said["up"]:
        if e["t"] >= events["restart"]:
            ups.setdefault(e["node"], e["t"])
    up = max(ups.values()) if len(ups) >= len(survivors) else None
    if nodes.system == "hayate":
        # The same from /status, one sample a second: a cross-check of the logs.
        polled = [r["t"] for r in samples if r["t"] >= kill and any(
            r["nodes"][s.host].get("victim_state") == "down" for s in survivors)]
        a["status_poll_down_after_kill_s"] = round(polled[0] - kill, 1) if polled else None
    rel = lambda t: None if t is None else round(t - t0, 1)  # noqa: E731
    a.update({"kill_s": rel(kill), "detect_s": rel(detect), "restart_s": rel(events["restart"]),
              "restart_ready_s": rel(ready), "up_s": rel(up),
              "detect_after_kill_s": None if detect is None else round(detect - kill, 1)})

    # Hints: pending on the survivors, and when the replay ended.
    def pending(row):
        key = "hints_pending_bytes" if nodes.system == "hayate" else "hints_file_bytes"
        return sum(row["nodes"][s.host].get(key, 0) for s in survivors)
    series = [(r["t"], pending(r)) for r in samples]
    a["hints_peak_bytes"] = max((b for _, b in series), default=0)
    drained = None
    if a["hints_peak_bytes"] and up is not None:
        drained = next((t for t, b in series if t >= up and b == 0), None)
        # The last delivery the logs tell of is more precise than the 1 s samples.
        finished = [e["t"] for e in said["hints_finished"] if e["t"] >= up]
        if finished and drained is not None:
            drained = min(drained, max(finished))
    if nodes.system == "hayate" and samples:
        first, last = samples[0]["nodes"], samples[-1]["nodes"]
        for key in ("hints_written_total", "hints_replayed_total", "hints_dropped_total",
                    "coordinator_unavailable_total", "coordinator_write_timeouts_total",
                    "coordinator_read_timeouts_total"):
            a[key.removesuffix("_total")] = sum(
                last[s.host].get(key, 0) - first[s.host].get(key, 0) for s in survivors)
    a["hints_drained_s"] = rel(drained)
    if drained is not None and up is not None:
        a["replay_s"] = round(drained - up, 1)
        a["replay_bytes_per_s"] = round(a["hints_peak_bytes"] / max(drained - up, 1.0))

    # The client's seconds, by window.
    p99_key = "intended_p99_us" if any("intended_p99_us" in e for e in seconds.values()) else "p99_us"
    a["p99_series"] = ("Intended-ALL: from when the throttle meant each operation to start "
                       "(queueing behind a stall included)" if p99_key == "intended_p99_us"
                       else "ALL: from when each operation was sent")

    def window(lo, hi):
        return [(s, seconds[s]) for s in sorted(seconds) if lo < s <= hi]

    k, d = kill - t0, (detect - t0) if detect else None
    u = (up - t0) if up else (ready - t0)
    r = (drained - t0) if drained else None
    end = max(seconds) if seconds else 0
    warmup = min(10, args.kill_before_s / 3)
    before = [e[p99_key] for _, e in window(warmup, int(k)) if e.get(p99_key)]
    if not before:
        a["note"] = "no client seconds before the kill"
        return a
    baseline = sorted(before)[len(before) // 2]
    threshold = baseline * 1.2
    a.update({"baseline_p99_us": baseline, "threshold_p99_us": round(threshold),
              "baseline_seconds": len(before),
              "baseline_seconds_over_threshold": sum(v > threshold for v in before)})
    for label, lo, hi in (("before_kill", 0, k), ("kill_to_detect", k, d if d else u),
                          ("detect_to_up", d if d else u, u), ("up_to_end", u, end)):
        rows = window(lo, hi)
        a[f"errors_{label}"] = sum(e["failed"] for _, e in rows)
        a[f"ops_{label}"] = sum(e["count"] for _, e in rows)
        values = [e[p99_key] for _, e in rows if e.get(p99_key)]
        a[f"p99_max_{label}_us"] = max(values, default=None)
    # Recovery: the first second after detection from which the median p99 of five seconds is
    # within 1.2x of the baseline (a median, as the baseline is, since single seconds of a
    # loaded 2-core machine are noisy: see baseline_seconds_over_threshold).
    if d is not None:
        down = window(d, end)
        for i in range(len(down)):
            five = sorted(e[p99_key] for _, e in down[i:i + 5] if e.get(p99_key))
            if len(five) == 5 and five[2] <= threshold:
                a["recovered_s"] = down[i][0] - 1
                a["recovery_after_detect_s"] = round(max(0.0, down[i][0] - 1 - d), 1)
                a["recovered_before_restart"] = down[i][0] - 1 < events["restart"] - t0
                break
    # The replay: from the victim being up again to its hints being gone.
    if r is not None:
        rows = window(int(u), max(math.ceil(r), int(u) + 1))
        values = [e[p99_key] for _, e in rows if e.get(p99_key)]
        if values:
            a["replay_p99_max_us"] = max(values)
            a["replay_p99_median_us"] = sorted(values)[len(values) // 2]
            a["replay_p99_max_ratio"] = round(max(values) / baseline, 2)
            a["replay_seconds"] = len(values)
            a["replay_p99_series_ms"] = [round(v / 1000, 1) for v in values[:30]]
    # The seconds around the return, where a stall would show: p99 and operations per second.
    lo = int(events["restart"] - t0)
    values = [e[p99_key] for _, e in window(lo, lo + 10) if e.get(p99_key)]
    if values:
        a["return_p99_max_us"] = max(values)
        a["return_p99_max_ratio"] = round(max(values) / baseline, 2)
    a["return_seconds"] = [{"s": s, "ops": e["count"], "failed": e["failed"],
                            "p99_ms": round(e[p99_key] / 1000, 1) if e.get(p99_key) else None}
                           for s, e in window(lo, lo + 8)]
    return a


# ---- profiling (optional) ------------------------------------------------------------------

PROFILE = {}  # stem ("hayate", "cluster-hayate") -> the perf process, its data and the note


def start_profile(server, out, args, stem):
    """perf record of one hayate node for 20 s, starting 10 s into the run phase."""
    if shutil.which("perf") is None:
        PROFILE[stem] = {"note": "perf is not installed: no profile"}
        return
    delay_s = min(10, max(0, args.run_seconds - 25))
    data = out / f"{stem}-perf.data"
    argv = ["sh", "-c", f"sleep {delay_s}; exec perf record -F 499 -g -p {server.pid} "
            f"-o {data} -- sleep 20"]
    COMMANDS.append(shlex.join(argv))
    PROFILE[stem] = {"process": subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                                 stderr=open(out / f"{stem}-perf.log", "w")),
                     "data": data, "host": server.host}


def finish_profile(out, stem):
    entry = PROFILE.get(stem, {})
    process = entry.get("process")
    if process is None:
        return
    process.wait()
    data = entry["data"]
    if not data.exists():
        entry["note"] = f"perf record wrote nothing; see {stem}-perf.log"
        return
    # The top entries, flat (self time per thread, library and symbol), then by caller.
    flat = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                           "--sort", "comm,dso,symbol", "--percent-limit", "0.5"],
                          capture_output=True, text=True)
    (out / f"{stem}-perf-report.txt").write_text(flat.stdout)
    tree = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children",
                           "--percent-limit", "2"], capture_output=True, text=True)
    (out / f"{stem}-perf-callers.txt").write_text(tree.stdout)
    entry["note"] = (f"perf sampled the hayate node on {entry['host']} ({stem}) at 499 Hz with "
                     "call graphs for 20 s of its first workload, whose figures carry that cost. "
                     f"{stem}-perf-report.txt: `perf report --stdio --no-children -g none` "
                     f"(entries >= 0.5%); {stem}-perf-callers.txt: with call graphs (>= 2%)")
    collapse = shutil.which("inferno-collapse-perf")
    flamegraph = shutil.which("inferno-flamegraph")
    if collapse and flamegraph:
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True)
        folded = subprocess.run([collapse], input=script.stdout, capture_output=True, text=True)
        (out / f"{stem}-perf.folded").write_text(folded.stdout)
        svg = subprocess.run([flamegraph], input=folded.stdout, capture_output=True, text=True)
        (out / f"{stem}-flamegraph.svg").write_text(svg.stdout)
        entry["note"] += f"; {stem}-flamegraph.svg (inferno)"
    else:
        entry["note"] += "; no flame graph (`cargo install inferno` to get one)"
    data.unlink()


# ---- the environment and the report --------------------------------------------------------

def git_dirty():
    """Tracked files changed since the last commit (untracked ones, such as results, do not
    change the binaries)."""
    return subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                          capture_output=True, text=True).stdout.strip()


def git_commit():
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return commit + ("-dirty" if git_dirty() else "")


def environment(workdir, commit):
    def first(argv):
        result = subprocess.run(argv, capture_output=True, text=True)
        return (result.stdout + result.stderr).strip()

    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor())
    mem_kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal:")))
    df = first(["df", "-h", "--output=source,fstype,size,avail", str(workdir)])
    cgroup = ("v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists()
              else "v1" if Path("/sys/fs/cgroup/memory").exists() else "none")
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "hayate_commit": commit,
        "hayate_binary_sha256": sha256_of(REPO / "target" / "release" / "hayate"),
        "hayate_bench_binary_sha256": sha256_of(REPO / "target" / "release" / "hayate-bench"),
        "cassandra_jar_sha256": ", ".join(f"{jar.name} {sha256_of(jar)}" for jar in
                                          sorted(CACHE.glob("cassandra-*/lib/cassandra-all-*.jar"))),
        "kernel": " ".join(platform.uname()[:3]),
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "ram": f"{mem_kib / 1048576:.1f} GiB",
        "disk": df.replace("\n", " | "),
        "cgroup": cgroup,
        "java": first(["java", "-version"]).replace("\n", " | "),
        "python": platform.python_version(),
    }


def sha256_of(path):
    import hashlib
    if not Path(path).exists():
        return "not built"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fmt(value, digits=0):
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def ratio(numerator, denominator):
    if not numerator or not denominator:
        return "–"
    return f"{numerator / denominator:.2f}×"


def ms(us):
    return None if us is None else us / 1000


def mib(value):
    return None if value is None else value / 1048576


def kib(value):
    return None if value is None else value / 1024


def per_node(figures, key):
    """A memory figure in MiB, node by node (a / b / c) in a cluster."""
    nodes = figures.get("nodes") or []
    if len(nodes) > 1:
        return " / ".join(fmt(mib(n.get(key))) for n in nodes)
    return fmt(mib(figures.get(key)))


def topology_text(name, args):
    t = topology_of(name, args)
    return f"{len(t['hosts'])} node{'s' if len(t['hosts']) > 1 else ''}, RF {t['rf']}, {t['consistency']}"


def verdict(ok):
    return "met" if ok else "**missed**"


def write_results(out, args, state, env):
    topologies = state["topologies"]
    versions = {}
    for sitting in topologies.values():
        for system, record in sitting["systems"].items():
            versions.setdefault(system, record.get("version", ""))
    name_of = {"cassandra": f"Cassandra {versions.get('cassandra', '')}",
               "hayate": f"hayate {versions.get('hayate', '')}"}

    def phases(topology, system):
        return topologies.get(topology, {}).get("systems", {}).get(system, {}).get("phases", {})

    lines = [f"# hayate vs Apache Cassandra: {out.name}", ""]
    failed = [f"{system} {topology} {phase}: {record.get('errors', 0):,} errors, "
              f"{record.get('not_found', 0):,} reads not found"
              for topology, sitting in topologies.items()
              for system, entry in sitting["systems"].items()
              for phase, record in entry.get("phases", {}).items()
              if isinstance(record, dict) and (record.get("errors") or record.get("not_found"))]
    failed += [f"{system} {topology} {what}: "
               f"{step.get('errors', 0):,} errors, {step.get('not_found', 0):,} reads not found"
               for topology, sitting in topologies.items()
               for system, entry in sitting["systems"].items()
               for what, step in unmeasured_steps(entry)
               if step.get("errors") or step.get("not_found")]
    if failed:
        lines += ["**This sitting had failed operations; the figures below include them:** "
                  + "; ".join(failed) + ".", ""]
    if str(state.get("commit", "")).endswith("-dirty"):
        lines += ["**Built from a work tree with uncommitted changes (--allow-dirty): the commit "
                  "named below is not the whole of what ran.**", ""]
    unlimited = [f"{system} ({topology})" for topology, sitting in topologies.items()
                 for system, record in sitting["systems"].items()
                 if "settings" in record and not record.get("cgroup")]
    if unlimited:
        lines += [f"**WARNING: {', '.join(unlimited)} ran WITHOUT a memory limit (no writable "
                  "cgroup; --allow-unlimited): the page cache may have held the whole data set, "
                  "so these figures do not measure storage.**", ""]
    described = "; ".join(
        f"**{name}**: {topology_text(name, args)} on {', '.join(topology_of(name, args)['hosts'])}, "
        f"{threads_text(topologies[name], args)}" for name in topologies)
    lines += [f"{args.records:,} records of 1 KB (10 fields x 100 B), every server node in its own "
              f"{mib(args.memory_bytes):,.0f} MiB memory cgroup, {args.run_seconds} s per "
              f"workload, client `{args.client}`. {described}. Durability: "
              + ("each system's default (no acknowledged write lost in a process crash; up to "
                 "10 s for Cassandra, 1 s for hayate in a power failure)"
                 if args.durability == "default" else
                 "acknowledged once on the device (hayate `commit_to_device`, Cassandra "
                 + ("`commitlog_sync: batch`, a sync as soon as a write waits"
                    if args.commitlog_sync == "batch" else
                    "`commitlog_sync: group` with a 15 ms window") + ")") + ".", ""]

    for name in args.workloads:
        lines += [f"## Workload `{name}`: {WORKLOADS[name][0]}", "",
                  "| | topology | throughput (ops/s) | p95 read (ms) | p95 update (ms) | "
                  "insert rate (ops/s) | server CPU per client operation, all nodes (µs) |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for topology in topologies:
            c, h = phases(topology, "cassandra").get(name, {}), phases(topology, "hayate").get(name, {})
            lc, lh = phases(topology, "cassandra").get("load", {}), phases(topology, "hayate").get("load", {})
            where = topology_text(topology, args)
            for system, row, load in (("cassandra", c, lc), ("hayate", h, lh)):
                if system in topologies[topology]["systems"]:
                    lines.append(f"| {name_of[system]} | {where} | {fmt(row.get('throughput_ops'))} | "
                                 f"{fmt(ms(row.get('read_p95_us')), 2)} | "
                                 f"{fmt(ms(row.get('update_p95_us')), 2)} | "
                                 f"{fmt(load.get('throughput_ops'))} | "
                                 f"{fmt(row.get('server_cpu_us_per_op'), 1)} |")
            if len(topologies[topology]["systems"]) == 2:
                lines.append(f"| hayate / Cassandra | {where} | "
                             f"{ratio(h.get('throughput_ops'), c.get('throughput_ops'))} | "
                             f"{ratio(c.get('read_p95_us'), h.get('read_p95_us'))} | "
                             f"{ratio(c.get('update_p95_us'), h.get('update_p95_us'))} | "
                             f"{ratio(lh.get('throughput_ops'), lc.get('throughput_ops'))} | "
                             f"{ratio(c.get('server_cpu_us_per_op'), h.get('server_cpu_us_per_op'))} |")
        lines += ["", "Ratios as the reference's Table 1: throughput and insert rate hayate ÷ "
                  "Cassandra, latencies and CPU per operation Cassandra ÷ hayate (higher is "
                  "better for hayate). Server CPU per client operation is summed over every node "
                  "of the topology (utime + stime from /proc/PID/stat, background work included) "
                  "and divided by the client's operations, so at RF 2 it includes both replicas' "
                  "work and the coordination.", ""]

    if "single" in topologies and "cluster" in topologies:
        lines += ["## RF 2 on 3 nodes against RF 1 on one node: CPU per operation", "",
                  "From the same sitting. The goal: hayate at RF 2 costs at most 2.2× its own "
                  "RF 1 CPU per operation (two replicas do the work; coordination should add "
                  "little), and its advantage over Cassandra is at least as large as at RF 1.", "",
                  "| workload | system | RF 1 (µs/op) | RF 2, 3 nodes (µs/op) | RF 2 ÷ RF 1 |",
                  "|---|---|---:|---:|---:|"]
        goals = []
        for name in ["load", *args.workloads]:
            for system in args.systems:
                one = phases("single", system).get(name, {}).get("server_cpu_us_per_op")
                three = phases("cluster", system).get(name, {}).get("server_cpu_us_per_op")
                lines.append(f"| {name} | {system} | {fmt(one, 1)} | {fmt(three, 1)} | "
                             f"{ratio(three, one)} |")
                if system == "hayate" and one and three and name != "load":
                    goals.append(f"- `{name}`: hayate RF 2 ÷ RF 1 = {three / one:.2f}× "
                                 f"(goal ≤ 2.2×): {verdict(three / one <= 2.2)}"
                                 + ("" if three / one <= 2.2 else
                                    f", by {three / one - 2.2:.2f}× ({three - 2.2 * one:,.1f} µs/op over)"))
            if len(args.systems) == 2 and name != "load":
                advantage = {}
                for topology in ("single", "cluster"):
                    c = phases(topology, "cassandra").get(name, {})
                    h = phases(topology, "hayate").get(name, {})
                    if c.get("server_cpu_us_per_op") and h.get("server_cpu_us_per_op"):
                        advantage[topology] = (c["server_cpu_us_per_op"] / h["server_cpu_us_per_op"],
                                               (h.get("throughput_ops") or 0) / (c.get("throughput_ops") or 1))
                if len(advantage) == 2:
                    cpu1, tp1 = advantage["single"]
                    cpu3, tp3 = advantage["cluster"]
                    goals.append(f"- `{name}`: Cassandra ÷ hayate CPU per operation {cpu1:.2f}× at "
                                 f"RF 1, {cpu3:.2f}× at RF 2 (goal: at least as large): "
                                 f"{verdict(cpu3 >= cpu1)}; throughput hayate ÷ Cassandra "
                                 f"{tp1:.2f}× at RF 1, {tp3:.2f}× at RF 2: {verdict(tp3 >= tp1)}")
        lines += [""] + goals + [""]

    for topology, sitting in topologies.items():
        for system, record in sitting["systems"].items():
            ring = record.get("ring")
            if not ring:
                continue
            if not any(line.startswith("## The cluster's ring") for line in lines):
                lines += ["## The cluster's ring", "",
                          "Once every node listed the others with their tokens in system.peers and "
                          "all reported one schema version (`cqltool.py ring`, asking each node "
                          "about itself; the same check for both systems). Ownership from the "
                          "tokens the first node reports: the share of the ring each node holds "
                          "as primary, and as one of the RF replicas (SimpleStrategy).", "",
                          "| system | node | tokens | primary | replica (RF 2) | agreed after (s) |",
                          "|---|---|---:|---:|---:|---:|"]
            for host, o in ring["ownership"].items():
                lines.append(f"| {system} | {host} | {o['tokens']} | {o['primary']:.1%} | "
                             f"{o['replica']:.1%} | {ring['waited_s']} |")
    if any(line.startswith("## The cluster's ring") for line in lines):
        lines.append("")

    lines += steady_section(args, phases, topologies)
    if equal_shares(args):
        lines += equal_load_section(args, phases, topologies)

    kills = [(system, level, k) for sitting in topologies.values()
             for system, record in sitting["systems"].items()
             for level, k in record.get("kill", {}).items()]
    if kills:
        lines += kill_section(kills, args)

    lines += ["## Cost per operation", "",
              "Server figures are summed over the topology's nodes: CPU is utime + stime of each "
              "server process (all threads, background work such as compaction or "
              "defragmentation included) from /proc/PID/stat between the phase's start and end, "
              "divided by the phase's operations; the client's is its rusage. Device bytes are "
              "each server's /proc/PID/io read_bytes and write_bytes. Peak memory: each node's "
              "VmHWM over the phase, and each node's cgroup peak (page cache included), in the "
              "order of the topology's addresses.", "",
              "| topology | system | phase | ops | ops/s | server CPU (us/op) | client CPU (us/op) | "
              "device read (B/op) | device write (B/op) | server peak RSS (MiB) | "
              "cgroup peak (MiB) | errors | reads not found |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for topology, sitting in topologies.items():
        for system, record in sitting["systems"].items():
            rows = list(record.get("phases", {}).items())
            rows += [(f"kill-{level.lower()}", k) for level, k in record.get("kill", {}).items()]
            for phase, f in rows:
                lines.append(f"| {topology} | {system} | {phase} | {fmt(f.get('operations'))} | "
                             f"{fmt(f.get('throughput_ops'))} | {fmt(f.get('server_cpu_us_per_op'), 1)} | "
                             f"{fmt(f.get('client_cpu_us_per_op'), 1)} | "
                             f"{fmt(f.get('server_read_bytes_per_op'))} | "
                             f"{fmt(f.get('server_write_bytes_per_op'))} | "
                             f"{per_node(f, 'server_peak_rss_bytes')} | "
                             f"{per_node(f, 'cgroup_peak_bytes')} | {fmt(f.get('errors'))} | "
                             f"{fmt(f.get('not_found'))} |")
    lines += ["", "The node-failure test's rows (kill-*) have no server figures: the killed "
              "node's counters restarted with it.", ""]

    coordinated = [(topology, phase, f["coordinator"], f["operations"])
                   for topology, sitting in topologies.items()
                   for phase, f in sitting["systems"].get("hayate", {}).get("phases", {}).items()
                   if f.get("coordinator") and f.get("operations")]
    if coordinated:
        lines += ["## hayate's coordinators", "",
                  "hayate's own counters over each phase, summed over the nodes "
                  "(`hayate_coordinator_*_total` on /metrics), per client operation: how often "
                  "a request reached a node that is not a replica of its key (the driver not "
                  "routing by token), the answers other replicas sent and how long they took.", "",
                  "| topology | phase | coordinated reads / op | writes / op | not a replica / op | "
                  "replica answers / op | mean replica answer (µs) | speculative retries | "
                  "read repairs | Unavailable | timeouts | Paxos round trips / op | "
                  "Paxos restarts (contended) / op |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for topology, phase, c, ops in coordinated:
            answers = c.get("coordinator_replica_responses_total", 0)
            mean = (c.get("coordinator_replica_latency_microseconds_total", 0) / answers
                    if answers else None)
            lines.append(f"| {topology} | {phase} | {c.get('coordinator_reads_total', 0) / ops:.2f} | "
                         f"{c.get('coordinator_writes_total', 0) / ops:.2f} | "
                         f"{c.get('coordinator_not_replica_total', 0) / ops:.3f} | "
                         f"{answers / ops:.2f} | {fmt(mean, 0)} | "
                         f"{fmt(c.get('coordinator_speculative_retries_total'))} | "
                         f"{fmt(c.get('coordinator_read_repairs_total'))} | "
                         f"{fmt(c.get('coordinator_unavailable_total'))} | "
                         f"{fmt(c.get('coordinator_write_timeouts_total', 0) + c.get('coordinator_read_timeouts_total', 0))} | "
                         f"{c.get('coordinator_paxos_round_trips_total', 0) / ops:.2f} | "
                         f"{c.get('coordinator_paxos_contended_total', 0) / ops:.2f} |")
        lines.append("")

    lines += ["## Disk", "", "| topology | system | when | allocated on disk, all nodes (MiB) | engine's figure |",
              "|---|---|---|---:|---|"]
    for topology, sitting in topologies.items():
        for system, record in sitting["systems"].items():
            for when in ("disk_after_load", "disk_after_settle", "disk_at_end"):
                d = record.get(when)
                if not d:
                    continue
                engine = ""
                if "hayate_used_bytes" in d:
                    engine = (f"used blocks {fmt(mib(d['hayate_used_bytes']))} MiB, live "
                              f"{fmt(mib(d['hayate_live_bytes']))} MiB of "
                              f"{fmt(mib(d['hayate_device_bytes']))} MiB of preallocated devices")
                lines.append(f"| {topology} | {system} | {when.removeprefix('disk_').replace('_', ' ')} | "
                             f"{fmt(mib(d['disk_allocated_bytes']))} | {engine} |")
    lines += ["", "Cassandra's figure counts SSTables and the commit log; hayate's device files are "
              "preallocated, so their allocated size is the device size and the engine's used "
              "blocks tell what the data takes.", ""]

    for topology, sitting in topologies.items():
        load_swept = {system: record for system, record in sitting["systems"].items()
                      if record.get("load_sweep")}
        if not load_swept:
            continue
        rows = next(iter(load_swept.values()))["load_sweep"]["rows_per_step"]
        lines += [f"## Load sweeps ({topology})", "",
                  f"On each system the load's first rows went in steps of {rows:,} rows "
                  "(insertstart and insertcount), one thread count per step, under the run "
                  "sweep's rule, for at most half the rows; the rest loaded at the chosen count, "
                  "and that part's throughput is the insert rate above. Each step loads into the "
                  "data the steps before it left, so later steps meet a fuller store (and, on "
                  "Cassandra, the compactions the earlier steps started).", "",
                  "| system | threads | rows/s | p95 insert (ms) | server CPU (µs/row) | errors |",
                  "|---|---:|---:|---:|---:|---:|"]
        for system, record in load_swept.items():
            lines += sweep_rows(system, record["load_sweep"]["points"], record["load_threads"],
                                lambda p: [fmt(ms(p["insert_p95_us"]), 2),
                                           fmt(p.get("server_cpu_us_per_op"), 1),
                                           f"{p['errors']:,}"])
            load = record["phases"].get("load", {})
            lines.append(f"| {system}, the rest | {record['load_threads']} | "
                         f"{fmt(load.get('throughput_ops'))} | {fmt(ms(load.get('insert_p95_us')), 2)} | "
                         f"{fmt(load.get('server_cpu_us_per_op'), 1)} | {load.get('errors', 0):,} |")
        lines.append("")

    for topology, sitting in topologies.items():
        warmed = {system: record["warmup"] for system, record in sitting["systems"].items()
                  if record.get("warmup")}
        if not warmed:
            continue
        lines += [f"## Warm-up ({topology})", "",
                  f"After the load, before anything else is measured, each system ran workload "
                  f"`{args.workloads[0]}` unthrottled in steps of {args.warmup_step_s} s for at "
                  f"least {args.warmup_seconds} s; hayate went on while its delta buffer (updates "
                  "written without reading their row) grew by more than 2% over a step, up to "
                  f"{args.warmup_max_seconds} s. Until the buffer is full, an update skips the "
                  "device read it costs in the steady state, so a phase measured while it fills "
                  "flatters hayate. Cassandra then waited for its compactions to settle.", "",
                  "| system | threads | after (s) | ops/s | server CPU (µs/op) | device read (KiB/op) "
                  "| delta buffer (MiB) | errors |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for system, warmup in warmed.items():
            for step in warmup["steps"]:
                lines.append(f"| {system} | {warmup['threads']} | {step['end_s']} | "
                             f"{fmt(step['throughput_ops'])} | "
                             f"{fmt(step.get('server_cpu_us_per_op'), 1)} | "
                             f"{fmt(kib(step.get('server_read_bytes_per_op')), 2)} | "
                             f"{fmt(mib(step.get('delta_bytes')))} | {step['errors']:,} |")
        lines.append("")

    for topology, sitting in topologies.items():
        swept = {system: record for system, record in sitting["systems"].items()
                 if record.get("sweep")}
        if not swept:
            lines += [f"Threads ({topology}): {sitting['threads']}, given with --threads (no sweep).", ""]
            continue
        lines += [f"## Thread sweeps ({topology})", "",
                  f"On each system, workload `{args.workloads[0]}`, "
                  f"{next(iter(swept.values()))['sweep']['seconds']} s each; the count stops rising once "
                  "throughput has twice in a row gained 5% or less on the best count so far, which "
                  "runs that system's unthrottled workloads. "
                  f"{equal_threads_sentence(sitting, args)}", "",
                  "| system | threads | ops/s | p95 read (ms) | p95 update (ms) | server CPU (µs/op) "
                  "| device read (KiB/op) | delta buffer at the end (MiB) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for system, record in swept.items():
            lines += sweep_rows(system, record["sweep"]["points"], record["threads"],
                                lambda p: [fmt(ms(p["read_p95_us"]), 2),
                                           fmt(ms(p["update_p95_us"]), 2),
                                           fmt(p.get("server_cpu_us_per_op"), 1),
                                           fmt(kib(p.get("server_read_bytes_per_op")), 2),
                                           fmt(mib(p.get("delta_bytes")))])
        lines.append("")

    for topology, sitting in topologies.items():
        settles = [s for s in sitting["systems"].get("cassandra", {}).get("settles", []) if s]
        if settles:
            lines += [f"## Cassandra compaction settling ({topology})", "",
                      "Before each measured phase the harness waits until no compaction has run "
                      f"for {args.settle_quiet_s} s on any node (system_views.sstable_tasks and "
                      "the CompactionExecutor pool), as the reference let compactions finish "
                      "after its load.", ""]
            for s in settles:
                lines.append(f"- {s['why']}: {'settled' if s['settled'] else 'NOT settled (timeout)'} "
                             f"after {s['waited_s']} s")
            lines.append("")

    notes = [entry["note"] for entry in PROFILE.values() if entry.get("note")]
    if notes:
        lines += ["## Profile", ""] + [f"- {note}" for note in notes] + [""]
    if state.get("charts"):
        lines += ["## Charts", "", state["charts"], ""]

    lines += ["## Environment", "", "| | |", "|---|---|"]
    for key, value in env.items():
        lines.append(f"| {key} | {str(value).replace('|', '/')} |")
    lines += ["", "## Settings", ""]
    for topology, sitting in topologies.items():
        for system, record in sitting["systems"].items():
            settings = record.get("settings", {})
            lines.append(f"- **{system}, {topology}** (first node; the others differ only in "
                         "address): " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    drops = sorted(set(c for sitting in topologies.values() for r in sitting["systems"].values()
                       for c in r.get("cache_drops", [])))
    lines += ["- Keyspace `ycsb`: SimpleStrategy with the topology's replication factor (1, or 2 "
              "on 3 nodes). With one data center and one rack, NetworkTopologyStrategy "
              "{'datacenter1': 2} would place the same replicas (the next distinct nodes "
              "clockwise); SimpleStrategy keeps the one-node and cluster sittings alike.",
              "- Consistency: ONE on one node (one replica); TWO for reads and writes on the "
              "cluster, as the reference (\"a consistency level of 2 for writes and 2 for "
              "reads\"). The client is given every node (`-p hosts=...`) and routes by token.",
              "- Tokens: Cassandra `num_tokens: 16` (5.0's shipped value) with "
              "`allocate_tokens_for_local_replication_factor` = the keyspace's RF (2 on the "
              "cluster; cassandra.yaml's comment: the allocator \"attempts to choose tokens in a "
              "way that optimizes replicated load over the nodes in the datacenter for the "
              "replica factor\"); hayate its defaults (16 tokens per node, allocated evenly when "
              "the nodes form the ring together).",
              "- Cassandra's full configuration: `cassandra-server-config/` and "
              "`cluster-cassandra-server-config-<address>/` (the yaml's comments give the reason "
              "for each setting; bench/README.md lists them); hayate's: "
              "`hayate-server-config/hayate.toml` and `cluster-hayate-server-config-<address>/`.",
              "- Workload files: `workloads/`.",
              f"- Page cache: {', '.join(drops)} before each measured run.", ""]
    lines += ["## Commands", "", "```", shlex.join(sys.argv)] + COMMANDS + ["```", ""]
    (out / "results.md").write_text("\n".join(lines))
    (out / "results.json").write_text(json.dumps(
        {"args": {k: v for k, v in vars(args).items()}, "state": state, "environment": env},
        indent=2, default=str) + "\n")


def unmeasured_steps(record):
    """A system's steps outside the measured phases (load sweep, thread sweep, warm-up), each
    with the words that name it in the report."""
    for kind, what in (("load_sweep", "load sweep"), ("sweep", "thread sweep")):
        for point in record.get(kind, {}).get("points", []):
            yield f"{what} step at {point['threads']} threads", point
    for step in record.get("warmup", {}).get("steps", []):
        yield f"warm-up step ending at {step['end_s']} s", step


def sweep_rows(system, points, chosen, cells):
    """A sweep table's rows for one system: its count (marked if chosen), its throughput, then
    `cells(point)`."""
    return [f"| {system} | {p['threads']}{' (chosen)' if p['threads'] == chosen else ''} | "
            f"{fmt(p['throughput_ops'])} | " + " | ".join(cells(p)) + " |" for p in points]


def steady_section(args, phases, topologies):
    """Background work early and late in each unthrottled run (from timeline.csv)."""
    lines = ["## Steady state: the first and the last part of each run", "",
             f"Sampled every {args.timeline_s} s on every node (`timeline.csv` in each run's "
             "folder); first and last: the first and last fifth of the run, at most 5 minutes "
             "each. Device MiB/s from /proc/PID/io; blocks in use ÷ live data and "
             "defragmentation's rate from hayate's metrics (Cassandra: its data folder's size "
             "instead); p99: the median per-second p99 of the client over the same windows. "
             "Machine busy and steal: the whole VM's CPU from /proc/stat (busy: the server, the "
             "client and anything else; steal: time the hypervisor gave to other tenants). "
             "Background work is at its steady rate when first and last agree.", "",
             "| topology | workload | system | part | server CPU (cores) | machine busy / steal "
             "(cores) | device read (MiB/s) | device write (MiB/s) | defrag (MiB/s) | in use ÷ "
             "live | data on disk (MiB) | p99 (ms) |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for topology in topologies:
        for name in args.workloads:
            for system in args.systems:
                steady = (phases(topology, system).get(name) or {}).get("steady") or {}
                for part in ("first", "last"):
                    f = steady.get(part)
                    if not f:
                        continue
                    disk = f.get("disk_bytes")
                    lines.append(
                        f"| {topology} | {name} | {system} | {part} {f['span_s']:.0f} s | "
                        f"{f['cpu_s_per_s']:.2f} | {fmt(f.get('machine_busy_cores'), 2)} / "
                        f"{fmt(f.get('machine_steal_cores'), 2)} | {f['device_read_mib_s']:.1f} | "
                        f"{f['device_write_mib_s']:.1f} | "
                        f"{f['defrag_mib_s']:.1f} | {fmt(f.get('used_over_live'), 2)} | "
                        f"{fmt(disk / 2**20 if disk else None)} | "
                        f"{ms(steady.get(f'p99_{part}_us'))} |")
    return lines + [""]


def equal_threads_chosen(sitting, args):
    """{share: {"threads", "rule"}} of a topology's runs at equal throughput, or {} for sittings
    before the rule, which ran them at the first system's own count."""
    by_share = sitting.get("equal_threads_by_share")
    if by_share:
        return {float(share): chosen for share, chosen in by_share.items()}
    if sitting.get("equal_threads"):  # the first sitting with the rule: one share
        return {equal_shares(args)[0]: sitting["equal_threads"]}
    return {}


def equal_counts(sitting, args):
    """The runs at equal throughput's thread counts, as the report's first paragraph says them."""
    chosen = equal_threads_chosen(sitting, args)
    if not chosen:
        return str(sitting["systems"].get(args.systems[0], {}).get("threads"))
    if len(chosen) == 1:
        return str(next(iter(chosen.values()))["threads"])
    return ", ".join(f"{c['threads']} at {share:.0%}" for share, c in chosen.items())


def equal_threads_sentence(sitting, args):
    """What the sweep section says of the runs at equal throughput's thread count."""
    if not equal_shares(args):
        return ""
    chosen = equal_threads_chosen(sitting, args)
    if not chosen:
        return "The runs at equal throughput use the first system's count on every system."
    return " ".join(f"The runs at {share:.0%} use {c['threads']} threads on every system: "
                    f"{c['rule']}." for share, c in chosen.items())


def equal_load_section(args, phases, topologies):
    """Latency with both systems at the same throughput (the `<workload>-equal` phases), measured
    from each request's send and intended from when the throttle meant it to start."""
    first = args.systems[0]
    counts = [f"{topology} at {share:.0%}: {c['threads']} ({c['rule']})"
              for topology, sitting in topologies.items()
              for share, c in equal_threads_chosen(sitting, args).items()]
    # Sittings before the rule (equal_load_threads) ran it at the first system's own count.
    threads = (f"with one client thread count on every system, {'; '.join(counts)}" if counts
               else f"with {first}'s client threads")
    shares = " and ".join(f"{share:.0%}" for share in equal_shares(args))
    lines = ["## Latency at equal throughput", "",
             f"Each workload again on both systems, throttled (`-target`) to {shares} "
             f"of the throughput {first} reached on it unthrottled, {threads}, for "
             f"{args.equal_seconds or args.run_seconds} s, so that latencies compare the same "
             "offered load rather than restate throughput. hayate-bench spreads each thread's "
             "operations evenly over the target's tick. Measured latency is from each request's "
             "send; intended latency (coordinated omission corrected) from when the throttle "
             "meant it to start, so it also counts the time a request waited in the client "
             "behind a slow one. Ratios are Cassandra ÷ hayate.", "",
             "| topology | workload | target (ops/s) | threads | system | achieved (ops/s) | "
             "p95 read (ms) | p99 read (ms) | p95 update (ms) | p99 update (ms) | "
             "intended p95 read (ms) | intended p95 update (ms) | errors |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for topology in topologies:
        for name, _, phase in equal_phases(args):
            rows = {system: phases(topology, system).get(phase) for system in args.systems}
            for system, f in rows.items():
                if not f:
                    continue
                lines.append(
                    f"| {topology} | {name} | {fmt(f.get('target_ops'))} | {fmt(f.get('threads'))} | "
                    f"{system} | {fmt(f.get('throughput_ops'))} | {ms(f.get('read_p95_us'))} | "
                    f"{ms(f.get('read_p99_us'))} | {ms(f.get('update_p95_us'))} | "
                    f"{ms(f.get('update_p99_us'))} | {ms(f.get('intended_read_p95_us')) or '–'} | "
                    f"{ms(f.get('intended_update_p95_us')) or '–'} | {fmt(f.get('errors'))} |")
                if not kept_up(f):
                    done, target = share_of_target(f), fmt(f["target_ops"])
                    why = (f"short of the target {target}, so a backlog grew in the client all "
                           "run: its intended latency measures that backlog"
                           if done < EQUAL_REACHED else
                           f"{done:.1%} of the target {target}: the target counts as reached "
                           "(bench/README.md, step 8), but a backlog still grew in the client, so "
                           "its intended latency measures that backlog and no intended ratio is "
                           "given")
                    ratios.append(f"- {topology} `{name}`: {system} did "
                                  f"{fmt(f['throughput_ops'])} ops/s, {why}")
            for system in args.systems:
                record = topologies[topology].get("systems", {}).get(system, {})
                for f in record.get("equal_short", {}).get(phase, []):
                    ratios.append(f"- {topology} `{name}`: {system} first ran at {fmt(f.get('threads'))} "
                                  f"threads and did {fmt(f['throughput_ops'])} ops/s, short of the "
                                  f"target {fmt(f.get('target_ops'))}; that try is in "
                                  f"`{f['folder']}/`, and the table has the run repeated at more "
                                  "threads (bench/README.md, step 8)")
            c, h = rows.get("cassandra"), rows.get("hayate")
            if c and h:
                intended = ""
                if (c.get("intended_read_p95_us") and h.get("intended_read_p95_us")
                        and kept_up(c) and kept_up(h)):
                    intended = (f"; intended p95 read "
                                f"{ratio(c['intended_read_p95_us'], h['intended_read_p95_us'])}, "
                                f"update {ratio(c.get('intended_update_p95_us'), h.get('intended_update_p95_us'))}")
                ratios.append(f"- {topology} `{name}` at {fmt(c.get('target_ops'))} ops/s: p95 read "
                              f"{ratio(c.get('read_p95_us'), h.get('read_p95_us'))}, p99 read "
                              f"{ratio(c.get('read_p99_us'), h.get('read_p99_us'))}, p95 update "
                              f"{ratio(c.get('update_p95_us'), h.get('update_p95_us'))}, p99 update "
                              f"{ratio(c.get('update_p99_us'), h.get('update_p99_us'))}{intended} "
                              "lower on hayate")
    return lines + [""] + ratios + [""]


def share_of_target(f):
    """The share of its target a throttled run did; None for a run without a target."""
    return f["throughput_ops"] / f["target_ops"] if f.get("target_ops") else None


def kept_up(f):
    """Whether a throttled run did its target, so that its intended latency is the server's."""
    done = share_of_target(f)
    return done is None or done >= EQUAL_KEPT_UP


def kill_section(kills, args):
    lines = ["## A node killed under load", "",
             f"After the workloads, on each system's cluster: workload `{args.workloads[0]}` "
             f"throttled (`-target`) to {args.kill_load:.0%} of the throughput that system just "
             f"measured on it, {args.kill_before_s} s in, node {args.kill_node} "
             f"({args.cluster_hosts[args.kill_node - 1]}; the client knows all three) is killed "
             f"with SIGKILL; {args.kill_down_s} s later it is restarted with its data, and the "
             f"run goes on at least {args.kill_return_s} s after it listens again while the "
             "survivors replay its hints (the client's run is sized with 1.5 times the "
             "system's slowest node start, plus 5 s, for the restart). "
             "Figures are the client's seconds (second n is (n-1, n] after the client started). "
             "p99 before the kill: the median of the per-second p99s after a warm-up; "
             "recovered: the first second after detection from which the median of five "
             "seconds' p99s is within 1.2× of it. Requests in flight when the node died end "
             "after detection too (a timeout: 2 s for writes, 5 s for reads, on both systems), "
             "so the worst second while down can be such a timeout. Errors are the client's failed operations; the hints "
             "are what the survivors held for the victim.", "",
             "| system | consistency | target (ops/s) | detected after kill (s) | errors kill→detected | "
             "errors detected→back up (of ops) | p99 before (ms) | recovered after detection (s) | "
             "p99 max while down (ms) | p99 max in the 10 s from the restart (ms, × before) | "
             "hints peak (KiB) | replay (s) | p99 max in replay (ms, × before) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for system, level, k in kills:
        a = k.get("analysis", {})
        replay = (f"{fmt(ms(a.get('replay_p99_max_us')), 2)} ({a['replay_p99_max_ratio']}×)"
                  if a.get("replay_p99_max_ratio") is not None else "–")
        lines.append(f"| {system} | {level} | {fmt(k.get('target_ops'))} | "
                     f"{fmt(a.get('detect_after_kill_s'), 1)} | {fmt(a.get('errors_kill_to_detect'))} | "
                     f"{fmt(a.get('errors_detect_to_up'))} (of {fmt(a.get('ops_detect_to_up'))}) | "
                     f"{fmt(ms(a.get('baseline_p99_us')), 2)} | {fmt(a.get('recovery_after_detect_s'), 1)} | "
                     f"{fmt(ms(a.get('p99_max_detect_to_up_us')), 2)} | "
                     f"{fmt(ms(a.get('return_p99_max_us')), 2)} ({a.get('return_p99_max_ratio', '–')}×) | "
                     f"{fmt(mib(a.get('hints_peak_bytes', 0)) and mib(a.get('hints_peak_bytes', 0)) * 1024)} | "
                     f"{fmt(a.get('replay_s'), 1)} | {replay} |")
        timeline = ", ".join(f"{label} {a[key]} s" for label, key in (
            ("killed", "kill_s"), ("detected", "detect_s"), ("restarted", "restart_s"),
            ("listening again", "restart_ready_s"), ("seen up", "up_s"),
            ("hints drained", "hints_drained_s")) if a.get(key) is not None)
        notes.append(f"- **{system}, {level}**: timeline (seconds into the run, the charts' "
                     f"x axis): {timeline or a.get('note', '–')}. Detection: {a.get('detect_method', '–')}. "
                     f"Latency series: {a.get('p99_series', '–')}; baseline from "
                     f"{a.get('baseline_seconds', '–')} seconds, of which "
                     f"{a.get('baseline_seconds_over_threshold', '–')} were themselves over 1.2×.")
        if system == "hayate":
            notes.append(f"  Cross-check: a survivor's /status (polled once a second) showed the "
                         f"victim down {fmt(a.get('status_poll_down_after_kill_s'), 1)} s after "
                         f"the kill; its log, {fmt(a.get('detect_after_kill_s'), 1)} s.")
            notes.append(f"  hayate's counters on the survivors over the run: hints written "
                         f"{fmt(a.get('hints_written'))}, replayed {fmt(a.get('hints_replayed'))}, "
                         f"dropped {fmt(a.get('hints_dropped'))}; Unavailable "
                         f"{fmt(a.get('coordinator_unavailable'))}, write timeouts "
                         f"{fmt(a.get('coordinator_write_timeouts'))}, read timeouts "
                         f"{fmt(a.get('coordinator_read_timeouts'))}.")
            goals = []
            share = k.get("victim_replica_share")
            if a.get("errors_detect_to_up") is not None and level in ("TWO", "ALL") and a.get("ops_detect_to_up"):
                goals.append(f"no client errors once marked down: not attainable at {level} with "
                             f"RF 2 (see below); {a['errors_detect_to_up'] / a['ops_detect_to_up']:.1%} "
                             f"of operations failed, against the victim's replica share of the "
                             f"ring {fmt(share and share * 100, 1)}%")
            elif a.get("errors_detect_to_up") is not None:
                goals.append(f"no client errors once marked down: {a['errors_detect_to_up']} "
                             f"errors → {verdict(a['errors_detect_to_up'] == 0)}")
            if a.get("detect_s") is not None:
                rec = a.get("recovery_after_detect_s")
                goals.append("p99 back within 1.2× within 10 s of detection: "
                             + (f"{rec} s → {verdict(rec <= 10)}" if rec is not None
                                else "never while measured → **missed**"))
            if level in ("TWO", "ALL"):
                goals.append(f"hint replay: not measured at {level} (refused writes leave no hints)")
            elif a.get("replay_p99_max_ratio") is not None:
                goals.append(f"hint replay keeps p99 under 2×: {a['replay_p99_max_ratio']}× → "
                             f"{verdict(a['replay_p99_max_ratio'] <= 2)}")
            elif a.get("hints_peak_bytes"):
                goals.append("hint replay: the hints did not drain within the run → not measured")
            notes.append("  Goals: " + "; ".join(goals) + ".")
        elif a.get("ops_detect_to_up") and level in ("TWO", "ALL"):
            share = k.get("victim_replica_share")
            notes.append(f"  {a['errors_detect_to_up'] / a['ops_detect_to_up']:.1%} of operations "
                         f"failed while the node was down; its replica share of the ring is "
                         f"{fmt(share and share * 100, 1)}%.")
        if a.get("log_events"):
            e = a["log_events"]
            notes.append(f"  The survivors' logs: down at {len({x['node'] for x in e['down']})} "
                         f"survivor(s), up at {len({x['node'] for x in e['up']})}, "
                         f"{len(e['hints_finished'])} hint deliveries finished.")
        if a.get("replay_p99_series_ms"):
            notes.append(f"  p99 of each second of the replay (ms): "
                         f"{', '.join(str(v) for v in a['replay_p99_series_ms'])}.")
        if a.get("return_seconds"):
            notes.append("  The seconds from the restart on (second: operations, failed, p99 ms): "
                         + "; ".join(f"{r['s']}: {r['ops']:,}, {r['failed']:,}, {r['p99_ms']}"
                                     for r in a["return_seconds"]) + ".")
    lines += [""] + notes + ["",
              "At consistency TWO with replication factor 2, a key whose two replicas include the "
              "dead node cannot be read or written: both systems must refuse those requests "
              "(Unavailable once the node is marked down, a timeout before), about two thirds "
              "of the keys on 3 nodes, and write no hints for the refused writes. So the kill "
              "test also runs at ONE, where every key has a live replica: there a request should "
              "not fail once the node is known down, and the writes the dead node misses become "
              "hints. The hint replay measured is what the down period produced at the test's "
              "write rate, not an hour's worth: an hour of hints was not produced on this "
              "machine in a sitting, and nothing is extrapolated from the replay measured.", ""]
    return lines


def timeline_svg(path, level, runs):
    """A chart of the node-failure test: p99 of each second (log scale) per system, with the
    kill, detection, restart, return and drained hints marked; `hayate-bench report` draws no
    marks. `runs`: [(system, seconds, analysis)]."""
    width, height, left, right, top, bottom = 960, 420, 70, 20, 40, 50
    colours = {"cassandra": "#1f77b4", "hayate": "#d62728"}
    points = [(s, e) for _, seconds, a in runs for s, e in seconds.items()]
    key = lambda a: "intended_p99_us" if "Intended" in a.get("p99_series", "") else "p99_us"  # noqa: E731
    values = [e.get(key(a)) for _, seconds, a in runs for e in seconds.values() if e.get(key(a))]
    if not points or not values:
        return False
    x_max = max(s for s, _ in points)
    y_lo = math.floor(math.log10(max(min(values), 1) / 1000))
    y_hi = math.ceil(math.log10(max(values) / 1000))
    y_hi = max(y_hi, y_lo + 1)

    def x(second):
        return left + (width - left - right) * second / max(x_max, 1)

    def y(us):
        frac = (math.log10(us / 1000) - y_lo) / (y_hi - y_lo)
        return top + (height - top - bottom) * (1 - frac)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Node-failure test at {level}: p99 of each '
           f'second (ms, log scale); marks: kill, down (detected), restart, up, hints drained</text>']
    for decade in range(y_lo, y_hi + 1):
        yy = y(10 ** decade * 1000)
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{width - right}" y2="{yy:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{10 ** decade:g}</text>')
    step = max(10, round(x_max / 10, -1))
    for second in range(0, x_max + 1, int(step)):
        out.append(f'<text x="{x(second):.1f}" y="{height - bottom + 18}" text-anchor="middle">{second}</text>')
    out.append(f'<text x="{(left + width) / 2}" y="{height - 10}" text-anchor="middle">seconds into the run</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" '
               'fill="none" stroke="#888"/>')
    for row, (system, seconds, a) in enumerate(runs):
        colour = colours.get(system, "#333")
        line = " ".join(f"{x(s):.1f},{y(e[key(a)]):.1f}" for s, e in sorted(seconds.items())
                        if e.get(key(a)))
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        out.append(f'<text x="{width - right - 90 * (row + 1)}" y="{top - 6}" fill="{colour}">'
                   f'— {system}</text>')
        # The first system's marks are labelled along the top, the second's along the bottom,
        # alternating between two rows so that close marks stay readable.
        for index, (label, field) in enumerate((
                ("kill", "kill_s"), ("down", "detect_s"), ("restart", "restart_s"),
                ("up", "up_s"), ("drained", "hints_drained_s"))):
            if a.get(field) is None:
                continue
            xx = x(a[field])
            ty = (top + 12 + 11 * (index % 2)) if row == 0 else (height - bottom - 6 - 11 * (index % 2))
            out.append(f'<line x1="{xx:.1f}" y1="{top}" x2="{xx:.1f}" y2="{height - bottom}" '
                       f'stroke="{colour}" stroke-dasharray="4,3" opacity="0.7"/>')
            out.append(f'<text x="{xx + 2:.1f}" y="{ty}" fill="{colour}" '
                       f'font-size="10">{label}</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    return True


def charts(out, args, state):
    """hayate-bench report, if it is built (the placeholder exits 2: skipped)."""
    program = REPO / "target" / "release" / "hayate-bench"
    if not program.exists():
        return "hayate-bench is not built: no charts"
    notes = []
    groups = []
    for topology in state["topologies"]:
        prefix = "" if topology == "single" else f"{topology}-"
        equal = [phase for _, _, phase in equal_phases(args)]
        for name in ["load", *args.workloads, *equal]:
            groups.append((f"{prefix}{name}", [out / f"{prefix}{system}-{name}" for system in args.systems]))
        if topology == "cluster" and args.kill_test:
            for level in args.kill_consistency:
                name = f"kill-{level.lower()}"
                groups.append((f"{prefix}{name}", [out / f"{prefix}{system}-{name}" for system in args.systems]))
    for chart, candidates in groups:
        dirs = [d for d in candidates if d.exists()]
        if not dirs:
            continue
        argv = [program, "report", "-o", out / "charts" / chart, "--title", f"{chart}", *dirs]
        if len(dirs) > 1:
            argv[4:4] = ["--baseline", "cassandra"]
        COMMANDS.append(shlex.join(str(a) for a in argv))
        result = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        if result.returncode == 2 and "not built yet" in result.stderr:
            return "`hayate-bench report` is not built yet (it exited 2): no charts"
        if result.returncode != 0:
            notes.append(f"{chart}: hayate-bench report failed ({result.returncode}): "
                         f"{result.stderr.strip()[-300:]}")
        else:
            notes.append(f"{chart}: charts/{chart}/")
    marked = []
    if args.kill_test and "cluster" in state["topologies"]:
        for level in args.kill_consistency:
            runs = []
            for system, record in state["topologies"]["cluster"]["systems"].items():
                k = record.get("kill", {}).get(level)
                rundir = out / f"cluster-{system}-kill-{level.lower()}"
                if k and rundir.exists():
                    runs.append((system, client_series(rundir)[0], k.get("analysis", {})))
            target = out / "charts" / f"cluster-kill-{level.lower()}" / "timeline.svg"
            if runs and timeline_svg(target, level, runs):
                marked.append(f"charts/cluster-kill-{level.lower()}/timeline.svg")
    text = "; ".join(notes)
    if marked:
        text += (". `hayate-bench report` draws no marks, so the node-failure test also has its "
                 "own chart, p99 per second with the kill, detection, restart, return and "
                 f"drained hints marked: {', '.join(marked)} (the times are also in the section "
                 "above)")
    return text


# ---- main ----------------------------------------------------------------------------------

def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--name", default=None, help="results folder suffix (default: full or quick)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes to check the pipeline in a few minutes; overrides the sizes")
    # 4 million rows are about 4.6 GB of SSTables (6 GB on disk with the commit log), against
    # 2 GiB of memory for the heap, off-heap structures and page cache together. On the shared
    # 2-core machine this was sized on, Cassandra loaded 1 million rows in 87 s (11,500 rows/s)
    # and 200,000 at 7,700 rows/s with hayate-bench as the client: 6-9 minutes for 4 million.
    parser.add_argument("--records", type=int, default=4_000_000,
                        help="rows loaded (about 1.1 KB each on the wire)")
    parser.add_argument("--memory", default="2GiB",
                        help="memory limit of each server (cgroup), page cache included")
    parser.add_argument("--hayate-device-gib", type=int, default=None,
                        help="each hayate node's device size; by default three times the node's "
                             "share of the loaded rows (twice that with LWT, whose Paxos state "
                             "holds a copy of each row's last update), and at least 8 GiB with "
                             "lwt-insert, which adds rows; Cassandra's data folder has the whole disk")
    parser.add_argument("--run-seconds", type=int, default=300, help="length of each workload run")
    parser.add_argument("--workloads", default="ref,b",
                        help=f"comma-separated, from {','.join(WORKLOADS)}; the first also drives the sweep")
    parser.add_argument("--threads", type=int, default=None,
                        help="client threads for the runs; without it a sweep chooses")
    parser.add_argument("--sweep", default="8,16,32,64,128", help="thread counts the sweep tries")
    parser.add_argument("--sweep-seconds", type=int, default=30, help="length of each sweep step")
    parser.add_argument("--load-threads", type=int, default=None,
                        help="client threads for the whole load; without it the load's first "
                             "rows sweep --sweep in steps and the rest load at the best count")
    parser.add_argument("--load-sweep-rows", type=int, default=None,
                        help="rows per step of the load's sweep (default: --records / 16)")
    parser.add_argument("--client", choices=["hayate-bench", "ycsb"], default="hayate-bench")
    parser.add_argument("--target", type=int, default=None,
                        help="throttle every run phase to this many ops/s (the client's -target)")
    parser.add_argument("--durability", choices=("default", "device"), default="default",
                        help="default: both systems' defaults (neither loses an acknowledged write "
                             "in a process crash; Cassandra up to 10 s and hayate up to 1 s in a "
                             "power failure); device: acknowledged once synced (hayate "
                             "commit_to_device, Cassandra --commitlog-sync)")
    parser.add_argument("--commitlog-sync", choices=("batch", "group"), default="batch",
                        help="Cassandra's commit log mode with --durability device: batch (a sync "
                             "as soon as a write waits, shared by every write waiting, as hayate's "
                             "group commit) or group (a sync at most every 15 ms)")
    parser.add_argument("--timeline-s", type=int, default=10,
                        help="seconds between the samples of each run's timeline.csv")
    parser.add_argument("--equal-load", default="0.7",
                        help="after the unthrottled runs, run each workload again on every system "
                             "throttled to this share of the first system's throughput, to compare "
                             "latency at equal load; a comma list (0.3,0.7) runs one phase per "
                             "share, in order (0 skips it)")
    parser.add_argument("--equal-threads", type=int, default=None,
                        help="client threads of the runs at equal load on every system (default: "
                             "the fewest in the first system's sweep whose throughput reached the "
                             f"target ÷ {EQUAL_HEADROOM})")
    parser.add_argument("--equal-seconds", type=int, default=None,
                        help="length of each run at equal load (default: --run-seconds)")
    parser.add_argument("--systems", default="cassandra,hayate",
                        help="which servers, in order; the sweep runs on the first")
    parser.add_argument("--host", default="127.0.0.1",
                        help="loopback address both servers bind (e.g. 127.0.0.21 beside other servers)")
    parser.add_argument("--port", type=int, default=9042, help="CQL port of both servers")
    parser.add_argument("--cassandra-storage-port", type=int, default=7000)
    parser.add_argument("--hayate-metrics-port", type=int, default=9180)
    parser.add_argument("--topology", default="single",
                        help="comma list, run in order: single (one node, RF 1, ONE), cluster "
                             "(3 nodes on --cluster-hosts, RF 2, TWO, then the node-failure test)")
    parser.add_argument("--cluster-hosts", default="127.0.0.1,127.0.0.2,127.0.0.3",
                        help="the cluster's nodes, one loopback address each, same ports")
    parser.add_argument("--cluster-rf", type=int, default=2, help="the cluster keyspace's replication factor")
    parser.add_argument("--cluster-consistency", default="TWO",
                        help="read and write consistency on the cluster (the reference: 2)")
    parser.add_argument("--hayate-storage-port", type=int, default=7000,
                        help="hayate's internode port on each cluster node")
    parser.add_argument("--read-page-cache", action="store_true",
                        help="hayate reads records through the page cache (read_page_cache = "
                             "true), so that it too uses the memory its cgroup leaves for cached "
                             "pages; off (hayate's default) unless given")
    parser.add_argument("--delta-buffer", default=None,
                        help="hayate's delta_buffer (RAM for updates written without reading "
                             "the row); \"0\" makes every update read its row first")
    parser.add_argument("--no-kill-test", dest="kill_test", action="store_false",
                        help="skip the cluster's node-failure test")
    parser.add_argument("--kill-consistency", default=None,
                        help="consistency levels the node-failure test runs at, in order "
                             "(default TWO,ONE; ONE with --quick)")
    parser.add_argument("--kill-load", type=float, default=0.6,
                        help="the node-failure test's -target, as a fraction of the throughput "
                             "the system measured on the first workload")
    parser.add_argument("--kill-before-s", type=int, default=60, help="load before the kill")
    parser.add_argument("--kill-down-s", type=int, default=120,
                        help="from the kill to the restart (hints accumulate meanwhile)")
    parser.add_argument("--kill-return-s", type=int, default=180,
                        help="load after the restart (the hint replay and the recovery)")
    parser.add_argument("--kill-node", type=int, default=3,
                        help="which of --cluster-hosts is killed (1-based; not the first, the "
                             "drivers' first contact point)")
    parser.add_argument("--warmup-seconds", type=int, default=120,
                        help="after the load (before the sweep and the runs), run the first "
                             "workload unmeasured for at least this long on each system; 0 skips it")
    parser.add_argument("--warmup-max-seconds", type=int, default=900,
                        help="hayate's warm-up goes on while its delta buffer still grows, up to "
                             "this long")
    parser.add_argument("--warmup-step-s", type=int, default=30,
                        help="the warm-up runs in steps of this long, checked after each")
    parser.add_argument("--warmup-threads", type=int, default=32,
                        help="the warm-up's client threads when the sweep chooses the run's "
                             "(otherwise --threads)")
    parser.add_argument("--settle-quiet-s", type=int, default=30,
                        help="Cassandra counts as settled after this long with no compaction")
    parser.add_argument("--settle-timeout-s", type=int, default=1800)
    parser.add_argument("--profile", action="store_true",
                        help="perf record the hayate server (a cluster's first node) for 20 s "
                             "of its first run phase, in each topology")
    parser.add_argument("--allow-unlimited", action="store_true",
                        help="without a writable cgroup, run with no memory limit (recorded) instead of refusing")
    parser.add_argument("--keep-data", action="store_true", help="keep the servers' data folders")
    parser.add_argument("--no-build", action="store_true", help="skip cargo build --release")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="run from a work tree with uncommitted changes to tracked files "
                             "(the results then say so at the top)")
    parser.add_argument("--work-dir", default=str(REPO / "target" / "bench-work"),
                        help="where the servers' data goes (a real disk, not tmpfs)")
    parser.add_argument("--results-dir", default=str(BENCH / "results"))
    args = parser.parse_args()

    if args.quick:
        args.records, args.run_seconds, args.sweep_seconds = 20_000, 20, 8
        args.sweep, args.settle_quiet_s = "4,8", 10
        args.warmup_seconds, args.warmup_step_s, args.warmup_max_seconds = 10, 5, 20
        args.warmup_threads = 8
        args.kill_before_s, args.kill_down_s, args.kill_return_s = 15, 20, 40
    args.name = args.name or ("quick" if args.quick else "full")
    args.memory_bytes = parse_size(args.memory)
    args.workloads = args.workloads.split(",")
    args.systems = args.systems.split(",")
    args.sweep = [int(t) for t in args.sweep.split(",")]
    args.equal_load = [float(share) for share in args.equal_load.split(",")]
    if any(not 0 <= share <= 1 for share in args.equal_load):
        parser.error("--equal-load: each share is a fraction from 0 to 1")
    args.topology = args.topology.split(",")
    args.cluster_hosts = args.cluster_hosts.split(",")
    args.kill_consistency = args.kill_consistency or ("ONE" if args.quick else "TWO,ONE")
    args.kill_consistency = [level.upper() for level in args.kill_consistency.split(",") if level]
    args.cluster_consistency = args.cluster_consistency.upper()
    for name in args.topology:
        if name not in ("single", "cluster"):
            parser.error(f"unknown topology {name!r}; known: single, cluster")
    if len(set(args.topology)) != len(args.topology):
        parser.error("--topology names a topology twice")
    args.load_sweep_rows = args.load_sweep_rows or max(1, args.records // 16)
    if not args.load_threads and not 1 <= args.load_sweep_rows <= args.records // 2:
        parser.error("--load-sweep-rows must be from 1 to half of --records (the load's sweep "
                     "takes at most half the rows)")
    if args.warmup_seconds and not 0 < args.warmup_step_s <= args.warmup_seconds <= args.warmup_max_seconds:
        parser.error("the warm-up needs 0 < --warmup-step-s <= --warmup-seconds <= "
                     "--warmup-max-seconds")
    if len(args.cluster_hosts) < 2 or not all(h.startswith("127.") for h in args.cluster_hosts):
        parser.error("--cluster-hosts must be two or more loopback addresses (127.x.x.x)")
    if not 1 <= args.cluster_rf <= len(args.cluster_hosts):
        parser.error("--cluster-rf must be from 1 to the number of --cluster-hosts")
    if not 1 <= args.kill_node <= len(args.cluster_hosts):
        parser.error("--kill-node must name one of --cluster-hosts (1-based)")
    if not 0 < args.kill_load <= 1:
        parser.error("--kill-load is a fraction of the measured throughput: (0, 1]")
    for name in args.workloads:
        if name not in WORKLOADS:
            parser.error(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
        if name == "index" and args.workloads[0] != "index":
            parser.error("the index workload must come first in --workloads: the load writes its column")
        if name == "counter" and args.workloads != ["counter"]:
            parser.error("the counter workload needs a sitting of its own: its table holds counters only")
        if name == "lwt-contended" and args.workloads[0] == name:
            parser.error("lwt-contended cannot come first in --workloads: the load would write its 10 keys only")
    for system in args.systems:
        if system not in ("cassandra", "hayate"):
            parser.error(f"unknown system {system!r}")
    if not args.host.startswith("127."):
        parser.error("--host must be a loopback address (127.x.x.x)")
    return args


def write_workload(name, path):
    """The workload file both clients read: YCSB's own from the repository's workloads/ when it
    is there (the reference's `ref` is workloada with the distribution made uniform), else the
    same properties from WORKLOADS."""
    shipped = REPO / "workloads" / ("workloada" if name == "ref" else f"workload{name}")
    if shipped.exists():
        text = shipped.read_text()
        if name == "ref":
            text, count = re.subn(r"(?m)^requestdistribution=zipfian$",
                                  "requestdistribution=uniform", text)
            assert count == 1, f"{shipped} no longer sets requestdistribution=zipfian once"
        source = f"workloads/{shipped.name}" + (" with requestdistribution=uniform"
                                                 if name == "ref" else ", as shipped")
        text = f"# {WORKLOADS[name][0]}\n# From the repository's {source}.\n{text}"
    else:
        text = f"# {WORKLOADS[name][0]}\n{WORKLOADS[name][1]}"
    path.write_text(text)
    return path


def on_sigterm(_signum, _frame):
    raise KeyboardInterrupt


def main():
    args = parse_args()
    # Named here, where it is checked: the build starts from this tree, and what happens to the
    # work tree while the sitting runs (an hour or more) does not change what ran.
    commit = git_commit()
    dirty = git_dirty()
    if dirty and not args.allow_dirty:
        raise SystemExit("compare.py: the work tree has uncommitted changes, so the results could "
                         "not name what ran; commit or stash them, or pass --allow-dirty:\n"
                         + dirty)
    date = datetime.date.today().isoformat()
    out = Path(args.results_dir) / f"{date}-{args.name}"
    if out.exists():
        out = Path(args.results_dir) / f"{date}-{args.name}-{datetime.datetime.now():%H%M%S}"
    out.mkdir(parents=True)
    workdir = Path(args.work_dir) / out.name
    workdir.mkdir(parents=True, exist_ok=True)
    log(f"results: {out}; data: {workdir}")

    if not args.no_build and ("hayate" in args.systems or args.client == "hayate-bench"):
        log("cargo build --release -p hayate-server -p hayate-bench")
        run(["cargo", "build", "--release", "-p", "hayate-server", "-p", "hayate-bench"], cwd=REPO)
    ensure_pyenv()
    if "cassandra" in args.systems:
        run([BENCH / "cassandra" / "install.sh"], record=False)
    if args.client == "ycsb":
        run([BENCH / "ycsb-java" / "install.sh"], record=False)

    (out / "workloads").mkdir()
    workload_files = {name: write_workload(name, out / "workloads" / name)
                      for name in args.workloads}

    env = environment(workdir, commit)
    # The commit the sitting started from (and the binaries just built from it) names hayate in
    # every table, whatever happens to the work tree meanwhile.
    state = {"commit": commit, "topologies": {name: {"threads": args.threads, "systems": {}}
                            for name in args.topology}}
    client = Client(args.client, args)
    # SIGTERM, as Ctrl-C, unwinds through the finally blocks, which stop the servers.
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for topology in args.topology:
            for system in args.systems:
                one_system(system, topology, client, args, out, workdir, workload_files, state)
        state["charts"] = charts(out, args, state)
    finally:
        write_results(out, args, state, env)
        if not args.keep_data:
            shutil.rmtree(workdir, ignore_errors=True)
    print((out / "results.md").read_text())


if __name__ == "__main__":
    main()
