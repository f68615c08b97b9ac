//! The simulation's runner: one seed makes one cluster, one workload and one fault schedule;
//! every random choice, the network's included, comes from that seed, and the run happens on a
//! current-thread tokio runtime with paused time, so the same seed replays the same run.
//!
//! Layout: [`cluster`] builds the nodes, [`model`] keeps what they should hold and judges
//! reads, and this file runs clients, faults and the final checks.

pub mod cluster;
pub mod model;

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
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
use hayate_storage::token::token;
use hayate_storage::{Cell as StoredCell, Clock, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use cluster::{host, Cluster, Layout, EPOCH_US};
use model::{
    guarantee, normalize, version, Guarantee, Key, Model, Outcome, ReadCheck, WriteKind, COLUMN, TABLE,
};

/// A read's "no limit".
const LIMIT_NONE: usize = 1000;
/// Pages a client scan reads at most before it gives up on reaching the end.
const SCAN_PAGES_MAX: usize = 64;
/// How often node clocks follow the runtime's (virtual) clock.
const CLOCK_TICK: Duration = Duration::from_millis(1);
/// Log lines printed with a failure (all of them with `HAYATE_SIM_LOG=all`).
const LOG_TAIL_LINES: usize = 120;
/// How long the end of a run waits for hint replays still under way, in virtual time.
const SETTLE_MAX: Duration = Duration::from_secs(600);
/// Rounds of hint replay at the end before hints that will not go are a failure.
const FINAL_REPLAY_ROUNDS_MAX: usize = 5;

/// One run: the seed decides everything else but the number of operations.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub seed: u64,
    pub ops: usize,
}

/// What a passing run reports.
pub struct Summary {
    /// A hash of the run's whole log: two runs of one seed must agree on it.
    pub fingerprint: u64,
    pub line: String,
    /// Every event of the run.
    pub log: Vec<String>,
}

/// Runs one seed to the end; `Err` carries the report of the first invariant broken.
pub fn run(params: Params) -> Result<Summary, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("build a current-thread runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, simulate(params))
}

/// The command that replays a run.
pub fn replay_command(params: Params) -> String {
    format!(
        "HAYATE_SEED={} HAYATE_SIM_OPS={} cargo test -p hayate-cluster --test coordinator_sim -- --nocapture",
        params.seed, params.ops
    )
}

#[derive(Default)]
struct Counts {
    writes_acked: u64,
    writes_maybe: u64,
    writes_refused: u64,
    reads_ok: u64,
    reads_failed: u64,
    faults: u64,
}

struct Sim {
    cluster: Cluster,
    layout: Layout,
    rng: RefCell<StdRng>,
    model: RefCell<Model>,
    seq: Cell<u64>,
    log: RefCell<Vec<String>>,
    failure: RefCell<Option<String>>,
    stopped: RefCell<Vec<bool>>,
    partitions: RefCell<BTreeSet<(usize, usize)>>,
    skew_us: RefCell<Vec<i64>>,
    skew_max_us: i64,
    started: Instant,
    /// (node, target) pairs with a hint replay under way.
    replaying: RefCell<BTreeSet<(usize, usize)>>,
    done: Cell<bool>,
    counts: RefCell<Counts>,
}

fn pick<T: Copy>(rng: &mut StdRng, weighted: &[(T, u32)]) -> T {
    let total: u32 = weighted.iter().map(|(_, w)| w).sum();
    let mut x = rng.random_range(0..total);
    for &(t, w) in weighted {
        if x < w {
            return t;
        }
        x -= w;
    }
    unreachable!("the draw is below the total weight")
}

impl Sim {
    fn rng(&self) -> std::cell::RefMut<'_, StdRng> {
        self.rng.borrow_mut()
    }

    fn tick(&self) -> u64 {
        let s = self.seq.get() + 1;
        self.seq.set(s);
        s
    }

    fn log(&self, line: String) {
        let ms = Instant::now().duration_since(self.started).as_millis();
        self.log.borrow_mut().push(format!("[{ms:>7} ms] {line}"));
    }

    fn fail(&self, report: String) {
        self.log(format!("FAILED: {report}"));
        self.failure.borrow_mut().get_or_insert(report);
    }

    fn failed(&self) -> bool {
        self.failure.borrow().is_some()
    }

    fn n(&self) -> usize {
        self.cluster.nodes.len()
    }

    /// Sets every node's clock to the virtual time plus its skew.
    fn sync_clocks(&self) {
        let elapsed_us = Instant::now().duration_since(self.started).as_micros() as i64;
        for (node, skew) in self.cluster.nodes.iter().zip(self.skew_us.borrow().iter()) {
            node.clock.set_us(EPOCH_US + elapsed_us + skew);
        }
    }

    /// The latest second any node's clock shows: rows are compared as of then.
    fn now_s(&self) -> u32 {
        self.sync_clocks();
        self.cluster
            .nodes
            .iter()
            .map(|n| n.clock.now_s())
            .max()
            .expect("a cluster has nodes")
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        let stopped = self.stopped.borrow();
        !stopped[a] && !stopped[b] && !self.partitions.borrow().contains(&(a.min(b), a.max(b)))
    }

    /// A node a client can reach: one that is not stopped.
    fn pick_coordinator(&self) -> Option<usize> {
        let up: Vec<usize> = (0..self.n()).filter(|&i| !self.stopped.borrow()[i]).collect();
        if up.is_empty() {
            return None;
        }
        let i = self.rng().random_range(0..up.len());
        Some(up[i])
    }

    fn key_name(&self, key: &Key) -> String {
        key.to_string()
    }
}

/// Draws a cluster layout and the network's faults from the seed.
fn draw_layout(rng: &mut StdRng) -> Layout {
    let nodes = rng.random_range(3..=5usize);
    let two_dcs = nodes >= 4 && rng.random_bool(0.35);
    let (node_dcs, replication) = if two_dcs {
        let dc1 = nodes.div_ceil(2);
        let node_dcs: Vec<String> = (0..nodes)
            .map(|i| if i < dc1 { "dc1" } else { "dc2" }.to_string())
            .collect();
        let f1 = rng.random_range(2..=dc1.min(3));
        let f2 = rng.random_range(1..=2usize);
        let factors = [("dc1".to_string(), f1), ("dc2".to_string(), f2)]
            .into_iter()
            .collect();
        (node_dcs, Replication::NetworkTopology { factors })
    } else {
        let factor = if rng.random_bool(0.75) { 3 } else { 2 };
        (vec!["dc1".to_string(); nodes], Replication::Simple { factor })
    };
    Layout {
        node_dcs,
        replication,
        tokens_per_node: pick(rng, &[(1, 1), (4, 2), (8, 2)]),
        token_offset: rng.random(),
    }
}

async fn simulate(params: Params) -> Result<Summary, String> {
    let wall = std::time::Instant::now();
    let mut rng = StdRng::seed_from_u64(params.seed);
    let layout = draw_layout(&mut rng);
    let skew_max_us: i64 = pick(&mut rng, &[(0, 2), (5_000, 1), (200_000, 1), (2_000_000, 1)]);
    let hints_dir = tempfile::tempdir().expect("a temporary folder for hints");
    let cluster = Cluster::new(&layout, rng.random(), hints_dir.path());
    let n = cluster.nodes.len();
    let skew_us: Vec<i64> = (0..n)
        .map(|_| {
            if skew_max_us == 0 {
                0
            } else {
                rng.random_range(-skew_max_us..=skew_max_us)
            }
        })
        .collect();
    let partitions = rng.random_range(2..=6usize);
    let clusterings = rng.random_range(1..=3u8);
    let mut keys: Vec<Key> = (0..partitions)
        .flat_map(|p| {
            let partition = format!("p{p}").into_bytes();
            (0..clusterings).map(move |c| Key {
                token: token(&partition),
                partition: partition.clone(),
                clustering: vec![c],
            })
        })
        .collect();
    keys.sort();
    let model = Model::new(keys, &cluster.replication, &cluster.data_centers);
    let clients = rng.random_range(2..=6usize);
    let network = cluster.network.clone();
    network.set_drop_probability(pick(&mut rng, &[(0.0, 2), (0.01, 2), (0.05, 1), (0.2, 1)]));
    let delay_ms_max = pick(&mut rng, &[(0, 1), (5, 2), (20, 2), (50, 2)]);
    network.set_delay_ms(0, delay_ms_max);
    network.set_duplicate_probability(pick(&mut rng, &[(0.0, 2), (0.02, 1)]));
    network.set_ordered(rng.random_bool(0.3));
    let sim = Rc::new(Sim {
        layout: layout.clone(),
        cluster,
        rng: RefCell::new(rng),
        model: RefCell::new(model),
        seq: Cell::new(0),
        log: RefCell::new(Vec::new()),
        failure: RefCell::new(None),
        stopped: RefCell::new(vec![false; n]),
        partitions: RefCell::new(BTreeSet::new()),
        skew_us: RefCell::new(skew_us.clone()),
        skew_max_us,
        started: Instant::now(),
        replaying: RefCell::new(BTreeSet::new()),
        done: Cell::new(false),
        counts: RefCell::new(Counts::default()),
    });
    sim.sync_clocks();
    let setup = format!(
        "seed {} ops {}: {} nodes {:?}, {:?}, {} tokens each, skews {:?} us, {} partitions x {} rows, \
         {} clients, network drop/delay/dup/ordered as drawn",
        params.seed,
        params.ops,
        n,
        layout.node_dcs,
        layout.replication,
        layout.tokens_per_node,
        skew_us,
        partitions,
        clusterings,
        clients
    );
    sim.log(setup.clone());

    let ticker = tokio::task::spawn_local(tick_clocks(sim.clone()));
    let nemesis = tokio::task::spawn_local(nemesis(sim.clone()));
    let dispatchers: Vec<JoinHandle<()>> = (0..n)
        .map(|i| tokio::task::spawn_local(dispatch_hints(sim.clone(), i)))
        .collect();
    let ops_each = params.ops.div_ceil(clients);
    let workers: Vec<JoinHandle<()>> = (0..clients)
        .map(|c| tokio::task::spawn_local(client(sim.clone(), c, ops_each)))
        .collect();
    for w in workers {
        w.await.expect("a client task panicked");
    }
    sim.done.set(true);
    nemesis.await.expect("the fault task panicked");
    for d in dispatchers {
        d.await.expect("a hint dispatcher panicked");
    }
    if !sim.failed() {
        finish(&sim).await;
    }
    ticker.abort();
    let virtual_s = Instant::now().duration_since(sim.started).as_secs_f64();
    let report = |sim: &Sim| {
        let log = sim.log.borrow();
        let all = std::env::var("HAYATE_SIM_LOG").is_ok_and(|v| v == "all");
        let tail = if all {
            0
        } else {
            log.len().saturating_sub(LOG_TAIL_LINES)
        };
        log[tail..].join("\n")
    };
    if let Some(failure) = sim.failure.borrow().clone() {
        return Err(format!(
            "{failure}\n\n{setup}\n\nthe last events:\n{}\n\nreplay: {}",
            report(&sim),
            replay_command(params)
        ));
    }
    let mut hasher = DefaultHasher::new();
    sim.log.borrow().hash(&mut hasher);
    let c = sim.counts.borrow();
    let stats = sim.cluster.network.stats();
    let metrics: Vec<_> = sim
        .cluster
        .nodes
        .iter()
        .map(|n| n.coordinator.metrics())
        .collect();
    let sum =
        |f: fn(&hayate_cluster::coordinator::MetricsSnapshot) -> u64| metrics.iter().map(f).sum::<u64>();
    let line = format!(
        "seed {:>5}: {} nodes {}, writes {} acked / {} maybe / {} refused, reads {} ok / {} failed, \
         {} faults, {} read repairs, {} speculative, hints {} written / {} replayed, \
         messages {} sent / {} dropped, {:.0} s virtual in {:.2} s",
        params.seed,
        n,
        replication_name(&sim.layout.replication),
        c.writes_acked,
        c.writes_maybe,
        c.writes_refused,
        c.reads_ok,
        c.reads_failed,
        c.faults,
        sum(|m| m.read_repairs),
        sum(|m| m.speculative_retries),
        sum(|m| m.hints_written),
        sum(|m| m.hints_replayed),
        stats.sent,
        stats.dropped(),
        virtual_s,
        wall.elapsed().as_secs_f64(),
    );
    let log = sim.log.borrow().clone();
    Ok(Summary {
        fingerprint: hasher.finish(),
        line,
        log,
    })
}

fn replication_name(r: &Replication) -> String {
    match r {
        Replication::Simple { factor } => format!("RF {factor}"),
        Replication::NetworkTopology { factors } => {
            let f: Vec<String> = factors.iter().map(|(dc, f)| format!("{dc}:{f}")).collect();
            format!("NTS {}", f.join(","))
        }
        Replication::Local => "local".into(),
    }
}

async fn tick_clocks(sim: Rc<Sim>) {
    loop {
        sim.sync_clocks();
        sleep(CLOCK_TICK).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Clients.

#[derive(Clone, Copy, Debug)]
enum Op {
    Write,
    Point,
    Slice,
    Range,
    Scan,
}

async fn client(sim: Rc<Sim>, id: usize, ops: usize) {
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
            Op::Write => write(&sim, id, coordinator).await,
            Op::Point | Op::Slice | Op::Range => {
                let command = read_command(&sim, op);
                read(&sim, id, coordinator, command, "read").await;
            }
            Op::Scan => scan(&sim, id, coordinator).await,
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

async fn write(sim: &Rc<Sim>, client: usize, coordinator: usize) {
    let node = &sim.cluster.nodes[coordinator];
    sim.sync_clocks();
    let (level, mutations, ids, what) = {
        let mut rng = sim.rng();
        let level = pick(&mut rng, &write_levels(sim));
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
        "c{client} write {what} at {} via n{coordinator}",
        level.name()
    ));
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
            sim.log(format!("c{client} write {what}: ok"));
            for &id in &ids {
                model.acknowledge(id, &g, seq, &format!("{} via n{coordinator}", level.name()));
                let w = &model.writes[id as usize];
                if let Err(e) = held_by_replicas(sim, &w.key, &w.row, &g) {
                    sim.fail(format!(
                        "c{client} write {what} at {} was acknowledged, but {e}",
                        level.name()
                    ));
                }
            }
        }
        Err(CoordinatorError::Unavailable(u)) => {
            for &id in &ids {
                model.fail(id, Outcome::Refused);
            }
            counts.writes_refused += 1;
            sim.log(format!(
                "c{client} write {what}: unavailable ({} of {} alive)",
                u.alive, u.required
            ));
        }
        Err(e) => {
            for &id in &ids {
                model.fail(id, Outcome::Maybe(e.to_string()));
            }
            counts.writes_maybe += 1;
            sim.log(format!("c{client} write {what}: {e:?}"));
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
    client: usize,
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
        "c{client} {label} {} at {} via n{coordinator}",
        describe(&command),
        level.name()
    );
    let scope = sim.model.borrow().scope(&command);
    let started_seq = sim.tick();
    sim.log(what.clone());
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
                if let Err(e) = held_by_replicas(sim, &Key::of(row), &row.row, &check.guarantee) {
                    sim.fail(format!(
                        "{what} returned {} {}, but {e}",
                        Key::of(row),
                        version(&row.row)
                    ));
                    break;
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
/// `key`'s replicas as `g` promises: in total and in each data center.
fn held_by_replicas(sim: &Sim, key: &Key, row: &Row, g: &Guarantee) -> Result<(), String> {
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
    for h in sim.cluster.ring.replicas_for(&sim.cluster.replication, key.token) {
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
    Ok(())
}

/// A client reading the whole table page by page, each page a read of its own.
async fn scan(sim: &Rc<Sim>, client: usize, coordinator: usize) {
    let page_limit = sim.rng().random_range(1..=4);
    let mut start = RangeStart::Token(i64::MIN);
    for _ in 0..SCAN_PAGES_MAX {
        let command = ReadCommand::Range(RangeRead {
            table: TABLE,
            start: start.clone(),
            end_token: i64::MAX,
            limit: page_limit,
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

// ---------------------------------------------------------------------------------------------
// Faults.

#[derive(Clone, Copy, Debug)]
enum Fault {
    Partition,
    Heal,
    Stop,
    Restart,
    Suspect,
    Network,
    Skew,
}

/// Has `observer`'s failure detector catch up with the truth about `target` after `delay`.
fn refresh_later(sim: &Rc<Sim>, observer: usize, target: usize, delay: Duration) {
    let sim = sim.clone();
    tokio::task::spawn_local(async move {
        sleep(delay).await;
        if sim.done.get() {
            return;
        }
        let alive = sim.reachable(observer, target);
        let liveness = &sim.cluster.nodes[observer].liveness;
        use hayate_cluster::coordinator::Liveness;
        if liveness.is_alive(host(target)) != alive {
            liveness.set(host(target), alive);
            sim.log(format!(
                "n{observer} now sees n{target} {}",
                if alive { "up" } else { "down" }
            ));
            if alive {
                start_replay(&sim, observer, target);
            }
        }
    });
}

fn random_delay(sim: &Sim, min_ms: u64, max_ms: u64) -> Duration {
    Duration::from_millis(sim.rng().random_range(min_ms..=max_ms))
}

async fn nemesis(sim: Rc<Sim>) {
    let n = sim.n();
    while !sim.done.get() && !sim.failed() {
        let pause = random_delay(&sim, 200, 2000);
        sleep(pause).await;
        if sim.done.get() {
            return;
        }
        let fault = pick(
            &mut sim.rng(),
            &[
                (Fault::Partition, 3),
                (Fault::Heal, 4),
                (Fault::Stop, 2),
                (Fault::Restart, 3),
                (Fault::Suspect, 2),
                (Fault::Network, 2),
                (Fault::Skew, 1),
            ],
        );
        let (a, b) = {
            let mut rng = sim.rng();
            let a = rng.random_range(0..n);
            let b = (a + rng.random_range(1..n)) % n;
            (a, b)
        };
        let network = &sim.cluster.network;
        match fault {
            Fault::Partition => {
                if sim.partitions.borrow().len() >= 2 {
                    continue;
                }
                network.partition(host(a), host(b));
                sim.partitions.borrow_mut().insert((a.min(b), a.max(b)));
                sim.log(format!("fault: partition n{a} | n{b}"));
                // Sometimes the failure detectors notice, sometimes not.
                if sim.rng().random_bool(0.5) {
                    let (d1, d2) = (random_delay(&sim, 300, 3000), random_delay(&sim, 300, 3000));
                    refresh_later(&sim, a, b, d1);
                    refresh_later(&sim, b, a, d2);
                }
            }
            Fault::Heal => {
                let Some(&(x, y)) = sim.partitions.borrow().iter().next() else {
                    continue;
                };
                network.heal(host(x), host(y));
                sim.partitions.borrow_mut().remove(&(x, y));
                sim.log(format!("fault: heal n{x} | n{y}"));
                let (d1, d2) = (random_delay(&sim, 100, 2000), random_delay(&sim, 100, 2000));
                refresh_later(&sim, x, y, d1);
                refresh_later(&sim, y, x, d2);
            }
            Fault::Stop => {
                if sim.stopped.borrow().iter().any(|&s| s) {
                    continue;
                }
                network.isolate(host(a));
                sim.stopped.borrow_mut()[a] = true;
                sim.log(format!("fault: stop n{a}"));
                for o in (0..n).filter(|&o| o != a) {
                    let (d1, d2) = (random_delay(&sim, 300, 4000), random_delay(&sim, 300, 4000));
                    refresh_later(&sim, o, a, d1);
                    refresh_later(&sim, a, o, d2);
                }
            }
            Fault::Restart => {
                let Some(x) = sim.stopped.borrow().iter().position(|&s| s) else {
                    continue;
                };
                network.rejoin(host(x));
                sim.stopped.borrow_mut()[x] = false;
                sim.log(format!("fault: restart n{x}"));
                for o in (0..n).filter(|&o| o != x) {
                    let (d1, d2) = (random_delay(&sim, 100, 3000), random_delay(&sim, 100, 3000));
                    refresh_later(&sim, o, x, d1);
                    refresh_later(&sim, x, o, d2);
                }
            }
            Fault::Suspect => {
                // A failure detector that is wrong for a while.
                sim.cluster.nodes[a].liveness.set(host(b), false);
                sim.log(format!("fault: n{a} wrongly suspects n{b}"));
                let d = random_delay(&sim, 500, 5000);
                refresh_later(&sim, a, b, d);
            }
            Fault::Network => {
                let (drop, delay_ms, dup, ordered) = {
                    let mut rng = sim.rng();
                    (
                        pick(&mut rng, &[(0.0, 2), (0.01, 2), (0.05, 1), (0.1, 1), (0.2, 1)]),
                        pick(&mut rng, &[(0, 1), (5, 2), (20, 2), (50, 2)]),
                        pick(&mut rng, &[(0.0, 2), (0.02, 1), (0.05, 1)]),
                        rng.random_bool(0.3),
                    )
                };
                network.set_drop_probability(drop);
                network.set_delay_ms(0, delay_ms);
                network.set_duplicate_probability(dup);
                network.set_ordered(ordered);
                sim.log(format!(
                    "fault: network drop {drop}, delay 0..={delay_ms} ms, duplicates {dup}, ordered {ordered}"
                ));
            }
            Fault::Skew => {
                if sim.skew_max_us == 0 {
                    continue;
                }
                let skew = sim.rng().random_range(-sim.skew_max_us..=sim.skew_max_us);
                sim.skew_us.borrow_mut()[a] = skew;
                sim.sync_clocks();
                sim.log(format!("fault: n{a}'s clock skew is now {skew} us"));
            }
        }
        sim.counts.borrow_mut().faults += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Hints.

/// Replays `node`'s hints for `target` unless a replay of them is under way.
fn start_replay(sim: &Rc<Sim>, node: usize, target: usize) {
    if sim.done.get() || sim.stopped.borrow()[node] || !sim.replaying.borrow_mut().insert((node, target)) {
        return;
    }
    let sim = sim.clone();
    tokio::task::spawn_local(async move {
        let delivered = sim.cluster.nodes[node]
            .coordinator
            .replay_hints(host(target))
            .await;
        if delivered > 0 {
            sim.log(format!("n{node} replayed {delivered} hints to n{target}"));
        }
        sim.replaying.borrow_mut().remove(&(node, target));
    });
}

/// Cassandra's hint dispatch: now and then, each node replays its hints for nodes it sees up.
async fn dispatch_hints(sim: Rc<Sim>, node: usize) {
    use hayate_cluster::coordinator::Liveness;
    while !sim.done.get() && !sim.failed() {
        let pause = random_delay(&sim, 1000, 3000);
        sleep(pause).await;
        let n = &sim.cluster.nodes[node];
        for target in n.coordinator.hinted_targets() {
            if n.liveness.is_alive(target) {
                start_replay(&sim, node, sim.cluster.index_of(target));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The end of a run.

/// Ends every fault, replays every hint, and checks that every replica holds what the model
/// says, before and after a read of every key at ALL.
async fn finish(sim: &Rc<Sim>) {
    let n = sim.n();
    let network = &sim.cluster.network;
    network.heal_all();
    network.set_drop_probability(0.0);
    network.set_duplicate_probability(0.0);
    sim.partitions.borrow_mut().clear();
    sim.stopped.borrow_mut().iter_mut().for_each(|s| *s = false);
    for node in &sim.cluster.nodes {
        for t in 0..n {
            node.liveness.set(host(t), true);
        }
    }
    sim.log("end: every fault healed, every node sees every other up".into());
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
    if let Err(e) = check_replicas(sim, "after every hint was replayed") {
        sim.fail(e);
        return;
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
    if let Err(e) = check_replicas(sim, "after a read of every key at ALL") {
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
                let writes: Vec<String> = model
                    .writes
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| w.key == *key)
                    .map(|(id, w)| format!("#{id} {:?} {} {:?}", w.kind, version(&w.row), w.outcome))
                    .collect();
                problems.push(format!(
                    "{key} on n{i}: holds {:?}, should hold {:?}; writes of the key: {}",
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
