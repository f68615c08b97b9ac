//! The simulation's runner: one seed makes one cluster, one workload and one fault schedule;
//! every random choice, the network's included, comes from that seed, and the run happens on a
//! current-thread tokio runtime with paused time, so the same seed replays the same run.
//!
//! Layout: [`cluster`] builds the nodes, [`ring_log`] is their metadata log, [`model`] keeps
//! what they should hold and judges reads, [`clients`] write and read, [`faults`] break things
//! and replay hints, [`topology`] changes the ring, [`end`] heals everything and checks the
//! replicas; this file draws a run from its seed and runs it.

mod clients;
pub mod cluster;
mod end;
mod faults;
pub mod model;
pub mod ring_log;
mod topology;

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::Weak;
use std::time::Duration;

use hayate_cluster::consistency::Replication;
use hayate_cluster::coordinator::CoordinatorConfig;
use hayate_storage::token::token;
use hayate_storage::{Clock, Engine};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use cluster::{Cluster, Layout, EPOCH_US};
use model::{Key, Model};

/// How often node clocks follow the runtime's (virtual) clock.
const CLOCK_TICK: Duration = Duration::from_millis(1);
/// Log lines printed with a failure (all of them with `HAYATE_SIM_LOG=all`).
const LOG_TAIL_LINES: usize = 120;

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

/// Runs `test` on a current-thread runtime with paused time, as [`run`] runs a seed, with a
/// temporary folder for the nodes' hints and checkpoints.
#[allow(
    dead_code,
    reason = "for paxos_sim and counter_sim; coordinator_sim runs seeds with `run`"
)]
pub fn paused<T>(test: impl AsyncFnOnce(&std::path::Path) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("build a current-thread runtime");
    let local = tokio::task::LocalSet::new();
    let dir = tempfile::tempdir().expect("a temporary folder");
    local.block_on(&runtime, test(dir.path()))
}

/// Runs one seed to the end; `Err` carries the report of the first invariant broken.
pub fn run(params: Params) -> Result<Summary, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("build a current-thread runtime");
    let local = tokio::task::LocalSet::new();
    let mut engines = Vec::new();
    let result = local.block_on(&runtime, simulate(params, &mut engines));
    // Tasks still asleep hold parts of the cluster until the runtime goes.
    drop(local);
    drop(runtime);
    let alive = engines.iter().filter(|e| e.strong_count() > 0).count();
    if alive > 0 && result.is_ok() {
        return Err(format!(
            "{alive} engines outlive their run: something still holds them (each keeps three \
             threads, and a soak runs out of them)\n\nreplay: {}",
            replay_command(params)
        ));
    }
    result
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
    changes: u64,
}

/// Where a node is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Built, off the network, not in the ring.
    Spare,
    /// Joining the ring, or replacing a dead node: it serves no client yet.
    Joining,
    Member,
    /// Decommissioning: it still serves.
    Leaving,
    /// Decommissioned, or killed for good.
    Gone,
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
    roles: RefCell<Vec<Role>>,
    /// Nodes killed for good: their data is lost.
    lost: RefCell<BTreeSet<usize>>,
    /// Nodes a topology driver killed and will restart: faults leave them alone.
    held_down: RefCell<BTreeSet<usize>>,
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

    /// A node a client can reach: one that serves (a member, or a node leaving) and is not
    /// stopped.
    fn pick_coordinator(&self) -> Option<usize> {
        let up: Vec<usize> = (0..self.n())
            .filter(|&i| {
                matches!(self.roles.borrow()[i], Role::Member | Role::Leaving) && !self.stopped.borrow()[i]
            })
            .collect();
        if up.is_empty() {
            return None;
        }
        let i = self.rng().random_range(0..up.len());
        Some(up[i])
    }

    /// Nodes the faults may hit: those in the ring or joining it.
    fn active(&self) -> Vec<usize> {
        (0..self.n())
            .filter(|&i| {
                matches!(
                    self.roles.borrow()[i],
                    Role::Member | Role::Joining | Role::Leaving
                )
            })
            .collect()
    }

    fn key_name(&self, key: &Key) -> String {
        key.to_string()
    }
}

/// Draws a cluster layout and the network's faults from the seed.
fn draw_layout(rng: &mut StdRng) -> Layout {
    let mut nodes = rng.random_range(3..=5usize);
    let two_dcs = nodes >= 4 && rng.random_bool(0.35);
    let (node_dcs, replication) = if two_dcs {
        // Some two-data-center seeds have three replicas in each, so that a read at
        // EACH_QUORUM has a spare replica in both to speculate with.
        if rng.random_bool(0.3) {
            nodes += 2;
        }
        let dc1 = nodes.div_ceil(2);
        let node_dcs: Vec<String> = (0..nodes)
            .map(|i| if i < dc1 { "dc1" } else { "dc2" }.to_string())
            .collect();
        let f1 = rng.random_range(2..=dc1.min(3));
        let f2 = rng.random_range(1..=(nodes - dc1).min(3));
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
        spare_dcs: Vec::new(),
        replication,
        tokens_per_node: pick(rng, &[(1, 1), (4, 2), (8, 2)]),
        token_offset: rng.random(),
        config: draw_config(rng),
    }
}

/// Cassandra's timeouts in most runs; in others, timeouts short enough that answers delayed
/// by the network come after them (late acknowledgements, hints for replicas that did apply,
/// read repairs that time out), and a hint replay slow enough to be throttled.
fn draw_config(rng: &mut StdRng) -> CoordinatorConfig {
    let ms = Duration::from_millis;
    CoordinatorConfig {
        write_timeout: pick(rng, &[(ms(2000), 3), (ms(500), 1), (ms(100), 1)]),
        read_timeout: pick(rng, &[(ms(5000), 3), (ms(1000), 1), (ms(200), 1)]),
        range_timeout: pick(rng, &[(ms(10_000), 3), (ms(1000), 1), (ms(300), 1)]),
        hint_replay_bytes_per_s: pick(rng, &[(4 << 20, 3), (2 << 10, 1)]),
        ..CoordinatorConfig::default()
    }
}

async fn simulate(params: Params, engines: &mut Vec<Weak<Engine>>) -> Result<Summary, String> {
    let wall = std::time::Instant::now();
    let mut rng = StdRng::seed_from_u64(params.seed);
    let mut layout = draw_layout(&mut rng);
    let plan = topology::draw_plan(&mut rng, &mut layout);
    let log_faults = ring_log::LogFaults {
        lag_ms_max: pick(&mut rng, &[(0, 1), (20, 2), (300, 2), (3000, 1)]),
        refuse_probability: pick(&mut rng, &[(0.0, 2), (0.1, 1), (0.3, 1)]),
        lose_answer_probability: pick(&mut rng, &[(0.0, 2), (0.1, 1)]),
    };
    let skew_max_us: i64 = pick(&mut rng, &[(0, 2), (5_000, 1), (200_000, 1), (2_000_000, 1)]);
    let hints_dir = tempfile::tempdir().expect("a temporary folder for hints");
    let cluster = Cluster::new(&layout, rng.random(), hints_dir.path());
    cluster.log.set_faults(log_faults);
    *engines = cluster.engines();
    let n = cluster.nodes.len();
    let members = cluster.members;
    for spare in members..n {
        cluster.log.set_cut(spare, true);
    }
    let skew_us: Vec<i64> = (0..n)
        .map(|_| {
            if skew_max_us == 0 {
                0
            } else {
                rng.random_range(-skew_max_us..=skew_max_us)
            }
        })
        .collect();
    let partitions = rng.random_range(1..=6usize);
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
    let drop = pick(&mut rng, &[(0.0, 2), (0.01, 2), (0.05, 1), (0.2, 1), (0.3, 1)]);
    let delay_ms_max = pick(&mut rng, &[(0, 1), (5, 2), (20, 2), (50, 2), (200, 1)]);
    let duplicate = pick(&mut rng, &[(0.0, 2), (0.02, 1)]);
    let ordered = rng.random_bool(0.3);
    network.set_drop_probability(drop);
    network.set_delay_ms(0, delay_ms_max);
    network.set_duplicate_probability(duplicate);
    network.set_ordered(ordered);
    let sim = Rc::new(Sim {
        layout: layout.clone(),
        cluster,
        rng: RefCell::new(rng),
        model: RefCell::new(model),
        seq: Cell::new(0),
        log: RefCell::new(Vec::new()),
        failure: RefCell::new(None),
        stopped: RefCell::new((0..n).map(|i| i >= members).collect()),
        roles: RefCell::new(
            (0..n)
                .map(|i| if i < members { Role::Member } else { Role::Spare })
                .collect(),
        ),
        lost: RefCell::new(BTreeSet::new()),
        held_down: RefCell::new(BTreeSet::new()),
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
         {} clients; network: drop {drop}, delay 0..={delay_ms_max} ms, duplicates {duplicate}, \
         ordered {ordered}; timeouts: write {:?}, read {:?}, range {:?}; hint replay {} bytes/s; \
         topology changes {plan:?} with spares in {:?}; metadata log {log_faults:?}",
        params.seed,
        params.ops,
        members,
        layout.node_dcs,
        layout.replication,
        layout.tokens_per_node,
        skew_us,
        partitions,
        clusterings,
        clients,
        layout.config.write_timeout,
        layout.config.read_timeout,
        layout.config.range_timeout,
        layout.config.hint_replay_bytes_per_s,
        layout.spare_dcs,
    );
    sim.log(setup.clone());

    let ticker = tokio::task::spawn_local(tick_clocks(sim.clone()));
    let nemesis = tokio::task::spawn_local(faults::nemesis(sim.clone()));
    let ring_watcher = tokio::task::spawn_local(topology::watch_ring(sim.clone()));
    let driver = tokio::task::spawn_local(topology::drive(sim.clone(), plan));
    let dispatchers: Vec<JoinHandle<()>> = (0..n)
        .map(|i| tokio::task::spawn_local(faults::dispatch_hints(sim.clone(), i)))
        .collect();
    let ops_each = params.ops.div_ceil(clients);
    let workers: Vec<JoinHandle<()>> = (0..clients)
        .map(|c| tokio::task::spawn_local(clients::client(sim.clone(), c, ops_each)))
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
        end::finish(&sim, driver).await;
    } else {
        driver.abort();
    }
    ring_watcher.abort();
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
        "seed {:>5}: {} nodes {}, {} topology changes, writes {} acked / {} maybe / {} refused, reads {} ok / {} failed, \
         {} faults, {} read repairs, {} speculative, hints {} written / {} replayed, \
         messages {} sent / {} dropped, {:.0} s virtual in {:.2} s",
        params.seed,
        members,
        replication_name(&sim.layout.replication),
        c.changes,
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
