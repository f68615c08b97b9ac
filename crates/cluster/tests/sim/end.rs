//! The end of a run: every fault healed, the topology change under way finished, every hint
//! replayed, every member cleaned up, and the replicas checked against the model and the ring
//! against itself on every node.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use std::time::Duration;

use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{ReadRequest, SpeculativeRetry};
use hayate_cluster::replica::{PartitionRead, RangeRead, RangeStart, ReadCommand, Replica};
use hayate_cluster::ring::TokenRing;
use hayate_cluster::topology::RingLog;
use hayate_storage::Row;
use rand::Rng;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use super::clients::{write, LIMIT_NONE};
use super::cluster::host;
use super::model::{guarantee, normalize, version, Key, ReadCheck, TABLE};
use super::{topology, Role, Sim};

/// How long the end of a run waits for hint replays still under way, in virtual time.
const SETTLE_MAX: Duration = Duration::from_secs(600);
/// Rounds of hint replay at the end before hints that will not go are a failure.
const FINAL_REPLAY_ROUNDS_MAX: usize = 5;
/// A key's writes listed when its replicas differ from the model: the latest ones.
const WRITES_SHOWN_MAX: usize = 8;

/// True for a node that is in the ring at the end (or serves as if): not a spare that never
/// joined, not gone.
fn in_ring(sim: &Sim, i: usize) -> bool {
    !matches!(sim.roles.borrow()[i], Role::Spare | Role::Gone)
}

/// Ends every fault, finishes the topology change under way, replays every hint, cleans up,
/// and checks that every node has the same ring and every replica holds what the model says,
/// before and after a read of every key at ALL.
pub(super) async fn finish(sim: &Rc<Sim>, driver: JoinHandle<()>) {
    let n = sim.n();
    let network = &sim.cluster.network;
    network.heal_all();
    network.set_drop_probability(0.0);
    network.set_duplicate_probability(0.0);
    // Faster than the shortest timeout a run may draw.
    network.set_delay_ms(0, 1);
    sim.partitions.borrow_mut().clear();
    sim.cluster.log.set_faults(super::ring_log::LogFaults::NONE);
    for i in 0..n {
        let off = !in_ring(sim, i);
        if off {
            network.isolate(host(i));
        }
        sim.cluster.log.set_cut(i, off);
        sim.stopped.borrow_mut()[i] = off;
    }
    for node in &sim.cluster.nodes {
        for t in 0..n {
            node.liveness.set(host(t), in_ring(sim, t));
        }
    }
    sim.log("end: every fault healed, the network fast, every node sees every other up".into());
    if let Err(e) = topology::wait_for_changes(sim, driver).await {
        sim.fail(e);
        return;
    }
    let changed = sim.cluster.log.leader().epoch > super::cluster::FIRST_EPOCH;
    // Requests in flight time out (a read repair's wait is the longest, 10 s), and replays
    // under way finish or give their hints back.
    sleep(Duration::from_secs(12)).await;
    let settle_until = Instant::now() + SETTLE_MAX;
    while !sim.replaying.borrow().is_empty() && Instant::now() < settle_until {
        sleep(Duration::from_millis(100)).await;
    }
    // Hints for nodes gone from the ring go nowhere (Cassandra drops them with the node).
    let live_targets = |i: usize| -> Vec<hayate_cluster::node::HostId> {
        if !in_ring(sim, i) {
            return Vec::new();
        }
        sim.cluster.nodes[i]
            .coordinator
            .hinted_targets()
            .into_iter()
            .filter(|t| in_ring(sim, sim.cluster.index_of(*t)))
            .collect()
    };
    for _ in 0..FINAL_REPLAY_ROUNDS_MAX {
        let mut any = false;
        for (i, node) in sim.cluster.nodes.iter().enumerate() {
            for target in live_targets(i) {
                any = true;
                let delivered = node.coordinator.replay_hints(target).await;
                sim.log(format!(
                    "end: n{i} replayed {delivered} hints to n{}",
                    sim.cluster.index_of(target)
                ));
            }
        }
        if !any {
            break;
        }
    }
    for i in 0..n {
        let left = live_targets(i);
        if !left.is_empty() {
            sim.fail(format!(
                "n{i} still holds hints for {left:?} after {FINAL_REPLAY_ROUNDS_MAX} replays with no fault"
            ));
            return;
        }
    }
    // Every request has had its answer or its timeout: nothing may wait any more.
    for (i, node) in sim
        .cluster
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| in_ring(sim, *i))
    {
        let pending = node.messaging.pending_requests();
        if pending > 0 {
            sim.fail(format!(
                "end: n{i} still waits for {pending} answers after every request ended"
            ));
            return;
        }
    }
    if let Err(e) = check_rings(sim) {
        sim.fail(e);
        return;
    }
    // Every member drops what it no longer holds (the follower did after each change, unless a
    // fault made its drain time out).
    for i in (0..n).filter(|&i| in_ring(sim, i)) {
        match sim.cluster.nodes[i].topology().drain_and_cleanup().await {
            Ok(report) if report.records > 0 => sim.log(format!(
                "end: n{i}'s cleanup dropped {} records of ranges it no longer holds",
                report.records
            )),
            Ok(_) => {}
            Err(e) => {
                sim.fail(format!("end: n{i}'s cleanup failed with no fault: {e}"));
                return;
            }
        }
    }
    // Without ring changes, hints alone bring every replica to the model. With them, a
    // write that was not acknowledged may have reached only a node that gave its range up,
    // or died: only the reads at ALL below make the replicas agree.
    if !changed {
        if let Err(e) = check_replicas(sim, "after every hint was replayed", true) {
            sim.fail(e);
            return;
        }
    }
    let members: Vec<usize> = (0..n).filter(|&i| in_ring(sim, i)).collect();
    // With every fault gone, every level is available: a write of every key at ALL succeeds.
    let keys = sim.model.borrow().keys.clone();
    for _ in 0..keys.len() {
        let coordinator = members[sim.rng().random_range(0..members.len())];
        let before = sim.counts.borrow().writes_acked;
        write(sim, "end", coordinator, Some(ConsistencyLevel::All)).await;
        if sim.counts.borrow().writes_acked == before {
            sim.fail(format!(
                "end: a write at ALL via n{coordinator} failed with no fault"
            ));
            return;
        }
    }
    let keys = sim.model.borrow().keys.clone();
    for key in keys {
        let coordinator = members[sim.rng().random_range(0..members.len())];
        let started_seq = sim.tick();
        let command = ReadCommand::Partition(PartitionRead {
            table: TABLE,
            token: key.token,
            partition: key.partition.clone(),
            start: Bound::Included(key.clustering.clone()),
            end: Bound::Included(key.clustering.clone()),
            reverse: false,
            limit: LIMIT_NONE,
        });
        let scope = sim.model.borrow().scope(&command);
        let result = sim.cluster.nodes[coordinator]
            .coordinator
            .read(ReadRequest {
                replication: &sim.cluster.replication,
                consistency: ConsistencyLevel::All,
                command,
                speculative_retry: SpeculativeRetry::Never,
            })
            .await;
        let finished_seq = sim.tick();
        let now_s = sim.now_s();
        let expected = sim.model.borrow().expected(&key, now_s);
        let got = match result {
            Ok(r) if changed => {
                // Every acknowledged write and every version read must be there, and no
                // acknowledged delete undone.
                let what = format!("end: the read of {key} at ALL via n{coordinator}");
                let check = ReadCheck {
                    what: &what,
                    scope,
                    guarantee: guarantee(
                        ConsistencyLevel::All,
                        &sim.cluster.replication,
                        &sim.cluster.data_centers,
                        &sim.cluster.nodes[coordinator].data_center,
                    ),
                    started_seq,
                    finished_seq,
                };
                if let Err(e) = sim.model.borrow_mut().check_read(&check, &r.rows, r.more, now_s) {
                    sim.fail(e);
                    return;
                }
                continue;
            }
            Ok(r) => r.rows.first().map(|r| normalize(&r.row, now_s)),
            Err(e) => {
                sim.fail(format!(
                    "end: the read of {key} at ALL via n{coordinator} failed with no fault: {e:?}"
                ));
                return;
            }
        };
        if got != expected {
            sim.fail(format!(
                "end: the read of {key} at ALL via n{coordinator} returned {got:?}, the model says {expected:?}"
            ));
            return;
        }
    }
    sleep(Duration::from_secs(3)).await;
    if let Err(e) = check_replicas(sim, "after a write and a read of every key at ALL", !changed) {
        sim.fail(e);
    }
}

/// One ring at the same epoch on every node in it: the log's, in its view and in its
/// coordinator.
fn check_rings(sim: &Sim) -> Result<(), String> {
    let leader = sim.cluster.log.leader();
    if let Some(c) = &leader.change {
        return Err(format!("end: {c} is still in progress"));
    }
    for i in (0..sim.n()).filter(|&i| in_ring(sim, i)) {
        let node = &sim.cluster.nodes[i];
        let view = node.log.current();
        if *view != *leader {
            return Err(format!(
                "end: n{i}'s metadata is at epoch {} with members {:?}, the log's at epoch {} with {:?}",
                view.epoch,
                view.members.keys().collect::<Vec<_>>(),
                leader.epoch,
                leader.members.keys().collect::<Vec<_>>()
            ));
        }
        let planned = node.coordinator.topology();
        let ring = leader
            .ring()
            .map_err(|e| format!("end: the ring does not build: {e}"))?;
        if planned.epoch() != leader.epoch
            || planned.ring().nodes() != ring.nodes()
            || planned.pending_ring().is_some()
        {
            return Err(format!(
                "end: n{i}'s coordinator plans on ring epoch {} (pending ring: {}), the log is at epoch {}",
                planned.epoch(),
                planned.pending_ring().is_some(),
                leader.epoch
            ));
        }
        if !leader.members.contains_key(&node.host) {
            return Err(format!("end: n{i} serves but is not a member of the ring"));
        }
    }
    let members = leader.members.len();
    let serving = (0..sim.n()).filter(|&i| in_ring(sim, i)).count();
    if members != serving {
        return Err(format!(
            "end: the ring has {members} members but {serving} nodes are in it"
        ));
    }
    sim.log(format!("end: every node has the ring of epoch {}", leader.epoch));
    Ok(())
}

/// Every replica (on the final ring) of every key holds the same row: with `exact`, exactly
/// the model's merge of every write not refused, otherwise one made only of writes not
/// refused. No node holds a key it is not a replica of.
fn check_replicas(sim: &Sim, when: &str, exact: bool) -> Result<(), String> {
    let now_s = sim.now_s();
    let model = sim.model.borrow();
    let all = ReadCommand::Range(RangeRead {
        table: TABLE,
        start: RangeStart::Token(i64::MIN),
        end_token: i64::MAX,
        limit: usize::MAX,
        index: None,
    });
    let ring: TokenRing = sim
        .cluster
        .log
        .leader()
        .ring()
        .map_err(|e| format!("{when}: the ring does not build: {e}"))?;
    let mut held: Vec<BTreeMap<Key, Row>> = Vec::new();
    for (i, node) in sim.cluster.nodes.iter().enumerate() {
        if !in_ring(sim, i) {
            held.push(BTreeMap::new());
            continue;
        }
        let response = node
            .engine
            .read(&all)
            .map_err(|e| format!("{when}: n{i}'s replica cannot be read: {e}"))?;
        held.push(
            response
                .rows
                .into_iter()
                .map(|r| (Key::of(&r), normalize(&r.row, now_s)))
                .collect(),
        );
    }
    let mut problems = Vec::new();
    for key in &model.keys {
        let replicas = ring.replicas_for(&sim.cluster.replication, key.token);
        let expected = if exact {
            model.expected(key, now_s)
        } else {
            // What the first replica holds, which every other must hold too.
            let first = sim.cluster.index_of(replicas[0]);
            held[first].get(key).cloned()
        };
        for (i, node) in sim
            .cluster
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| in_ring(sim, *i))
        {
            let has = held[i].get(key);
            let want = if replicas.contains(&node.host) {
                expected.as_ref()
            } else {
                None
            };
            if has != want {
                let mut writes: Vec<String> = model
                    .writes
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| w.key == *key)
                    .map(|(id, w)| format!("#{id} {:?} {} {:?}", w.kind, version(&w.row), w.outcome))
                    .collect();
                let older = writes.len().saturating_sub(WRITES_SHOWN_MAX);
                writes.drain(..older);
                problems.push(format!(
                    "{key} on n{i}: holds {:?}, should hold {:?}; the key's last writes: {}",
                    has.map(version),
                    want.map(version),
                    writes.join("; ")
                ));
            }
        }
        if let Some(e) = &expected {
            model.check_written(key, e)?;
        }
    }
    if problems.is_empty() {
        sim.log(format!("end: replicas agree with the model {when}"));
        Ok(())
    } else {
        Err(format!(
            "replicas differ from the model {when}:\n  {}",
            problems.join("\n  ")
        ))
    }
}
