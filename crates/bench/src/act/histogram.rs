//! ACT's latency histogram: power-of-two buckets, cumulative over the whole run.
//!
//! Bucket 0 holds latencies under one unit (a millisecond, or a microsecond with
//! `microsecond-histograms`), bucket `b` holds `[2^(b-1), 2^b)` units. "Slower than 2^k units"
//! is then everything beyond bucket `k`, which is exactly how ACT's `act_latency.py` reads the
//! percentages for its 1, 2, 4, 8… columns.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// One bucket for zero and one per bit of a `u64`.
pub const BUCKET_COUNT: usize = 65;
/// The thresholds of the final table: 1, 2, 4 … 64 units, as `act_latency.py` shows by default.
pub const THRESHOLD_COUNT: usize = 7;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Milliseconds,
    Microseconds,
}

impl Scale {
    pub fn nanos_per_unit(self) -> u64 {
        match self {
            Scale::Milliseconds => 1_000_000,
            Scale::Microseconds => 1_000,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Scale::Milliseconds => "ms",
            Scale::Microseconds => "us",
        }
    }
}

/// Counters shared by the threads that record into them; recording is one relaxed add.
pub struct Histogram {
    scale: Scale,
    counts: [AtomicU64; BUCKET_COUNT],
}

impl Histogram {
    pub fn new(scale: Scale) -> Histogram {
        Histogram {
            scale,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub fn record(&self, latency_ns: u64) {
        let bucket = bucket_of(latency_ns / self.scale.nanos_per_unit());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: std::array::from_fn(|b| self.counts[b].load(Ordering::Relaxed)),
        }
    }
}

/// The bucket of a latency in whole units: 0 for 0, otherwise the position of its highest bit.
pub fn bucket_of(units: u64) -> usize {
    (u64::BITS - units.leading_zeros()) as usize
}

/// Counts at one moment; the difference of two snapshots is the histogram of the time between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub counts: [u64; BUCKET_COUNT],
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            counts: [0; BUCKET_COUNT],
        }
    }
}

impl Snapshot {
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `self - earlier`: the operations recorded after `earlier` was taken.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            counts: std::array::from_fn(|b| {
                assert!(self.counts[b] >= earlier.counts[b], "snapshots are cumulative");
                self.counts[b] - earlier.counts[b]
            }),
        }
    }

    /// The percentage of operations that took `2^threshold` units or longer.
    pub fn percent_over(&self, threshold: usize) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        let within: u64 = self.counts[..=threshold].iter().sum();
        (total - within) as f64 * 100.0 / total as f64
    }

    pub fn percents_over(&self) -> [f64; THRESHOLD_COUNT] {
        std::array::from_fn(|t| self.percent_over(t))
    }

    /// ACT's dump of a histogram, kept to its layout so that `act_latency.py` can read it: the
    /// total, then the non-empty buckets four to a line.
    pub fn dump(&self, tag: &str) -> String {
        let mut out = format!("{tag} ({} total)\n", self.total());
        let mut column = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let _ = write!(out, " ({bucket:02}: {count:010})");
            column += 1;
            if column % 4 == 0 {
                out.push('\n');
            }
        }
        if column % 4 != 0 {
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(2), 2);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(4), 3);
        assert_eq!(bucket_of(7), 3);
        assert_eq!(bucket_of(8), 4);
        assert_eq!(bucket_of(u64::MAX), 64);
    }

    #[test]
    fn percentages_count_everything_at_or_beyond_the_threshold() {
        let histogram = Histogram::new(Scale::Milliseconds);
        // 90 fast reads, 6 between 1 and 2 ms, 3 between 8 and 16 ms, 1 of 100 ms.
        for _ in 0..90 {
            histogram.record(200_000);
        }
        for _ in 0..6 {
            histogram.record(1_500_000);
        }
        for _ in 0..3 {
            histogram.record(9_000_000);
        }
        histogram.record(100_000_000);
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.total(), 100);
        let over = snapshot.percents_over();
        assert_eq!(over, [10.0, 4.0, 4.0, 4.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn a_difference_of_snapshots_is_the_interval_between() {
        let histogram = Histogram::new(Scale::Microseconds);
        histogram.record(500);
        let first = histogram.snapshot();
        histogram.record(5_000);
        histogram.record(5_000);
        let interval = histogram.snapshot().since(&first);
        assert_eq!(interval.total(), 2);
        assert_eq!(interval.counts[3], 2);
        assert_eq!(Snapshot::default().percent_over(0), 0.0);
    }

    #[test]
    fn the_dump_has_acts_layout() {
        let histogram = Histogram::new(Scale::Milliseconds);
        for ns in [0, 1_000_000, 2_000_000, 4_000_000, 8_000_000] {
            histogram.record(ns);
        }
        assert_eq!(
            histogram.snapshot().dump("reads"),
            "reads (5 total)\n (00: 0000000001) (01: 0000000001) (02: 0000000001) \
             (03: 0000000001)\n (04: 0000000001)\n"
        );
    }
}
