"""What the Python driver learns of a cluster of three, and that its token-aware routing works.

The nodes sit in one data center (dc1) on three racks. The driver must see three hosts with
their data center, rack and tokens (from `system.local` and `system.peers`, the rows every node
gives of the others), and build a token map whose replicas are hayate's own: a request sent to a
node that does not hold the row's token is counted by `hayate_coordinator_not_replica_total`,
so sending each key to each node and comparing the counters with the driver's replica sets
checks placement key by key. A token-aware workload at RF 1 then reaches a replica directly for
(nearly) every request: under 5% counted otherwise.
"""

from __future__ import annotations

import random
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args

from hayate_cluster import running, whitelisted

RACKS = {1: "r1", 2: "r2", 3: "r3"}
NOT_REPLICA = "hayate_coordinator_not_replica_total"
SEED = 20251124


@pytest.fixture(scope="module")
def three():
    yield from running("routing", data_centers={1: "dc1", 2: "dc1", 3: "dc1"}, racks=RACKS)


@pytest.fixture(scope="module")
def session(three):
    s = three.session()
    s.execute("CREATE KEYSPACE rf1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE KEYSPACE nts2 WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2}")
    for ks in ("rf1", "nts2"):
        s.execute(f"CREATE TABLE {ks}.t (k bigint PRIMARY KEY, v bigint)")
    s.cluster.refresh_schema_metadata()
    return s


def test_driver_sees_three_hosts_with_data_center_rack_and_tokens(three, session):
    metadata = session.cluster.metadata
    hosts = {h.address: h for h in metadata.all_hosts()}
    assert sorted(hosts) == sorted(n.host for n in three.nodes)
    token_owner = metadata.token_map.token_to_host_owner
    for n in three.nodes:
        h = hosts[n.host]
        assert (h.datacenter, h.rack) == ("dc1", RACKS[n.index]), f"{n.host}: {h.datacenter}/{h.rack}"
        assert h.is_up, f"the driver has {n.host} down"
        local = whitelisted(three, n.index).execute("SELECT host_id, tokens FROM system.local").one()
        assert h.host_id == local.host_id
        owned = sorted(t.value for t, owner in token_owner.items() if owner is h)
        assert owned == sorted(int(t) for t in local.tokens), f"{n.host}: the driver's tokens differ from system.local's"
        assert len(owned) == 16
    status = three.node(1).status()
    assert sorted(m["address"] for m in status["nodes"]) == sorted(hosts)


def wait_for_schema_agreement(three, timeout_s=10.0):
    """Waits until every node's system.local and every peer row agree on one schema version, as
    drivers do after DDL: a node learns the others' versions by gossip (every 250 ms), so right
    after the cluster formed or changed its schema a peer row may still show the previous one."""
    deadline = time.monotonic() + timeout_s
    while True:
        versions = set()
        for n in three.nodes:
            s = whitelisted(three, n.index)
            versions.add(s.execute("SELECT schema_version FROM system.local").one().schema_version)
            versions.update(r.schema_version for r in s.execute("SELECT schema_version FROM system.peers"))
        if len(versions) == 1 or time.monotonic() > deadline:
            return versions
        time.sleep(0.1)


def test_every_node_describes_the_others_in_system_peers(three):
    agreed = wait_for_schema_agreement(three)
    assert len(agreed) == 1, f"the nodes did not agree on a schema version within 10 s: {agreed}"
    locals_ = {}
    for n in three.nodes:
        locals_[n.host] = whitelisted(three, n.index).execute(
            "SELECT host_id, data_center, rack, tokens, release_version, schema_version FROM system.local").one()
    for n in three.nodes:
        s = whitelisted(three, n.index)
        peers = {str(r.peer): r for r in s.execute("SELECT * FROM system.peers")}
        peers_v2 = {str(r.peer): r for r in s.execute("SELECT * FROM system.peers_v2")}
        others = sorted(m.host for m in three.nodes if m is not n)
        assert sorted(peers) == others, f"{n.host}'s system.peers lists {sorted(peers)}"
        assert sorted(peers_v2) == others, f"{n.host}'s system.peers_v2 lists {sorted(peers_v2)}"
        for addr in others:
            want = locals_[addr]
            for row in (peers[addr], peers_v2[addr]):
                got = (row.host_id, row.data_center, row.rack, set(row.tokens), row.release_version)
                assert got == (want.host_id, want.data_center, want.rack, set(want.tokens), want.release_version), (
                    f"{n.host} describes {addr} as {got}")
                assert row.schema_version == want.schema_version
            assert str(peers[addr].rpc_address) == addr
            assert str(peers_v2[addr].native_address) == addr and peers_v2[addr].native_port == three.cql_port
            assert peers_v2[addr].peer_port == three.storage_port


@pytest.mark.parametrize("keyspace", ["rf1", "nts2"])
def test_driver_replicas_are_haytes_replicas_key_by_key(three, session, keyspace):
    """Each of KEYS random keys is read through every node; a node counts a not-replica request
    exactly when the driver's token map says it is not a replica of the key."""
    rng = random.Random(SEED)
    keys = [rng.randrange(-2**62, 2**62) for _ in range(150)]
    metadata = session.cluster.metadata
    hosts = {h.address: h for h in metadata.all_hosts()}
    select = session.prepare(f"SELECT v FROM {keyspace}.t WHERE k = ?")
    select.consistency_level = ConsistencyLevel.ONE
    expected = {n.host: 0 for n in three.nodes}
    replica_counts = []
    for key in keys:
        replicas = {h.address for h in metadata.get_replicas(keyspace, select.bind((key,)).routing_key)}
        replica_counts.append(len(replicas))
        for n in three.nodes:
            if n.host not in replicas:
                expected[n.host] += 1
    want_rf = 1 if keyspace == "rf1" else 2
    assert set(replica_counts) == {want_rf}, f"the driver's replica counts: {set(replica_counts)}"
    before = three.metric_by_node(NOT_REPLICA)
    for key in keys:
        for n in three.nodes:
            session.execute(select, (key,), host=hosts[n.host])
    after = three.metric_by_node(NOT_REPLICA)
    got = {h: int(after[h] - before[h]) for h in after}
    print(f"\n{keyspace}: not-replica requests per node {got}, as the driver's token map predicts: {expected}")
    assert got == expected, (f"hayate's replicas differ from the driver's token map (seed {SEED}): "
                             f"not-replica requests per node {got}, predicted {expected}")


def test_token_aware_workload_at_rf1_reaches_replicas(three, session):
    requests = 3000
    insert = session.prepare("INSERT INTO rf1.t (k, v) VALUES (?, ?)")
    select = session.prepare("SELECT v FROM rf1.t WHERE k = ?")
    rng = random.Random(SEED + 1)
    keys = [rng.randrange(-2**62, 2**62) for _ in range(requests // 2)]
    before = three.metric_sum(NOT_REPLICA)
    started = time.monotonic()
    execute_concurrent_with_args(session, insert, [(k, k % 1000) for k in keys], concurrency=32)
    results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=32)
    elapsed = time.monotonic() - started
    assert all(ok and r.one().v == k % 1000 for k, (ok, r) in zip(keys, results))
    not_replica = three.metric_sum(NOT_REPLICA) - before
    share = not_replica / requests
    print(f"\ntoken-aware RF 1: {int(not_replica)} of {requests} requests reached a node that is not the "
          f"replica ({share:.2%}), in {elapsed:.1f} s")
    assert share < 0.05


def test_rows_larger_than_a_write_block_replicate_and_read_back_from_every_node(three, session):
    """Rows of 3 to 12 MiB (chunked on every replica's device) written at ALL to three replicas
    read back whole through each node as coordinator, at ALL and at ONE."""
    session.execute("CREATE KEYSPACE big3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute("CREATE TABLE big3.t (k int PRIMARY KEY, v blob)")
    wait_for_schema_agreement(three)
    insert = session.prepare("INSERT INTO big3.t (k, v) VALUES (?, ?)")
    insert.consistency_level = ConsistencyLevel.ALL
    values = {k: random.Random(k).randbytes(k * 3 << 20) for k in (1, 2, 3, 4)}
    for k, v in values.items():
        session.execute(insert, (k, v), timeout=60)
    for n in three.nodes:
        s = whitelisted(three, n.index)
        for level in (ConsistencyLevel.ALL, ConsistencyLevel.ONE):
            select = s.prepare("SELECT v FROM big3.t WHERE k = ?")
            select.consistency_level = level
            for k, v in values.items():
                row = s.execute(select, (k,), timeout=60).one()
                assert row is not None and row.v == v, f"key {k} through {n.host} at {level}"
