//! The latency table of ACT's `act_latency.py`, computed in process: per time slice (an hour by
//! default) the percentage of operations slower than 1, 2, 4 … 64 ms, then the average and the
//! worst slice, and the pass/fail verdict on ACT's criteria.

use std::fmt::Write as _;

use super::histogram::{Scale, THRESHOLD_COUNT};
use super::load::{Kind, TwinSnapshot};

/// ACT's performance criteria, over every slice: (threshold index, largest allowed percentage).
/// Threshold `t` is `2^t` ms: fewer than 5% over 1 ms, 1% over 8 ms, 0.1% over 64 ms.
pub const CRITERIA: [(usize, f64); 3] = [(0, 5.0), (3, 1.0), (6, 0.1)];

/// A slice table keeps a row per slice; a 24-hour test has 24. This bounds a test run with a
/// tiny `--slice-sec`.
pub const SLICE_COUNT_MAX: u64 = 10_000;

const GAP: &str = "  ";
const COLUMN_WIDTH: usize = 7;

/// One column group of the table: a histogram and its slices.
pub struct Column {
    pub kind: Kind,
    /// Operations in each slice, in order.
    pub slices: Vec<TwinSnapshot>,
    /// The whole run, including a last slice cut short.
    pub whole: TwinSnapshot,
}

pub struct Table {
    pub scale: Scale,
    pub slice_sec: u64,
    pub columns: Vec<Column>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub kind: Kind,
    /// The worst slice's percentage for each criterion, in the order of [`CRITERIA`].
    pub worst_percent: [f64; CRITERIA.len()],
    pub pass: bool,
}

impl Table {
    fn slice_count(&self) -> usize {
        self.columns.first().map_or(0, |c| c.slices.len())
    }

    pub fn render(&self) -> String {
        let width = THRESHOLD_COUNT * COLUMN_WIDTH;
        let prefix = "slice";
        let mut names = " ".repeat(prefix.len());
        let mut units = " ".repeat(prefix.len());
        let mut labels = prefix.to_string();
        let mut underline = "-".repeat(prefix.len());
        for column in &self.columns {
            let _ = write!(names, "{GAP} {:<w$}", column.kind.name(), w = width - 1);
            let _ = write!(
                units,
                "{GAP} {:<w$}",
                format!("%>({})", self.scale.label()),
                w = width - 1
            );
            labels.push_str(GAP);
            underline.push_str(GAP);
            for t in 0..THRESHOLD_COUNT {
                let _ = write!(labels, "{:>w$}", 1u64 << t, w = COLUMN_WIDTH);
                underline.push_str(" ------");
            }
        }
        let mut out = String::new();
        for line in [&names, &units, &labels, &underline] {
            let _ = writeln!(out, "{}", line.trim_end());
        }
        let row = |out: &mut String, label: &str, values: &dyn Fn(&Column) -> [f64; THRESHOLD_COUNT]| {
            let _ = write!(out, "{label:>5}");
            for column in &self.columns {
                out.push_str(GAP);
                for value in values(column) {
                    let _ = write!(out, "{value:>w$.2}", w = COLUMN_WIDTH);
                }
            }
            out.push('\n');
        };
        let scale = self.scale;
        for slice in 0..self.slice_count() {
            row(&mut out, &(slice + 1).to_string(), &|c| {
                c.slices[slice].at(scale).percents_over()
            });
        }
        let _ = writeln!(out, "{}", underline.trim_end());
        row(&mut out, "avg", &|c| {
            let mut sum = [0.0; THRESHOLD_COUNT];
            for slice in &c.slices {
                for (s, v) in sum.iter_mut().zip(slice.at(scale).percents_over()) {
                    *s += v;
                }
            }
            sum.map(|s| s / c.slices.len().max(1) as f64)
        });
        row(&mut out, "max", &|c| {
            let mut max = [0.0f64; THRESHOLD_COUNT];
            for slice in &c.slices {
                for (m, v) in max.iter_mut().zip(slice.at(scale).percents_over()) {
                    *m = m.max(v);
                }
            }
            max
        });
        row(&mut out, "all", &|c| c.whole.at(scale).percents_over());
        let _ = write!(out, "  ops");
        for column in &self.columns {
            let _ = write!(out, "{GAP}{:>w$}", column.whole.ms.total(), w = width);
        }
        out.push('\n');
        out
    }

    /// ACT's criteria applied to every slice of the judged histograms, in milliseconds whatever
    /// the table shows.
    pub fn judge(&self) -> Vec<Judgement> {
        self.columns
            .iter()
            .filter(|c| c.kind.judged())
            .map(|column| {
                let mut worst_percent = [0.0f64; CRITERIA.len()];
                for slice in &column.slices {
                    let over = slice.ms.percents_over();
                    for (worst, (threshold, _)) in worst_percent.iter_mut().zip(CRITERIA) {
                        *worst = worst.max(over[threshold]);
                    }
                }
                let pass = worst_percent
                    .iter()
                    .zip(CRITERIA)
                    .all(|(worst, (_, limit))| *worst < limit);
                Judgement {
                    kind: column.kind,
                    worst_percent,
                    pass,
                }
            })
            .collect()
    }
}

impl Judgement {
    pub fn describe(&self) -> String {
        let mut out = format!("{}: worst slice", self.kind.name());
        for (i, (worst, (threshold, limit))) in self.worst_percent.iter().zip(CRITERIA).enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                out,
                "{sep} {worst:.2}% > {} ms (limit {limit}%)",
                1u64 << threshold
            );
        }
        let _ = write!(out, ": {}", if self.pass { "PASS" } else { "FAIL" });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram::Snapshot;
    use super::*;

    /// A slice of `n` operations of which `slow[t]` took 2^t ms or more.
    fn slice(n: u64, over_1ms: u64, over_8ms: u64, over_64ms: u64) -> TwinSnapshot {
        let mut ms = Snapshot::default();
        ms.counts[0] = n - over_1ms;
        ms.counts[1] = over_1ms - over_8ms;
        ms.counts[4] = over_8ms - over_64ms;
        ms.counts[7] = over_64ms;
        TwinSnapshot {
            ms,
            us: Snapshot::default(),
        }
    }

    fn table(slices: Vec<TwinSnapshot>) -> Table {
        let mut whole = TwinSnapshot::default();
        for s in &slices {
            for b in 0..s.ms.counts.len() {
                whole.ms.counts[b] += s.ms.counts[b];
            }
        }
        Table {
            scale: Scale::Milliseconds,
            slice_sec: 3600,
            columns: vec![Column {
                kind: Kind::Reads,
                slices,
                whole,
            }],
        }
    }

    #[test]
    fn a_device_under_every_limit_passes() {
        let judged = table(vec![slice(10_000, 499, 99, 9), slice(10_000, 100, 0, 0)]).judge();
        assert_eq!(judged.len(), 1);
        assert!(judged[0].pass, "{}", judged[0].describe());
        assert!((judged[0].worst_percent[0] - 4.99).abs() < 1e-9);
    }

    #[test]
    fn one_bad_hour_fails_the_device_even_if_the_average_is_fine() {
        // Hour 3 has 5% over 1 ms: exactly at the limit, which ACT's "under 5%" refuses.
        let judged = table(vec![
            slice(10_000, 0, 0, 0),
            slice(10_000, 0, 0, 0),
            slice(10_000, 500, 0, 0),
        ])
        .judge();
        assert!(!judged[0].pass);
        for (over_8ms, over_64ms) in [(100, 0), (10, 10)] {
            let judged = table(vec![slice(10_000, 200, over_8ms, over_64ms)]).judge();
            assert!(!judged[0].pass, "{}", judged[0].describe());
        }
    }

    #[test]
    fn the_table_has_act_latencys_columns_and_aggregate_rows() {
        let rendered = table(vec![slice(100, 10, 1, 0), slice(100, 0, 0, 0)]).render();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines[0].trim(), "reads");
        assert_eq!(lines[1].trim(), "%>(ms)");
        assert_eq!(
            lines[2],
            "slice        1      2      4      8     16     32     64"
        );
        assert_eq!(
            lines[4],
            "    1    10.00   1.00   1.00   1.00   0.00   0.00   0.00"
        );
        assert_eq!(
            lines[5],
            "    2     0.00   0.00   0.00   0.00   0.00   0.00   0.00"
        );
        assert!(lines[7].starts_with("  avg     5.00   0.50"), "{}", lines[7]);
        assert!(lines[8].starts_with("  max    10.00   1.00"), "{}", lines[8]);
        assert!(lines[9].starts_with("  all     5.00   0.50"), "{}", lines[9]);
        assert!(lines[10].trim_end().ends_with("200"), "{}", lines[10]);
    }
}
