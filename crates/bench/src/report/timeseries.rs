//! `timeseries.csv`: one row per second per operation, written by `hayate-bench run`.
//!
//! ```text
//! elapsed_s,operation,count,mean_us,p50_us,p95_us,p99_us,p999_us,max_us,length_s
//! 1,READ,4980,812.3,640,1900,3100,7000,12000,1.000
//! 1,ALL,9950,...
//! 2,INSERT,0,,,,,,,1.000     <- a second without operations has no latencies
//! 3,ALL,2100,...,0.250      <- the run's last second, a quarter of it run
//! ```
//!
//! Columns are found by name, so added columns or a different order do not break the report;
//! a file without `length_s` (written before it existed) counts every row as a whole second.

use std::collections::BTreeMap;

/// A 12-hour run has 43,200 seconds of perhaps 15 operations: well under this.
pub const ROWS_MAX: usize = 10_000_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub elapsed_s: f64,
    pub count: u64,
    /// The seconds the row covers: 1, except for a run's last, partial second.
    pub length_s: f64,
    pub latency_us_p95: Option<f64>,
    pub latency_us_p99: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeSeries {
    /// Operation name (`READ`, `ALL`, `Intended-READ`…) → its points in time order.
    pub operations: BTreeMap<String, Vec<Point>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CsvError {
    MissingColumn(&'static str),
    BadRow { line: usize, reason: String },
    TooManyRows,
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CsvError::MissingColumn(name) => write!(f, "the header has no '{name}' column"),
            CsvError::BadRow { line, reason } => write!(f, "line {line}: {reason}"),
            CsvError::TooManyRows => write!(f, "more than {ROWS_MAX} rows"),
        }
    }
}

impl TimeSeries {
    pub fn parse(text: &str) -> Result<TimeSeries, CsvError> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let Some((_, header)) = lines.next() else {
            return Ok(TimeSeries::default());
        };
        let names: Vec<&str> = header.split(',').map(str::trim).collect();
        let column = |name: &'static str| {
            names
                .iter()
                .position(|n| *n == name)
                .ok_or(CsvError::MissingColumn(name))
        };
        let elapsed = column("elapsed_s")?;
        let operation = column("operation")?;
        let count = column("count")?;
        let p95 = column("p95_us")?;
        let p99 = column("p99_us")?;
        let length = column("length_s").ok();
        let mut series = TimeSeries::default();
        let mut rows = 0;
        for (index, line) in lines {
            rows += 1;
            if rows > ROWS_MAX {
                return Err(CsvError::TooManyRows);
            }
            let line_number = index + 1;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let field = |i: usize| fields.get(i).copied().unwrap_or("");
            let bad = |reason: String| CsvError::BadRow {
                line: line_number,
                reason,
            };
            let elapsed_s: f64 = field(elapsed)
                .parse()
                .map_err(|_| bad(format!("elapsed_s '{}' is not a number", field(elapsed))))?;
            let count: u64 = field(count)
                .parse()
                .map_err(|_| bad(format!("count '{}' is not a whole number", field(count))))?;
            let optional = |i: usize| -> Result<Option<f64>, CsvError> {
                let text = field(i);
                if text.is_empty() {
                    return Ok(None);
                }
                let value: f64 = text
                    .parse()
                    .map_err(|_| bad(format!("'{text}' is not a number")))?;
                Ok(value.is_finite().then_some(value))
            };
            let length_s = match length.map(field).filter(|t| !t.is_empty()) {
                None => 1.0,
                Some(text) => text
                    .parse::<f64>()
                    .ok()
                    .filter(|l| *l > 0.0 && *l <= 1.0)
                    .ok_or_else(|| bad(format!("length_s '{text}' is not a number in (0, 1]")))?,
            };
            let point = Point {
                elapsed_s,
                count,
                length_s,
                latency_us_p95: optional(p95)?,
                latency_us_p99: optional(p99)?,
            };
            series
                .operations
                .entry(field(operation).to_string())
                .or_default()
                .push(point);
        }
        for points in series.operations.values_mut() {
            points.sort_by(|a, b| a.elapsed_s.total_cmp(&b.elapsed_s));
        }
        Ok(series)
    }

    /// Operations per second of all operations: the `ALL` rows, or the sum of the measured
    /// operations (not the `Intended-` copies of them) when a writer left `ALL` out.
    pub fn total(&self) -> Vec<Point> {
        if let Some(all) = self.operations.get("ALL") {
            return all.clone();
        }
        let mut by_second: BTreeMap<i64, (u64, f64)> = BTreeMap::new();
        for (name, points) in &self.operations {
            if name.starts_with("Intended-") {
                continue;
            }
            for point in points {
                let (count, length_s) = by_second
                    .entry(point.elapsed_s.round() as i64)
                    .or_insert((0, 1.0));
                *count += point.count;
                *length_s = length_s.min(point.length_s);
            }
        }
        by_second
            .into_iter()
            .map(|(second, (count, length_s))| Point {
                elapsed_s: second as f64,
                count,
                length_s,
                latency_us_p95: None,
                latency_us_p99: None,
            })
            .collect()
    }
}

/// One plotted value per window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The window's middle, in seconds since the start.
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub latency_us_p95: Option<f64>,
    pub latency_us_p99: Option<f64>,
}

/// The window that gives at most `points_max` samples over `span_s`, and at least `smooth_s`.
pub fn window_s(span_s: f64, smooth_s: f64, points_max: usize) -> f64 {
    assert!(points_max > 0);
    let needed = (span_s / points_max as f64).ceil();
    needed.max(smooth_s).max(1.0)
}

/// Averages per-second points over windows of `window_s` seconds. Throughput is operations over
/// the window's seconds; a percentile is the count-weighted mean of the per-second percentiles
/// (the true percentile of a window needs the histograms, which the CSV does not carry).
pub fn resample(points: &[Point], window_s: f64) -> Vec<Sample> {
    assert!(window_s >= 1.0);
    let mut samples = Vec::new();
    let Some(first) = points.first() else {
        return samples;
    };
    // Rows are per second: row `t` covers `(t-1, t]`.
    let origin = first.elapsed_s - 1.0;
    let mut i = 0;
    while i < points.len() {
        let index = ((points[i].elapsed_s - origin - 1.0) / window_s).floor();
        let window_start = origin + index * window_s;
        let window_end = window_start + window_s;
        let mut count = 0u64;
        let mut seconds = 0.0;
        let mut weighted = [0.0f64; 2];
        let mut weight = 0u64;
        let mut last = window_start;
        let mut partial = false;
        while i < points.len() && points[i].elapsed_s <= window_end {
            let point = &points[i];
            count += point.count;
            seconds += point.length_s;
            partial |= point.length_s < 1.0;
            last = point.elapsed_s;
            if let (Some(p95), Some(p99)) = (point.latency_us_p95, point.latency_us_p99) {
                if point.count > 0 {
                    weighted[0] += p95 * point.count as f64;
                    weighted[1] += p99 * point.count as f64;
                    weight += point.count;
                }
            }
            i += 1;
        }
        // A window cut short by the end of the run counts only the seconds it has.
        let covered_s = if last < window_end || partial {
            seconds
        } else {
            window_s.max(seconds)
        };
        samples.push(Sample {
            elapsed_s: (window_start + last.min(window_end)) / 2.0,
            // A run's last second may be a fraction of one: its rate is its count over that.
            ops_per_sec: count as f64 / covered_s.max(f64::MIN_POSITIVE),
            latency_us_p95: (weight > 0).then(|| weighted[0] / weight as f64),
            latency_us_p99: (weight > 0).then(|| weighted[1] / weight as f64),
        });
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "\
elapsed_s,operation,count,mean_us,p50_us,p95_us,p99_us,p999_us,max_us
1,READ,100,500,400,900,1200,1500,2000
1,ALL,150,500,400,900,1200,1500,2000
2,READ,0,,,,,,
2,ALL,50,600,500,1000,1300,1600,2100
1,UPDATE,50,700,600,1100,1400,1700,2200
2,UPDATE,50,800,700,1200,1500,1800,2300
";

    fn points(values: &[(f64, u64, Option<f64>)]) -> Vec<Point> {
        values
            .iter()
            .map(|&(elapsed_s, count, p95)| Point {
                elapsed_s,
                count,
                length_s: 1.0,
                latency_us_p95: p95,
                latency_us_p99: p95.map(|v| v * 2.0),
            })
            .collect()
    }

    #[test]
    fn rows_group_by_operation_and_empty_seconds_have_no_latency() {
        let series = TimeSeries::parse(CSV).unwrap_or_default();
        assert_eq!(series.operations.len(), 3);
        let read = &series.operations["READ"];
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].latency_us_p95, Some(900.0));
        assert_eq!(read[1].count, 0);
        assert_eq!(read[1].latency_us_p95, None);
        assert_eq!(series.total().len(), 2);
    }

    #[test]
    fn without_all_rows_the_total_sums_the_measured_operations() {
        let csv = "operation,elapsed_s,count,p95_us,p99_us\nREAD,1,10,1,2\nUPDATE,1,5,1,2\n\
                   Intended-READ,1,10,1,2\n";
        let total = TimeSeries::parse(csv).unwrap_or_default().total();
        assert_eq!(total.len(), 1);
        assert_eq!(total[0].count, 15);
    }

    #[test]
    fn malformed_rows_and_headers_are_reported() {
        let missing = TimeSeries::parse("elapsed_s,operation,count\n");
        assert_eq!(missing, Err(CsvError::MissingColumn("p95_us")));
        let bad = TimeSeries::parse(&format!("{CSV}x,READ,1,,,,,,\n"));
        assert!(matches!(bad, Err(CsvError::BadRow { line: 8, .. })));
    }

    #[test]
    fn the_window_keeps_the_points_under_the_limit() {
        assert_eq!(window_s(43_200.0, 0.0, 2_000), 22.0);
        assert_eq!(window_s(60.0, 0.0, 2_000), 1.0);
        assert_eq!(window_s(60.0, 10.0, 2_000), 10.0);
        let twelve_hours: Vec<Point> = (1..=43_200)
            .map(|s| Point {
                elapsed_s: s as f64,
                count: 100,
                length_s: 1.0,
                latency_us_p95: Some(1.0),
                latency_us_p99: Some(2.0),
            })
            .collect();
        let samples = resample(&twelve_hours, window_s(43_200.0, 0.0, 2_000));
        assert!(samples.len() <= 2_000, "{}", samples.len());
        assert!(samples.iter().all(|s| (s.ops_per_sec - 100.0).abs() < 1e-9));
    }

    #[test]
    fn a_window_averages_throughput_and_weights_percentiles_by_count() {
        let samples = resample(
            &points(&[
                (1.0, 100, Some(1000.0)),
                (2.0, 300, Some(2000.0)),
                (3.0, 0, None),
                (4.0, 200, Some(500.0)),
                (5.0, 50, Some(100.0)),
            ]),
            2.0,
        );
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0].ops_per_sec, 200.0);
        assert_eq!(samples[0].latency_us_p95, Some(1750.0));
        assert_eq!(samples[0].elapsed_s, 1.0);
        assert_eq!(samples[1].ops_per_sec, 100.0);
        assert_eq!(samples[1].latency_us_p95, Some(500.0));
        // The last window has one second of the two.
        assert_eq!(samples[2].ops_per_sec, 50.0);
        let raw = resample(&points(&[(1.0, 7, None), (2.0, 9, Some(3.0))]), 1.0);
        assert_eq!(raw.len(), 2);
        assert_eq!(raw[0].latency_us_p95, None);
        assert_eq!(raw[1].ops_per_sec, 9.0);
    }

    /// The run's last second, cut short, is plotted at its rate, not as a whole second that
    /// seems to drop at the end of every run.
    #[test]
    fn a_last_partial_second_counts_at_its_length() {
        let csv = "elapsed_s,operation,count,p95_us,p99_us,length_s\n\
                   1,ALL,1000,1,2,1.000\n2,ALL,1000,1,2,1.000\n3,ALL,250,1,2,0.250\n";
        let total = TimeSeries::parse(csv).unwrap_or_default().total();
        assert_eq!(total[2].length_s, 0.25);
        let per_second = resample(&total, 1.0);
        assert_eq!(per_second.len(), 3);
        assert!(
            per_second.iter().all(|s| (s.ops_per_sec - 1000.0).abs() < 1e-9),
            "{per_second:?}"
        );
        // In a window the run fills to its end: 2,250 operations in 2.25 s.
        let window = resample(&total, 3.0);
        assert_eq!(window.len(), 1);
        assert!((window[0].ops_per_sec - 1000.0).abs() < 1e-9, "{window:?}");
        // An older file, without the column: every row a whole second.
        let old = "elapsed_s,operation,count,p95_us,p99_us\n1,ALL,1000,1,2\n";
        assert_eq!(
            TimeSeries::parse(old).unwrap_or_default().total()[0].length_s,
            1.0
        );
        let bad = TimeSeries::parse("elapsed_s,operation,count,p95_us,p99_us,length_s\n1,ALL,1,1,2,0\n");
        assert!(matches!(bad, Err(CsvError::BadRow { line: 2, .. })), "{bad:?}");
    }
}
