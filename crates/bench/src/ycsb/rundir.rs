//! The run directory (`-p rundir=DIR`): the contract with `hayate-bench report` and the
//! benchmark harness.
//!
//! ```text
//! DIR/summary.txt       the YCSB summary block, as printed at the end
//! DIR/timeseries.csv    elapsed_s,operation,count,mean_us,p50_us,p95_us,p99_us,p999_us,max_us,
//!                       length_s
//!                       one row per second of the phase (1, 2, … the end of that second) per
//!                       operation of the workload, plus ALL, plus Intended-… with -target;
//!                       latency fields empty when count is 0; `-FAILED` rows only in seconds
//!                       that had failures; length_s the seconds the row covers (1, except the
//!                       run's last, partial second)
//! DIR/histogram.hlog    HdrHistogram interval log (HistogramLogProcessor's format), one interval
//!                       per second per operation, tagged with the operation's name
//! DIR/meta.json         label, phase, argv, effective properties, threads, target, times, hosts
//! ```

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

pub const TIMESERIES_HEADER: &str =
    "elapsed_s,operation,count,mean_us,p50_us,p95_us,p99_us,p999_us,max_us,length_s";

/// The run directory could not be written.
#[derive(Debug)]
pub struct RunDirError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for RunDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot write {}: {} (check -p rundir=…)",
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for RunDirError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn at(path: &Path) -> impl Fn(io::Error) -> RunDirError + '_ {
    move |source| RunDirError {
        path: path.to_path_buf(),
        source,
    }
}

/// The files written while the phase runs.
pub struct RunDir {
    dir: PathBuf,
    timeseries: BufWriter<File>,
    hlog: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl RunDir {
    pub fn create(dir: &Path, start: SystemTime, comment: &str) -> Result<RunDir, RunDirError> {
        std::fs::create_dir_all(dir).map_err(at(dir))?;
        let ts_path = dir.join("timeseries.csv");
        let mut timeseries = BufWriter::new(File::create(&ts_path).map_err(at(&ts_path))?);
        writeln!(timeseries, "{TIMESERIES_HEADER}").map_err(at(&ts_path))?;
        let hlog_path = dir.join("histogram.hlog");
        let mut hlog = BufWriter::new(File::create(&hlog_path).map_err(at(&hlog_path))?);
        let mut serializer = V2DeflateSerializer::new();
        IntervalLogWriterBuilder::new()
            .add_comment(&format!("[Logging for: {comment}]"))
            .add_comment("[Histogram log format version 1.3]")
            .with_start_time(start)
            .with_base_time(start)
            .begin_log_with(&mut hlog, &mut serializer)
            .map_err(at(&hlog_path))?;
        writeln!(
            hlog,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )
        .map_err(at(&hlog_path))?;
        Ok(RunDir {
            dir: dir.to_path_buf(),
            timeseries,
            hlog,
            serializer,
        })
    }

    /// One second's row for one series; `length` is how much of the second the run lasted.
    pub fn row(
        &mut self,
        elapsed_s: u64,
        length: Duration,
        name: &str,
        h: &Histogram<u64>,
    ) -> Result<(), RunDirError> {
        let line = timeseries_row(elapsed_s, length, name, h);
        let path = self.dir.join("timeseries.csv");
        writeln!(self.timeseries, "{line}").map_err(at(&path))
    }

    /// One second's interval histogram for one series, starting `start` after the base time.
    pub fn interval(
        &mut self,
        start: Duration,
        length: Duration,
        name: &str,
        h: &Histogram<u64>,
    ) -> Result<(), RunDirError> {
        let path = self.dir.join("histogram.hlog");
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.hlog, &mut self.serializer)
            .map_err(at(&path))?;
        writer
            .write_histogram(h, start, length, Tag::new(name))
            .map_err(|e| RunDirError {
                path: path.clone(),
                source: io::Error::other(format!("{e:?}")),
            })
    }

    pub fn flush(&mut self) -> Result<(), RunDirError> {
        let ts = self.dir.join("timeseries.csv");
        self.timeseries.flush().map_err(at(&ts))?;
        let hl = self.dir.join("histogram.hlog");
        self.hlog.flush().map_err(at(&hl))
    }

    pub fn write_file(&self, name: &str, contents: &str) -> Result<(), RunDirError> {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).map_err(at(&path))
    }
}

/// `elapsed_s,operation,count,mean_us,p50_us,p95_us,p99_us,p999_us,max_us,length_s`.
pub fn timeseries_row(elapsed_s: u64, length: Duration, name: &str, h: &Histogram<u64>) -> String {
    let length_s = length.as_secs_f64().min(1.0);
    if h.is_empty() {
        return format!("{elapsed_s},{name},0,,,,,,,{length_s:.3}");
    }
    format!(
        "{elapsed_s},{name},{},{},{},{},{},{},{},{length_s:.3}",
        h.len(),
        h.mean().round() as u64,
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.95),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::measure::new_histogram;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn timeseries_rows() {
        let mut h = new_histogram();
        let second = Duration::from_secs(1);
        assert_eq!(timeseries_row(3, second, "READ", &h), "3,READ,0,,,,,,,1.000");
        for v in 1..=1000u64 {
            h.record(v).expect("record");
        }
        assert_eq!(
            timeseries_row(4, second, "ALL", &h),
            "4,ALL,1000,501,500,950,990,999,1000,1.000"
        );
        // The run's last second, cut short: the row says how much of it the run had.
        assert_eq!(
            timeseries_row(5, Duration::from_millis(250), "ALL", &h),
            "5,ALL,1000,501,500,950,990,999,1000,0.250"
        );
    }

    #[test]
    fn hlog_reads_back_with_tags() {
        let dir = std::env::temp_dir().join(format!("hayate-bench-rundir-{}", std::process::id()));
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut rd = RunDir::create(&dir, start, "test").expect("create");
        let mut h = new_histogram();
        h.record(250).expect("record");
        rd.interval(Duration::ZERO, Duration::from_secs(1), "READ", &h)
            .expect("interval");
        rd.interval(
            Duration::from_secs(1),
            Duration::from_secs(1),
            "READ-MODIFY-WRITE",
            &h,
        )
        .expect("interval");
        rd.row(1, Duration::from_secs(1), "READ", &h).expect("row");
        rd.flush().expect("flush");
        let log = std::fs::read(dir.join("histogram.hlog")).expect("read");
        let text = String::from_utf8_lossy(&log);
        assert!(text.contains("#[StartTime: 1700000000.000"), "{text}");
        let mut tags = Vec::new();
        for entry in IntervalLogIterator::new(&log) {
            if let LogEntry::Interval(i) = entry.expect("parses") {
                tags.push(i.tag().map(|t| t.as_str().to_string()));
                let bytes = base64_decode(i.encoded_histogram());
                let back: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).expect("decodes");
                assert_eq!(back.len(), 1);
            }
        }
        assert_eq!(
            tags,
            [Some("READ".to_string()), Some("READ-MODIFY-WRITE".to_string())]
        );
        let csv = std::fs::read_to_string(dir.join("timeseries.csv")).expect("read");
        assert_eq!(csv.lines().next(), Some(TIMESERIES_HEADER));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        let table = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'+' => 62,
                _ => 63,
            }
        };
        let clean: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
        let mut out = Vec::new();
        for chunk in clean.chunks(4) {
            let mut acc = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                acc |= table(c) << (18 - 6 * i);
            }
            let bytes = acc.to_be_bytes();
            out.extend_from_slice(&bytes[1..chunk.len()]);
        }
        out
    }
}
