//! Counters under faults: increments through random coordinators sum exactly, and replicas
//! converge.
//!
//! Each seed builds three to five nodes (SimpleStrategy RF 3) on the simulated network of the
//! coordinator simulation and runs clients that add random amounts to two counters at QUORUM
//! while the network drops, delays and duplicates messages and cuts pairs of nodes apart. Then
//! the network heals, every node replays its hints, and each replica's engine is read directly:
//! all replicas hold the same value, at least the sum of the acknowledged increments and at
//! most that plus the increments whose outcome the client did not learn (a timeout may have
//! been applied, or not).
//!
//! `HAYATE_SEED=<n>` replays one seed; `HAYATE_COUNTER_SEEDS=<n>` runs that many.

#[allow(dead_code)]
mod sim;

use std::cell::RefCell;
use std::ops::Bound;
use std::rc::Rc;
use std::time::Duration;

use hayate_cluster::consistency::{ConsistencyLevel, Replication};
use hayate_cluster::coordinator::{CoordinatorConfig, CoordinatorError};
use hayate_cluster::counter::{value, CounterUpdate};
use hayate_cluster::replica::{PartitionRead, ReadCommand, Replica};
use hayate_storage::token::token;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::{sleep, Instant};

use sim::cluster::{Cluster, Layout};
use sim::model::TABLE;

const COUNTERS: usize = 2;
const CLIENTS: usize = 4;
const COLUMN: u32 = 1;

fn partition(counter: usize) -> Vec<u8> {
    format!("counter-{counter}").into_bytes()
}

fn update(counter: usize, delta: i64) -> CounterUpdate {
    let partition = partition(counter);
    CounterUpdate {
        table: TABLE,
        token: token(&partition),
        partition,
        clustering: Vec::new(),
        column: COLUMN,
        delta,
    }
}

/// What the clients know of each counter: the sum of acknowledged increments, and of those whose
/// outcome is unknown.
#[derive(Clone, Copy, Default, Debug)]
struct Sums {
    acked: i64,
    unknown: i64,
}

async fn client(cluster: Rc<Cluster>, sums: Rc<RefCell<[Sums; COUNTERS]>>, ops: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..ops {
        sleep(Duration::from_millis(rng.random_range(0..20))).await;
        let counter = rng.random_range(0..COUNTERS);
        let delta = rng.random_range(1..=10);
        let node = &cluster.nodes[rng.random_range(0..cluster.nodes.len())];
        let result = node
            .coordinator
            .counter_write(
                &cluster.replication,
                ConsistencyLevel::Quorum,
                vec![update(counter, delta)],
            )
            .await;
        let mut sums = sums.borrow_mut();
        match result {
            Ok(()) => sums[counter].acked += delta,
            // Refused before anything was sent.
            Err(CoordinatorError::Unavailable(_)) => {}
            Err(_) => sums[counter].unknown += delta,
        }
    }
}

fn run_seed(seed: u64, ops: usize) -> Result<String, String> {
    sim::paused(async |dir| {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut config = CoordinatorConfig::default();
        if rng.random_bool(0.5) {
            config.write_timeout = Duration::from_millis(rng.random_range(80..300));
        }
        let layout = Layout {
            node_dcs: vec!["dc1".into(); rng.random_range(3..=5)],
            spare_dcs: Vec::new(),
            replication: Replication::Simple { factor: 3 },
            tokens_per_node: 4,
            token_offset: rng.random_range(0..1_000_000),
            config,
        };
        let cluster = Rc::new(Cluster::new(&layout, seed, dir));
        let sums = Rc::new(RefCell::new([Sums::default(); COUNTERS]));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                tokio::task::spawn_local(client(
                    cluster.clone(),
                    sums.clone(),
                    ops,
                    seed.wrapping_mul(31).wrapping_add(c as u64),
                ))
            })
            .collect();
        let hosts: Vec<_> = cluster.nodes.iter().map(|n| n.host).collect();
        let until = Instant::now() + Duration::from_millis(ops as u64 * 10);
        while Instant::now() < until {
            let network = &cluster.network;
            match rng.random_range(0..4) {
                0 => network.set_drop_probability(rng.random_range(0.0..0.3)),
                1 => network.set_delay_ms(0, rng.random_range(1..40)),
                2 => {
                    let a = rng.random_range(0..hosts.len());
                    let b = (a + rng.random_range(1..hosts.len())) % hosts.len();
                    network.partition(hosts[a], hosts[b]);
                }
                _ => network.heal_all(),
            }
            sleep(Duration::from_millis(100)).await;
        }
        for c in clients {
            c.await.expect("a client finishes");
        }
        cluster.network.heal_all();
        cluster.network.set_drop_probability(0.0);
        cluster.network.set_duplicate_probability(0.0);
        // Stragglers' hints are written at their write's timeout.
        sleep(Duration::from_secs(5)).await;
        for node in &cluster.nodes {
            for target in node.coordinator.hinted_targets() {
                node.coordinator.replay_hints(target).await;
            }
        }
        let sums = *sums.borrow();
        let mut line = format!("seed {seed}:");
        for (counter, s) in sums.iter().enumerate() {
            let partition = partition(counter);
            let read = ReadCommand::Partition(PartitionRead {
                table: TABLE,
                token: token(&partition),
                partition,
                start: Bound::Included(Vec::new()),
                end: Bound::Included(Vec::new()),
                reverse: false,
                limit: 1,
            });
            let mut values = Vec::new();
            for node in &cluster.nodes {
                let ring = node.coordinator.topology();
                let replicas = ring
                    .map(&cluster.replication)
                    .replicas(token(&self::partition(counter)))
                    .to_vec();
                if !replicas.contains(&node.host) {
                    continue;
                }
                let response = node.engine.read(&read).map_err(|e| e.to_string())?;
                values.push(
                    response
                        .rows
                        .first()
                        .and_then(|r| value(&r.row, COLUMN, 0))
                        .unwrap_or(0),
                );
            }
            if values.iter().any(|v| *v != values[0]) {
                return Err(format!(
                    "seed {seed}, counter {counter}: replicas disagree after hints: {values:?} ({s:?})"
                ));
            }
            let v = values[0];
            if v < s.acked || v > s.acked + s.unknown {
                return Err(format!(
                    "seed {seed}, counter {counter}: value {v} outside [{}, {}] (acknowledged, plus \
                     unknown)",
                    s.acked,
                    s.acked + s.unknown
                ));
            }
            line += &format!(
                " counter {counter} = {v} (acked {}, unknown {});",
                s.acked, s.unknown
            );
        }
        if sums.iter().all(|s| s.acked == 0) {
            return Err(format!(
                "seed {seed}: no increment was acknowledged: the run tests nothing"
            ));
        }
        Ok(line)
    })
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("HAYATE_SEED") {
        return vec![s.trim().parse().expect("HAYATE_SEED must be an unsigned integer")];
    }
    let n = std::env::var("HAYATE_COUNTER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    (1..=n).collect()
}

#[test]
fn concurrent_increments_sum_exactly_and_replicas_converge() {
    for seed in seeds() {
        match run_seed(seed, 40) {
            Ok(line) => eprintln!("{line}"),
            Err(e) => panic!(
                "{e}\n\nreplay: HAYATE_SEED={seed} cargo test -p hayate-cluster --test counter_sim -- --nocapture"
            ),
        }
    }
}
