#!/usr/bin/env python3
"""Writes and reads back rows of one size through the Python driver, and reports the time.

    bench/large-rows.py HOST PORT [--rows 24] [--mib 8] [--threads 4]

A quick side-by-side of rows larger than a storage block (hayate writes them in chunk blocks;
Cassandra as one mutation through its commit log): each of --threads writers inserts its share
of --rows rows of --mib MiB of random bytes with a prepared statement at ONE, then the same
threads read each row back and compare it. Prints one JSON line: rows/s and MiB/s each way,
the median and worst per-row latency, and errors. Run it against each system in turn on the
same machine, with nothing else running; the keyspace `largerows` is dropped and made again.
"""

import argparse
import json
import os
import statistics
import threading
import time

from cassandra.cluster import Cluster


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--mib", type=float, default=8)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    cluster = Cluster([args.host], port=args.port)
    session = cluster.connect()
    session.default_timeout = 60
    session.execute("DROP KEYSPACE IF EXISTS largerows")
    session.execute("CREATE KEYSPACE largerows WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE largerows.t (k int PRIMARY KEY, v blob)")
    insert = session.prepare("INSERT INTO largerows.t (k, v) VALUES (?, ?)")
    select = session.prepare("SELECT v FROM largerows.t WHERE k = ?")
    size = int(args.mib * (1 << 20))
    values = {k: os.urandom(size) for k in range(args.rows)}
    result = {"rows": args.rows, "mib_per_row": args.mib, "threads": args.threads}

    def phase(name, op):
        latencies, errors, lock = [], [0], threading.Lock()

        def worker(w):
            for k in range(w, args.rows, args.threads):
                t0 = time.perf_counter()
                try:
                    op(k)
                except Exception as e:  # counted, and the first few shown
                    with lock:
                        errors[0] += 1
                        if errors[0] <= 3:
                            print(f"{name} {k}: {e}", flush=True)
                    continue
                with lock:
                    latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        done = len(latencies)
        result[name] = {
            "rows_per_s": round(done / elapsed, 2),
            "mib_per_s": round(done * args.mib / elapsed, 1),
            "median_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
            "max_ms": round(max(latencies) * 1000, 1) if latencies else None,
            "errors": errors[0],
        }

    def read(k):
        row = session.execute(select, (k,)).one()
        if row is None or row.v != values[k]:
            raise ValueError("read back something else")

    phase("write", lambda k: session.execute(insert, (k, values[k])))
    phase("read", read)
    print(json.dumps(result), flush=True)
    cluster.shutdown()


if __name__ == "__main__":
    main()
