//! A node's outbound stream rate: `[cluster] stream_throughput`, shared by every stream the node
//! sends (Cassandra's `stream_throughput_outbound`), so that a topology change does not take
//! the device and the network from foreground requests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Spaces chunks out so that, over time, at most `bytes_per_s` bytes leave the node. A chunk is
/// never split: a large one borrows from the time after it, and the next waits for it.
pub struct Throttle {
    /// 0: unthrottled.
    bytes_per_s: AtomicU64,
    /// When the bytes sent so far will have drained at the rate.
    next_free: Mutex<Option<Instant>>,
}

impl Throttle {
    pub fn new(bytes_per_s: u64) -> Throttle {
        Throttle {
            bytes_per_s: AtomicU64::new(bytes_per_s),
            next_free: Mutex::new(None),
        }
    }

    pub fn set_rate(&self, bytes_per_s: u64) {
        self.bytes_per_s.store(bytes_per_s, Ordering::Relaxed);
    }

    pub fn rate(&self) -> u64 {
        self.bytes_per_s.load(Ordering::Relaxed)
    }

    /// Waits until `bytes` more may leave, and counts them.
    pub async fn acquire(&self, bytes: u64) {
        let rate = self.rate();
        if rate == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let start = {
            let mut next = self.next_free.lock().expect("throttle lock poisoned");
            let now = Instant::now();
            // Idle time is not saved up: a burst after a pause still goes at the rate.
            let start = next.filter(|t| *t > now).unwrap_or(now);
            *next = Some(start + cost);
            start
        };
        tokio::time::sleep_until(start).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn chunks_leave_at_the_rate() {
        let throttle = Throttle::new(1 << 20);
        let started = Instant::now();
        for _ in 0..5 {
            throttle.acquire(1 << 20).await;
        }
        // The first MiB goes at once, each next one a second later.
        assert_eq!(started.elapsed(), Duration::from_secs(4));
        throttle.set_rate(0);
        let before = Instant::now();
        throttle.acquire(100 << 20).await;
        assert_eq!(before.elapsed(), Duration::ZERO);
    }
}
