//! Request, connection and storage figures, served to Prometheus as text.
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
//!
//! The endpoint is a plain thread with a blocking listener, kept off the CQL runtime so that a
//! stuck scrape cannot delay queries and an overloaded runtime cannot hide its own figures.
//! It answers `GET /metrics` in the text exposition format 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>).

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hayate_cluster::coordinator::MetricsSnapshot as CoordinatorSnapshot;
use hayate_cql::error::ErrorCode;
use hayate_cql::opcode::Opcode;
use hayate_storage::{SnapshotSpace, StatsSnapshot};
use hdrhistogram::Histogram;

/// Distinct statement kinds tracked, the last slot being "other" for any beyond.
pub const KINDS_MAX: usize = 64;
const OTHER_KIND: &str = "other";

/// Upper bounds of the latency buckets, 50 µs to 1 s; a last, implicit bucket is +Inf.
pub const LATENCY_BUCKET_BOUNDS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
];
const BUCKETS: usize = LATENCY_BUCKET_BOUNDS_US.len() + 1;

/// Quantiles exported from the HdrHistogram, with their label values.
const QUANTILES: [(f64, &str); 4] = [(0.5, "0.5"), (0.95, "0.95"), (0.99, "0.99"), (0.999, "0.999")];
/// The HdrHistogram covers 1 µs to 60 s at two significant digits (about 20 KiB per kind);
/// slower requests are recorded as 60 s.
const QUANTILE_HISTOGRAM_MAX_US: u64 = 60_000_000;

/// The largest HTTP request head read; a scrape sends a few hundred bytes.
pub const HTTP_REQUEST_MAX_BYTES: usize = 8192;
/// How long a scraper may take to send its request or read the answer before it is dropped,
/// so that one stuck client cannot block the endpoint for long.
const HTTP_IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The node's counters. Share it as `Arc<Metrics>`; every method takes `&self`.
pub struct Metrics {
    series: [OnceLock<Series>; KINDS_MAX],
    /// Slots `0..registered` are filled, in order; set after the slot it counts.
    registered: AtomicUsize,
    register_lock: Mutex<()>,
    connections_opened: AtomicU64,
    connections_closed: AtomicU64,
    frames_received: AtomicU64,
    frames_sent: AtomicU64,
    /// Requests by opcode, indexed as `Opcode::ALL`.
    requests_by_opcode: [AtomicU64; Opcode::ALL.len()],
    bytes_received: AtomicU64,
    bytes_sent: AtomicU64,
    /// Connections whose reader waits now (see `connection::limits`).
    connections_paused_now: AtomicU64,
    /// Pauses since start, by [`PauseReason`].
    pauses: [AtomicU64; PauseReason::ALL.len()],
    requests_overloaded: AtomicU64,
    started: Instant,
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

    fn label(self) -> &'static str {
        match self {
            PauseReason::ResponsesUnread => "responses_unread",
            PauseReason::RequestData => "request_data",
        }
    }
}

/// Everything recorded for one statement kind.
struct Series {
    kind: &'static str,
    /// Requests per latency bucket, not cumulative (the export adds them up).
    buckets: [AtomicU64; BUCKETS],
    latency_sum_us: AtomicU64,
    /// Errors by code, indexed as `ErrorCode::ALL`.
    errors: [AtomicU64; ErrorCode::ALL.len()],
    quantiles: Mutex<Histogram<u64>>,
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

    /// Appends every figure, these and the storage engine's, in the text exposition format.
    pub fn render(&self, storage: &StatsSnapshot, out: &mut String) {
        let mut series: Vec<&Series> = self.series.iter().filter_map(OnceLock::get).collect();
        series.sort_by_key(|s| s.kind);

        // Read each kind's buckets once, so that within one scrape the bucket counts, _count
        // and hayate_requests_total agree even while requests are being recorded.
        let buckets: Vec<[u64; BUCKETS]> = series
            .iter()
            .map(|s| std::array::from_fn(|i| s.buckets[i].load(Relaxed)))
            .collect();

        family(
            out,
            "hayate_requests_total",
            "counter",
            "Requests handled, by statement kind.",
        );
        for (s, counts) in series.iter().zip(&buckets) {
            sample(
                out,
                "hayate_requests_total",
                &[("kind", s.kind)],
                counts.iter().sum::<u64>(),
            );
        }

        family(
            out,
            "hayate_errors_total",
            "counter",
            "Requests answered with an ERROR, by statement kind and CQL error code.",
        );
        for s in &series {
            for (code, count) in ErrorCode::ALL.iter().zip(&s.errors) {
                let count = count.load(Relaxed);
                if count > 0 {
                    let hex = format!("0x{:04X}", *code as i32);
                    let name = format!("{code:?}");
                    sample(
                        out,
                        "hayate_errors_total",
                        &[("kind", s.kind), ("code", &hex), ("error", &name)],
                        count,
                    );
                }
            }
        }

        family(
            out,
            "hayate_request_latency_seconds",
            "histogram",
            "Time from reading a request to writing its response, by statement kind.",
        );
        for (s, counts) in series.iter().zip(&buckets) {
            let mut cumulative = 0;
            for (i, count) in counts.iter().enumerate() {
                cumulative += count;
                let le = match LATENCY_BUCKET_BOUNDS_US.get(i) {
                    Some(bound_us) => seconds(*bound_us),
                    None => "+Inf".to_string(),
                };
                sample(
                    out,
                    "hayate_request_latency_seconds_bucket",
                    &[("kind", s.kind), ("le", &le)],
                    cumulative,
                );
            }
            let sum_us = s.latency_sum_us.load(Relaxed);
            sample(
                out,
                "hayate_request_latency_seconds_sum",
                &[("kind", s.kind)],
                seconds(sum_us),
            );
            sample(
                out,
                "hayate_request_latency_seconds_count",
                &[("kind", s.kind)],
                cumulative,
            );
        }

        family(
            out,
            "hayate_request_latency_quantile_seconds",
            "gauge",
            "Request latency quantiles since the node started, by statement kind.",
        );
        for s in &series {
            let histogram = s.quantiles.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if histogram.is_empty() {
                continue;
            }
            for (quantile, label) in QUANTILES {
                let value_us = histogram.value_at_quantile(quantile);
                sample(
                    out,
                    "hayate_request_latency_quantile_seconds",
                    &[("kind", s.kind), ("quantile", label)],
                    seconds(value_us),
                );
            }
        }

        let opened = self.connections_opened.load(Relaxed);
        let closed = self.connections_closed.load(Relaxed);
        family(
            out,
            "hayate_opcode_requests_total",
            "counter",
            "Requests read from clients, by protocol opcode.",
        );
        for (opcode, count) in Opcode::ALL.iter().zip(&self.requests_by_opcode) {
            let count = count.load(Relaxed);
            if count > 0 {
                sample(
                    out,
                    "hayate_opcode_requests_total",
                    &[("opcode", opcode_name(*opcode))],
                    count,
                );
            }
        }
        let connections = [
            (
                "hayate_connections",
                "gauge",
                "Open client connections.",
                opened.saturating_sub(closed),
            ),
            (
                "hayate_connections_opened_total",
                "counter",
                "Client connections accepted.",
                opened,
            ),
            (
                "hayate_frames_received_total",
                "counter",
                "Frames read from clients.",
                self.frames_received.load(Relaxed),
            ),
            (
                "hayate_frames_sent_total",
                "counter",
                "Frames written to clients.",
                self.frames_sent.load(Relaxed),
            ),
            (
                "hayate_received_bytes_total",
                "counter",
                "Bytes of frames read from clients, headers included.",
                self.bytes_received.load(Relaxed),
            ),
            (
                "hayate_sent_bytes_total",
                "counter",
                "Bytes of frames written to clients, headers included.",
                self.bytes_sent.load(Relaxed),
            ),
        ];
        let limits = [
            (
                "hayate_connections_paused",
                "gauge",
                "Client connections not being read now, to bound what they cost the node.",
                self.connections_paused_now.load(Relaxed),
            ),
            (
                "hayate_requests_overloaded_total",
                "counter",
                "Requests answered Overloaded: over the request data in flight limits, from a client that asked THROW_ON_OVERLOAD.",
                self.requests_overloaded.load(Relaxed),
            ),
        ];
        for (name, kind, help, value) in connections.into_iter().chain(limits) {
            family(out, name, kind, help);
            sample(out, name, &[], value);
        }
        family(
            out,
            "hayate_connection_pauses_total",
            "counter",
            "Times a client connection stopped being read: its client left too many responses unread, or a request found the node over its request data limits.",
        );
        for (reason, count) in PauseReason::ALL.iter().zip(&self.pauses) {
            sample(
                out,
                "hayate_connection_pauses_total",
                &[("reason", reason.label())],
                count.load(Relaxed),
            );
        }
        family(
            out,
            "hayate_uptime_seconds",
            "gauge",
            "Time since the node started.",
        );
        sample(
            out,
            "hayate_uptime_seconds",
            &[],
            self.started.elapsed().as_secs_f64(),
        );

        render_storage(storage, out);
    }
}

fn opcode_index(opcode: Opcode) -> usize {
    Opcode::ALL.iter().position(|o| *o == opcode).unwrap_or(0)
}

/// The label value of an opcode: the spec's name in lower case.
fn opcode_name(opcode: Opcode) -> &'static str {
    match opcode {
        Opcode::Error => "error",
        Opcode::Startup => "startup",
        Opcode::Ready => "ready",
        Opcode::Authenticate => "authenticate",
        Opcode::Options => "options",
        Opcode::Supported => "supported",
        Opcode::Query => "query",
        Opcode::Result => "result",
        Opcode::Prepare => "prepare",
        Opcode::Execute => "execute",
        Opcode::Register => "register",
        Opcode::Event => "event",
        Opcode::Batch => "batch",
        Opcode::AuthChallenge => "auth_challenge",
        Opcode::AuthResponse => "auth_response",
        Opcode::AuthSuccess => "auth_success",
    }
}

/// The storage engine's figures. The snapshot is taken apart field by field so that a field
/// added to it fails to compile here until it is exported.
fn render_storage(storage: &StatsSnapshot, out: &mut String) {
    let StatsSnapshot {
        records,
        index_bytes,
        free_blocks,
        total_blocks,
        block_size_bytes,
        live_bytes,
        cache_bytes,
        device_bytes_written,
        user_bytes_written,
        device_reads,
        cache_hits,
        read_errors,
        cached_rereads,
        defrag_blocks,
        defrag_bytes_moved,
        expired_entries,
        records_read,
        record_bytes_read,
        blind_writes,
        delta_folds,
        deltas,
        delta_bytes,
    } = *storage;
    let used_blocks = total_blocks.saturating_sub(free_blocks);
    let figures = [
        (
            "hayate_storage_records",
            "gauge",
            "Index entries, tombstones included.",
            records,
        ),
        (
            "hayate_storage_index_bytes",
            "gauge",
            "RAM held by the index's entry arrays.",
            index_bytes,
        ),
        (
            "hayate_storage_free_blocks",
            "gauge",
            "Write blocks free for new data.",
            free_blocks,
        ),
        (
            "hayate_storage_used_blocks",
            "gauge",
            "Write blocks holding data.",
            used_blocks,
        ),
        (
            "hayate_storage_total_blocks",
            "gauge",
            "Write blocks on all devices.",
            total_blocks,
        ),
        (
            "hayate_storage_block_size_bytes",
            "gauge",
            "The size of a write block.",
            block_size_bytes,
        ),
        (
            "hayate_storage_live_bytes",
            "gauge",
            "Bytes of current record versions on the devices.",
            live_bytes,
        ),
        (
            "hayate_storage_cache_bytes",
            "gauge",
            "RAM held by the post-write cache.",
            cache_bytes,
        ),
        (
            "hayate_storage_device_written_bytes_total",
            "counter",
            "Bytes written to the devices: blocks, rewrites, defragmentation.",
            device_bytes_written,
        ),
        (
            "hayate_storage_user_written_bytes_total",
            "counter",
            "Encoded bytes of the records clients wrote.",
            user_bytes_written,
        ),
        (
            "hayate_storage_device_reads_total",
            "counter",
            "Record reads issued to a device file (with read_page_cache, the page cache may serve them).",
            device_reads,
        ),
        (
            "hayate_storage_cache_hits_total",
            "counter",
            "Reads served from the post-write cache or memory.",
            cache_hits,
        ),
        (
            "hayate_storage_read_errors_total",
            "counter",
            "Reads that failed: device errors or checksum mismatches.",
            read_errors,
        ),
        (
            "hayate_storage_cached_rereads_total",
            "counter",
            "Record reads through the page cache that failed their checks and were read again from the device.",
            cached_rereads,
        ),
        (
            "hayate_storage_blind_writes_total",
            "counter",
            "Updates written as deltas, without reading their row.",
            blind_writes,
        ),
        (
            "hayate_storage_delta_folds_total",
            "counter",
            "Rows written whole again over their delta: by a read, a write or defragmentation.",
            delta_folds,
        ),
        (
            "hayate_storage_deltas",
            "gauge",
            "Rows with a pending delta.",
            deltas,
        ),
        (
            "hayate_storage_delta_bytes",
            "gauge",
            "RAM held by pending deltas.",
            delta_bytes,
        ),
        (
            "hayate_storage_records_read_total",
            "counter",
            "Records read and decoded, whatever served them (device, cache, open block).",
            records_read,
        ),
        (
            "hayate_storage_record_read_bytes_total",
            "counter",
            "Bytes of the records read and decoded.",
            record_bytes_read,
        ),
        (
            "hayate_storage_defrag_blocks_total",
            "counter",
            "Write blocks defragmented.",
            defrag_blocks,
        ),
        (
            "hayate_storage_defrag_moved_bytes_total",
            "counter",
            "Bytes of live records defragmentation rewrote.",
            defrag_bytes_moved,
        ),
        (
            "hayate_storage_expired_entries_total",
            "counter",
            "Records removed because their TTL passed.",
            expired_entries,
        ),
    ];
    for (name, kind, help, value) in figures {
        family(out, name, kind, help);
        sample(out, name, &[], value);
    }
    family(
        out,
        "hayate_storage_free_ratio",
        "gauge",
        "Share of write blocks free, 0 to 1.",
    );
    sample(out, "hayate_storage_free_ratio", &[], storage.free_pct() / 100.0);
    family(
        out,
        "hayate_storage_write_amplification_ratio",
        "gauge",
        "Device bytes written per byte of user data.",
    );
    sample(
        out,
        "hayate_storage_write_amplification_ratio",
        &[],
        storage.write_amplification(),
    );
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            escape_label_value(value, out);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values escape backslash, double quote and newline, per the format.
fn escape_label_value(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Microseconds as a decimal number of seconds ("0.00005", not "5e-5").
fn seconds(us: u64) -> String {
    let whole = us / 1_000_000;
    let fraction = us % 1_000_000;
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// How much unread input, and for how long, is drained before closing (see `respond`).
const HTTP_LINGER_MAX_BYTES: usize = 64 << 10;
const HTTP_LINGER_TIMEOUT: Duration = Duration::from_secs(1);

/// The running endpoint.
pub struct MetricsServer {
    /// Where it listens (the port is filled in when 0 was asked for).
    pub local_addr: SocketAddr,
    /// The thread that serves it; it runs until the process exits.
    #[expect(
        dead_code,
        reason = "the node never joins the endpoint's thread; kept so a caller could"
    )]
    pub thread: JoinHandle<()>,
}

/// The node's streams, for a scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamFigures {
    pub counters: hayate_cluster::streaming::CountersSnapshot,
    pub rate_in_bytes_per_s: f64,
    pub rate_out_bytes_per_s: f64,
    pub pending_ranges: u64,
}

/// What a scrape reads from the node besides the request counters.
pub trait NodeFigures: Send + Sync + 'static {
    fn storage(&self) -> StatsSnapshot;
    fn coordinator(&self) -> CoordinatorSnapshot;
    /// The node's streams (`None` where it has none, as in tests).
    fn streams(&self) -> Option<StreamFigures> {
        None
    }
    /// Device space the node's snapshots pin and hold (`None` where it has no engine, as in
    /// tests).
    fn snapshots(&self) -> Option<SnapshotSpace> {
        None
    }
    /// The cluster's status as `hayate status` reads it (`/status`), a JSON document.
    fn status(&self) -> String;
    /// An operator's request other than a scrape (`/netstats`, `/decommission`, ...), with
    /// whether it came from this machine: `Some((status line, body))`, or `None` for a path
    /// the node does not serve.
    fn admin(&self, method: &str, path: &str, query: &str, from_loopback: bool) -> Option<(String, String)> {
        let _ = (method, path, query, from_loopback);
        None
    }
}

/// Starts the endpoint on `addr`: `/metrics` for Prometheus, `/status` for `hayate status`.
/// Returns once the port is bound, so a bind failure is reported at startup.
pub fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    node: Arc<dyn NodeFigures>,
) -> io::Result<MetricsServer> {
    let listener = TcpListener::bind(addr)?;
    let local_addr = listener.local_addr()?;
    let thread = std::thread::Builder::new()
        .name("hayate-metrics".to_string())
        .spawn(move || accept_loop(listener, metrics, node))?;
    Ok(MetricsServer { local_addr, thread })
}

fn accept_loop(listener: TcpListener, metrics: Arc<Metrics>, node: Arc<dyn NodeFigures>) {
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                if let Err(e) = answer(stream, &metrics, &*node) {
                    tracing::debug!(error = %e, "metrics endpoint: a scrape failed");
                }
            }
            Err(e) => {
                // Out of file descriptors, most likely: wait rather than spin, and keep serving.
                tracing::warn!(error = %e, "metrics endpoint: cannot accept a connection");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Reads one request and answers it; the connection is then closed. Scrapes are one at a time
/// (Prometheus scrapes each target every few seconds), each bounded by `HTTP_IO_TIMEOUT`.
fn answer(mut stream: TcpStream, metrics: &Metrics, node: &dyn NodeFigures) -> io::Result<()> {
    stream.set_read_timeout(Some(HTTP_IO_TIMEOUT))?;
    stream.set_write_timeout(Some(HTTP_IO_TIMEOUT))?;
    let head = match read_request_head(&mut stream)? {
        Some(head) => head,
        None => {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "request too large\n",
            )
        }
    };
    let mut request_line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    if let Some(line) = request_line.strip_suffix(b"\r") {
        request_line = line;
    }
    let request_line = String::from_utf8_lossy(request_line);
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return respond(&mut stream, "400 Bad Request", "not an HTTP request\n");
    };
    if !version.starts_with("HTTP/") {
        return respond(&mut stream, "400 Bad Request", "not an HTTP request\n");
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/metrics" && path != "/status" {
        let from_loopback = stream.peer_addr().is_ok_and(|a| a.ip().is_loopback());
        let answered = catch_unwind(AssertUnwindSafe(|| {
            node.admin(method, path, query, from_loopback)
        }));
        return match answered {
            Ok(Some((status, body))) => respond(&mut stream, &status, &body),
            Ok(None) => respond(
                &mut stream,
                "404 Not Found",
                "the metrics are at /metrics, the cluster's status at /status, streams at /netstats; \
                 /info, /tablestats, /ring, /describecluster, /defragstats and /logging answer the \
                 hayate tools\n",
            ),
            Err(_) => respond(&mut stream, "500 Internal Server Error", "the request failed\n"),
        };
    }
    if method != "GET" {
        return respond(&mut stream, "405 Method Not Allowed", "use GET\n");
    }
    // A panic in a callback must cost one scrape, not the endpoint.
    let body = catch_unwind(AssertUnwindSafe(|| {
        if path == "/status" {
            return node.status();
        }
        let mut body = String::with_capacity(16 << 10);
        metrics.render(&node.storage(), &mut body);
        render_coordinator(&node.coordinator(), &mut body);
        if let Some(streams) = node.streams() {
            render_streams(&streams, &mut body);
        }
        if let Some(space) = node.snapshots() {
            render_snapshots(&space, &mut body);
        }
        body
    }));
    match body {
        Ok(body) => respond(&mut stream, "200 OK", &body),
        Err(_) => respond(
            &mut stream,
            "500 Internal Server Error",
            "rendering the metrics failed\n",
        ),
    }
}

/// Streams in and out of the node (topology changes), and the ranges it is pending for.
pub fn render_streams(s: &StreamFigures, out: &mut String) {
    let c = &s.counters;
    family(
        out,
        "hayate_stream_records_total",
        "counter",
        "Records streamed, by direction.",
    );
    sample(
        out,
        "hayate_stream_records_total",
        &[("direction", "in")],
        c.records_in,
    );
    sample(
        out,
        "hayate_stream_records_total",
        &[("direction", "out")],
        c.records_out,
    );
    family(
        out,
        "hayate_stream_bytes_total",
        "counter",
        "Bytes of records streamed, by direction.",
    );
    sample(
        out,
        "hayate_stream_bytes_total",
        &[("direction", "in")],
        c.bytes_in,
    );
    sample(
        out,
        "hayate_stream_bytes_total",
        &[("direction", "out")],
        c.bytes_out,
    );
    family(
        out,
        "hayate_streams_in_flight",
        "gauge",
        "Streams running now, either way.",
    );
    sample(out, "hayate_streams_in_flight", &[], c.in_flight);
    family(
        out,
        "hayate_stream_rate_bytes_per_second",
        "gauge",
        "The rate of the streams running now, by direction.",
    );
    sample(
        out,
        "hayate_stream_rate_bytes_per_second",
        &[("direction", "in")],
        format!("{:.0}", s.rate_in_bytes_per_s),
    );
    sample(
        out,
        "hayate_stream_rate_bytes_per_second",
        &[("direction", "out")],
        format!("{:.0}", s.rate_out_bytes_per_s),
    );
    family(
        out,
        "hayate_pending_ranges",
        "gauge",
        "Ranges (of every table) this node is a pending replica of during a topology change.",
    );
    sample(out, "hayate_pending_ranges", &[], s.pending_ranges);
}

/// Device space kept for snapshots (`Engine::snapshot_space`). A block a snapshot pins is not
/// defragmented or reused until the snapshot is cleared, so pinned bytes are the most the
/// snapshots keep from new writes; held bytes are the part of them that holds no live data,
/// what only the snapshots keep now.
pub fn render_snapshots(space: &SnapshotSpace, out: &mut String) {
    let block_size_bytes = u64::from(space.block_size_bytes);
    let figures = [
        (
            "hayate_snapshot_pinned_bytes",
            "Device bytes in blocks some snapshot pins, kept from defragmentation and reuse until cleared.",
            space.pinned_blocks * block_size_bytes,
        ),
        (
            "hayate_snapshot_held_bytes",
            "Device bytes of pinned blocks that hold no live data: the space only snapshots keep now.",
            space.held_bytes,
        ),
    ];
    for (name, help, value) in figures {
        family(out, name, "gauge", help);
        sample(out, name, &[], value);
    }
}

/// The coordinator's figures: consistency failures, repairs, hints, replica latency.
pub fn render_coordinator(c: &CoordinatorSnapshot, out: &mut String) {
    let counters: [(&str, &str, u64); 13] = [
        ("hayate_coordinator_writes_total", "Writes this node coordinated.", c.writes),
        ("hayate_coordinator_reads_total", "Partition reads this node coordinated.", c.reads),
        ("hayate_coordinator_range_reads_total", "Token-range reads this node coordinated.", c.range_reads),
        ("hayate_coordinator_unavailable_total", "Requests refused with Unavailable: too few live replicas.", c.unavailable),
        ("hayate_coordinator_write_timeouts_total", "Writes that timed out waiting for replicas.", c.write_timeouts),
        ("hayate_coordinator_read_timeouts_total", "Reads that timed out waiting for replicas.", c.read_timeouts),
        ("hayate_coordinator_not_replica_total", "Requests coordinated by a node that is not a replica of their token (a driver not routing by token).", c.not_replica),
        ("hayate_coordinator_read_repairs_total", "Reads whose replicas disagreed, and were repaired.", c.read_repairs),
        ("hayate_coordinator_repaired_rows_total", "Rows sent to replicas that were behind.", c.repaired_rows),
        ("hayate_coordinator_speculative_retries_total", "Reads that asked one more replica because an answer was slow.", c.speculative_retries),
        ("hayate_hints_written_total", "Hints stored for replicas that were down or late.", c.hints_written),
        ("hayate_hints_dropped_total", "Hints not stored (node down past max_hint_window, or hints full).", c.hints_dropped),
        ("hayate_hints_replayed_total", "Hints delivered to replicas that came back.", c.hints_replayed),
    ];
    for (name, help, value) in counters {
        family(out, name, "counter", help);
        sample(out, name, &[], value);
    }
    family(
        out,
        "hayate_hints_pending_bytes",
        "gauge",
        "Bytes of hints waiting on this node.",
    );
    sample(out, "hayate_hints_pending_bytes", &[], c.hints_pending_bytes);
    family(
        out,
        "hayate_coordinator_replica_responses_total",
        "counter",
        "Answers from other replicas.",
    );
    sample(
        out,
        "hayate_coordinator_replica_responses_total",
        &[],
        c.replica_responses,
    );
    family(
        out,
        "hayate_coordinator_replica_latency_microseconds_total",
        "counter",
        "Time other replicas took to answer, summed (divide by the responses for the mean).",
    );
    sample(
        out,
        "hayate_coordinator_replica_latency_microseconds_total",
        &[],
        c.replica_latency_us_total,
    );
}

/// Reads up to the blank line that ends the request head. `None` if the head is larger than
/// `HTTP_REQUEST_MAX_BYTES`; the body of a GET, if any, is ignored.
fn read_request_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            // The client stopped sending; answer what arrived (likely a 400).
            return Ok(Some(head));
        }
        head.extend_from_slice(&chunk[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Ok(Some(head));
        }
        if head.len() > HTTP_REQUEST_MAX_BYTES {
            return Ok(None);
        }
    }
}

/// Answers and closes. Unread input left in the socket would make the close a reset, which
/// can destroy the answer before the client reads it (an oversized request is answered
/// before it has all arrived), so the rest of the input is read and dropped first, bounded in
/// bytes and time.
fn respond(stream: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    write_response(stream, status, body)?;
    stream.shutdown(std::net::Shutdown::Write)?;
    stream.set_read_timeout(Some(HTTP_LINGER_TIMEOUT))?;
    let mut sink = [0u8; 4096];
    let mut drained_bytes = 0;
    while drained_bytes < HTTP_LINGER_MAX_BYTES {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained_bytes += n,
        }
    }
    Ok(())
}

fn write_response(stream: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let content_type = if status.starts_with("200") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    fn rendered(metrics: &Metrics) -> String {
        let mut out = String::new();
        metrics.render(&StatsSnapshot::default(), &mut out);
        out
    }

    /// The value of the sample line that starts with `prefix` (name and labels).
    fn value(text: &str, prefix: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix).and_then(|rest| rest.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no sample {prefix} in\n{text}"))
            .parse()
            .expect("a number")
    }

    /// Checks every line against the text format: comments are HELP or TYPE, each family's
    /// TYPE comes once and before its samples, samples are `name{labels} value`.
    fn check_format(text: &str) {
        let mut typed: BTreeMap<String, String> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                let mut words = rest.splitn(3, ' ');
                let (Some(keyword), Some(name), Some(tail)) = (words.next(), words.next(), words.next())
                else {
                    panic!("bad comment line {line:?}");
                };
                match keyword {
                    "HELP" => assert!(!tail.is_empty()),
                    "TYPE" => {
                        assert!(["counter", "gauge", "histogram"].contains(&tail), "{line}");
                        assert!(
                            typed.insert(name.to_string(), tail.to_string()).is_none(),
                            "TYPE twice: {line}"
                        );
                    }
                    _ => panic!("bad comment line {line:?}"),
                }
                continue;
            }
            let (series, number) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no value: {line:?}"));
            number
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("bad value in {line:?}"));
            let name = series.split('{').next().unwrap_or_default();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty(),
                "bad name in {line:?}"
            );
            if let Some(labels) = series.strip_prefix(name) {
                if !labels.is_empty() {
                    assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                    for pair in labels[1..labels.len() - 1].split("\",") {
                        let (label, quoted) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                        assert!(
                            label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                            "{line}"
                        );
                        assert!(quoted.starts_with('"'), "{line}");
                    }
                }
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| {
                    name.strip_suffix(suffix)
                        .filter(|f| typed.get(*f).is_some_and(|t| t == "histogram"))
                })
                .unwrap_or(name);
            assert!(typed.contains_key(family), "sample before its TYPE: {line:?}");
        }
    }

    #[test]
    fn render_output_is_well_formed() {
        let metrics = Metrics::new();
        metrics.record("select", 120);
        metrics.record("insert", 40);
        metrics.record_error("select", ErrorCode::Invalid);
        metrics.connection_opened();
        metrics.frame_received(60);
        metrics.frame_received(40);
        metrics.request_opcode(Opcode::Execute);
        metrics.request_opcode(Opcode::Execute);
        metrics.frame_sent(200);
        let storage = StatsSnapshot {
            records: 10,
            free_blocks: 3,
            total_blocks: 4,
            device_bytes_written: 2048,
            user_bytes_written: 1024,
            ..StatsSnapshot::default()
        };
        let mut text = String::new();
        metrics.render(&storage, &mut text);
        check_format(&text);
        assert_eq!(
            value(
                &text,
                "hayate_errors_total{kind=\"select\",code=\"0x2200\",error=\"Invalid\"}"
            ),
            1.0
        );
        assert_eq!(value(&text, "hayate_connections"), 1.0);
        assert_eq!(value(&text, "hayate_received_bytes_total"), 100.0);
        assert_eq!(value(&text, "hayate_frames_received_total"), 2.0);
        assert_eq!(value(&text, "hayate_frames_sent_total"), 1.0);
        assert_eq!(
            value(&text, "hayate_opcode_requests_total{opcode=\"execute\"}"),
            2.0
        );
        assert_eq!(value(&text, "hayate_sent_bytes_total"), 200.0);
        assert_eq!(value(&text, "hayate_storage_records"), 10.0);
        assert_eq!(value(&text, "hayate_storage_used_blocks"), 1.0);
        assert_eq!(value(&text, "hayate_storage_free_ratio"), 0.75);
        assert_eq!(value(&text, "hayate_storage_write_amplification_ratio"), 2.0);

        // With nothing recorded the output is still valid.
        check_format(&rendered(&Metrics::new()));
    }

    #[test]
    fn buckets_are_cumulative_and_agree_with_count_and_sum() {
        let metrics = Metrics::new();
        for latency_us in [10, 50, 51, 700, 999_999, 1_000_000, 5_000_000] {
            metrics.record("select", latency_us);
        }
        let text = rendered(&metrics);
        let bucket = |le: &str| {
            value(
                &text,
                &format!("hayate_request_latency_seconds_bucket{{kind=\"select\",le=\"{le}\"}}"),
            )
        };
        assert_eq!(
            bucket("0.00005"),
            2.0,
            "50 µs is inside its bucket (le is inclusive)"
        );
        assert_eq!(bucket("0.0001"), 3.0);
        assert_eq!(bucket("0.0005"), 3.0);
        assert_eq!(bucket("0.001"), 4.0);
        assert_eq!(bucket("0.5"), 4.0);
        assert_eq!(bucket("1"), 6.0);
        assert_eq!(bucket("+Inf"), 7.0);
        let mut previous = 0.0;
        for line in text
            .lines()
            .filter(|l| l.starts_with("hayate_request_latency_seconds_bucket{kind=\"select\""))
        {
            let (_, n) = line.rsplit_once(' ').expect("value");
            let n: f64 = n.parse().expect("number");
            assert!(n >= previous, "buckets must never decrease: {line}");
            previous = n;
        }
        assert_eq!(
            value(&text, "hayate_request_latency_seconds_count{kind=\"select\"}"),
            7.0
        );
        assert_eq!(value(&text, "hayate_requests_total{kind=\"select\"}"), 7.0);
        let sum_us = 10 + 50 + 51 + 700 + 999_999 + 1_000_000 + 5_000_000;
        assert_eq!(
            value(&text, "hayate_request_latency_seconds_sum{kind=\"select\"}"),
            sum_us as f64 / 1e6
        );
        let p50 = value(
            &text,
            "hayate_request_latency_quantile_seconds{kind=\"select\",quantile=\"0.5\"}",
        );
        assert!((0.000695..=0.000705).contains(&p50), "p50 {p50}");
    }

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

    #[test]
    fn seconds_are_written_as_decimals() {
        assert_eq!(seconds(50), "0.00005");
        assert_eq!(seconds(2_500), "0.0025");
        assert_eq!(seconds(1_000_000), "1");
        assert_eq!(seconds(1_500_001), "1.500001");
        assert_eq!(seconds(0), "0");
    }

    fn http(addr: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream.write_all(request).expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read response");
        response
    }

    /// A node whose storage figures come from a closure.
    struct Figures<F>(F);

    impl<F: Fn() -> StatsSnapshot + Send + Sync + 'static> NodeFigures for Figures<F> {
        fn storage(&self) -> StatsSnapshot {
            (self.0)()
        }

        fn coordinator(&self) -> CoordinatorSnapshot {
            CoordinatorSnapshot {
                hints_written: 3,
                ..CoordinatorSnapshot::default()
            }
        }

        fn snapshots(&self) -> Option<SnapshotSpace> {
            Some(SnapshotSpace {
                pinned_blocks: 3,
                held_bytes: 1024,
                block_size_bytes: 1024,
            })
        }

        fn status(&self) -> String {
            "{\"nodes\": []}".to_owned()
        }
    }

    #[test]
    fn the_endpoint_answers_scrapes_and_survives_garbage() {
        let metrics = Arc::new(Metrics::new());
        metrics.record("select", 100);
        let server = serve(
            "127.0.0.1:0".parse().expect("address"),
            Arc::clone(&metrics),
            Arc::new(Figures(|| StatsSnapshot {
                records: 42,
                ..StatsSnapshot::default()
            })),
        )
        .expect("bind");
        let addr = server.local_addr;

        let scrape = || {
            http(
                addr,
                b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
            )
        };
        let response = scrape();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(
            response.contains("Content-Type: text/plain; version=0.0.4"),
            "{response}"
        );
        let (_, body) = response.split_once("\r\n\r\n").expect("head and body");
        check_format(body);
        assert_eq!(value(body, "hayate_storage_records"), 42.0);
        assert_eq!(value(body, "hayate_requests_total{kind=\"select\"}"), 1.0);
        assert_eq!(value(body, "hayate_hints_written_total"), 3.0);
        assert_eq!(value(body, "hayate_snapshot_pinned_bytes"), 3072.0);
        assert_eq!(value(body, "hayate_snapshot_held_bytes"), 1024.0);
        let status = http(addr, b"GET /status HTTP/1.1\r\n\r\n");
        assert!(status.ends_with("{\"nodes\": []}"), "{status}");

        assert!(http(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(http(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(http(addr, b"\x00\xff garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(http(addr, &[b'A'; 3 * HTTP_REQUEST_MAX_BYTES]).starts_with("HTTP/1.1 431"));
        // A client that connects and leaves, and one that sends half a request and leaves.
        drop(TcpStream::connect(addr).expect("connect"));
        {
            let mut half = TcpStream::connect(addr).expect("connect");
            half.write_all(b"GET /met").expect("send");
        }

        let response = scrape();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        let with_query = http(addr, b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
        assert!(with_query.starts_with("HTTP/1.1 200 OK\r\n"), "{with_query}");
    }

    #[test]
    fn a_panicking_storage_callback_costs_one_scrape() {
        let metrics = Arc::new(Metrics::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let server = serve(
            "127.0.0.1:0".parse().expect("address"),
            metrics,
            Arc::new(Figures(move || {
                if counter.fetch_add(1, Relaxed) == 0 {
                    panic!("the first scrape fails (a test of the endpoint)");
                }
                StatsSnapshot::default()
            })),
        )
        .expect("bind");
        let request = b"GET /metrics HTTP/1.1\r\n\r\n";
        assert!(http(server.local_addr, request).starts_with("HTTP/1.1 500"));
        assert!(http(server.local_addr, request).starts_with("HTTP/1.1 200"));
    }
}
