//! Topology changes while the clients run: a spare node joins, a member decommissions, a node
//! killed for good is replaced by a spare with a new host id (on its tokens) or removed by
//! another member, each driven by the real [`hayate_cluster::topology::TopologyService`]
//! through the simulated metadata log, one at a time, retried as an operator would until it
//! finishes. In some, the change's driver is killed mid-stream (its task dropped, the node cut
//! off) and restarted with a new service, so that it resumes from its checkpoint.
//!
//! [`watch_ring`] checks each state the log's leader applies: every key keeps its replicas on
//! the ring (and on the ring a change leads to), and when a change finishes, every version a
//! read is bound to see is on as many of the key's new replicas as its level promised.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hayate_cluster::metadata::{ChangeKind, ClusterMetadata, Command, CommandResult, MemberStatus};
use hayate_cluster::replica::{PartitionRead, ReadCommand, Replica};
use hayate_cluster::topology::{RingLog, TopologyError, TopologyService};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use super::clients::LIMIT_NONE;
use super::cluster::{host, Layout};
use super::model::{dominates, factors, version, Key, TABLE};
use super::{pick, Role, Sim};

/// Tries of one change before the run fails: with the faults healed at the end, a change that
/// still does not finish is stuck.
const TRIES_MAX: usize = 40;
/// How long after a failed try an operator tries again.
const RETRY_PAUSE: Duration = Duration::from_secs(2);
/// How long the end of a run waits for the change under way to finish.
pub(super) const FINISH_MAX: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Join,
    Decommission,
    Replace,
    Remove,
}

/// One change a run makes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Change {
    pub kind: Kind,
    /// Kill the change's driver while it streams, and restart it.
    pub kill_driver: bool,
}

/// Draws the changes of a run, and the data center of each spare node they need.
pub(super) fn draw_plan(rng: &mut StdRng, layout: &mut Layout) -> Vec<Change> {
    let count = pick(rng, &[(0usize, 2), (1, 3), (2, 2), (3, 1)]);
    // `HAYATE_SIM_TOPOLOGY=0` keeps the ring still, to tell a fault of the changes from one of
    // the rest.
    if std::env::var("HAYATE_SIM_TOPOLOGY").is_ok_and(|v| v == "0") {
        return Vec::new();
    }
    let mut dcs: Vec<String> = layout.node_dcs.clone();
    dcs.dedup();
    (0..count)
        .map(|_| {
            let kind = pick(
                rng,
                &[
                    (Kind::Join, 3),
                    (Kind::Decommission, 2),
                    (Kind::Replace, 2),
                    (Kind::Remove, 2),
                ],
            );
            if matches!(kind, Kind::Join | Kind::Replace) {
                let dc = dcs[rng.random_range(0..dcs.len())].clone();
                layout.spare_dcs.push(dc);
            }
            Change {
                kind,
                kill_driver: rng.random_bool(0.4),
            }
        })
        .collect()
}

/// Runs the plan's changes one after another while the clients run; a change under way when
/// the clients stop is driven to its end.
pub(super) async fn drive(sim: Rc<Sim>, plan: Vec<Change>) {
    let mut spares = sim.cluster.members..sim.n();
    for change in plan {
        let pause = Duration::from_millis(sim.rng().random_range(500..6000));
        sleep(pause).await;
        if sim.failed() || sim.done.get() {
            return;
        }
        let done = match change.kind {
            Kind::Join => {
                let spare = spares.next().expect("a spare for each join");
                join(&sim, spare, None, change.kill_driver).await
            }
            Kind::Replace => {
                let spare = spares.next().expect("a spare for each replacement");
                let dc = sim.cluster.nodes[spare].data_center.clone();
                match pick_member(&sim, |i| sim.cluster.nodes[i].data_center == dc) {
                    Some(victim) => {
                        kill_for_good(&sim, victim);
                        join(&sim, spare, Some(victim), change.kill_driver).await
                    }
                    None => {
                        sim.log(format!("topology: no member of {dc} to replace"));
                        Ok(())
                    }
                }
            }
            Kind::Decommission | Kind::Remove => {
                let Some(victim) = pick_member(&sim, |i| can_leave(&sim, i)) else {
                    sim.log(
                        "topology: no member can leave without going below the replication factor".into(),
                    );
                    continue;
                };
                if change.kind == Kind::Decommission {
                    decommission(&sim, victim, change.kill_driver).await
                } else {
                    kill_for_good(&sim, victim);
                    remove(&sim, victim, change.kill_driver).await
                }
            }
        };
        if let Err(e) = done {
            sim.fail(e);
            return;
        }
        sim.counts.borrow_mut().changes += 1;
    }
}

/// A member that is up and satisfies `ok`, drawn from the seed.
fn pick_member(sim: &Sim, ok: impl Fn(usize) -> bool) -> Option<usize> {
    let candidates: Vec<usize> = (0..sim.n())
        .filter(|&i| sim.roles.borrow()[i] == Role::Member && !sim.stopped.borrow()[i] && ok(i))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let i = sim.rng().random_range(0..candidates.len());
    Some(candidates[i])
}

/// True if the ring keeps as many members in every data center as it has replicas there
/// without `node`.
fn can_leave(sim: &Sim, node: usize) -> bool {
    let rf = factors(&sim.cluster.replication, &sim.cluster.data_centers);
    let members = sim.cluster.log.leader().members.clone();
    let in_dc = |dc: &str| {
        members
            .values()
            .filter(|r| r.info.placement.data_center == dc && r.info.host_id != host(node))
            .count()
    };
    let total_left = members.len() - 1;
    total_left >= sim.cluster.replication.total_factor() && rf.iter().all(|(dc, &f)| in_dc(dc) >= f)
}

/// Cuts `node` off (the network, the metadata log) as a process that stopped.
pub(super) fn cut_off(sim: &Sim, node: usize) {
    sim.cluster.network.isolate(host(node));
    sim.cluster.log.set_cut(node, true);
    sim.stopped.borrow_mut()[node] = true;
}

/// Brings `node` back on the network and the log.
fn bring_back(sim: &Sim, node: usize) {
    sim.cluster.network.rejoin(host(node));
    sim.cluster.log.set_cut(node, false);
    sim.stopped.borrow_mut()[node] = false;
}

/// Every node's failure detector convicts `node` at once (the driver of a removal or a
/// replacement waits for that), and its requests there fail.
fn convict(sim: &Sim, node: usize) {
    for (o, other) in sim.cluster.nodes.iter().enumerate() {
        if o != node {
            other.convict(host(node));
        }
    }
}

/// Kills `node` for good: cut off, never back, its engine's data lost to the model, which
/// takes one copy off every version it held.
fn kill_for_good(sim: &Sim, node: usize) {
    cut_off(sim, node);
    sim.roles.borrow_mut()[node] = Role::Gone;
    sim.lost.borrow_mut().insert(node);
    convict(sim, node);
    let now_s = sim.now_s();
    let n = &sim.cluster.nodes[node];
    let lost = sim.model.borrow_mut().lose_copies(&n.data_center, |key, row| {
        holds(n.engine.as_ref(), key, row, now_s)
    });
    sim.log(format!(
        "topology: n{node} killed for good ({lost} promised versions lose a copy)"
    ));
}

/// True if `engine` holds `row` of `key`, or what wins over it.
pub(super) fn holds(engine: &dyn Replica, key: &Key, row: &hayate_storage::Row, now_s: u32) -> bool {
    let command = ReadCommand::Partition(PartitionRead {
        table: TABLE,
        token: key.token,
        partition: key.partition.clone(),
        start: std::ops::Bound::Included(key.clustering.clone()),
        end: std::ops::Bound::Included(key.clustering.clone()),
        reverse: false,
        limit: LIMIT_NONE,
    });
    engine
        .read(&command)
        .ok()
        .and_then(|r| r.rows.first().map(|s| dominates(&s.row, row, now_s)))
        .unwrap_or(false)
}

/// Tokens for a joining node, none owned already.
fn fresh_tokens(sim: &Sim, count: usize) -> Vec<i64> {
    let taken: Vec<i64> = sim
        .cluster
        .log
        .leader()
        .members
        .values()
        .flat_map(|r| r.tokens.clone())
        .collect();
    let mut tokens = Vec::new();
    while tokens.len() < count {
        let t: i64 = sim.rng().random();
        if !taken.contains(&t) && !tokens.contains(&t) {
            tokens.push(t);
        }
    }
    tokens
}

/// What a driver task returns.
type Driven = Result<String, TopologyError>;

/// Runs `op` on `node`'s topology service as a task; if `kill` and it is still running after
/// a while, kills it there (the task dropped, the node cut off), restarts the node after a
/// while with a new service, and runs `op` again, which resumes the change. Then waits for it.
async fn run_killable<F, Fut>(sim: &Rc<Sim>, node: usize, what: &str, kill: bool, op: F) -> Driven
where
    F: Fn(Arc<TopologyService>) -> Fut,
    Fut: std::future::Future<Output = Driven> + 'static,
{
    let task: JoinHandle<Driven> = tokio::task::spawn_local(op(sim.cluster.nodes[node].topology()));
    if !kill {
        return task.await.expect("a topology driver panicked");
    }
    let after = Duration::from_millis(sim.rng().random_range(20..1500));
    sleep(after).await;
    if task.is_finished() {
        return task.await.expect("a topology driver panicked");
    }
    task.abort();
    cut_off(sim, node);
    sim.held_down.borrow_mut().insert(node);
    let down = Duration::from_millis(sim.rng().random_range(500..5000));
    sim.log(format!(
        "topology: killed n{node} driving {what} mid-stream; restarting it in {down:?}"
    ));
    sleep(down).await;
    bring_back(sim, node);
    sim.held_down.borrow_mut().remove(&node);
    let topology = sim.cluster.nodes[node].restart_topology();
    sim.log(format!("topology: n{node} restarted, resuming {what}"));
    tokio::task::spawn_local(op(topology))
        .await
        .expect("a topology driver panicked")
}

/// `spare` joins the ring, or replaces `replacing` (killed for good already).
async fn join(sim: &Rc<Sim>, spare: usize, replacing: Option<usize>, kill: bool) -> Result<(), String> {
    let node = &sim.cluster.nodes[spare];
    bring_back(sim, spare);
    sim.roles.borrow_mut()[spare] = Role::Joining;
    let tokens = match replacing {
        Some(old) => sim.cluster.log.leader().members[&host(old)].tokens.clone(),
        None => fresh_tokens(sim, sim.layout.tokens_per_node),
    };
    let what = match replacing {
        Some(old) => format!("the replacement of n{old} by n{spare}"),
        None => format!("the join of n{spare}"),
    };
    let mut last = String::new();
    for attempt in 1..=TRIES_MAX {
        if sim.failed() {
            return Ok(());
        }
        if attempt > 1 && normal_member(sim, spare) {
            // An earlier try finished it, but its answer was lost.
            sim.roles.borrow_mut()[spare] = Role::Member;
            sim.log(format!("topology: {what} finished (by an earlier try)"));
            return Ok(());
        }
        // Start the change unless it is in progress (an earlier try's start took even if its
        // answer was lost).
        let view = node.log.current();
        let started = view
            .change
            .as_ref()
            .is_some_and(|c| c.kind.arriving() == Some(host(spare)));
        if !started {
            let command = match replacing {
                Some(old) => Command::StartReplace {
                    old: host(old),
                    new: node.record(tokens.clone()),
                },
                None => Command::StartJoin(node.record(tokens.clone())),
            };
            match node.log.propose(command).await {
                Ok(CommandResult::Refused(reason)) => {
                    last = failed_try(sim, &what, attempt, format!("the start was refused: {reason}")).await;
                    continue;
                }
                Ok(_) => sim.log(format!("topology: {what} started")),
                Err(e) => {
                    last = failed_try(sim, &what, attempt, format!("the start was not confirmed: {e}")).await;
                    continue;
                }
            }
        }
        let result = run_killable(sim, spare, &what, kill && attempt == 1, |t| async move {
            t.join().await.map(|()| String::new())
        })
        .await;
        match result {
            Ok(_) => {
                sim.roles.borrow_mut()[spare] = Role::Member;
                sim.log(format!("topology: {what} finished"));
                return Ok(());
            }
            Err(e) => last = failed_try(sim, &what, attempt, e.to_string()).await,
        }
    }
    Err(gave_up(&what, &last))
}

async fn decommission(sim: &Rc<Sim>, node: usize, kill: bool) -> Result<(), String> {
    sim.roles.borrow_mut()[node] = Role::Leaving;
    let what = format!("the decommission of n{node}");
    sim.log(format!("topology: {what} begins"));
    let mut last = String::new();
    for attempt in 1..=TRIES_MAX {
        if sim.failed() {
            return Ok(());
        }
        let result = if attempt > 1 && left_ring(sim, node) {
            // An earlier try finished it, and was killed before it could say so.
            Ok(String::new())
        } else {
            run_killable(sim, node, &what, kill && attempt == 1, |t| async move {
                t.decommission().await.map(|()| String::new())
            })
            .await
        };
        match result {
            Ok(_) => {
                // It left the ring; its process stops.
                cut_off(sim, node);
                sim.roles.borrow_mut()[node] = Role::Gone;
                convict(sim, node);
                sim.log(format!("topology: {what} finished"));
                return Ok(());
            }
            Err(e) => last = failed_try(sim, &what, attempt, e.to_string()).await,
        }
    }
    Err(gave_up(&what, &last))
}

/// Whether `node` is a normal member of the ring the log's leader holds, with no change in
/// progress.
fn normal_member(sim: &Sim, node: usize) -> bool {
    let leader = sim.cluster.log.leader();
    leader.change.is_none()
        && leader
            .members
            .get(&host(node))
            .is_some_and(|m| m.status == MemberStatus::Normal)
}

/// Whether `node` has left the ring the log's leader holds, with no change in progress.
fn left_ring(sim: &Sim, node: usize) -> bool {
    let leader = sim.cluster.log.leader();
    !leader.members.contains_key(&host(node)) && leader.change.is_none()
}

/// Logs a failed try of `what` and pauses before the next; returns `reason`, to keep as the last.
async fn failed_try(sim: &Sim, what: &str, attempt: usize, reason: String) -> String {
    sim.log(format!("topology: {what}, try {attempt}: {reason}"));
    sleep(RETRY_PAUSE).await;
    reason
}

/// Why a change's driver stopped trying.
fn gave_up(what: &str, last: &str) -> String {
    format!("{what} did not finish after {TRIES_MAX} tries; the last: {last}")
}

/// Another member removes the dead `dead`; if `kill`, that driver is killed mid-stream.
async fn remove(sim: &Rc<Sim>, dead: usize, kill: bool) -> Result<(), String> {
    let what = format!("the removal of n{dead}");
    let mut last = String::new();
    for attempt in 1..=TRIES_MAX {
        if sim.failed() {
            return Ok(());
        }
        if attempt > 1 && left_ring(sim, dead) {
            // An earlier try finished it, and its driver was killed (or its answer lost)
            // before it could say so.
            sim.log(format!("topology: {what} finished (by an earlier try)"));
            return Ok(());
        }
        let Some(driver) = pick_member(sim, |_| true) else {
            sleep(RETRY_PAUSE).await;
            continue;
        };
        sim.log(format!("topology: n{driver} drives {what}, try {attempt}"));
        let result = run_killable(sim, driver, &what, kill && attempt == 1, move |t| async move {
            t.remove(host(dead)).await
        })
        .await;
        match result {
            Ok(done) => {
                sim.log(format!("topology: {what} finished: {done}"));
                return Ok(());
            }
            Err(e) => last = failed_try(sim, &what, attempt, e.to_string()).await,
        }
    }
    Err(gave_up(&what, &last))
}

/// Follows the log's leader: logs each change, checks that every key keeps its replicas on
/// every ring, and, when a change finishes, that the new replicas hold what was promised.
pub(super) async fn watch_ring(sim: Rc<Sim>) {
    let mut watch = sim.cluster.log.watch_leader();
    let mut before = watch.borrow_and_update().clone();
    while watch.changed().await.is_ok() {
        let now = watch.borrow_and_update().clone();
        sim.log(format!(
            "log: epoch {} applied: {}",
            now.epoch,
            describe(&before, &now)
        ));
        if let Err(e) = replicas_everywhere(&sim, &now) {
            sim.fail(format!("at epoch {}: {e}", now.epoch));
            return;
        }
        if let (Some(change), None) = (&before.change, &now.change) {
            let finished = match change.kind.arriving() {
                Some(new) => now
                    .members
                    .get(&new)
                    .is_some_and(|r| r.status == MemberStatus::Normal),
                None => !now.members.contains_key(&change.kind.subject()),
            };
            if finished {
                if let Err(e) = promised_on_new_replicas(&sim, &now) {
                    sim.fail(format!("at the finish of {change} (epoch {}): {e}", now.epoch));
                    return;
                }
            }
        }
        before = now;
    }
}

fn describe(before: &ClusterMetadata, now: &ClusterMetadata) -> String {
    match (&before.change, &now.change) {
        (None, Some(c)) => format!("{c} started"),
        (Some(c), None) => {
            let aborted = match c.kind {
                ChangeKind::Join { node } | ChangeKind::Replace { new: node, .. } => {
                    !now.members.contains_key(&node)
                }
                ChangeKind::Leave { node } | ChangeKind::Remove { node } => now.members.contains_key(&node),
            };
            format!("{c} {}", if aborted { "aborted" } else { "finished" })
        }
        _ => "no change of the ring".to_owned(),
    }
}

/// Every key has as many replicas as the replication factor, in total and in each data center,
/// on the ring and on the ring the change in progress leads to.
fn replicas_everywhere(sim: &Sim, m: &ClusterMetadata) -> Result<(), String> {
    let rf = factors(&sim.cluster.replication, &sim.cluster.data_centers);
    let rings = [
        ("ring", m.ring()),
        ("pending ring", m.pending_ring().unwrap_or_else(|| m.ring())),
    ];
    for (name, ring) in rings {
        let ring = ring.map_err(|e| format!("the {name} does not build: {e}"))?;
        for key in &sim.model.borrow().keys {
            let replicas = ring.replicas_for(&sim.cluster.replication, key.token);
            let mut per_dc: BTreeMap<&str, usize> = BTreeMap::new();
            for h in &replicas {
                *per_dc
                    .entry(sim.cluster.nodes[sim.cluster.index_of(*h)].data_center.as_str())
                    .or_default() += 1;
            }
            let short = rf
                .iter()
                .find(|(dc, &f)| per_dc.get(dc.as_str()).copied().unwrap_or(0) < f);
            if replicas.len() < sim.cluster.replication.total_factor() || short.is_some() {
                return Err(format!(
                    "{key} has only the replicas {replicas:?} on the {name}, fewer than the replication factor"
                ));
            }
        }
    }
    Ok(())
}

/// At a change's finish: every version a read is bound to see is on as many of its key's new
/// replicas (nodes killed for good not counted) as its level promised.
fn promised_on_new_replicas(sim: &Sim, m: &ClusterMetadata) -> Result<(), String> {
    let ring = m.ring().map_err(|e| format!("the ring does not build: {e}"))?;
    let now_s = sim.now_s();
    let seq = sim.tick();
    let model = sim.model.borrow();
    let lost = sim.lost.borrow();
    for key in &model.keys {
        let replicas = ring.replicas_for(&sim.cluster.replication, key.token);
        for (row, promised, what) in model.promised(key, seq) {
            let mut total = 0;
            let mut per_dc: BTreeMap<&str, usize> = BTreeMap::new();
            let mut holders = Vec::new();
            for h in &replicas {
                let i = sim.cluster.index_of(*h);
                let node = &sim.cluster.nodes[i];
                if !lost.contains(&i) && holds(node.engine.as_ref(), key, row, now_s) {
                    total += 1;
                    *per_dc.entry(node.data_center.as_str()).or_default() += 1;
                    holders.push(format!("n{i}"));
                }
            }
            let short = promised
                .per_dc
                .iter()
                .find(|(dc, &need)| per_dc.get(dc.as_str()).copied().unwrap_or(0) < need);
            if total < promised.total || short.is_some() {
                let names: Vec<String> = replicas
                    .iter()
                    .map(|h| format!("n{}", sim.cluster.index_of(*h)))
                    .collect();
                return Err(format!(
                    "{key}'s {what} ({}) is on only [{}] of its new replicas [{}], fewer than its level \
                     promised ({promised:?}): a write acknowledged, or a version read, was lost by the change",
                    version(row),
                    holders.join(", "),
                    names.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// At the end: waits for the change under way, if any, to finish (its driver is still at it).
pub(super) async fn wait_for_changes(sim: &Sim, driver: JoinHandle<()>) -> Result<(), String> {
    let deadline = Instant::now() + FINISH_MAX;
    while !driver.is_finished() {
        if Instant::now() >= deadline {
            driver.abort();
            return Err(format!(
                "end: a topology change still had not finished {FINISH_MAX:?} after every fault was healed"
            ));
        }
        sleep(Duration::from_millis(100)).await;
    }
    driver.await.expect("the topology driver panicked");
    let m = sim.cluster.log.leader();
    match &m.change {
        Some(c) if !sim.failed() => Err(format!("end: {c} is still in progress with no driver")),
        _ => Ok(()),
    }
}
