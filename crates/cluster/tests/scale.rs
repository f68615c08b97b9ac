//! How a topology change scales with the size of the cluster, measured in one process: a cluster
//! grown from 3 members, node by node, to `HAYATE_SCALE_NODES` (101 by default), printing a
//! table every `HAYATE_SCALE_STEP` nodes (10 by default). `docs/cluster-scale.md` holds a run
//! and reads its curves.
//!
//! ```text
//! cargo test --release -p hayate-cluster --test scale -- --ignored --nocapture
//! ```
//!
//! What is real and what is not:
//! - The metadata log is real: one openraft [`Metadata`] service per node, with the default
//!   [`MetadataConfig`] timings, its files in a directory of its own (on `/dev/shm` when it
//!   exists, so that a hundred nodes' fsyncs do not queue on one disk as they never would on a
//!   hundred machines). They talk through an in-process router that counts every request and its
//!   bytes, both ways.
//! - Each join is the server's (`crates/server/src/cluster/join.rs`, `TopologyService::join`):
//!   a member allocates tokens with [`allocate_tokens_for_replication`] for the keyspace of the
//!   largest factor (here `NetworkTopologyStrategy {dc1: 3}`, 16 tokens, one rack) and
//!   calls [`Metadata::add_node`] with [`Command::StartJoin`] (the node becomes a Raft learner,
//!   catches up, a voter while there are fewer than five, then the entry is appended); the
//!   joining node then proposes [`Command::FinishChange`]. What the real join does between the
//!   two is skipped: the drain (a call to every member) and the streaming of data, since these
//!   nodes hold none.
//! - Gossip is real chitchat with the configuration `Membership` gives it (protocol V1, the
//!   same failure detector, a 250 ms interval, the same six keys plus `schema` and `load`), over
//!   chitchat's in-process `ChannelTransport`, which serializes every datagram and counts them.
//!   `Membership`'s own thread and its reading of the keys are not run: they add CPU, not
//!   traffic.
//! - Everything shares one tokio runtime with two worker threads, so timings include the
//!   scheduling of a hundred nodes on two cores: they are upper bounds for the protocol.
//!
//! Memory is measured by a counting global allocator: the bytes a `TokenRing` and its
//! `ReplicaMap` hold for the current ring (counted on the measuring thread alone), and the
//! whole process's live heap, divided by the node count, for the weight of a node's metadata
//! and gossip state.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chitchat::transport::ChannelTransport;
use chitchat::{
    spawn_chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig, ProtocolVersion,
};
use hayate_cluster::consistency::Replication;
use hayate_cluster::membership::{
    DEAD_NODE_GRACE_PERIOD_DEFAULT, GOSSIP_INTERVAL_DEFAULT, PHI_THRESHOLD_DEFAULT,
};
use hayate_cluster::metadata::{
    AppStateMachine, BoxFuture, ClusterMetadata, Command, CommandResult, MemberRecord, MemberStatus,
    Metadata, MetadataConfig, MetadataRpc, RaftRole, RpcError,
};
use hayate_cluster::node::{HostId, NodeInfo, Placement};
use hayate_cluster::ring::{allocate_tokens_for_replication, initial_tokens, TokenRing};
use tokio::time::Instant;

// ---------------------------------------------------------------------------------------------
// A counting allocator: the process's live heap, and each thread's net allocation.

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Bytes allocated minus bytes freed by this thread.
    static THREAD_NET_BYTES: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    LIVE_BYTES.fetch_add(delta, Ordering::Relaxed);
    // `try_with`: a thread being torn down has no thread-locals left, and still frees.
    let _ = THREAD_NET_BYTES.try_with(|n| n.set(n.get() + delta));
}

// SAFETY: every call goes to `System` unchanged; the counters only observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What `make` returns, and the bytes it still holds: this thread's net allocation while it ran
/// (what it allocated and freed again, scratch space, is not counted).
fn held_bytes<T>(make: impl FnOnce() -> T) -> (T, usize) {
    let before = THREAD_NET_BYTES.with(Cell::get);
    let value = make();
    let after = THREAD_NET_BYTES.with(Cell::get);
    (value, usize::try_from(after - before).unwrap_or(0))
}

// ---------------------------------------------------------------------------------------------
// The settings of a run.

/// Tokens per node: the server's default `num_tokens`.
const NUM_TOKENS: usize = 16;
/// The one rack every node is in. With three, `NetworkTopologyStrategy` puts a replica in each,
/// so a rack with fewer nodes than the others (whenever the count is not a multiple of three)
/// loads each of them more, whatever their tokens, and the balance figure would measure the
/// racks rather than the allocator.
const RACK: &str = "rack1";
/// How long traffic is counted at each reported size, the cluster otherwise idle.
const IDLE_WINDOW: Duration = Duration::from_secs(3);
/// How long a reported size may wait for every gossip node to see every other live.
const GOSSIP_SETTLE_MAX: Duration = Duration::from_secs(30);
/// Failed attempts one join may retry before the run gives up.
const RETRIES_MAX: u32 = 20;

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a whole number")),
        Err(_) => default,
    }
}

/// The keyspace whose factor the allocator balances.
fn replication() -> Replication {
    Replication::NetworkTopology {
        factors: BTreeMap::from([("dc1".to_owned(), 3)]),
    }
}

fn info(i: usize) -> NodeInfo {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&(0x5ca1_e000_0000_0000u64 + i as u64).to_be_bytes());
    id[8..].copy_from_slice(&(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1)).to_be_bytes());
    let ip = IpAddr::V4(Ipv4Addr::new(10, 0, (i / 250) as u8, (i % 250) as u8 + 1));
    NodeInfo {
        host_id: HostId(id),
        placement: Placement {
            data_center: "dc1".to_owned(),
            rack: RACK.to_owned(),
        },
        listen_address: ip,
        storage_port: 7000,
        cql_address: SocketAddr::new(ip, 9042),
        release_version: "4.1.0".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// The metadata network: a router that counts.

/// The server's state machine is not what is measured: it keeps nothing.
struct NoApp;

impl AppStateMachine for NoApp {
    fn apply(&self, _index: u64, _command: &[u8]) -> Vec<u8> {
        Vec::new()
    }

    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }

    fn restore(&self, _index: u64, _snapshot: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

/// One node's metadata traffic: requests it sent and served, and the bytes of both requests
/// and replies on its side.
#[derive(Default)]
struct Traffic {
    sent: AtomicU64,
    served: AtomicU64,
    bytes: AtomicU64,
}

#[derive(Clone, Copy, Default, Debug)]
struct TrafficCount {
    sent: u64,
    served: u64,
    bytes: u64,
}

impl Traffic {
    fn read(&self) -> TrafficCount {
        TrafficCount {
            sent: self.sent.load(Ordering::Relaxed),
            served: self.served.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

#[derive(Default)]
struct Router {
    nodes: Mutex<HashMap<HostId, (Metadata, Arc<Traffic>)>>,
    /// Requests by kind (the JSON tag: `append_entries`, `vote`, `propose`, ...), whole cluster.
    kinds: Mutex<BTreeMap<String, u64>>,
    /// Bytes of requests and replies, whole cluster.
    bytes: AtomicU64,
}

impl Router {
    fn traffic(&self, host: HostId) -> Arc<Traffic> {
        self.nodes.lock().expect("not poisoned")[&host].1.clone()
    }
}

/// The kind of a metadata request, from its JSON: `{"append_entries":…}` or `"ping"`.
fn kind_of(payload: &[u8]) -> String {
    let text = &payload[..payload.len().min(40)];
    let start = text.iter().position(|&b| b == b'"').map_or(0, |i| i + 1);
    let end = text[start..]
        .iter()
        .position(|&b| b == b'"')
        .map_or(text.len(), |i| start + i);
    String::from_utf8_lossy(&text[start..end]).into_owned()
}

struct RouterRpc {
    router: Arc<Router>,
    from: HostId,
    traffic: Arc<Traffic>,
}

impl MetadataRpc for RouterRpc {
    fn call(&self, to: HostId, payload: Vec<u8>, timeout: Duration) -> BoxFuture<Result<Vec<u8>, RpcError>> {
        let router = self.router.clone();
        let from = self.from;
        let sender = self.traffic.clone();
        Box::pin(async move {
            let target = router.nodes.lock().expect("not poisoned").get(&to).cloned();
            let Some((target, receiver)) = target else {
                return Err(RpcError::Unreachable {
                    host: to,
                    reason: "not running".to_owned(),
                });
            };
            *router
                .kinds
                .lock()
                .expect("not poisoned")
                .entry(kind_of(&payload))
                .or_default() += 1;
            let request_bytes = payload.len() as u64;
            sender.sent.fetch_add(1, Ordering::Relaxed);
            receiver.served.fetch_add(1, Ordering::Relaxed);
            let served = tokio::spawn(async move { target.handle(from, &payload).await });
            let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            match tokio::time::timeout(timeout, served).await {
                Ok(Ok(reply)) => {
                    let bytes = request_bytes + reply.len() as u64;
                    router.bytes.fetch_add(bytes, Ordering::Relaxed);
                    sender.bytes.fetch_add(bytes, Ordering::Relaxed);
                    receiver.bytes.fetch_add(bytes, Ordering::Relaxed);
                    Ok(reply)
                }
                Ok(Err(e)) => Err(RpcError::Failed {
                    host: to,
                    reason: e.to_string(),
                }),
                Err(_) => Err(RpcError::Timeout { host: to, timeout_ms }),
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Gossip: chitchat as `Membership` configures it, on the in-process transport.

fn chitchat_config(info: &NodeInfo, seeds: &[SocketAddr]) -> ChitchatConfig {
    let address = info.storage_address();
    ChitchatConfig {
        chitchat_id: ChitchatId::new(info.host_id.to_string(), 1, address),
        cluster_id: "scale".to_owned(),
        gossip_interval: GOSSIP_INTERVAL_DEFAULT,
        listen_addr: address,
        seed_nodes: seeds.iter().map(SocketAddr::to_string).collect(),
        failure_detector_config: FailureDetectorConfig {
            phi_threshold: PHI_THRESHOLD_DEFAULT,
            sampling_window_size: 1000,
            max_interval: Duration::from_secs(5),
            initial_interval: GOSSIP_INTERVAL_DEFAULT,
            dead_node_grace_period: DEAD_NODE_GRACE_PERIOD_DEFAULT,
        },
        marked_for_deletion_grace_period: DEAD_NODE_GRACE_PERIOD_DEFAULT,
        catchup_callback: None,
        extra_liveness_predicate: None,
        protocol_version: ProtocolVersion::V1,
    }
}

/// The keys a hayate node gossips (`membership/keys.rs`), with a schema version and a load.
fn gossip_keys(info: &NodeInfo, status: &str) -> Vec<(String, String)> {
    vec![
        ("dc".to_owned(), info.placement.data_center.clone()),
        ("rack".to_owned(), info.placement.rack.clone()),
        ("status".to_owned(), status.to_owned()),
        ("storage".to_owned(), info.storage_address().to_string()),
        ("cql".to_owned(), info.cql_address.to_string()),
        ("release".to_owned(), info.release_version.clone()),
        (
            "schema".to_owned(),
            "5ca1ab1e-0000-4000-8000-000000000001".to_owned(),
        ),
        ("load".to_owned(), "1073741824".to_owned()),
    ]
}

async fn set_gossip_status(handle: &ChitchatHandle, status: &str) {
    handle
        .chitchat()
        .lock()
        .await
        .self_node_state()
        .set("status", status);
}

/// How many gossip nodes see all `n` nodes live (themselves included).
async fn gossip_converged(gossip: &[ChitchatHandle], n: usize) -> usize {
    let mut converged = 0;
    for handle in gossip {
        if handle.chitchat().lock().await.live_nodes().count() >= n {
            converged += 1;
        }
    }
    converged
}

// ---------------------------------------------------------------------------------------------
// The cluster.

struct Node {
    info: NodeInfo,
    metadata: Metadata,
}

struct Cluster {
    router: Arc<Router>,
    nodes: Vec<Node>,
    gossip: Vec<ChitchatHandle>,
    transport: ChannelTransport,
    seeds: Vec<SocketAddr>,
    root: tempfile::TempDir,
}

impl Cluster {
    async fn open_node(&mut self, i: usize) -> Node {
        let info = info(i);
        let dir = self.root.path().join(format!("node{i}"));
        let config = MetadataConfig::new(info.clone(), dir);
        let traffic = Arc::new(Traffic::default());
        let rpc = Arc::new(RouterRpc {
            router: self.router.clone(),
            from: info.host_id,
            traffic: traffic.clone(),
        });
        let metadata = Metadata::open(config, rpc, Arc::new(NoApp))
            .await
            .expect("the metadata log opens");
        self.router
            .nodes
            .lock()
            .expect("not poisoned")
            .insert(info.host_id, (metadata.clone(), traffic));
        Node { info, metadata }
    }

    async fn start_gossip(&mut self, info: &NodeInfo, status: &str) {
        let handle = spawn_chitchat(
            chitchat_config(info, &self.seeds),
            gossip_keys(info, status),
            &self.transport,
        )
        .await
        .expect("chitchat starts on the channel transport");
        self.gossip.push(handle);
    }

    /// Three founders, as `join.rs`'s `form`: evenly spread tokens, one `initialize`.
    async fn form() -> Cluster {
        let root = match std::env::var_os("HAYATE_SCALE_DIR") {
            Some(dir) => tempfile::tempdir_in(dir),
            None if std::path::Path::new("/dev/shm").is_dir() => tempfile::tempdir_in("/dev/shm"),
            None => tempfile::tempdir(),
        }
        .expect("a temporary directory");
        let mut cluster = Cluster {
            router: Arc::new(Router::default()),
            nodes: Vec::new(),
            gossip: Vec::new(),
            transport: ChannelTransport::default(),
            seeds: (0..3).map(|i| info(i).storage_address()).collect(),
            root,
        };
        let founders = 3;
        let tokens = initial_tokens(founders, NUM_TOKENS, 0x1234_5678);
        let mut records = Vec::new();
        for (i, tokens) in tokens.into_iter().enumerate() {
            let node = cluster.open_node(i).await;
            records.push(MemberRecord {
                info: node.info.clone(),
                tokens,
                status: MemberStatus::Normal,
            });
            let info = node.info.clone();
            cluster.nodes.push(node);
            cluster.start_gossip(&info, "normal").await;
        }
        cluster.nodes[0]
            .metadata
            .initialize(records)
            .await
            .expect("the founders form a cluster");
        cluster
            .wait_applied_everywhere(cluster.nodes[0].metadata.current().epoch)
            .await;
        cluster
    }

    async fn wait_applied_everywhere(&self, epoch: u64) {
        for node in &self.nodes {
            let mut watch = node.metadata.watch();
            tokio::time::timeout(Duration::from_secs(30), watch.wait_for(|m| m.epoch >= epoch))
                .await
                .expect("every node applies the change within 30 s")
                .expect("the metadata log runs");
        }
    }

    fn leader(&self) -> HostId {
        self.nodes[0]
            .metadata
            .status()
            .leader
            .expect("the metadata log has a leader")
    }

    /// Node `i` joins: the figures of one join.
    async fn join(&mut self, i: usize) -> JoinFigures {
        let node = self.open_node(i).await;
        let info = node.info.clone();
        self.start_gossip(&info, "joining").await;
        let bytes_before = self.router.bytes.load(Ordering::Relaxed);
        let before = self
            .router
            .kinds
            .lock()
            .expect("not poisoned")
            .values()
            .sum::<u64>();

        let started = Instant::now();
        let mut allocate = Duration::ZERO;
        let mut retries = 0;
        // A member (a seed, as the joining node asks one) allocates the tokens and starts it; a
        // failure is retried, as the server's join retries on `JoinAnswer::Retry`.
        loop {
            let member = &self.nodes[1].metadata;
            let current = member.current();
            if current.members.contains_key(&info.host_id) {
                break;
            }
            let ring = current.ring().expect("the ring builds");
            let allocating = std::time::Instant::now();
            let tokens = allocate_tokens_for_replication(&ring, &info.placement, NUM_TOKENS, &replication());
            allocate = allocating.elapsed();
            let record = MemberRecord {
                info: info.clone(),
                tokens,
                status: MemberStatus::Joining,
            };
            match member.add_node(info.host_id, Command::StartJoin(record)).await {
                Ok(result) => {
                    assert_eq!(result, CommandResult::Done, "the join of node {i} is accepted");
                    break;
                }
                Err(e) => {
                    retries += 1;
                    assert!(
                        retries <= RETRIES_MAX,
                        "the join of node {i} failed {retries} times: {e}"
                    );
                    println!("# node {i}: the join did not start ({e}); retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        let start_join = started.elapsed();

        // The joining node, once it has applied its start, finishes it.
        let mut watch = node.metadata.watch();
        let change = tokio::time::timeout(
            Duration::from_secs(30),
            watch.wait_for(|m| {
                m.change
                    .as_ref()
                    .is_some_and(|c| c.kind.arriving() == Some(info.host_id))
            }),
        )
        .await
        .expect("the joining node applies its start within 30 s")
        .expect("the metadata log runs")
        .change
        .clone()
        .expect("a change in progress");
        let finishing = Instant::now();
        loop {
            match node
                .metadata
                .propose(Command::FinishChange { id: change.id })
                .await
            {
                Ok(result) => {
                    assert_eq!(result, CommandResult::Done, "the join of node {i} finishes");
                    break;
                }
                // A timeout may have finished it after all.
                Err(_) if node.metadata.current().change.is_none() => break,
                Err(e) => {
                    retries += 1;
                    assert!(
                        retries <= RETRIES_MAX,
                        "the join of node {i} failed {retries} times: {e}"
                    );
                    println!("# node {i}: the finish failed ({e}); retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        let finish = finishing.elapsed();
        let epoch = node.metadata.current().epoch;
        self.nodes.push(node);
        self.wait_applied_everywhere(epoch).await;
        let total = started.elapsed();
        set_gossip_status(self.gossip.last().expect("its gossip"), "normal").await;
        let bytes_after = self.router.bytes.load(Ordering::Relaxed);
        let after = self
            .router
            .kinds
            .lock()
            .expect("not poisoned")
            .values()
            .sum::<u64>();
        JoinFigures {
            allocate,
            start_join,
            finish,
            total,
            raft_messages: after - before,
            raft_bytes: bytes_after - bytes_before,
            retries,
        }
    }

    async fn shutdown(self) {
        for handle in self.gossip {
            handle.abort();
        }
        for node in self.nodes {
            node.metadata.shutdown().await;
        }
    }
}

struct JoinFigures {
    /// Choosing the tokens (CPU only).
    allocate: Duration,
    /// `add_node` with the `StartJoin`: learner, catch-up, (voter), the entry applied there.
    start_join: Duration,
    /// The joining node's `FinishChange` proposal, forwarded to the leader, applied back here.
    finish: Duration,
    /// From the allocation to the finish applied on every node.
    total: Duration,
    /// Metadata requests, whole cluster, while the join ran (heartbeats included).
    raft_messages: u64,
    /// Their bytes, requests and replies.
    raft_bytes: u64,
    /// Failed attempts (no leader, a timeout), each retried after a second.
    retries: u32,
}

/// The ring's figures for the metadata as it is.
struct RingFigures {
    metadata_bytes: usize,
    ring_bytes: usize,
    replica_map_bytes: usize,
    build: Duration,
    /// Most over least replicated ownership, under the allocator's replication.
    balance: f64,
}

fn ring_figures(metadata: &ClusterMetadata) -> RingFigures {
    let (copy, metadata_bytes) = held_bytes(|| metadata.clone());
    let building = std::time::Instant::now();
    let (ring, ring_bytes) = held_bytes(|| copy.ring().expect("the ring builds"));
    let (map, replica_map_bytes) = held_bytes(|| ring.replica_map(&replication()));
    let build = building.elapsed();
    let balance = balance(&ring);
    drop((copy, map));
    RingFigures {
        metadata_bytes,
        ring_bytes,
        replica_map_bytes,
        build,
        balance,
    }
}

fn balance(ring: &TokenRing) -> f64 {
    let shares = ring.ownership(Some(&replication()));
    let max = shares.values().copied().fold(f64::MIN, f64::max);
    let min = shares.values().copied().fold(f64::MAX, f64::min);
    max / min
}

/// Metadata traffic over a window, per second.
struct RaftRates {
    leader_messages: f64,
    leader_bytes: f64,
    /// Over every other node: the mean.
    follower_messages: f64,
    follower_bytes: f64,
    follower_messages_max: f64,
}

fn raft_rates(
    before: &HashMap<HostId, TrafficCount>,
    after: &HashMap<HostId, TrafficCount>,
    leader: HostId,
    window: Duration,
) -> RaftRates {
    let seconds = window.as_secs_f64();
    let rate = |host: &HostId| {
        let (b, a) = (before[host], after[host]);
        (
            (a.sent + a.served - b.sent - b.served) as f64 / seconds,
            (a.bytes - b.bytes) as f64 / seconds,
        )
    };
    let (leader_messages, leader_bytes) = rate(&leader);
    let followers: Vec<(f64, f64)> = after.keys().filter(|h| **h != leader).map(rate).collect();
    let n = followers.len().max(1) as f64;
    RaftRates {
        leader_messages,
        leader_bytes,
        follower_messages: followers.iter().map(|f| f.0).sum::<f64>() / n,
        follower_bytes: followers.iter().map(|f| f.1).sum::<f64>() / n,
        follower_messages_max: followers.iter().map(|f| f.0).fold(0.0, f64::max),
    }
}

fn traffic_counts(cluster: &Cluster) -> HashMap<HostId, TrafficCount> {
    cluster
        .nodes
        .iter()
        .map(|n| (n.info.host_id, cluster.router.traffic(n.info.host_id).read()))
        .collect()
}

/// CPU seconds this process has used (user and system), from `/proc/self/stat`; `None` where
/// there is no such file.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // The kernel's USER_HZ, 100 on every Linux this runs on.
    Some(ticks / 100.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

const HEADER: &str =
    "nodes | join ms | start ms | finish ms | alloc ms | raft msgs/join | raft KB/join | leader msgs/s | \
                      leader KB/s | follower msgs/s (max) | follower KB/s | gossip msgs/s/node | \
                      gossip KB/s/node | gossip settle ms | metadata KB | ring KB | replica map KB | \
                      ring build ms | heap MB/node | balance max/min | retries | vote requests | idle cores";

#[test]
#[ignore = "a measurement of a hundred in-process nodes (a minute or two in release): run it by name"]
fn topology_changes_at_scale() {
    let nodes_max = env_usize("HAYATE_SCALE_NODES", 101);
    let step = env_usize("HAYATE_SCALE_STEP", 10).max(1);
    assert!(nodes_max >= 3, "HAYATE_SCALE_NODES must be at least 3");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime starts");
    runtime.block_on(async move {
        let run_started = Instant::now();
        let mut cluster = Cluster::form().await;
        println!("{HEADER}");
        // The figures of the joins since the last report, averaged in the row.
        let mut joins: Vec<JoinFigures> = Vec::new();
        // Vote requests (elections) counted up to the last report.
        let mut votes_reported = 0;
        for n in 3..=nodes_max {
            if n > 3 {
                joins.push(cluster.join(n - 1).await);
            }
            if !(n == 3 || n % step == 0 || n == nodes_max) {
                continue;
            }
            // Let gossip learn of the newcomers, then count an idle window.
            let settling = Instant::now();
            while gossip_converged(&cluster.gossip, n).await < n {
                assert!(
                    settling.elapsed() < GOSSIP_SETTLE_MAX,
                    "gossip did not converge on {n} nodes within {GOSSIP_SETTLE_MAX:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let settle = settling.elapsed();
            // The heartbeats of the last join's gossip status settle too.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let votes = cluster.router.kinds.lock().expect("not poisoned").get("vote").copied().unwrap_or(0);
            let leader = cluster.leader();
            let raft_before = traffic_counts(&cluster);
            let gossip_before = cluster.transport.statistics();
            let cpu_before = process_cpu_seconds();
            let window_started = Instant::now();
            tokio::time::sleep(IDLE_WINDOW).await;
            let window = window_started.elapsed();
            let idle_cores = match (cpu_before, process_cpu_seconds()) {
                (Some(b), Some(a)) => (a - b) / window.as_secs_f64(),
                _ => f64::NAN,
            };
            let raft_after = traffic_counts(&cluster);
            let gossip_after = cluster.transport.statistics();
            let raft = raft_rates(&raft_before, &raft_after, leader, window);
            let per_node_second = (n as f64) * window.as_secs_f64();
            let gossip_messages =
                (gossip_after.num_messages_total - gossip_before.num_messages_total) as f64 / per_node_second;
            let gossip_bytes =
                (gossip_after.num_bytes_total - gossip_before.num_bytes_total) as f64 / per_node_second;
            let ring = ring_figures(&cluster.nodes[0].metadata.current());
            let heap_per_node = LIVE_BYTES.load(Ordering::Relaxed) as f64 / n as f64;
            let mean = |f: fn(&JoinFigures) -> f64| {
                if joins.is_empty() {
                    f64::NAN
                } else {
                    joins.iter().map(f).sum::<f64>() / joins.len() as f64
                }
            };
            println!(
                "{n} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} ({:.0}) | {:.2} | {:.1} | \
                 {:.2} | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.3} | {} | {} | {:.2}",
                mean(|j| ms(j.total)),
                mean(|j| ms(j.start_join)),
                mean(|j| ms(j.finish)),
                mean(|j| ms(j.allocate)),
                mean(|j| j.raft_messages as f64),
                mean(|j| j.raft_bytes as f64 / 1024.0),
                raft.leader_messages,
                raft.leader_bytes / 1024.0,
                raft.follower_messages,
                raft.follower_messages_max,
                raft.follower_bytes / 1024.0,
                gossip_messages,
                gossip_bytes / 1024.0,
                ms(settle),
                ring.metadata_bytes as f64 / 1024.0,
                ring.ring_bytes as f64 / 1024.0,
                ring.replica_map_bytes as f64 / 1024.0,
                ms(ring.build),
                heap_per_node / (1 << 20) as f64,
                ring.balance,
                joins.iter().map(|j| j.retries).sum::<u32>(),
                votes - votes_reported,
                idle_cores,
            );
            votes_reported = votes;
            let status = cluster.nodes[0].metadata.status();
            assert!(status.voters.len() <= 5, "at most five voters");
            assert_eq!(
                cluster.nodes.iter().filter(|n| n.metadata.status().role == RaftRole::Leader).count(),
                1,
                "one leader"
            );
            joins.clear();
        }
        let kinds = cluster.router.kinds.lock().expect("not poisoned").clone();
        println!("metadata requests over the run, by kind: {kinds:?}");
        println!("the run took {:.1} s", run_started.elapsed().as_secs_f64());
        let metadata = cluster.nodes[0].metadata.current();
        assert_eq!(metadata.members.len(), nodes_max, "every node joined");
        assert!(metadata.change.is_none(), "no change left in progress");
        cluster.shutdown().await;
    });
}
