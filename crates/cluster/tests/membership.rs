//! Membership over real UDP gossip between nodes on 127.0.0.1..127.0.0.5, each on the same port
//! number, as a local cluster runs them.
//!
//! The tests run one at a time (they measure time, and the machine has two cores): each takes
//! the `SERIAL` lock. Timing assertions are generous, except the one the design promises: a
//! killed node is marked down by every other node within five seconds.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use hayate_cluster::membership::{Membership, MembershipConfig, MembershipEvent, NodeStatus, PeerState};
use hayate_cluster::node::{HostId, NodeInfo, Placement};
use tokio::sync::broadcast::{self, error::TryRecvError};

/// What the design promises: a killed node is down everywhere within this.
const DOWN_WITHIN: Duration = Duration::from_secs(5);
/// Generous bounds for what is not promised to the second.
const FORM_WITHIN: Duration = Duration::from_secs(10);
const SPREAD_WITHIN: Duration = Duration::from_secs(10);

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    // A failed test poisons the lock; the next one may still run.
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn address(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

fn host(n: u8) -> HostId {
    HostId([
        0x3f, 0x2b, 0x6a, n, 0x0d, 0x4e, 0x4a, 0x5b, 0x9c, 0x8d, 0x7e, 0x6f, 0x5a, 0x4b, 0x3c, n,
    ])
}

fn info(n: u8, port: u16) -> NodeInfo {
    NodeInfo {
        host_id: host(n),
        placement: Placement {
            data_center: format!("dc{}", 1 + n % 2),
            rack: format!("rack{n}"),
        },
        listen_address: address(n),
        storage_port: port,
        cql_address: SocketAddr::new(address(n), 9042),
        release_version: format!("4.1.{n}"),
    }
}

/// A port number free for UDP on every one of `nodes`' addresses.
fn free_port(nodes: &[u8]) -> u16 {
    'search: for _ in 0..100 {
        let probe = UdpSocket::bind(SocketAddr::new(address(nodes[0]), 0)).expect("an ephemeral UDP port");
        let port = probe.local_addr().expect("a bound socket's address").port();
        let mut held = vec![probe];
        for &n in &nodes[1..] {
            match UdpSocket::bind(SocketAddr::new(address(n), port)) {
                Ok(socket) => held.push(socket),
                Err(_) => continue 'search,
            }
        }
        return port;
    }
    panic!("no UDP port is free on all of 127.0.0.{nodes:?}");
}

fn start(cluster: &str, n: u8, port: u16, generation: u64, seeds: &[u8]) -> Membership {
    let seeds = seeds.iter().map(|&s| SocketAddr::new(address(s), port)).collect();
    Membership::start(MembershipConfig::new(cluster, info(n, port), generation, seeds))
        .expect("gossip starts")
}

/// Polls `check` every 10 ms until it holds or `within` passes; returns how long it took.
fn wait_until(within: Duration, what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < within, "not within {within:?}: {what}");
        thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

/// Events received so far, without waiting.
fn drain(events: &mut broadcast::Receiver<MembershipEvent>, into: &mut Vec<MembershipEvent>) {
    loop {
        match events.try_recv() {
            Ok(event) => into.push(event),
            Err(TryRecvError::Empty) | Err(TryRecvError::Closed) => return,
            Err(TryRecvError::Lagged(missed)) => panic!("a test subscriber missed {missed} events"),
        }
    }
}

/// A node's event stream and what it delivered so far.
struct Observer {
    node: u8,
    events: broadcast::Receiver<MembershipEvent>,
    seen: Vec<MembershipEvent>,
}

fn observe(node: u8, membership: &Membership) -> Observer {
    Observer {
        node,
        events: membership.subscribe(),
        seen: Vec::new(),
    }
}

/// Waits until every observer has delivered an event matching `wanted`, and returns for each
/// the time from `since` to when it was first seen (all are watched together, every 5 ms, so
/// one observer's wait does not count in another's time).
fn wait_for_event_on_each(
    observers: &mut [Observer],
    since: Instant,
    within: Duration,
    what: &str,
    wanted: impl Fn(&MembershipEvent) -> bool,
) -> Vec<Duration> {
    let mut took: Vec<Option<Duration>> = vec![None; observers.len()];
    loop {
        let now = since.elapsed();
        for (observer, took) in observers.iter_mut().zip(&mut took) {
            let before = observer.seen.len();
            drain(&mut observer.events, &mut observer.seen);
            if took.is_none() && observer.seen[before..].iter().any(&wanted) {
                *took = Some(now);
            }
        }
        if took.iter().all(Option::is_some) {
            return took.into_iter().flatten().collect();
        }
        for (observer, took) in observers.iter().zip(&took) {
            assert!(
                took.is_some() || now < within,
                "node {} saw no {what} within {within:?}; its events: {:?}",
                observer.node,
                observer.seen
            );
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until every node sees every other of `nodes` up.
fn wait_formed(members: &[(u8, &Membership)]) -> Duration {
    wait_until(FORM_WITHIN, "every node sees every other up", || {
        members
            .iter()
            .all(|(_, m)| members.iter().all(|(n, _)| m.is_alive(host(*n))))
    })
}

fn assert_knows(observer: &Membership, n: u8, port: u16) {
    let peer: PeerState = observer.peer(host(n)).expect("the peer is known");
    assert_eq!(peer.info, info(n, port), "what was published is what is seen");
    assert!(peer.alive);
    assert_eq!(peer.status, NodeStatus::Normal);
    assert_eq!(peer.gossip_address, SocketAddr::new(address(n), port));
}

#[test]
fn three_nodes_with_one_seed_see_each_other_up_with_their_info() {
    let _serial = serial();
    let port = free_port(&[1, 2, 3]);
    let n1 = start("formation", 1, port, 100, &[1]);
    let n2 = start("formation", 2, port, 100, &[1]);
    let n3 = start("formation", 3, port, 100, &[1]);
    let mut n1_events = n1.subscribe();
    let took = wait_formed(&[(1, &n1), (2, &n2), (3, &n3)]);
    eprintln!("three nodes formed a cluster in {took:?}");
    for (me, m) in [(1, &n1), (2, &n2), (3, &n3)] {
        for other in [1u8, 2, 3].into_iter().filter(|&other| other != me) {
            assert_knows(m, other, port);
        }
        assert_eq!(m.peers().len(), 2, "peers lists the others, not the node itself");
        assert!(m.peer(host(me)).is_none());
        assert_eq!(m.local().info, info(me, port));
        assert_eq!(m.live_hosts(), vec![host(1), host(2), host(3)]);
        assert!(!m.is_alive(host(9)), "an unknown host is down");
    }
    // The seed heard of both others: joined, then up.
    let mut seen = Vec::new();
    drain(&mut n1_events, &mut seen);
    for n in [2, 3] {
        let joined = seen
            .iter()
            .position(|e| matches!(e, MembershipEvent::Joined(p) if p.info.host_id == host(n)));
        let up = seen.iter().position(|e| *e == MembershipEvent::Up(host(n)));
        assert!(
            matches!((joined, up), (Some(j), Some(u)) if j < u),
            "joined then up for node {n}: {seen:?}"
        );
    }
    for m in [n1, n2, n3] {
        m.kill();
    }
}

#[test]
fn published_state_reaches_the_other_nodes() {
    let _serial = serial();
    let port = free_port(&[1, 2, 3]);
    let n1 = start("publish", 1, port, 100, &[1]);
    let n2 = start("publish", 2, port, 100, &[1]);
    let n3 = start("publish", 3, port, 100, &[1]);
    wait_formed(&[(1, &n1), (2, &n2), (3, &n3)]);
    let mut observers = [observe(2, &n2), observe(3, &n3)];

    let schema = [0xa5; 16];
    n1.set_schema_version(schema);
    n1.set_status(NodeStatus::Leaving);
    n1.set_load(123_456_789);
    n1.set("tokens", "256").expect("a small key-value");
    let local = n1.local();
    assert_eq!(
        (local.schema_version, local.status, local.load_bytes),
        (Some(schema), NodeStatus::Leaving, Some(123_456_789))
    );

    let published = |peer: &PeerState| {
        peer.info.host_id == host(1)
            && peer.schema_version == Some(schema)
            && peer.status == NodeStatus::Leaving
            && peer.load_bytes == Some(123_456_789)
            && peer.application.get("tokens").map(String::as_str) == Some("256")
    };
    let since = Instant::now();
    let took = wait_for_event_on_each(
        &mut observers,
        since,
        SPREAD_WITHIN,
        "Changed with all of node 1's keys",
        |e| matches!(e, MembershipEvent::Changed(peer) if published(peer)),
    );
    eprintln!("node 1's new state reached nodes 2 and 3 in {took:?}");
    for m in [&n2, &n3] {
        let peer = m.peer(host(1)).expect("node 1 is known");
        assert!(published(&peer) && peer.alive, "{peer:?}");
    }
    // Nothing in a change of published state is a change of liveness.
    for observer in &observers {
        assert!(
            !observer
                .seen
                .iter()
                .any(|e| matches!(e, MembershipEvent::Down(_))),
            "{:?}",
            observer.seen
        );
    }
    // Bounds on application keys.
    assert!(n1.set("", "x").is_err());
    assert!(n1.set(&"k".repeat(65), "x").is_err());
    assert!(n1.set("big", &"v".repeat(1025)).is_err());
    for m in [n1, n2, n3] {
        m.kill();
    }
}

#[test]
fn a_killed_node_is_down_everywhere_within_five_seconds_and_up_again_when_it_restarts() {
    let _serial = serial();
    let port = free_port(&[1, 2, 3]);
    let n1 = start("kill", 1, port, 100, &[1]);
    let n2 = start("kill", 2, port, 100, &[1]);
    let mut n3 = start("kill", 3, port, 100, &[1]);
    wait_formed(&[(1, &n1), (2, &n2), (3, &n3)]);
    let mut observers = [observe(1, &n1), observe(2, &n2)];
    let mut detections = Vec::new();
    for life in 0..3u64 {
        // Let the failure detectors learn the heartbeat rate, as in a cluster that has run a while.
        thread::sleep(Duration::from_secs(1));
        let killed = Instant::now();
        n3.kill();
        let took = wait_for_event_on_each(
            &mut observers,
            killed,
            DOWN_WITHIN,
            "Down for the killed node",
            |e| *e == MembershipEvent::Down(host(3)),
        );
        eprintln!("life {life}: nodes 1 and 2 saw node 3 down {took:?} after the kill");
        detections.extend(took);
        for m in [&n1, &n2] {
            assert!(!m.is_alive(host(3)));
            assert_eq!(m.live_hosts(), vec![host(1), host(2)]);
            let dead = m.peer(host(3)).expect("a dead node stays known");
            assert!(!dead.alive);
            assert_eq!(m.peers().len(), 2, "and listed");
        }

        // Same host id and address, a new generation: SIGKILL then a restart.
        let restarted = Instant::now();
        n3 = start("kill", 3, port, 101 + life, &[1]);
        let took = wait_for_event_on_each(
            &mut observers,
            restarted,
            FORM_WITHIN,
            "Up for the restarted node",
            |e| *e == MembershipEvent::Up(host(3)),
        );
        eprintln!("life {life}: nodes 1 and 2 saw node 3 up {took:?} after its restart");
        for observer in &observers {
            let ups_and_downs: Vec<_> = observer
                .seen
                .iter()
                .filter(|e| matches!(e, MembershipEvent::Up(h) | MembershipEvent::Down(h) if *h == host(3)))
                .collect();
            let last_two = &ups_and_downs[ups_and_downs.len() - 2..];
            assert_eq!(
                last_two,
                [&MembershipEvent::Down(host(3)), &MembershipEvent::Up(host(3))]
            );
        }
        for m in [&n1, &n2] {
            let back = m.peer(host(3)).expect("known");
            assert!(back.alive && m.is_alive(host(3)));
            assert_eq!(back.generation, 101 + life);
        }
    }
    detections.sort();
    eprintln!(
        "detection after SIGKILL-like stop: min {:?}, median {:?}, max {:?} over {} observations",
        detections[0],
        detections[detections.len() / 2],
        detections[detections.len() - 1],
        detections.len()
    );
    for m in [n1, n2, n3] {
        m.kill();
    }
}

#[test]
fn a_node_that_shuts_down_is_down_at_once() {
    let _serial = serial();
    let port = free_port(&[1, 2, 3]);
    let n1 = start("goodbye", 1, port, 100, &[1]);
    let n2 = start("goodbye", 2, port, 100, &[1]);
    let n3 = start("goodbye", 3, port, 100, &[1]);
    wait_formed(&[(1, &n1), (2, &n2), (3, &n3)]);
    let mut observers = [observe(1, &n1), observe(2, &n2)];
    let stopped = Instant::now();
    n3.shutdown();
    // Well before any failure detector could have convicted it.
    let took = wait_for_event_on_each(
        &mut observers,
        stopped,
        Duration::from_secs(1),
        "Down after a shutdown",
        |e| *e == MembershipEvent::Down(host(3)),
    );
    eprintln!("nodes 1 and 2 saw node 3 down {took:?} after it began to shut down");
    assert_eq!(n1.peer(host(3)).expect("known").status, NodeStatus::Shutdown);
    for m in [n1, n2] {
        m.kill();
    }
}

#[test]
fn no_node_is_reported_down_while_the_request_runtime_is_saturated() {
    let _serial = serial();
    let port = free_port(&[1, 2, 3]);
    let n1 = start("load", 1, port, 100, &[1]);
    let n2 = start("load", 2, port, 100, &[1]);
    let n3 = start("load", 3, port, 100, &[1]);
    wait_formed(&[(1, &n1), (2, &n2), (3, &n3)]);
    let mut observers = [n1.subscribe(), n2.subscribe(), n3.subscribe()];

    // A request runtime with a worker per core, every worker busy with CPU work that never
    // yields, several times over; and as many plain threads spinning besides.
    let cores = thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let load_for = Duration::from_secs(10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .build()
        .expect("a runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let spin = |stop: Arc<AtomicBool>| {
        move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..10_000u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                }
                std::hint::black_box(x);
            }
        }
    };
    let tasks: Vec<_> = (0..4 * cores)
        .map(|_| runtime.spawn_blocking(spin(stop.clone())))
        .collect();
    for _ in 0..4 * cores {
        let work = spin(stop.clone());
        runtime.spawn(async move { work() });
    }
    let threads: Vec<_> = (0..cores).map(|_| thread::spawn(spin(stop.clone()))).collect();
    let loaded = Instant::now();
    while loaded.elapsed() < load_for {
        thread::sleep(Duration::from_millis(100));
        for (i, events) in observers.iter_mut().enumerate() {
            let mut seen = Vec::new();
            drain(events, &mut seen);
            let downs: Vec<_> = seen
                .iter()
                .filter(|e| matches!(e, MembershipEvent::Down(_)))
                .collect();
            assert!(
                downs.is_empty(),
                "node {} reported {downs:?} under load after {:?}",
                i + 1,
                loaded.elapsed()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a spinning thread ends");
    }
    drop(tasks);
    runtime.shutdown_timeout(Duration::from_secs(5));
    for m in [&n1, &n2, &n3] {
        assert_eq!(m.live_hosts(), vec![host(1), host(2), host(3)]);
    }
    for m in [n1, n2, n3] {
        m.kill();
    }
}

#[test]
fn clusters_with_different_names_do_not_mix() {
    let _serial = serial();
    let port = free_port(&[1, 2, 3, 4, 5]);
    let a1 = start("alpha", 1, port, 100, &[1]);
    let a2 = start("alpha", 2, port, 100, &[1]);
    let b3 = start("beta", 3, port, 100, &[3]);
    // Given a seed of the other cluster as well as its own.
    let b4 = start("beta", 4, port, 100, &[1, 3]);
    // Given only a seed of the other cluster: it stays alone.
    let b5 = start("beta", 5, port, 100, &[2]);
    wait_formed(&[(1, &a1), (2, &a2)]);
    wait_formed(&[(3, &b3), (4, &b4)]);
    // Give strays time to be let in, if they were going to be.
    thread::sleep(Duration::from_secs(3));
    let hosts = |m: &Membership| m.peers().iter().map(|p| p.info.host_id).collect::<Vec<_>>();
    assert_eq!(hosts(&a1), vec![host(2)]);
    assert_eq!(hosts(&a2), vec![host(1)]);
    assert_eq!(hosts(&b3), vec![host(4)]);
    assert_eq!(hosts(&b4), vec![host(3)]);
    assert_eq!(hosts(&b5), Vec::<HostId>::new());
    for m in [a1, a2, b3, b4, b5] {
        m.kill();
    }
}
