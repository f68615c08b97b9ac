//! `-target OPS`: YCSB's `ClientThread.throttleNanos`. The target is split evenly over the
//! workers; worker operation `n` is due at `start + n × tick`, where `tick = 1 s × threads /
//! target`. The schedule is absolute, so a worker that falls behind (a slow request, a coarse
//! timer) catches up without sleeping rather than drifting, and the due time is the *intended*
//! start from which coordinated-omission-corrected latencies (`Intended-READ`) are measured.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    tick_ns: u64,
}

impl Schedule {
    /// A worker's schedule, or `None` when there is no target.
    pub fn new(start: Instant, target_ops_per_s: u64, threads: usize) -> Option<Schedule> {
        if target_ops_per_s == 0 {
            return None;
        }
        Some(Schedule {
            start,
            tick_ns: tick_ns(target_ops_per_s, threads),
        })
    }

    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// When operation number `ops_done` (counting from 0) is due.
    pub fn due(&self, ops_done: u64) -> Instant {
        self.start + Duration::from_nanos(ops_done.saturating_mul(self.tick_ns))
    }

    /// YCSB staggers slow workers (at most one operation per millisecond each) by a random part
    /// of a tick so that they do not all fire together.
    pub fn needs_stagger(&self) -> bool {
        self.tick_ns >= 1_000_000
    }
}

/// YCSB: `targetOpsPerMs = target / threads / 1000`, `tick = (long) (1e6 / targetOpsPerMs)`.
pub fn tick_ns(target_ops_per_s: u64, threads: usize) -> u64 {
    let per_thread_per_ms = target_ops_per_s as f64 / threads.max(1) as f64 / 1000.0;
    (1_000_000.0 / per_thread_per_ms) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_split_evenly_over_the_workers() {
        assert_eq!(tick_ns(1000, 4), 4_000_000, "250 ops/s per worker");
        assert_eq!(tick_ns(1000, 1), 1_000_000);
        assert_eq!(tick_ns(3, 1), 333_333_333, "truncated like Java's (long) cast");
        assert_eq!(tick_ns(100_000, 10), 100_000);
    }

    #[test]
    fn due_times_are_absolute() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, 2000, 2).expect("a target");
        assert_eq!(s.due(0), t0);
        assert_eq!(s.due(1), t0 + Duration::from_millis(1));
        assert_eq!(
            s.due(1000),
            t0 + Duration::from_secs(1),
            "1000 ops per worker per second"
        );
        assert!(s.needs_stagger());
        assert!(Schedule::new(t0, 0, 4).is_none());
        assert!(!Schedule::new(t0, 100_000, 1).expect("a target").needs_stagger());
    }
}
