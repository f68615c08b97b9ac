//! The `[guardrails]` section: how large a batch, and how many keys an IN list, a request may
//! ask for before the node warns the client or refuses the request.
//!
//! The keys are Cassandra 5.0's, with its defaults, except one (below); cassandra.yaml has them
//! at its top level, hayate in this section:
//!
//! - `batch_size_warn_threshold` (5KiB) and `batch_size_fail_threshold` (50KiB): a batch whose
//!   mutations span more than one partition and whose data exceeds the first succeeds with a
//!   warning; past the second it is refused with "Batch too large" and nothing is applied. What
//!   hayate counts as a batch's size is [`crate::query::guardrails::row_data_size_bytes`].
//! - `partition_keys_in_select_warn_threshold` and `..._fail_threshold` (-1, off): the
//!   partition keys a SELECT's IN restriction names.
//! - `in_select_cartesian_product_warn_threshold` and `..._fail_threshold`: the keys the
//!   cartesian product of a statement's IN restrictions makes, on the partition key and on the
//!   clustering key (SELECT, UPDATE and DELETE, as Cassandra checks it wherever it builds keys).
//!   Cassandra's fail default is -1 (off); hayate's is 100000, the bound it always kept on the
//!   keys one statement makes it hold in memory. -1 turns it off here too.
//!
//! A count threshold is -1 (off) or a positive number; a warn threshold above its fail
//! threshold is refused, as Cassandra refuses it.

use serde::Deserialize;

use super::ByteSize;

/// A count threshold's value that turns it off, as in Cassandra.
pub const THRESHOLD_DISABLED: i64 = -1;

/// The largest count threshold: Cassandra's are Java ints.
pub const THRESHOLD_MAX: i64 = i32::MAX as i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardrailsConfig {
    #[serde(rename = "batch_size_warn_threshold")]
    pub batch_size_warn_threshold_bytes: ByteSize,
    #[serde(rename = "batch_size_fail_threshold")]
    pub batch_size_fail_threshold_bytes: ByteSize,
    pub partition_keys_in_select_warn_threshold: i64,
    pub partition_keys_in_select_fail_threshold: i64,
    pub in_select_cartesian_product_warn_threshold: i64,
    pub in_select_cartesian_product_fail_threshold: i64,
}

impl GuardrailsConfig {
    /// The defaults, as a constant so that tests and tools can borrow them for any lifetime.
    pub const DEFAULT: GuardrailsConfig = GuardrailsConfig {
        batch_size_warn_threshold_bytes: ByteSize(5 << 10),
        batch_size_fail_threshold_bytes: ByteSize(50 << 10),
        partition_keys_in_select_warn_threshold: THRESHOLD_DISABLED,
        partition_keys_in_select_fail_threshold: THRESHOLD_DISABLED,
        in_select_cartesian_product_warn_threshold: THRESHOLD_DISABLED,
        in_select_cartesian_product_fail_threshold: 100_000,
    };

    pub(super) fn check(&self) -> Option<(&'static str, String, String)> {
        if self.batch_size_warn_threshold_bytes > self.batch_size_fail_threshold_bytes {
            return Some((
                "guardrails.batch_size_warn_threshold",
                self.batch_size_warn_threshold_bytes.to_string(),
                format!(
                    "must not exceed guardrails.batch_size_fail_threshold ({})",
                    self.batch_size_fail_threshold_bytes
                ),
            ));
        }
        let pairs = [
            (
                "guardrails.partition_keys_in_select_warn_threshold",
                "guardrails.partition_keys_in_select_fail_threshold",
                self.partition_keys_in_select_warn_threshold,
                self.partition_keys_in_select_fail_threshold,
            ),
            (
                "guardrails.in_select_cartesian_product_warn_threshold",
                "guardrails.in_select_cartesian_product_fail_threshold",
                self.in_select_cartesian_product_warn_threshold,
                self.in_select_cartesian_product_fail_threshold,
            ),
        ];
        for (warn_key, fail_key, warn, fail) in pairs {
            for (key, value) in [(warn_key, warn), (fail_key, fail)] {
                if value != THRESHOLD_DISABLED && !(1..=THRESHOLD_MAX).contains(&value) {
                    return Some((
                        key,
                        value.to_string(),
                        format!("must be -1 (off) or from 1 to {THRESHOLD_MAX}"),
                    ));
                }
            }
            if warn != THRESHOLD_DISABLED && fail != THRESHOLD_DISABLED && warn > fail {
                return Some((
                    warn_key,
                    warn.to_string(),
                    format!("must not exceed {fail_key} ({fail})"),
                ));
            }
        }
        None
    }
}

impl Default for GuardrailsConfig {
    fn default() -> GuardrailsConfig {
        GuardrailsConfig::DEFAULT
    }
}

/// A count threshold as the checks take it: `None` when off.
pub fn threshold(value: i64) -> Option<u64> {
    u64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_cassandras() {
        let d = GuardrailsConfig::default();
        assert_eq!(d.check(), None);
        assert_eq!(d.batch_size_warn_threshold_bytes, ByteSize(5 * 1024));
        assert_eq!(d.batch_size_fail_threshold_bytes, ByteSize(50 * 1024));
        assert_eq!(threshold(d.partition_keys_in_select_fail_threshold), None);
        assert_eq!(
            threshold(d.in_select_cartesian_product_fail_threshold),
            Some(100_000)
        );
    }

    #[test]
    fn bad_thresholds_are_named() {
        let bad = [
            GuardrailsConfig {
                batch_size_warn_threshold_bytes: ByteSize(64 << 10),
                ..GuardrailsConfig::DEFAULT
            },
            GuardrailsConfig {
                partition_keys_in_select_fail_threshold: 0,
                ..GuardrailsConfig::DEFAULT
            },
            GuardrailsConfig {
                in_select_cartesian_product_warn_threshold: -2,
                ..GuardrailsConfig::DEFAULT
            },
            GuardrailsConfig {
                in_select_cartesian_product_warn_threshold: 30,
                in_select_cartesian_product_fail_threshold: 25,
                ..GuardrailsConfig::DEFAULT
            },
        ];
        let keys: Vec<&str> = bad.iter().map(|c| c.check().expect("refused").0).collect();
        assert_eq!(
            keys,
            [
                "guardrails.batch_size_warn_threshold",
                "guardrails.partition_keys_in_select_fail_threshold",
                "guardrails.in_select_cartesian_product_warn_threshold",
                "guardrails.in_select_cartesian_product_warn_threshold",
            ]
        );
        // A warn threshold with its fail threshold off is fine.
        let warn_only = GuardrailsConfig {
            in_select_cartesian_product_warn_threshold: 30,
            in_select_cartesian_product_fail_threshold: -1,
            ..GuardrailsConfig::DEFAULT
        };
        assert_eq!(warn_only.check(), None);
    }
}
