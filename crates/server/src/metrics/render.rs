//! Every figure a scrape shows, in Prometheus' text exposition format 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>): the request counters of
//! [`Metrics`], and the storage engine's, the coordinator's, the streams' and the snapshots'
//! figures read at the scrape.
//!
//! Prometheus' own Rust client (the `prometheus-client` crate) is not used, for two reasons.
//! Recording through it would cost more: a labelled family (`Family`) finds its series in a
//! map under a read-write lock on every increment, and its `Histogram` locks on every
//! observation, where [`Metrics`] records with atomics and one HdrHistogram lock. And
//! rendering our atomics through it (as a custom collector) would change what dashboards and
//! tests read: it writes OpenMetrics (a closing `# EOF`, a period added to every HELP text,
//! `_total` appended to counter names) and writes bucket bounds and sums through `dtoa`
//! (`le="5e-5"` where the series today are `le="0.00005"`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{OnceLock, PoisonError};

use hayate_cluster::coordinator::MetricsSnapshot as CoordinatorSnapshot;
use hayate_cql::error::ErrorCode;
use hayate_cql::opcode::Opcode;
use hayate_storage::{SnapshotSpace, StatsSnapshot};

use super::registry::{Metrics, PauseReason, Series, BUCKETS, LATENCY_BUCKET_BOUNDS_US, QUANTILES};
use super::text::{family, sample, seconds};

impl Metrics {
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

/// The node's streams, for a scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamFigures {
    pub counters: hayate_cluster::streaming::CountersSnapshot,
    pub rate_in_bytes_per_s: f64,
    pub rate_out_bytes_per_s: f64,
    pub pending_ranges: u64,
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

/// One secondary index of this node, for the metrics.
pub struct IndexFigures {
    pub keyspace: String,
    pub table: String,
    pub index: String,
    pub state: hayate_storage::IndexState,
}

/// Each secondary index's entries (its RAM), whether it is built, and what lookups read.
pub fn render_indexes(indexes: &[IndexFigures], out: &mut String) {
    if indexes.is_empty() {
        return;
    }
    type Family = (
        &'static str,
        &'static str,
        &'static str,
        fn(&hayate_storage::IndexState) -> u64,
    );
    let families: [Family; 4] = [
        (
            "hayate_index_entries",
            "gauge",
            "Entries of a secondary index in RAM on this node: one per indexed value and row (stale ones until a lookup drops them).",
            |s| s.entries,
        ),
        (
            "hayate_index_ready",
            "gauge",
            "1 once a secondary index is built on this node and answers queries, 0 while it is being built.",
            |s| u64::from(s.ready),
        ),
        (
            "hayate_index_rows_read_total",
            "counter",
            "Rows lookups by a secondary index read on this node.",
            |s| s.rows_read,
        ),
        (
            "hayate_index_stale_dropped_total",
            "counter",
            "Entries of a secondary index that lookups found stale (their row changed) and dropped.",
            |s| s.stale_dropped,
        ),
    ];
    for (name, kind, help, value) in families {
        family(out, name, kind, help);
        for i in indexes {
            let labels = [
                ("keyspace", i.keyspace.as_str()),
                ("table", i.table.as_str()),
                ("index", i.index.as_str()),
            ];
            sample(out, name, &labels, value(&i.state));
        }
    }
}

/// The coordinator's figures: consistency failures, repairs, hints, replica latency.
pub fn render_coordinator(c: &CoordinatorSnapshot, out: &mut String) {
    let counters: [(&str, &str, u64); 17] = [
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
        ("hayate_coordinator_cas_writes_total", "Lightweight transactions (conditional writes) this node coordinated.", c.cas_writes),
        ("hayate_coordinator_serial_reads_total", "Reads at SERIAL or LOCAL_SERIAL this node coordinated.", c.serial_reads),
        ("hayate_coordinator_paxos_round_trips_total", "Paxos phases sent to replicas (prepare, propose, commit, catch-up commits): one round trip each.", c.paxos_round_trips),
        ("hayate_coordinator_paxos_contended_total", "Paxos rounds started again because another transaction's ballot got in the way.", c.paxos_contended),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_support::{check_format, rendered, value};

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
}
