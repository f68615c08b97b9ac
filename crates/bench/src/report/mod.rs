//! `hayate-bench report [-o OUTDIR] [--title T] [--baseline LABEL] RUNDIR...`: charts of
//! throughput and p95/p99 latency over time, one line per run (per system), as in Figures 1–7 of
//! the reference benchmark; SVG and PNG; and `index.html` with the summary table and, given a
//! baseline, the "× higher throughput, × lower latency" ratios of its Table 1.
//!
//! Exit status: 0 written, 2 bad command line or a run directory that cannot be read, 3 the
//! output could not be written.

mod chart;
mod png;
mod run;
mod summary;
mod table;
mod ticks;
mod timeseries;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use chart::{escape, Chart, Series};
use run::RunData;
use table::Row;
use timeseries::{Point, Sample};

const EXIT_USAGE: u8 = 2;
const EXIT_OUTPUT: u8 = 3;
/// A chart's lines need no more points than its width has pixels, twice over.
const POINTS_MAX_DEFAULT: usize = 2_000;
const POINTS_MAX_LIMIT: usize = 100_000;
/// Runs are lines on one chart; beyond a dozen no one can tell them apart.
const RUNS_MAX: usize = 32;
/// The operations YCSB measures, in the order the charts come.
const OPERATIONS: [&str; 6] = ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE", "DELETE"];
/// From this p95/p99 (µs) up, a latency axis reads better in milliseconds.
const LATENCY_MS_FROM_US: f64 = 5_000.0;

#[derive(Parser, Debug)]
#[command(
    name = "hayate-bench report",
    about = "Charts (SVG, PNG) and a summary page (index.html) of one or more runs"
)]
struct Args {
    /// Run directories written by `hayate-bench run -p rundir=DIR` (or holding a YCSB summary.txt).
    #[arg(required = true, value_name = "RUNDIR")]
    runs: Vec<PathBuf>,
    /// Directory to write index.html, *.svg and *.png into.
    #[arg(short = 'o', long = "out", value_name = "OUTDIR", default_value = "report")]
    out: PathBuf,
    /// Title of the page and prefix of the chart titles.
    #[arg(long, default_value = "hayate-bench")]
    title: String,
    /// Label of the run the others are compared with (e.g. cassandra).
    #[arg(long, value_name = "LABEL")]
    baseline: Option<String>,
    /// Average the lines over windows of this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    smooth: u64,
    /// Most points per line; longer runs are averaged down to it.
    #[arg(long, value_name = "N", default_value_t = POINTS_MAX_DEFAULT)]
    max_points: usize,
    /// Logarithmic latency axes, for runs whose latencies differ by orders of magnitude.
    #[arg(long)]
    log_latency: bool,
    /// PNG pixels per SVG unit (2 gives 1920×1080 images).
    #[arg(long, default_value_t = 2.0)]
    png_scale: f32,
}

pub fn main(args: &[String]) -> ExitCode {
    let argv = std::iter::once("hayate-bench report".to_string()).chain(args.iter().cloned());
    let args = match Args::try_parse_from(argv) {
        Ok(args) => args,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if args.max_points < 2 || args.max_points > POINTS_MAX_LIMIT {
        eprintln!("hayate-bench report: --max-points must be 2 to {POINTS_MAX_LIMIT}");
        return ExitCode::from(EXIT_USAGE);
    }
    if !(args.png_scale > 0.1 && args.png_scale <= 8.0) {
        eprintln!("hayate-bench report: --png-scale must be above 0.1 and at most 8");
        return ExitCode::from(EXIT_USAGE);
    }
    if args.runs.len() > RUNS_MAX {
        eprintln!("hayate-bench report: at most {RUNS_MAX} run directories");
        return ExitCode::from(EXIT_USAGE);
    }
    let mut runs = Vec::new();
    for dir in &args.runs {
        let mut warn = |message: String| eprintln!("hayate-bench report: warning: {message}");
        match RunData::load(dir, &mut warn) {
            Ok(run) => runs.push(run),
            Err(error) => {
                eprintln!("hayate-bench report: {error}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    disambiguate_labels(&mut runs);
    if let Some(baseline) = &args.baseline {
        if !runs.iter().any(|r| &r.label == baseline) {
            let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
            eprintln!(
                "hayate-bench report: no run is labelled '{baseline}'; the labels are: {}",
                labels.join(", ")
            );
            return ExitCode::from(EXIT_USAGE);
        }
    }
    match write_report(&args, &runs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hayate-bench report: {error}");
            ExitCode::from(EXIT_OUTPUT)
        }
    }
}

/// Two runs of one phase with one label would be indistinguishable lines: add the directory.
fn disambiguate_labels(runs: &mut [RunData]) {
    let keys: Vec<(String, String)> = runs.iter().map(|r| (r.label.clone(), r.phase.clone())).collect();
    for (i, run) in runs.iter_mut().enumerate() {
        if keys.iter().filter(|k| **k == keys[i]).count() > 1 {
            run.label = format!("{} ({})", run.label, run.dir.display());
        }
    }
}

/// A chart written to disk: its file stem and title, for the page.
struct Written {
    stem: String,
    title: String,
}

fn write_report(args: &Args, runs: &[RunData]) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let renderer = png::Renderer::new();
    let mut phases: Vec<&str> = Vec::new();
    for run in runs {
        if !phases.contains(&run.phase.as_str()) {
            phases.push(&run.phase);
        }
    }
    let mut sections = Vec::new();
    for phase in &phases {
        let charts = charts_of_phase(args, runs, phase);
        let mut written = Vec::new();
        for (stem, chart) in charts {
            let svg = chart.render_svg();
            write_file(&args.out.join(format!("{stem}.svg")), svg.as_bytes())?;
            let png = renderer
                .render(&svg, args.png_scale)
                .map_err(|e| format!("{stem}.png: {e}"))?;
            write_file(&args.out.join(format!("{stem}.png")), &png)?;
            written.push(Written {
                stem,
                title: chart.title,
            });
        }
        sections.push((phase.to_string(), written));
    }

    let rows: Vec<Row> = runs.iter().map(Row::of).collect();
    let ratios = args
        .baseline
        .as_deref()
        .map(|b| table::ratios(&rows, b))
        .unwrap_or_default();
    print!("{}", table::render_text(&rows, &ratios));
    let html = page(args, runs, &rows, &ratios, &sections);
    write_file(&args.out.join("index.html"), html.as_bytes())?;
    let chart_count: usize = sections.iter().map(|(_, w)| w.len()).sum();
    println!(
        "wrote {} with {chart_count} charts (SVG and PNG)",
        args.out.join("index.html").display()
    );
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What one line of one chart shows.
#[derive(Clone, Copy)]
enum Measure {
    Throughput,
    P95,
    P99,
}

/// The charts of one phase: total throughput, then per operation present in any run its
/// throughput and its p95 and p99 latency.
fn charts_of_phase(args: &Args, runs: &[RunData], phase: &str) -> Vec<(String, Chart)> {
    let runs: Vec<&RunData> = runs
        .iter()
        .filter(|r| r.phase == phase && r.series.is_some())
        .collect();
    let mut charts = Vec::new();
    if runs.is_empty() {
        return charts;
    }
    let phase_slug = slug(phase);
    let span_s = runs
        .iter()
        .filter_map(|r| r.series.as_ref())
        .flat_map(|s| s.operations.values())
        .filter_map(|points| points.last().map(|p| p.elapsed_s))
        .fold(1.0f64, f64::max);
    let window_s = timeseries::window_s(span_s, args.smooth as f64, args.max_points);
    let smoothing = if window_s > 1.0 {
        format!(", {window_s:.0} s average")
    } else {
        String::new()
    };

    let total: Vec<(String, Vec<Sample>)> = runs
        .iter()
        .filter_map(|r| {
            let points = r.series.as_ref()?.total();
            Some((r.label.clone(), timeseries::resample(&points, window_s)))
        })
        .collect();
    charts.push((
        format!("{phase_slug}-throughput"),
        line_chart(
            format!("{}: throughput, {phase} phase{smoothing}", args.title),
            "throughput (ops/s)".to_string(),
            &total,
            Measure::Throughput,
            false,
        ),
    ));

    for op in OPERATIONS {
        let per_run: Vec<(String, Vec<Sample>)> = runs
            .iter()
            .filter_map(|r| {
                let points: &Vec<Point> = r.series.as_ref()?.operations.get(op)?;
                if points.iter().all(|p| p.count == 0) {
                    return None;
                }
                Some((r.label.clone(), timeseries::resample(points, window_s)))
            })
            .collect();
        if per_run.is_empty() {
            continue;
        }
        let op_slug = slug(op);
        let op_lower = op.to_lowercase();
        charts.push((
            format!("{phase_slug}-{op_slug}-throughput"),
            line_chart(
                format!("{}: {op_lower} throughput, {phase} phase{smoothing}", args.title),
                format!("{op_lower} throughput (ops/s)"),
                &per_run,
                Measure::Throughput,
                false,
            ),
        ));
        for (measure, name) in [(Measure::P95, "p95"), (Measure::P99, "p99")] {
            charts.push((
                format!("{phase_slug}-{op_slug}-{name}"),
                line_chart(
                    format!(
                        "{}: {name} {op_lower} latency, {phase} phase{smoothing}",
                        args.title
                    ),
                    format!("{name} {op_lower} latency"),
                    &per_run,
                    measure,
                    args.log_latency,
                ),
            ));
        }
    }
    charts
}

fn line_chart(
    title: String,
    y_label: String,
    runs: &[(String, Vec<Sample>)],
    measure: Measure,
    log_y: bool,
) -> Chart {
    let value = |s: &Sample| match measure {
        Measure::Throughput => Some(s.ops_per_sec),
        Measure::P95 => s.latency_us_p95,
        Measure::P99 => s.latency_us_p99,
    };
    let (divisor, y_label) = match measure {
        Measure::Throughput => (1.0, y_label),
        Measure::P95 | Measure::P99 => {
            let max_us = runs
                .iter()
                .flat_map(|(_, samples)| samples.iter().filter_map(value))
                .fold(0.0f64, f64::max);
            if max_us >= LATENCY_MS_FROM_US {
                (1000.0, format!("{y_label} (ms)"))
            } else {
                (1.0, format!("{y_label} (µs)"))
            }
        }
    };
    Chart {
        title,
        y_label,
        log_y,
        series: runs
            .iter()
            .map(|(name, samples)| Series {
                name: name.clone(),
                points: samples
                    .iter()
                    .map(|s| (s.elapsed_s, value(s).map(|v| v / divisor)))
                    .collect(),
            })
            .collect(),
    }
}

fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

fn page(
    args: &Args,
    runs: &[RunData],
    rows: &[Row],
    ratios: &[table::Ratio],
    sections: &[(String, Vec<Written>)],
) -> String {
    let title = escape(&args.title);
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
         <style>\nbody {{ font-family: 'DejaVu Sans', sans-serif; margin: 2em; color: #222; }}\n\
         table.summary {{ border-collapse: collapse; margin: 1em 0; }}\n\
         table.summary th, table.summary td {{ border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }}\n\
         table.summary td:first-child, table.summary td:nth-child(2) {{ text-align: left; }}\n\
         table.summary tr.ratio td {{ font-weight: bold; background: #f4f4f4; }}\n\
         figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; border: 1px solid #eee; }}\n\
         </style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    html.push_str("<h2>Summary</h2>\n");
    html.push_str(&table::render_html(rows, ratios));
    if let Some(baseline) = &args.baseline {
        let _ = writeln!(
            html,
            "<p>Ratios against <b>{}</b>: throughput and insert rate are run ÷ baseline \
             (× higher); latencies are baseline ÷ run (× lower).</p>",
            escape(baseline)
        );
    }
    html.push_str("<p>Runs:</p>\n<ul>\n");
    for run in runs {
        let charted = if run.series.is_some() {
            ""
        } else {
            " (summary only: no timeseries.csv, not charted)"
        };
        let _ = writeln!(
            html,
            "<li><b>{}</b>: {}{}</li>",
            escape(&run.label),
            escape(&run.dir.display().to_string()),
            charted
        );
    }
    html.push_str("</ul>\n");
    for (phase, written) in sections {
        if written.is_empty() {
            continue;
        }
        let _ = writeln!(html, "<h2>{} phase</h2>", escape(phase));
        for chart in written {
            let stem = escape(&chart.stem);
            let _ = writeln!(
                html,
                "<figure><img src=\"{stem}.svg\" alt=\"{}\"><figcaption>{} \
                 (<a href=\"{stem}.png\">PNG</a>, <a href=\"{stem}.svg\">SVG</a>)</figcaption></figure>",
                escape(&chart.title),
                escape(&chart.title)
            );
        }
    }
    html.push_str(
        "<p>Latency lines are per-second percentiles averaged over each window, weighted by \
         operation count; the table's percentiles are the whole run's.</p>\n</body>\n</html>\n",
    );
    html
}
