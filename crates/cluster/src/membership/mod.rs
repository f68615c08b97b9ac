//! Who is in the cluster and who is up: gossip and failure detection, from `chitchat`.
//!
//! Each node gossips its own state with scuttlebutt anti-entropy over UDP, on its
//! `listen_address:storage_port` (the internode TCP transport uses the same port number over
//! TCP; the two do not collide). Chitchat's phi-accrual failure detector, fed by the heartbeats
//! gossip carries, decides which peers are live; [`Membership`] turns that into a per-host view
//! ([`PeerState`]), a lock-free [`Membership::is_alive`] for the request path, and
//! [`MembershipEvent`]s for whoever must react (the server's `STATUS_CHANGE` events to drivers,
//! hint replay, connection pools).
//!
//! # What a node publishes
//!
//! Chitchat names a node by `(node id, generation, gossip address)`. The node id is the host id
//! as UUID text, so a node that moves to another address keeps its identity; the generation is
//! [`MembershipConfig::generation`], higher at every start, as Cassandra's gossip generation. The
//! node's application state is in these keys (short, since every key travels in every full
//! exchange with a newcomer):
//!
//! | key        | value                                                       | Cassandra's state |
//! |------------|-------------------------------------------------------------|-------------------|
//! | `dc`       | data center                                                 | `DC`              |
//! | `rack`     | rack                                                        | `RACK`            |
//! | `status`   | `joining`, `normal`, `leaving` or `shutdown`                | `STATUS_WITH_PORT`|
//! | `storage`  | internode address, `listen_address:storage_port`            | `INTERNAL_ADDRESS_AND_PORT` |
//! | `cql`      | where drivers connect, `ip:port`                            | `NATIVE_ADDRESS_AND_PORT` |
//! | `release`  | the Cassandra release reported to drivers                   | `RELEASE_VERSION` |
//! | `schema`   | schema version, UUID text (absent until there is a schema)  | `SCHEMA`          |
//! | `load`     | bytes of data held, decimal (absent until measured)         | `LOAD`            |
//! | `app.<k>`  | anything published with [`Membership::set`]                |                   |
//!
//! A peer is known (and [`MembershipEvent::Joined`]) once every key but `schema`, `load` and the
//! `app.` ones has arrived; a peer whose keys cannot be read is ignored, with a warning.
//!
//! # Timing: down within 5 seconds
//!
//! See [`GOSSIP_INTERVAL_DEFAULT`] and [`PHI_THRESHOLD_DEFAULT`] for the arithmetic, and
//! `docs/cluster-membership.md` for the measurements behind it.
//!
//! # Gossip is not starved by requests
//!
//! Chitchat runs on a thread of its own with its own current-thread tokio runtime, started by
//! [`Membership::start`]: the request runtime can be saturated (two cores, thousands of requests
//! in flight) and heartbeats still leave and arrive on time, because the kernel schedules the
//! gossip thread like any other. A false down under load would make coordinators refuse
//! requests as unavailable, exactly when the cluster is busiest.
//!
//! # Dead nodes stay known
//!
//! A dead node keeps its ranges until an operator removes it, so it stays listed, as down, for
//! as long as this process runs (chitchat itself forgets its gossip state after
//! [`MembershipConfig::dead_node_grace_period`], days).

mod error;
mod gossip;
mod keys;
mod liveness;
mod named;
mod tracker;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{broadcast, watch, Notify};

pub use self::error::{MembershipError, SetError};
pub use self::keys::{APPLICATION_KEYS_MAX, APPLICATION_KEY_BYTES_MAX, APPLICATION_VALUE_BYTES_MAX};
pub use self::liveness::HOSTS_MAX;
use crate::node::{HostId, NodeInfo};

/// How often a node starts a gossip exchange (with up to three live peers, plus a seed or a dead
/// node now and then) and re-evaluates its failure detector.
///
/// A quarter second keeps a node's heartbeat arriving at each peer several times a second, so
/// the detector's timeout (a multiple of the mean arrival interval, see
/// [`PHI_THRESHOLD_DEFAULT`]) can sit near two seconds with the down decision re-taken four
/// times a second. Each exchange is three datagrams carrying the digest (about 80 bytes per
/// node before compression) and whatever changed: measured, 0.15% of a core per node in a five-node cluster.
pub const GOSSIP_INTERVAL_DEFAULT: Duration = Duration::from_millis(250);

/// The failure detector's threshold.
///
/// Chitchat's phi is `time since the peer's last heartbeat / mean interval between its
/// heartbeats`, the mean taken over the last thousand arrivals and smoothed
/// toward a prior of one gossip interval with the weight of five arrivals. A peer is down once
/// phi exceeds the threshold, which each node checks at the end of each of its gossip rounds. So
/// a node killed is marked down by a peer after
///
/// ```text
///   threshold × mean heartbeat interval  −  the time since its last heartbeat reached the peer
///                                        +  up to one gossip interval (the next check)
/// ```
///
/// A newer heartbeat of a node reaches a peer about twice per gossip round, whatever the
/// cluster's size (the node's own digest in its exchange with the peer, the peer's exchange with
/// it, or the same news relayed): the mean is half the gossip interval, 125 ms. Hence
///
/// ```text
///   settled:        14 × 125 ms                  − ≤ 125 ms + ≤ 250 ms  ≈  1.6–2.0 s
///   just joined:    14 × (125 + 5 × 250) / 6 ms             + ≤ 250 ms  ≈  3.5 s at worst
/// ```
///
/// (the second line is a node killed right after its second heartbeat, when the prior still
/// weighs five to one). Measured with two, three and five nodes on one machine: 1.5–2.0 s
/// settled, 2.0–2.75 s a second after a restart (`docs/cluster-membership.md`). Both stay well
/// within the five seconds promised, while a peer must miss about fourteen heartbeats in a row
/// (1.75 s of silence) before it is called down, which neither a busy request runtime (gossip
/// has its own thread) nor a few lost datagrams cause.
pub const PHI_THRESHOLD_DEFAULT: f64 = 14.0;

/// How many heartbeat intervals the failure detector averages, per peer (chitchat's default:
/// at several heartbeats a second, a minute or two of history).
const SAMPLING_WINDOW_SIZE: usize = 1000;

/// A heartbeat interval longer than this is not counted in a peer's mean: a node silent that
/// long was down, and its return must not teach the detector to wait longer next time.
const HEARTBEAT_INTERVAL_MAX: Duration = Duration::from_secs(5);

/// How long chitchat keeps a dead node's gossip state, and a deleted key's tombstone: three
/// days, as Cassandra keeps a removed node's state in quarantine. A node that starts in that
/// time learns of the dead node from gossip and lists it as down.
pub const DEAD_NODE_GRACE_PERIOD_DEFAULT: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// The longest cluster name.
pub const CLUSTER_NAME_BYTES_MAX: usize = 256;
/// The most seeds a node is given.
pub const SEEDS_MAX: usize = 64;
/// Gossip intervals outside these bounds are refused: a shorter one floods the network, a
/// longer one cannot detect a failure within seconds.
pub const GOSSIP_INTERVAL_MIN: Duration = Duration::from_millis(10);
pub const GOSSIP_INTERVAL_MAX: Duration = Duration::from_secs(10);
/// Phi thresholds above this would wait a hundred heartbeats before calling a node down.
pub const PHI_THRESHOLD_MAX: f64 = 100.0;
/// Events a subscriber may fall behind by before it misses some (and is told so by
/// [`broadcast::error::RecvError::Lagged`]; it should then re-read [`Membership::peers`]).
pub const EVENTS_QUEUE_MAX: usize = 1024;

/// A node's published status, as Cassandra's gossip `STATUS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeStatus {
    /// Bootstrapping: receiving its ranges, not yet serving reads.
    Joining,
    /// Serving its ranges.
    Normal,
    /// Decommissioning: streaming its ranges away.
    Leaving,
    /// Stopping on purpose. Peers mark the node down at once instead of waiting for the failure
    /// detector; [`Membership::shutdown`] publishes it.
    Shutdown,
}

impl NodeStatus {
    /// The status as gossiped.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Joining => "joining",
            NodeStatus::Normal => "normal",
            NodeStatus::Leaving => "leaving",
            NodeStatus::Shutdown => "shutdown",
        }
    }

    fn parse(text: &str) -> Option<NodeStatus> {
        match text {
            "joining" => Some(NodeStatus::Joining),
            "normal" => Some(NodeStatus::Normal),
            "leaving" => Some(NodeStatus::Leaving),
            "shutdown" => Some(NodeStatus::Shutdown),
            _ => None,
        }
    }
}

/// What a node knows of another (or of itself, from [`Membership::local`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerState {
    pub info: NodeInfo,
    /// Live to the failure detector and not shutting down.
    pub alive: bool,
    pub status: NodeStatus,
    pub schema_version: Option<[u8; 16]>,
    pub load_bytes: Option<u64>,
    /// The generation of the node's current life (higher after every restart).
    pub generation: u64,
    /// Where the node gossips (UDP), `listen_address:storage_port`.
    pub gossip_address: SocketAddr,
    /// What the node published with [`Membership::set`].
    pub application: BTreeMap<String, String>,
}

/// A change in the cluster as this node sees it. Events about the local node are not sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MembershipEvent {
    /// The peer is heard from and live (Cassandra's `onAlive`; drivers get `STATUS_CHANGE UP`).
    Up(HostId),
    /// The failure detector convicted the peer, it announced its shutdown, or it restarted
    /// before its previous life was convicted (then `Up` follows when the new life is live).
    /// Drivers get `STATUS_CHANGE DOWN`.
    Down(HostId),
    /// A peer heard of for the first time, with its state (`alive` may already be true, in which
    /// case `Up` follows).
    Joined(PeerState),
    /// A peer's published state changed (status, schema version, load, an application key, or
    /// its addresses after a restart).
    Changed(PeerState),
}

/// How a node gossips.
#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// Nodes of another cluster never merge with this one: chitchat refuses their exchanges.
    pub cluster_name: String,
    /// This node: host id, placement, `listen_address` and `storage_port` (gossip binds there,
    /// over UDP), CQL address and release version.
    pub local: NodeInfo,
    /// The status the node starts with: `Joining` for a node that must bootstrap, `Normal` for
    /// one that restarts with its data.
    pub status: NodeStatus,
    /// Higher at every start of the node, as Cassandra's gossip generation (seconds since the
    /// epoch: [`generation_now`]). A node restarted with the same generation is ignored by its
    /// peers until its heartbeat passes the one they last saw.
    pub generation: u64,
    /// Gossip addresses (`ip:storage_port`, UDP) of seed nodes; may include this node.
    pub seeds: Vec<SocketAddr>,
    pub gossip_interval: Duration,
    pub phi_threshold: f64,
    pub dead_node_grace_period: Duration,
}

impl MembershipConfig {
    /// A configuration with the default timing.
    pub fn new(
        cluster_name: &str,
        local: NodeInfo,
        generation: u64,
        seeds: Vec<SocketAddr>,
    ) -> MembershipConfig {
        MembershipConfig {
            cluster_name: cluster_name.to_owned(),
            local,
            status: NodeStatus::Normal,
            generation,
            seeds,
            gossip_interval: GOSSIP_INTERVAL_DEFAULT,
            phi_threshold: PHI_THRESHOLD_DEFAULT,
            dead_node_grace_period: DEAD_NODE_GRACE_PERIOD_DEFAULT,
        }
    }

    fn validate(&self) -> Result<(), MembershipError> {
        let bad = |field: &'static str, reason: String| Err(MembershipError::Config { field, reason });
        if self.cluster_name.is_empty() || self.cluster_name.len() > CLUSTER_NAME_BYTES_MAX {
            return bad(
                "cluster_name",
                format!(
                    "has {} bytes; give 1 to {CLUSTER_NAME_BYTES_MAX}",
                    self.cluster_name.len()
                ),
            );
        }
        if self.local.listen_address.is_unspecified() {
            return bad(
                "listen_address",
                format!(
                    "{} is not an address peers can reach; give the node's own",
                    self.local.listen_address
                ),
            );
        }
        if self.seeds.len() > SEEDS_MAX {
            return bad(
                "seeds",
                format!(
                    "{} seeds; give at most {SEEDS_MAX} (two or three per data center do)",
                    self.seeds.len()
                ),
            );
        }
        if !(GOSSIP_INTERVAL_MIN..=GOSSIP_INTERVAL_MAX).contains(&self.gossip_interval) {
            return bad(
                "gossip_interval",
                format!(
                    "{:?} is outside {GOSSIP_INTERVAL_MIN:?}..={GOSSIP_INTERVAL_MAX:?}",
                    self.gossip_interval
                ),
            );
        }
        if !(self.phi_threshold > 0.0 && self.phi_threshold <= PHI_THRESHOLD_MAX) {
            return bad(
                "phi_threshold",
                format!("{} is outside (0, {PHI_THRESHOLD_MAX}]", self.phi_threshold),
            );
        }
        if self.dead_node_grace_period < self.gossip_interval {
            return bad(
                "dead_node_grace_period",
                format!(
                    "{:?} is shorter than a gossip interval",
                    self.dead_node_grace_period
                ),
            );
        }
        Ok(())
    }
}

/// A gossip generation for a node starting now: seconds since the Unix epoch, as Cassandra's.
pub fn generation_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_secs())
        .unwrap_or(0)
}

/// How the gossip thread is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Run,
    /// Announce the shutdown to peers, then stop.
    Shutdown,
    /// Stop without a word, as a crash would.
    Kill,
}

/// Application keys waiting for the gossip thread to publish them; the latest value of a key
/// wins, so the map is bounded by the keys there are.
#[derive(Default)]
struct Pending {
    keys: BTreeMap<String, String>,
    /// Every application key ever published, to bound them.
    application_keys: BTreeSet<String>,
}

/// What the gossip thread and the handles share.
struct Shared {
    local_host: HostId,
    liveness: liveness::LivenessTable,
    peers: RwLock<HashMap<HostId, PeerState>>,
    local: RwLock<PeerState>,
    events: broadcast::Sender<MembershipEvent>,
    pending: Mutex<Pending>,
    /// Wakes the gossip thread to publish `pending`.
    publish: Notify,
}

struct Inner {
    shared: Arc<Shared>,
    stop: watch::Sender<Stop>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: stop gossiping, politely, without waiting for it.
        let _ = self.stop.send_if_modified(|stop| {
            if *stop == Stop::Run {
                *stop = Stop::Shutdown;
                true
            } else {
                false
            }
        });
    }
}

/// This node's membership: its gossip, and its view of the cluster. Cheap to clone; the clones
/// share one gossip thread, which stops when [`Membership::shutdown`] is called or the last
/// clone is dropped.
#[derive(Clone)]
pub struct Membership {
    inner: Arc<Inner>,
}

impl Membership {
    /// Starts gossiping on `local.listen_address:storage_port` (UDP) on a thread of its own.
    /// Returns once the socket is bound; callable from synchronous code or from inside any
    /// runtime (it blocks for as long as the bind takes).
    pub fn start(config: MembershipConfig) -> Result<Membership, MembershipError> {
        config.validate()?;
        let local = PeerState {
            info: config.local.clone(),
            alive: true,
            status: config.status,
            schema_version: None,
            load_bytes: None,
            generation: config.generation,
            gossip_address: config.local.storage_address(),
            application: BTreeMap::new(),
        };
        let (events, _) = broadcast::channel(EVENTS_QUEUE_MAX);
        let shared = Arc::new(Shared {
            local_host: config.local.host_id,
            liveness: liveness::LivenessTable::new(),
            peers: RwLock::new(HashMap::new()),
            local: RwLock::new(local),
            events,
            pending: Mutex::new(Pending::default()),
            publish: Notify::new(),
        });
        let (stop, stop_rx) = watch::channel(Stop::Run);
        let thread = gossip::spawn(config, shared.clone(), stop_rx)?;
        Ok(Membership {
            inner: Arc::new(Inner {
                shared,
                stop,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// Publishes one of this node's keys: updates [`Membership::local`] now and wakes the gossip
    /// thread to publish it.
    fn publish(&self, key: &str, value: String, update: impl FnOnce(&mut PeerState)) {
        update(
            &mut self
                .shared()
                .local
                .write()
                .expect("the local state's lock is never poisoned"),
        );
        self.shared()
            .pending
            .lock()
            .expect("the pending keys' lock is never poisoned")
            .keys
            .insert(key.to_owned(), value);
        self.shared().publish.notify_one();
    }

    pub fn set_status(&self, status: NodeStatus) {
        self.publish(keys::KEY_STATUS, status.as_str().to_owned(), |local| {
            local.status = status
        });
    }

    pub fn set_schema_version(&self, version: [u8; 16]) {
        self.publish(keys::KEY_SCHEMA, keys::schema_text(version), |local| {
            local.schema_version = Some(version)
        });
    }

    pub fn set_load(&self, bytes: u64) {
        self.publish(keys::KEY_LOAD, bytes.to_string(), |local| {
            local.load_bytes = Some(bytes)
        });
    }

    /// Publishes other application state, seen by peers in [`PeerState::application`].
    pub fn set(&self, key: &str, value: &str) -> Result<(), SetError> {
        if key.is_empty() || key.len() > APPLICATION_KEY_BYTES_MAX {
            return Err(SetError::KeyLength {
                key: key.to_owned(),
                bytes: key.len(),
                max_bytes: APPLICATION_KEY_BYTES_MAX,
            });
        }
        if value.len() > APPLICATION_VALUE_BYTES_MAX {
            return Err(SetError::ValueTooLarge {
                key: key.to_owned(),
                bytes: value.len(),
                max_bytes: APPLICATION_VALUE_BYTES_MAX,
            });
        }
        if *self.inner.stop.borrow() != Stop::Run {
            return Err(SetError::Stopped);
        }
        {
            let mut pending = self
                .shared()
                .pending
                .lock()
                .expect("the pending keys' lock is never poisoned");
            if !pending.application_keys.contains(key) {
                if pending.application_keys.len() == APPLICATION_KEYS_MAX {
                    return Err(SetError::TooManyKeys {
                        key: key.to_owned(),
                        max_keys: APPLICATION_KEYS_MAX,
                    });
                }
                pending.application_keys.insert(key.to_owned());
            }
        }
        let chitchat_key = format!("{}{key}", keys::APPLICATION_KEY_PREFIX);
        self.publish(&chitchat_key, value.to_owned(), |local| {
            local.application.insert(key.to_owned(), value.to_owned());
        });
        Ok(())
    }

    /// True if `host` is this node, or a peer that is up. Unknown hosts are down.
    ///
    /// The request path asks this for every replica of every request: it takes no lock and
    /// allocates nothing (a few atomic loads in a table written only when liveness changes).
    pub fn is_alive(&self, host: HostId) -> bool {
        host == self.shared().local_host || self.shared().liveness.is_up(host)
    }

    /// This node and every peer that is up, sorted.
    pub fn live_hosts(&self) -> Vec<HostId> {
        let mut hosts = self.shared().liveness.up_hosts();
        hosts.push(self.shared().local_host);
        hosts.sort();
        hosts
    }

    /// Every other node heard of, up or down, sorted by host id; this node is not among them
    /// (as it is not in Cassandra's `system.peers`): see [`Membership::local`].
    pub fn peers(&self) -> Vec<PeerState> {
        let peers = self
            .shared()
            .peers
            .read()
            .expect("the peers' lock is never poisoned");
        let mut list: Vec<PeerState> = peers.values().cloned().collect();
        list.sort_by_key(|peer| peer.info.host_id);
        list
    }

    /// Another node's state, if it was ever heard of. `None` for this node: see
    /// [`Membership::local`].
    pub fn peer(&self, host: HostId) -> Option<PeerState> {
        self.shared()
            .peers
            .read()
            .expect("the peers' lock is never poisoned")
            .get(&host)
            .cloned()
    }

    /// This node's own state, as it publishes it.
    pub fn local(&self) -> PeerState {
        self.shared()
            .local
            .read()
            .expect("the local state's lock is never poisoned")
            .clone()
    }

    /// Membership events from now on. A receiver that falls [`EVENTS_QUEUE_MAX`] events behind
    /// loses the oldest and is told so; it should then re-read [`Membership::peers`].
    pub fn subscribe(&self) -> broadcast::Receiver<MembershipEvent> {
        self.shared().events.subscribe()
    }

    /// Stops gossiping: announces the shutdown to peers (status `shutdown`, so they mark this
    /// node down at once), then stops the gossip thread and waits for it (a few hundred
    /// milliseconds; from async code call it through `spawn_blocking`). Every clone stops; calling
    /// it again does nothing.
    pub fn shutdown(&self) {
        self.stop(Stop::Shutdown);
    }

    /// Stops gossiping without a word to peers, as `SIGKILL` would: they find out through their
    /// failure detectors. For tests of failure detection.
    pub fn kill(&self) {
        self.stop(Stop::Kill);
    }

    fn stop(&self, how: Stop) {
        let _ = self.inner.stop.send_if_modified(|stop| {
            if *stop == Stop::Run {
                *stop = how;
                true
            } else {
                false
            }
        });
        let thread = self
            .inner
            .thread
            .lock()
            .expect("the gossip thread's handle lock is never poisoned")
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::error!("the gossip thread panicked");
            }
        }
    }
}
