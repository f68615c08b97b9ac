//! Time, behind a trait so that tests can move it (expiry, tombstone grace) without sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> i64;

    fn now_s(&self) -> u32 {
        (self.now_us() / 1_000_000).clamp(0, i64::from(u32::MAX)) as u32
    }
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    }
}

/// A clock that moves only when told to.
pub struct ManualClock {
    now_us: AtomicI64,
}

impl ManualClock {
    pub fn new(now_us: i64) -> ManualClock {
        ManualClock {
            now_us: AtomicI64::new(now_us),
        }
    }

    pub fn advance_s(&self, seconds: u32) {
        self.now_us
            .fetch_add(i64::from(seconds) * 1_000_000, Ordering::SeqCst);
    }

    pub fn set_us(&self, now_us: i64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> i64 {
        self.now_us.load(Ordering::SeqCst)
    }
}
