//! Latency histograms and return-code counts, recorded by the workers and drained once a second
//! by the reporter.
//!
//! Workers are spread over at most [`SHARDS_MAX`] shards, each a mutex around its histograms: a
//! worker takes its own shard's lock once per operation (uncontended in practice, since only as
//! many workers run at once as the runtime has threads) and the reporter takes each lock once a
//! second to move the counts out. No lock is shared by all workers.
//!
//! Names follow YCSB's `Measurements` and `DBWrapper`: an operation's latency goes to `READ` when
//! it succeeded and to `READ-FAILED` when it did not, its return code is counted under `READ`
//! (`Return=OK`, `Return=NOT_FOUND`, `Return=ERROR`), and with `measurement.interval=both` the
//! latency from the throttle's intended start goes to `Intended-READ` as well. `ALL` is this
//! tool's own: every top-level operation together, for the time series.

use std::sync::Mutex;

use hdrhistogram::Histogram;

/// Latencies above this (100 s) are recorded as this; no CQL request legitimately takes longer.
pub const LATENCY_US_MAX: u64 = 100_000_000;
/// YCSB's `Recorder(3)`: three significant digits.
pub const HISTOGRAM_SIGFIG: u8 = 3;
/// At most this many shards; more would only cost memory (each histogram is ~150 KiB).
pub const SHARDS_MAX: usize = 16;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, HISTOGRAM_SIGFIG)
        .expect("static histogram bounds are valid")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Read = 0,
    Update = 1,
    Insert = 2,
    Scan = 3,
    ReadModifyWrite = 4,
    Delete = 5,
    Cleanup = 6,
}

pub const OP_COUNT: usize = 7;

impl Op {
    pub const ALL: [Op; OP_COUNT] = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Scan,
        Op::ReadModifyWrite,
        Op::Delete,
        Op::Cleanup,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "READ",
            Op::Update => "UPDATE",
            Op::Insert => "INSERT",
            Op::Scan => "SCAN",
            Op::ReadModifyWrite => "READ-MODIFY-WRITE",
            Op::Delete => "DELETE",
            Op::Cleanup => "CLEANUP",
        }
    }
}

/// YCSB's `Status` values that a CQL binding returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    Error = 1,
    NotFound = 2,
}

pub const STATUS_COUNT: usize = 3;

impl Status {
    pub const ALL: [Status; STATUS_COUNT] = [Status::Ok, Status::Error, Status::NotFound];

    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Error => "ERROR",
            Status::NotFound => "NOT_FOUND",
        }
    }

    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }
}

/// One named latency series: an operation, its `-FAILED` twin, or `ALL`; measured or intended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Metric(u8);

const SERIES_ALL: u8 = 2 * OP_COUNT as u8;
const SERIES_COUNT: usize = 2 * OP_COUNT + 1;
pub const METRIC_COUNT: usize = 2 * SERIES_COUNT;

impl Metric {
    pub fn op(op: Op, failed: bool, intended: bool) -> Metric {
        let series = op as u8 + if failed { OP_COUNT as u8 } else { 0 };
        Metric(series * 2 + u8::from(intended))
    }

    pub fn all(intended: bool) -> Metric {
        Metric(SERIES_ALL * 2 + u8::from(intended))
    }

    pub fn from_index(i: usize) -> Metric {
        assert!(i < METRIC_COUNT);
        Metric(i as u8)
    }

    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    pub fn is_intended(self) -> bool {
        self.0 % 2 == 1
    }

    pub fn is_all(self) -> bool {
        self.0 / 2 == SERIES_ALL
    }

    /// The operation this series belongs to, if it is not `ALL`.
    pub fn op_and_failed(self) -> Option<(Op, bool)> {
        let series = usize::from(self.0 / 2);
        if series >= 2 * OP_COUNT {
            return None;
        }
        Some((Op::ALL[series % OP_COUNT], series >= OP_COUNT))
    }

    /// The name YCSB prints: `READ`, `READ-FAILED`, `Intended-UPDATE`, and this tool's `ALL`.
    pub fn name(self) -> String {
        let base = match self.op_and_failed() {
            None => "ALL".to_string(),
            Some((op, false)) => op.name().to_string(),
            Some((op, true)) => format!("{}-FAILED", op.name()),
        };
        if self.is_intended() {
            format!("Intended-{base}")
        } else {
            base
        }
    }
}

/// `measurement.interval`: what the latency of an operation is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// From when the request was sent (YCSB's default).
    Op,
    /// From when the throttle meant it to be sent, under the plain names.
    Intended,
    /// Both, the intended ones under `Intended-` names (the default here when `-target` is set).
    Both,
}

impl Interval {
    pub fn name(self) -> &'static str {
        match self {
            Interval::Op => "op",
            Interval::Intended => "intended",
            Interval::Both => "both",
        }
    }
}

/// One database call's outcome; a read-modify-write yields three (its read, its update, and
/// itself, which has no return code in YCSB).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub op: Op,
    pub status: Option<Status>,
    pub measured_us: u64,
    pub intended_us: u64,
}

/// Histograms and counts, in a worker shard or accumulated by the reporter.
#[derive(Debug)]
pub struct Counts {
    pub histograms: Vec<Option<Histogram<u64>>>,
    /// Return codes per operation, since the start of the phase.
    pub returns: [[u64; STATUS_COUNT]; OP_COUNT],
    /// Top-level operations done since the start of the phase (YCSB's `opsdone`).
    pub ops_done: u64,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            histograms: (0..METRIC_COUNT).map(|_| None).collect(),
            returns: Default::default(),
            ops_done: 0,
        }
    }
}

impl Counts {
    pub fn record(&mut self, metric: Metric, value_us: u64) {
        self.histograms[metric.index()]
            .get_or_insert_with(new_histogram)
            .saturating_record(value_us);
    }

    pub fn get(&self, metric: Metric) -> Option<&Histogram<u64>> {
        self.histograms[metric.index()].as_ref()
    }

    /// Adds `other`'s histograms (allocating the ones this has not seen yet).
    pub fn add_histograms(&mut self, other: &Counts) {
        for (mine, theirs) in self.histograms.iter_mut().zip(&other.histograms) {
            if let Some(h) = theirs {
                mine.get_or_insert_with(new_histogram)
                    .add(h)
                    .expect("histograms share their bounds");
            }
        }
    }

    pub fn reset_histograms(&mut self) {
        for h in self.histograms.iter_mut().flatten() {
            h.reset();
        }
    }

    /// The metrics that have a histogram, in index order.
    pub fn metrics(&self) -> impl Iterator<Item = Metric> + '_ {
        self.histograms
            .iter()
            .enumerate()
            .filter(|(_, h)| h.is_some())
            .map(|(i, _)| Metric::from_index(i))
    }
}

/// The workers' side: sharded counts.
#[derive(Debug)]
pub struct Recorder {
    shards: Box<[Mutex<Counts>]>,
    interval: Interval,
}

impl Recorder {
    pub fn new(workers: usize, interval: Interval) -> Recorder {
        let n = workers.clamp(1, SHARDS_MAX);
        Recorder {
            shards: (0..n).map(|_| Mutex::new(Counts::default())).collect(),
            interval,
        }
    }

    pub fn shard_of(&self, worker: usize) -> usize {
        worker % self.shards.len()
    }

    /// Records one top-level operation: its samples, and (when `done` is set) one more
    /// operation done with its whole latency under `ALL`.
    pub fn record(&self, shard: usize, samples: &[Sample], done: Option<(u64, u64)>) {
        let mut c = self.shards[shard]
            .lock()
            .expect("a worker panicked while recording");
        for s in samples {
            let failed = s.status.is_some_and(|st| !st.is_ok());
            match self.interval {
                Interval::Op => c.record(Metric::op(s.op, failed, false), s.measured_us),
                Interval::Intended => c.record(Metric::op(s.op, failed, false), s.intended_us),
                Interval::Both => {
                    c.record(Metric::op(s.op, failed, false), s.measured_us);
                    c.record(Metric::op(s.op, failed, true), s.intended_us);
                }
            }
            if let Some(st) = s.status {
                c.returns[s.op as usize][st as usize] += 1;
            }
        }
        if let Some((measured_us, intended_us)) = done {
            c.ops_done += 1;
            match self.interval {
                Interval::Op => c.record(Metric::all(false), measured_us),
                Interval::Intended => c.record(Metric::all(false), intended_us),
                Interval::Both => {
                    c.record(Metric::all(false), measured_us);
                    c.record(Metric::all(true), intended_us);
                }
            }
        }
    }

    /// Moves every shard's histograms into `into` (which must start empty of counts) and copies
    /// the running totals of return codes and operations done.
    pub fn drain(&self, into: &mut Counts) {
        into.returns = Default::default();
        into.ops_done = 0;
        for shard in self.shards.iter() {
            let mut c = shard.lock().expect("a worker panicked while recording");
            into.add_histograms(&c);
            c.reset_histograms();
            for (acc, add) in into.returns.iter_mut().zip(c.returns.iter()) {
                for (a, b) in acc.iter_mut().zip(add) {
                    *a += b;
                }
            }
            into.ops_done += c.ops_done;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_are_ycsbs() {
        assert_eq!(Metric::op(Op::Read, false, false).name(), "READ");
        assert_eq!(Metric::op(Op::Read, true, false).name(), "READ-FAILED");
        assert_eq!(
            Metric::op(Op::ReadModifyWrite, false, true).name(),
            "Intended-READ-MODIFY-WRITE"
        );
        assert_eq!(
            Metric::op(Op::Cleanup, true, true).name(),
            "Intended-CLEANUP-FAILED"
        );
        assert_eq!(Metric::all(false).name(), "ALL");
        assert_eq!(Metric::all(true).name(), "Intended-ALL");
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..METRIC_COUNT {
            assert!(seen.insert(Metric::from_index(i).name()), "duplicate name at {i}");
        }
    }

    #[test]
    fn failures_go_to_failed_series_and_codes_to_the_operation() {
        let r = Recorder::new(40, Interval::Both);
        assert_eq!(r.shards.len(), SHARDS_MAX);
        let ok = Sample {
            op: Op::Read,
            status: Some(Status::Ok),
            measured_us: 100,
            intended_us: 150,
        };
        let missing = Sample {
            op: Op::Read,
            status: Some(Status::NotFound),
            measured_us: 7,
            intended_us: 9,
        };
        r.record(r.shard_of(3), &[ok], Some((100, 150)));
        r.record(r.shard_of(20), &[missing], Some((7, 9)));
        let mut c = Counts::default();
        r.drain(&mut c);
        assert_eq!(c.ops_done, 2);
        assert_eq!(c.returns[Op::Read as usize], [1, 0, 1]);
        let read = c.get(Metric::op(Op::Read, false, false)).expect("READ");
        assert_eq!((read.len(), read.max()), (1, 100));
        assert_eq!(
            c.get(Metric::op(Op::Read, false, true))
                .expect("Intended-READ")
                .max(),
            150
        );
        assert_eq!(
            c.get(Metric::op(Op::Read, true, false))
                .expect("READ-FAILED")
                .max(),
            7
        );
        assert_eq!(c.get(Metric::all(false)).expect("ALL").len(), 2);
        // Draining moves histograms out but keeps the running totals of codes and ops.
        let mut again = Counts::default();
        r.drain(&mut again);
        assert_eq!(again.ops_done, 2);
        assert_eq!(again.get(Metric::all(false)).map(|h| h.len()), Some(0));
    }

    #[test]
    fn intended_only_uses_plain_names_and_latencies_are_bounded() {
        let r = Recorder::new(1, Interval::Intended);
        let s = Sample {
            op: Op::Update,
            status: Some(Status::Ok),
            measured_us: 5,
            intended_us: 10 * LATENCY_US_MAX,
        };
        r.record(0, &[s], None);
        let mut c = Counts::default();
        r.drain(&mut c);
        let h = c.get(Metric::op(Op::Update, false, false)).expect("UPDATE");
        assert!(h.max() >= LATENCY_US_MAX && h.max() < LATENCY_US_MAX + LATENCY_US_MAX / 100);
        assert!(c.get(Metric::op(Op::Update, false, true)).is_none());
        assert_eq!(c.ops_done, 0, "a sample without `done` is not an operation done");
    }
}
