//! The summary table of the reference benchmark (its Table 1): per run, throughput, p95 and p99
//! read and update latency and insert rate, and, against a baseline, how many times higher the
//! throughput and how many times lower the latency.

use std::fmt::Write as _;

use super::chart::escape;
use super::run::RunData;

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub phase: String,
    pub threads: Option<u64>,
    pub run_time_s: Option<f64>,
    pub throughput_ops_per_sec: Option<f64>,
    pub read_us_p95: Option<f64>,
    pub read_us_p99: Option<f64>,
    pub update_us_p95: Option<f64>,
    pub update_us_p99: Option<f64>,
    pub insert_ops_per_sec: Option<f64>,
}

impl Row {
    pub fn of(run: &RunData) -> Row {
        let s = &run.summary;
        Row {
            label: run.label.clone(),
            phase: run.phase.clone(),
            threads: run.threads,
            run_time_s: s.run_time_ms().map(|ms| ms / 1000.0),
            throughput_ops_per_sec: s.throughput_ops_per_sec(),
            read_us_p95: s.latency_us_p95("READ"),
            read_us_p99: s.latency_us_p99("READ"),
            update_us_p95: s.latency_us_p95("UPDATE"),
            update_us_p99: s.latency_us_p99("UPDATE"),
            insert_ops_per_sec: s.insert_rate_ops_per_sec(),
        }
    }
}

/// A run against the baseline run of the same phase. Throughput and insert rate: run ÷
/// baseline ("× higher"). Latencies: baseline ÷ run ("× lower").
#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    pub label: String,
    pub baseline: String,
    pub phase: String,
    pub throughput: Option<f64>,
    pub read_p95_lower: Option<f64>,
    pub read_p99_lower: Option<f64>,
    pub update_p95_lower: Option<f64>,
    pub update_p99_lower: Option<f64>,
    pub insert_rate: Option<f64>,
}

fn divide(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    let (n, d) = (numerator?, denominator?);
    (d > 0.0 && n.is_finite()).then(|| n / d)
}

/// Every non-baseline row against the baseline row of its phase (the first, if several).
pub fn ratios(rows: &[Row], baseline: &str) -> Vec<Ratio> {
    rows.iter()
        .filter(|row| row.label != baseline)
        .filter_map(|row| {
            let base = rows
                .iter()
                .find(|b| b.label == baseline && b.phase == row.phase)?;
            Some(Ratio {
                label: row.label.clone(),
                baseline: base.label.clone(),
                phase: row.phase.clone(),
                throughput: divide(row.throughput_ops_per_sec, base.throughput_ops_per_sec),
                read_p95_lower: divide(base.read_us_p95, row.read_us_p95),
                read_p99_lower: divide(base.read_us_p99, row.read_us_p99),
                update_p95_lower: divide(base.update_us_p95, row.update_us_p95),
                update_p99_lower: divide(base.update_us_p99, row.update_us_p99),
                insert_rate: divide(row.insert_ops_per_sec, base.insert_ops_per_sec),
            })
        })
        .collect()
}

const HEADERS: [&str; 10] = [
    "label",
    "phase",
    "threads",
    "run time (s)",
    "throughput (ops/s)",
    "read p95 (ms)",
    "read p99 (ms)",
    "update p95 (ms)",
    "update p99 (ms)",
    "insert rate (ops/s)",
];

const DASH: &str = "–";

fn number(value: Option<f64>, decimals: usize) -> String {
    value.map_or(DASH.to_string(), |v| format!("{v:.decimals$}"))
}

/// Latency in ms with three significant digits: 0.412, 4.12, 41.2, 412.
pub fn ms(value_us: Option<f64>) -> String {
    let Some(us) = value_us else {
        return DASH.to_string();
    };
    let ms = us / 1000.0;
    let decimals = if ms < 1.0 {
        3
    } else if ms < 10.0 {
        2
    } else if ms < 100.0 {
        1
    } else {
        0
    };
    format!("{ms:.decimals$}")
}

fn times(value: Option<f64>, suffix: &str) -> String {
    value.map_or(DASH.to_string(), |v| format!("{v:.2}×{suffix}"))
}

fn cells(row: &Row) -> [String; 10] {
    [
        row.label.clone(),
        row.phase.clone(),
        row.threads.map_or(DASH.to_string(), |t| t.to_string()),
        number(row.run_time_s, 1),
        number(row.throughput_ops_per_sec, 0),
        ms(row.read_us_p95),
        ms(row.read_us_p99),
        ms(row.update_us_p95),
        ms(row.update_us_p99),
        number(row.insert_ops_per_sec, 0),
    ]
}

fn ratio_cells(ratio: &Ratio) -> [String; 10] {
    [
        format!("{} / {}", ratio.label, ratio.baseline),
        ratio.phase.clone(),
        String::new(),
        String::new(),
        times(ratio.throughput, " higher"),
        times(ratio.read_p95_lower, " lower"),
        times(ratio.read_p99_lower, " lower"),
        times(ratio.update_p95_lower, " lower"),
        times(ratio.update_p99_lower, " lower"),
        times(ratio.insert_rate, " higher"),
    ]
}

/// The table as aligned text, for the terminal.
pub fn render_text(rows: &[Row], ratios: &[Ratio]) -> String {
    let mut lines: Vec<[String; 10]> = vec![HEADERS.map(str::to_string)];
    lines.extend(rows.iter().map(cells));
    lines.extend(ratios.iter().map(ratio_cells));
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let mut text = String::new();
        for (c, cell) in line.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c < 2 {
                let _ = write!(text, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(text, "{}{cell}  ", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
        if i == 0 || (i == rows.len() && !ratios.is_empty()) {
            let total: usize = widths.iter().map(|w| w + 2).sum();
            let _ = writeln!(out, "{}", "-".repeat(total.saturating_sub(2)));
        }
    }
    out
}

/// The table as HTML, ratio rows after the runs.
pub fn render_html(rows: &[Row], ratios: &[Ratio]) -> String {
    let mut out = String::from("<table class=\"summary\">\n<thead><tr>");
    for header in HEADERS {
        let _ = write!(out, "<th>{}</th>", escape(header));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in cells(row) {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    for ratio in ratios {
        out.push_str("<tr class=\"ratio\">");
        for cell in ratio_cells(ratio) {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, phase: &str, throughput: f64, read_p95_us: f64) -> Row {
        Row {
            label: label.to_string(),
            phase: phase.to_string(),
            threads: Some(8),
            run_time_s: Some(60.0),
            throughput_ops_per_sec: Some(throughput),
            read_us_p95: Some(read_p95_us),
            read_us_p99: None,
            update_us_p95: Some(read_p95_us),
            update_us_p99: Some(0.0),
            insert_ops_per_sec: None,
        }
    }

    #[test]
    fn ratios_are_higher_throughput_and_lower_latency_within_a_phase() {
        let rows = vec![
            row("cassandra", "run", 1_000.0, 42_000.0),
            row("hayate", "run", 14_000.0, 1_000.0),
            row("hayate", "load", 20_000.0, 1.0),
        ];
        let ratios = ratios(&rows, "cassandra");
        // The load row has no cassandra load row to compare with.
        assert_eq!(ratios.len(), 1);
        assert_eq!(ratios[0].throughput, Some(14.0));
        assert_eq!(ratios[0].read_p95_lower, Some(42.0));
        assert_eq!(ratios[0].read_p99_lower, None);
        // A zero latency cannot be divided by.
        assert_eq!(ratios[0].update_p99_lower, None);
        let text = render_text(&rows, &ratios);
        assert!(text.contains("hayate / cassandra"), "{text}");
        assert!(text.contains("14.00× higher"), "{text}");
        assert!(text.contains("42.00× lower"), "{text}");
        let html = render_html(&rows, &ratios);
        assert!(html.contains("<td>42.00× lower</td>"), "{html}");
    }

    #[test]
    fn latencies_show_three_significant_digits_in_ms() {
        assert_eq!(ms(Some(412.0)), "0.412");
        assert_eq!(ms(Some(4_123.0)), "4.12");
        assert_eq!(ms(Some(41_230.0)), "41.2");
        assert_eq!(ms(Some(412_300.0)), "412");
        assert_eq!(ms(None), "–");
    }
}
