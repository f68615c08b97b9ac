"""Lightweight transactions on a real 3-node cluster under faults, judged as linearizable.

The nodes and the clients run inside a private network namespace (`unshare -n`, as
test_cluster_partition.py): the test runs this file as a script there. Client threads read
(SELECT at SERIAL), insert (`INSERT ... IF NOT EXISTS`) and compare-and-set (`UPDATE ... IF v =
?`) a few registers of a table with replication factor 3, through the token-aware Python driver,
while:

1. node 3 is SIGKILLed, and restarted a few seconds later;
2. all traffic between nodes 1 and 2 is dropped with nftables, and restored.

Every operation's invocation, response and outcome is recorded (a timeout is "unknown": it may
have happened or not; an Unavailable happened not at all), and every register's history must be
linearizable (`linearizability.py`). The scenario's length: `HAYATE_LWT_SOAK_S` seconds of load in
each phase (4 by default); soak it by running it many times, or with longer phases (the checker
judges a linearizable register of 50,000 operations in about 15 s; a history that is not
linearizable and has many timed-out operations may take it to its state bound, "undecided").

It needs root, `unshare`, `ip` and `nft` (scripts/driver-tests.sh installs Debian's nftables as
root); without them it is skipped, saying which is missing.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from linearizability import INFINITY, UNKNOWN, Event, check
from netns import cut, heal, run_scenario

NFT_TABLE = "hayate_lwt"
THREADS = 4
REGISTERS = 3
PHASE_S = float(os.environ.get("HAYATE_LWT_SOAK_S", "4"))
# Four phases of load, the cluster's start and a restart, and the checker: a soak's longer
# phases get a longer bound.
SCENARIO_TIMEOUT_S = 200 + 4 * PHASE_S


@pytest.mark.slow
@pytest.mark.timeout(SCENARIO_TIMEOUT_S + 30)
def test_lwt_histories_stay_linearizable_through_a_kill_and_a_partition(tmp_path):
    pid_file = tmp_path / "node-pids"
    result_file = tmp_path / "result.json"
    run_scenario(__file__, [str(result_file)], pid_file, SCENARIO_TIMEOUT_S, "LWT")
    result = json.loads(result_file.read_text())
    print(json.dumps(result, indent=1))


def test_the_checker_accepts_overlaps_and_refuses_what_no_register_would_do():
    ev = Event
    ok = [ev("insert", 1, None, True, 0, 1), ev("cas", 2, 1, True, 2, 10), ev("read", None, None, 1, 3, 4)]
    assert check(ok) is None, "the read may come before the overlapping compare-and-set"
    stale = [ev("insert", 1, None, True, 0, 1), ev("cas", 2, 1, True, 2, 3), ev("read", None, None, 1, 4, 5)]
    assert check(stale) is not None
    double = [ev("insert", 1, None, True, 0, 1), ev("cas", 2, 1, True, 2, 5), ev("cas", 3, 1, True, 2, 5)]
    assert check(double) is not None
    late = [ev("insert", 1, None, UNKNOWN, 0, INFINITY), ev("read", None, None, None, 1, 2),
            ev("read", None, None, 1, 3, 4)]
    assert check(late) is None
    unseen = [ev("insert", 1, None, UNKNOWN, 0, INFINITY), ev("read", None, None, 1, 1, 2),
              ev("read", None, None, None, 3, 4)]
    assert check(unseen) is not None


# ---- the scenario, run inside the namespace ------------------------------------------------


def scenario(result_file: Path) -> None:
    from cassandra import ConsistencyLevel, Unavailable
    from cassandra.policies import FallthroughRetryPolicy
    from hayate_cluster import Cluster

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    result: dict = {}
    with Cluster("lwt") as c:
        pid_file = Path(os.environ["HAYATE_PID_FILE"])
        c.start()
        pid_file.write_text("\n".join(str(n.proc.pid) for n in c.nodes))
        # The driver's default policy sends a statement again, to the next host, when its
        # connection breaks (a node killed mid-request) or the node answers Overloaded: a
        # compare-and-set the first node had applied then comes back "not applied". Jepsen's
        # clients do not retry either; every error is an unknown outcome here.
        session = c.session(retry_policy=FallthroughRetryPolicy())
        session.execute("CREATE KEYSPACE lwt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE lwt.reg (k int PRIMARY KEY, v int)")
        read = session.prepare("SELECT v FROM lwt.reg WHERE k = ?")
        read.consistency_level = ConsistencyLevel.SERIAL
        insert = session.prepare("INSERT INTO lwt.reg (k, v) VALUES (?, ?) IF NOT EXISTS")
        cas = session.prepare("UPDATE lwt.reg SET v = ? WHERE k = ? IF v = ?")
        histories: dict[int, list[Event]] = {k: [] for k in range(REGISTERS)}
        last_seen: dict[int, int | None] = {k: None for k in range(REGISTERS)}
        counts = {"read": 0, "applied": 0, "not_applied": 0, "unknown": 0, "unavailable": 0}
        lock = threading.Lock()
        stop = threading.Event()
        errors: list[str] = []

        def client(t: int) -> None:
            rng = random.Random(t)
            seq = 0
            while not stop.is_set():
                seq += 1
                k = rng.randrange(REGISTERS)
                value = t * 1_000_000 + seq
                kind = rng.choice(("read", "insert", "cas", "cas"))
                with lock:
                    expect = last_seen[k] if last_seen[k] is not None else value - 1
                invoked = time.monotonic()
                try:
                    if kind == "read":
                        row = session.execute(read, (k,)).one()
                        outcome = None if row is None else row.v
                    elif kind == "insert":
                        outcome = session.execute(insert, (k, value)).was_applied
                    else:
                        outcome = session.execute(cas, (value, k, expect)).was_applied
                    returned = time.monotonic()
                except Unavailable:
                    # Refused before anything was sent: it did not happen.
                    with lock:
                        counts["unavailable"] += 1
                    continue
                except Exception as e:  # a timeout, or a node that went away: unknown
                    outcome, returned = UNKNOWN, INFINITY
                    with lock:
                        if len(errors) < 20:
                            errors.append(f"{kind}: {e!r}"[:300])
                with lock:
                    if kind == "read" and outcome is not UNKNOWN:
                        last_seen[k] = outcome
                        counts["read"] += 1
                    elif outcome is UNKNOWN:
                        counts["unknown"] += 1
                    else:
                        counts["applied" if outcome else "not_applied"] += 1
                        if outcome:
                            last_seen[k] = value
                    histories[k].append(Event(kind, value if kind != "read" else None,
                                              expect if kind == "cas" else None, outcome, invoked, returned))

        threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(THREADS)]
        for t in threads:
            t.start()
        time.sleep(PHASE_S)
        n1, n2, n3 = c.nodes
        applied_before = counts["applied"]
        c.kill(3)
        time.sleep(PHASE_S)
        applied_while_down = counts["applied"] - applied_before
        c.start_node(3, agree=False)
        pid_file.write_text("\n".join(str(n.proc.pid) for n in c.nodes if n.proc))
        c.wait_agreement()
        cut(NFT_TABLE, n1.host, n2.host)
        applied_before = counts["applied"]
        time.sleep(PHASE_S)
        applied_while_cut = counts["applied"] - applied_before
        heal(NFT_TABLE)
        time.sleep(PHASE_S / 2)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        result["counts"] = counts
        result["applied_while_node3_down"] = applied_while_down
        result["applied_while_1_and_2_cut"] = applied_while_cut
        result["first_errors"] = errors[:5]
        result["round_trips"] = c.metric_sum("hayate_coordinator_paxos_round_trips_total")
        result["contended"] = c.metric_sum("hayate_coordinator_paxos_contended_total")
        print(f"lwt: {result}", flush=True)
        problems = [f"register {k}: {p}" for k, h in histories.items() if (p := check(h))]
        result["undecided_registers"] = check.undecided
        assert not problems, "\n\n".join(problems)
        assert counts["applied"] > 20 and counts["read"] > 20, f"too few operations to test anything: {counts}"
        assert applied_while_down > 0, "no transaction was applied with node 3 down (a quorum was up)"
        assert check.undecided < REGISTERS, "no history could be judged"
    result_file.write_text(json.dumps(result))
    print("LWT scenario passed", flush=True)


if __name__ == "__main__":
    scenario(Path(sys.argv[1]))
