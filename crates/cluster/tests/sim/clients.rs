//! Clients: writes, deletes and reads at random levels against random coordinators, each
//! checked against the model as it returns, and against the replicas themselves.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use std::time::Duration;

use hayate_cluster::consistency::{ConsistencyLevel, Replication};
use hayate_cluster::coordinator::{
    CoordinatorError, ReadRequest, ReadResult, SpeculativeRetry, WriteRequest, WriteType,
};
use hayate_cluster::replica::{
    Mutation, MutationKind, PartitionRead, RangeRead, RangeStart, ReadCommand, Replica,
};
use hayate_cluster::ring::TokenRing;
use hayate_storage::{Cell as StoredCell, Clock, Row};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::time::sleep;

use super::model::{self, guarantee, version, Guarantee, Key, Outcome, ReadCheck, WriteKind, COLUMN, TABLE};
use super::{pick, Sim};

/// A read's "no limit".
pub(super) const LIMIT_NONE: usize = 1000;
/// Pages a client scan reads at most before it gives up on reaching the end.
const SCAN_PAGES_MAX: usize = 64;

#[derive(Clone, Copy, Debug)]
enum Op {
    Write,
    Point,
    Slice,
    Range,
    Scan,
}

pub(super) async fn client(sim: Rc<Sim>, id: usize, ops: usize) {
    let name = format!("c{id}");
    for _ in 0..ops {
        let (think_ms, op) = {
            let mut rng = sim.rng();
            let think_ms = rng.random_range(0..300u64);
            let op = pick(
                &mut rng,
                &[
                    (Op::Write, 50),
                    (Op::Point, 20),
                    (Op::Slice, 12),
                    (Op::Range, 10),
                    (Op::Scan, 8),
                ],
            );
            (think_ms, op)
        };
        sleep(Duration::from_millis(think_ms)).await;
        if sim.failed() {
            return;
        }
        let Some(coordinator) = sim.pick_coordinator() else {
            continue;
        };
        match op {
            Op::Write => write(&sim, &name, coordinator, None).await,
            Op::Point | Op::Slice | Op::Range => {
                let command = read_command(&sim, op);
                read(&sim, &name, coordinator, command, "read").await;
            }
            Op::Scan => scan(&sim, &name, coordinator).await,
        }
    }
}

fn write_levels(sim: &Sim) -> Vec<(ConsistencyLevel, u32)> {
    use ConsistencyLevel::*;
    let mut levels = vec![(Any, 1), (One, 3), (Quorum, 6), (All, 2)];
    if sim.cluster.replication.total_factor() >= 2 {
        levels.push((Two, 1));
    }
    if matches!(sim.cluster.replication, Replication::NetworkTopology { .. }) {
        levels.extend([(LocalQuorum, 3), (EachQuorum, 2), (LocalOne, 2)]);
    }
    levels
}

fn read_levels(sim: &Sim) -> Vec<(ConsistencyLevel, u32)> {
    use ConsistencyLevel::*;
    let mut levels = vec![(One, 3), (Quorum, 6), (All, 2)];
    if matches!(sim.cluster.replication, Replication::NetworkTopology { .. }) {
        levels.extend([(LocalQuorum, 3), (EachQuorum, 2), (LocalOne, 2)]);
    }
    levels
}

/// One write (of one or two rows) at `level`, or at a random level.
pub(super) async fn write(sim: &Rc<Sim>, client: &str, coordinator: usize, level: Option<ConsistencyLevel>) {
    let node = &sim.cluster.nodes[coordinator];
    sim.sync_clocks();
    let (level, mutations, ids, what) = {
        let mut rng = sim.rng();
        let level = level.unwrap_or_else(|| pick(&mut rng, &write_levels(sim)));
        let count = if rng.random_bool(0.1) { 2 } else { 1 };
        let mut model = sim.model.borrow_mut();
        let mut mutations = Vec::new();
        let mut ids = Vec::new();
        let mut what = Vec::new();
        let mut partitions_used = Vec::new();
        for _ in 0..count {
            let key = model.keys[rng.random_range(0..model.keys.len())].clone();
            if partitions_used.contains(&key.partition) {
                continue;
            }
            partitions_used.push(key.partition.clone());
            // The client's timestamp, from the coordinator's clock as the server takes it,
            // sometimes with the microseconds a real clock would show between ticks.
            let jitter_us = if rng.random_bool(0.7) {
                rng.random_range(0..1000)
            } else {
                0
            };
            let ts = node.clock.now_us() + jitter_us;
            let now_s = node.clock.now_s();
            let kind = pick(
                &mut rng,
                &[
                    (WriteKind::Upsert, 70),
                    (WriteKind::Delete, 22),
                    (WriteKind::Ttl, 8),
                ],
            );
            let id = model.next_id();
            let value = id.to_be_bytes().to_vec();
            let row = match kind {
                WriteKind::Upsert => Row {
                    cells: vec![StoredCell::live(COLUMN, ts, value)],
                    ..Row::default()
                },
                WriteKind::Ttl => {
                    let ttl_s = rng.random_range(1..=20);
                    Row {
                        cells: vec![StoredCell::expiring(COLUMN, ts, value, ttl_s, now_s)],
                        ..Row::default()
                    }
                }
                WriteKind::Delete => Row::deleted(ts, now_s),
            };
            let issued = model.issue(key.clone(), row.clone(), kind);
            debug_assert_eq!(issued, id);
            what.push(format!("#{id} {kind:?} {} ts {ts}", sim.key_name(&key)));
            mutations.push(Mutation {
                table: TABLE,
                token: key.token,
                partition: key.partition.clone(),
                kind: MutationKind::Row {
                    clustering: key.clustering.clone(),
                    update: row,
                },
            });
            ids.push(id);
        }
        (level, mutations, ids, what.join(" + "))
    };
    let write_type = if mutations.len() > 1 {
        WriteType::UnloggedBatch
    } else {
        WriteType::Simple
    };
    sim.tick();
    sim.log(format!(
        "{client} write {what} at {} via n{coordinator}",
        level.name()
    ));
    // The ring the coordinator plans the write on: nothing runs between this and its plan.
    let planned = node.coordinator.topology();
    let result = node
        .coordinator
        .write(WriteRequest {
            replication: &sim.cluster.replication,
            consistency: level,
            mutations,
            write_type,
        })
        .await;
    let seq = sim.tick();
    let mut model = sim.model.borrow_mut();
    let mut counts = sim.counts.borrow_mut();
    match result {
        Ok(()) => {
            let g = guarantee(
                level,
                &sim.cluster.replication,
                &sim.cluster.data_centers,
                &node.data_center,
            );
            counts.writes_acked += 1;
            sim.log(format!("{client} write {what}: ok"));
            for &id in &ids {
                let w = &model.writes[id as usize];
                let promised = match held_by_replicas(sim, planned.ring(), &w.key, &w.row, &g) {
                    Ok(promised) => promised,
                    Err(e) => {
                        sim.fail(format!(
                            "{client} write {what} at {} was acknowledged (planned on ring epoch {}), but {e}",
                            level.name(),
                            planned.epoch()
                        ));
                        g.clone()
                    }
                };
                model.acknowledge(
                    id,
                    &promised,
                    seq,
                    &format!("{} via n{coordinator}", level.name()),
                );
            }
        }
        Err(CoordinatorError::Unavailable(u)) => {
            for &id in &ids {
                model.fail(id, Outcome::Refused);
            }
            counts.writes_refused += 1;
            sim.log(format!(
                "{client} write {what}: unavailable ({} of {} alive)",
                u.alive, u.required
            ));
        }
        Err(e) => {
            for &id in &ids {
                model.fail(id, Outcome::Maybe(e.to_string()));
            }
            counts.writes_maybe += 1;
            sim.log(format!("{client} write {what}: {e:?}"));
        }
    }
}

fn speculation(rng: &mut StdRng) -> SpeculativeRetry {
    pick(
        rng,
        &[
            (SpeculativeRetry::Percentile99, 4),
            (SpeculativeRetry::Never, 2),
            (SpeculativeRetry::Always, 1),
            (SpeculativeRetry::After(Duration::from_millis(20)), 2),
        ],
    )
}

fn limit(rng: &mut StdRng, small_max: usize) -> usize {
    if rng.random_bool(0.5) {
        LIMIT_NONE
    } else {
        rng.random_range(1..=small_max)
    }
}

fn read_command(sim: &Sim, op: Op) -> ReadCommand {
    let mut rng = sim.rng();
    let model = sim.model.borrow();
    let key = model.keys[rng.random_range(0..model.keys.len())].clone();
    let clusterings = model.keys.iter().filter(|k| k.partition == key.partition).count() as u8;
    match op {
        Op::Point => ReadCommand::Partition(PartitionRead {
            table: TABLE,
            token: key.token,
            partition: key.partition,
            start: Bound::Included(key.clustering.clone()),
            end: Bound::Included(key.clustering),
            reverse: false,
            limit: LIMIT_NONE,
        }),
        Op::Slice => {
            let bound = |rng: &mut StdRng| {
                let c = vec![rng.random_range(0..clusterings)];
                match rng.random_range(0..5) {
                    0 | 1 => Bound::Unbounded,
                    2 | 3 => Bound::Included(c),
                    _ => Bound::Excluded(c),
                }
            };
            let start = bound(&mut rng);
            let end = bound(&mut rng);
            ReadCommand::Partition(PartitionRead {
                table: TABLE,
                token: key.token,
                partition: key.partition,
                start,
                end,
                reverse: rng.random_bool(0.3),
                limit: limit(&mut rng, 3),
            })
        }
        _ => {
            let mut a = if rng.random_bool(0.3) {
                i64::MIN
            } else {
                rng.random()
            };
            let mut b = if rng.random_bool(0.3) {
                i64::MAX
            } else {
                rng.random()
            };
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            ReadCommand::Range(RangeRead {
                table: TABLE,
                start: RangeStart::Token(a),
                end_token: b,
                limit: limit(&mut rng, 5),
                index: None,
            })
        }
    }
}

fn describe(command: &ReadCommand) -> String {
    match command {
        ReadCommand::Partition(p) => format!(
            "{} {:?}..{:?}{} limit {}",
            String::from_utf8_lossy(&p.partition),
            p.start,
            p.end,
            if p.reverse { " reversed" } else { "" },
            p.limit
        ),
        ReadCommand::Range(r) => format!("tokens {:?}..={} limit {}", r.start, r.end_token, r.limit),
    }
}

/// One read, checked; returns its result if it succeeded.
async fn read(
    sim: &Rc<Sim>,
    client: &str,
    coordinator: usize,
    command: ReadCommand,
    label: &str,
) -> Option<ReadResult> {
    let node = &sim.cluster.nodes[coordinator];
    let (level, retry) = {
        let mut rng = sim.rng();
        (pick(&mut rng, &read_levels(sim)), speculation(&mut rng))
    };
    let what = format!(
        "{client} {label} {} at {} via n{coordinator}",
        describe(&command),
        level.name()
    );
    let scope = sim.model.borrow().scope(&command);
    let started_seq = sim.tick();
    sim.log(what.clone());
    let planned = node.coordinator.topology();
    let result = node
        .coordinator
        .read(ReadRequest {
            replication: &sim.cluster.replication,
            consistency: level,
            command,
            speculative_retry: retry,
        })
        .await;
    let finished_seq = sim.tick();
    match result {
        Ok(r) => {
            let rows: Vec<String> = r
                .rows
                .iter()
                .map(|row| format!("{} {}", Key::of(row), version(&row.row)))
                .collect();
            sim.log(format!(
                "{what}: [{}]{}",
                rows.join(", "),
                if r.more { " more" } else { "" }
            ));
            sim.counts.borrow_mut().reads_ok += 1;
            let check = ReadCheck {
                what: &what,
                scope,
                guarantee: guarantee(
                    level,
                    &sim.cluster.replication,
                    &sim.cluster.data_centers,
                    &node.data_center,
                ),
                started_seq,
                finished_seq,
            };
            let now_s = sim.now_s();
            if let Err(e) = sim.model.borrow_mut().check_read(&check, &r.rows, r.more, now_s) {
                sim.fail(e);
            }
            // Blocking read repair: what the read returned is on as many replicas as its
            // level counts before the answer goes out.
            for row in &r.rows {
                let key = Key::of(row);
                match held_by_replicas(sim, planned.ring(), &key, &row.row, &check.guarantee) {
                    Ok(promised) => sim.model.borrow_mut().promise(&key, finished_seq, &promised),
                    Err(e) => {
                        sim.fail(format!(
                            "{what} (planned on ring epoch {}) returned {key} {}, but {e}",
                            planned.epoch(),
                            version(&row.row)
                        ));
                        break;
                    }
                }
            }
            Some(r)
        }
        Err(e) => {
            sim.counts.borrow_mut().reads_failed += 1;
            sim.log(format!("{what}: {e:?}"));
            None
        }
    }
}

/// Checks, on the replicas themselves, that `row` (or what wins over it) is held by as many of
/// `key`'s replicas in `ring` (the one the request was planned on) as `g` promises: in total
/// and in each data center. Returns what is promised from now on: `g`, less the copies on
/// nodes killed for good.
pub(super) fn held_by_replicas(
    sim: &Sim,
    ring: &TokenRing,
    key: &Key,
    row: &Row,
    g: &Guarantee,
) -> Result<Guarantee, String> {
    let now_s = sim.now_s();
    let command = ReadCommand::Partition(PartitionRead {
        table: TABLE,
        token: key.token,
        partition: key.partition.clone(),
        start: Bound::Included(key.clustering.clone()),
        end: Bound::Included(key.clustering.clone()),
        reverse: false,
        limit: LIMIT_NONE,
    });
    let mut total = 0usize;
    let mut per_dc: BTreeMap<&str, usize> = BTreeMap::new();
    let mut holders = Vec::new();
    let mut promised = g.clone();
    for h in ring.replicas_for(&sim.cluster.replication, key.token) {
        let i = sim.cluster.index_of(h);
        let node = &sim.cluster.nodes[i];
        let stored = node
            .engine
            .read(&command)
            .map_err(|e| format!("n{i} cannot be read: {e}"))?;
        if stored
            .rows
            .first()
            .is_some_and(|s| model::dominates(&s.row, row, now_s))
        {
            total += 1;
            *per_dc.entry(node.data_center.as_str()).or_default() += 1;
            holders.push(format!("n{i}"));
            if sim.lost.borrow().contains(&i) {
                promised.lose_one(&node.data_center);
            }
        }
    }
    let short_in = g
        .per_dc
        .iter()
        .find(|(dc, &need)| per_dc.get(dc.as_str()).copied().unwrap_or(0) < need);
    if total < g.total || short_in.is_some() {
        return Err(format!(
            "only {} of {key}'s replicas hold {} or newer, fewer than the level promises ({g:?})",
            if holders.is_empty() {
                "none".to_string()
            } else {
                holders.join(", ")
            },
            version(row)
        ));
    }
    Ok(promised)
}

/// A client reading the whole table page by page, each page a read of its own.
async fn scan(sim: &Rc<Sim>, client: &str, coordinator: usize) {
    let page_limit = sim.rng().random_range(1..=4);
    let mut start = RangeStart::Token(i64::MIN);
    for _ in 0..SCAN_PAGES_MAX {
        let command = ReadCommand::Range(RangeRead {
            table: TABLE,
            start: start.clone(),
            end_token: i64::MAX,
            limit: page_limit,
            index: None,
        });
        let Some(page) = read(sim, client, coordinator, command, "scan page").await else {
            return;
        };
        match page.rows.last() {
            Some(last) if page.more && !sim.failed() => start = RangeStart::After(last.position()),
            _ => return,
        }
    }
}
