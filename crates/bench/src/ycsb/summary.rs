//! YCSB's output, character for character where parsers look: the end-of-run block written by
//! `TextMeasurementsExporter` (or the JSON exporters), and the `-s` status line of `StatusThread`.
//!
//! ```text
//! [OVERALL], RunTime(ms), 10110
//! [OVERALL], Throughput(ops/sec), 98.91196834817013
//! [READ], Operations, 480
//! [READ], AverageLatency(us), 317.7104166666667
//! [READ], MinLatency(us), 201
//! [READ], MaxLatency(us), 17983
//! [READ], 95thPercentileLatency(us), 437
//! [READ], 99thPercentileLatency(us), 561
//! [READ], Return=OK, 480
//! ```
//!
//! Numbers print as Java prints them: `long`s plainly, `double`s with `Double.toString` (always a
//! decimal point, `E` notation outside [10^-3, 10^7)), and status figures with `#.##`.

use std::fmt::Write;

use hdrhistogram::Histogram;

use super::measure::{Counts, Metric, Op, Status};

/// One `[metric], measurement, value` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub metric: String,
    pub measurement: String,
    pub value: Number,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Long(i64),
    Double(f64),
}

impl Number {
    fn java(self) -> String {
        match self {
            Number::Long(v) => v.to_string(),
            Number::Double(v) => java_double(v),
        }
    }
}

fn line(metric: &str, measurement: &str, value: Number) -> Line {
    Line {
        metric: metric.to_string(),
        measurement: measurement.to_string(),
        value,
    }
}

/// Every line of the end-of-run block. `ops_done` is YCSB's `opsDone` (operations that
/// completed their loop iteration), `runtime_ms` the time from the workers' start to the last
/// one's end.
pub fn summary_lines(runtime_ms: u64, ops_done: u64, totals: &Counts, percentiles: &[f64]) -> Vec<Line> {
    let mut out = vec![
        line("OVERALL", "RunTime(ms)", Number::Long(runtime_ms as i64)),
        line(
            "OVERALL",
            "Throughput(ops/sec)",
            Number::Double(1000.0 * ops_done as f64 / runtime_ms as f64),
        ),
        // The JVM's garbage-collector lines, which parsers expect; a Rust client has none.
        line("TOTAL_GCs", "Count", Number::Long(0)),
        line("TOTAL_GC_TIME", "Time(ms)", Number::Long(0)),
        line("TOTAL_GC_TIME_%", "Time(%)", Number::Double(0.0)),
    ];
    // YCSB prints the measured series, then the intended ones; within each, this order.
    for intended in [false, true] {
        for op in Op::ALL {
            for failed in [false, true] {
                let metric = Metric::op(op, failed, intended);
                let returns = &totals.returns[op as usize];
                let has_returns = !failed && !intended && returns.iter().any(|&n| n > 0);
                let histogram = totals.get(metric);
                if histogram.is_none() && !has_returns {
                    continue;
                }
                let empty;
                let h = match histogram {
                    Some(h) => h,
                    None => {
                        empty = super::measure::new_histogram();
                        &empty
                    }
                };
                histogram_lines(&mut out, &metric.name(), h, percentiles);
                if has_returns {
                    for status in Status::ALL {
                        let n = returns[status as usize];
                        if n > 0 {
                            out.push(line(
                                &metric.name(),
                                &format!("Return={}", status.name()),
                                Number::Long(n as i64),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

/// `OneMeasurementHdrHistogram.exportMeasurements`, without the return codes.
fn histogram_lines(out: &mut Vec<Line>, name: &str, h: &Histogram<u64>, percentiles: &[f64]) {
    out.push(line(name, "Operations", Number::Long(h.len() as i64)));
    out.push(line(name, "AverageLatency(us)", Number::Double(h.mean())));
    out.push(line(name, "MinLatency(us)", Number::Long(h.min() as i64)));
    out.push(line(
        name,
        "MaxLatency(us)",
        Number::Long(if h.is_empty() { 0 } else { h.max() as i64 }),
    ));
    for &p in percentiles {
        out.push(line(
            name,
            &format!("{}PercentileLatency(us)", ordinal(p)),
            Number::Long(h.value_at_percentile(p) as i64),
        ));
    }
}

/// `TextMeasurementsExporter`.
pub fn format_text(lines: &[Line]) -> String {
    let mut s = String::new();
    for l in lines {
        writeln!(s, "[{}], {}, {}", l.metric, l.measurement, l.value.java()).expect("String write");
    }
    s
}

/// `JSONArrayMeasurementsExporter` (`array = true`) or `JSONMeasurementsExporter` (a sequence
/// of objects, as that exporter writes them).
pub fn format_json(lines: &[Line], array: bool) -> String {
    let objects: Vec<String> = lines
        .iter()
        .map(|l| {
            let value = match l.value {
                Number::Long(v) => serde_json::Value::from(v),
                // JSON has no NaN; Jackson writes it as a string "NaN".
                Number::Double(v) if !v.is_finite() => serde_json::Value::from(java_double(v)),
                Number::Double(v) => serde_json::Value::from(v),
            };
            serde_json::json!({"metric": l.metric, "measurement": l.measurement, "value": value}).to_string()
        })
        .collect();
    if array {
        format!("[{}]\n", objects.join(",\n"))
    } else {
        objects.join("\n") + "\n"
    }
}

/// `OneMeasurementHdrHistogram.ordinal`: `95` → `95th`, `99.9` → `99.9`.
pub fn ordinal(p: f64) -> String {
    if p.fract() == 0.0 {
        let j = p as i64;
        let suffix = match (j % 100, j % 10) {
            (11..=13, _) => "th",
            (_, 1) => "st",
            (_, 2) => "nd",
            (_, 3) => "rd",
            _ => "th",
        };
        format!("{j}{suffix}")
    } else {
        java_double(p)
    }
}

/// `hdrhistogram.percentiles`: a comma list; YCSB falls back to its default when unreadable.
pub fn parse_percentiles(text: &str) -> Option<Vec<f64>> {
    let parsed: Result<Vec<f64>, _> = text.split(',').map(|p| p.trim().parse::<f64>()).collect();
    parsed
        .ok()
        .filter(|v| !v.is_empty() && v.iter().all(|p| (0.0..=100.0).contains(p)))
}

/// Java's `Double.toString`.
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let a = v.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{v}");
        if s.contains('.') {
            s
        } else {
            s + ".0"
        }
    } else {
        let s = format!("{v:e}");
        let (mantissa, exponent) = s.split_once('e').expect("{:e} has an exponent");
        if mantissa.contains('.') {
            format!("{mantissa}E{exponent}")
        } else {
            format!("{mantissa}.0E{exponent}")
        }
    }
}

/// Java's `new DecimalFormat("#.##").format(v)`: at most two decimals, no trailing zeros.
pub fn decimal_2(v: f64) -> String {
    if !v.is_finite() {
        return java_double(v);
    }
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// `StatusThread.computeStats`'s line:
/// `<label><yyyy-MM-dd HH:mm:ss:SSS> 10 sec: 12345 operations; 1234.5 current ops/sec; est
/// completion in 1 minute [READ: Count=…, Max=…, Min=…, Avg=…, 90=…, 99=…, 99.9=…, 99.99=…] `.
pub struct StatusFigures<'a> {
    pub label: &'a str,
    pub unix_ms: u64,
    pub elapsed_ms: u64,
    pub total_ops: u64,
    pub interval_ops: u64,
    pub interval_ms: u64,
    pub todo_ops: u64,
}

pub fn status_line(f: &StatusFigures<'_>, series: &[(String, &Histogram<u64>)]) -> String {
    let mut msg = format!(
        "{}{} {} sec: {} operations; ",
        f.label,
        timestamp(f.unix_ms),
        f.elapsed_ms / 1000,
        f.total_ops
    );
    if f.total_ops != 0 {
        let current = 1000.0 * f.interval_ops as f64 / f.interval_ms as f64;
        write!(msg, "{} current ops/sec; ", decimal_2(current)).expect("String write");
    }
    if f.todo_ops != 0 {
        let throughput = 1000.0 * f.total_ops as f64 / f.elapsed_ms as f64;
        let remaining = (f.todo_ops as f64 / throughput).ceil();
        // Java's `(long)` cast: NaN (no time elapsed yet) is 0, infinity (no operations yet)
        // is Long.MAX_VALUE.
        let remaining_s = if remaining.is_nan() {
            0
        } else if remaining.is_finite() {
            remaining as u64
        } else {
            i64::MAX as u64
        };
        write!(msg, "est completion in {}", remaining_text(remaining_s)).expect("String write");
    }
    for (name, h) in series {
        write!(
            msg,
            "[{name}: Count={}, Max={}, Min={}, Avg={}, 90={}, 99={}, 99.9={}, 99.99={}] ",
            h.len(),
            if h.is_empty() { 0 } else { h.max() },
            h.min(),
            decimal_2(h.mean()),
            h.value_at_percentile(90.0),
            h.value_at_percentile(99.0),
            h.value_at_percentile(99.9),
            h.value_at_percentile(99.99),
        )
        .expect("String write");
    }
    msg
}

/// `RemainingFormatter.format`: days and hours, minutes below a day, seconds only alone.
pub fn remaining_text(seconds: u64) -> String {
    let mut s = String::new();
    let days = seconds / 86_400;
    let mut rest = seconds % 86_400;
    if days > 0 {
        write!(s, "{days} {} ", if days == 1 { "day" } else { "days" }).expect("String write");
    }
    let hours = rest / 3600;
    rest %= 3600;
    if hours > 0 {
        write!(s, "{hours} {} ", if hours == 1 { "hour" } else { "hours" }).expect("String write");
    }
    if days < 1 {
        let minutes = rest / 60;
        if minutes > 0 {
            write!(
                s,
                "{minutes} {} ",
                if minutes == 1 { "minute" } else { "minutes" }
            )
            .expect("String write");
        }
    }
    if s.is_empty() {
        write!(s, "{seconds} seconds ").expect("String write");
    }
    s
}

/// `yyyy-MM-dd HH:mm:ss:SSS` in UTC (YCSB prints local time; UTC keeps this tool free of a
/// time-zone database, and parsers read the `sec:` figure, not the clock).
pub fn timestamp(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}:{:03}",
        t / 3600,
        t % 3600 / 60,
        t % 60,
        unix_ms % 1000
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::measure::{Interval, Recorder, Sample};

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double(98.91196834817013), "98.91196834817013");
        assert_eq!(java_double(2219.0), "2219.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(java_double(f64::INFINITY), "Infinity");
        assert_eq!(java_double(1.0e7), "1.0E7");
        assert_eq!(java_double(12345678.9), "1.23456789E7");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(0.5), "0.5");
    }

    #[test]
    fn decimal_format_and_ordinals() {
        assert_eq!(decimal_2(1234.5), "1234.5");
        assert_eq!(decimal_2(1234.0), "1234");
        assert_eq!(decimal_2(12.346), "12.35");
        assert_eq!(decimal_2(0.001), "0");
        assert_eq!(ordinal(95.0), "95th");
        assert_eq!(ordinal(99.0), "99th");
        assert_eq!(ordinal(1.0), "1st");
        assert_eq!(ordinal(11.0), "11th");
        assert_eq!(ordinal(22.0), "22nd");
        assert_eq!(ordinal(99.9), "99.9");
        assert_eq!(parse_percentiles("95,99"), Some(vec![95.0, 99.0]));
        assert_eq!(parse_percentiles("50, 99.9"), Some(vec![50.0, 99.9]));
        assert_eq!(parse_percentiles("x"), None);
    }

    #[test]
    fn summary_block_has_ycsbs_lines() {
        let r = Recorder::new(1, Interval::Op);
        for us in [100, 200, 300] {
            r.record(
                0,
                &[Sample {
                    op: Op::Read,
                    status: Some(Status::Ok),
                    measured_us: us,
                    intended_us: us,
                }],
                Some((us, us)),
            );
        }
        let err = Sample {
            op: Op::Update,
            status: Some(Status::Error),
            measured_us: 50,
            intended_us: 50,
        };
        r.record(0, &[err], Some((50, 50)));
        r.record(
            0,
            &[Sample {
                op: Op::Cleanup,
                status: None,
                measured_us: 3,
                intended_us: 3,
            }],
            None,
        );
        let mut totals = Counts::default();
        r.drain(&mut totals);
        let text = format_text(&summary_lines(2000, 4, &totals, &[95.0, 99.0]));
        let expected = "\
[OVERALL], RunTime(ms), 2000
[OVERALL], Throughput(ops/sec), 2.0
[TOTAL_GCs], Count, 0
[TOTAL_GC_TIME], Time(ms), 0
[TOTAL_GC_TIME_%], Time(%), 0.0
[READ], Operations, 3
[READ], AverageLatency(us), 200.0
[READ], MinLatency(us), 100
[READ], MaxLatency(us), 300
[READ], 95thPercentileLatency(us), 300
[READ], 99thPercentileLatency(us), 300
[READ], Return=OK, 3
[UPDATE], Operations, 0
[UPDATE], AverageLatency(us), 0.0
[UPDATE], MinLatency(us), 0
[UPDATE], MaxLatency(us), 0
[UPDATE], 95thPercentileLatency(us), 0
[UPDATE], 99thPercentileLatency(us), 0
[UPDATE], Return=ERROR, 1
[UPDATE-FAILED], Operations, 1
[UPDATE-FAILED], AverageLatency(us), 50.0
[UPDATE-FAILED], MinLatency(us), 50
[UPDATE-FAILED], MaxLatency(us), 50
[UPDATE-FAILED], 95thPercentileLatency(us), 50
[UPDATE-FAILED], 99thPercentileLatency(us), 50
[CLEANUP], Operations, 1
[CLEANUP], AverageLatency(us), 3.0
[CLEANUP], MinLatency(us), 3
[CLEANUP], MaxLatency(us), 3
[CLEANUP], 95thPercentileLatency(us), 3
[CLEANUP], 99thPercentileLatency(us), 3
";
        assert_eq!(text, expected);
        let json = format_json(&summary_lines(2000, 4, &totals, &[95.0]), true);
        let parsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(parsed[0]["metric"], "OVERALL");
        assert_eq!(parsed[1]["value"], 2.0);
    }

    #[test]
    fn status_line_reads_like_ycsbs() {
        let mut h = crate::ycsb::measure::new_histogram();
        h.record(120).expect("record");
        h.record(80).expect("record");
        let f = StatusFigures {
            label: "",
            unix_ms: 86_400_000 + 3_723_004,
            elapsed_ms: 10_050,
            total_ops: 12345,
            interval_ops: 2000,
            interval_ms: 1000,
            todo_ops: 1000,
        };
        let line = status_line(&f, &[("READ".to_string(), &h)]);
        assert_eq!(
            line,
            "1970-01-02 01:02:03:004 10 sec: 12345 operations; 2000 current ops/sec; est completion in 1 seconds \
             [READ: Count=2, Max=120, Min=80, Avg=100, 90=120, 99=120, 99.9=120, 99.99=120] "
        );
        assert_eq!(remaining_text(3 * 86_400 + 7200 + 61), "3 days 2 hours ");
        assert_eq!(remaining_text(3661), "1 hour 1 minute ");
        assert_eq!(remaining_text(59), "59 seconds ");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29 00:00:00:000");
    }
}
