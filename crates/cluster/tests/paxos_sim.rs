//! Lightweight transactions under faults, judged as linearizable.
//!
//! Each seed builds three to five nodes (SimpleStrategy RF 3, so that a coordinator is not
//! always a replica; each with its own in-memory engine and
//! its own clock, skewed by up to a second in some seeds) on the simulated network of the
//! coordinator simulation, and runs clients that read (at SERIAL), write and compare-and-set a
//! few registers through random coordinators, while the network drops, delays, reorders and
//! duplicates messages, cuts pairs of nodes apart, and has a node's failure detector convict
//! another (failing the requests waiting on it). Every register's history, with the
//! outcome each client learned (a timeout is "unknown": it may have happened, or not), must
//! be linearizable (`linearizability/mod.rs`).
//!
//! `HAYATE_SEED=<n>` replays one seed; `HAYATE_PAXOS_SEEDS=<n>` runs that many.

#[allow(dead_code)]
mod linearizability;
#[allow(dead_code)]
mod sim;

use std::cell::RefCell;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hayate_cluster::consistency::{ConsistencyLevel, Replication};
use hayate_cluster::coordinator::{
    CasError, CasRequest, CoordinatorConfig, CoordinatorError, ReadResult, WriteType,
};
use hayate_cluster::message::{Lane, Message};
use hayate_cluster::node::HostId;
use hayate_cluster::paxos::{acceptor, Ballot, PaxosKey, PaxosReply, PaxosRequest, Proposal};
use hayate_cluster::replica::{Mutation, MutationKind, PartitionRead};
use hayate_cluster::transport::{SimTransport, Transport};
use hayate_storage::token::token;
use hayate_storage::{Cell, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::{sleep, Instant};

use linearizability::{check, Event, Op, Outcome, Verdict};
use sim::cluster::{host, Cluster, Layout, EPOCH_US};
use sim::model::TABLE;

const REGISTERS: usize = 3;
const CLIENTS: usize = 4;
const VALUE_COLUMN: u32 = 1;

fn partition(register: usize) -> Vec<u8> {
    format!("register-{register}").into_bytes()
}

fn read_of(register: usize) -> PartitionRead {
    let partition = partition(register);
    PartitionRead {
        table: TABLE,
        token: token(&partition),
        partition,
        start: Bound::Included(Vec::new()),
        end: Bound::Included(Vec::new()),
        reverse: false,
        limit: 1,
    }
}

fn value_of(current: &ReadResult) -> Option<u32> {
    let cell = current
        .rows
        .first()?
        .row
        .cells
        .iter()
        .find(|c| c.column == VALUE_COLUMN)?;
    let bytes = cell.value_at(0)?;
    Some(u32::from_be_bytes(bytes.try_into().expect("a 4-byte value")))
}

fn write_of(register: usize, value: u32, timestamp_us: i64) -> Vec<Mutation> {
    let partition = partition(register);
    vec![Mutation {
        table: TABLE,
        token: token(&partition),
        partition,
        kind: MutationKind::Row {
            clustering: Vec::new(),
            update: Row {
                cells: vec![Cell::live(
                    VALUE_COLUMN,
                    timestamp_us,
                    value.to_be_bytes().to_vec(),
                )],
                ..Row::default()
            },
        },
    }]
}

fn layout(rng: &mut StdRng) -> Layout {
    let mut config = CoordinatorConfig::default();
    if rng.random_bool(0.5) {
        // Timeouts close to the network's delays: more unknown outcomes.
        config.write_timeout = Duration::from_millis(rng.random_range(80..300));
        config.read_timeout = config.write_timeout;
    }
    Layout {
        node_dcs: vec!["dc1".into(); rng.random_range(3..=5)],
        spare_dcs: Vec::new(),
        replication: Replication::Simple { factor: 3 },
        tokens_per_node: 4,
        token_offset: rng.random_range(0..1_000_000),
        config,
    }
}

struct Run {
    cluster: Cluster,
    started: Instant,
    histories: RefCell<Vec<Vec<Event>>>,
    counts: RefCell<[u64; 5]>,
}

impl Run {
    fn now(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

async fn client(run: Rc<Run>, id: usize, ops: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for n in 0..ops {
        sleep(Duration::from_millis(rng.random_range(0..20))).await;
        let register = rng.random_range(0..REGISTERS);
        let node = &run.cluster.nodes[rng.random_range(0..run.cluster.nodes.len())];
        let coordinator = node.coordinator.clone();
        let value = (id as u32 + 1) * 100_000 + n as u32;
        let op = match rng.random_range(0..3) {
            0 => Op::Read,
            1 => Op::Write(value),
            _ => Op::Cas {
                expect: (rng.random_range(1..=CLIENTS as u32)) * 100_000
                    + rng.random_range(0..n.max(1) as u32),
                new: value,
            },
        };
        let invoked = run.now();
        let replication = run.cluster.replication.clone();
        let outcome = match &op {
            Op::Read => match coordinator
                .read_serial(&replication, ConsistencyLevel::Serial, read_of(register))
                .await
            {
                Ok(current) => Outcome::Read(value_of(&current)),
                Err(_) => Outcome::Unknown,
            },
            Op::Write(v) | Op::Cas { new: v, .. } => {
                let expect = match op {
                    Op::Cas { expect, .. } => Some(expect),
                    _ => None,
                };
                let request = CasRequest {
                    replication: &replication,
                    serial: ConsistencyLevel::Serial,
                    commit: ConsistencyLevel::Quorum,
                    read: read_of(register),
                };
                let result = coordinator
                    .cas(request, |current, ts| -> Result<_, ()> {
                        if expect.is_some_and(|e| value_of(current) != Some(e)) {
                            return Ok(None);
                        }
                        Ok(Some(write_of(register, *v, ts)))
                    })
                    .await;
                match result {
                    Ok(outcome) => Outcome::Done(outcome.applied),
                    // Refused before anything was sent: it did not happen, and says nothing
                    // of the register (a compare-and-set refused so did not find its
                    // condition false).
                    Err(CasError::Coordinator(CoordinatorError::Unavailable(_))) => {
                        run.counts.borrow_mut()[4] += 1;
                        continue;
                    }
                    Err(_) => Outcome::Unknown,
                }
            }
        };
        let returned = match outcome {
            Outcome::Unknown => u64::MAX,
            _ => run.now(),
        };
        {
            let mut counts = run.counts.borrow_mut();
            counts[match outcome {
                Outcome::Read(_) => 0,
                Outcome::Done(true) => 1,
                Outcome::Done(false) => 2,
                Outcome::Unknown => 3,
            }] += 1;
        }
        run.histories.borrow_mut()[register].push(Event {
            op,
            outcome,
            invoked,
            returned,
        });
    }
}

/// Breaks the network and skews clocks until `until`.
async fn faults(run: Rc<Run>, seed: u64, until: Instant) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xfa17);
    let hosts: Vec<_> = run.cluster.nodes.iter().map(|n| n.host).collect();
    let skews: Vec<i64> = hosts
        .iter()
        .map(|_| {
            if rng.random_bool(0.3) {
                rng.random_range(-1_000_000..1_000_000)
            } else {
                0
            }
        })
        .collect();
    while Instant::now() < until {
        let network = &run.cluster.network;
        match rng.random_range(0..6) {
            0 => network.set_drop_probability(rng.random_range(0.0..0.3)),
            1 => network.set_delay_ms(0, rng.random_range(1..40)),
            2 => {
                let a = rng.random_range(0..hosts.len());
                let b = (a + rng.random_range(1..hosts.len())) % hosts.len();
                network.partition(hosts[a], hosts[b]);
            }
            3 => heal(&run.cluster),
            4 => network.set_duplicate_probability(rng.random_range(0.0..0.1)),
            _ => {
                // One node's failure detector convicts another, rightly or not: the requests
                // waiting on it fail at once as Unreachable, though it may have done them.
                let node = &run.cluster.nodes[rng.random_range(0..hosts.len())];
                let other = hosts[rng.random_range(0..hosts.len())];
                if other != node.host {
                    node.convict(other);
                }
            }
        }
        for _ in 0..20 {
            for (node, skew) in run.cluster.nodes.iter().zip(&skews) {
                node.clock
                    .set_us(EPOCH_US + run.started.elapsed().as_micros() as i64 + skew);
            }
            sleep(Duration::from_millis(5)).await;
        }
    }
    heal(&run.cluster);
    run.cluster.network.set_drop_probability(0.0);
}

/// Joins every pair of nodes again, and has every failure detector see every node up.
fn heal(cluster: &Cluster) {
    cluster.network.heal_all();
    for node in &cluster.nodes {
        for other in &cluster.nodes {
            node.liveness.set(other.host, true);
        }
    }
}

fn run_seed(seed: u64, ops: usize) -> Result<String, String> {
    sim::paused(async |dir| {
        let mut rng = StdRng::seed_from_u64(seed);
        let layout = layout(&mut rng);
        let cluster = Cluster::new(&layout, seed, dir);
        let run = Rc::new(Run {
            cluster,
            started: Instant::now(),
            histories: RefCell::new(vec![Vec::new(); REGISTERS]),
            counts: RefCell::new([0; 5]),
        });
        let until = Instant::now() + Duration::from_secs(2 + ops as u64 / 20);
        let faults = tokio::task::spawn_local(faults(run.clone(), seed, until));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                tokio::task::spawn_local(client(
                    run.clone(),
                    c,
                    ops,
                    seed.wrapping_mul(31).wrapping_add(c as u64),
                ))
            })
            .collect();
        for c in clients {
            c.await.expect("a client finishes");
        }
        faults.abort();
        let histories = run.histories.borrow();
        let mut undecided = 0;
        for (register, history) in histories.iter().enumerate() {
            match check(history).map_err(|e| format!("seed {seed}, register {register}: {e}"))? {
                Verdict::Linearizable => {}
                Verdict::Undecided => undecided += 1,
            }
        }
        let c = run.counts.borrow();
        if c[1] == 0 || undecided == REGISTERS {
            return Err(format!(
                "seed {seed}: no write was applied, or no history could be judged ({c:?}, \
                 {undecided} undecided): the run tests nothing"
            ));
        }
        Ok(format!(
            "seed {seed}: {} serial reads, {} applied, {} not applied, {} unknown, {} unavailable; \
             {undecided} of {REGISTERS} registers' histories too large to judge",
            c[0], c[1], c[2], c[3], c[4]
        ))
    })
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("HAYATE_SEED") {
        return vec![s.trim().parse().expect("HAYATE_SEED must be an unsigned integer")];
    }
    let n = std::env::var("HAYATE_PAXOS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    (1..=n).collect()
}

#[test]
fn compare_and_set_histories_are_linearizable_under_faults() {
    for seed in seeds() {
        match run_seed(seed, 30) {
            Ok(line) => eprintln!("{line}"),
            Err(e) => panic!(
                "{e}\n\nreplay: HAYATE_SEED={seed} cargo test -p hayate-cluster --test paxos_sim -- --nocapture"
            ),
        }
    }
}

#[test]
fn a_transaction_after_another_sees_it() {
    // No faults: each client's compare-and-set sees the value the one before it set.
    sim::paused(async |dir| {
        let mut rng = StdRng::seed_from_u64(1);
        let mut layout = layout(&mut rng);
        layout.config = CoordinatorConfig::default();
        let cluster = Cluster::new(&layout, 1, dir);
        let replication = cluster.replication.clone();
        let mut expect: Option<u32> = None;
        for n in 0..10u32 {
            let coordinator = &cluster.nodes[n as usize % 3].coordinator;
            let request = CasRequest {
                replication: &replication,
                serial: ConsistencyLevel::Serial,
                commit: ConsistencyLevel::Quorum,
                read: read_of(0),
            };
            let outcome = coordinator
                .cas(request, |current, ts| -> Result<_, ()> {
                    assert_eq!(value_of(current), expect, "transaction {n} sees the one before");
                    Ok(Some(write_of(0, n, ts)))
                })
                .await
                .expect("no faults: the transaction is applied");
            assert!(outcome.applied);
            expect = Some(n);
            // A condition that does not hold writes nothing.
            let request = CasRequest {
                replication: &replication,
                serial: ConsistencyLevel::Serial,
                commit: ConsistencyLevel::Quorum,
                read: read_of(0),
            };
            let outcome = coordinator
                .cas(request, |_, _| -> Result<_, ()> { Ok(None) })
                .await
                .expect("no faults");
            assert!(!outcome.applied);
            assert_eq!(value_of(&outcome.current), Some(n));
        }
        let seen = cluster.nodes[2]
            .coordinator
            .read_serial(&replication, ConsistencyLevel::Serial, read_of(0))
            .await
            .expect("a serial read");
        assert_eq!(value_of(&seen), Some(9));
    });
}

/// A cluster with no faults, on a paused clock, for a scenario set up by hand.
fn scenario(test: impl AsyncFnOnce(&Cluster)) {
    sim::paused(async |dir| {
        let mut layout = layout(&mut StdRng::seed_from_u64(1));
        layout.node_dcs = vec!["dc1".into(); 3];
        layout.config = CoordinatorConfig::default();
        let cluster = Cluster::new(&layout, 1, dir);
        test(&cluster).await;
    });
}

fn proposal(value: u32, micros: i64) -> Proposal {
    Proposal {
        ballot: Ballot { micros, node: 99 },
        update: Arc::new(write_of(0, value, micros)),
    }
}

fn on_replica(cluster: &Cluster, node: usize, request: PaxosRequest) -> PaxosReply {
    acceptor::handle(&*cluster.nodes[node].engine, request).expect("the replica answers")
}

#[test]
fn a_proposal_a_quorum_accepted_is_finished_by_the_next_round() {
    scenario(async |cluster| {
        // A coordinator got a proposal accepted by two replicas of three, then vanished
        // before it committed anything: the value is chosen, and the next round must finish it.
        let p = proposal(7, EPOCH_US - 1_000);
        let key = PaxosKey::of_read(&read_of(0));
        for node in [1, 2] {
            let prepared = on_replica(
                cluster,
                node,
                PaxosRequest::Prepare {
                    ballot: p.ballot,
                    read: read_of(0),
                },
            );
            assert!(matches!(prepared, PaxosReply::Promised { .. }));
            let accepted = on_replica(
                cluster,
                node,
                PaxosRequest::Propose {
                    key: key.clone(),
                    proposal: p.clone(),
                },
            );
            assert_eq!(accepted, PaxosReply::Accepted);
        }
        for coordinator in 0..3 {
            let seen = cluster.nodes[coordinator]
                .coordinator
                .read_serial(&cluster.replication, ConsistencyLevel::Serial, read_of(0))
                .await
                .expect("a serial read");
            assert_eq!(value_of(&seen), Some(7), "read through node {coordinator}");
        }
    });
}

#[test]
fn a_replica_behind_the_latest_commit_is_brought_up_to_it() {
    scenario(async |cluster| {
        // One replica of three took a commit the others missed.
        let p = proposal(8, EPOCH_US - 1_000);
        let key = PaxosKey::of_read(&read_of(0));
        on_replica(cluster, 0, PaxosRequest::Commit { key, proposal: p });
        let seen = cluster.nodes[0]
            .coordinator
            .read_serial(&cluster.replication, ConsistencyLevel::Serial, read_of(0))
            .await
            .expect("a serial read");
        assert_eq!(value_of(&seen), Some(8));
        // The read's quorum was node 0 and one other; that other holds the commit now, so
        // every quorum does.
        let held = (0..3)
            .filter(|&n| {
                let reply = on_replica(cluster, n, PaxosRequest::Prepare {
                    ballot: Ballot { micros: i64::MAX, node: n as u64 },
                    read: read_of(0),
                });
                matches!(reply, PaxosReply::Promised { ref data, .. } if value_of(&data.clone().into()) == Some(8))
            })
            .count();
        assert!(held >= 2, "the commit is on {held} replicas of 3");
    });
}

#[test]
fn an_update_is_written_later_than_every_update_before_it() {
    scenario(async |cluster| {
        // A transaction another node committed at a time this coordinator's clock has not
        // reached (ballots of two nodes can share a microsecond; here the other one is ahead).
        let ahead = EPOCH_US + 3_600_000_000;
        let key = PaxosKey::of_read(&read_of(0));
        for node in 0..3 {
            let p = proposal(8, ahead);
            on_replica(
                cluster,
                node,
                PaxosRequest::Commit {
                    key: key.clone(),
                    proposal: p,
                },
            );
        }
        let request = CasRequest {
            replication: &cluster.replication,
            serial: ConsistencyLevel::Serial,
            commit: ConsistencyLevel::Quorum,
            read: read_of(0),
        };
        let outcome = cluster.nodes[0]
            .coordinator
            .cas(request, |current, ts| -> Result<_, ()> {
                assert_eq!(value_of(current), Some(8));
                assert!(
                    ts > ahead,
                    "the update's time {ts} is not after the last one's {ahead}"
                );
                Ok(Some(write_of(0, 9, ts)))
            })
            .await
            .expect("no faults");
        assert!(outcome.applied);
        let seen = cluster.nodes[1]
            .coordinator
            .read_serial(&cluster.replication, ConsistencyLevel::Serial, read_of(0))
            .await
            .expect("a serial read");
        assert_eq!(
            value_of(&seen),
            Some(9),
            "the later transaction's value is the one kept"
        );
    });
}

/// A node's transport that drops the messages `drop` picks: answers lost on the way.
struct Dropping {
    inner: Arc<SimTransport>,
    drop: Box<dyn Fn(&Message) -> bool + Send + Sync>,
}

impl Transport for Dropping {
    fn send(&self, to: HostId, lane: Lane, message: Message) {
        if !(self.drop)(&message) {
            self.inner.send(to, lane, message);
        }
    }
}

/// Regression: a proposal no replica was known to accept, but which one replica did accept
/// before its answer was lost and its node convicted, was taken as refused. The coordinator
/// started again, finished its own proposal as an earlier one in progress, read its own update
/// back and answered "not applied" for an update it had made. The outcome is unknown: it must
/// be a CAS write timeout, as Cassandra's for a superseded proposal that may have had effects.
#[test]
fn a_proposal_a_convicted_replica_may_have_accepted_is_not_taken_as_refused() {
    sim::paused(async |dir| {
        let mut layout = layout(&mut StdRng::seed_from_u64(1));
        layout.node_dcs = vec!["dc1".into(); 3];
        layout.config = CoordinatorConfig::default();
        let cluster = Cluster::with_transports(&layout, 1, dir, |i, inner| -> Arc<dyn Transport> {
            let refused_once = AtomicBool::new(false);
            let accepted_once = AtomicBool::new(false);
            let drop: Box<dyn Fn(&Message) -> bool + Send + Sync> = match i {
                // Node 1 answers until it has refused once, then is silent.
                1 => Box::new(move |m| match m {
                    Message::PaxosResponse { result, .. } => {
                        let silent = refused_once.load(Ordering::SeqCst);
                        if matches!(result, Ok(PaxosReply::Refused { .. })) {
                            refused_once.store(true, Ordering::SeqCst);
                        }
                        silent
                    }
                    _ => false,
                }),
                // Node 2's first acceptance is lost.
                2 => Box::new(move |m| {
                    matches!(
                        m,
                        Message::PaxosResponse {
                            result: Ok(PaxosReply::Accepted),
                            ..
                        }
                    ) && !accepted_once.swap(true, Ordering::SeqCst)
                }),
                _ => Box::new(|_| false),
            };
            Arc::new(Dropping { inner, drop })
        });
        let messaging = cluster.nodes[0].messaging.clone();
        let request = CasRequest {
            replication: &cluster.replication,
            serial: ConsistencyLevel::Serial,
            commit: ConsistencyLevel::Quorum,
            read: read_of(0),
        };
        let mut first = true;
        let result = cluster.nodes[0]
            .coordinator
            .cas(request, |current, ts| -> Result<_, ()> {
                if first {
                    first = false;
                    // Another coordinator's prepare reaches nodes 0 and 1 first: they refuse
                    // this proposal; node 2 accepts it, its answer is lost, and node 0's
                    // failure detector convicts node 2.
                    for node in [0, 1] {
                        on_replica(
                            &cluster,
                            node,
                            PaxosRequest::Prepare {
                                ballot: Ballot {
                                    micros: ts + 1,
                                    node: 99,
                                },
                                read: read_of(0),
                            },
                        );
                    }
                    let messaging = messaging.clone();
                    tokio::task::spawn_local(async move {
                        sleep(Duration::from_millis(100)).await;
                        messaging.fail_requests_to(host(2));
                    });
                }
                // INSERT ... IF NOT EXISTS
                Ok(value_of(current).is_none().then(|| write_of(0, 5, ts)))
            })
            .await;
        match result {
            Err(CasError::Coordinator(CoordinatorError::WriteTimeout { write_type, .. })) => {
                assert_eq!(write_type, WriteType::Cas)
            }
            Ok(outcome) => panic!(
                "the outcome is unknown, but the coordinator answered applied = {} with {:?}",
                outcome.applied,
                value_of(&outcome.current)
            ),
            Err(e) => panic!("{e:?}"),
        }
    });
}

/// Transactions one coordinator runs on one partition at once take turns: each sees the one
/// before it, none races another's ballot, so none waits out a contention backoff.
#[test]
fn one_coordinators_transactions_on_a_partition_take_turns() {
    scenario(async |cluster| {
        let coordinator = &cluster.nodes[0].coordinator;
        let before = coordinator.metrics().paxos_contended;
        let increment = || async {
            let request = CasRequest {
                replication: &cluster.replication,
                serial: ConsistencyLevel::Serial,
                commit: ConsistencyLevel::Quorum,
                read: read_of(0),
            };
            coordinator
                .cas(request, |current, ts| -> Result<_, ()> {
                    Ok(Some(write_of(0, value_of(current).unwrap_or(0) + 1, ts)))
                })
                .await
                .expect("no faults: the transaction is applied")
                .applied
        };
        let (a, b, c, d, e, f, g, h) = tokio::join!(
            increment(),
            increment(),
            increment(),
            increment(),
            increment(),
            increment(),
            increment(),
            increment()
        );
        let applied = [a, b, c, d, e, f, g, h];
        assert!(applied.iter().all(|a| *a), "{applied:?}");
        let seen = coordinator
            .read_serial(&cluster.replication, ConsistencyLevel::Serial, read_of(0))
            .await
            .expect("a serial read");
        assert_eq!(value_of(&seen), Some(8), "every increment saw the one before it");
        assert_eq!(
            coordinator.metrics().paxos_contended - before,
            0,
            "the coordinator's own transactions collided"
        );
    });
}
