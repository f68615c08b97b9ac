//! The node's request and connection counters, recorded on every request.
//!
//! Recording happens on every request from every connection, so it must cost little and
//! never wait on a scrape: counters are atomics, latency buckets are atomics too (one per
//! Prometheus bucket, so the exported histogram is exact, not an estimate), and only the
//! quantile histogram (HdrHistogram, for p50..p999) takes a lock, one per statement kind and
//! held for a single increment. A scrape copies the HdrHistogram under that lock too, so it
//! delays a recorder by at most one copy.
//!
//! Statement kinds are `&'static str` chosen by the server ("select", "execute-select",
//! "startup", ...). A series is created the first time a kind is seen; there are at most
//! [`KINDS_MAX`], and kinds beyond that are counted as "other", so a bug that invents kinds
//! cannot grow memory or the scrape without bound. Requests are also counted by opcode
//! (`opcode="execute"`), whatever kinds the server chooses.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use hayate_cql::error::ErrorCode;
use hayate_cql::opcode::Opcode;
use hdrhistogram::Histogram;

/// Distinct statement kinds tracked, the last slot being "other" for any beyond.
pub const KINDS_MAX: usize = 64;
const OTHER_KIND: &str = "other";

/// Upper bounds of the latency buckets, 50 µs to 1 s; a last, implicit bucket is +Inf.
pub const LATENCY_BUCKET_BOUNDS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
];
pub(super) const BUCKETS: usize = LATENCY_BUCKET_BOUNDS_US.len() + 1;

/// Quantiles exported from the HdrHistogram, with their label values.
pub(super) const QUANTILES: [(f64, &str); 4] =
    [(0.5, "0.5"), (0.95, "0.95"), (0.99, "0.99"), (0.999, "0.999")];
/// The HdrHistogram covers 1 µs to 60 s at two significant digits (about 20 KiB per kind);
/// slower requests are recorded as 60 s.
const QUANTILE_HISTOGRAM_MAX_US: u64 = 60_000_000;
/// The node's counters. Share it as `Arc<Metrics>`; every method takes `&self`.
pub struct Metrics {
    pub(super) series: [OnceLock<Series>; KINDS_MAX],
    /// Slots `0..registered` are filled, in order; set after the slot it counts.
    registered: AtomicUsize,
    register_lock: Mutex<()>,
    pub(super) connections_opened: AtomicU64,
    pub(super) connections_closed: AtomicU64,
    pub(super) frames_received: AtomicU64,
    pub(super) frames_sent: AtomicU64,
    /// Requests by opcode, indexed as `Opcode::ALL`.
    pub(super) requests_by_opcode: [AtomicU64; Opcode::ALL.len()],
    pub(super) bytes_received: AtomicU64,
    pub(super) bytes_sent: AtomicU64,
    /// Connections whose reader waits now (see `connection::limits`).
    pub(super) connections_paused_now: AtomicU64,
    /// Pauses since start, by [`PauseReason`].
    pub(super) pauses: [AtomicU64; PauseReason::ALL.len()],
    pub(super) requests_overloaded: AtomicU64,
    pub(super) started: Instant,
}

/// Latency of a set of statement kinds since the node started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// The mean rate since the node started (Cassandra shows a five-minute rate).
    pub per_second: f64,
}

/// Why a connection stopped being read for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseReason {
    /// Its client left too many responses unread.
    ResponsesUnread,
    /// A request of its found the node or its address over their request data limits.
    RequestData,
}

impl PauseReason {
    pub const ALL: [PauseReason; 2] = [PauseReason::ResponsesUnread, PauseReason::RequestData];

    pub(super) fn label(self) -> &'static str {
        match self {
            PauseReason::ResponsesUnread => "responses_unread",
            PauseReason::RequestData => "request_data",
        }
    }
}

/// Everything recorded for one statement kind.
pub(super) struct Series {
    pub(super) kind: &'static str,
    /// Requests per latency bucket, not cumulative (the export adds them up).
    pub(super) buckets: [AtomicU64; BUCKETS],
    pub(super) latency_sum_us: AtomicU64,
    /// Errors by code, indexed as `ErrorCode::ALL`.
    pub(super) errors: [AtomicU64; ErrorCode::ALL.len()],
    pub(super) quantiles: Mutex<Histogram<u64>>,
}

impl Series {
    fn new(kind: &'static str) -> Series {
        // The bounds are constants that HdrHistogram accepts; a failure here is a bug in them.
        let histogram = Histogram::new_with_bounds(1, QUANTILE_HISTOGRAM_MAX_US, 2)
            .expect("the quantile histogram's constant bounds are valid");
        Series {
            kind,
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_sum_us: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            quantiles: Mutex::new(histogram),
        }
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            series: std::array::from_fn(|_| OnceLock::new()),
            registered: AtomicUsize::new(0),
            register_lock: Mutex::new(()),
            connections_opened: AtomicU64::new(0),
            connections_closed: AtomicU64::new(0),
            frames_received: AtomicU64::new(0),
            frames_sent: AtomicU64::new(0),
            requests_by_opcode: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes_received: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            connections_paused_now: AtomicU64::new(0),
            pauses: std::array::from_fn(|_| AtomicU64::new(0)),
            requests_overloaded: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// Counts one request of `kind` that took `latency_us`, whether it succeeded or not.
    pub fn record(&self, kind: &'static str, latency_us: u64) {
        let series = self.series(kind);
        let bucket = LATENCY_BUCKET_BOUNDS_US
            .iter()
            .position(|bound| latency_us <= *bound)
            .unwrap_or(BUCKETS - 1);
        series.buckets[bucket].fetch_add(1, Relaxed);
        series.latency_sum_us.fetch_add(latency_us, Relaxed);
        series
            .quantiles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .saturating_record(latency_us);
    }

    /// Requests of any of `kinds` since the node started, with their latency quantiles from
    /// the HdrHistograms merged; `None` before the first. For `system_views`' latency tables.
    pub fn latency_summary(&self, kinds: &[&str]) -> Option<LatencySummary> {
        let mut merged: Option<Histogram<u64>> = None;
        let registered = self.registered.load(Acquire);
        for slot in &self.series[..registered] {
            let Some(s) = slot.get().filter(|s| kinds.contains(&s.kind)) else {
                continue;
            };
            let histogram = s.quantiles.lock().unwrap_or_else(PoisonError::into_inner).clone();
            match &mut merged {
                // Same bounds for every series: adding cannot fail.
                Some(m) => {
                    let _ = m.add(&histogram);
                }
                None => merged = Some(histogram),
            }
        }
        let merged = merged.filter(|h| !h.is_empty())?;
        let uptime_s = self.started.elapsed().as_secs_f64().max(1.0);
        Some(LatencySummary {
            count: merged.len(),
            p50_us: merged.value_at_quantile(0.5),
            p99_us: merged.value_at_quantile(0.99),
            max_us: merged.max(),
            per_second: merged.len() as f64 / uptime_s,
        })
    }

    /// Counts one request of `kind` answered with an ERROR of `code`. Call [`Metrics::record`]
    /// for it as well: errors are a subset of requests.
    pub fn record_error(&self, kind: &'static str, code: ErrorCode) {
        let index = ErrorCode::ALL.iter().position(|c| *c == code).unwrap_or(0);
        self.series(kind).errors[index].fetch_add(1, Relaxed);
    }

    pub fn connection_opened(&self) {
        self.connections_opened.fetch_add(1, Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections_closed.fetch_add(1, Relaxed);
    }

    /// A connection stops being read; [`Metrics::connection_resumed`] follows when it is read
    /// again (or closes).
    pub fn connection_paused(&self, reason: PauseReason) {
        self.connections_paused_now.fetch_add(1, Relaxed);
        self.pauses[reason as usize].fetch_add(1, Relaxed);
    }

    pub fn connection_resumed(&self) {
        self.connections_paused_now.fetch_sub(1, Relaxed);
    }

    /// A request answered Overloaded because the node or its client's address held too much
    /// request data.
    pub fn request_overloaded(&self) {
        self.requests_overloaded.fetch_add(1, Relaxed);
    }

    /// One frame read from a client, `frame_bytes` counting the header.
    pub fn frame_received(&self, frame_bytes: u64) {
        self.frames_received.fetch_add(1, Relaxed);
        self.bytes_received.fetch_add(frame_bytes, Relaxed);
    }

    /// One frame written to a client, `frame_bytes` counting the header.
    pub fn frame_sent(&self, frame_bytes: u64) {
        self.frames_sent.fetch_add(1, Relaxed);
        self.bytes_sent.fetch_add(frame_bytes, Relaxed);
    }

    /// One request of this opcode, whatever statement kind it turns out to be, so that
    /// QUERY and EXECUTE are counted as such even while kinds name statements.
    pub fn request_opcode(&self, opcode: Opcode) {
        self.requests_by_opcode[opcode_index(opcode)].fetch_add(1, Relaxed);
    }

    /// How long ago the node started counting: its uptime, near enough.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Requests answered with an ERROR since start, and how many of them were server errors
    /// (a fault of the node's, not of the request), as `hayate info` shows them.
    pub fn errors(&self) -> (u64, u64) {
        let server = ErrorCode::ALL
            .iter()
            .position(|c| *c == ErrorCode::ServerError)
            .unwrap_or(0);
        let (mut all, mut server_errors) = (0, 0);
        for series in self.series.iter().filter_map(OnceLock::get) {
            for (i, count) in series.errors.iter().enumerate() {
                let n = count.load(Relaxed);
                all += n;
                if i == server {
                    server_errors += n;
                }
            }
        }
        (all, server_errors)
    }

    /// The series of `kind`, created on first use. The common case reads an atomic and
    /// compares a few pointers; only a new kind takes the lock.
    fn series(&self, kind: &'static str) -> &Series {
        if let Some(series) = self.find(kind, self.registered.load(Acquire)) {
            return series;
        }
        let _guard = self.register_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let registered = self.registered.load(Acquire);
        if let Some(series) = self.find(kind, registered) {
            return series;
        }
        if registered < KINDS_MAX - 1 {
            let series = self.series[registered].get_or_init(|| Series::new(kind));
            self.registered.store(registered + 1, Release);
            return series;
        }
        self.series[KINDS_MAX - 1].get_or_init(|| Series::new(OTHER_KIND))
    }

    fn find(&self, kind: &'static str, registered: usize) -> Option<&Series> {
        self.series[..registered]
            .iter()
            .filter_map(OnceLock::get)
            .find(|s| std::ptr::eq(s.kind, kind) || s.kind == kind)
    }
}

fn opcode_index(opcode: Opcode) -> usize {
    Opcode::ALL.iter().position(|o| *o == opcode).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_support::{rendered, value};
    use std::collections::HashSet;
    use std::sync::Arc;

    #[test]
    fn kinds_are_bounded() {
        let metrics = Metrics::new();
        for i in 0..100 {
            let kind: &'static str = Box::leak(format!("kind-{i}").into_boxed_str());
            metrics.record(kind, 1);
        }
        // The same text at another address is the same kind.
        let again: &'static str = Box::leak("kind-0".to_string().into_boxed_str());
        metrics.record(again, 1);
        let text = rendered(&metrics);
        let kinds: HashSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("hayate_requests_total{kind=\""))
            .filter_map(|l| l.split('"').next())
            .collect();
        assert_eq!(kinds.len(), KINDS_MAX);
        assert!(kinds.contains("other"));
        assert_eq!(value(&text, "hayate_requests_total{kind=\"kind-0\"}"), 2.0);
        assert_eq!(
            value(&text, "hayate_requests_total{kind=\"other\"}"),
            (100 - (KINDS_MAX - 1)) as f64
        );
    }

    #[test]
    fn recording_from_many_threads_loses_nothing_and_is_cheap() {
        let metrics = Arc::new(Metrics::new());
        let per_thread = 20_000u64;
        let started = Instant::now();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let metrics = Arc::clone(&metrics);
                std::thread::spawn(move || {
                    let kind = if t % 2 == 0 { "select" } else { "insert" };
                    for i in 0..per_thread {
                        metrics.record(kind, i % 2000);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("recorder thread");
        }
        let per_record = started.elapsed() / (4 * per_thread as u32);
        let text = rendered(&metrics);
        assert_eq!(
            value(&text, "hayate_requests_total{kind=\"select\"}"),
            (2 * per_thread) as f64
        );
        assert_eq!(
            value(&text, "hayate_requests_total{kind=\"insert\"}"),
            (2 * per_thread) as f64
        );
        // A loose bound (tests run unoptimised, on shared machines, with two threads per
        // lock): it catches a lock held across a scrape or an allocation per record, not a
        // few nanoseconds.
        assert!(
            per_record < Duration::from_micros(20),
            "{per_record:?} per record"
        );
    }
}
