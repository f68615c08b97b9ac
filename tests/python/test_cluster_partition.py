"""A network partition between two nodes of three, and its healing.

The nodes and the client run inside a private network namespace (`unshare -n`), where an
nftables rule can drop traffic between two loopback addresses without touching the machine's own
network: the test runs this file as a script under `unshare -n`, and the script brings `lo` up,
starts three nodes, and runs the scenario:

1. Client threads write unique rows at QUORUM and read their own earlier rows back at QUORUM
   (token-aware, the default retry policy).
2. All traffic between nodes 2 and 3 (TCP and UDP) is dropped. Every coordinator still reaches a
   majority of replicas through node 1, so no request may fail. (Gossip spreads heartbeats
   through node 1, so nodes 2 and 3 may go on seeing each other up, as Cassandra's would; the
   test reports what they saw.) A schema change through node 1 succeeds too: the metadata log's
   majority is on its side.
3. The partition heals: everyone is up again, the hints written meanwhile are replayed, and the
   replicas have converged: reads of every acknowledged row at ALL find nothing to repair (read
   repair metrics unchanged), and each node alone (the other two stopped) serves every row at ONE.

It needs root, `unshare`, `ip` and `nft` (scripts/driver-tests.sh installs Debian's nftables
as root); without them it is skipped, saying which is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netns import cut, dropped_packets, heal, run_scenario

# The whole scenario, cluster start included, on a loaded 2-core machine.
SCENARIO_TIMEOUT_S = 240
NFT_TABLE = "hayate_partition"
THREADS = 2
LOAD_BEFORE_S = 1.0
LOAD_DURING_S = float(os.environ.get("HAYATE_CLUSTER_SOAK_S", "4"))
HINTS_TIMEOUT_S = 60


@pytest.mark.slow
@pytest.mark.timeout(SCENARIO_TIMEOUT_S + 30)
def test_partition_between_two_nodes_keeps_quorum_and_heals(tmp_path):
    pid_file = tmp_path / "node-pids"
    result_file = tmp_path / "result.json"
    run_scenario(__file__, [str(result_file)], pid_file, SCENARIO_TIMEOUT_S, "partition")
    result = json.loads(result_file.read_text())
    print(json.dumps(result, indent=1))


# ---- the scenario, run inside the namespace ------------------------------------------------


def scenario(result_file: Path) -> None:
    from cassandra import ConsistencyLevel
    from cassandra.concurrent import execute_concurrent_with_args
    from hayate_cluster import Cluster, whitelisted

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    result: dict = {}
    with Cluster("partition") as c:
        pid_file = Path(os.environ["HAYATE_PID_FILE"])
        c.start()
        pid_file.write_text("\n".join(str(n.proc.pid) for n in c.nodes))
        session = c.session()
        session.execute("CREATE KEYSPACE part WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE part.t (k bigint PRIMARY KEY, v bigint)")
        insert = session.prepare("INSERT INTO part.t (k, v) VALUES (?, ?)")
        select = session.prepare("SELECT v FROM part.t WHERE k = ?")
        acked: dict[int, int] = {}
        errors: list[tuple[float, str, str]] = []
        stale: list = []
        stop = threading.Event()

        def client(t: int) -> None:
            seq = 0
            while not stop.is_set():
                key, value = t * 10_000_000 + seq, seq
                seq += 1
                try:
                    session.execute(insert, (key, value))
                    acked[key] = value
                except Exception as e:
                    errors.append((time.monotonic(), "write", repr(e)))
                back = t * 10_000_000 + (seq * 7919) % seq
                if back in acked:
                    try:
                        row = session.execute(select, (back,)).one()
                        if row is None or row.v != acked[back]:
                            stale.append((back, row))
                    except Exception as e:
                        errors.append((time.monotonic(), "read", repr(e)))

        threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(THREADS)]
        for t in threads:
            t.start()
        c.wait_speculation_ready()
        time.sleep(LOAD_BEFORE_S)
        n1, n2, n3 = c.nodes
        acked_at_cut = len(acked)
        cut_at = time.monotonic()
        cut(NFT_TABLE, n2.host, n3.host)
        time.sleep(LOAD_DURING_S)
        views = {n.host: {m["address"]: m["state"] for m in n.status()["nodes"]} for n in (n2, n3)}
        # A schema change through node 1: it reaches a majority of the metadata log.
        ddl_started = time.monotonic()
        whitelisted(c, 1).execute("CREATE TABLE part.during (k int PRIMARY KEY)")
        ddl_s = time.monotonic() - ddl_started
        stop.set()
        for t in threads:
            t.join(timeout=60)
        result["partition"] = {
            "acked_before_cut": acked_at_cut,
            "acked_while_cut": len(acked) - acked_at_cut,
            "node2_sees_node3": views[n2.host][n3.host],
            "node3_sees_node2": views[n3.host][n2.host],
            "schema_change_through_node1_s": round(ddl_s, 2),
            "client_errors": len(errors),
            "first_errors": [f"{at - cut_at:+.2f} s {op}: {e[:200]}" for at, op, e in errors[:5]],
            "dropped_packets": dropped_packets(NFT_TABLE),
        }
        print(f"partition: {result['partition']}", flush=True)
        assert result["partition"]["acked_while_cut"] > 50, "too few writes while partitioned to test anything"
        assert not errors, f"{len(errors)} QUORUM requests failed with a majority reachable: {errors[:3]}\n{c.logs()}"
        assert not stale, f"QUORUM reads missed acknowledged QUORUM writes: {stale[:5]}"
        assert result["partition"]["dropped_packets"] > 0, "the nft rules dropped nothing"

        heal(NFT_TABLE)
        healed_at = time.monotonic()
        c.wait_agreement()
        result["heal"] = {"agreement_after_s": round(time.monotonic() - healed_at, 2)}
        c.wait_hints_replayed(HINTS_TIMEOUT_S, after="healing")
        result["heal"]["hints_replayed_after_s"] = round(time.monotonic() - healed_at, 2)
        result["heal"]["hints_written"] = c.metric_by_node("hayate_hints_written_total")
        result["heal"]["hints_replayed"] = c.metric_by_node("hayate_hints_replayed_total")
        assert sum(result["heal"]["hints_written"].values()) > 0, "nodes 2 and 3 wrote no hints for each other"
        assert all(c.table_exists_everywhere("part", "during").values()), "a node lacks the table made during the cut"

        # Converged: reads at ALL find every row and repair nothing.
        repairs_before = c.metric_sum("hayate_coordinator_repaired_rows_total")
        select_all = session.prepare("SELECT v FROM part.t WHERE k = ?")
        select_all.consistency_level = ConsistencyLevel.ALL
        keys = sorted(acked)
        rows = execute_concurrent_with_args(session, select_all, [(k,) for k in keys], concurrency=64,
                                            raise_on_first_error=False)
        bad = [(k, r) for k, (ok, r) in zip(keys, rows) if not ok or r.one() is None or r.one().v != acked[k]]
        assert not bad, f"{len(bad)} acknowledged rows do not read back at ALL: {bad[:5]}"
        repaired = c.metric_sum("hayate_coordinator_repaired_rows_total") - repairs_before
        result["converged"] = {"rows": len(keys), "rows_repaired_by_reads_at_all": repaired}
        assert repaired == 0, f"reads at ALL repaired {repaired} rows: the hints did not bring the replicas together"

        # Each node alone at ONE.
        missing = {}
        for k, to_stop in ((1, [2, 3]), (2, [1]), (3, [2])):
            for other in to_stop:
                c.stop(other)
            if not c.node(k).alive():
                c.start_node(k, agree=False)
                pid_file.write_text("\n".join(str(n.proc.pid) for n in c.nodes if n.proc))
            single = whitelisted(c, k, consistency=ConsistencyLevel.ONE)
            one = single.prepare("SELECT v FROM part.t WHERE k = ?")
            rows = execute_concurrent_with_args(single, one, [(key,) for key in keys], concurrency=64,
                                                raise_on_first_error=False)
            missing[k] = sum(1 for key, (ok, r) in zip(keys, rows)
                             if not ok or r.one() is None or r.one().v != acked[key])
            if k == 2:
                c.start_node(3, agree=False)
                pid_file.write_text("\n".join(str(n.proc.pid) for n in c.nodes if n.proc))
        result["alone_at_one_missing"] = missing
        assert not any(missing.values()), f"nodes alone at ONE miss acknowledged rows: {missing}\n{c.logs()}"
    result_file.write_text(json.dumps(result))
    print("partition scenario passed", flush=True)


if __name__ == "__main__":
    scenario(Path(sys.argv[1]))
