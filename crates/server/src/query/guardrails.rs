//! Cassandra 5.0's limits on what one statement may ask for, with its messages: the size of a
//! batch (`batch_size_warn_threshold`, `batch_size_fail_threshold`), the partition keys of a
//! SELECT's IN restriction (`partition_keys_in_select_*`) and the keys the cartesian product
//! of IN restrictions makes (`in_select_cartesian_product_*`). The thresholds are the node's
//! `[guardrails]` settings ([`GuardrailsConfig`]); a warning goes to the client with the
//! response ([`Warnings`]) and to the node's log (at most one line a minute of each kind), a
//! failure is an Invalid error.
//!
//! Two differences from Cassandra, both so that the cartesian bound keeps the node's memory
//! bounded as hayate's fixed bound did before it became a setting: every role is checked
//! (Cassandra exempts superusers from guardrails), and the product is checked before the keys
//! are built, at the largest count any prefix of the IN lists makes.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use hayate_storage::row::{CellValue, Row};

use super::keys::ClusteringRange;
use super::modify::Mutation;
use super::warnings::Warnings;
use crate::config::guardrails::threshold;
use crate::config::GuardrailsConfig;
use crate::error::{invalid, QueryResult};
use crate::schema::Table;

/// Bytes a cell adds to a batch beside its value and collection key: its timestamp (8), TTL
/// (4) and deletion time (4), as Cassandra's `Cell.dataSize` counts them.
pub const CELL_OVERHEAD_BYTES: u64 = 16;
/// A row marker's timestamp; one with a TTL adds [`EXPIRY_BYTES`].
pub const MARKER_BYTES: u64 = 8;
/// TTL and expiry time of an expiring row marker.
pub const EXPIRY_BYTES: u64 = 8;
/// A deletion (of a row, a column or a range): its timestamp and its deletion time.
pub const DELETION_BYTES: u64 = 12;

/// The thresholds a statement is checked against, and where its warnings go.
#[derive(Clone, Copy, Debug)]
pub struct Guard<'a> {
    pub config: &'a GuardrailsConfig,
    pub warnings: &'a Warnings,
}

/// The data a row update writes, as the batch thresholds count it: the clustering key, each
/// cell's value and collection key plus [`CELL_OVERHEAD_BYTES`], the row marker and every
/// deletion. Cassandra counts its mutations' `dataSize` the same way (clustering values,
/// cells with their timestamps and deletion times, liveness and deletion info); the partition
/// key is counted by neither.
pub fn row_data_size_bytes(clustering: &[u8], row: &Row) -> u64 {
    let mut size = clustering.len() as u64;
    if let Some(marker) = &row.liveness {
        size += MARKER_BYTES + if marker.ttl_s > 0 { EXPIRY_BYTES } else { 0 };
    }
    if row.deletion.is_some() {
        size += DELETION_BYTES;
    }
    size += row.column_deletions.len() as u64 * DELETION_BYTES;
    for cell in &row.cells {
        let value_bytes = match &cell.value {
            CellValue::Live { value, .. } => value.len(),
            CellValue::Tombstone { .. } => 0,
        };
        size += CELL_OVERHEAD_BYTES + (value_bytes + cell.path.len()) as u64;
    }
    size
}

/// The data a range deletion writes: its two bounds and the deletion.
pub fn range_data_size_bytes(range: &ClusteringRange) -> u64 {
    let bound = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(v) | Bound::Excluded(v) => v.len() as u64,
        Bound::Unbounded => 0,
    };
    bound(&range.start) + bound(&range.end) + DELETION_BYTES
}

/// What a threshold check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Within,
    /// Over the warn threshold: the statement runs, and the client is warned.
    Warn {
        threshold: u64,
    },
    /// Over the fail threshold: the statement is refused.
    Fail {
        threshold: u64,
    },
}

/// Where `value` stands against a warn and a fail threshold (`None`: off). Exceeding means
/// strictly greater, as in Cassandra.
pub fn verdict(value: u64, warn: Option<u64>, fail: Option<u64>) -> Verdict {
    match (warn, fail) {
        (_, Some(fail)) if value > fail => Verdict::Fail { threshold: fail },
        (Some(warn), _) if value > warn => Verdict::Warn { threshold: warn },
        _ => Verdict::Within,
    }
}

/// Checks a batch's size: over the warn threshold it warns, over the fail threshold it is
/// refused with Cassandra's "Batch too large". A batch whose mutations all write one partition
/// of one keyspace (one mutation, in Cassandra's terms) is not checked, as in Cassandra
/// (CASSANDRA-10876), whether it is logged or not.
pub fn check_batch_size(guard: Guard<'_>, mutations: &[Mutation]) -> QueryResult<()> {
    let Some(first) = mutations.first() else {
        return Ok(());
    };
    let one_partition = mutations
        .iter()
        .all(|m| m.partition() == first.partition() && m.table().keyspace == first.table().keyspace);
    if one_partition {
        return Ok(());
    }
    let size: u64 = mutations.iter().map(Mutation::data_size_bytes).sum();
    let config = guard.config;
    let warn = config.batch_size_warn_threshold_bytes.0;
    let fail = config.batch_size_fail_threshold_bytes.0;
    let decided = verdict(size, Some(warn), Some(fail));
    if decided == Verdict::Within {
        return Ok(());
    }
    let tables: BTreeSet<String> = mutations
        .iter()
        .map(|m| format!("{}.{}", m.table().keyspace, m.table().name))
        .collect();
    let tables = format!("[{}]", tables.into_iter().collect::<Vec<_>>().join(", "));
    match decided {
        Verdict::Fail { threshold } => {
            if let Some(more) = BATCH_FAILED.allow() {
                tracing::error!(
                    "Batch for {tables} is of size {}, exceeding specified threshold of {} by {}. (see \
                     batch_size_fail_threshold){}",
                    pretty_bytes(size),
                    pretty_bytes(threshold),
                    pretty_bytes(size - threshold),
                    more
                );
            }
            Err(invalid("Batch too large"))
        }
        Verdict::Warn { threshold } => {
            if let Some(more) = BATCH_WARNED.allow() {
                tracing::warn!(
                    "Batch for {tables} is of size {}, exceeding specified threshold of {} by {}.{}",
                    pretty_bytes(size),
                    pretty_bytes(threshold),
                    pretty_bytes(size - threshold),
                    more
                );
            }
            // The client's copy gives plain byte counts, as Cassandra's does.
            guard.warnings.add(format!(
                "Batch for {tables} is of size {size}, exceeding specified threshold of {threshold} by {}.",
                size - threshold
            ));
            Ok(())
        }
        Verdict::Within => Ok(()),
    }
}

/// Checks the number of partition keys a SELECT's IN restriction names
/// (`partition_keys_in_select`). `keys` may repeat a key; it counts once, as in Cassandra.
pub fn check_partition_keys_in_select(guard: Guard<'_>, table: &Table, keys: &[Vec<u8>]) -> QueryResult<()> {
    let config = guard.config;
    let warn = threshold(config.partition_keys_in_select_warn_threshold);
    let fail = threshold(config.partition_keys_in_select_fail_threshold);
    // The distinct count only when the list is long enough to matter.
    if verdict(keys.len() as u64, warn, fail) == Verdict::Within {
        return Ok(());
    }
    let distinct = keys.iter().collect::<BTreeSet<_>>().len() as u64;
    let name = &table.name;
    match verdict(distinct, warn, fail) {
        Verdict::Within => Ok(()),
        Verdict::Warn { threshold } => {
            warn_guardrail(
                guard,
                "partition_keys_in_select",
                format!(
                    "Query with partition keys in IN clause on table {name}, with number of partition keys \
                     {distinct} exceeds warning threshold of {threshold}."
                ),
            );
            Ok(())
        }
        Verdict::Fail { threshold } => Err(fail_guardrail(
            "partition_keys_in_select",
            format!(
                "Aborting query with partition keys in IN clause on table {name}, number of partition keys \
                 {distinct} exceeds fail threshold of {threshold}."
            ),
        )),
    }
}

/// Checks the keys the cartesian product of IN restrictions on `what` ("partition key" or
/// "clustering key") makes (`in_select_cartesian_product`). `lists` are the values each key
/// column takes, in key order; the count is the largest any prefix of them makes, checked
/// before the keys are built.
pub fn check_in_cartesian_product(guard: Guard<'_>, what: &str, lists: &[Vec<Vec<u8>>]) -> QueryResult<()> {
    let config = guard.config;
    let warn = threshold(config.in_select_cartesian_product_warn_threshold);
    let fail = threshold(config.in_select_cartesian_product_fail_threshold);
    if warn.is_none() && fail.is_none() {
        return Ok(());
    }
    let mut produced: u64 = 1;
    let mut largest: u64 = 1;
    for list in lists {
        produced = produced.saturating_mul(list.len() as u64);
        largest = largest.max(produced);
    }
    match verdict(largest, warn, fail) {
        Verdict::Within => Ok(()),
        Verdict::Warn { threshold } => {
            warn_guardrail(
                guard,
                "in_select_cartesian_product",
                format!(
                    "The cartesian product of the IN restrictions on {what} produces {largest} values, \
                     this exceeds warning threshold of {threshold}."
                ),
            );
            Ok(())
        }
        Verdict::Fail { threshold } => Err(fail_guardrail(
            "in_select_cartesian_product",
            format!(
                "Aborting query because the cartesian product of the IN restrictions on {what} \
                 produces {largest} values, this exceeds fail threshold of {threshold}."
            ),
        )),
    }
}

/// A guardrail's warning, prefixed as Cassandra prefixes it, to the client and the log.
fn warn_guardrail(guard: Guard<'_>, name: &str, message: String) {
    let message = format!("Guardrail {name} violated: {message}");
    if let Some(more) = GUARDRAIL_WARNED.allow() {
        tracing::warn!("{message}{more}");
    }
    guard.warnings.add(message);
}

/// A guardrail's refusal, prefixed as Cassandra prefixes it: an Invalid error, logged.
fn fail_guardrail(name: &str, message: String) -> crate::error::QueryError {
    let message = format!("Guardrail {name} violated: {message}");
    if let Some(more) = GUARDRAIL_FAILED.allow() {
        tracing::error!("{message}{more}");
    }
    invalid(message)
}

/// At most one log line a minute for each kind of guardrail event, as Cassandra logs its
/// guardrails through a `NoSpamLogger`: a client sending large batches in a loop must not fill
/// the node's log. The client hears every warning and refusal all the same.
struct LogLimit {
    /// The Unix second before which nothing more is logged.
    quiet_until_s: AtomicU64,
    skipped: AtomicU64,
}

const LOG_INTERVAL_S: u64 = 60;

static BATCH_WARNED: LogLimit = LogLimit::new();
static BATCH_FAILED: LogLimit = LogLimit::new();
static GUARDRAIL_WARNED: LogLimit = LogLimit::new();
static GUARDRAIL_FAILED: LogLimit = LogLimit::new();

impl LogLimit {
    const fn new() -> LogLimit {
        LogLimit {
            quiet_until_s: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// `Some` (with a note of the lines left out since the last, if any) if this one may be
    /// logged.
    fn allow(&self) -> Option<String> {
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let until = self.quiet_until_s.load(Ordering::Relaxed);
        if now_s < until
            || self
                .quiet_until_s
                .compare_exchange(
                    until,
                    now_s + LOG_INTERVAL_S,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(match self.skipped.swap(0, Ordering::Relaxed) {
            0 => String::new(),
            n => format!(" ({n} more like it in the last minute not logged)"),
        })
    }
}

/// A size as Cassandra's log lines print it: three decimals of the largest binary unit.
pub fn pretty_bytes(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift {
            return format!("{:.3}{unit}", bytes as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_of_guardrail_event_is_logged_once_a_minute() {
        let limit = LogLimit::new();
        assert_eq!(limit.allow().as_deref(), Some(""));
        assert_eq!(limit.allow(), None);
        assert_eq!(limit.allow(), None);
        // A minute later the next line says how many were left out.
        limit.quiet_until_s.store(0, Ordering::Relaxed);
        assert_eq!(
            limit.allow().as_deref(),
            Some(" (2 more like it in the last minute not logged)")
        );
    }
    use hayate_storage::row::{Cell, Deletion, Liveness};

    #[test]
    fn exceeding_means_strictly_greater_and_failure_wins() {
        assert_eq!(verdict(10, Some(10), Some(20)), Verdict::Within);
        assert_eq!(verdict(11, Some(10), Some(20)), Verdict::Warn { threshold: 10 });
        assert_eq!(verdict(20, Some(10), Some(20)), Verdict::Warn { threshold: 10 });
        assert_eq!(verdict(21, Some(10), Some(20)), Verdict::Fail { threshold: 20 });
        assert_eq!(verdict(21, None, Some(20)), Verdict::Fail { threshold: 20 });
        assert_eq!(verdict(u64::MAX, None, None), Verdict::Within);
    }

    #[test]
    fn a_rows_size_is_its_clustering_key_cells_marker_and_deletions() {
        let mut row = Row {
            liveness: Some(Liveness {
                timestamp_us: 1,
                ttl_s: 0,
                expires_at_s: 0,
            }),
            ..Row::default()
        };
        row.cells.push(Cell::live(1, 1, vec![0; 100]));
        let mut element = Cell::live(2, 1, vec![0; 10]);
        element.path = vec![0; 4];
        row.cells.push(element);
        row.cells.push(Cell::tombstone(3, 1, 0));
        row.column_deletions.push((
            4,
            Deletion {
                timestamp_us: 1,
                deleted_at_s: 0,
            },
        ));
        let clustering = [0u8; 6];
        assert_eq!(
            row_data_size_bytes(&clustering, &row),
            6 + MARKER_BYTES + (16 + 100) + (16 + 10 + 4) + 16 + DELETION_BYTES
        );
        let range = ClusteringRange {
            start: Bound::Included(vec![0; 5]),
            end: Bound::Unbounded,
        };
        assert_eq!(range_data_size_bytes(&range), 5 + DELETION_BYTES);
    }

    #[test]
    fn the_cartesian_count_is_the_largest_prefix_product() {
        let warnings = Warnings::default();
        let config = GuardrailsConfig {
            in_select_cartesian_product_warn_threshold: 5,
            in_select_cartesian_product_fail_threshold: 25,
            ..GuardrailsConfig::DEFAULT
        };
        let guard = Guard {
            config: &config,
            warnings: &warnings,
        };
        let list = |n: usize| vec![vec![0u8]; n];
        assert!(check_in_cartesian_product(guard, "partition key", &[list(5), list(1)]).is_ok());
        assert!(warnings.take().is_empty());
        assert!(check_in_cartesian_product(guard, "partition key", &[list(3), list(2)]).is_ok());
        assert_eq!(
            warnings.take(),
            [
                "Guardrail in_select_cartesian_product violated: The cartesian product of the IN \
              restrictions on partition key produces 6 values, this exceeds warning threshold of 5."
            ]
        );
        let err =
            check_in_cartesian_product(guard, "clustering key", &[list(6), list(5)]).expect_err("refused");
        assert_eq!(
            err,
            invalid(
                "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian \
                 product of the IN restrictions on clustering key produces 30 values, this exceeds fail \
                 threshold of 25."
            )
        );
        // A prefix over the threshold counts even when a later empty list makes nothing.
        assert!(check_in_cartesian_product(guard, "clustering key", &[list(30), list(0)]).is_err());
        // Off: any product.
        let off = GuardrailsConfig {
            in_select_cartesian_product_fail_threshold: -1,
            ..GuardrailsConfig::DEFAULT
        };
        let guard = Guard {
            config: &off,
            warnings: &warnings,
        };
        assert!(check_in_cartesian_product(guard, "partition key", &[list(1000), list(1000)]).is_ok());
    }

    #[test]
    fn sizes_print_as_cassandra_logs_them() {
        assert_eq!(pretty_bytes(100), "100B");
        assert_eq!(pretty_bytes(5 * 1024), "5.000KiB");
        assert_eq!(pretty_bytes(6000), "5.859KiB");
        assert_eq!(pretty_bytes(3 << 20), "3.000MiB");
    }
}
