//! The gossip thread: chitchat on a current-thread runtime of its own, and the loop that turns
//! chitchat's state into this module's view and events.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use chitchat::{
    spawn_chitchat, Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig,
    ProtocolVersion,
};
use tokio::sync::{watch, Mutex};
use tokio::time::MissedTickBehavior;
use tracing::{debug, error, info, warn};

use crate::node::HostId;

use super::keys::{self, APPLICATION_KEY_PREFIX};
use super::tracker::{Observation, Tracker};
use super::{
    MembershipConfig, MembershipError, MembershipEvent, NodeStatus, Shared, Stop, HEARTBEAT_INTERVAL_MAX,
    SAMPLING_WINDOW_SIZE,
};

/// After announcing a shutdown, how long the node keeps answering so that the exchanges it
/// started (a digest out, the peer's answer, our delta back) complete.
const GOODBYE_WAIT: Duration = Duration::from_millis(200);

/// The most peers a shutdown is announced to directly; the others hear it from them within a
/// gossip round or two.
const GOODBYE_PEERS_MAX: usize = 32;

/// Starts the gossip thread and waits until its socket is bound (or could not be).
pub(super) fn spawn(
    config: MembershipConfig,
    shared: Arc<Shared>,
    stop: watch::Receiver<Stop>,
) -> Result<JoinHandle<()>, MembershipError> {
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let thread = thread::Builder::new()
        .name("hayate-gossip".to_owned())
        .spawn(move || run(config, shared, stop, ready_tx))
        .map_err(|source| MembershipError::Thread { source })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(error)) => {
            let _ = thread.join();
            Err(error)
        }
        Err(mpsc::RecvError) => {
            // The thread ended without a word: it panicked.
            let _ = thread.join();
            Err(MembershipError::Thread {
                source: std::io::Error::other("the gossip thread panicked while starting"),
            })
        }
    }
}

fn chitchat_config(config: &MembershipConfig) -> ChitchatConfig {
    let address = config.local.storage_address();
    ChitchatConfig {
        chitchat_id: ChitchatId::new(config.local.host_id.to_string(), config.generation, address),
        cluster_id: config.cluster_name.clone(),
        gossip_interval: config.gossip_interval,
        listen_addr: address,
        seed_nodes: config.seeds.iter().map(|seed| seed.to_string()).collect(),
        failure_detector_config: FailureDetectorConfig {
            phi_threshold: config.phi_threshold,
            sampling_window_size: SAMPLING_WINDOW_SIZE,
            max_interval: HEARTBEAT_INTERVAL_MAX,
            // A newcomer's first intervals are averaged with this guess (chitchat's additive
            // smoothing); a gossip interval is a pessimistic one, so a node killed right after it
            // joined is convicted a little later, never sooner, than a settled one.
            initial_interval: config.gossip_interval,
            dead_node_grace_period: config.dead_node_grace_period,
        },
        marked_for_deletion_grace_period: config.dead_node_grace_period,
        catchup_callback: None,
        extra_liveness_predicate: None,
        // Every hayate node speaks V1 (a compressed digest), which fits four times more nodes
        // in a datagram than V0.
        protocol_version: ProtocolVersion::V1,
    }
}

fn run(
    config: MembershipConfig,
    shared: Arc<Shared>,
    stop: watch::Receiver<Stop>,
    ready: mpsc::SyncSender<Result<(), MembershipError>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(source) => {
            let _ = ready.send(Err(MembershipError::Thread { source }));
            return;
        }
    };
    runtime.block_on(async move {
        let address = config.local.storage_address();
        let initial = keys::initial_key_values(&config.local, config.status);
        // Chitchat's UDP transport, which says so in the log when a node of another cluster name
        // gossips with this one, or refuses its gossip.
        let transport = super::named::NamedTransport {
            cluster_name: config.cluster_name.clone(),
        };
        let handle = match spawn_chitchat(chitchat_config(&config), initial, &transport).await {
            Ok(handle) => handle,
            Err(source) => {
                let _ = ready.send(Err(MembershipError::Bind {
                    address,
                    source: source.into(),
                }));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        info!(
            host_id = %config.local.host_id,
            generation = config.generation,
            %address,
            cluster = %config.cluster_name,
            "gossip started"
        );
        let how = gossip_loop(&handle, &shared, stop, config.gossip_interval).await;
        match how {
            Stop::Kill | Stop::Run => {
                // Dropping the runtime aborts chitchat's task and closes its socket, with no
                // goodbye: what peers see of a crash.
            }
            Stop::Shutdown => {
                goodbye(&handle).await;
                if let Err(error) = handle.shutdown().await {
                    warn!(%error, "gossip did not stop cleanly");
                }
            }
        }
        info!(host_id = %config.local.host_id, ?how, "gossip stopped");
    });
}

/// Runs until asked to stop (or until chitchat's task dies), and says how it was asked.
async fn gossip_loop(
    handle: &ChitchatHandle,
    shared: &Shared,
    mut stop: watch::Receiver<Stop>,
    gossip_interval: Duration,
) -> Stop {
    let chitchat = handle.chitchat();
    let mut live_nodes = chitchat.lock().await.live_nodes_watcher();
    let mut tick = tokio::time::interval(gossip_interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let terminated = handle.termination_watcher();
    tokio::pin!(terminated);
    let mut tracker = Tracker::default();
    loop {
        tokio::select! {
            changed = stop.changed() => {
                let how = match changed {
                    Ok(()) => *stop.borrow_and_update(),
                    // Every handle is gone (their drop asks for a shutdown first, so this is a
                    // race at most).
                    Err(_) => Stop::Shutdown,
                };
                if how != Stop::Run {
                    return how;
                }
            }
            result = &mut terminated => {
                error!(?result, "chitchat stopped by itself: this node no longer gossips and \
                       will be seen down by its peers; restart it");
                return Stop::Kill;
            }
            // The live set or a live node's keys changed: react now rather than at the tick.
            _ = live_nodes.changed() => {}
            // Otherwise look every gossip interval: dead nodes' news (a peer heard of already
            // dead, a restart not yet live) does not move the live set.
            _ = tick.tick() => {}
            () = shared.publish.notified() => publish_pending(&chitchat, shared).await,
        }
        reconcile(&chitchat, &mut tracker, shared).await;
    }
}

/// Hands the keys set since the last call to chitchat.
async fn publish_pending(chitchat: &Mutex<Chitchat>, shared: &Shared) {
    let keys = std::mem::take(
        &mut shared
            .pending
            .lock()
            .expect("the pending keys' lock is never poisoned")
            .keys,
    );
    if keys.is_empty() {
        return;
    }
    let mut chitchat = chitchat.lock().await;
    let node = chitchat.self_node_state();
    for (key, value) in keys {
        node.set(key, value);
    }
}

/// Reads chitchat's state into the tracker, and publishes what changed: first the view
/// (liveness table, peers), then the events, so a subscriber that reacts sees the new view.
async fn reconcile(chitchat: &Mutex<Chitchat>, tracker: &mut Tracker, shared: &Shared) {
    let mut events = Vec::new();
    {
        let chitchat = chitchat.lock().await;
        let live: HashSet<&ChitchatId> = chitchat.live_nodes().collect();
        // Chitchat orders entries by node id, then generation: a node's lives come oldest first,
        // as the tracker needs.
        for (id, node) in chitchat.node_states() {
            let Ok(host_id) = id.node_id.parse::<HostId>() else {
                debug!(node_id = %id.node_id, "a gossip peer whose id is not a host id is ignored");
                continue;
            };
            if host_id == shared.local_host {
                // This node's own earlier lives, gossiped back to it.
                continue;
            }
            let seen = Observation {
                host_id,
                generation: id.generation_id,
                max_version: node.max_version(),
                live: live.contains(id),
            };
            let read = || {
                keys::decode_peer(
                    host_id,
                    id.generation_id,
                    id.gossip_advertise_addr,
                    |key| node.get(key),
                    node.iter_prefix(APPLICATION_KEY_PREFIX)
                        .map(|(key, value)| (key, value.value.as_str())),
                )
            };
            tracker.observe(seen, read, &mut events);
        }
    }
    if events.is_empty() {
        return;
    }
    {
        let mut peers = shared.peers.write().expect("the peers' lock is never poisoned");
        for event in &events {
            let host = match event {
                MembershipEvent::Up(host) | MembershipEvent::Down(host) => *host,
                MembershipEvent::Joined(peer) | MembershipEvent::Changed(peer) => peer.info.host_id,
            };
            let Some(peer) = tracker.get(host) else { continue };
            if shared.liveness.set(host, peer.alive).is_err() {
                error!(host_id = %host, hosts_max = super::HOSTS_MAX, "too many hosts: this one is taken as down");
            }
            peers.insert(host, peer.clone());
        }
    }
    for event in events {
        match &event {
            MembershipEvent::Up(host) => info!(host_id = %host, "peer is up"),
            MembershipEvent::Down(host) => info!(host_id = %host, "peer is down"),
            MembershipEvent::Joined(peer) => {
                info!(host_id = %peer.info.host_id, generation = peer.generation, "peer joined")
            }
            MembershipEvent::Changed(peer) => {
                debug!(host_id = %peer.info.host_id, status = peer.status.as_str(), "peer changed")
            }
        }
        // No subscriber is not an error: events are for whoever listens.
        let _ = shared.events.send(event);
    }
}

/// Publishes status `shutdown` and starts exchanges with live peers at once, so they mark this
/// node down now rather than after their failure detectors' timeout.
async fn goodbye(handle: &ChitchatHandle) {
    let peers: Vec<_> = handle
        .with_chitchat(|chitchat| {
            chitchat
                .self_node_state()
                .set(keys::KEY_STATUS, NodeStatus::Shutdown.as_str());
            let me = chitchat.self_chitchat_id().clone();
            chitchat
                .live_nodes()
                .filter(|id| **id != me)
                .map(|id| id.gossip_advertise_addr)
                .take(GOODBYE_PEERS_MAX)
                .collect()
        })
        .await;
    for peer in peers {
        if let Err(error) = handle.gossip(peer) {
            debug!(%error, %peer, "could not announce the shutdown");
        }
    }
    tokio::time::sleep(GOODBYE_WAIT).await;
}
