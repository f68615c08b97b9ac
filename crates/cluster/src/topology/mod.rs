//! Topology changes: nodes join a ring that holds data, leave it, replace a dead one, or the
//! others take over a dead one's ranges; and each node drops what it no longer holds.
//!
//! A change is three steps in the metadata log (`crate::metadata`; Cassandra's transactional
//! cluster metadata and ScyllaDB's Raft topology work the same way): a `Start*` entry, after
//! which every node sends the writes of the moving ranges to their pending replicas as well
//! (`Coordinator::write`); the streams, outside the log; and a `FinishChange` entry, after which
//! reads go to the new replicas (or an `AbortChange`, which leaves the ring as it was). One change
//! at a time.
//!
//! Between the start and the streams, the node driving the change waits until every live node
//! plans its requests on the new ring and no request it planned on an older one still runs
//! (`Call::Drain`): from then on every write reaches the pending replicas, so a stream that
//! starts after it misses none. A node that gave ranges up drops them once the change is over
//! and, again, every node has drained (so no read still wants them) ([`cleanup`]).
//!
//! Who drives: a joining node or a replacement drives its own change ([`TopologyService::join`],
//! before it serves clients); a leaving node drives its decommission; the node an operator asks
//! to remove a dead one drives the removal. For a decommission and a removal, the nodes taking
//! ranges over stream them themselves (`Call::Fetch`). Every stream resumes from its
//! checkpoint ([`checkpoint`]) when its driver or its receiver restarts.
//!
//! `docs/topology-changes.md` tells the whole story, with what to do when a change fails.

mod checkpoint;
mod cleanup;
pub mod control;
mod drive;
mod hints;
pub mod plan;
mod receive;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use hayate_storage::TableId;
use tokio::sync::watch;

use crate::consistency::Replication;
use crate::coordinator::messaging::Messaging;
use crate::coordinator::service::MetadataFuture;
use crate::coordinator::{Coordinator, Liveness};
use crate::metadata::{BoxFuture, ClusterMetadata, Command, CommandResult};
use crate::node::HostId;
use crate::replica::Replica;
use crate::streaming::{FetchError, Streams};
use control::{Answer, Call, Span};

pub use cleanup::CleanupReport;

/// What a topology change needs of the metadata log. `crate::metadata::Metadata` is the real
/// one; the coordinator simulation has one of its own.
pub trait RingLog: Send + Sync + 'static {
    /// The metadata as this node last applied it.
    fn current(&self) -> Arc<ClusterMetadata>;
    /// Every change this node applies.
    fn watch(&self) -> watch::Receiver<Arc<ClusterMetadata>>;
    /// Appends `command`, which changes no node's place in the log itself (the start of a
    /// decommission or removal, the finish of a join); returns once applied here.
    fn propose(&self, command: Command) -> BoxFuture<Result<CommandResult, String>>;
    /// Appends `command`, which takes `host` out of the ring (the finish of its decommission,
    /// removal or replacement, or the abort of its join), then takes `host` out of the log's
    /// voters and learners.
    fn propose_removing(&self, host: HostId, command: Command) -> BoxFuture<Result<CommandResult, String>>;
}

/// The tables whose data the ring places, as the schema has them.
pub trait TableSource: Send + Sync + 'static {
    /// Every table with its keyspace's replication (tables of `LocalStrategy` keyspaces, which
    /// every node keeps for itself, may be left out or are ignored).
    fn tables(&self) -> Vec<(TableId, Replication)>;
}

/// How a node takes part in topology changes.
#[derive(Clone, Debug)]
pub struct TopologyConfig {
    /// Where a receiver keeps its stream checkpoints (`None`: it does not, and a restarted
    /// stream starts over).
    pub state_dir: Option<PathBuf>,
    /// How long a drain call waits at most before it answers "not yet".
    pub drain_call_timeout: Duration,
    /// How long a change's driver waits for every live node to drain before it gives up.
    pub drain_timeout: Duration,
    /// How long after a change ends a node waits before it drops the ranges it gave up.
    pub cleanup_delay: Duration,
}

impl Default for TopologyConfig {
    fn default() -> TopologyConfig {
        TopologyConfig {
            state_dir: None,
            drain_call_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(300),
            cleanup_delay: Duration::from_secs(10),
        }
    }
}

/// Why a topology change did not happen, or did not finish. Each says what to do.
#[derive(Debug)]
#[non_exhaustive]
pub enum TopologyError {
    /// The metadata log refused the command (another change is in progress, say).
    Refused(String),
    /// The metadata log could not be reached or did not confirm (no quorum).
    Log(String),
    /// The change this call expects is not the one in progress.
    NotInProgress(String),
    /// No live node holds a range that must be streamed.
    NoSource {
        span: Span,
    },
    /// A live node did not reach the change's ring in time.
    Drain {
        host: HostId,
        epoch: u64,
    },
    /// A stream failed in a way another try cannot mend (this node's device is full).
    Stream(FetchError),
    /// A node taking ranges over could not.
    Target {
        host: HostId,
        reason: String,
    },
    Failed(String),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Refused(reason) => write!(f, "refused: {reason}"),
            TopologyError::Log(e) => write!(
                f,
                "the cluster metadata log did not take the change: {e}; bring the metadata voters back \
                 and try again"
            ),
            TopologyError::NotInProgress(what) => write!(f, "{what}"),
            TopologyError::NoSource { span } => write!(
                f,
                "no live replica holds {span} (its only replicas are down or gone): with a replication \
                 factor of 1 its data left with the dead node; bring a replica back, or remove the dead \
                 node instead (hayate removenode) and restore the data from a backup"
            ),
            TopologyError::Drain { host, epoch } => write!(
                f,
                "node {host} did not reach ring epoch {epoch} in time: it may be cut off from the \
                 others; the change resumes when it is retried"
            ),
            TopologyError::Stream(e) => write!(
                f,
                "{e}; free space on this node (or add a device), then start it again to resume"
            ),
            TopologyError::Target { host, reason } => {
                write!(f, "node {host} could not take its ranges over: {reason}")
            }
            TopologyError::Failed(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for TopologyError {}

/// What `netstats` says this node is doing, as `nodetool netstats` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    Joining,
    Leaving,
    /// It left the ring; the process is about to stop.
    Decommissioned,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "NORMAL",
            Mode::Joining => "JOINING",
            Mode::Leaving => "LEAVING",
            Mode::Decommissioned => "DECOMMISSIONED",
        }
    }
}

/// A fetch this node runs for another node's change (`Call::Fetch`).
struct FetchJob {
    spans_total: u64,
    outcome: Mutex<FetchOutcome>,
    /// True when the failure cannot be mended by trying again.
    fatal: std::sync::atomic::AtomicBool,
}

/// How a fetch ended, or the calls waiting for it to end.
#[derive(Default)]
struct FetchOutcome {
    done: Option<Result<(), String>>,
    /// Answered in the order they came (not a `watch`, whose waiters tokio wakes in an order
    /// it picks at random: the answers would leave in a different order on each run, and a
    /// simulation's seed would not replay).
    waiting: Vec<tokio::sync::oneshot::Sender<Result<(), String>>>,
}

impl FetchJob {
    /// Records the end and answers every waiting call.
    fn finish(&self, outcome: Result<(), String>) {
        let mut o = self.outcome.lock().expect("fetch lock poisoned");
        for waiter in o.waiting.drain(..) {
            let _ = waiter.send(outcome.clone());
        }
        o.done = Some(outcome);
    }

    /// The end, once there is one, waiting at most `poll` for it.
    async fn wait(&self, poll: std::time::Duration) -> Option<Result<(), String>> {
        let rx = {
            let mut o = self.outcome.lock().expect("fetch lock poisoned");
            if let Some(done) = &o.done {
                return Some(done.clone());
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            o.waiting.push(tx);
            rx
        };
        tokio::time::timeout(poll, rx).await.ok().and_then(Result::ok)
    }
}

/// One node's part in topology changes.
pub struct TopologyService {
    local: HostId,
    log: Arc<dyn RingLog>,
    tables: Arc<dyn TableSource>,
    messaging: Arc<Messaging>,
    replica: Arc<dyn Replica>,
    streams: Arc<Streams>,
    liveness: Arc<dyn Liveness>,
    coordinator: RwLock<Option<Weak<Coordinator>>>,
    config: TopologyConfig,
    fetches: Mutex<HashMap<u64, Arc<FetchJob>>>,
    decommissioned: std::sync::atomic::AtomicBool,
    /// Held (shared) while ranges stream in, (exclusive) while a cleanup drops ranges.
    ranges: tokio::sync::RwLock<()>,
    /// The nodes taking ranges over in the decommission or removal this node drives, and how
    /// far each is.
    handover: Mutex<std::collections::BTreeMap<HostId, String>>,
}

/// Everything a [`TopologyService`] is made of.
pub struct TopologyParts {
    pub local: HostId,
    pub log: Arc<dyn RingLog>,
    pub tables: Arc<dyn TableSource>,
    pub messaging: Arc<Messaging>,
    pub replica: Arc<dyn Replica>,
    pub streams: Arc<Streams>,
    pub liveness: Arc<dyn Liveness>,
    pub config: TopologyConfig,
}

impl TopologyService {
    pub fn new(parts: TopologyParts) -> Arc<TopologyService> {
        Arc::new(TopologyService {
            local: parts.local,
            log: parts.log,
            tables: parts.tables,
            messaging: parts.messaging,
            replica: parts.replica,
            streams: parts.streams,
            liveness: parts.liveness,
            coordinator: RwLock::new(None),
            config: parts.config,
            fetches: Mutex::new(HashMap::new()),
            decommissioned: std::sync::atomic::AtomicBool::new(false),
            ranges: tokio::sync::RwLock::new(()),
            handover: Mutex::new(std::collections::BTreeMap::new()),
        })
    }

    /// The node's coordinator, once it has one: drain calls wait for its requests. Before, the
    /// node coordinates nothing, and is drained.
    pub fn set_coordinator(&self, coordinator: &Arc<Coordinator>) {
        *self.coordinator.write().expect("coordinator lock poisoned") = Some(Arc::downgrade(coordinator));
    }

    fn coordinator(&self) -> Option<Arc<Coordinator>> {
        self.coordinator
            .read()
            .expect("coordinator lock poisoned")
            .as_ref()
            .and_then(Weak::upgrade)
    }

    pub fn streams(&self) -> &Arc<Streams> {
        &self.streams
    }

    /// The nodes taking ranges over in the decommission or removal this node drives, with how
    /// far each is.
    pub fn handover(&self) -> std::collections::BTreeMap<HostId, String> {
        self.handover.lock().expect("handover lock poisoned").clone()
    }

    /// The ranges (of every table) this node is a pending replica of: it receives their writes
    /// and streams their data, and will serve them once the change in progress finishes.
    pub fn pending_ranges(&self) -> u64 {
        let m = self.log.current();
        let Some(change) = m.change.clone() else {
            return 0;
        };
        match self.plan(&m, &change) {
            Ok(moves) => moves.iter().filter(|(to, _)| *to == self.local).count() as u64,
            Err(_) => 0,
        }
    }

    /// What this node is doing, for `netstats`.
    pub fn mode(&self) -> Mode {
        if self.decommissioned.load(std::sync::atomic::Ordering::Relaxed) {
            return Mode::Decommissioned;
        }
        match self.log.current().members.get(&self.local).map(|r| r.status) {
            Some(crate::metadata::MemberStatus::Joining) => Mode::Joining,
            Some(crate::metadata::MemberStatus::Leaving) => Mode::Leaving,
            _ => Mode::Normal,
        }
    }

    /// A handler for the replica service's topology requests
    /// (`ReplicaService::set_topology_handler`). It holds the service weakly: the service
    /// holds the messaging, which holds the replica service.
    pub fn handler(self: &Arc<Self>) -> Arc<crate::coordinator::service::MetadataHandler> {
        let weak = Arc::downgrade(self);
        Arc::new(move |from: HostId, payload: Vec<u8>| -> MetadataFuture {
            let weak = weak.clone();
            Box::pin(async move {
                let answer = match weak.upgrade() {
                    Some(service) => service.answer(from, &payload).await,
                    None => Answer::Refused {
                        reason: "the node is stopping".to_owned(),
                    },
                };
                serde_json::to_vec(&answer).expect("an answer serializes")
            })
        })
    }

    async fn answer(self: &Arc<Self>, from: HostId, payload: &[u8]) -> Answer {
        let call: Call = match serde_json::from_slice(payload) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(%from, "a topology call this node cannot read: {e}");
                return Answer::Refused {
                    reason: format!(
                        "a topology call this node cannot read (are the nodes of different releases?): {e}"
                    ),
                };
            }
        };
        match call {
            Call::Drain { epoch } => {
                let drained = match self.coordinator() {
                    Some(c) => c.drained(epoch, self.config.drain_call_timeout).await,
                    None => true,
                };
                Answer::Drained {
                    drained,
                    epoch: self.log.current().epoch,
                }
            }
            Call::Sizes { spans } => {
                let replica = self.replica.clone();
                let sizes = self
                    .streams
                    .blocking(move || {
                        spans
                            .iter()
                            .map(|s| {
                                let size = replica.range_size(s.table, s.range());
                                (size.records, size.bytes)
                            })
                            .collect()
                    })
                    .await
                    .unwrap_or_default();
                Answer::Sizes { sizes }
            }
            Call::Fetch {
                change,
                purpose,
                spans,
            } => self.fetch_for(from, change, purpose, spans).await,
            Call::KeepHints { target, hints } => self.keep_hints(from, target, hints),
        }
    }
}

impl RingLog for crate::metadata::Metadata {
    fn current(&self) -> Arc<ClusterMetadata> {
        crate::metadata::Metadata::current(self)
    }

    fn watch(&self) -> watch::Receiver<Arc<ClusterMetadata>> {
        crate::metadata::Metadata::watch(self)
    }

    fn propose(&self, command: Command) -> BoxFuture<Result<CommandResult, String>> {
        let metadata = self.clone();
        Box::pin(async move {
            crate::metadata::Metadata::propose(&metadata, command)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn propose_removing(&self, host: HostId, command: Command) -> BoxFuture<Result<CommandResult, String>> {
        let metadata = self.clone();
        Box::pin(async move {
            metadata
                .remove_node(host, command)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
