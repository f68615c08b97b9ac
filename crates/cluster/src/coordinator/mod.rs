//! The coordinator: applies a request's consistency level across the replicas of its token.
//!
//! The server plans a statement into [`Mutation`]s or a [`ReadCommand`] and hands it here with
//! the keyspace's [`Replication`] and the request's [`ConsistencyLevel`]. The coordinator finds
//! the replicas on the ring ([`topology`]), refuses with `Unavailable` before sending anything
//! if too few are alive, and waits for as many answers as the level needs:
//! - a write goes to every live replica and returns after `blockFor` acknowledgements
//!   (`write.rs`); replicas that are down, or do not answer in time, get a hint ([`hinting`]);
//! - a read asks one replica for data and the others it needs for digests; on a mismatch it
//!   reads them all in full, merges by last-write-wins and repairs the replicas that were
//!   behind before it answers (`read.rs`, `merge.rs`); a token-range read asks every replica it
//!   needs for data, range by range (`range.rs`).
//!
//! Waiting is async: a request waiting for other nodes holds no thread. The local replica is
//! called on the service thread that runs the request, after its device reads were read ahead
//! ([`crate::replica::read_local`], [`crate::replica::apply_local`]; see
//! `crates/server/src/connection.rs` for why). Requests from other nodes are run by the
//! [`service`].

pub mod cas;
mod counter;
mod error;
pub mod hinting;
mod latency;
mod merge;
pub mod messaging;
mod metrics;
mod paxos;
mod range;
mod read;
mod read_repair;
pub mod service;
pub mod topology;
mod write;

use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use hayate_storage::{Clock, TableId};

pub use cas::{CasError, CasOutcome, CasRequest};
pub use error::{CoordinatorError, WriteType};
pub use metrics::{CoordinatorMetrics, MetricsSnapshot};
pub use topology::{AllAlive, Liveness, Topology};

use crate::consistency::{assure_sufficient_live, ConsistencyLevel, Replication};
use crate::hints::HintStore;
use crate::node::{HostId, Placement};
use crate::replica::{Mutation, ReadCommand, ReadResponse, Replica, ReplicaRow};
use hinting::Hinter;
use latency::LatencyTracker;
use messaging::Messaging;
use metrics::add;

/// How often [`Coordinator::drained`] looks again: requests last milliseconds, and a topology
/// change that waits for them takes seconds to minutes.
const DRAIN_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// A write to coordinate.
pub struct WriteRequest<'a> {
    pub replication: &'a Replication,
    pub consistency: ConsistencyLevel,
    pub mutations: Vec<Mutation>,
    pub write_type: WriteType,
}

/// A read to coordinate.
pub struct ReadRequest<'a> {
    pub replication: &'a Replication,
    pub consistency: ConsistencyLevel,
    pub command: ReadCommand,
    pub speculative_retry: SpeculativeRetry,
}

/// When a read asks one more replica than it needs because an answer is slow (a table's
/// `speculative_retry` option).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum SpeculativeRetry {
    /// `NONE`.
    Never,
    /// `ALWAYS`: ask the extra replica at once.
    Always,
    /// `<n>ms`.
    After(Duration),
    /// `<p>p` (Cassandra's default `99p`): after this percentile of recent replica read
    /// latencies.
    #[default]
    Percentile99,
    Percentile(f64),
}

impl SpeculativeRetry {
    /// Reads a table's `speculative_retry` option as Cassandra writes it (`99p`, `99PERCENTILE`,
    /// `50ms`, `ALWAYS`, `NONE`); what it does not understand means the default.
    pub fn parse(text: &str) -> SpeculativeRetry {
        let t = text.trim().to_ascii_lowercase();
        if t == "none" {
            return SpeculativeRetry::Never;
        }
        if t == "always" {
            return SpeculativeRetry::Always;
        }
        if let Some(ms) = t.strip_suffix("ms") {
            if let Ok(ms) = ms.trim().parse::<f64>() {
                return SpeculativeRetry::After(Duration::from_micros((ms.max(0.0) * 1000.0) as u64));
            }
        }
        let p = t.strip_suffix("percentile").or_else(|| t.strip_suffix('p'));
        match p.and_then(|p| p.trim().parse::<f64>().ok()) {
            Some(p) if (0.0..=100.0).contains(&p) => SpeculativeRetry::Percentile(p),
            _ => SpeculativeRetry::Percentile99,
        }
    }
}

/// The merged answer to a read: rows as stored (deletions included; the caller decides what is
/// visible at its clock), in read order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadResult {
    pub rows: Vec<ReplicaRow>,
    /// The replicas may hold more rows after the last one (a limit stopped the read).
    pub more: bool,
}

impl From<ReadResponse> for ReadResult {
    fn from(r: ReadResponse) -> ReadResult {
        ReadResult {
            rows: r.rows,
            more: r.more,
        }
    }
}

/// Cassandra's timeouts and hint settings, with its defaults.
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    /// `write_request_timeout`.
    pub write_timeout: Duration,
    /// `read_request_timeout`.
    pub read_timeout: Duration,
    /// `range_request_timeout`.
    pub range_timeout: Duration,
    /// `cas_contention_timeout`: how long a lightweight transaction keeps starting again
    /// when other transactions of its partition get in its way.
    pub cas_contention_timeout: Duration,
    /// `max_hint_window`: no new hints for a node down longer than this.
    pub max_hint_window: Duration,
    /// Bytes of hints replayed per second (`hinted_handoff_throttle`), so that a replay does
    /// not crowd out foreground requests. As Cassandra's, it is divided by the number of other
    /// nodes, since that many may be replaying to the same node at once.
    pub hint_replay_bytes_per_s: u64,
}

impl Default for CoordinatorConfig {
    fn default() -> CoordinatorConfig {
        CoordinatorConfig {
            write_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
            range_timeout: Duration::from_secs(10),
            cas_contention_timeout: Duration::from_secs(1),
            max_hint_window: Duration::from_secs(3 * 3600),
            hint_replay_bytes_per_s: 1 << 20,
        }
    }
}

/// Everything a coordinator is made of.
pub struct CoordinatorParts {
    pub local: HostId,
    pub placement: Placement,
    pub replica: Arc<dyn Replica>,
    pub clock: Arc<dyn Clock>,
    /// Other nodes: absent for a node that is alone and always will be (tests).
    pub messaging: Option<Arc<Messaging>>,
    pub liveness: Arc<dyn Liveness>,
    pub hints: Option<Arc<HintStore>>,
    pub config: CoordinatorConfig,
}

pub struct Coordinator {
    local: HostId,
    local_dc: String,
    replica: Arc<dyn Replica>,
    clock: Arc<dyn Clock>,
    messaging: Option<Arc<Messaging>>,
    liveness: Arc<dyn Liveness>,
    hinter: Option<Arc<Hinter>>,
    topology: RwLock<Arc<Topology>>,
    /// Rings replaced by a newer one, while requests planned on them may still run: a request
    /// holds its ring's `Arc` until it ends, so a ring no request holds any more is gone.
    retired: Mutex<Vec<(u64, Weak<Topology>)>>,
    config: CoordinatorConfig,
    metrics: Arc<CoordinatorMetrics>,
    latency: LatencyTracker,
    /// Lightweight transactions' turns on each partition (`paxos.rs`).
    turns: paxos::Turns,
}

impl Coordinator {
    /// A coordinator for a node that is the whole cluster.
    pub fn single_node(
        local: HostId,
        local_dc: impl Into<String>,
        replica: Arc<dyn Replica>,
        clock: Arc<dyn Clock>,
    ) -> Coordinator {
        Coordinator::new(CoordinatorParts {
            local,
            placement: Placement {
                data_center: local_dc.into(),
                rack: "rack1".into(),
            },
            replica,
            clock,
            messaging: None,
            liveness: Arc::new(AllAlive),
            hints: None,
            config: CoordinatorConfig::default(),
        })
    }

    /// A coordinator whose ring, until [`Coordinator::set_topology`], is this node alone.
    pub fn new(parts: CoordinatorParts) -> Coordinator {
        let topology = Topology::single(parts.local, parts.placement.clone());
        let metrics = Arc::new(CoordinatorMetrics::default());
        let hinter = parts.hints.map(|store| {
            Arc::new(Hinter {
                store,
                liveness: parts.liveness.clone(),
                max_hint_window: parts.config.max_hint_window,
                metrics: metrics.clone(),
            })
        });
        Coordinator {
            local: parts.local,
            local_dc: parts.placement.data_center,
            replica: parts.replica,
            clock: parts.clock,
            messaging: parts.messaging,
            liveness: parts.liveness,
            hinter,
            topology: RwLock::new(Arc::new(topology)),
            retired: Mutex::new(Vec::new()),
            config: parts.config,
            metrics,
            latency: LatencyTracker::default(),
            turns: paxos::Turns::new(),
        }
    }

    /// Installs a new version of the ring (a node joined, or the node learned the ring).
    pub fn set_topology(&self, topology: Topology) {
        let old = std::mem::replace(
            &mut *self.topology.write().expect("topology lock poisoned"),
            Arc::new(topology),
        );
        let mut retired = self.retired.lock().expect("retired rings lock poisoned");
        retired.retain(|(_, ring)| ring.strong_count() > 0);
        retired.push((old.epoch(), Arc::downgrade(&old)));
    }

    /// True once this coordinator plans requests on a ring of metadata epoch `epoch` or later,
    /// and no request it planned on an older ring is still running: from then on, every write
    /// it coordinates reaches the replicas that ring names (pending ones included). A topology
    /// change waits for this on every live node before it streams a range (so the stream misses
    /// no write), and before a node drops a range it gave up (so no read still wants it).
    pub fn is_drained(&self, epoch: u64) -> bool {
        if self.topology().epoch() < epoch {
            return false;
        }
        let retired = self.retired.lock().expect("retired rings lock poisoned");
        retired
            .iter()
            .all(|(older, ring)| *older >= epoch || ring.strong_count() == 0)
    }

    /// Waits until [`Coordinator::is_drained`] for `epoch`, or `timeout`; true if drained.
    pub async fn drained(&self, epoch: u64, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.is_drained(epoch) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(DRAIN_POLL_INTERVAL).await;
        }
    }

    pub fn topology(&self) -> Arc<Topology> {
        self.topology.read().expect("topology lock poisoned").clone()
    }

    /// The clock writes take their timestamps from and reads judge expiry by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn local_host(&self) -> HostId {
        self.local
    }

    pub fn local_data_center(&self) -> &str {
        &self.local_dc
    }

    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot(self.hinter.as_ref().map(|h| &*h.store))
    }

    /// Replays the hints waiting for `target` (the node calls this when the target is back);
    /// returns how many were delivered.
    pub async fn replay_hints(&self, target: HostId) -> usize {
        let (Some(hinter), Some(messaging)) = (&self.hinter, &self.messaging) else {
            return 0;
        };
        let clock = self.clock.clone();
        let others = self.topology().ring().nodes().len().saturating_sub(1).max(1) as u64;
        hinting::replay(
            &hinter.store,
            messaging,
            target,
            (self.config.hint_replay_bytes_per_s / others).max(1),
            move || clock.now_us(),
            &self.metrics.hints_replayed,
        )
        .await
    }

    /// Where this node keeps its hints, if it keeps any.
    pub fn hint_store(&self) -> Option<&Arc<HintStore>> {
        self.hinter.as_ref().map(|h| &h.store)
    }

    /// Nodes this node keeps hints for.
    pub fn hinted_targets(&self) -> Vec<HostId> {
        self.hinter
            .as_ref()
            .map(|h| h.store.targets().into_iter().map(|(t, _)| t).collect())
            .unwrap_or_default()
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// Forgets a dropped or truncated table's rows on this node, and the Paxos state of its
    /// partitions. Every node does this itself when it applies the schema change, so nothing is
    /// sent.
    pub fn drop_local_table(&self, table: TableId) -> usize {
        self.replica.drop_table(crate::paxos::state_table(table));
        self.replica.drop_table(table)
    }

    /// A token's natural replicas under `replication` (this node alone for `Local`), and the
    /// pending ones of a range being moved to them.
    fn replicas_of(
        &self,
        topology: &Topology,
        replication: &Replication,
        token: i64,
    ) -> (Vec<HostId>, Vec<HostId>) {
        if matches!(replication, Replication::Local) {
            return (vec![self.local], Vec::new());
        }
        let natural = topology.map(replication).replicas(token).to_vec();
        let mut pending = Vec::new();
        topology.pending_replicas(replication, token, &natural, &mut pending);
        (natural, pending)
    }

    fn is_alive(&self, host: HostId) -> bool {
        host == self.local || self.liveness.is_alive(host)
    }

    /// Refuses with `Unavailable`, before anything is sent, if too few of `replicas` are alive
    /// for `cl`.
    fn check_live(
        &self,
        topology: &Topology,
        replicas: &[HostId],
        cl: ConsistencyLevel,
        replication: &Replication,
    ) -> Result<(), CoordinatorError> {
        let states = topology.states(replicas, self.local, &*self.liveness);
        assure_sufficient_live(cl, replication, &self.local_dc, &states).map_err(|u| {
            add(&self.metrics.unavailable, 1);
            CoordinatorError::Unavailable(u)
        })
    }

    /// Counts a request this node coordinates without being a replica of its token.
    fn count_not_replica(&self, replicas: &[HostId]) {
        if !replicas.contains(&self.local) {
            add(&self.metrics.not_replica, 1);
        }
    }
}

fn check_write_level(cl: ConsistencyLevel) -> Result<(), CoordinatorError> {
    match cl {
        ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial => Err(CoordinatorError::Invalid(
            "You must use conditional updates for serializable writes".into(),
        )),
        _ => Ok(()),
    }
}

fn check_read_level(cl: ConsistencyLevel) -> Result<(), CoordinatorError> {
    match cl {
        ConsistencyLevel::Any => Err(CoordinatorError::Invalid(
            "ANY ConsistencyLevel is only supported for writes".into(),
        )),
        _ => Ok(()),
    }
}

/// Whether an answer from a node in `dc` counts toward `cl` at a coordinator in `local_dc`.
fn counts(cl: ConsistencyLevel, dc: &str, local_dc: &str) -> bool {
    !cl.is_datacenter_local() || dc == local_dc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speculative_retry_reads_cassandras_spellings() {
        assert_eq!(SpeculativeRetry::parse("99p"), SpeculativeRetry::Percentile(99.0));
        assert_eq!(
            SpeculativeRetry::parse("99PERCENTILE"),
            SpeculativeRetry::Percentile(99.0)
        );
        assert_eq!(
            SpeculativeRetry::parse("50ms"),
            SpeculativeRetry::After(Duration::from_millis(50))
        );
        assert_eq!(SpeculativeRetry::parse("ALWAYS"), SpeculativeRetry::Always);
        assert_eq!(SpeculativeRetry::parse("NONE"), SpeculativeRetry::Never);
        assert_eq!(
            SpeculativeRetry::parse("MIN(99p,50ms)"),
            SpeculativeRetry::Percentile99
        );
    }
}
