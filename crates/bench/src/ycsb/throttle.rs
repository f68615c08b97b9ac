//! `-target OPS`: YCSB's `ClientThread.throttleNanos`. The target is split evenly over the
//! workers; worker operation `n` is due at `start + offset + n × tick`, where `tick = 1 s ×
//! threads / target`. The schedule is absolute, so a worker that falls behind (a slow request)
//! catches up without sleeping rather than drifting, and the due time is the *intended* start
//! from which coordinated-omission-corrected latencies (`Intended-READ`) are measured.
//!
//! Two things keep the workers from sending in bursts, which would distort the latencies measured
//! at a fixed throughput:
//!
//! - Each worker's schedule is shifted by its own part of a tick (`offset`), so that together the
//!   workers send one operation every `1 s / target`, not all of them at once every tick.
//! - The [`Pacer`], one thread, wakes each worker at its due time with the precision of the
//!   kernel's timer (tens of microseconds) rather than tokio's, which has 1 ms resolution: with
//!   tokio's timer alone, workers due within the same millisecond all wake together.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// One worker's due times.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    offset_ns: u64,
    tick_ns: u64,
}

impl Schedule {
    /// The schedule of worker `worker` of `threads`, or `None` when there is no target.
    ///
    /// The offset, `tick × worker / threads`, spreads the workers evenly over a tick. YCSB seeks
    /// the same with a random delay (below one tick) before each worker starts, and only when a
    /// tick is at least 1 ms; an even spread needs no luck, and with the [`Pacer`] it also holds
    /// for shorter ticks.
    pub fn new(start: Instant, target_ops_per_s: u64, threads: usize, worker: usize) -> Option<Schedule> {
        if target_ops_per_s == 0 {
            return None;
        }
        let tick_ns = tick_ns(target_ops_per_s, threads);
        let offset_ns = u128::from(tick_ns) * worker as u128 / threads.max(1) as u128;
        Some(Schedule {
            start,
            offset_ns: offset_ns as u64,
            tick_ns,
        })
    }

    /// When operation number `n` (counting from 0) is due.
    pub fn due(&self, n: u64) -> Instant {
        let since_start = n.saturating_mul(self.tick_ns).saturating_add(self.offset_ns);
        self.start + Duration::from_nanos(since_start)
    }
}

/// YCSB: `targetOpsPerMs = target / threads / 1000`, `tick = (long) (1e6 / targetOpsPerMs)`.
pub fn tick_ns(target_ops_per_s: u64, threads: usize) -> u64 {
    let per_thread_per_ms = target_ops_per_s as f64 / threads.max(1) as f64 / 1000.0;
    (1_000_000.0 / per_thread_per_ms) as u64
}

/// What the pacer thread and the workers share.
struct Wakers {
    /// One per worker; `notify_one` keeps a permit when the worker is not waiting (it is busy
    /// with a request), so a wake-up is never lost.
    workers: Vec<Notify>,
    shutdown: AtomicBool,
}

/// A thread that sleeps to each due time of all the workers in turn and wakes the worker it
/// belongs to. Operation `k` of the phase as a whole is due about `k / target` s after the start
/// and belongs to worker `k mod threads` (its operation `k / threads`), so one sleeping thread
/// serves every worker, whatever their number, at one wake-up per operation (at most one per
/// [`MIN_WAKE_INTERVAL`]).
///
/// Tokio's timer cannot do this: it rounds deadlines up to whole milliseconds. A thread's sleep
/// ends when the kernel's timer fires, late by the timer slack (50 µs by default; the pacer sets
/// its own to 1 µs) and the scheduling delay. Measured on the 2-core development machine (shared,
/// release build, operations that do nothing, one runtime thread) with 16 workers: at 5,000
/// ops/s operations were sent 28 µs after their due time at the median and 36 µs at the 99th
/// percentile; at 20,000 ops/s, where [`MIN_WAKE_INTERVAL`] pairs them, 85 µs and 0.2 ms at the
/// 90th (stalls of the busy machine make the tail).
pub struct Pacer {
    wakers: Arc<Wakers>,
    schedules: Arc<[Schedule]>,
    thread: Option<JoinHandle<()>>,
}

impl Pacer {
    /// Starts the pacer of a phase, or returns `None` when there is no target.
    pub fn start(start: Instant, target_ops_per_s: u64, threads: usize) -> Option<Pacer> {
        let schedules: Arc<[Schedule]> = (0..threads)
            .map(|worker| Schedule::new(start, target_ops_per_s, threads, worker))
            .collect::<Option<_>>()?;
        let wakers = Arc::new(Wakers {
            workers: (0..threads).map(|_| Notify::new()).collect(),
            shutdown: AtomicBool::new(false),
        });
        // With a zero tick (a target above a billion per worker) everything is due at the start:
        // workers never wait, and a pacer would only spin.
        let thread = (schedules.first().is_some_and(|s| s.tick_ns > 0)).then(|| {
            let wakers = Arc::clone(&wakers);
            let schedules = Arc::clone(&schedules);
            std::thread::Builder::new()
                .name("hayate-bench-pacer".to_string())
                .spawn(move || pace(&wakers, &schedules))
                .expect("the pacer thread starts")
        });
        Some(Pacer {
            wakers,
            schedules,
            thread,
        })
    }

    /// What worker `worker` waits on.
    pub fn throttle(&self, worker: usize) -> Throttle {
        Throttle {
            schedule: self.schedules[worker],
            wakers: Arc::clone(&self.wakers),
            worker,
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        self.wakers.shutdown.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // The pacer only sleeps and notifies; it cannot fail, but if it did, say so.
            if thread.join().is_err() {
                eprintln!("hayate-bench: the pacer thread panicked");
            }
        }
    }
}

/// The pacer wakes up at most this often. Each wake-up of a thread costs CPU (13 to 17 µs on the
/// 2-core development machine, a VM), so one per operation would take a whole core at 80,000
/// ops/s, on a machine often shared with the server under test. Above 10,000 ops/s the pacer
/// therefore wakes every 100 µs and wakes together the workers whose operations fell due
/// meanwhile: at most `target / 10,000` operations are sent at once, and none more than 100 µs
/// late (on top of the wake-up's own delay), a tenth of tokio's resolution.
const MIN_WAKE_INTERVAL: Duration = Duration::from_micros(100);

/// The pacer thread: wakes each worker at each of its due times, in the order they fall due.
fn pace(wakers: &Wakers, schedules: &[Schedule]) {
    set_timer_slack();
    let threads = schedules.len() as u64;
    let mut k: u64 = 0;
    let mut earliest_wake = Instant::now();
    while !wakers.shutdown.load(Ordering::Acquire) {
        let worker = (k % threads) as usize;
        let due = schedules[worker].due(k / threads);
        let now = Instant::now();
        if now >= due {
            wakers.workers[worker].notify_one();
            k += 1;
            earliest_wake = now + MIN_WAKE_INTERVAL;
        } else {
            // Parked rather than asleep so that the end of the phase need not wait a whole
            // (possibly long) interval; an early return is checked again above.
            std::thread::park_timeout(due.max(earliest_wake) - now);
        }
    }
}

/// Linux lets a thread's timed sleeps end up to its timer slack (50 µs by default) late, to
/// batch wake-ups; the pacer's wake-ups are the whole point of it, so it asks for 1 µs.
fn set_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        const SLACK_NS: libc::c_ulong = 1_000;
        // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's timer slack;
        // no memory is passed.
        let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, SLACK_NS) };
        // Not fatal: the default slack only makes the pacer somewhat less precise.
        if rc != 0 {
            eprintln!(
                "hayate-bench: the pacer's timer slack stays the default: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// One worker's side of the pacer.
pub struct Throttle {
    schedule: Schedule,
    wakers: Arc<Wakers>,
    worker: usize,
}

impl Throttle {
    /// Waits until this worker's operation `n` is due and returns its due time, the intended
    /// start. A worker that is behind does not wait at all. Never returns early: a wake-up meant
    /// for an earlier operation, kept while the worker was busy, costs one more look at the clock.
    pub async fn until_due(&self, n: u64) -> Instant {
        let due = self.schedule.due(n);
        if Instant::now() >= due {
            return due;
        }
        // A backstop in case the pacer thread gets no CPU in time: tokio's timer, no worse than
        // waking with it alone. It never fires early.
        let backstop = tokio::time::sleep_until(due.into());
        tokio::pin!(backstop);
        let wake = &self.wakers.workers[self.worker];
        while Instant::now() < due {
            tokio::select! {
                () = wake.notified() => {}
                () = &mut backstop => {}
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Polls a future once, without a runtime's waker.
    fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
        pin!(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_target_is_split_evenly_over_the_workers() {
        assert_eq!(tick_ns(1000, 4), 4_000_000, "250 ops/s per worker");
        assert_eq!(tick_ns(1000, 1), 1_000_000);
        assert_eq!(tick_ns(3, 1), 333_333_333, "truncated like Java's (long) cast");
        assert_eq!(tick_ns(100_000, 10), 100_000);
    }

    #[test]
    fn the_workers_offsets_spread_evenly_over_a_tick() {
        let t0 = Instant::now();
        // 4 workers at 2000 ops/s: a tick of 2 ms per worker, an operation every 0.5 ms overall.
        let offsets: Vec<Duration> = (0..4)
            .map(|w| Schedule::new(t0, 2000, 4, w).expect("a target").due(0) - t0)
            .collect();
        let us = Duration::from_micros;
        assert_eq!(offsets, [us(0), us(500), us(1000), us(1500)]);
        // The same holds for a tick below tokio's 1 ms: 30,000 ops/s over 16 workers.
        let s = |w| Schedule::new(t0, 30_000, 16, w).expect("a target");
        assert_eq!(s(0).due(1) - s(0).due(0), Duration::from_nanos(533_333));
        assert_eq!(s(1).due(0) - t0, Duration::from_nanos(33_333));
        assert_eq!(s(15).due(0) - t0, Duration::from_nanos(499_999));
        assert!(s(15).due(0) < s(0).due(1), "the workers' turns interleave");
        assert!(Schedule::new(t0, 0, 4, 0).is_none());
    }

    #[test]
    fn due_times_are_absolute_so_a_late_worker_catches_up_without_waiting() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, 2000, 2, 1).expect("a target");
        assert_eq!(s.due(0), t0 + Duration::from_micros(500));
        assert_eq!(s.due(1), t0 + Duration::from_micros(1500));
        assert_eq!(s.due(1000), t0 + Duration::from_micros(1_000_500));

        // A phase that started 100 ms ago: operations 0 to 99 of each worker are overdue and
        // are all returned at once, each with its own due time as the intended start.
        let pacer = Pacer::start(t0 - Duration::from_millis(100), 2000, 2).expect("a target");
        let throttle = pacer.throttle(1);
        for n in 0..100 {
            assert_eq!(
                poll_once(throttle.until_due(n)),
                Poll::Ready(throttle.schedule.due(n)),
                "operation {n} is overdue"
            );
        }
    }

    #[tokio::test]
    async fn a_stale_wake_up_never_sends_early() {
        let pacer = Pacer::start(Instant::now() + Duration::from_secs(3600), 1000, 2).expect("a target");
        let throttle = pacer.throttle(0);
        // A permit kept from an earlier operation, as when the worker was busy at its due time.
        pacer.wakers.workers[0].notify_one();
        let mut wait = pin!(throttle.until_due(0));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "due in an hour");
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "still due in an hour");
    }

    /// The real schedule and pacer, with an operation that does nothing: the send times of
    /// 4 workers at 4000 ops/s for half a second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_workers_together_send_evenly_below_a_millisecond() {
        const WORKERS: usize = 4;
        const TARGET: u64 = 4000;
        const OPS_EACH: u64 = 500;
        let start = Instant::now();
        let pacer = Pacer::start(start, TARGET, WORKERS).expect("a target");
        let tasks: Vec<_> = (0..WORKERS)
            .map(|w| {
                let throttle = pacer.throttle(w);
                tokio::spawn(async move {
                    let mut sent = Vec::with_capacity(OPS_EACH as usize);
                    for n in 0..OPS_EACH {
                        let due = throttle.until_due(n).await;
                        sent.push((due, Instant::now()));
                    }
                    sent
                })
            })
            .collect();
        let mut sent = Vec::new();
        for t in tasks {
            sent.extend(t.await.expect("a worker finishes"));
        }
        drop(pacer);
        assert_eq!(sent.len(), WORKERS * OPS_EACH as usize);
        assert!(
            sent.iter().all(|(due, at)| at >= due),
            "nothing is sent before it is due"
        );

        // One operation is due every 250 µs; count the sends in each 250 µs from the start. Had
        // the workers sent together (a common schedule, or offsets with tokio's 1 ms timer), each
        // send would share its bucket with the 3 others, and every bucket holding any would hold
        // 4 (a 1 ms bucket holds 4 sends either way at this rate). Spread, most are alone. A
        // loaded machine delays some wake-ups, and a worker that is late catches up at once:
        // with both cores busy besides this test, up to 16% of the sends were crowded (and the
        // largest bucket 26), so the bound is at half, still far from all of them.
        let bucket_ns = 1_000_000_000 / TARGET as u128;
        let mut buckets = std::collections::HashMap::<u128, usize>::new();
        for (_, at) in &sent {
            *buckets.entry((*at - start).as_nanos() / bucket_ns).or_default() += 1;
        }
        let crowded: usize = buckets.values().filter(|&&n| n >= 3).sum();
        let largest = buckets.values().copied().max().unwrap_or(0);
        assert!(
            crowded * 2 < sent.len(),
            "{crowded} of {} sends shared a 250 µs bucket with 2 or more others (largest {largest})",
            sent.len()
        );
    }
}
