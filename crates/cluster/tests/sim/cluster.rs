//! The simulated cluster: nodes, each with its own in-memory engine as its replica, its own
//! clock, its own hint store and its own view of who is alive, all joined to one
//! [`SimNetwork`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hayate_cluster::consistency::Replication;
use hayate_cluster::coordinator::messaging::{Messaging, RequestHandler};
use hayate_cluster::coordinator::service::ReplicaService;
use hayate_cluster::coordinator::{Coordinator, CoordinatorConfig, CoordinatorParts, Liveness, Topology};
use hayate_cluster::hints::{HintStore, HintsConfig};
use hayate_cluster::message::Message;
use hayate_cluster::node::{HostId, Placement};
use hayate_cluster::ring::{initial_tokens, RingNode, TokenRing};
use hayate_cluster::transport::{SimNetwork, SimTransport, Transport};
use hayate_storage::{Engine, ManualClock, NamespaceConfig};
use tokio::time::Instant;

/// Every node's clock starts here (2023-11-14), plus its skew.
pub const EPOCH_US: i64 = 1_700_000_000_000_000;
/// Each engine's memory; the simulation writes a few hundred small rows.
const ENGINE_MEMORY_BYTES: u64 = 16 << 20;
/// Longer than any run: the engine's expiry pass would reclaim expired rows on its own thread,
/// at a real-time period, which a replayable run cannot have.
const EXPIRY_PERIOD_MS: u64 = 24 * 3600 * 1000;

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

pub struct Node {
    pub host: HostId,
    pub data_center: String,
    pub clock: Arc<ManualClock>,
    pub engine: Arc<Engine>,
    pub coordinator: Arc<Coordinator>,
    pub messaging: Arc<Messaging>,
    pub liveness: Arc<SimLiveness>,
    _service: Arc<ReplicaService>,
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub ring: TokenRing,
    pub replication: Replication,
    pub data_centers: Vec<String>,
    pub network: SimNetwork,
}

/// How a seed lays out its cluster.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Each node's data center, in node order.
    pub node_dcs: Vec<String>,
    pub replication: Replication,
    pub tokens_per_node: usize,
    pub token_offset: i64,
    /// Timeouts and the hint replay rate, the same on every node.
    pub config: CoordinatorConfig,
}

pub fn host(i: usize) -> HostId {
    let mut id = [0u8; 16];
    id[0] = 0x51;
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
        let tokens = initial_tokens(layout.node_dcs.len(), layout.tokens_per_node, layout.token_offset);
        let placement = |i: usize| Placement {
            data_center: layout.node_dcs[i].clone(),
            rack: format!("rack{}", i % 2 + 1),
        };
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
        let nodes = (0..layout.node_dcs.len())
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
                coordinator.set_topology(Topology::new(ring.clone()));
                Node {
                    host,
                    data_center: layout.node_dcs[i].clone(),
                    clock,
                    engine,
                    coordinator: Arc::new(coordinator),
                    messaging,
                    liveness,
                    _service: service,
                }
            })
            .collect();
        Cluster {
            nodes,
            ring,
            replication: layout.replication.clone(),
            data_centers,
            network,
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
