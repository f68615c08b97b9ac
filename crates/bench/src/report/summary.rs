//! YCSB's summary block (`summary.txt`): lines of `[SECTION], Metric, value`.
//!
//! Real YCSB writes the same lines, among others (status lines, warnings, GC counts); anything
//! that is not a `[SECTION], metric, number` triple is skipped, so a summary captured from YCSB's
//! standard output still parses.

use std::collections::BTreeMap;

/// Bounds the map a hostile or corrupt file could grow; a real summary has a few hundred lines.
pub const SUMMARY_ENTRIES_MAX: usize = 100_000;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// `section -> metric -> value`, e.g. `READ -> 95thPercentileLatency(us) -> 2000`.
    sections: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Summary {
    pub fn parse(text: &str) -> Summary {
        let mut summary = Summary::default();
        let mut entries = 0;
        for line in text.lines() {
            let Some((section, metric, value)) = parse_line(line) else {
                continue;
            };
            if entries == SUMMARY_ENTRIES_MAX {
                break;
            }
            entries += 1;
            summary
                .sections
                .entry(section.to_string())
                .or_default()
                .insert(metric.to_string(), value);
        }
        summary
    }

    pub fn get(&self, section: &str, metric: &str) -> Option<f64> {
        self.sections.get(section)?.get(metric).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    pub fn run_time_ms(&self) -> Option<f64> {
        self.get("OVERALL", "RunTime(ms)")
    }

    pub fn throughput_ops_per_sec(&self) -> Option<f64> {
        self.get("OVERALL", "Throughput(ops/sec)")
    }

    pub fn operations(&self, op: &str) -> Option<f64> {
        self.get(op, "Operations")
    }

    pub fn latency_us_p95(&self, op: &str) -> Option<f64> {
        self.get(op, "95thPercentileLatency(us)")
    }

    pub fn latency_us_p99(&self, op: &str) -> Option<f64> {
        self.get(op, "99thPercentileLatency(us)")
    }

    /// Inserts per second over the whole run: YCSB's load phase is all inserts, so this is the
    /// "insert rate" of the reference benchmark.
    pub fn insert_rate_ops_per_sec(&self) -> Option<f64> {
        let inserts = self.operations("INSERT")?;
        let run_time_ms = self.run_time_ms()?;
        (run_time_ms > 0.0).then(|| inserts * 1000.0 / run_time_ms)
    }
}

/// `[READ], 95thPercentileLatency(us), 2000` → `("READ", "95thPercentileLatency(us)", 2000.0)`.
fn parse_line(line: &str) -> Option<(&str, &str, f64)> {
    let line = line.trim();
    let rest = line.strip_prefix('[')?;
    let (section, rest) = rest.split_once(']')?;
    let rest = rest.trim_start().strip_prefix(',')?;
    let (metric, value) = rest.rsplit_once(',')?;
    let metric = metric.trim();
    let value: f64 = value.trim().parse().ok()?;
    if section.is_empty() || metric.is_empty() || !value.is_finite() {
        return None;
    }
    Some((section.trim(), metric, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const YCSB: &str = "\
Loading workload...
Starting test.
[OVERALL], RunTime(ms), 10110
[OVERALL], Throughput(ops/sec), 98.91196834817013
[TOTAL_GCS_PS_Scavenge], Count, 1
[READ], Operations, 511
[READ], AverageLatency(us), 1234.5
[READ], MinLatency(us), 100
[READ], MaxLatency(us), 9000
[READ], 95thPercentileLatency(us), 2000
[READ], 99thPercentileLatency(us), 3000
[READ], Return=OK, 511
[READ-MODIFY-WRITE], Operations, 7
[CLEANUP], Operations, 1
[Intended-READ], 95thPercentileLatency(us), 2100
[INSERT], Operations, 1000
[UPDATE], 95thPercentileLatency(us), 700
2024-01-01 12:00:00:000 10 sec: 1000 operations; 98.9 current ops/sec;
[READ], Return=NOT_FOUND, n/a
[broken line
";

    #[test]
    fn ycsb_lines_parse_and_the_rest_is_ignored() {
        let summary = Summary::parse(YCSB);
        assert_eq!(summary.run_time_ms(), Some(10110.0));
        assert_eq!(summary.throughput_ops_per_sec(), Some(98.91196834817013));
        assert_eq!(summary.operations("READ"), Some(511.0));
        assert_eq!(summary.latency_us_p95("READ"), Some(2000.0));
        assert_eq!(summary.latency_us_p99("READ"), Some(3000.0));
        assert_eq!(summary.latency_us_p95("UPDATE"), Some(700.0));
        assert_eq!(summary.latency_us_p95("Intended-READ"), Some(2100.0));
        assert_eq!(summary.operations("READ-MODIFY-WRITE"), Some(7.0));
        assert_eq!(summary.get("READ", "Return=NOT_FOUND"), None);
        assert_eq!(summary.latency_us_p99("SCAN"), None);
    }

    #[test]
    fn the_insert_rate_is_inserts_over_run_time() {
        let summary = Summary::parse(YCSB);
        let rate = summary.insert_rate_ops_per_sec().unwrap_or(0.0);
        assert!((rate - 1000.0 / 10.11).abs() < 1e-9);
        assert_eq!(Summary::parse("").insert_rate_ops_per_sec(), None);
        assert!(Summary::parse("garbage\n[,],\n").is_empty());
    }
}
