#!/usr/bin/env python3
"""Runs the same YCSB workloads against Apache Cassandra and hayate in one sitting, under the
same memory limit, and writes the comparison table of the reference benchmark ("Aerospike and
Cassandra: Benchmarking for Real", Table 1) with server CPU per operation beside it.

    bench/compare.py                       # full size, about 45-60 minutes on 2 cores
    bench/compare.py --quick               # a few minutes: checks the pipeline, not the servers
    bench/compare.py --records 4000000 --memory 2GiB --run-seconds 300 --workloads ref,b

For each system in turn (Cassandra first): start it under the memory limit with fresh data,
create ycsb.usertable, load --records rows with the client's `load`, (Cassandra) wait for
compactions to settle, and run each workload for --run-seconds. The client thread count comes
from a sweep on the first system, as the reference chose its 800 threads: raise the threads
until throughput stops rising by more than 5%; both systems then run with that count.

Everything lands in bench/results/<date>-<name>/: results.md (the tables, the environment and
every command), each phase's run folder (the client's summary and, with hayate-bench, its time
series and HDR log), the servers' configuration and logs.

Python 3.11 standard library only. Linux only (/proc, cgroups).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CACHE = Path(os.environ.get("HAYATE_BENCH_CACHE", Path.home() / ".cache" / "hayate-bench"))
PYENV = CACHE / "pyenv"
CQLSH_VERSION = "6.2.2"
CLK_TCK = os.sysconf("SC_CLK_TCK")

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


def proc_io(pid):
    """Bytes the process made the block layer read and write (direct I/O included)."""
    io = {}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        name, value = line.split(":")
        io[name] = int(value)
    return io.get("read_bytes", 0), io.get("write_bytes", 0)


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
        self.pid = int((rundir / "server.pid").read_text())
        group = (rundir / "cgroup").read_text().strip()
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
        read_bytes, write_bytes = proc_io(self.pid)
        return {"cpu_s": proc_cpu_s(self.pid), "read_bytes": read_bytes,
                "write_bytes": write_bytes, "t": time.monotonic()}

    def end(self, mark):
        read_bytes, write_bytes = proc_io(self.pid)
        figures = {
            "server_cpu_s": round(proc_cpu_s(self.pid) - mark["cpu_s"], 2),
            "server_read_bytes": read_bytes - mark["read_bytes"],
            "server_write_bytes": write_bytes - mark["write_bytes"],
            "server_peak_rss_bytes": proc_hwm_bytes(self.pid),
            "wall_s": round(time.monotonic() - mark["t"], 1),
        }
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
        data = self.rundir / "data"
        allocated = int(run(["du", "-s", "-B1", data], record=False).split()[0])
        figures = {"disk_allocated_bytes": allocated}
        if self.system == "hayate":
            metrics = hayate_metrics(self.host, int(self.settings()["metrics_port"]))
            if metrics:
                block = metrics.get("hayate_storage_block_size_bytes", 0)
                figures["hayate_used_bytes"] = int(metrics.get("hayate_storage_used_blocks", 0) * block)
                figures["hayate_live_bytes"] = int(metrics.get("hayate_storage_live_bytes", 0))
                figures["hayate_device_bytes"] = int(
                    metrics.get("hayate_storage_total_blocks", 0) * block)
        return figures


def hayate_metrics(host, port):
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
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


# ---- the client ----------------------------------------------------------------------------

def parse_summary(text):
    """YCSB's summary lines, `[SECTION], Metric, value`, as {(section, metric): value}."""
    summary = {}
    for line in text.splitlines():
        match = re.match(r"\[([A-Z_-]+)\], ([^,]+), (.+)$", line.strip())
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

    def command(self, phase, workload_file, server, threads, rundir, label, extra):
        argv = [*self.program, phase, self.binding, "-P", workload_file,
                "-p", f"hosts={server.host}", "-p", f"port={server.port}",
                "-p", f"recordcount={self.args.records}",
                # One replica, so ONE is the only level (the reference used 2 of 2 replicas).
                "-p", "cassandra.readconsistencylevel=ONE",
                "-p", "cassandra.writeconsistencylevel=ONE",
                "-threads", str(threads), "-s",
                "-p", f"rundir={rundir}", "-p", f"label={label}"]
        if self.kind == "ycsb":
            # Java YCSB: an HDR log per operation kind, and a status line every second on stderr.
            argv += ["-p", "hdrhistogram.fileoutput=true",
                     "-p", f"hdrhistogram.output.path={rundir}/",
                     "-p", "status.interval=1"]
        if phase == "run" and self.args.target:
            # Throttled runs, for comparing clients at the same offered load: YCSB's -target.
            argv += ["-target", str(self.args.target)]
        for key, value in extra.items():
            argv += ["-p", f"{key}={value}"]
        return argv

    def run(self, phase, workload_file, server, threads, rundir, label, extra, profile=None):
        """Runs one client phase against a server; returns its summary and the CPU figures."""
        rundir.mkdir(parents=True, exist_ok=True)
        argv = self.command(phase, workload_file, server, threads, rundir, label, extra)
        COMMANDS.append(shlex.join(str(a) for a in argv))
        log(f"{label}: {phase} {workload_file.name}, {threads} threads -> {rundir.name}")
        mark = server.begin()
        with open(rundir / "client-stdout.txt", "w") as out, \
                open(rundir / "client-stderr.txt", "w") as err:
            process = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=err)
            try:
                if profile is not None:
                    profile(process)
                # wait4 rather than wait: the rusage is the client's CPU, all threads included.
                _, status, usage = os.wait4(process.pid, 0)
                process.returncode = os.waitstatus_to_exitcode(status)
            except BaseException:
                # Interrupted: the client must not outlive the sitting.
                process.kill()
                process.wait()
                raise
        figures = server.end(mark)
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
        figures.update({
            "phase": phase, "label": label, "threads": threads, "workload": workload_file.name,
            "operations": operations, "runtime_s": runtime_s, "throughput_ops": throughput,
            "errors": errors,
            "read_p95_us": summary.get(("READ", "95thPercentileLatency(us)")),
            "update_p95_us": summary.get(("UPDATE", "95thPercentileLatency(us)")),
            "insert_p95_us": summary.get(("INSERT", "95thPercentileLatency(us)")),
            "read_p99_us": summary.get(("READ", "99thPercentileLatency(us)")),
            "update_p99_us": summary.get(("UPDATE", "99thPercentileLatency(us)")),
            "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        })
        if operations:
            figures["server_cpu_us_per_op"] = round(figures["server_cpu_s"] * 1e6 / operations, 1)
            figures["client_cpu_us_per_op"] = round(figures["client_cpu_s"] * 1e6 / operations, 1)
            figures["server_read_bytes_per_op"] = round(figures["server_read_bytes"] / operations)
            figures["server_write_bytes_per_op"] = round(figures["server_write_bytes"] / operations)
        (rundir / "phase.json").write_text(json.dumps(figures, indent=2) + "\n")
        log(f"{label}: {throughput:,.0f} ops/s, server {figures.get('server_cpu_us_per_op')} "
            f"us/op, p95 read {figures['read_p95_us']} us, update {figures['update_p95_us']} us")
        return figures


# ---- the servers ---------------------------------------------------------------------------

def cqltool(server, *argv):
    return run([PYENV / "bin" / "python", BENCH / "lib" / "cqltool.py", server.host, server.port,
                *argv])


def ensure_pyenv():
    python = PYENV / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import cassandra"],
                                          capture_output=True).returncode == 0:
        return
    log(f"installing cqlsh {CQLSH_VERSION} (and the Python cassandra-driver) into {PYENV}")
    run([sys.executable, "-m", "venv", PYENV], record=False)
    run([PYENV / "bin" / "pip", "install", "-q", f"cqlsh=={CQLSH_VERSION}"], record=False)


def start_server(system, args, rundir):
    common = ["--host", args.host, "--cql-port", args.port, "--memory", args.memory_bytes]
    if args.allow_unlimited:
        common.append("--allow-unlimited")
    if system == "cassandra":
        argv = [BENCH / "cassandra" / "ctl.sh", "start", rundir, *common,
                "--storage-port", args.cassandra_storage_port]
    else:
        argv = [BENCH / "hayate-ctl.sh", "start", rundir, *common,
                "--metrics-port", args.hayate_metrics_port,
                "--device-size", f"{args.hayate_device_gib}GiB"]
    log(run(argv).strip())
    return Server(system, rundir, args.host, args.port)


def stop_server(server):
    script = BENCH / "cassandra" / "ctl.sh" if server.system == "cassandra" else BENCH / "hayate-ctl.sh"
    run([script, "stop", server.rundir])


def create_schema(server):
    compaction = (" WITH compaction = {'class': 'LeveledCompactionStrategy'}"
                  if server.system == "cassandra" else "")
    fields = ", ".join(f"field{i} varchar" for i in range(10))
    cqltool(server, "exec",
            "CREATE KEYSPACE ycsb WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}",
            f"CREATE TABLE ycsb.usertable (y_id varchar PRIMARY KEY, {fields}){compaction}")


def settle(server, args, why):
    if server.system != "cassandra":
        return None
    log(f"cassandra: waiting for compactions to settle ({why})")
    started = time.monotonic()
    result = json.loads(cqltool(server, "settle", "--quiet-s", args.settle_quiet_s,
                                "--timeout-s", args.settle_timeout_s).strip().splitlines()[-1])
    result["why"] = why
    result["total_s"] = round(time.monotonic() - started, 1)
    log(f"cassandra: settled={result['settled']} after {result['waited_s']} s")
    return result


# ---- the sitting ---------------------------------------------------------------------------

def sweep_threads(client, server, args, out, workload_file):
    """The reference's client tuning: raise the thread count until throughput stops rising by
    more than 5%; the last count that still raised it is the one both systems run with."""
    points = []
    chosen = None
    for threads in args.sweep:
        figures = client.run("run", workload_file, server, threads,
                             out / f"{server.system}-sweep-t{threads}",
                             f"{server.system}-sweep-t{threads}",
                             {"operationcount": 2_000_000_000,
                              "maxexecutiontime": args.sweep_seconds})
        points.append({"threads": threads, "throughput_ops": figures["throughput_ops"],
                       "read_p95_us": figures["read_p95_us"],
                       "update_p95_us": figures["update_p95_us"]})
        if chosen is not None and figures["throughput_ops"] <= chosen[1] * 1.05:
            break
        chosen = (threads, figures["throughput_ops"])
    return chosen[0], points


def one_system(system, client, args, out, workdir, workload_files, state):
    rundir = workdir / system
    if rundir.exists():
        shutil.rmtree(rundir)
    server = start_server(system, args, rundir)
    record = {"system": system, "settles": [], "phases": {}}
    state["systems"][system] = record
    try:
        record["settings"] = server.settings()
        record["cgroup"] = str(server.cgroup) if server.cgroup else None
        record["version"] = (cqltool(server, "version").strip() if system == "cassandra"
                             else git_commit())
        create_schema(server)
        record["phases"]["load"] = client.run(
            "load", workload_files[args.workloads[0]], server, args.load_threads,
            out / f"{system}-load", system, {})
        record["disk_after_load"] = server.disk_bytes()
        if system == "cassandra":
            record["settles"].append(settle(server, args, "after the load"))
            record["disk_after_settle"] = server.disk_bytes()
        if state["threads"] is None:
            threads, points = sweep_threads(client, server, args, out,
                                            workload_files[args.workloads[0]])
            state["threads"] = threads
            state["sweep"] = {"system": system, "seconds": args.sweep_seconds, "points": points,
                              "chosen": threads}
            log(f"thread sweep on {system}: {threads} threads")
            if system == "cassandra":
                record["settles"].append(settle(server, args, "after the thread sweep"))
        for index, name in enumerate(args.workloads):
            if system == "cassandra" and index > 0:
                record["settles"].append(settle(server, args, f"before workload {name}"))
            record.setdefault("cache_drops", []).append(server.drop_cache())
            profile = None
            if args.profile and system == "hayate" and index == 0:
                profile = lambda process: start_profile(server, out, args)  # noqa: E731
            record["phases"][name] = client.run(
                "run", workload_files[name], server, state["threads"], out / f"{system}-{name}",
                system, {"operationcount": 2_000_000_000, "maxexecutiontime": args.run_seconds},
                profile=profile)
            if profile is not None:
                finish_profile(out)
        record["disk_at_end"] = server.disk_bytes()
    finally:
        stop_server(server)
        logs = rundir / "logs"
        if logs.exists():
            shutil.copytree(logs, out / f"{system}-server-logs", dirs_exist_ok=True)
        for name in ("conf/cassandra.yaml", "conf/jvm-options", "hayate.toml", "settings.env"):
            if (rundir / name).exists():
                (out / f"{system}-server-config").mkdir(exist_ok=True)
                shutil.copy(rundir / name, out / f"{system}-server-config" / Path(name).name)
        if not args.keep_data:
            shutil.rmtree(rundir, ignore_errors=True)


# ---- profiling (optional) ------------------------------------------------------------------

PROFILE = {}


def start_profile(server, out, args):
    """perf record of the hayate server for 20 s, starting 10 s into the run phase."""
    if shutil.which("perf") is None:
        PROFILE["note"] = "perf is not installed: no profile"
        return
    delay_s = min(10, max(0, args.run_seconds - 25))
    data = out / "hayate-perf.data"
    argv = ["sh", "-c", f"sleep {delay_s}; exec perf record -F 499 -g -p {server.pid} "
            f"-o {data} -- sleep 20"]
    COMMANDS.append(shlex.join(argv))
    PROFILE["process"] = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                          stderr=open(out / "hayate-perf.log", "w"))
    PROFILE["data"] = data


def finish_profile(out):
    process = PROFILE.get("process")
    if process is None:
        return
    process.wait()
    data = PROFILE["data"]
    if not data.exists():
        PROFILE["note"] = "perf record wrote nothing; see hayate-perf.log"
        return
    # The top entries, flat (self time per thread, library and symbol), then by caller.
    flat = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                           "--sort", "comm,dso,symbol", "--percent-limit", "0.5"],
                          capture_output=True, text=True)
    (out / "hayate-perf-report.txt").write_text(flat.stdout)
    tree = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children",
                           "--percent-limit", "2"], capture_output=True, text=True)
    (out / "hayate-perf-callers.txt").write_text(tree.stdout)
    PROFILE["note"] = ("perf sampled the hayate server at 499 Hz with call graphs for 20 s of "
                       "its first workload, whose figures carry that cost. "
                       "hayate-perf-report.txt: `perf report --stdio --no-children -g none` "
                       "(entries >= 0.5%); hayate-perf-callers.txt: with call graphs (>= 2%)")
    collapse = shutil.which("inferno-collapse-perf")
    flamegraph = shutil.which("inferno-flamegraph")
    if collapse and flamegraph:
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True)
        folded = subprocess.run([collapse], input=script.stdout, capture_output=True, text=True)
        (out / "hayate-perf.folded").write_text(folded.stdout)
        svg = subprocess.run([flamegraph], input=folded.stdout, capture_output=True, text=True)
        (out / "hayate-flamegraph.svg").write_text(svg.stdout)
        PROFILE["note"] += "; hayate-flamegraph.svg (inferno)"
    else:
        PROFILE["note"] += "; no flame graph (`cargo install inferno` to get one)"
    data.unlink()


# ---- the environment and the report --------------------------------------------------------

def git_commit():
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def environment(workdir):
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
        "hayate_commit": git_commit(),
        "kernel": " ".join(platform.uname()[:3]),
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "ram": f"{mem_kib / 1048576:.1f} GiB",
        "disk": df.replace("\n", " | "),
        "cgroup": cgroup,
        "java": first(["java", "-version"]).replace("\n", " | "),
        "python": platform.python_version(),
    }


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


def write_results(out, args, state, env):
    systems = state["systems"]
    cass = systems.get("cassandra", {}).get("phases", {})
    hay = systems.get("hayate", {}).get("phases", {})
    name_of = {"cassandra": f"Cassandra {systems.get('cassandra', {}).get('version', '')}",
               "hayate": f"hayate {systems.get('hayate', {}).get('version', '')}"}
    lines = [f"# hayate vs Apache Cassandra: {out.name}", ""]
    unlimited = [system for system, record in systems.items()
                 if "settings" in record and not record.get("cgroup")]
    if unlimited:
        lines += [f"**WARNING: {', '.join(unlimited)} ran WITHOUT a memory limit (no writable "
                  "cgroup; --allow-unlimited): the page cache may have held the whole data set, "
                  "so these figures do not measure storage.**", ""]
    lines += [f"{args.records:,} records of 1 KB (10 fields x 100 B), each server in a "
              f"{mib(args.memory_bytes):,.0f} MiB memory cgroup, "
              f"{state['threads']} client threads, {args.run_seconds} s per workload, client "
              f"`{args.client}`, one node on {args.host}, replication factor 1, consistency ONE.",
              ""]
    for name in args.workloads:
        c, h = cass.get(name, {}), hay.get(name, {})
        lc, lh = cass.get("load", {}), hay.get("load", {})
        lines += [f"## Workload `{name}`: {WORKLOADS[name][0]}", "",
                  "| | throughput (ops/s) | p95 read (ms) | p95 update (ms) | insert rate (ops/s) |",
                  "|---|---:|---:|---:|---:|"]
        for system, row, load in (("cassandra", c, lc), ("hayate", h, lh)):
            if system in systems:
                lines.append(f"| {name_of[system]} | {fmt(row.get('throughput_ops'))} | "
                             f"{fmt(ms(row.get('read_p95_us')), 2)} | "
                             f"{fmt(ms(row.get('update_p95_us')), 2)} | "
                             f"{fmt(load.get('throughput_ops'))} |")
        lines.append(f"| hayate / Cassandra | {ratio(h.get('throughput_ops'), c.get('throughput_ops'))} | "
                     f"{ratio(c.get('read_p95_us'), h.get('read_p95_us'))} | "
                     f"{ratio(c.get('update_p95_us'), h.get('update_p95_us'))} | "
                     f"{ratio(lh.get('throughput_ops'), lc.get('throughput_ops'))} |")
        lines += ["", "Ratios as the reference's Table 1: throughput and insert rate hayate ÷ "
                  "Cassandra, latencies Cassandra ÷ hayate (higher is better for hayate).", ""]

    lines += ["## Cost per operation", "",
              "Server CPU is utime + stime of the server process (all threads, background work "
              "such as compaction or defragmentation included) from /proc/PID/stat between the "
              "phase's start and end, divided by the phase's operations; the client's is its "
              "rusage. Device bytes are the server's /proc/PID/io read_bytes and write_bytes. "
              "Peak memory: the server's VmHWM over the phase, and the cgroup's peak usage "
              "(page cache included).", "",
              "| system | phase | ops | ops/s | server CPU (us/op) | client CPU (us/op) | "
              "device read (B/op) | device write (B/op) | server peak RSS (MiB) | "
              "cgroup peak (MiB) | errors |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for system, record in systems.items():
        for phase, f in record.get("phases", {}).items():
            lines.append(f"| {system} | {phase} | {fmt(f.get('operations'))} | "
                         f"{fmt(f.get('throughput_ops'))} | {fmt(f.get('server_cpu_us_per_op'), 1)} | "
                         f"{fmt(f.get('client_cpu_us_per_op'), 1)} | "
                         f"{fmt(f.get('server_read_bytes_per_op'))} | "
                         f"{fmt(f.get('server_write_bytes_per_op'))} | "
                         f"{fmt(mib(f.get('server_peak_rss_bytes')))} | "
                         f"{fmt(mib(f.get('cgroup_peak_bytes')))} | {fmt(f.get('errors'))} |")
    lines.append("")

    lines += ["## Disk", "", "| system | when | allocated on disk (MiB) | engine's figure |",
              "|---|---|---:|---|"]
    for system, record in systems.items():
        for when in ("disk_after_load", "disk_after_settle", "disk_at_end"):
            d = record.get(when)
            if not d:
                continue
            engine = ""
            if "hayate_used_bytes" in d:
                engine = (f"used blocks {fmt(mib(d['hayate_used_bytes']))} MiB, live "
                          f"{fmt(mib(d['hayate_live_bytes']))} MiB of a "
                          f"{fmt(mib(d['hayate_device_bytes']))} MiB preallocated device")
            lines.append(f"| {system} | {when.removeprefix('disk_').replace('_', ' ')} | "
                         f"{fmt(mib(d['disk_allocated_bytes']))} | {engine} |")
    lines += ["", "Cassandra's figure counts SSTables and the commit log; hayate's device file is "
              "preallocated, so its allocated size is the device size and the engine's used "
              "blocks tell what the data takes.", ""]

    if state.get("sweep"):
        sweep = state["sweep"]
        lines += ["## Thread sweep", "",
                  f"On {sweep['system']}, workload `{args.workloads[0]}`, {sweep['seconds']} s each; "
                  f"the count stops rising once throughput gains 5% or less. Chosen: "
                  f"**{sweep['chosen']}** threads.", "",
                  "| threads | ops/s | p95 read (ms) | p95 update (ms) |", "|---:|---:|---:|---:|"]
        for p in sweep["points"]:
            lines.append(f"| {p['threads']} | {fmt(p['throughput_ops'])} | "
                         f"{fmt(ms(p['read_p95_us']), 2)} | {fmt(ms(p['update_p95_us']), 2)} |")
        lines.append("")
    else:
        lines += [f"Threads: {state['threads']}, given with --threads (no sweep).", ""]

    settles = systems.get("cassandra", {}).get("settles", [])
    if settles:
        lines += ["## Cassandra compaction settling", "",
                  "Before each measured phase the harness waits until no compaction has run for "
                  f"{args.settle_quiet_s} s (system_views.sstable_tasks and the CompactionExecutor "
                  "pool), as the reference let compactions finish after its load.", ""]
        for s in settles:
            lines.append(f"- {s['why']}: {'settled' if s['settled'] else 'NOT settled (timeout)'} "
                         f"after {s['waited_s']} s")
        lines.append("")

    if PROFILE.get("note"):
        lines += ["## Profile", "", PROFILE["note"], ""]
    if state.get("charts"):
        lines += ["## Charts", "", state["charts"], ""]

    lines += ["## Environment", "", "| | |", "|---|---|"]
    for key, value in env.items():
        lines.append(f"| {key} | {str(value).replace('|', '/')} |")
    lines += ["", "## Settings", ""]
    for system, record in systems.items():
        settings = record.get("settings", {})
        lines.append(f"- **{system}**: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    lines += ["- Cassandra's full configuration: `cassandra-server-config/` (the yaml's comments "
              "give the reason for each setting; bench/README.md lists them); hayate's: "
              "`hayate-server-config/hayate.toml`.",
              "- Workload files: `workloads/`.",
              f"- Page cache: {', '.join(sorted(set(c for r in systems.values() for c in r.get('cache_drops', []))))} "
              "before each measured run.", ""]
    lines += ["## Commands", "", "```", shlex.join(sys.argv)] + COMMANDS + ["```", ""]
    (out / "results.md").write_text("\n".join(lines))
    (out / "results.json").write_text(json.dumps(
        {"args": {k: v for k, v in vars(args).items()}, "state": state, "environment": env},
        indent=2, default=str) + "\n")


def charts(out, args):
    """hayate-bench report, if it is built (the placeholder exits 2: skipped)."""
    program = REPO / "target" / "release" / "hayate-bench"
    if not program.exists():
        return "hayate-bench is not built: no charts"
    notes = []
    for name in ["load", *args.workloads]:
        dirs = [out / f"{system}-{name}" for system in args.systems if (out / f"{system}-{name}").exists()]
        if not dirs:
            continue
        argv = [program, "report", "-o", out / "charts" / name, "--baseline", "cassandra", *dirs]
        COMMANDS.append(shlex.join(str(a) for a in argv))
        result = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
        if result.returncode == 2:
            return "`hayate-bench report` is not built yet (it exited 2): no charts"
        if result.returncode != 0:
            notes.append(f"{name}: hayate-bench report failed ({result.returncode}): "
                         f"{result.stderr.strip()[-300:]}")
        else:
            notes.append(f"{name}: charts/{name}/")
    return "; ".join(notes)


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
    parser.add_argument("--run-seconds", type=int, default=300, help="length of each workload run")
    parser.add_argument("--workloads", default="ref,b",
                        help=f"comma-separated, from {','.join(WORKLOADS)}; the first also drives the sweep")
    parser.add_argument("--threads", type=int, default=None,
                        help="client threads for the runs; without it a sweep chooses")
    parser.add_argument("--sweep", default="8,16,32,64,128", help="thread counts the sweep tries")
    parser.add_argument("--sweep-seconds", type=int, default=30, help="length of each sweep step")
    parser.add_argument("--load-threads", type=int, default=32, help="client threads for the load")
    parser.add_argument("--client", choices=["hayate-bench", "ycsb"], default="hayate-bench")
    parser.add_argument("--target", type=int, default=None,
                        help="throttle every run phase to this many ops/s (the client's -target)")
    parser.add_argument("--systems", default="cassandra,hayate",
                        help="which servers, in order; the sweep runs on the first")
    parser.add_argument("--host", default="127.0.0.1",
                        help="loopback address both servers bind (e.g. 127.0.0.21 beside other servers)")
    parser.add_argument("--port", type=int, default=9042, help="CQL port of both servers")
    parser.add_argument("--cassandra-storage-port", type=int, default=7000)
    parser.add_argument("--hayate-metrics-port", type=int, default=9180)
    parser.add_argument("--settle-quiet-s", type=int, default=30,
                        help="Cassandra counts as settled after this long with no compaction")
    parser.add_argument("--settle-timeout-s", type=int, default=1800)
    parser.add_argument("--profile", action="store_true",
                        help="perf record the hayate server for 20 s of its first run phase")
    parser.add_argument("--allow-unlimited", action="store_true",
                        help="without a writable cgroup, run with no memory limit (recorded) instead of refusing")
    parser.add_argument("--keep-data", action="store_true", help="keep the servers' data folders")
    parser.add_argument("--no-build", action="store_true", help="skip cargo build --release")
    parser.add_argument("--work-dir", default=str(REPO / "target" / "bench-work"),
                        help="where the servers' data goes (a real disk, not tmpfs)")
    parser.add_argument("--results-dir", default=str(BENCH / "results"))
    args = parser.parse_args()

    if args.quick:
        args.records, args.run_seconds, args.sweep_seconds = 20_000, 20, 8
        args.sweep, args.load_threads, args.settle_quiet_s = "4,8", 8, 10
    args.name = args.name or ("quick" if args.quick else "full")
    args.memory_bytes = parse_size(args.memory)
    args.workloads = args.workloads.split(",")
    args.systems = args.systems.split(",")
    args.sweep = [int(t) for t in args.sweep.split(",")]
    for name in args.workloads:
        if name not in WORKLOADS:
            parser.error(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    for system in args.systems:
        if system not in ("cassandra", "hayate"):
            parser.error(f"unknown system {system!r}")
    if not args.host.startswith("127."):
        parser.error("--host must be a loopback address (127.x.x.x)")
    # The device holds the data set three times over: room for defragmentation's copies, as a
    # real device would have (Aerospike sizes devices for about 50% use).
    args.hayate_device_gib = max(1, -(-args.records * 1100 * 3 // (1 << 30)))
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

    env = environment(workdir)
    state = {"threads": args.threads, "systems": {}}
    client = Client(args.client, args)
    # SIGTERM, as Ctrl-C, unwinds through the finally blocks, which stop the servers.
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for system in args.systems:
            one_system(system, client, args, out, workdir, workload_files, state)
        state["charts"] = charts(out, args)
    finally:
        write_results(out, args, state, env)
        if not args.keep_data:
            shutil.rmtree(workdir, ignore_errors=True)
    print((out / "results.md").read_text())


if __name__ == "__main__":
    main()
