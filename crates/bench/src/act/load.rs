//! The load: service threads doing small reads (and, with `commit-to-device`, small writes), and
//! per device one thread of large-block reads and one of large-block writes, each on a fixed
//! schedule.
//!
//! Every request has an intended start time on its thread's schedule, and its latency is counted
//! from that time, not from when the thread got round to it. A device that stalls therefore shows
//! up as latency of the requests queued behind the stall, instead of quietly lowering the rate
//! (the "coordinated omission" a closed loop suffers). ACT measures from issue and stops the test
//! when a thread falls `max-lag-sec` behind; we do both the stop and the from-intended count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::config::{Config, Derived};
use super::device::{AlignedBuf, Device};
use super::histogram::{Histogram, Scale, Snapshot};

/// Sleeps are cut into slices this long so that threads notice the end of the test quickly.
const SLEEP_SLICE_MAX: Duration = Duration::from_millis(50);

/// A latency recorded at both scales: the one the config asks to show, and milliseconds, which
/// the pass/fail criteria are written in.
pub struct Twin {
    pub ms: Histogram,
    pub us: Histogram,
}

impl Twin {
    fn new() -> Twin {
        Twin {
            ms: Histogram::new(Scale::Milliseconds),
            us: Histogram::new(Scale::Microseconds),
        }
    }

    fn record(&self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.ms.record(ns);
        self.us.record(ns);
    }

    pub fn snapshot(&self) -> TwinSnapshot {
        TwinSnapshot {
            ms: self.ms.snapshot(),
            us: self.us.snapshot(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TwinSnapshot {
    pub ms: Snapshot,
    pub us: Snapshot,
}

impl TwinSnapshot {
    pub fn since(&self, earlier: &TwinSnapshot) -> TwinSnapshot {
        TwinSnapshot {
            ms: self.ms.since(&earlier.ms),
            us: self.us.since(&earlier.us),
        }
    }

    pub fn at(&self, scale: Scale) -> &Snapshot {
        match scale {
            Scale::Milliseconds => &self.ms,
            Scale::Microseconds => &self.us,
        }
    }
}

/// Which histograms a test has, with ACT's names for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Reads,
    LargeBlockReads,
    LargeBlockWrites,
    Writes,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Reads => "reads",
            Kind::LargeBlockReads => "large-block-reads",
            Kind::LargeBlockWrites => "large-block-writes",
            Kind::Writes => "writes",
        }
    }

    /// ACT's criteria are about transactions: client reads, and client writes when each is
    /// committed to the device. Large-block operations are shown but not judged.
    pub fn judged(self) -> bool {
        matches!(self, Kind::Reads | Kind::Writes)
    }
}

pub struct Recorders {
    pub reads: Twin,
    pub device_reads: Vec<Twin>,
    pub writes: Twin,
    pub device_writes: Vec<Twin>,
    pub large_block_reads: Twin,
    pub large_block_writes: Twin,
}

impl Recorders {
    pub fn of(&self, kind: Kind) -> &Twin {
        match kind {
            Kind::Reads => &self.reads,
            Kind::LargeBlockReads => &self.large_block_reads,
            Kind::LargeBlockWrites => &self.large_block_writes,
            Kind::Writes => &self.writes,
        }
    }
}

/// Why a test stopped before its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A schedule fell more than `max-lag-sec` behind: the device (or this machine) cannot
    /// sustain the configured load.
    Lag {
        who: &'static str,
        behind_ms: u64,
    },
    Io {
        detail: String,
    },
}

pub struct Run {
    pub start: Instant,
    pub end: Instant,
    running: AtomicBool,
    failure: Mutex<Option<Failure>>,
    pub recorders: Recorders,
}

impl Run {
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.running.store(false, Ordering::Relaxed);
    }

    fn fail(&self, failure: Failure) {
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(failure);
        }
        self.stop();
    }

    pub fn failure(&self) -> Option<Failure> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sleeps until `at`, or returns false when the test ends first.
    fn wait_until(&self, at: Instant) -> bool {
        loop {
            if !self.running() {
                return false;
            }
            let now = Instant::now();
            if now >= at {
                return true;
            }
            std::thread::sleep((at - now).min(SLEEP_SLICE_MAX));
        }
    }
}

/// Request `k` of a schedule is due at `first + k × period`.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    first: Instant,
    period_s: f64,
    count: u64,
}

impl Pacer {
    pub fn new(first: Instant, per_sec: f64) -> Pacer {
        assert!(per_sec > 0.0, "a pacer needs a rate");
        Pacer {
            first,
            period_s: 1.0 / per_sec,
            count: 0,
        }
    }

    pub fn next_due(&mut self) -> Instant {
        let due = self.first + Duration::from_secs_f64(self.period_s * self.count as f64);
        self.count += 1;
        due
    }
}

/// Where reads and writes land on one device, derived as ACT derives them: sizes in units of
/// the device's smallest direct I/O, offsets anywhere such that the largest request fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    pub min_op_bytes: u32,
    pub record_bytes: u32,
    pub record_sizes: u32,
    pub record_offsets: u64,
    pub large_block_bytes: u32,
    pub large_blocks: u64,
}

impl Pattern {
    pub fn new(size_bytes: u64, min_op_bytes: u32, derived: &Derived, large_block_bytes: u32) -> Pattern {
        let large_blocks = size_bytes / u64::from(large_block_bytes);
        let min_op_blocks = large_blocks * u64::from(large_block_bytes) / u64::from(min_op_bytes);
        let record_blocks = derived.record_stored_bytes.div_ceil(min_op_bytes);
        let record_blocks_max = derived.record_stored_bytes_max.div_ceil(min_op_bytes);
        assert!(
            min_op_blocks >= u64::from(record_blocks_max),
            "a device holds at least one large block, and records fit in one"
        );
        Pattern {
            min_op_bytes,
            record_bytes: record_blocks * min_op_bytes,
            record_sizes: record_blocks_max - record_blocks + 1,
            record_offsets: min_op_blocks - u64::from(record_blocks_max) + 1,
            large_block_bytes,
            large_blocks,
        }
    }

    pub fn record_io(&self, rng: &mut SmallRng) -> (u64, usize) {
        let offset = rng.random_range(0..self.record_offsets) * u64::from(self.min_op_bytes);
        let extra = rng.random_range(0..self.record_sizes) * self.min_op_bytes;
        (offset, (self.record_bytes + extra) as usize)
    }

    pub fn record_bytes_max(&self) -> usize {
        ((self.record_bytes) + (self.record_sizes - 1) * self.min_op_bytes) as usize
    }

    pub fn large_block_offset(&self, rng: &mut SmallRng) -> u64 {
        rng.random_range(0..self.large_blocks) * u64::from(self.large_block_bytes)
    }
}

/// Fills a buffer the way ACT salts its writes: `compress_pct` percent random, the rest zeros,
/// so a compressing device sees the configured ratio.
fn salt(buf: &mut [u8], compress_pct: u32, rng: &mut SmallRng) {
    let random_len = buf.len() * compress_pct as usize / 100;
    rng.fill(&mut buf[..random_len]);
    buf[random_len..].fill(0);
}

pub struct Target {
    pub device: Arc<dyn Device>,
    pub pattern: Pattern,
}

pub struct Plan {
    pub service_threads: u32,
    pub derived: Derived,
    pub compress_pct: u32,
    pub tomb_raider: bool,
    pub tomb_raider_sleep: Duration,
    pub max_lag: Option<Duration>,
    pub duration: Duration,
    pub seed: u64,
}

impl Plan {
    pub fn new(config: &Config, service_threads: u32, duration: Duration, seed: u64) -> Plan {
        Plan {
            service_threads,
            derived: config.derive(),
            compress_pct: config.compress_pct,
            tomb_raider: config.tomb_raider,
            tomb_raider_sleep: Duration::from_micros(u64::from(config.tomb_raider_sleep_us)),
            max_lag: (config.max_lag_sec != 0).then(|| Duration::from_secs(config.max_lag_sec)),
            duration,
            seed,
        }
    }

    /// The histograms this test fills, in ACT's order.
    pub fn kinds(&self) -> Vec<Kind> {
        let mut kinds = Vec::new();
        if self.derived.internal_read_reqs_per_sec > 0 {
            kinds.push(Kind::Reads);
        }
        if self.derived.large_block_reads_per_sec > 0.0 {
            kinds.push(Kind::LargeBlockReads);
        }
        if self.derived.large_block_writes_per_sec > 0.0 {
            kinds.push(Kind::LargeBlockWrites);
        }
        if self.derived.internal_write_reqs_per_sec > 0 {
            kinds.push(Kind::Writes);
        }
        kinds
    }
}

/// Starts every load thread and returns at once; the threads stop at `run.end` or on `stop()`.
pub fn start(plan: &Plan, targets: Vec<Target>) -> (Arc<Run>, Vec<std::thread::JoinHandle<()>>) {
    let start = Instant::now();
    let run = Arc::new(Run {
        start,
        end: start + plan.duration,
        running: AtomicBool::new(true),
        failure: Mutex::new(None),
        recorders: Recorders {
            reads: Twin::new(),
            device_reads: targets.iter().map(|_| Twin::new()).collect(),
            writes: Twin::new(),
            device_writes: targets.iter().map(|_| Twin::new()).collect(),
            large_block_reads: Twin::new(),
            large_block_writes: Twin::new(),
        },
    });
    let targets = Arc::new(targets);
    let mut handles = Vec::new();
    let device_count = targets.len() as f64;

    let reads = f64::from(plan.derived.internal_read_reqs_per_sec);
    let writes = f64::from(plan.derived.internal_write_reqs_per_sec);
    let total = reads + writes;
    if total > 0.0 {
        let threads = plan.service_threads.max(1);
        for index in 0..threads {
            let run = Arc::clone(&run);
            let targets = Arc::clone(&targets);
            // Staggered so that the threads' requests interleave evenly instead of in bursts.
            let first = start + Duration::from_secs_f64(f64::from(index) / total);
            let pacer = Pacer::new(first, total / f64::from(threads));
            let read_share = reads / total;
            let rng = SmallRng::seed_from_u64(plan.seed ^ u64::from(index));
            let compress_pct = plan.compress_pct;
            let max_lag = plan.max_lag;
            handles.push(std::thread::spawn(move || {
                service(&run, &targets, pacer, read_share, compress_pct, max_lag, rng)
            }));
        }
    }
    for (index, _) in targets.iter().enumerate() {
        for (per_sec, write) in [
            (plan.derived.large_block_reads_per_sec, false),
            (plan.derived.large_block_writes_per_sec, true),
        ] {
            if per_sec <= 0.0 {
                continue;
            }
            let run = Arc::clone(&run);
            let targets = Arc::clone(&targets);
            let pacer = Pacer::new(start, per_sec / device_count);
            let rng = SmallRng::seed_from_u64(plan.seed ^ (0x1000 + index as u64 * 2 + write as u64));
            let compress_pct = plan.compress_pct;
            let max_lag = plan.max_lag;
            handles.push(std::thread::spawn(move || {
                large_blocks(&run, &targets[index], write, pacer, compress_pct, max_lag, rng)
            }));
        }
        if plan.tomb_raider {
            let run = Arc::clone(&run);
            let targets = Arc::clone(&targets);
            let sleep = plan.tomb_raider_sleep;
            handles.push(std::thread::spawn(move || {
                tomb_raider(&run, &targets[index], sleep)
            }));
        }
    }
    (run, handles)
}

/// Waits for the next due time; false when the test is over. Fails the test when the schedule
/// has fallen more than `max_lag` behind.
fn pace(run: &Run, pacer: &mut Pacer, who: &'static str, max_lag: Option<Duration>) -> Option<Instant> {
    let due = pacer.next_due();
    if due >= run.end || !run.wait_until(due) {
        return None;
    }
    let behind = Instant::now().saturating_duration_since(due);
    if let Some(max_lag) = max_lag {
        if behind > max_lag {
            run.fail(Failure::Lag {
                who,
                behind_ms: behind.as_millis() as u64,
            });
            return None;
        }
    }
    Some(due)
}

fn service(
    run: &Run,
    targets: &[Target],
    mut pacer: Pacer,
    read_share: f64,
    compress_pct: u32,
    max_lag: Option<Duration>,
    mut rng: SmallRng,
) {
    let buf_bytes = targets
        .iter()
        .map(|t| t.pattern.record_bytes_max())
        .max()
        .unwrap_or(0);
    let mut buf = AlignedBuf::new(buf_bytes);
    while let Some(due) = pace(run, &mut pacer, "service threads", max_lag) {
        let index = rng.random_range(0..targets.len());
        let target = &targets[index];
        let (offset, len) = target.pattern.record_io(&mut rng);
        let result = if rng.random::<f64>() < read_share {
            target
                .device
                .read_at(buf.as_mut_slice(len), offset)
                .map(|()| (&run.recorders.reads, &run.recorders.device_reads[index]))
        } else {
            salt(buf.as_mut_slice(len), compress_pct, &mut rng);
            target
                .device
                .write_at(buf.as_slice(len), offset)
                .map(|()| (&run.recorders.writes, &run.recorders.device_writes[index]))
        };
        match result {
            Ok((all, device)) => {
                let latency = due.elapsed();
                all.record(latency);
                device.record(latency);
            }
            Err(error) => {
                run.fail(io_failure(target, "record I/O", offset, len, &error));
                return;
            }
        }
    }
}

fn large_blocks(
    run: &Run,
    target: &Target,
    write: bool,
    mut pacer: Pacer,
    compress_pct: u32,
    max_lag: Option<Duration>,
    mut rng: SmallRng,
) {
    let len = target.pattern.large_block_bytes as usize;
    let mut buf = AlignedBuf::new(len);
    let (who, recorder) = if write {
        ("large-block writes", &run.recorders.large_block_writes)
    } else {
        ("large-block reads", &run.recorders.large_block_reads)
    };
    while let Some(due) = pace(run, &mut pacer, who, max_lag) {
        let offset = target.pattern.large_block_offset(&mut rng);
        let result = if write {
            // Salted each time, as a new write block would be.
            salt(buf.as_mut_slice(len), compress_pct, &mut rng);
            target.device.write_at(buf.as_slice(len), offset)
        } else {
            target.device.read_at(buf.as_mut_slice(len), offset)
        };
        match result {
            Ok(()) => recorder.record(due.elapsed()),
            Err(error) => {
                run.fail(io_failure(target, who, offset, len, &error));
                return;
            }
        }
    }
}

/// Aerospike's tomb raider reads every block in turn, as fast as it may; its reads are load, not
/// measurements.
fn tomb_raider(run: &Run, target: &Target, sleep: Duration) {
    let len = target.pattern.large_block_bytes as usize;
    let mut buf = AlignedBuf::new(len);
    let mut block = 0;
    while run.running() && Instant::now() < run.end {
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
        let offset = block * u64::from(target.pattern.large_block_bytes);
        if let Err(error) = target.device.read_at(buf.as_mut_slice(len), offset) {
            run.fail(io_failure(target, "tomb raider read", offset, len, &error));
            return;
        }
        block = (block + 1) % target.pattern.large_blocks;
    }
}

fn io_failure(target: &Target, what: &str, offset: u64, len: usize, error: &std::io::Error) -> Failure {
    Failure::Io {
        detail: format!(
            "{what} of {len} bytes at offset {offset} on {}: {error}",
            target.device.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived(record: u32, record_max: u32) -> Derived {
        Derived {
            record_stored_bytes: record,
            record_stored_bytes_max: record_max,
            internal_read_reqs_per_sec: 1,
            internal_write_reqs_per_sec: 0,
            large_block_reads_per_sec: 0.0,
            large_block_writes_per_sec: 0.0,
        }
    }

    #[test]
    fn the_pacer_spaces_requests_by_the_period() {
        let start = Instant::now();
        let mut pacer = Pacer::new(start, 4.0);
        let due: Vec<Duration> = (0..5).map(|_| pacer.next_due() - start).collect();
        assert_eq!(due[0], Duration::ZERO);
        assert_eq!(due[1], Duration::from_millis(250));
        assert_eq!(due[4], Duration::from_secs(1));
    }

    #[test]
    fn records_are_rounded_to_the_smallest_direct_io() {
        // 1536 bytes on a 512-byte device: 3 sectors; on a 4096-byte device: one page.
        let pattern = Pattern::new(1 << 20, 512, &derived(1536, 1536), 128 * 1024);
        assert_eq!(pattern.record_bytes, 1536);
        assert_eq!(pattern.record_sizes, 1);
        assert_eq!(pattern.record_offsets, 2048 - 3 + 1);
        assert_eq!(pattern.large_blocks, 8);
        let pattern = Pattern::new(1 << 20, 4096, &derived(1536, 3008), 128 * 1024);
        assert_eq!(pattern.record_bytes, 4096);
        assert_eq!(pattern.record_sizes, 1);
        assert_eq!(pattern.record_bytes_max(), 4096);
    }

    #[test]
    fn random_requests_stay_inside_the_device_and_aligned() {
        let size = 3 << 20;
        let pattern = Pattern::new(size, 512, &derived(1008, 3008), 128 * 1024);
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..10_000 {
            let (offset, len) = pattern.record_io(&mut rng);
            assert_eq!(offset % 512, 0);
            assert_eq!(len % 512, 0);
            assert!((1024..=3072).contains(&len));
            assert!(offset + len as u64 <= size);
            let block = pattern.large_block_offset(&mut rng);
            assert!(block + 128 * 1024 <= size);
        }
    }

    #[test]
    fn salt_leaves_the_compressible_part_zero() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut buf = vec![0xffu8; 1000];
        salt(&mut buf, 30, &mut rng);
        assert!(buf[300..].iter().all(|b| *b == 0));
        assert!(buf[..300].iter().any(|b| *b != 0));
    }
}
