//! The workload, shared by both engines: YCSB-like records, the three phases, and the latency
//! histograms they fill.
//!
//! A record is key `"user" + FNV-1a(number)` (YCSB's hashed insert order, so loading walks the
//! key space at random) and ten fields of [`FIELD_BYTES`] random bytes. Values are random so
//! that neither engine gains from compression (hayate does not compress; RocksDB is configured
//! without it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

pub const FIELDS: usize = 10;
pub const FIELD_BYTES: usize = 100;
pub const RECORD_VALUE_BYTES: usize = FIELDS * FIELD_BYTES;
/// The longest key: "user" and the 20 digits of `u64::MAX`.
pub const KEY_BYTES_MAX: usize = 4 + 20;
/// The slowest operation a histogram can hold; anything slower is clamped to it.
const LATENCY_MAX_NS: u64 = 60_000_000_000;
/// How often the progress line is printed during a phase.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The three operations of the workload, as each engine implements them.
pub trait Store: Sync {
    /// Writes a new record of [`FIELDS`] fields.
    fn insert(&self, key: &[u8], fields: &[[u8; FIELD_BYTES]; FIELDS]) -> BenchResult<()>;
    /// Reads a whole record; false if it was not found.
    fn read(&self, key: &[u8]) -> BenchResult<bool>;
    /// Replaces one field of an existing record.
    fn update(&self, key: &[u8], field: usize, value: &[u8; FIELD_BYTES]) -> BenchResult<()>;
}

/// SplitMix64: small, fast and good enough to pick keys and fill values.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (the modulo bias is below 2^-40 for the `n` we use).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// Writes record `number`'s key into `buf` and returns its length.
pub fn key_of(number: u64, buf: &mut [u8; KEY_BYTES_MAX]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in number.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    buf[..4].copy_from_slice(b"user");
    let mut digits = [0u8; 20];
    let mut n = h;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[4 + i] = digits[len - 1 - i];
    }
    4 + len
}

/// Microseconds since the Unix epoch, the write timestamp hayate's cells carry.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid histogram bounds")
}

/// What one phase measured.
pub struct PhaseResult {
    pub name: &'static str,
    pub elapsed: Duration,
    /// Latency of every operation, in nanoseconds.
    pub all_ns: Histogram<u64>,
    pub reads_ns: Histogram<u64>,
    pub writes_ns: Histogram<u64>,
    pub not_found: u64,
    /// Key and value bytes the client wrote: the denominator of write amplification.
    pub user_bytes: u64,
}

impl PhaseResult {
    fn new(name: &'static str) -> PhaseResult {
        PhaseResult {
            name,
            elapsed: Duration::ZERO,
            all_ns: new_histogram(),
            reads_ns: new_histogram(),
            writes_ns: new_histogram(),
            not_found: 0,
            user_bytes: 0,
        }
    }

    fn absorb(&mut self, other: PhaseResult) {
        self.all_ns.add(&other.all_ns).expect("same histogram bounds");
        self.reads_ns.add(&other.reads_ns).expect("same histogram bounds");
        self.writes_ns
            .add(&other.writes_ns)
            .expect("same histogram bounds");
        self.not_found += other.not_found;
        self.user_bytes += other.user_bytes;
    }

    pub fn ops(&self) -> u64 {
        self.all_ns.len()
    }

    pub fn ops_per_s(&self) -> f64 {
        self.ops() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Latency percentiles of a histogram in nanoseconds, converted to microseconds.
pub fn percentile_us(h: &Histogram<u64>, pct: f64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.value_at_quantile(pct / 100.0) as f64 / 1000.0
}

fn record_ns(h: &mut Histogram<u64>, started: Instant) -> Instant {
    let now = Instant::now();
    let ns = u64::try_from((now - started).as_nanos()).unwrap_or(u64::MAX);
    h.saturating_record(ns.clamp(1, LATENCY_MAX_NS));
    now
}

/// Prints `ops` done so far every [`PROGRESS_INTERVAL`] until `done` is set.
fn progress(label: &str, ops: &AtomicU64, total: Option<u64>, done: &AtomicBool) {
    let started = Instant::now();
    let mut last = (started, 0u64);
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let now = Instant::now();
        if now - last.0 < PROGRESS_INTERVAL {
            continue;
        }
        let n = ops.load(Ordering::Relaxed);
        let rate = (n - last.1) as f64 / (now - last.0).as_secs_f64();
        let of = total.map_or(String::new(), |t| format!(" of {t}"));
        eprintln!(
            "  {label}: {n}{of} ops after {:.0} s, {rate:.0} ops/s over the last interval",
            (now - started).as_secs_f64()
        );
        last = (now, n);
    }
}

/// Joins a phase's worker threads and stops its progress line.
fn join_workers(
    workers: Vec<std::thread::ScopedJoinHandle<'_, BenchResult<PhaseResult>>>,
    done: &AtomicBool,
) -> Vec<BenchResult<PhaseResult>> {
    let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
    // Stop the progress thread before a worker's panic unwinds, or the scope would wait for it
    // forever.
    done.store(true, Ordering::Relaxed);
    joined
        .into_iter()
        .map(|j| j.expect("benchmark worker panicked"))
        .collect()
}

/// Adds up what a phase's workers measured.
fn sum_phase(
    name: &'static str,
    started: Instant,
    results: Vec<BenchResult<PhaseResult>>,
) -> BenchResult<PhaseResult> {
    let mut total = PhaseResult::new(name);
    total.elapsed = started.elapsed();
    for r in results {
        total.absorb(r?);
    }
    Ok(total)
}

/// Loads records `0..records`, each thread a contiguous share of the numbers (whose keys are
/// scattered over the key space by the hash).
pub fn load(store: &dyn Store, records: u64, threads: usize) -> BenchResult<PhaseResult> {
    let ops = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let results: Vec<BenchResult<PhaseResult>> = std::thread::scope(|s| {
        s.spawn(|| progress("load", &ops, Some(records), &done));
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (ops, first) = (&ops, records * t / threads as u64);
                let end = records * (t + 1) / threads as u64;
                s.spawn(move || -> BenchResult<PhaseResult> {
                    let mut r = PhaseResult::new("load");
                    let mut rng = Rng::new(0x10ad_0000 + t);
                    let mut key = [0u8; KEY_BYTES_MAX];
                    let mut fields = [[0u8; FIELD_BYTES]; FIELDS];
                    for number in first..end {
                        let key_len = key_of(number, &mut key);
                        for f in &mut fields {
                            rng.fill(f);
                        }
                        let op_started = Instant::now();
                        store.insert(&key[..key_len], &fields)?;
                        record_ns(&mut r.all_ns, op_started);
                        r.user_bytes += (key_len + RECORD_VALUE_BYTES) as u64;
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                    r.writes_ns.add(&r.all_ns).expect("same histogram bounds");
                    Ok(r)
                })
            })
            .collect();
        join_workers(workers, &done)
    });
    sum_phase("load", started, results)
}

/// Runs uniformly random operations over `0..records` for `seconds`: reads, and updates of one
/// random field with probability `update_pct` percent.
pub fn run_timed(
    name: &'static str,
    store: &dyn Store,
    records: u64,
    threads: usize,
    seconds: u64,
    update_pct: u64,
) -> BenchResult<PhaseResult> {
    let ops = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let results: Vec<BenchResult<PhaseResult>> = std::thread::scope(|s| {
        s.spawn(|| progress(name, &ops, None, &done));
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let ops = &ops;
                s.spawn(move || -> BenchResult<PhaseResult> {
                    let mut r = PhaseResult::new(name);
                    let mut rng = Rng::new((u64::from(name.as_bytes()[0]) << 32) + t);
                    let mut key = [0u8; KEY_BYTES_MAX];
                    let mut value = [0u8; FIELD_BYTES];
                    let mut now = Instant::now();
                    while now < deadline {
                        let key_len = key_of(rng.below(records), &mut key);
                        let op_started = now;
                        if rng.below(100) < update_pct {
                            let field = rng.below(FIELDS as u64) as usize;
                            rng.fill(&mut value);
                            store.update(&key[..key_len], field, &value)?;
                            now = record_ns(&mut r.writes_ns, op_started);
                            r.user_bytes += (key_len + FIELD_BYTES) as u64;
                        } else {
                            if !store.read(&key[..key_len])? {
                                r.not_found += 1;
                            }
                            now = record_ns(&mut r.reads_ns, op_started);
                        }
                        let ns = u64::try_from((now - op_started).as_nanos()).unwrap_or(u64::MAX);
                        r.all_ns.saturating_record(ns.clamp(1, LATENCY_MAX_NS));
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r)
                })
            })
            .collect();
        join_workers(workers, &done)
    });
    sum_phase(name, started, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ycsb_shaped_and_distinct() {
        let mut a = [0u8; KEY_BYTES_MAX];
        let mut b = [0u8; KEY_BYTES_MAX];
        let la = key_of(1, &mut a);
        let lb = key_of(2, &mut b);
        assert!(a.starts_with(b"user"));
        assert!(a[4..la].iter().all(u8::is_ascii_digit));
        assert_ne!(&a[..la], &b[..lb]);
    }
}
