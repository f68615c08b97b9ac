//! The end of a run: every fault healed, every hint replayed, and the replicas checked
//! against the model.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use std::time::Duration;

use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{ReadRequest, SpeculativeRetry};
use hayate_cluster::replica::{PartitionRead, RangeRead, RangeStart, ReadCommand, Replica};
use hayate_storage::Row;
use rand::Rng;
use tokio::time::{sleep, Instant};

use super::clients::{write, LIMIT_NONE};
use super::cluster::host;
use super::model::{normalize, version, Key, TABLE};
use super::Sim;

/// How long the end of a run waits for hint replays still under way, in virtual time.
const SETTLE_MAX: Duration = Duration::from_secs(600);
/// Rounds of hint replay at the end before hints that will not go are a failure.
const FINAL_REPLAY_ROUNDS_MAX: usize = 5;
/// A key's writes listed when its replicas differ from the model: the latest ones.
const WRITES_SHOWN_MAX: usize = 8;

/// Ends every fault, replays every hint, and checks that every replica holds what the model
/// says, before and after a read of every key at ALL.
pub(super) async fn finish(sim: &Rc<Sim>) {
    let n = sim.n();
    let network = &sim.cluster.network;
    network.heal_all();
    network.set_drop_probability(0.0);
    network.set_duplicate_probability(0.0);
    // Faster than the shortest timeout a run may draw.
    network.set_delay_ms(0, 1);
    sim.partitions.borrow_mut().clear();
    sim.stopped.borrow_mut().iter_mut().for_each(|s| *s = false);
    for node in &sim.cluster.nodes {
        for t in 0..n {
            node.liveness.set(host(t), true);
        }
    }
    sim.log("end: every fault healed, the network fast, every node sees every other up".into());
    // Requests in flight time out (a read repair's wait is the longest, 10 s), and replays
    // under way finish or give their hints back.
    sleep(Duration::from_secs(12)).await;
    let settle_until = Instant::now() + SETTLE_MAX;
    while !sim.replaying.borrow().is_empty() && Instant::now() < settle_until {
        sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..FINAL_REPLAY_ROUNDS_MAX {
        let mut any = false;
        for (i, node) in sim.cluster.nodes.iter().enumerate() {
            for target in node.coordinator.hinted_targets() {
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
    for (i, node) in sim.cluster.nodes.iter().enumerate() {
        let left = node.coordinator.hinted_targets();
        if !left.is_empty() {
            sim.fail(format!(
                "n{i} still holds hints for {left:?} after {FINAL_REPLAY_ROUNDS_MAX} replays with no fault"
            ));
            return;
        }
    }
    // Every request has had its answer or its timeout: nothing may wait any more.
    for (i, node) in sim.cluster.nodes.iter().enumerate() {
        let pending = node.messaging.pending_requests();
        if pending > 0 {
            sim.fail(format!(
                "end: n{i} still waits for {pending} answers after every request ended"
            ));
            return;
        }
    }
    if let Err(e) = check_replicas(sim, "after every hint was replayed") {
        sim.fail(e);
        return;
    }
    // With every fault gone, every level is available: a write of every key at ALL succeeds.
    let keys = sim.model.borrow().keys.clone();
    for _ in 0..keys.len() {
        let coordinator = sim.rng().random_range(0..n);
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
        let coordinator = sim.rng().random_range(0..n);
        let command = ReadCommand::Partition(PartitionRead {
            table: TABLE,
            token: key.token,
            partition: key.partition.clone(),
            start: Bound::Included(key.clustering.clone()),
            end: Bound::Included(key.clustering.clone()),
            reverse: false,
            limit: LIMIT_NONE,
        });
        let result = sim.cluster.nodes[coordinator]
            .coordinator
            .read(ReadRequest {
                replication: &sim.cluster.replication,
                consistency: ConsistencyLevel::All,
                command,
                speculative_retry: SpeculativeRetry::Never,
            })
            .await;
        let now_s = sim.now_s();
        let expected = sim.model.borrow().expected(&key, now_s);
        let got = match result {
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
    if let Err(e) = check_replicas(sim, "after a write and a read of every key at ALL") {
        sim.fail(e);
    }
}

/// Every replica of every key holds exactly the model's merge of every write not refused, and
/// no node holds a key it is not a replica of.
fn check_replicas(sim: &Sim, when: &str) -> Result<(), String> {
    let now_s = sim.now_s();
    let model = sim.model.borrow();
    let all = ReadCommand::Range(RangeRead {
        table: TABLE,
        start: RangeStart::Token(i64::MIN),
        end_token: i64::MAX,
        limit: usize::MAX,
    });
    let mut held: Vec<BTreeMap<Key, Row>> = Vec::new();
    for (i, node) in sim.cluster.nodes.iter().enumerate() {
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
        let replicas = sim.cluster.ring.replicas_for(&sim.cluster.replication, key.token);
        let expected = model.expected(key, now_s);
        for (i, node) in sim.cluster.nodes.iter().enumerate() {
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
