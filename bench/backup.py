#!/usr/bin/env python3
"""The backup benchmark ("day two", issue 35): snapshot time, write latency during snapshots,
backup, restore (against Cassandra's sstableloader) and cold start after SIGKILL, Apache
Cassandra 5.0 and hayate one after the other on one node each (bench/README.md, "The backup
benchmark", says what each step does and how each figure is taken).

    bench/backup.py --records 20000 --run-s 20 --max-seconds 6 --name backup-smoke   # minutes
    bench/backup.py --records 1000000                                                # a sitting

Only small summaries go to the results folder; the client's logs and the nodes' data stay in
--work-dir and are deleted.
"""

import argparse
import datetime
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the peer harness: nodes, the client, provenance)
import topology  # noqa: E402  (nodetool, Cassandra's tools, fio, the venv)
from compare import BENCH, COMMANDS, PYENV, REPO, log, run  # noqa: E402
from topology import cell, ratio_text as ratio  # noqa: E402

# The goals of issue 35.
GOAL_P99_RATIO = 1.2           # p99 around a snapshot at most 1.2x the other seconds'
GOAL_RESTORE_SPEEDUP = 3.0     # restore at least 3x faster than Cassandra's sstableloader
GOAL_COLD_START_SHARE = 0.5    # cold start reads at least 50% of the device's sequential rate
# The client's first seconds (connections, a JVM's compilation) are left out of "other seconds".
WARM_S = 5
# Aerospike's published cold-start figure, found with the search tool (see results.md).
AEROSPIKE_COLD = ("Aerospike's documentation of its Fast Restart: \"A node with over one billion "
                  "records will restart in about 10 seconds, as opposed to 40+ minutes\" (a cold "
                  "restart, which rebuilds the index by scanning the devices): at most about "
                  "417,000 records/s; no bytes per second or record size is given",
                  "https://docs.aerospike.com/server/operations/manage/aerospike/fast_start")
AEROSPIKE_EXAMPLE = ("a cold start log quoted by Aerospike's knowledge base: 231.8 million records "
                     "read (134.4 million unique) in 14 min 27 s, about 267,000 records/s",
                     "https://discuss.aerospike.com/t/why-does-cold-start-only-read-some-of-the-disk/3247")
# Cassandra's conf/logback-tools.xml, as bin/sstableloader passes it: warnings to stderr.
LOGBACK_TOOLS = ('<configuration><appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">'
                 '<target>System.err</target><encoder><pattern>%-5level %msg%n</pattern></encoder>'
                 '</appender><root level="WARN"><appender-ref ref="STDERR" /></root></configuration>')


def node_argv(system, args, topology_, host, rundir):
    """compare.py's ctl command with this benchmark's build, device size and (Cassandra) a local
    JMX port for nodetool."""
    argv = topology.ORIGINAL_CTL_ARGV(system, args, topology_, host, rundir)
    if system == "hayate":
        return argv + ["--binary", args.bin_dir / "hayate", "--device-size", args.device_size]
    return argv + ["--jvm-opt", f"-Dcassandra.jmx.local.port={topology.jmx_port(host)}"]


compare.ctl_argv = node_argv  # compare.start_nodes starts the node through it


def timed(call, *argv):
    """call(*argv) (run, by default: a command); returns (seconds, what it returned)."""
    if not callable(call):
        call, argv = run, (call, *argv)
    started = time.monotonic()
    output = call(*argv)
    return round(time.monotonic() - started, 3), output


def hayate_tool(args, *argv):
    return timed([args.bin_dir / "hayate", *argv, "--host", args.host,
                  "--port", args.hayate_metrics_port])


def timed_nodetool(args, *argv):
    return timed(topology.nodetool, args.host, *argv)


def number(pattern, text, kind=float):
    match = re.search(pattern, text)
    return kind(match.group(1)) if match else None


def tree_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def forget_pages(path):
    """Drops the page cache of every file under `path` (clean pages only: they were synced), so
    that a restore reads its backup from the device on both systems."""
    for p in Path(path).rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


# ---- the steps ------------------------------------------------------------------------------

def snapshot(system, args, tag):
    """One snapshot of keyspace ycsb: {wall_s, took_ms (hayate's own figure), ...}."""
    if system == "hayate":
        wall_s, out = hayate_tool(args, "snapshot", "ycsb", "-t", tag)
        pinned_mib = number(r"([\d.]+) MiB pinned", out)
        return {"wall_s": wall_s, "took_ms": number(r"in ([\d.]+) ms", out), "pinned_mib": pinned_mib,
                "snapshot_bytes": pinned_mib and int(pinned_mib * (1 << 20)), "output": out.strip()[-300:]}
    wall_s, out = timed_nodetool(args, "snapshot", "-t", tag, "ycsb")
    folder = cassandra_snapshot_dir(args.workdir / "cassandra", tag)
    return {"wall_s": wall_s, "took_ms": cassandra_snapshot_ms(folder),
            "snapshot_bytes": tree_bytes(folder), "output": out.strip()[-300:]}


def cassandra_snapshot_ms(folder):
    """What the node spent on a snapshot: from the manifest's `created_at` (5.0 takes it once,
    before flushing the tables) to the last file it wrote (manifest.json, then schema.cql)."""
    created = json.loads((folder / "manifest.json").read_text()).get("created_at")
    if isinstance(created, str):
        created = datetime.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    ends = [(folder / name).stat().st_mtime for name in ("manifest.json", "schema.cql")
            if (folder / name).exists()]
    return round((max(ends) - float(created)) * 1000, 1) if created and ends else None


def cassandra_snapshot_dir(rundir, tag):
    found = sorted((rundir / "data" / "data" / "ycsb").glob(f"usertable-*/snapshots/{tag}"))
    if not found:
        raise SystemExit(f"backup.py: no snapshot {tag} under {rundir}/data/data/ycsb")
    return found[0]


def idle_snapshot(system, args, record):
    """Step 1: the snapshot of an idle, loaded node. Cassandra's `nodetool snapshot` flushes the
    memtables first; the flush is run and timed on its own before it."""
    figures = {}
    if system == "cassandra":
        figures["nodetool_version_wall_s"], _ = timed_nodetool(args, "version")
        figures["flush_wall_s"], _ = timed_nodetool(args, "flush", "ycsb")
    figures.update(snapshot(system, args, "idle"))
    record["snapshot_idle"] = figures
    log(f"{system}: idle snapshot {figures}")


def max_throughput(system, client, args, nodes, workload, runs, record):
    """Each system's own maximum: the median ops/s of the second half of an unthrottled run."""
    rundir = runs / f"{system}-max"
    peak = client.run("run", workload, nodes, args.threads, rundir, f"{system}-max",
                      {"operationcount": 2_000_000_000, "maxexecutiontime": args.max_seconds})
    seconds, _ = compare.client_series(rundir)
    counts = [seconds[s]["count"] for s in sorted(seconds)][1:-1]
    late = counts[len(counts) // 2:]
    record["max_ops"] = round(statistics.median(late)) if late else round(peak["throughput_ops"])
    record["max_errors"] = peak["errors"]


def run_with_snapshots(system, client, args, nodes, workload, runs, record, target):
    """Step 2: the client at `target` ops/s for --run-s, a snapshot at 1/3 and 2/3 of it."""
    rundir = runs / f"{system}-snapshots"
    marks = []

    def during(process):
        started = time.time()
        for n, share in enumerate((1 / 3, 2 / 3), start=1):
            time.sleep(max(0.0, started + args.run_s * share - time.time()))
            if process.poll() is not None:
                raise SystemExit("backup.py: the client stopped before a snapshot")
            begin = time.time()
            taken = snapshot(system, args, f"during{n}")
            marks.append({"start_unix": begin, "end_unix": time.time(), **taken})
            log(f"{system}: snapshot during the run: {taken.get('took_ms')} ms, "
                f"{taken['wall_s']} s wall")

    figures = client.run("run", workload, nodes, args.threads, rundir, f"{system}-snapshots",
                         {"operationcount": 2_000_000_000, "maxexecutiontime": args.run_s},
                         during=during, target=target)
    record["run"] = {k: figures.get(k) for k in ("throughput_ops", "errors", "not_found",
                                                 "read_p99_us", "update_p99_us", "runtime_s")}
    record["run"]["target_ops"] = target
    record["during"] = analyse_windows(rundir, figures, marks, args)
    record["series"] = [{"second": s, "p99_us": e.get("p99_us"), "ops": e.get("count")}
                        for s, e in sorted(compare.client_series(rundir)[0].items())]


def read_intervals(rundir, tag="ALL"):
    """The client's HDR interval log: [(start_unix, histogram)] of series `tag`, one a second."""
    from hdrh.histogram import HdrHistogram
    path = rundir / "histogram.hlog.gz"
    opener = gzip.open if path.exists() else open
    path = path if path.exists() else rundir / "histogram.hlog"
    base, out = 0.0, []
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("#[StartTime:"):
                base = float(line.split()[1])
            elif line.startswith(f"Tag={tag},"):
                _, start, _, _, encoded = line.strip().split(",", 4)
                out.append((base + float(start), HdrHistogram.decode(encoded)))
    return out


def merged_p99_us(intervals):
    from hdrh.histogram import HdrHistogram
    if not intervals:
        return None
    total = HdrHistogram(1, 3_600_000_000, 3)
    for h in intervals:
        total.add(h)
    return total.get_value_at_percentile(99.0) if total.get_total_count() else None


def analyse_windows(rundir, figures, marks, args):
    """Per snapshot, the p99 of the operations in its window (from its start to --window-s after
    it ended) against the p99 of every other whole second after the first WARM_S."""
    intervals = read_intervals(rundir)
    if not intervals:
        return {"error": "no histogram log"}
    t0 = intervals[0][0]
    windows = [(m["start_unix"], m["end_unix"] + args.window_s) for m in marks]

    def inside(t, w):  # the second [t, t+1) overlaps the window
        return t + 1 > w[0] and t < w[1]

    # Whole seconds after the warm-up (the last one may be partial): (start, histogram, its p99).
    steady = [(t, h, h.get_value_at_percentile(99.0)) for t, h in intervals[:-1] if t >= t0 + WARM_S]
    others = [(h, p99) for t, h, p99 in steady if not any(inside(t, w) for w in windows)]
    median_other = statistics.median(p for _, p in others) if others else None
    result = {"other_p99_us": merged_p99_us([h for h, _ in others]), "other_seconds": len(others),
              "other_second_p99_median_us": median_other, "snapshots": []}
    for mark, window in zip(marks, windows):
        seconds = [(h, p99) for t, h, p99 in steady if inside(t, window)]
        entry = {"start_s": round(mark["start_unix"] - t0, 1), "end_s": round(mark["end_unix"] - t0, 1),
                 "took_ms": mark.get("took_ms"), "wall_s": mark["wall_s"], "seconds": len(seconds),
                 "p99_us": merged_p99_us([h for h, _ in seconds]),
                 "worst_second_p99_us": max((p for _, p in seconds), default=None),
                 "ops": sum(h.get_total_count() for h, _ in seconds)}
        if entry["p99_us"] and result["other_p99_us"]:
            entry["ratio"] = round(entry["p99_us"] / result["other_p99_us"], 2)
        if entry["worst_second_p99_us"] and median_other:
            entry["worst_second_ratio"] = round(entry["worst_second_p99_us"] / median_other, 2)
        result["snapshots"].append(entry)
    ratios = [e["ratio"] for e in result["snapshots"] if "ratio" in e]
    result["max_ratio"] = max(ratios) if ratios else None
    return result


def backup(system, args, server, bdir, record):
    """Step 3. hayate: its backup tool. Cassandra: a snapshot (its flush included) and a copy of
    the snapshot's files to DIR/ycsb/usertable/, each file synced."""
    page_cache = server.drop_cache()
    if system == "hayate":
        wall_s, out = hayate_tool(args, "backup", "--to", bdir, "-t", "full", "ycsb")
        files = bdir / "full"
        figures = {"wall_s": wall_s, "records": number(r"(\d+) records", out, int),
                   "tool_s": number(r"MiB in ([\d.]+) s", out), "output": out.strip()[-300:]}
    else:
        taken = snapshot(system, args, "full")
        source = cassandra_snapshot_dir(server.rundir, "full")
        files = bdir / "ycsb" / "usertable"
        files.mkdir(parents=True)
        started = time.monotonic()
        for path in sorted(source.iterdir()):
            with open(path, "rb") as src, open(files / path.name, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
        fd = os.open(files, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        copy_s = round(time.monotonic() - started, 3)
        figures = {"snapshot_wall_s": taken["wall_s"], "copy_s": copy_s,
                   "wall_s": round(taken["wall_s"] + copy_s, 3)}
    figures["bytes"], figures["page_cache"] = tree_bytes(files), page_cache
    # The rate of the data itself: hayate's tool time, Cassandra's copy (without nodetool).
    data_s = figures.get("tool_s") or figures.get("copy_s") or figures["wall_s"]
    figures["mb_s"] = round(figures["bytes"] / data_s / 1e6, 1) if data_s else None
    figures["mb_s_wall"] = round(figures["bytes"] / figures["wall_s"] / 1e6, 1)
    record["backup"] = figures
    log(f"{system}: backup {figures}")
    return files


def restore(system, args, nodes, bdir, files, record):
    """Step 4: TRUNCATE, then the restore from the backup, read from the device."""
    server = nodes.servers[0]
    figures = {}
    figures["truncate_s"], _ = timed([PYENV / "bin" / "python", BENCH / "lib" / "cqltool.py",
                                      args.host, args.port, "exec", "TRUNCATE ycsb.usertable"])
    forget_pages(files)
    server.drop_cache()
    if system == "hayate":
        wall_s, out = hayate_tool(args, "restore", "--from", bdir / "full")
        rows = [int(n) for n in re.findall(r"(\d+) rows", out)]
        figures.update({"wall_s": wall_s, "rows_restored": rows[-1] if rows else None,
                        "tool_s": number(r"in ([\d.]+) s", out), "output": out.strip()[-400:]})
    else:
        config = args.workdir / "logback-tools.xml"
        config.write_text(LOGBACK_TOOLS)
        figures["wall_s"], out = timed(lambda: topology.cassandra_tool(
            "org.apache.cassandra.tools.BulkLoader",
            ["-d", args.host, "-p", args.port, "-sp", args.cassandra_storage_port, files],
            jvm=["-ea", f"-Dcassandra.storagedir={args.workdir / 'loader'}",
                 f"-Dlogback.configurationFile={config}"]))
        # Its progress lines, then "Summary statistics:" (files, bytes, duration, rate).
        figures["output"] = out[out.find("Summary statistics"):].strip()[:700]
        duration_ms = number(r"Total duration\s*:\s*(\d+) ms", out, int)
        figures["loader_duration_s"] = duration_ms / 1000 if duration_ms else None
    backup_bytes = record["backup"]["bytes"]
    figures["rows_s"] = round(args.records / figures["wall_s"])
    figures["mb_s"] = round(backup_bytes / figures["wall_s"] / 1e6, 1)
    record["restore"] = figures
    log(f"{system}: restore {figures}")


def verify(system, client, args, nodes, runs, name):
    """Every key read once (sequential key numbers, each once): rows missing and errors."""
    workload = args.workdir / "workload-verify"
    workload.write_text(compare.CORE + "readproportion=1\nupdateproportion=0\n"
                        "requestdistribution=sequential\n")
    rundir = runs / f"{system}-{name}"
    figures = client.run("run", workload, nodes, args.load_threads, rundir, f"{system}-{name}",
                         {"operationcount": args.records})
    summary = compare.parse_summary((rundir / "summary.txt").read_text())
    result = {"reads": int(summary.get(("READ", "Operations"), 0)),
              "rows_found": int(summary.get(("READ", "Return=OK"), 0)),
              "not_found": figures["not_found"], "errors": figures["errors"],
              "reads_s": round(figures["throughput_ops"])}
    log(f"{system}: {name}: {result}")
    return result


def cold_start(system, args, server, record):
    """Step 5: SIGKILL, start on the same data, time until CQL answers."""
    figures = {}
    if not Path(f"/proc/{server.pid}").exists():
        # It died (a failed restore, say): the start below is then its start after that death.
        record.setdefault("failures", []).append("the node was not running before the SIGKILL")
    elif system == "hayate":
        # The snapshots pin blocks that a cold start reads too: cleared first, as after a backup.
        hayate_tool(args, "clearsnapshot", "--all")
        metrics = compare.hayate_metrics(args.host, args.hayate_metrics_port)
        figures.update(compare.hayate_storage_bytes(metrics))
    else:
        topology.nodetool(args.host, "clearsnapshot", "--all")
        figures["data_bytes"] = compare.du_bytes(server.rundir / "data" / "data" / "ycsb")
    if Path(f"/proc/{server.pid}").exists():
        log(f"{system}: " + run([compare.ctl_script(system), "kill", server.rundir]).strip())
    time.sleep(1)
    topo = compare.topology_of("single", args)
    figures["start_s"], out = timed(compare.ctl_argv(system, args, topo, args.host, server.rundir))
    server.reload()
    if system == "hayate":
        text = (server.rundir / "logs" / "hayate.log").read_text(errors="replace")
        lines = [compare.ANSI.sub("", line) for line in text.splitlines() if "cold start read" in line]
        if lines:
            line = lines[-1]
            figures["log"] = line[line.index("cold start read"):][:300]
            figures["scan_mib"] = number(r"\((\d+) MiB\)", line)
            figures["scan_records"] = number(r": (\d+) records", line, int)
            figures["scan_mib_s"] = number(r"\((\d+) MiB/s\)", line)
            took = re.search(r" in ([\d.]+)(ms|s|µs)", line)
            if took:
                figures["scan_s"] = float(took.group(1)) / {"ms": 1000, "s": 1, "µs": 1e6}[took.group(2)]
        live = figures.get("live_bytes")
        if live:
            figures["s_per_gib_live"] = round(figures["start_s"] / (live / (1 << 30)), 2)
        if figures.get("scan_mib") and figures.get("scan_s"):
            figures["scan_s_per_gib"] = round(figures["scan_s"] / (figures["scan_mib"] / 1024), 2)
            figures["scan_records_s"] = round(figures["scan_records"] / figures["scan_s"])
            figures["scan_mb_s"] = round(figures["scan_mib"] * (1 << 20) / 1e6 / figures["scan_s"], 1)
    elif figures.get("data_bytes"):
        figures["s_per_gib"] = round(figures["start_s"] / (figures["data_bytes"] / (1 << 30)), 2)
    record["cold_start"] = figures
    log(f"{system}: cold start {figures}")


def one_system(system, client, args, workdir, workload, record, state):
    args.host = args.hosts[system]
    nodes = compare.start_nodes(system, "single", args, workdir)
    server = nodes.servers[0]
    runs = workdir / "runs"
    bdir = workdir / f"backup-{system}"
    try:
        compare.create_schema(nodes)
        load = client.run("load", workload, nodes, args.load_threads, runs / f"{system}-load",
                          f"{system}-load", {})
        record["load"] = {k: load.get(k) for k in ("throughput_ops", "runtime_s", "errors")}
        if system == "cassandra":
            record["settle"] = compare.settle(nodes, args, "after the load")
            record["version"] = compare.cqltool(nodes, "version").strip().splitlines()[-1]
        record["disk_after_load"] = nodes.disk_bytes()
        idle_snapshot(system, args, record)
        max_throughput(system, client, args, nodes, workload, runs, record)
        if not state.get("target_ops"):
            state["target_ops"] = args.target_ops or max(1, int(record["max_ops"] * args.load))
            state["target_source"] = ("--target-ops" if args.target_ops else
                                      f"{args.load:.0%} of {system}'s maximum ({record['max_ops']:,} ops/s)")
        run_with_snapshots(system, client, args, nodes, workload, runs, record, state["target_ops"])
        if system == "cassandra":
            record["settle_after_run"] = compare.settle(nodes, args, "after the run")
        try:  # a failed backup or restore (a tool's error) is reported; the cold start still runs
            files = backup(system, args, server, bdir, record)
            if system == "hayate":
                hayate_tool(args, "clearsnapshot", "--all")
            else:
                topology.nodetool(args.host, "clearsnapshot", "--all")
            restore(system, args, nodes, bdir, files, record)
            record["verify_restore"] = verify(system, client, args, nodes, runs, "verify-restore")
        except SystemExit as error:
            record.setdefault("failures", []).append(f"backup or restore: {error}")
            log(f"{system}: backup or restore failed: {error}")
        cold_start(system, args, server, record)
        record["verify_cold_start"] = verify(system, client, args, nodes, runs, "verify-cold")
    finally:
        for name in ("hayate.log", "system.log"):
            log_file = server.rundir / "logs" / name
            if log_file.exists():  # errors and warnings only, for the report
                lines = [line[:300] for line in log_file.read_text(errors="replace").splitlines()
                         if re.search(r"\b(ERROR|WARN)", line)]
                record["log_warning_count"] = record.get("log_warning_count", 0) + len(lines)
                record["log_warnings"] = record.get("log_warnings", []) + lines[-20:]
        compare.stop_nodes(nodes)
        if not args.keep_work:
            shutil.rmtree(bdir, ignore_errors=True)


# ---- the report -----------------------------------------------------------------------------

def get(record, *keys):
    for key in keys:
        record = (record or {}).get(key)
    return record


def goals(state):
    s, fio = state["systems"], state.get("fio") or {}
    h, c = s.get("hayate", {}), s.get("cassandra", {})
    lines = []
    for system, record in s.items():
        worst = get(record, "during", "max_ratio")
        if worst is not None:
            ok = worst <= GOAL_P99_RATIO
            lines.append(f"- {system}: p99 around each snapshot within 1.2x of the other seconds': "
                         f"worst {worst}x: **{'met' if ok else 'missed'}**")
    hr, cr = get(h, "restore", "wall_s"), get(c, "restore", "wall_s")
    if hr and cr:
        own = get(c, "restore", "loader_duration_s")
        speedup = cr / hr
        lines.append(f"- restore at least 3x faster than Cassandra's sstableloader (same rows, wall "
                     f"times of the tools): hayate {hr:.1f} s, Cassandra {cr:.1f} s, {speedup:.2f}x: "
                     f"**{'met' if speedup >= GOAL_RESTORE_SPEEDUP else 'missed'}**"
                     + (f"; against sstableloader's own duration (without its JVM's start, "
                        f"{own:.1f} s): {own / hr:.2f}x, "
                        f"**{'met' if own / hr >= GOAL_RESTORE_SPEEDUP else 'missed'}**" if own else ""))
    rate, device = get(h, "cold_start", "scan_mb_s"), fio.get("seq_read_mb_s")
    if rate and device:
        share = rate / device
        lines.append(f"- hayate's cold start reads at least 50% of the device's sequential read rate: "
                     f"{rate:,.0f} MB/s of {device:,.0f} MB/s, {share:.0%}: "
                     f"**{'met' if share >= GOAL_COLD_START_SHARE else 'missed'}**")
    for system, record in s.items():
        for name in ("verify_restore", "verify_cold_start"):
            v = record.get(name)
            if v:
                ok = v["rows_found"] == state["records"]
                lines.append(f"- {system}: every row there ({name.replace('_', ' ')}): "
                             f"{v['rows_found']:,} of {state['records']:,} found, {v['not_found']:,} "
                             f"missing, {v['errors']:,} errors: **{'yes' if ok else 'NO'}**")
    return lines


def write_results(out, args, state):
    import csv
    with open(out / "p99.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["system", "second", "p99_us", "ops"])
        for system, record in state["systems"].items():
            for e in record.get("series", []):
                writer.writerow([system, e["second"], e["p99_us"], e["ops"]])
    compact = {k: v for k, v in state.items() if k != "systems"}
    compact["systems"] = {system: {k: v for k, v in r.items() if k != "series"}
                          for system, r in state["systems"].items()}
    compact["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (out / "summary.json").write_text(json.dumps(compact, indent=1, default=str) + "\n")
    chart = draw_chart(out, state)
    s, env, fio = state["systems"], state["env"], state.get("fio") or {}
    c, h = s.get("cassandra", {}), s.get("hayate", {})

    def row(label, fn, digits=1, both_ratio=True, scale=1):
        """A table row: `fn` a record's figure, or "step.key" paths, the first one found."""
        if isinstance(fn, str):
            fn = (lambda paths: lambda r: next((v for v in (get(r, *p.split(".")) for p in paths)
                                                if v is not None), None))(fn.split("|"))
        cv, hv = ((v / scale if isinstance(v, (int, float)) else v) for v in (fn(c), fn(h)))
        return (f"| {label} | {cell(cv, digits)} | {cell(hv, digits)} | "
                f"{ratio(hv, cv) if both_ratio and isinstance(hv, (int, float)) else '-'} |")

    md = [f"# Snapshots, backups, restores and cold starts: hayate and Apache Cassandra ({env['date']})", ""]
    if state.get("failure"):
        md += [f"**The sitting did not finish: {state['failure']}**", ""]
    md += [f"**{system} failed: {failure}**\n" for system, r in s.items() for failure in r.get("failures", [])]
    md += ["What ran: `" + state["command"] + "`", "",
           f"- {args.records:,} rows (YCSB usertable, 10 fields x 100 B), keyspace `ycsb` RF 1, one "
           f"node per system (Cassandra on {args.hosts['cassandra']}, hayate on {args.hosts['hayate']}, "
           f"CQL port {args.port}), one system at a time, Cassandra first; each in a memory cgroup of "
           f"{args.memory}; hayate's device {args.device_size}. Durability: each system's default "
           "(compare.py's `--durability default`: neither loses an acknowledged write in a process "
           "crash); Cassandra configured by compare.py's ctl.sh and cassandra.yaml.template "
           "(bench/README.md, \"Cassandra: installation and tuning\").",
           f"- Client: hayate-bench; load at {args.load_threads} threads; workload `ref` (YCSB "
           f"workloada, uniform keys, 50% reads, 50% updates) at {args.threads} threads, "
           f"`-target {state.get('target_ops')}` on both systems ({state.get('target_source')}), "
           f"{args.run_s} s, snapshots at 1/3 and 2/3 of it.",
           f"- The machine's 1-minute load average over each system's part: {state.get('loadavg') or '-'} "
           "(2 cores; Cassandra's many threads count in it too).", "",
           "## The device", "",
           f"fio on the disk the data is on: sequential read **{cell(fio.get('seq_read_mb_s'))} MB/s**, "
           f"write **{cell(fio.get('seq_write_mb_s'))} MB/s** (`{fio.get('command', '-')}`). "
           "MB = 10^6 bytes, MiB = 2^20.", "",
           "## Load", "", "| | Cassandra | hayate | hayate ÷ Cassandra |", "|---|---:|---:|---:|",
           row("load (rows/s)", "load.throughput_ops", 0),
           row("on disk after the load (MB; hayate: blocks in use)", "disk_after_load.hayate_used_bytes|disk_after_load.disk_allocated_bytes", 0, scale=1e6),
           row("unthrottled maximum, workload ref (ops/s)", "max_ops", 0), "",
           "## 1. Snapshot of the idle, loaded node", "",
           "| | Cassandra | hayate | hayate ÷ Cassandra |", "|---|---:|---:|---:|",
           row("snapshot, the tool's wall time (s)", "snapshot_idle.wall_s", 3),
           row("snapshot itself (ms)", "snapshot_idle.took_ms", 1),
           row("its size (MB): Cassandra's files (hard links), hayate's pinned blocks",
               "snapshot_idle.snapshot_bytes", 1, scale=1e6),
           row("Cassandra: `nodetool flush` before it (s)", "snapshot_idle.flush_wall_s", 3, False),
           row("Cassandra: `nodetool version`, the JVM's start alone (s)", "snapshot_idle.nodetool_version_wall_s", 3, False),
           "",
           "hayate's \"snapshot itself\" is the time its node reports (`took ms`); Cassandra's is "
           "from its snapshot manifest's `created_at` (taken before it flushes) to the last file "
           "it wrote (manifest.json, schema.cql); in step 1 the separate `nodetool flush` had left "
           "nothing to flush. The tools' wall times include starting them (nodetool: a JVM).", ""]
    md += ["## 2. Write latency during snapshots", "",
           f"Both systems at {state.get('target_ops'):,} ops/s. *Window*: from a snapshot's start to "
           f"{args.window_s} s after it ended; *other*: every other whole second after the first "
           f"{WARM_S}. p99 of every operation in them (reads and updates), merged from the client's "
           "per-second HDR histograms; *worst second*: the highest per-second p99 in the window "
           "against the median per-second p99 of the other seconds.", "",
           "| system | snapshot | at (s) | took (ms) | tool wall (s) | ops in window | p99 window (ms) | "
           "p99 other (ms) | ratio | worst second (ms) | worst ÷ median second |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for system, record in s.items():
        d = record.get("during") or {}
        for n, e in enumerate(d.get("snapshots", []), start=1):
            md.append(f"| {system} | {n} | {e['start_s']} | {cell(e.get('took_ms'))} | {cell(e['wall_s'], 2)} | "
                      f"{cell(e['ops'], 0)} | {cell((e.get('p99_us') or 0) / 1000, 2)} | "
                      f"{cell((d.get('other_p99_us') or 0) / 1000, 2)} | {cell(e.get('ratio'), 2)} | "
                      f"{cell((e.get('worst_second_p99_us') or 0) / 1000, 2)} | {cell(e.get('worst_second_ratio'), 2)} |")
    for system, record in s.items():
        r = record.get("run") or {}
        if r.get("target_ops"):
            md.append(f"\n{system}'s client: {cell(r.get('throughput_ops'), 0)} ops/s of {r['target_ops']:,} "
                      f"({(r.get('throughput_ops') or 0) / r['target_ops']:.1%}), {r.get('errors')} errors, "
                      f"{r.get('not_found')} reads not found; p99 read {cell((r.get('read_p99_us') or 0) / 1000, 2)} ms, "
                      f"update {cell((r.get('update_p99_us') or 0) / 1000, 2)} ms over the whole run.")
    if chart:
        md += ["", f"![p99 per second]({chart})", "",
               "The client's p99 per second (ms, log scale); shaded: the snapshot windows. Data: `p99.csv`."]
    wr, rd = fio.get("seq_write_mb_s"), fio.get("seq_read_mb_s")
    md += ["", "## 3. Backup", "", "| | Cassandra | hayate | hayate ÷ Cassandra |", "|---|---:|---:|---:|",
           row("backup, wall time (s)", "backup.wall_s", 2),
           row("Cassandra: its snapshot (flush included) (s)", "backup.snapshot_wall_s", 2, False),
           row("the data written: hayate's tool time, Cassandra's copy (s)",
               "backup.tool_s|backup.copy_s", 2),
           row("bytes written (MB)", "backup.bytes", 1, scale=1e6),
           row("rate of the data written (MB/s)", "backup.mb_s"),
           row("rate over the wall time (MB/s)", "backup.mb_s_wall"),
           row("share of fio's sequential write", lambda r: (get(r, "backup", "mb_s") or 0) / wr if wr else None, 2),
           "", "## 4. Restore (after TRUNCATE, the backup's files out of the page cache)", "",
           "| | Cassandra (sstableloader) | hayate (restore --from) | hayate ÷ Cassandra |", "|---|---:|---:|---:|",
           row("TRUNCATE (s)", "restore.truncate_s", 2),
           row("restore, wall time (s)", "restore.wall_s", 2),
           row("its own figure: sstableloader's \"Total duration\", hayate's \"restored in\" (s)",
               "restore.loader_duration_s|restore.tool_s", 2),
           row("rows/s", "restore.rows_s", 0),
           row("MB/s of the backup's bytes", "restore.mb_s"),
           row("share of fio's sequential read", lambda r: (get(r, "restore", "mb_s") or 0) / rd if rd else None, 2),
           row("rows found after it (each key read once)", "verify_restore.rows_found", 0),
           row("reads not found", "verify_restore.not_found", 0, False),
           row("read errors", "verify_restore.errors", 0, False),
           "", "hayate ÷ Cassandra of a time above 1 means hayate took longer; of a rate, that it was faster.",
           "", "## 5. Cold start after SIGKILL", "",
           "| | Cassandra | hayate | hayate ÷ Cassandra |", "|---|---:|---:|---:|",
           row("start to CQL answering (s)", "cold_start.start_s", 2),
           row("data (MB): Cassandra's table on disk, hayate's live bytes",
               "cold_start.data_bytes|cold_start.live_bytes", 0, scale=1e6),
           row("s per GiB of that data", "cold_start.s_per_gib|cold_start.s_per_gib_live", 2),
           row("hayate: the scan: MiB read", "cold_start.scan_mib", 0, False),
           row("hayate: the scan: seconds", "cold_start.scan_s", 2, False),
           row("hayate: the scan: MB/s", "cold_start.scan_mb_s", 0, False),
           row("hayate: the scan's rate ÷ fio's sequential read",
               lambda r: get(r, "cold_start", "scan_mb_s") / rd if rd and get(r, "cold_start", "scan_mb_s") else None, 2, False),
           row("hayate: records the scan read, per second", "cold_start.scan_records_s", 0, False),
           row("rows found after it", "verify_cold_start.rows_found", 0),
           "", f"hayate's log: `{get(h, 'cold_start', 'log')}`", "",
           f"Aerospike: {AEROSPIKE_COLD[0]} ({AEROSPIKE_COLD[1]}); and {AEROSPIKE_EXAMPLE[0]} "
           f"({AEROSPIKE_EXAMPLE[1]}). Neither says how large the records or how fast the devices "
           "were, so only records per second compare, and only loosely.",
           "", "## Goals", ""] + (goals(state) or ["- nothing to judge"])
    md += ["", "## What favours either side", "",
           "- One machine, 2 cores: the client, the server and the tools (nodetool and "
           "sstableloader start a JVM; hayate's tools are one small binary) share them, so a "
           "Cassandra snapshot during the run also costs the JVM start of nodetool.",
           "- Cassandra's backup is its SSTables: LZ4-compressed, copied as files (no "
           "serialization); hayate's is its own format, uncompressed records. Backup and restore "
           "rates in MB/s therefore do not measure the same data; times and rows/s do.",
           "- Cassandra's snapshot runs after `nodetool flush` in step 1; its snapshots during the "
           "run flush memtables themselves (as `nodetool snapshot` does). hayate copies no data.",
           "- Cassandra's copy is a plain file copy by this script (synced); hayate's backup is "
           "done by the node, inside its memory cgroup. The server cgroup's page cache was "
           "reclaimed before each backup and restore, and the backup's files dropped from the "
           "page cache before the restore, on both.",
           "- sstableloader streams whole SSTables (zero-copy) into one node; hayate's restore "
           "writes every row through the coordinator at ALL (here one replica).",
           "- Cassandra waited for its compactions to settle after the load and after the run "
           "(compare.py's rule); hayate has none to wait for.", ""]
    md += ["## The servers' logs", ""]
    for system, record in s.items():
        lines = record.get("log_warnings") or []
        md += [f"{system}: {record.get('log_warning_count', 0)} lines with ERROR or WARN (hayate: "
               "since its last start; Cassandra: its system.log; the last 20 in summary.json)" + (", the last ones:" if lines else "."), ""]
        md += ["```", *lines[-8:], "```", ""] if lines else []
    md += ["## Environment and provenance", ""] + [f"- {k}: {v}" for k, v in env.items()]
    md += ["", "## Commands", "", "```"] + state.get("commands", [])[:200] + ["```", ""]
    (out / "results.md").write_text("\n".join(md))


def draw_chart(out, state):
    plt = topology.pyplot()
    systems = [(n, r) for n, r in state["systems"].items() if r.get("series")]
    if plt is None or not systems:
        return None
    fig, axes = plt.subplots(len(systems), 1, figsize=(8, 2.2 * len(systems)), squeeze=False)
    for ax, (name, record) in zip(axes[:, 0], systems):
        xs = [e["second"] for e in record["series"] if e["p99_us"]]
        ax.plot(xs, [e["p99_us"] / 1000 for e in record["series"] if e["p99_us"]], lw=0.8,
                color="#d62728" if name == "hayate" else "#1f77b4")
        for e in (record.get("during") or {}).get("snapshots", []):
            ax.axvspan(e["start_s"], e["end_s"] + state["window_s"], alpha=0.2, color="#888")
        ax.set_yscale("log")
        ax.set_ylabel("p99 (ms)", fontsize=8)
        ax.set_title(f"{name} at {state.get('target_ops'):,} ops/s", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("seconds into the run", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "p99.png", dpi=70)
    plt.close(fig)
    return "p99.png"


# ---- main -----------------------------------------------------------------------------------

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--name", default="backup", help="results folder suffix")
    parser.add_argument("--records", type=int, default=1_000_000, help="rows loaded")
    parser.add_argument("--memory", default="2GiB", help="memory limit of each node (cgroup)")
    parser.add_argument("--device-size", default=None,
                        help="hayate's device (default: records x 1.1 KB x 3, in GiB, as compare.py)")
    parser.add_argument("--hosts", default="cassandra=127.0.0.60,hayate=127.0.0.61",
                        help="each system's address")
    parser.add_argument("--port", type=int, default=9360, help="CQL port (both systems)")
    parser.add_argument("--storage-port", type=int, default=7360, help="Cassandra's storage port")
    parser.add_argument("--metrics-port", type=int, default=9460, help="hayate's metrics port")
    parser.add_argument("--load-threads", type=int, default=32)
    parser.add_argument("--threads", type=int, default=16, help="client threads of the runs")
    parser.add_argument("--max-seconds", type=int, default=30, help="the unthrottled run")
    parser.add_argument("--load", type=float, default=0.5,
                        help="the target as a share of the first system's maximum")
    parser.add_argument("--target-ops", type=int, default=None, help="the target (ops/s), given")
    parser.add_argument("--run-s", type=int, default=90, help="the run with two snapshots")
    parser.add_argument("--window-s", type=int, default=5, help="seconds after a snapshot ends")
    parser.add_argument("--systems", default="cassandra,hayate")
    parser.add_argument("--settle-quiet-s", type=int, default=30)
    parser.add_argument("--settle-timeout-s", type=int, default=900)
    parser.add_argument("--no-fio", action="store_true")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep --work-dir (the nodes' data and logs, the client's files)")
    parser.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", str(REPO / "target")))
    parser.add_argument("--build", action="store_true", help="cargo build --release first")
    parser.add_argument("--allow-unlimited", action="store_true")
    parser.add_argument("--work-dir", default=str(REPO / "target" / "bench-work"))
    parser.add_argument("--results-dir", default=str(BENCH / "results"))
    args = parser.parse_args()
    args.hosts = dict(item.split("=") for item in args.hosts.split(","))
    args.systems = [s for s in args.systems.split(",") if s]
    args.memory_bytes = compare.parse_size(args.memory)
    args.bin_dir = Path(args.target_dir) / "release"
    if args.device_size is None:
        args.device_size = f"{max(1, -(-args.records * 1100 * 3 // (1 << 30)))}GiB"
    # What compare.py's functions read.
    args.cassandra_storage_port, args.hayate_metrics_port = args.storage_port, args.metrics_port
    args.hayate_storage_port = args.storage_port
    args.durability, args.commitlog_sync = "default", "batch"
    # compare.Client throttles every run to args.target: here only the run with snapshots is.
    args.read_page_cache, args.delta_buffer, args.target = False, None, None
    return args


def main():
    topology.reexec_in_pyenv(__file__)
    try:
        import hdrh  # noqa: F401  (the client's HDR interval log)
    except ImportError:
        run([PYENV / "bin" / "pip", "install", "-q", "hdrhistogram"], record=False)
    sys.path.insert(0, str(BENCH / "lib"))
    args = parse_args()
    for system in args.systems:
        host = args.hosts[system]
        busy = [p for p in (args.port, args.storage_port, args.metrics_port) if topology.port_open(host, p)]
        if busy or topology.port_open("127.0.0.1", topology.jmx_port(host)):
            raise SystemExit(f"backup.py: something already listens on {host} ({busy} or JMX)")
    out, workdir, env, client = topology.begin_sitting(args, "backup")
    args.workdir = workdir
    state = {"env": env, "systems": {}, "records": args.records, "window_s": args.window_s,
             "command": shlex.join(["bench/backup.py", *sys.argv[1:]])}
    workload = compare.write_workload("ref", workdir / "workload-ref")
    signal.signal(signal.SIGTERM, compare.on_sigterm)
    sampler = topology.Sampler("cassandra", args)  # the load average, every half second
    sampler.start()
    try:
        if not args.no_fio:
            log("fio: the device's sequential rates")
            state["fio"] = topology.fio_rates(workdir)
            log(f"fio: {state['fio']}")
        for system in args.systems:
            record, started = state["systems"].setdefault(system, {}), time.time()
            try:
                one_system(system, client, args, workdir, workload, record, state)
            finally:
                record["loadavg"] = sampler.load_between(started, time.time())
    except (SystemExit, KeyboardInterrupt, Exception) as error:  # noqa: BLE001
        state["failure"] = f"{type(error).__name__}: {error}"
        log(f"the sitting stopped: {state['failure']}")
        raise
    finally:
        sampler.stop()
        state["loadavg"] = "; ".join(f"{system} {r['loadavg'].get('load1_mean')} mean, "
                                     f"{r['loadavg'].get('load1_max')} max" for system, r in
                                     state["systems"].items() if r.get("loadavg"))
        state["commands"] = list(COMMANDS)
        write_results(out, args, state)
        if not args.keep_work:
            shutil.rmtree(workdir, ignore_errors=True)
        log(f"results in {out}")
    print((out / "results.md").read_text())


if __name__ == "__main__":
    main()
