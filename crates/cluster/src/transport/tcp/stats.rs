//! What the TCP transport counts: messages and bytes each way, what it dropped and why, and
//! its connections. Counters are relaxed atomics bumped once per batch or per read, not per
//! message where that can be helped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::node::HostId;

/// A snapshot of the transport's counters since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    pub messages_sent: u64,
    pub bytes_sent: u64,
    /// Socket writes: each carries every message that was queued when it began (up to the
    /// coalescing bound), so this is far below `messages_sent` under load.
    pub batches_written: u64,
    pub messages_received: u64,
    pub bytes_received: u64,
    /// Sent to a host whose address the transport was not told (or after shutdown).
    pub dropped_unknown_peer: u64,
    /// The peer's queue was at its message or byte bound.
    pub dropped_queue_full: u64,
    /// Waited in a queue longer than `queued_message_expiry_ms` (the peer was unreachable).
    pub dropped_expired: u64,
    /// Broke a bound of the message format (too large for a frame, too many rows).
    pub dropped_unencodable: u64,
    /// In a batch whose write failed: some of them may have arrived.
    pub dropped_in_failed_write: u64,
    /// Still queued when the peer was removed or the transport shut down.
    pub dropped_peer_removed: u64,
    /// Outbound connections open now.
    pub connections_outbound: u64,
    /// Inbound connections open now (handshaken or not).
    pub connections_inbound: u64,
    /// Outbound connections made, handshake included.
    pub connects: u64,
    /// Of `connects`, those that replaced an earlier connection to the same peer and lane.
    pub reconnects: u64,
    /// Outbound attempts that failed (refused, timed out, handshake refused).
    pub connect_failures: u64,
    /// Inbound connections closed at the handshake (bad magic, another cluster, no common
    /// version, silence).
    pub handshakes_refused: u64,
    /// Inbound connections closed for a frame that failed its checksum or did not decode.
    pub frames_rejected: u64,
    /// Per known peer (see `TcpTransport::set_peer`).
    pub peers: BTreeMap<HostId, PeerStats>,
}

impl TransportStats {
    /// Messages dropped for any reason.
    pub fn messages_dropped(&self) -> u64 {
        self.dropped_unknown_peer
            + self.dropped_queue_full
            + self.dropped_expired
            + self.dropped_unencodable
            + self.dropped_in_failed_write
            + self.dropped_peer_removed
    }
}

/// One peer's share of the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerStats {
    pub messages_sent: u64,
    pub bytes_sent: u64,
    pub messages_received: u64,
    pub bytes_received: u64,
    pub messages_dropped: u64,
    /// Waiting in its queues now, both lanes.
    pub messages_queued: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub messages_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub batches_written: AtomicU64,
    pub messages_received: AtomicU64,
    pub bytes_received: AtomicU64,
    pub dropped_unknown_peer: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub dropped_expired: AtomicU64,
    pub dropped_unencodable: AtomicU64,
    pub dropped_in_failed_write: AtomicU64,
    pub dropped_peer_removed: AtomicU64,
    pub connections_outbound: AtomicU64,
    pub connections_inbound: AtomicU64,
    pub connects: AtomicU64,
    pub reconnects: AtomicU64,
    pub connect_failures: AtomicU64,
    pub handshakes_refused: AtomicU64,
    pub frames_rejected: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> TransportStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TransportStats {
            messages_sent: get(&self.messages_sent),
            bytes_sent: get(&self.bytes_sent),
            batches_written: get(&self.batches_written),
            messages_received: get(&self.messages_received),
            bytes_received: get(&self.bytes_received),
            dropped_unknown_peer: get(&self.dropped_unknown_peer),
            dropped_queue_full: get(&self.dropped_queue_full),
            dropped_expired: get(&self.dropped_expired),
            dropped_unencodable: get(&self.dropped_unencodable),
            dropped_in_failed_write: get(&self.dropped_in_failed_write),
            dropped_peer_removed: get(&self.dropped_peer_removed),
            connections_outbound: get(&self.connections_outbound),
            connections_inbound: get(&self.connections_inbound),
            connects: get(&self.connects),
            reconnects: get(&self.reconnects),
            connect_failures: get(&self.connect_failures),
            handshakes_refused: get(&self.handshakes_refused),
            frames_rejected: get(&self.frames_rejected),
            peers: BTreeMap::new(),
        }
    }
}

#[derive(Default)]
pub(super) struct PeerCounters {
    pub messages_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub messages_received: AtomicU64,
    pub bytes_received: AtomicU64,
    pub messages_dropped: AtomicU64,
}

impl PeerCounters {
    pub fn snapshot(&self, messages_queued: u64) -> PeerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PeerStats {
            messages_sent: get(&self.messages_sent),
            bytes_sent: get(&self.bytes_sent),
            messages_received: get(&self.messages_received),
            bytes_received: get(&self.bytes_received),
            messages_dropped: get(&self.messages_dropped),
            messages_queued,
        }
    }
}

pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

pub(super) fn sub(counter: &AtomicU64, n: u64) {
    counter.fetch_sub(n, Ordering::Relaxed);
}
