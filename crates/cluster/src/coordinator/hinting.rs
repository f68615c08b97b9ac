//! Writing hints for replicas that missed a write, and replaying them when they return.
//!
//! A hint is the mutation message the replica should have received, encoded as it travels
//! (`message::encode`), kept in the [`HintStore`]. Replay sends it again on the bulk lane, a
//! few at a time and at most `hint_replay_bytes_per_s`, so that an hour of hints does not
//! crowd out foreground requests; a segment is deleted once every hint in it was acknowledged.
//! Replaying a hint twice is harmless: a replica merges a row update by last-write-wins.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
// The throttle measures time on the clock it sleeps on: with a real clock here and tokio's
// for the sleep, a test on paused time slept by how fast the machine ran, and a simulation's
// seed did not replay exactly.
use tokio::time::Instant;

use super::messaging::{Messaging, Waiting};
use super::metrics::{add, CoordinatorMetrics};
use super::topology::Liveness;
use crate::hints::{HintError, HintStore};
use crate::message::{self, Message};
use crate::node::HostId;
use crate::replica::Mutation;
use crate::transport::Lane;

/// Hints replayed at once to one node (each waits for its acknowledgement).
const REPLAY_IN_FLIGHT_MAX: usize = 32;
/// How long a replayed hint may wait for its acknowledgement before the replay stops and
/// tries again later.
const REPLAY_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Hints older than this are dropped rather than replayed: past Cassandra's default
/// `gc_grace_seconds` a tombstone they carry may already be purged elsewhere, and repair is
/// the tool for a node gone this long.
const HINT_AGE_MAX: Duration = Duration::from_secs(10 * 24 * 3600);

/// What hinting needs from the coordinator, shareable with tasks that outlive a request.
pub(crate) struct Hinter {
    pub store: Arc<HintStore>,
    pub liveness: Arc<dyn Liveness>,
    pub max_hint_window: Duration,
    pub metrics: Arc<CoordinatorMetrics>,
}

impl Hinter {
    /// Stores a hint of `mutations` for `target`, unless it has been down longer than the hint
    /// window. Returns true if the hint was stored.
    pub fn hint(&self, target: HostId, mutations: &Arc<Vec<Mutation>>, now_us: i64) -> bool {
        if self
            .liveness
            .down_for(target)
            .is_some_and(|d| d > self.max_hint_window)
        {
            add(&self.metrics.hints_dropped, 1);
            return false;
        }
        let mut payload = Vec::new();
        let message = Message::MutationRequest {
            id: 0,
            mutations: mutations.clone(),
        };
        if let Err(e) = message::encode(&message, message::VERSION, &mut payload) {
            tracing::error!(%target, "cannot encode a hint: {e}");
            add(&self.metrics.hints_dropped, 1);
            return false;
        }
        match self.store.store(target, now_us, &payload) {
            Ok(()) => {
                add(&self.metrics.hints_written, 1);
                true
            }
            Err(e) => {
                match &e {
                    HintError::TargetFull { .. } => tracing::warn!("{e}"),
                    _ => tracing::error!("{e}"),
                }
                add(&self.metrics.hints_dropped, 1);
                false
            }
        }
    }
}

/// Replays every hint waiting for `target`; returns how many were acknowledged. Stops (and
/// keeps the rest for later) if the target stops answering.
pub async fn replay(
    store: &HintStore,
    messaging: &Arc<Messaging>,
    target: HostId,
    bytes_per_s: u64,
    now_us: impl Fn() -> i64,
    replayed: &AtomicU64,
) -> usize {
    let mut delivered = 0;
    loop {
        let segment = match store.take(target) {
            Ok(Some(s)) => s,
            Ok(None) => return delivered,
            Err(e) => {
                tracing::error!("{e}");
                return delivered;
            }
        };
        let read = match segment.read() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("{e}");
                store.give_back(segment);
                return delivered;
            }
        };
        if let Some(at) = read.damaged_at {
            tracing::warn!(
                path = %segment.path.display(),
                offset = at,
                "a hint segment ends in a damaged record (a crash while it was written); the hints \
                 before it are replayed, the rest are lost (run a repair of {target} to be sure)"
            );
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut waiting = Waiting::new(messaging.clone());
        let mut in_flight = 0usize;
        // Hints of this segment sent (each is acknowledged before the segment is finished).
        let mut sent = 0usize;
        let mut ok = true;
        let started = Instant::now();
        let mut sent_bytes = 0u64;
        let oldest_us = now_us() - HINT_AGE_MAX.as_micros() as i64;
        for hint in &read.hints {
            if hint.created_at_us < oldest_us {
                continue;
            }
            let mutations = match message::decode(&hint.payload) {
                Ok(Message::MutationRequest { mutations, .. }) => mutations,
                Ok(_) | Err(_) => {
                    tracing::error!(path = %segment.path.display(), "a hint that is not a mutation; skipped");
                    continue;
                }
            };
            if !drain(&mut rx, &mut in_flight, REPLAY_IN_FLIGHT_MAX - 1).await {
                ok = false;
                break;
            }
            // The throttle: never ahead of bytes_per_s since the segment began.
            sent_bytes += hint.payload.len() as u64;
            let due = Duration::from_secs_f64(sent_bytes as f64 / bytes_per_s.max(1) as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
            match messaging.request(target, Lane::Bulk, &tx, |id| Message::MutationRequest {
                id,
                mutations,
            }) {
                Some(id) => {
                    waiting.push(id);
                    in_flight += 1;
                    sent += 1;
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        ok = ok && drain(&mut rx, &mut in_flight, 0).await;
        drop(waiting);
        if !ok {
            // Kept whole, to be sent again: a replica merges a repeated row update into what it
            // has, so the hints already acknowledged do no harm the second time, and they are
            // counted as replayed only once, with the segment.
            store.give_back(segment);
            return delivered;
        }
        delivered += sent;
        add(replayed, sent as u64);
        if let Err(e) = store.finish(segment) {
            tracing::error!("{e}");
            return delivered;
        }
    }
}

/// Waits for acknowledgements until at most `until` hints are in flight; false if one failed
/// or did not come in time.
async fn drain(
    rx: &mut mpsc::UnboundedReceiver<(HostId, Message)>,
    in_flight: &mut usize,
    until: usize,
) -> bool {
    while *in_flight > until {
        if !await_ack(rx).await {
            return false;
        }
        *in_flight -= 1;
    }
    true
}

/// Waits for one acknowledgement; false if it failed or did not come in time.
async fn await_ack(rx: &mut mpsc::UnboundedReceiver<(HostId, Message)>) -> bool {
    match tokio::time::timeout(REPLAY_ACK_TIMEOUT, rx.recv()).await {
        Ok(Some((_, Message::MutationResponse { result: Ok(()), .. }))) => true,
        Ok(Some((from, Message::MutationResponse { result: Err(e), .. }))) => {
            tracing::warn!(%from, "a replayed hint was refused: {e}");
            false
        }
        _ => false,
    }
}
