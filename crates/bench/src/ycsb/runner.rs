//! Runs a phase: `threads` workers, each one task doing one operation at a time (so `-threads N`
//! is N requests in flight), as YCSB's `ClientThread`s do; and a reporter thread that drains the
//! measurements once a second into the time series, the histogram log, the status line and the
//! progress bar.
//!
//! A worker stops after its share of the operations, when `maxexecutiontime` passes, or on
//! Ctrl-C (the summary is still printed; a second Ctrl-C exits at once).

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use super::args::Phase;
use super::db::Db;
use super::measure::{Counts, Interval, Metric, Op, Recorder, Sample, Status};
use super::rundir::{RunDir, RunDirError};
use super::summary::{status_line, StatusFigures};
use super::throttle::{Pacer, Throttle};
use super::workload::{CoreWorkload, FieldSet, Transaction, Values, WorkerWorkload, WrittenValues};

/// More workers than this is a typo, not a benchmark.
pub const THREADS_MAX: u64 = 4096;

#[derive(Debug, Clone)]
pub struct PhaseConfig {
    pub phase: Phase,
    pub threads: usize,
    /// Operations (run) or inserts (load) in total; 0 is unbounded.
    pub op_count: u64,
    pub target_ops_per_s: u64,
    pub max_execution_time: Option<Duration>,
    pub interval: Interval,
    pub seed: u64,
}

/// What the reporter prints and writes besides the totals.
pub struct ReporterConfig {
    pub status_interval_s: Option<u64>,
    pub label: String,
    pub progress_bar: bool,
    pub rundir: Option<RunDir>,
    /// The series that get a time-series row every second, count 0 or not.
    pub row_metrics: Vec<Metric>,
}

pub struct Outcome {
    pub runtime: Duration,
    pub ops_done: u64,
    pub totals: Counts,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    pub rundir: Option<RunDir>,
    pub rundir_error: Option<RunDirError>,
}

/// Tells workers to stop, waking those asleep in the throttle.
struct Stop {
    flag: AtomicBool,
    wake: watch::Sender<bool>,
}

impl Stop {
    fn new() -> Stop {
        Stop {
            flag: AtomicBool::new(false),
            wake: watch::Sender::new(false),
        }
    }

    fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
        self.wake.send_replace(true);
    }

    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    async fn sleep_until(&self, deadline: Instant) {
        self.unless_stopped(tokio::time::sleep_until(deadline.into()))
            .await;
    }

    /// Runs `f` to its end, or returns `None` as soon as a stop is requested.
    async fn unless_stopped<F: Future>(&self, f: F) -> Option<F::Output> {
        let mut rx = self.wake.subscribe();
        if *rx.borrow_and_update() {
            return None;
        }
        tokio::select! {
            out = f => Some(out),
            _ = rx.wait_for(|stopped| *stopped) => None,
        }
    }
}

pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// YCSB's split of the operations: `op_count / threads` each, the first `op_count % threads`
/// workers one more.
pub fn worker_op_count(op_count: u64, threads: usize, worker: usize) -> u64 {
    let threads = threads as u64;
    op_count / threads + u64::from((worker as u64) < op_count % threads)
}

pub async fn run_phase<D: Db>(
    db: Arc<D>,
    workload: Arc<CoreWorkload>,
    config: &PhaseConfig,
    reporter: ReporterConfig,
) -> Outcome {
    assert!(config.threads >= 1 && config.threads as u64 <= THREADS_MAX);
    let recorder = Arc::new(Recorder::new(config.threads, config.interval));
    let stop = Arc::new(Stop::new());
    let start = Instant::now();
    let start_system = SystemTime::now();
    let pacer = Pacer::start(start, config.target_ops_per_s, config.threads);

    let (done_tx, done_rx) = mpsc::channel::<()>();
    let reporter_recorder = Arc::clone(&recorder);
    let total_ops = config.op_count;
    let phase = config.phase;
    let reporter_thread = std::thread::Builder::new()
        .name("hayate-bench-reporter".to_string())
        .spawn(move || Reporter::new(reporter, phase, total_ops).run(&reporter_recorder, start, &done_rx))
        .expect("the reporter thread starts");

    let mut watchers = Vec::new();
    if let Some(max) = config.max_execution_time {
        let stop = Arc::clone(&stop);
        eprintln!("Maximum execution time specified as: {} secs", max.as_secs());
        watchers.push(tokio::spawn(async move {
            tokio::time::sleep(max).await;
            eprintln!("Maximum time elapsed. Requesting stop for the workload.");
            stop.set();
        }));
    }
    {
        let stop = Arc::clone(&stop);
        watchers.push(tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "\nhayate-bench: interrupted; finishing the operations in flight (Ctrl-C again to quit)"
                );
                stop.set();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        }));
    }

    let mut workers = Vec::with_capacity(config.threads);
    for id in 0..config.threads {
        let seed = config
            .seed
            .wrapping_add((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let worker = Worker {
            shard: recorder.shard_of(id),
            db: Arc::clone(&db),
            workload: workload.worker(SmallRng::seed_from_u64(seed)),
            recorder: Arc::clone(&recorder),
            stop: Arc::clone(&stop),
            op_count: worker_op_count(config.op_count, config.threads, id),
            phase: config.phase,
            throttle: pacer.as_ref().map(|p| p.throttle(id)),
        };
        workers.push(tokio::spawn(worker.run()));
    }
    drop(db);
    let mut ops_done = 0;
    for w in workers {
        match w.await {
            Ok(n) => ops_done += n,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a worker was cancelled: {e}"),
        }
    }
    let runtime = start.elapsed();
    let end_system = SystemTime::now();
    drop(pacer);
    for w in watchers {
        w.abort();
    }
    // The reporter sees the channel close and makes its last round.
    drop(done_tx);
    let (totals, rundir, rundir_error) = reporter_thread
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
    Outcome {
        runtime,
        ops_done,
        totals,
        start_unix_ms: unix_ms(start_system),
        end_unix_ms: unix_ms(end_system),
        rundir,
        rundir_error,
    }
}

struct Worker<D: Db> {
    shard: usize,
    db: Arc<D>,
    workload: WorkerWorkload,
    recorder: Arc<Recorder>,
    stop: Arc<Stop>,
    op_count: u64,
    phase: Phase,
    /// With a target, when each operation is due.
    throttle: Option<Throttle>,
}

/// The latency of one call, measured from its own start and from the intended start.
fn sample(op: Op, status: Option<Status>, started: Instant, intended: Instant) -> Sample {
    let end = Instant::now();
    Sample {
        op,
        status,
        measured_us: end.duration_since(started).as_micros() as u64,
        intended_us: end.duration_since(intended).as_micros() as u64,
    }
}

impl<D: Db> Worker<D> {
    /// `ClientThread.run`; returns the operations done.
    async fn run(mut self) -> u64 {
        let mut keys = self.workload.key_namer();
        let mut values = WrittenValues::default();
        let mut done: u64 = 0;
        // The first wait is this worker's offset within the first tick, which takes the place
        // of YCSB's random stagger.
        let mut intended = self.until_due(done).await;
        while (self.op_count == 0 || done < self.op_count) && !self.stop.is_set() {
            let proceed = match self.phase {
                Phase::Load => self.insert_record(&mut keys, &mut values, intended).await,
                Phase::Run => {
                    self.transaction(&mut keys, &mut values, intended).await;
                    true
                }
            };
            if !proceed {
                break;
            }
            done += 1;
            // As YCSB, also after the last operation: the runtime, and so the throughput
            // reported, then covers the whole schedule.
            intended = self.until_due(done).await;
        }
        // YCSB's per-thread `cleanup`, measured; the last worker's drop closes the session.
        let started = Instant::now();
        drop(self.db);
        self.recorder
            .record(self.shard, &[sample(Op::Cleanup, None, started, started)], None);
        done
    }

    /// With a target, waits until operation `n` is due and returns its due time, from which
    /// the intended latency is measured; `None` without a target or once stopped.
    async fn until_due(&self, n: u64) -> Option<Instant> {
        let throttle = self.throttle.as_ref()?;
        self.stop.unless_stopped(throttle.until_due(n)).await
    }

    /// `CoreWorkload.doInsert` with its retries; false stops this worker, as in YCSB.
    async fn insert_record(
        &mut self,
        keys: &mut super::keys::KeyNamer,
        values: &mut WrittenValues,
        intended: Option<Instant>,
    ) -> bool {
        let shared = Arc::clone(&self.workload.shared);
        let keynum = shared.load_sequence.next();
        let key = keys.name(keynum);
        self.workload.all_values(values);
        let op_start = Instant::now();
        let ist = intended.unwrap_or(op_start);
        let mut retries = 0;
        let ok = loop {
            let started = Instant::now();
            let status = self.db.insert(key, Values::All(values)).await;
            let s = sample(Op::Insert, Some(status), started, ist);
            self.recorder.record(self.shard, &[s], None);
            if status.is_ok() {
                break true;
            }
            retries += 1;
            if retries > shared.insertion_retry_limit || self.stop.is_set() {
                eprintln!(
                    "Error inserting, not retrying any more. number of attempts: {retries}Insertion Retry Limit: {}",
                    shared.insertion_retry_limit
                );
                break false;
            }
            eprintln!("Retrying insertion, retry count: {retries}");
            let jitter = 0.8 + 0.4 * self.workload.rng().random::<f64>();
            let pause = Duration::from_secs_f64(shared.insertion_retry_interval_s as f64 * jitter);
            self.stop.sleep_until(Instant::now() + pause).await;
        };
        let proceed = ok || shared.insertion_keep_going_on_error;
        if proceed {
            let end = Instant::now();
            let whole = (
                end.duration_since(op_start).as_micros() as u64,
                end.duration_since(ist).as_micros() as u64,
            );
            self.recorder.record(self.shard, &[], Some(whole));
        }
        proceed
    }

    /// `CoreWorkload.doTransaction`.
    async fn transaction(
        &mut self,
        keys: &mut super::keys::KeyNamer,
        values: &mut WrittenValues,
        intended: Option<Instant>,
    ) {
        let op_start = Instant::now();
        let ist = intended.unwrap_or(op_start);
        let mut samples = [None; 3];
        match self.workload.next_transaction() {
            Transaction::Read => {
                let key = keys.name(self.workload.next_keynum());
                let fields = self.workload.read_fields();
                let started = Instant::now();
                let status = self.db.read(key, fields).await;
                samples[0] = Some(sample(Op::Read, Some(status), started, ist));
            }
            Transaction::Update => {
                let key = keys.name(self.workload.next_keynum());
                let v = self.workload.update_values(values);
                let started = Instant::now();
                let status = self.db.update(key, v).await;
                samples[0] = Some(sample(Op::Update, Some(status), started, ist));
            }
            Transaction::Insert => {
                let sequence = Arc::clone(&self.workload.shared.insert_sequence);
                let keynum = sequence.next();
                let key = keys.name(keynum);
                self.workload.all_values(values);
                let started = Instant::now();
                let status = self.db.insert(key, Values::All(values)).await;
                samples[0] = Some(sample(Op::Insert, Some(status), started, ist));
                sequence
                    .acknowledge(keynum)
                    .expect("inserts in flight are bounded by THREADS_MAX, far below the window");
            }
            Transaction::Scan => {
                let key = keys.name(self.workload.next_keynum());
                let len = self.workload.scan_length();
                let fields = whole_record_unless_one(self.workload.read_fields());
                let started = Instant::now();
                let status = self.db.scan(key, len, fields).await;
                samples[0] = Some(sample(Op::Scan, Some(status), started, ist));
            }
            Transaction::ReadModifyWrite => {
                let key = keys.name(self.workload.next_keynum());
                let fields = whole_record_unless_one(self.workload.read_fields());
                let v = self.workload.update_values(values);
                let rmw_start = Instant::now();
                let status = self.db.read(key, fields).await;
                samples[0] = Some(sample(Op::Read, Some(status), rmw_start, ist));
                let started = Instant::now();
                let status = self.db.update(key, v).await;
                samples[1] = Some(sample(Op::Update, Some(status), started, ist));
                samples[2] = Some(sample(Op::ReadModifyWrite, None, rmw_start, ist));
            }
        }
        let end = Instant::now();
        let whole = (
            end.duration_since(op_start).as_micros() as u64,
            end.duration_since(ist).as_micros() as u64,
        );
        let n = samples.iter().flatten().count();
        let list: [Sample; 3] = samples.map(|s| {
            s.unwrap_or(Sample {
                op: Op::Read,
                status: None,
                measured_us: 0,
                intended_us: 0,
            })
        });
        self.recorder.record(self.shard, &list[..n], Some(whole));
    }
}

/// Scans and read-modify-writes read `*` or one field; only reads name every field
/// (`readallfieldsbyname`), as in YCSB.
fn whole_record_unless_one(fields: FieldSet) -> FieldSet {
    match fields {
        FieldSet::AllByName => FieldSet::All,
        f => f,
    }
}

/// The reporter thread's state.
struct Reporter {
    config: ReporterConfig,
    phase: Phase,
    total_ops: u64,
    interval: Counts,
    since_status: Counts,
    totals: Counts,
    rundir_error: Option<RunDirError>,
}

impl Reporter {
    fn new(config: ReporterConfig, phase: Phase, total_ops: u64) -> Reporter {
        Reporter {
            config,
            phase,
            total_ops,
            interval: Counts::default(),
            since_status: Counts::default(),
            totals: Counts::default(),
            rundir_error: None,
        }
    }

    fn run(
        mut self,
        recorder: &Recorder,
        start: Instant,
        done: &mpsc::Receiver<()>,
    ) -> (Counts, Option<RunDir>, Option<RunDirError>) {
        let mut second: u64 = 0;
        let mut last_status = (Instant::now(), 0u64);
        if self.config.status_interval_s.is_some() {
            self.status(start, &mut last_status, 0);
        }
        let mut last_ops = 0;
        loop {
            let next = start + Duration::from_secs(second + 1);
            let finished = match done.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Err(mpsc::RecvTimeoutError::Timeout) => false,
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => true,
            };
            second += 1;
            self.interval.reset_histograms();
            recorder.drain(&mut self.interval);
            let length = if finished {
                start.elapsed().saturating_sub(Duration::from_secs(second - 1))
            } else {
                Duration::from_secs(1)
            };
            // The last, partial second gets rows only if an operation ended in it.
            let idle_tail = finished && self.interval.get(Metric::all(false)).is_none_or(|h| h.is_empty());
            if !idle_tail {
                self.write_second(second, length);
            }
            self.totals.add_histograms(&self.interval);
            self.since_status.add_histograms(&self.interval);
            self.totals.returns = self.interval.returns;
            self.totals.ops_done = self.interval.ops_done;
            if self.config.progress_bar && !finished {
                self.progress(start, self.interval.ops_done - last_ops);
            }
            last_ops = self.interval.ops_done;
            if let Some(every) = self.config.status_interval_s {
                if finished || second.is_multiple_of(every) {
                    self.status(start, &mut last_status, self.interval.ops_done);
                }
            }
            if finished {
                break;
            }
        }
        if self.config.progress_bar {
            eprint!("\r\x1b[K");
        }
        if let Some(rd) = self.config.rundir.as_mut() {
            if let Err(e) = rd.flush() {
                self.rundir_error.get_or_insert(e);
            }
        }
        (self.totals, self.config.rundir, self.rundir_error)
    }

    /// The time-series rows and log intervals of one second.
    fn write_second(&mut self, second: u64, length: Duration) {
        let Some(rd) = self.config.rundir.as_mut() else {
            return;
        };
        let empty = super::measure::new_histogram();
        let mut series: Vec<Metric> = self.config.row_metrics.clone();
        for m in self.interval.metrics() {
            let cleanup = m.op_and_failed().is_some_and(|(op, _)| op == Op::Cleanup);
            let recorded = self.interval.get(m).is_some_and(|h| !h.is_empty());
            if recorded && !cleanup && !series.contains(&m) {
                series.push(m);
            }
        }
        for m in series {
            let h = self.interval.get(m).unwrap_or(&empty);
            let name = m.name();
            let start = Duration::from_secs(second - 1);
            let result = rd
                .row(second, length, &name, h)
                .and_then(|()| rd.interval(start, length, &name, h));
            if let Err(e) = result {
                // Keep running: the summary matters more than the file. Report it once.
                self.rundir_error.get_or_insert(e);
            }
        }
    }

    fn progress(&self, start: Instant, ops_this_second: u64) {
        let done = self.interval.ops_done;
        let elapsed = start.elapsed().as_secs();
        let mut line = format!("\r\x1b[K{}: {done} ops", self.phase.name());
        if self.total_ops > 0 {
            let pct = 100.0 * done as f64 / self.total_ops as f64;
            line.push_str(&format!(" of {} ({pct:.1}%)", self.total_ops));
        }
        line.push_str(&format!(", {ops_this_second} ops/s, {elapsed} s"));
        if self.total_ops > done && done > 0 {
            let left = (self.total_ops - done) as f64 * start.elapsed().as_secs_f64() / done as f64;
            line.push_str(&format!(", ~{} s left", left.ceil() as u64));
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
    }

    fn status(&mut self, start: Instant, last: &mut (Instant, u64), total_ops: u64) {
        let now = Instant::now();
        let mut series: Vec<(String, &hdrhistogram::Histogram<u64>)> = Vec::new();
        for intended in [false, true] {
            for m in self
                .totals
                .metrics()
                .filter(|m| !m.is_all() && m.is_intended() == intended)
            {
                if let Some(h) = self.since_status.get(m) {
                    series.push((m.name(), h));
                }
            }
        }
        let figures = StatusFigures {
            label: &self.config.label,
            unix_ms: unix_ms(SystemTime::now()),
            elapsed_ms: now.duration_since(start).as_millis() as u64,
            total_ops,
            interval_ops: total_ops - last.1,
            interval_ms: now.duration_since(last.0).as_millis().max(1) as u64,
            todo_ops: self.total_ops.saturating_sub(total_ops),
        };
        let line = status_line(&figures, &series);
        if self.config.progress_bar {
            eprint!("\r\x1b[K");
        }
        eprintln!("{line}");
        *last = (now, total_ops);
        self.since_status.reset_histograms();
    }
}

/// Whether stderr is a terminal (the progress bar is drawn only there).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::db::MemoryDb;
    use crate::ycsb::properties::Properties;

    fn workload(text: &str) -> Arc<CoreWorkload> {
        let mut p = Properties::new();
        p.load_str(text);
        Arc::new(CoreWorkload::from_properties(&p).expect("valid"))
    }

    fn reporter(rundir: Option<RunDir>, row_metrics: Vec<Metric>) -> ReporterConfig {
        ReporterConfig {
            status_interval_s: None,
            label: String::new(),
            progress_bar: false,
            rundir,
            row_metrics,
        }
    }

    fn config(phase: Phase, threads: usize, op_count: u64) -> PhaseConfig {
        PhaseConfig {
            phase,
            threads,
            op_count,
            target_ops_per_s: 0,
            max_execution_time: None,
            interval: Interval::Op,
            seed: 1,
        }
    }

    #[test]
    fn operations_split_like_ycsb() {
        let split: Vec<u64> = (0..4).map(|w| worker_op_count(10, 4, w)).collect();
        assert_eq!(split, [3, 3, 2, 2]);
        assert_eq!(worker_op_count(0, 3, 1), 0, "unbounded stays unbounded");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn load_then_run_against_memory() {
        let w = workload("recordcount=500\noperationcount=2000\nreadproportion=0.5\nupdateproportion=0.3\nreadmodifywriteproportion=0.2\nrequestdistribution=zipfian\n");
        let db = Arc::new(MemoryDb::new(10, 0));
        let load = run_phase(
            Arc::clone(&db),
            Arc::clone(&w),
            &config(Phase::Load, 4, 500),
            reporter(None, vec![]),
        )
        .await;
        assert_eq!(load.ops_done, 500);
        assert_eq!(db.rows.lock().expect("lock").len(), 500);
        assert_eq!(load.totals.returns[Op::Insert as usize][Status::Ok as usize], 500);
        assert_eq!(
            load.totals
                .get(Metric::op(Op::Cleanup, false, false))
                .map(|h| h.len()),
            Some(4)
        );

        let run = run_phase(
            Arc::clone(&db),
            Arc::clone(&w),
            &config(Phase::Run, 3, 2000),
            reporter(None, vec![]),
        )
        .await;
        assert_eq!(run.ops_done, 2000);
        let r = &run.totals.returns;
        let reads = r[Op::Read as usize][Status::Ok as usize];
        let updates = r[Op::Update as usize][Status::Ok as usize];
        let rmw = run
            .totals
            .get(Metric::op(Op::ReadModifyWrite, false, false))
            .map_or(0, |h| h.len());
        // A read-modify-write is also a read and an update, as in YCSB.
        assert_eq!(
            reads + updates - rmw,
            2000,
            "reads {reads} updates {updates} rmw {rmw}"
        );
        assert_eq!(
            r[Op::Read as usize][Status::NotFound as usize],
            0,
            "every key read was loaded"
        );
        assert_eq!(run.totals.get(Metric::all(false)).map(|h| h.len()), Some(2000));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_insert_stops_its_worker_and_errors_are_counted() {
        let w = workload("recordcount=100\n");
        let db = Arc::new(MemoryDb::new(10, 10));
        let load = run_phase(db, w, &config(Phase::Load, 1, 100), reporter(None, vec![])).await;
        // The 10th call fails: nine inserts done, then the worker gives up, as YCSB's does.
        assert_eq!(load.ops_done, 9);
        assert_eq!(load.totals.returns[Op::Insert as usize], [9, 1, 0]);
        assert_eq!(
            load.totals
                .get(Metric::op(Op::Insert, true, false))
                .map(|h| h.len()),
            Some(1)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn target_throttles_and_records_intended_latency_and_rows() {
        let dir = std::env::temp_dir().join(format!("hayate-bench-runner-{}", std::process::id()));
        let rd = RunDir::create(&dir, SystemTime::now(), "test").expect("rundir");
        let w = workload("recordcount=50\nreadproportion=1\nupdateproportion=0\n");
        let db = Arc::new(MemoryDb::new(10, 0));
        for keynum in 0..50 {
            let mut k = crate::ycsb::keys::KeyNamer::new(false, 1);
            db.rows
                .lock()
                .expect("lock")
                .insert(k.name(keynum).to_string(), vec![]);
        }
        let mut cfg = config(Phase::Run, 2, 300);
        cfg.target_ops_per_s = 200;
        cfg.interval = Interval::Both;
        let rows = vec![
            Metric::op(Op::Read, false, false),
            Metric::all(false),
            Metric::op(Op::Read, false, true),
            Metric::all(true),
        ];
        let started = Instant::now();
        let run = run_phase(db, w, &cfg, reporter(Some(rd), rows)).await;
        let took = started.elapsed();
        assert_eq!(run.ops_done, 300);
        // 300 operations at 200 per second take about 1.5 s; generous bounds.
        assert!(
            took >= Duration::from_millis(1200) && took < Duration::from_secs(10),
            "{took:?}"
        );
        assert!(run
            .totals
            .get(Metric::op(Op::Read, false, true))
            .is_some_and(|h| h.len() == 300));
        assert!(run.rundir_error.is_none());
        let csv = std::fs::read_to_string(dir.join("timeseries.csv")).expect("csv");
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines.iter().any(|l| l.starts_with("1,READ,")), "{csv}");
        assert!(lines.iter().any(|l| l.starts_with("1,Intended-ALL,")), "{csv}");
        let counted: u64 = lines
            .iter()
            .filter(|l| l.split(',').nth(1) == Some("ALL"))
            .map(|l| {
                l.split(',')
                    .nth(2)
                    .and_then(|c| c.parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum();
        assert_eq!(counted, 300, "{csv}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn max_execution_time_stops_an_unbounded_run() {
        let w = workload("recordcount=10\n");
        let db = Arc::new(MemoryDb::new(10, 0));
        let mut cfg = config(Phase::Run, 2, 0);
        cfg.target_ops_per_s = 100;
        cfg.max_execution_time = Some(Duration::from_millis(1100));
        let run = run_phase(db, w, &cfg, reporter(None, vec![])).await;
        assert!(run.runtime < Duration::from_secs(5), "{:?}", run.runtime);
        assert!((50..=200).contains(&run.ops_done), "{}", run.ops_done);
    }
}
