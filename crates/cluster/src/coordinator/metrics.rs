//! The coordinator's counters, which the node's metrics endpoint renders.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::hints::HintStore;

#[derive(Default)]
pub struct CoordinatorMetrics {
    pub writes: AtomicU64,
    pub reads: AtomicU64,
    pub range_reads: AtomicU64,
    pub unavailable: AtomicU64,
    pub write_timeouts: AtomicU64,
    pub read_timeouts: AtomicU64,
    /// Requests this node coordinated without being a replica of their token (a driver that
    /// does not route by token, or a stale ring).
    pub not_replica: AtomicU64,
    /// Reads whose replicas disagreed.
    pub read_repairs: AtomicU64,
    /// Rows sent to replicas that were behind.
    pub repaired_rows: AtomicU64,
    pub speculative_retries: AtomicU64,
    pub hints_written: AtomicU64,
    pub hints_dropped: AtomicU64,
    pub hints_replayed: AtomicU64,
    /// Answers from other replicas and their total latency.
    pub replica_responses: AtomicU64,
    pub replica_latency_us_total: AtomicU64,
    /// Lightweight transactions (conditional writes) and serial reads coordinated here.
    pub cas_writes: AtomicU64,
    pub serial_reads: AtomicU64,
    /// Paxos phases sent (prepare, propose, commit, and the commits that bring a replica up to
    /// date): each is one round trip to the replicas.
    pub paxos_round_trips: AtomicU64,
    /// Rounds started again because another transaction's ballot got in the way.
    pub paxos_contended: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub writes: u64,
    pub reads: u64,
    pub range_reads: u64,
    pub unavailable: u64,
    pub write_timeouts: u64,
    pub read_timeouts: u64,
    pub not_replica: u64,
    pub read_repairs: u64,
    pub repaired_rows: u64,
    pub speculative_retries: u64,
    pub hints_written: u64,
    pub hints_dropped: u64,
    pub hints_replayed: u64,
    /// Bytes of hints waiting on this node.
    pub hints_pending_bytes: u64,
    pub replica_responses: u64,
    pub replica_latency_us_total: u64,
    pub cas_writes: u64,
    pub serial_reads: u64,
    pub paxos_round_trips: u64,
    pub paxos_contended: u64,
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl CoordinatorMetrics {
    pub(crate) fn snapshot(&self, hints: Option<&HintStore>) -> MetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            writes: get(&self.writes),
            reads: get(&self.reads),
            range_reads: get(&self.range_reads),
            unavailable: get(&self.unavailable),
            write_timeouts: get(&self.write_timeouts),
            read_timeouts: get(&self.read_timeouts),
            not_replica: get(&self.not_replica),
            read_repairs: get(&self.read_repairs),
            repaired_rows: get(&self.repaired_rows),
            speculative_retries: get(&self.speculative_retries),
            hints_written: get(&self.hints_written),
            hints_dropped: get(&self.hints_dropped),
            hints_replayed: get(&self.hints_replayed),
            hints_pending_bytes: hints.map_or(0, |h| h.targets().iter().map(|(_, b)| b).sum()),
            replica_responses: get(&self.replica_responses),
            replica_latency_us_total: get(&self.replica_latency_us_total),
            cas_writes: get(&self.cas_writes),
            serial_reads: get(&self.serial_reads),
            paxos_round_trips: get(&self.paxos_round_trips),
            paxos_contended: get(&self.paxos_contended),
        }
    }
}
