//! What `hayate netstats` shows: each stream in and out of this node, its ranges, records and
//! bytes done of the total, its rate and the time it has left; and the totals metrics count.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::node::HostId;

/// Finished streams `netstats` still lists, newest first.
const FINISHED_KEPT_MAX: usize = 16;
/// An outbound stream that sent nothing for this long is over (the receiver drives it, and
/// does not say when it is done).
const OUTBOUND_IDLE: Duration = Duration::from_secs(30);
/// How much the rate follows each new chunk: an exponential average over about ten chunks.
const RATE_WEIGHT: f64 = 0.1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// This node receives: it takes the ranges over.
    In,
    /// This node sends.
    Out,
}

/// One stream as `netstats` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamStatus {
    pub id: u64,
    pub peer: HostId,
    pub direction: Direction,
    /// What the stream is for (`join`, `decommission`, `replace`, `removenode`).
    pub purpose: String,
    /// The topology change it belongs to, for streams this node receives.
    pub change: Option<u64>,
    pub ranges_done: u64,
    pub ranges_total: u64,
    pub records_done: u64,
    pub bytes_done: u64,
    /// From the sender's index, once known (inbound streams).
    pub records_total: Option<u64>,
    pub bytes_total: Option<u64>,
    pub rate_bytes_per_s: f64,
    pub elapsed_s: f64,
    /// `streaming`, `done`, or why it failed.
    pub state: String,
}

impl StreamStatus {
    /// Seconds left at the current rate, where the total is known.
    pub fn eta_s(&self) -> Option<f64> {
        let total = self.bytes_total?;
        (self.rate_bytes_per_s > 0.0)
            .then(|| total.saturating_sub(self.bytes_done) as f64 / self.rate_bytes_per_s)
    }
}

struct Session {
    status: StreamStatus,
    started: Instant,
    last: Instant,
}

impl Session {
    fn new(id: u64, peer: HostId, direction: Direction, purpose: &str, change: Option<u64>) -> Session {
        let now = Instant::now();
        Session {
            status: StreamStatus {
                id,
                peer,
                direction,
                purpose: purpose.to_owned(),
                change,
                ranges_done: 0,
                ranges_total: 0,
                records_done: 0,
                bytes_done: 0,
                records_total: None,
                bytes_total: None,
                rate_bytes_per_s: 0.0,
                elapsed_s: 0.0,
                state: "streaming".to_owned(),
            },
            started: now,
            last: now,
        }
    }

    fn snapshot(&self, now: Instant) -> StreamStatus {
        let mut s = self.status.clone();
        s.elapsed_s = now.saturating_duration_since(self.started).as_secs_f64();
        s
    }

    fn add(&mut self, records: u64, bytes: u64) {
        let now = Instant::now();
        let dt = now.saturating_duration_since(self.last).as_secs_f64().max(1e-3);
        let instant_rate = bytes as f64 / dt;
        let s = &mut self.status;
        s.rate_bytes_per_s = if s.bytes_done == 0 {
            instant_rate
        } else {
            s.rate_bytes_per_s * (1.0 - RATE_WEIGHT) + instant_rate * RATE_WEIGHT
        };
        s.records_done += records;
        s.bytes_done += bytes;
        self.last = now;
    }
}

/// Totals since the node started, for `/metrics`.
#[derive(Default)]
pub struct StreamCounters {
    pub records_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub records_out: AtomicU64,
    pub bytes_out: AtomicU64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    pub records_in: u64,
    pub bytes_in: u64,
    pub records_out: u64,
    pub bytes_out: u64,
    /// Streams running now, either way.
    pub in_flight: u64,
}

/// Every stream of the node.
#[derive(Default)]
pub struct Progress {
    next_id: AtomicU64,
    active: Mutex<BTreeMap<u64, Session>>,
    /// Outbound streams by receiver: one each, the receiver asks chunk after chunk.
    outbound: Mutex<BTreeMap<HostId, u64>>,
    finished: Mutex<VecDeque<StreamStatus>>,
    pub counters: StreamCounters,
}

impl Progress {
    /// A stream this node receives from `peer`, for `purpose`; dropped or [`Inbound::finish`]ed
    /// when it ends.
    pub fn inbound(self: &Arc<Self>, peer: HostId, purpose: &str, change: Option<u64>) -> Inbound {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let session = Session::new(id, peer, Direction::In, purpose, change);
        self.active
            .lock()
            .expect("streams lock poisoned")
            .insert(id, session);
        Inbound {
            progress: self.clone(),
            id,
            finished: AtomicBool::new(false),
        }
    }

    /// Counts a chunk this node sent to `peer`.
    pub fn sent(&self, peer: HostId, records: u64, bytes: u64) {
        self.counters.records_out.fetch_add(records, Ordering::Relaxed);
        self.counters.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        self.expire_idle_outbound();
        let mut outbound = self.outbound.lock().expect("streams lock poisoned");
        let mut active = self.active.lock().expect("streams lock poisoned");
        let id = *outbound.entry(peer).or_insert_with(|| {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
            active.insert(id, Session::new(id, peer, Direction::Out, "stream", None));
            id
        });
        if let Some(s) = active.get_mut(&id) {
            s.add(records, bytes);
        }
    }

    /// Counts a range the sender finished for `peer` (its last chunk went).
    pub fn sent_range(&self, peer: HostId) {
        let outbound = self.outbound.lock().expect("streams lock poisoned");
        if let Some(id) = outbound.get(&peer) {
            if let Some(s) = self.active.lock().expect("streams lock poisoned").get_mut(id) {
                s.status.ranges_done += 1;
            }
        }
    }

    fn expire_idle_outbound(&self) {
        let now = Instant::now();
        let mut outbound = self.outbound.lock().expect("streams lock poisoned");
        let mut active = self.active.lock().expect("streams lock poisoned");
        let mut done = Vec::new();
        outbound.retain(|_, id| {
            let idle = active
                .get(id)
                .is_none_or(|s| now.saturating_duration_since(s.last) >= OUTBOUND_IDLE);
            if idle {
                if let Some(mut s) = active.remove(id) {
                    s.status.state = "done".to_owned();
                    done.push(s.snapshot(s.last));
                }
            }
            !idle
        });
        drop(active);
        drop(outbound);
        for s in done {
            self.push_finished(s);
        }
    }

    fn push_finished(&self, status: StreamStatus) {
        let mut finished = self.finished.lock().expect("streams lock poisoned");
        finished.push_front(status);
        finished.truncate(FINISHED_KEPT_MAX);
    }

    /// Every stream running now, then the last ones finished.
    pub fn snapshot(&self) -> (Vec<StreamStatus>, Vec<StreamStatus>) {
        self.expire_idle_outbound();
        let now = Instant::now();
        let active = self
            .active
            .lock()
            .expect("streams lock poisoned")
            .values()
            .map(|s| s.snapshot(now))
            .collect();
        let finished = self
            .finished
            .lock()
            .expect("streams lock poisoned")
            .iter()
            .cloned()
            .collect();
        (active, finished)
    }

    pub fn counters(&self) -> CountersSnapshot {
        let c = &self.counters;
        CountersSnapshot {
            records_in: c.records_in.load(Ordering::Relaxed),
            bytes_in: c.bytes_in.load(Ordering::Relaxed),
            records_out: c.records_out.load(Ordering::Relaxed),
            bytes_out: c.bytes_out.load(Ordering::Relaxed),
            in_flight: self.active.lock().expect("streams lock poisoned").len() as u64,
        }
    }

    fn with<T>(&self, id: u64, f: impl FnOnce(&mut Session) -> T) -> Option<T> {
        self.active
            .lock()
            .expect("streams lock poisoned")
            .get_mut(&id)
            .map(f)
    }
}

/// A stream this node receives, registered while it lives. Share it (`Arc`) between the
/// fetches of its ranges.
pub struct Inbound {
    progress: Arc<Progress>,
    id: u64,
    finished: AtomicBool,
}

impl Inbound {
    /// `ranges` more ranges to stream, holding `records` and `bytes` where known.
    pub fn add_ranges(&self, ranges: u64, total: Option<(u64, u64)>) {
        self.progress.with(self.id, |s| {
            s.status.ranges_total += ranges;
            if let Some((records, bytes)) = total {
                *s.status.records_total.get_or_insert(0) += records;
                *s.status.bytes_total.get_or_insert(0) += bytes;
            }
        });
    }

    /// A range was already received before (a resumed stream): it counts as done.
    pub fn range_done(&self) {
        self.progress.with(self.id, |s| s.status.ranges_done += 1);
    }

    pub fn chunk(&self, records: u64, bytes: u64) {
        let c = &self.progress.counters;
        c.records_in.fetch_add(records, Ordering::Relaxed);
        c.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.progress.with(self.id, |s| s.add(records, bytes));
    }

    /// Ends the stream: `Ok` done, `Err` why it failed. Later calls change nothing.
    pub fn finish(&self, outcome: Result<(), String>) {
        if self.finished.swap(true, Ordering::Relaxed) {
            return;
        }
        let removed = self
            .progress
            .active
            .lock()
            .expect("streams lock poisoned")
            .remove(&self.id);
        if let Some(mut s) = removed {
            s.status.state = match outcome {
                Ok(()) => "done".to_owned(),
                Err(e) => format!("failed: {e}"),
            };
            let now = Instant::now();
            self.progress.push_finished(s.snapshot(now));
        }
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        self.finish(Err("stopped".to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn streams_are_listed_while_they_run_then_as_finished() {
        let progress = Arc::new(Progress::default());
        let peer = HostId([1; 16]);
        let inbound = progress.inbound(peer, "join", Some(7));
        inbound.add_ranges(4, Some((100, 4000)));
        tokio::time::advance(Duration::from_secs(1)).await;
        inbound.chunk(50, 2000);
        inbound.range_done();
        let (active, finished) = progress.snapshot();
        assert!(finished.is_empty());
        let s = &active[0];
        assert_eq!(
            (s.ranges_done, s.ranges_total, s.records_done, s.bytes_done),
            (1, 4, 50, 2000)
        );
        assert_eq!(s.bytes_total, Some(4000));
        assert!(
            (s.rate_bytes_per_s - 2000.0).abs() < 1.0,
            "{}",
            s.rate_bytes_per_s
        );
        assert!((s.eta_s().expect("known total") - 1.0).abs() < 0.01);
        inbound.finish(Ok(()));
        let (active, finished) = progress.snapshot();
        assert!(active.is_empty());
        assert_eq!(finished[0].state, "done");
        assert_eq!(progress.counters().bytes_in, 2000);

        // An outbound stream ends once it has been idle a while.
        progress.sent(peer, 10, 100);
        assert_eq!(progress.counters().in_flight, 1);
        tokio::time::advance(OUTBOUND_IDLE).await;
        let (active, finished) = progress.snapshot();
        assert!(active.is_empty());
        assert_eq!(finished[0].direction, Direction::Out);
        // A stream dropped without a word counts as stopped.
        drop(progress.inbound(peer, "join", None));
        assert_eq!(progress.snapshot().1[0].state, "failed: stopped");
    }
}
