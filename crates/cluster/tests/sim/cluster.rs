//! The simulated cluster: nodes, each with its own in-memory engine as its replica, its own
//! clock, its own hint store, its own view of who is alive, its own view of the metadata log
//! ([`SimLog`]) with the ring it plans requests on, and its own [`TopologyService`], all joined
//! to one [`SimNetwork`]. Spare nodes, built with the others, stay off the network and out of
//! the ring until a topology change brings them in.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hayate_cluster::consistency::Replication;
use hayate_cluster::coordinator::messaging::{Messaging, RequestHandler};
use hayate_cluster::coordinator::service::ReplicaService;
use hayate_cluster::coordinator::{Coordinator, CoordinatorConfig, CoordinatorParts, Liveness, Topology};
use hayate_cluster::hints::{HintStore, HintsConfig};
use hayate_cluster::message::Message;
use hayate_cluster::metadata::{ClusterMetadata, MemberRecord, MemberStatus};
use hayate_cluster::node::{HostId, NodeInfo, Placement};
use hayate_cluster::ring::{initial_tokens, RingNode, TokenRing};
use hayate_cluster::topology::{RingLog, TableSource, TopologyConfig, TopologyParts, TopologyService};
use hayate_cluster::transport::{SimNetwork, SimTransport, Transport};
use hayate_storage::{Engine, ManualClock, NamespaceConfig, TableId};
use tokio::time::Instant;

use super::model::TABLE;
use super::ring_log::{NodeLog, SimLog};

/// Every node's clock starts here (2023-11-14), plus its skew.
pub const EPOCH_US: i64 = 1_700_000_000_000_000;
/// Each engine's memory; the simulation writes a few hundred small rows.
const ENGINE_MEMORY_BYTES: u64 = 16 << 20;
/// Longer than any run: the engine's expiry pass would reclaim expired rows on its own thread,
/// at a real-time period, which a replayable run cannot have.
const EXPIRY_PERIOD_MS: u64 = 24 * 3600 * 1000;
/// The bytes of records a receiver asks for per stream chunk: small, so that a range streams
/// in several chunks and a receiver killed mid-stream has a checkpoint to resume from.
const STREAM_CHUNK_BYTES: u32 = 300;
/// The epoch of the metadata every node starts with.
pub const FIRST_EPOCH: u64 = 1;

/// Who a node believes is down, and since when: a failure detector the simulation drives,
/// late and sometimes wrong.
#[derive(Default)]
pub struct SimLiveness {
    down: Mutex<BTreeMap<HostId, Instant>>,
}

impl SimLiveness {
    pub fn set(&self, host: HostId, alive: bool) {
        let mut down = self.down.lock().expect("liveness lock");
        if alive {
            down.remove(&host);
        } else {
            down.entry(host).or_insert_with(Instant::now);
        }
    }
}

impl Liveness for SimLiveness {
    fn is_alive(&self, host: HostId) -> bool {
        !self.down.lock().expect("liveness lock").contains_key(&host)
    }

    fn down_for(&self, host: HostId) -> Option<Duration> {
        let down = self.down.lock().expect("liveness lock");
        down.get(&host)
            .map(|since| Instant::now().saturating_duration_since(*since))
    }
}

/// The messaging's handle on the replica service. The service holds the messaging it answers
/// through, so a strong handle both ways would be a cycle that keeps every engine (and its
/// three threads) alive after a run: the node owns the service, the messaging only this.
struct ServiceHandle(Weak<ReplicaService>);

impl RequestHandler for ServiceHandle {
    fn handle(&self, from: HostId, message: Message) {
        if let Some(service) = self.0.upgrade() {
            service.handle(from, message);
        }
    }
}

/// The one table the simulation writes, as the schema would list it.
struct SimTables(Replication);

impl TableSource for SimTables {
    fn tables(&self) -> Vec<(TableId, Replication)> {
        vec![(TABLE, self.0.clone())]
    }
}

pub struct Node {
    pub host: HostId,
    pub data_center: String,
    pub placement: Placement,
    pub clock: Arc<ManualClock>,
    pub engine: Arc<Engine>,
    pub coordinator: Arc<Coordinator>,
    pub messaging: Arc<Messaging>,
    pub liveness: Arc<SimLiveness>,
    pub log: Arc<NodeLog>,
    /// The node's part in topology changes; a restart makes a new one.
    pub topology: RefCell<Arc<TopologyService>>,
    /// Where its stream checkpoints survive a restart.
    pub state_dir: PathBuf,
    service: Arc<ReplicaService>,
    tables: Arc<SimTables>,
}

impl Node {
    /// What a node does when its failure detector convicts `host`, rightly or not: it believes
    /// it down, and its requests waiting there fail at once (`Unreachable`).
    pub fn convict(&self, host: HostId) {
        self.liveness.set(host, false);
        self.messaging.fail_requests_to(host);
    }

    pub fn topology(&self) -> Arc<TopologyService> {
        self.topology.borrow().clone()
    }

    /// What a restart of the node's process does for topology changes: a new service with the
    /// same replica and the same checkpoints, wired as the server wires it.
    pub fn restart_topology(&self) -> Arc<TopologyService> {
        let topology = topology_service(TopologyWiring {
            host: self.host,
            log: &self.log,
            tables: &self.tables,
            messaging: &self.messaging,
            engine: &self.engine,
            service: &self.service,
            liveness: &self.liveness,
            coordinator: &self.coordinator,
            state_dir: &self.state_dir,
        });
        *self.topology.borrow_mut() = topology.clone();
        topology
    }

    /// The record this node joins with, owning `tokens`.
    pub fn record(&self, tokens: Vec<i64>) -> MemberRecord {
        member_record(self.host, self.placement.clone(), tokens, MemberStatus::Joining)
    }
}

/// What a node's topology service is made of.
struct TopologyWiring<'a> {
    host: HostId,
    log: &'a Arc<NodeLog>,
    tables: &'a Arc<SimTables>,
    messaging: &'a Arc<Messaging>,
    engine: &'a Arc<Engine>,
    service: &'a Arc<ReplicaService>,
    liveness: &'a Arc<SimLiveness>,
    coordinator: &'a Arc<Coordinator>,
    state_dir: &'a Path,
}

/// A topology service wired as the server wires it (`server/src/cluster/mod.rs` and
/// `operations.rs`): the replica service's streams and topology handler, the coordinator the
/// drain calls wait for, and the follower that cleans up after each change.
fn topology_service(w: TopologyWiring<'_>) -> Arc<TopologyService> {
    let topology = TopologyService::new(TopologyParts {
        local: w.host,
        log: w.log.clone(),
        tables: w.tables.clone(),
        messaging: w.messaging.clone(),
        replica: w.engine.clone(),
        streams: w.service.streams().clone(),
        liveness: w.liveness.clone(),
        config: TopologyConfig {
            state_dir: Some(w.state_dir.to_owned()),
            drain_call_timeout: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(60),
            cleanup_delay: Duration::from_secs(2),
        },
    });
    w.service.set_topology_handler(topology.handler());
    topology.set_coordinator(w.coordinator);
    topology.spawn_follower();
    topology
}

fn member_record(host: HostId, placement: Placement, tokens: Vec<i64>, status: MemberStatus) -> MemberRecord {
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, host.0[15]));
    MemberRecord {
        info: NodeInfo {
            host_id: host,
            placement,
            listen_address: ip,
            storage_port: 7000,
            cql_address: SocketAddr::new(ip, 9042),
            release_version: "4.1.0".to_owned(),
        },
        tokens,
        status,
    }
}

/// The coordinator's ring for `metadata`, as the server makes it (`node/tasks.rs`): the ring
/// reads follow and, while a change is in progress, the ring it leads to.
pub fn topology_of(metadata: &ClusterMetadata) -> Option<Topology> {
    let ring = metadata.ring().ok().filter(|r| !r.is_empty())?;
    let pending = metadata.pending_ring().and_then(Result::ok);
    Some(Topology::at_epoch(metadata.epoch, ring, pending))
}

/// Installs each state of the node's log as its coordinator's ring, as the server's
/// `follow_metadata` does.
async fn follow_ring(log: Arc<NodeLog>, coordinator: Weak<Coordinator>) {
    let mut watch = log.watch();
    loop {
        let metadata = watch.borrow_and_update().clone();
        let Some(c) = coordinator.upgrade() else { return };
        if let Some(topology) = topology_of(&metadata) {
            if topology.epoch() > c.topology().epoch() {
                c.set_topology(topology);
            }
        }
        drop(c);
        if watch.changed().await.is_err() {
            return;
        }
    }
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    /// The ring every node starts with.
    pub ring: TokenRing,
    pub replication: Replication,
    pub data_centers: Vec<String>,
    pub network: SimNetwork,
    pub log: Arc<SimLog>,
    /// Nodes `0..members` are in the ring at first; the others are spares.
    pub members: usize,
}

/// How a seed lays out its cluster.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Each node's data center, in node order.
    pub node_dcs: Vec<String>,
    /// Each spare node's data center: spares join or replace a node later.
    pub spare_dcs: Vec<String>,
    pub replication: Replication,
    pub tokens_per_node: usize,
    pub token_offset: i64,
    /// Timeouts and the hint replay rate, the same on every node.
    pub config: CoordinatorConfig,
}

pub fn host(i: usize) -> HostId {
    let mut id = [0u8; 16];
    id[0] = 0x51;
    // Each node its own Raft id too (the first 8 bytes), as the metadata log requires.
    id[7] = i as u8 + 1;
    id[15] = i as u8 + 1;
    HostId(id)
}

impl Cluster {
    /// Builds the nodes. Call inside the runtime: the network's scheduler is a task there.
    pub fn new(layout: &Layout, network_seed: u64, hints_dir: &Path) -> Cluster {
        Cluster::with_transports(layout, network_seed, hints_dir, |_, t| t)
    }

    /// Builds the nodes, each sending through what `wrap` makes of its simulated transport
    /// (a scenario holds back one node's messages this way).
    pub fn with_transports(
        layout: &Layout,
        network_seed: u64,
        hints_dir: &Path,
        wrap: impl Fn(usize, Arc<SimTransport>) -> Arc<dyn Transport>,
    ) -> Cluster {
        let network = SimNetwork::new(network_seed);
        let members = layout.node_dcs.len();
        let all_dcs: Vec<String> = layout.node_dcs.iter().chain(&layout.spare_dcs).cloned().collect();
        let tokens = initial_tokens(members, layout.tokens_per_node, layout.token_offset);
        let placement = |i: usize| Placement {
            data_center: all_dcs[i].clone(),
            rack: format!("rack{}", i % 2 + 1),
        };
        let initial = ClusterMetadata {
            epoch: FIRST_EPOCH,
            members: tokens
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let record = member_record(host(i), placement(i), t.clone(), MemberStatus::Normal);
                    (host(i), record)
                })
                .collect(),
            change: None,
        };
        let log = SimLog::new(initial, all_dcs.len(), network_seed ^ 0x10c);
        let ring = TokenRing::new(
            tokens
                .into_iter()
                .enumerate()
                .map(|(i, tokens)| RingNode {
                    host: host(i),
                    placement: placement(i),
                    tokens,
                })
                .collect(),
        )
        .expect("initial tokens make a valid ring");
        let mut data_centers: Vec<String> = layout.node_dcs.clone();
        data_centers.sort();
        data_centers.dedup();
        let nodes: Vec<Node> = (0..all_dcs.len())
            .map(|i| {
                let host = host(i);
                let clock = Arc::new(ManualClock::new(EPOCH_US));
                let mut config = NamespaceConfig::in_memory(&format!("n{i}"), ENGINE_MEMORY_BYTES);
                config.expiry_period_ms = EXPIRY_PERIOD_MS;
                let engine = Arc::new(
                    Engine::open_with_clock(config, clock.clone()).expect("open an engine in memory"),
                );
                let messaging = Messaging::new(host);
                let service = ReplicaService::new(engine.clone(), messaging.clone(), false);
                messaging.set_handler(Arc::new(ServiceHandle(Arc::downgrade(&service))));
                messaging.set_transport(wrap(i, network.join(host, messaging.clone())));
                let hints = HintStore::open(&hints_dir.join(format!("n{i}")), HintsConfig::default())
                    .expect("open a hint store in the temporary folder");
                service.streams().set_chunk_bytes(STREAM_CHUNK_BYTES);
                // The blocking pool's timing would make two runs of a seed differ.
                service.streams().set_inline_blocking(true);
                if i >= members {
                    // A spare is off until it joins.
                    network.isolate(host);
                }
                let liveness = Arc::new(SimLiveness::default());
                let coordinator = Coordinator::new(CoordinatorParts {
                    local: host,
                    placement: placement(i),
                    replica: engine.clone(),
                    clock: clock.clone(),
                    messaging: Some(messaging.clone()),
                    liveness: liveness.clone(),
                    hints: Some(Arc::new(hints)),
                    config: layout.config.clone(),
                });
                coordinator.set_topology(Topology::at_epoch(FIRST_EPOCH, ring.clone(), None));
                let coordinator = Arc::new(coordinator);
                let node_log = log.node(i);
                tokio::spawn(follow_ring(node_log.clone(), Arc::downgrade(&coordinator)));
                let state_dir = hints_dir.join(format!("streams-n{i}"));
                let tables = Arc::new(SimTables(layout.replication.clone()));
                let topology = topology_service(TopologyWiring {
                    host,
                    log: &node_log,
                    tables: &tables,
                    messaging: &messaging,
                    engine: &engine,
                    service: &service,
                    liveness: &liveness,
                    coordinator: &coordinator,
                    state_dir: &state_dir,
                });
                Node {
                    host,
                    data_center: all_dcs[i].clone(),
                    placement: placement(i),
                    clock,
                    engine,
                    coordinator,
                    messaging,
                    liveness,
                    log: node_log,
                    topology: RefCell::new(topology),
                    state_dir,
                    service,
                    tables,
                }
            })
            .collect();
        for i in 0..nodes.len() {
            tokio::spawn(log.clone().follow(i));
        }
        Cluster {
            nodes,
            ring,
            replication: layout.replication.clone(),
            data_centers,
            network,
            log,
            members,
        }
    }

    /// Handles on the engines, to check after a run that nothing keeps them alive.
    pub fn engines(&self) -> Vec<Weak<Engine>> {
        self.nodes.iter().map(|n| Arc::downgrade(&n.engine)).collect()
    }

    pub fn index_of(&self, host: HostId) -> usize {
        self.nodes
            .iter()
            .position(|n| n.host == host)
            .expect("a host of the ring")
    }
}

impl Drop for Cluster {
    /// Takes every node off the network, which holds their messaging as their inbox while
    /// their messaging holds the network.
    fn drop(&mut self) {
        for node in &self.nodes {
            self.network.leave(node.host);
        }
    }
}
