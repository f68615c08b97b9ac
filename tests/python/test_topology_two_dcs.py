"""Two data centers, as Cassandra users run them: one cut off, healed, then grown.

`hayate local start --nodes 6 --data-centers 2` runs dc1 (127.0.0.1-3) and dc2 (127.0.0.4-6)
with every port at its default, inside a private network namespace (`unshare -n`, as
test_cluster_partition.py: the default ports are always free there, and nftables can cut traffic
between addresses). A keyspace has NetworkTopologyStrategy {dc1: 3, dc2: 3}; the drivers are
DC-aware and token-aware, as on Cassandra.

1. Writes at LOCAL_QUORUM from dc1, under load.
2. dc2 is cut off from dc1 by nftables: LOCAL_QUORUM writes in dc1 keep succeeding with no
   error, and EACH_QUORUM fails with Unavailable (dc2's replicas are down as dc1 sees them).
3. Healed: the hints dc1 wrote replay, and every node of dc2, coordinating at LOCAL_ONE (a
   coordinator reads its own copy first, and each holds every row), serves every acknowledged
   row: dc2 converged.
4. `hayate local add --data-center dc2` adds node 7 to dc2: it streams its ranges from dc2's
   replicas (which give them up, and are the ones near it), never from dc1's, then serves every
   row at LOCAL_ONE as a coordinator.

Needs root, `unshare`, `ip` and `nft` (scripts/driver-tests.sh installs them as root); skipped
without, saying which is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from netns import nft, run_scenario

SCENARIO_TIMEOUT_S = 420
NFT_TABLE = "hayate_two_dcs"
DC1 = [f"127.0.0.{k}" for k in (1, 2, 3)]
DC2 = [f"127.0.0.{k}" for k in (4, 5, 6)]
ROWS_BEFORE = 2000
LOAD_DURING_S = 5.0
HINTS_TIMEOUT_S = 120
COMMAND_TIMEOUT_S = 300


@pytest.mark.slow
@pytest.mark.timeout(SCENARIO_TIMEOUT_S + 30)
def test_a_data_center_cut_off_then_healed_then_grown(tmp_path):
    result_file = tmp_path / "result.json"
    run_scenario(__file__, [str(tmp_path), str(result_file)], tmp_path / "node-pids", SCENARIO_TIMEOUT_S,
                 "two-data-center")
    print(json.dumps(json.loads(result_file.read_text()), indent=1))


# ---- the scenario, run inside the namespace ------------------------------------------------


def hayate(*args: str) -> str:
    from hayate_node import HAYATE_BIN

    proc = subprocess.run([str(HAYATE_BIN), *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert proc.returncode == 0, f"hayate {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def get_json(host: str, path: str) -> dict:
    with urllib.request.urlopen(f"http://{host}:9180{path}", timeout=5) as r:
        return json.loads(r.read().decode())


def metric(host: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{host}:9180/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def cut(a: list[str], b: list[str]) -> None:
    """Drops every TCP and UDP packet between the addresses of `a` and those of `b`."""
    nft("add", "table", "inet", NFT_TABLE)
    nft("add", "chain", "inet", NFT_TABLE, "out", "{ type filter hook output priority 0 ; policy accept ; }")
    for src, dst in ((a, b), (b, a)):
        nft("add", "rule", "inet", NFT_TABLE, "out", "ip", "saddr", "{ " + ", ".join(src) + " }",
            "ip", "daddr", "{ " + ", ".join(dst) + " }", "meta", "l4proto", "{ tcp, udp }", "counter", "drop")


def wait(what: str, timeout_s: float, check) -> float:
    start = time.monotonic()
    problem = "not checked"
    while time.monotonic() - start < timeout_s:
        problem = check()
        if problem is None:
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout_s} s: {problem}")


def session_in(dc: str, hosts: list[str], consistency, whitelist: bool = False):
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy, WhiteListRoundRobinPolicy

    policy = WhiteListRoundRobinPolicy(hosts) if whitelist else TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=dc))
    profile = ExecutionProfile(load_balancing_policy=policy, consistency_level=consistency, request_timeout=12)
    cluster = Cluster(hosts, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, protocol_version=4,
                      connect_timeout=5, control_connection_timeout=5)
    return cluster, cluster.connect()


def missing_at(host: str, keys: dict[int, int]) -> int:
    """How many of `keys` node `host` alone does not serve at LOCAL_ONE."""
    from cassandra import ConsistencyLevel
    from cassandra.concurrent import execute_concurrent_with_args

    cluster, s = session_in("", [host], ConsistencyLevel.LOCAL_ONE, whitelist=True)
    try:
        one = s.prepare("SELECT v FROM two.t WHERE k = ?")
        ks = sorted(keys)
        rows = execute_concurrent_with_args(s, one, [(k,) for k in ks], concurrency=64, raise_on_first_error=False)
        return sum(1 for k, (ok, r) in zip(ks, rows) if not ok or r.one() is None or r.one().v != keys[k])
    finally:
        cluster.shutdown()


def scenario(work: Path, result_file: Path) -> None:
    from cassandra import ConsistencyLevel, Unavailable
    from cassandra.concurrent import execute_concurrent_with_args

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    directory = work / "two-dcs"
    pid_file = Path(os.environ["HAYATE_PID_FILE"])
    result: dict = {}

    def record_pids() -> None:
        pids = []
        for k in range(1, 8):
            try:
                pids.append((directory / f"node{k}" / "hayate.pid").read_text().strip())
            except OSError:
                pass
        pid_file.write_text("\n".join(pids))

    try:
        print(hayate("local", "start", "--nodes", "6", "--data-centers", "2", "--dir", str(directory),
                     "--", "--device-size", "256MiB"), flush=True)
    finally:
        record_pids()
    status = get_json(DC1[0], "/status")
    dcs = {m["address"]: m["data_center"] for m in status["nodes"]}
    assert dcs == {**{h: "dc1" for h in DC1}, **{h: "dc2" for h in DC2}}, dcs
    driver, session = session_in("dc1", DC1[:1], ConsistencyLevel.LOCAL_QUORUM)
    session.execute("CREATE KEYSPACE two WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3}")
    session.execute("CREATE TABLE two.t (k bigint PRIMARY KEY, v bigint)")
    insert = session.prepare("INSERT INTO two.t (k, v) VALUES (?, ?)")
    acked: dict[int, int] = {}
    execute_concurrent_with_args(session, insert, [(k, k) for k in range(ROWS_BEFORE)], concurrency=64)
    acked.update({k: k for k in range(ROWS_BEFORE)})

    # 1-2. dc2 cut off, load at LOCAL_QUORUM in dc1 throughout.
    errors: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        k = ROWS_BEFORE
        while not stop.is_set():
            try:
                session.execute(insert, (k, k))
                acked[k] = k
            except Exception as e:  # every client error counts
                errors.append(repr(e)[:300])
            k += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    time.sleep(1.0)
    acked_at_cut = len(acked)
    cut(DC1, DC2)
    down_after = wait("dc1 sees dc2 down", 30, lambda: next(
        (f"{h} sees {m['address']} {m['state']}" for h in DC1 for m in get_json(h, "/status")["nodes"]
         if m["address"] in DC2 and m["state"] != "down"), None))
    each = session.prepare("INSERT INTO two.t (k, v) VALUES (?, ?)")
    each.consistency_level = ConsistencyLevel.EACH_QUORUM
    with pytest.raises(Unavailable) as refused:
        session.execute(each, (-1, -1))
    time.sleep(LOAD_DURING_S)
    stop.set()
    t.join(timeout=30)
    result["cut"] = {
        "dc2_seen_down_after_s": round(down_after, 2),
        "acked_while_cut": len(acked) - acked_at_cut,
        "local_quorum_errors": len(errors),
        "each_quorum": str(refused.value)[:200],
    }
    print(f"cut: {result['cut']}", flush=True)
    assert len(acked) - acked_at_cut > 50, "too few writes while dc2 was cut off to test anything"
    assert not errors, f"LOCAL_QUORUM writes in dc1 failed while dc2 was cut off: {errors[:3]}"

    # 3. Healed: hints replay, dc2 converges.
    nft("delete", "table", "inet", NFT_TABLE)
    wait("every node sees every node up", 60, lambda: next(
        (f"{h} sees {m['address']} {m['state']}" for h in DC1 + DC2 for m in get_json(h, "/status")["nodes"]
         if m["state"] != "up"), None))
    wait("the hints replayed", HINTS_TIMEOUT_S, lambda: next(
        (f"{h} holds hints" for h in DC1 if metric(h, "hayate_hints_pending_bytes") > 0), None))
    result["dc2_alone_missing"] = {h: missing_at(h, acked) for h in DC2}
    print(f"dc2 after healing: {result['dc2_alone_missing']}", flush=True)
    assert not any(result["dc2_alone_missing"].values()), f"dc2 did not converge: {result['dc2_alone_missing']}"

    # 4. A node joins dc2: it streams from dc2's replicas only.
    try:
        print(hayate("local", "add", "--dir", str(directory), "--data-center", "dc2"), flush=True)
    finally:
        record_pids()
    new = "127.0.0.7"
    netstats = get_json(new, "/netstats")
    sources = sorted({s["peer_address"] for s in netstats["finished"] if s["direction"] == "in"})
    result["join_dc2"] = {"streamed_from": sources, "mode": netstats["mode"]}
    print(f"join in dc2: {result['join_dc2']}", flush=True)
    assert sources and set(sources) <= set(DC2), f"node 7 streamed from {sources}, not only from dc2's replicas"
    assert netstats["mode"] == "NORMAL"
    result["node7_alone_missing"] = missing_at(new, acked)
    assert result["node7_alone_missing"] == 0, f"node 7 misses {result['node7_alone_missing']} rows"
    driver.shutdown()
    hayate("local", "stop", "--dir", str(directory))
    result_file.write_text(json.dumps(result))
    print("two-data-center scenario passed", flush=True)


if __name__ == "__main__":
    scenario(Path(sys.argv[1]), Path(sys.argv[2]))
