//! Recent replica read latencies, for speculative retry's "after the 99th percentile".
//!
//! Latencies go into exponential buckets (each 1.25 times the one before, from 16 µs); every
//! [`SAMPLES_PER_HALVING`] samples the counts are halved, so the percentile follows the last
//! few thousand reads rather than the node's whole life.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BUCKETS: usize = 64;
const FIRST_BUCKET_US: f64 = 16.0;
const GROWTH: f64 = 1.25;
const SAMPLES_PER_HALVING: u64 = 4096;
/// Until this many samples are in, there is no percentile: speculation waits for the timeout's
/// worth of experience rather than guessing.
const SAMPLES_MIN: u64 = 100;

pub struct LatencyTracker {
    buckets: [AtomicU64; BUCKETS],
    samples: AtomicU64,
}

impl Default for LatencyTracker {
    fn default() -> LatencyTracker {
        LatencyTracker {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            samples: AtomicU64::new(0),
        }
    }
}

fn bucket_of(us: f64) -> usize {
    if us <= FIRST_BUCKET_US {
        return 0;
    }
    ((us / FIRST_BUCKET_US).ln() / GROWTH.ln())
        .ceil()
        .min((BUCKETS - 1) as f64) as usize
}

fn upper_us(bucket: usize) -> f64 {
    FIRST_BUCKET_US * GROWTH.powi(bucket as i32)
}

impl LatencyTracker {
    pub fn record(&self, latency: Duration) {
        let b = bucket_of(latency.as_secs_f64() * 1e6);
        self.buckets[b].fetch_add(1, Ordering::Relaxed);
        let n = self.samples.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(SAMPLES_PER_HALVING) {
            for b in &self.buckets {
                let v = b.load(Ordering::Relaxed);
                b.store(v / 2, Ordering::Relaxed);
            }
        }
    }

    /// The latency under which `p` percent of recent reads answered, if enough were seen.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        if self.samples.load(Ordering::Relaxed) < SAMPLES_MIN {
            return None;
        }
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((p / 100.0) * total as f64).ceil() as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(Duration::from_micros(upper_us(i) as u64));
            }
        }
        Some(Duration::from_micros(upper_us(BUCKETS - 1) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_is_an_upper_bound_within_a_bucket() {
        let t = LatencyTracker::default();
        assert_eq!(t.percentile(99.0), None);
        for i in 0..1000u64 {
            t.record(Duration::from_micros(if i % 100 == 0 { 5000 } else { 200 }));
        }
        let p50 = t.percentile(50.0).expect("enough samples");
        assert!(
            p50 >= Duration::from_micros(200) && p50 < Duration::from_micros(250),
            "{p50:?}"
        );
        let p999 = t.percentile(99.9).expect("enough samples");
        assert!(
            p999 >= Duration::from_micros(5000) && p999 < Duration::from_micros(6250),
            "{p999:?}"
        );
    }
}
