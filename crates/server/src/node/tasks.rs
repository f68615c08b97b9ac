//! The tasks that keep a node in step with its cluster:
//! - the metadata log's changes become the coordinator's ring, the transport's addresses and
//!   `TOPOLOGY_CHANGE` events;
//! - gossip's changes become `STATUS_CHANGE` events, addresses, and hint replays when a node
//!   comes back;
//! - the node's own load and schema version are published in gossip, hints are synced to disk,
//!   and hints still waiting for live nodes are replayed.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hayate_cluster::coordinator::Topology;
use hayate_cluster::membership::{MembershipEvent, NodeStatus};
use hayate_cluster::metadata::{ClusterMetadata, MemberStatus};
use hayate_cluster::node::HostId;
use hayate_cql::response::event::{StatusChange, TopologyChange};
use hayate_cql::response::Event;
use tokio::sync::broadcast::error::RecvError;

use crate::node::Node;

/// How often the node publishes its load and checks for hints to replay.
const PUBLISH_INTERVAL: Duration = Duration::from_secs(2);
/// How often hints written since are made durable.
const HINTS_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// Starts every task; each stops when the node is gone.
pub fn spawn(node: &Arc<Node>) {
    let replaying = Arc::new(Mutex::new(HashSet::new()));
    tokio::spawn(follow_metadata(Arc::downgrade(node)));
    tokio::spawn(follow_membership(Arc::downgrade(node), replaying.clone()));
    tokio::spawn(publish(Arc::downgrade(node), replaying));
}

/// The coordinator's ring for `metadata`: the ring reads follow and, while a topology change is
/// in progress, the ring it leads to (whose extra replicas get the writes too). `None` before
/// the ring has members.
pub fn topology_of(metadata: &ClusterMetadata) -> Option<Topology> {
    let ring = metadata.ring().ok().filter(|r| !r.is_empty())?;
    let pending = match metadata.pending_ring() {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            tracing::error!("the ring of the change in progress does not build: {e}");
            None
        }
        None => None,
    };
    Some(Topology::at_epoch(metadata.epoch, ring, pending))
}

/// Installs the agreed ring in the coordinator, keeps this node's gossiped status in step with
/// the log's, and tells drivers of nodes that joined (once normal), left, or whose tokens moved.
async fn follow_metadata(node: Weak<Node>) {
    let mut watch = match node.upgrade() {
        Some(n) => n.cluster.metadata.watch(),
        None => return,
    };
    // Members as drivers know them: normal or leaving (a joining node serves no client yet).
    let mut known: BTreeMap<HostId, Vec<i64>> = BTreeMap::new();
    let mut first = true;
    loop {
        let metadata = watch.borrow_and_update().clone();
        let Some(n) = node.upgrade() else { return };
        let me = n.cluster.info.host_id;
        for r in metadata.members.values() {
            if r.info.host_id != me {
                n.cluster
                    .transport
                    .set_peer(r.info.host_id, r.info.storage_address());
            }
        }
        if let Some(topology) = topology_of(&metadata) {
            n.coordinator.set_topology(topology);
        }
        if let Some(r) = metadata.members.get(&me) {
            n.cluster.membership.set_status(match r.status {
                MemberStatus::Joining => NodeStatus::Joining,
                MemberStatus::Normal => NodeStatus::Normal,
                MemberStatus::Leaving => NodeStatus::Leaving,
            });
        }
        let now: BTreeMap<HostId, Vec<i64>> = metadata
            .members
            .values()
            .filter(|r| r.status != MemberStatus::Joining)
            .map(|r| (r.info.host_id, r.tokens.clone()))
            .collect();
        if !first {
            // Drivers know nodes by address. A node that replaced a dead one on the dead one's
            // address (`--replace-address` with its own) is, to them, the node that was down
            // coming back, as Cassandra tells it: UP, not NEW_NODE, and no REMOVED_NODE for the
            // dead one, which made drivers drop the address while the replacement served there.
            let known_addresses: BTreeSet<SocketAddr> = known
                .keys()
                .filter_map(|h| n.cluster.removed_address(*h))
                .collect();
            let now_addresses: BTreeSet<SocketAddr> = now
                .keys()
                .filter_map(|h| metadata.members.get(h))
                .map(|r| r.info.cql_address)
                .collect();
            for (host, tokens) in &now {
                let Some(r) = metadata.members.get(host).filter(|_| *host != me) else {
                    continue;
                };
                let change = match known.get(host) {
                    None if known_addresses.contains(&r.info.cql_address) => {
                        tracing::info!(node = %r.info.listen_address, "a dead node replaced at its address");
                        let _ = n.events.send(Event::StatusChange {
                            change: StatusChange::Up,
                            address: r.info.cql_address,
                        });
                        continue;
                    }
                    None => TopologyChange::NewNode,
                    Some(before) if before != tokens => TopologyChange::MovedNode,
                    Some(_) => continue,
                };
                tracing::info!(node = %r.info.listen_address, ?change, "the ring changed");
                let _ = n.events.send(Event::TopologyChange {
                    change,
                    address: r.info.cql_address,
                });
            }
            for gone in known.keys().filter(|h| !now.contains_key(h) && **h != me) {
                // Its address is in the metadata no more (or is its replacement's, above); the
                // transport still knows it.
                if let Some(address) = n
                    .cluster
                    .removed_address(*gone)
                    .filter(|a| !now_addresses.contains(a))
                {
                    tracing::info!(node = %address.ip(), "a node left the ring");
                    let _ = n.events.send(Event::TopologyChange {
                        change: TopologyChange::RemovedNode,
                        address,
                    });
                }
            }
        }
        n.cluster.remember_addresses(&metadata);
        known = now;
        first = false;
        drop(n);
        if watch.changed().await.is_err() {
            return;
        }
    }
}

/// Turns gossip's events into driver events, transport addresses and hint replays.
async fn follow_membership(node: Weak<Node>, replaying: Arc<Mutex<HashSet<HostId>>>) {
    let mut events = match node.upgrade() {
        Some(n) => n.cluster.membership.subscribe(),
        None => return,
    };
    loop {
        let event = match events.recv().await {
            Ok(e) => e,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!("missed {n} membership events; the next ones will bring the state back");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let Some(n) = node.upgrade() else { return };
        match event {
            MembershipEvent::Joined(p) | MembershipEvent::Changed(p) => {
                n.cluster
                    .transport
                    .set_peer(p.info.host_id, p.info.storage_address());
            }
            MembershipEvent::Up(host) => {
                // Connections waiting out a reconnect backoff try now: requests may go to it.
                n.cluster.transport.peer_up(host);
                if let Some(r) = n.cluster.metadata.current().members.get(&host) {
                    tracing::info!(node = %r.info.listen_address, "node is up");
                    let _ = n.events.send(Event::StatusChange {
                        change: StatusChange::Up,
                        address: r.info.cql_address,
                    });
                }
                start_replay(&n, host, &replaying);
            }
            MembershipEvent::Down(host) => {
                // Requests waiting for its answers fail now rather than at their timeout: reads
                // ask another replica, writes hint it.
                n.cluster.messaging.fail_requests_to(host);
                if let Some(r) = n.cluster.metadata.current().members.get(&host) {
                    tracing::warn!(node = %r.info.listen_address, "node is down");
                    let _ = n.events.send(Event::StatusChange {
                        change: StatusChange::Down,
                        address: r.info.cql_address,
                    });
                }
            }
        }
    }
}

/// Replays the hints for `host` in the background, unless a replay to it is running.
fn start_replay(node: &Arc<Node>, host: HostId, replaying: &Arc<Mutex<HashSet<HostId>>>) {
    if !replaying.lock().expect("replaying lock poisoned").insert(host) {
        return;
    }
    let node = Arc::downgrade(node);
    let replaying = replaying.clone();
    tokio::spawn(async move {
        if let Some(n) = node.upgrade() {
            let delivered = n.coordinator.replay_hints(host).await;
            if delivered > 0 {
                tracing::info!(%host, delivered, "replayed hints");
            }
        }
        replaying.lock().expect("replaying lock poisoned").remove(&host);
    });
}

/// Publishes the node's load and schema version, syncs hints, and replays hints that wait for
/// nodes that are alive (a missed Up event must not strand them).
async fn publish(node: Weak<Node>, replaying: Arc<Mutex<HashSet<HostId>>>) {
    let mut last_publish = tokio::time::Instant::now() - PUBLISH_INTERVAL;
    let mut last_version = None;
    loop {
        tokio::time::sleep(HINTS_SYNC_INTERVAL).await;
        let Some(n) = node.upgrade() else { return };
        if let Err(e) = n.hints.sync() {
            tracing::error!("{e}");
        }
        if last_publish.elapsed() < PUBLISH_INTERVAL {
            continue;
        }
        last_publish = tokio::time::Instant::now();
        let stats = n.engine.stats();
        n.cluster.membership.set_load(stats.live_bytes);
        let version = n.schema.current().version;
        if last_version != Some(version) {
            n.cluster.membership.set_schema_version(version);
            last_version = Some(version);
        }
        for target in n.coordinator.hinted_targets() {
            if n.cluster.membership.is_alive(target) {
                start_replay(&n, target, &replaying);
            }
        }
    }
}
