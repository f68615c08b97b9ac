//! `hayate-bench load|run`: a YCSB-compatible client. It reads YCSB's workload files and command
//! line, draws keys and operations as YCSB's `CoreWorkload` does, issues the statements of YCSB's
//! Cassandra binding over CQL, and prints YCSB's summary block, so that existing YCSB scripts and
//! parsers work with the program name changed. With `-p rundir=DIR` it also writes a per-second
//! time series, an HdrHistogram interval log and a `meta.json` for `hayate-bench report`.
//!
//! The path of a run: `args` (command line) → `properties` → `workload` (generators, `keys`) and
//! `cql` (the binding) → `runner` (workers, `throttle`, `measure`, reporter) → `summary` and
//! `rundir`. See `docs/hayate-bench.md`.

mod args;
mod cql;
mod db;
mod generator;
mod keys;
mod measure;
mod properties;
mod rundir;
mod runner;
mod summary;
mod throttle;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use args::{CommandLine, Phase};
use cql::{CqlConfig, CqlDb};
use measure::{Interval, Metric, Op};
use properties::{invalid, Properties};
use runner::{PhaseConfig, ReporterConfig, THREADS_MAX};
use workload::{CoreWorkload, Transaction};

const VERSION: &str = concat!("hayate-bench ", env!("CARGO_PKG_VERSION"));

/// Exit status when the command line or a property is wrong (nothing was run).
const EXIT_USAGE: u8 = 2;
/// Exit status when the run could not start or its results could not be written.
const EXIT_FAILED: u8 = 1;
/// Threads of the client's async runtime (`hayate.runtimethreads`).
const RUNTIME_THREADS_MAX: u64 = 64;

pub fn main(args: &[String]) -> ExitCode {
    let cmd = match args::parse(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hayate-bench: {e}");
            eprintln!("usage: hayate-bench load|run [cql|cassandra-cql|cassandra2-cql] [-P workloadfile]... [-p name=value]... [-threads N] [-target OPS] [-s]");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    eprintln!("{VERSION}");
    eprintln!("Command line: {}", args.join(" "));
    let settings = match Settings::from_command_line(cmd) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("hayate-bench: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match execute(settings, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hayate-bench: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Everything a run needs, read and checked before connecting.
struct Settings {
    phase: Phase,
    properties: Properties,
    workload: Arc<CoreWorkload>,
    cql: CqlConfig,
    phase_config: PhaseConfig,
    status: bool,
    status_interval_s: u64,
    runtime_threads: usize,
    percentiles: Vec<f64>,
    label: String,
    status_label: String,
    rundir: Option<PathBuf>,
    export_file: Option<PathBuf>,
    exporter: Exporter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exporter {
    Text,
    JsonArray,
    Json,
}

impl Settings {
    fn from_command_line(cmd: CommandLine) -> Result<Settings, Box<dyn std::error::Error>> {
        let mut p = cmd.properties;
        let workload = Arc::new(CoreWorkload::from_properties(&p)?);
        let cql = CqlConfig::from_properties(&p)?;

        let threads = p.u64_or("threadcount", 1)?;
        if !(1..=THREADS_MAX).contains(&threads) {
            return Err(invalid("threadcount", &threads.to_string(), "1 to 4096").into());
        }
        let target = p.u64_or("target", 0)?;
        let op_count = match cmd.phase {
            Phase::Run => p.u64_or("operationcount", 0)?,
            Phase::Load if p.contains("insertcount") => p.u64_or("insertcount", 0)?,
            Phase::Load => p.u64_or("recordcount", 0)?,
        };
        if cmd.phase == Phase::Load && op_count == 0 {
            return Err(invalid(
                "recordcount",
                p.str_or("recordcount", "0"),
                "records to load (or insertcount)",
            )
            .into());
        }
        let mut threads = threads as usize;
        if op_count > 0 && threads as u64 > op_count {
            threads = op_count as usize;
            eprintln!(
                "Warning: the threadcount is bigger than recordcount, the threadcount will be recordcount!"
            );
        }
        let interval = match p.get("measurement.interval") {
            None if target > 0 => Interval::Both,
            None | Some("op") => Interval::Op,
            Some("intended") => Interval::Intended,
            Some("both") => Interval::Both,
            Some(other) => return Err(invalid("measurement.interval", other, "op, intended or both").into()),
        };
        if p.bool_or("dataintegrity", false) {
            eprintln!("hayate-bench: dataintegrity is not implemented; values are random and not checked");
        }
        if let Some(kind) = p.get("measurementtype").filter(|k| *k != "hdrhistogram") {
            eprintln!("hayate-bench: measurementtype={kind} is not supported; measuring with hdrhistogram");
        }
        let percentiles_text = p.str_or("hdrhistogram.percentiles", "95,99").to_string();
        let percentiles = summary::parse_percentiles(&percentiles_text).unwrap_or_else(|| {
            eprintln!("[WARN] Couldn't read hdrhistogram.percentiles value: '{percentiles_text}', the default of '95,99' will be used.");
            vec![95.0, 99.0]
        });
        let max_execution_s = p.u64_or("maxexecutiontime", 0)?;
        let runtime_threads = p.u64_or("hayate.runtimethreads", 1)?;
        if !(1..=RUNTIME_THREADS_MAX).contains(&runtime_threads) {
            return Err(invalid("hayate.runtimethreads", &runtime_threads.to_string(), "1 to 64").into());
        }
        let seed = match p.get("seed") {
            Some(_) => p.u64_or("seed", 0)?,
            None => rand::random(),
        };
        let exporter = match p.get("exporter") {
            None => Exporter::Text,
            Some(e) if e.ends_with("JSONArrayMeasurementsExporter") => Exporter::JsonArray,
            Some(e) if e.ends_with("JSONMeasurementsExporter") => Exporter::Json,
            Some(e) => {
                if !e.ends_with("TextMeasurementsExporter") {
                    eprintln!("Could not find exporter {e}, will use default text reporter.");
                }
                Exporter::Text
            }
        };
        let hosts = p.str_or("hosts", "").to_string();
        let label = p.get("label").map_or(hosts, str::to_string);
        let status_label = p.str_or("label", "").to_string();

        // The effective values of what was left to defaults, for meta.json.
        let defaults: [(&str, String); 11] = [
            ("threadcount", threads.to_string()),
            ("target", target.to_string()),
            ("measurement.interval", interval.name().to_string()),
            ("hdrhistogram.percentiles", percentiles_text),
            ("status.interval", p.str_or("status.interval", "10").to_string()),
            ("port", p.str_or("port", "9042").to_string()),
            ("cassandra.keyspace", cql.keyspace.clone()),
            ("table", workload.table.clone()),
            ("fieldcount", workload.field_count().to_string()),
            ("seed", seed.to_string()),
            ("hayate.runtimethreads", runtime_threads.to_string()),
        ];
        p.set("threadcount", &threads.to_string());
        for (k, v) in defaults {
            p.set_default(k, &v);
        }
        for (k, v) in [
            ("fieldlength", "100"),
            ("fieldlengthdistribution", "constant"),
            ("fieldnameprefix", "field"),
            ("readallfields", "true"),
            ("writeallfields", "false"),
            ("readproportion", "0.95"),
            ("updateproportion", "0.05"),
            ("insertproportion", "0"),
            ("scanproportion", "0"),
            ("readmodifywriteproportion", "0"),
            ("requestdistribution", "uniform"),
            ("insertorder", "hashed"),
            ("insertstart", "0"),
            ("zeropadding", "1"),
            ("maxscanlength", "1000"),
            ("scanlengthdistribution", "uniform"),
            ("cassandra.readconsistencylevel", "QUORUM"),
            ("cassandra.writeconsistencylevel", "QUORUM"),
        ] {
            p.set_default(k, v);
        }
        p.set_default("insertcount", &workload.insert_count.to_string());
        p.set_default("recordcount", &workload.record_count.to_string());

        Ok(Settings {
            phase: cmd.phase,
            workload,
            cql,
            phase_config: PhaseConfig {
                phase: cmd.phase,
                threads,
                op_count,
                target_ops_per_s: target,
                max_execution_time: (max_execution_s > 0).then(|| Duration::from_secs(max_execution_s)),
                interval,
                seed,
            },
            status: p.bool_or("status", false),
            status_interval_s: p.u64_or("status.interval", 10)?.max(1),
            runtime_threads: runtime_threads as usize,
            percentiles,
            label,
            status_label,
            rundir: p.get("rundir").map(PathBuf::from),
            export_file: p.get("exportfile").map(PathBuf::from),
            exporter,
            properties: p,
        })
    }

    /// The series that get a time-series row every second: the workload's operations (a
    /// read-modify-write also reads and updates), `ALL`, and their `Intended-` twins.
    fn row_metrics(&self) -> Vec<Metric> {
        let mut ops = Vec::new();
        match self.phase {
            Phase::Load => ops.push(Op::Insert),
            Phase::Run => {
                for t in self.workload.transactions() {
                    let add: &[Op] = match t {
                        Transaction::Read => &[Op::Read],
                        Transaction::Update => &[Op::Update],
                        Transaction::Insert => &[Op::Insert],
                        Transaction::Scan => &[Op::Scan],
                        Transaction::ReadModifyWrite => &[Op::Read, Op::Update, Op::ReadModifyWrite],
                    };
                    for op in add {
                        if !ops.contains(op) {
                            ops.push(*op);
                        }
                    }
                }
                ops.sort_by_key(|op| *op as u8);
            }
        }
        let mut metrics = Vec::new();
        let intended_too = self.phase_config.interval == Interval::Both;
        for intended in [false, true] {
            if intended && !intended_too {
                break;
            }
            for &op in &ops {
                metrics.push(Metric::op(op, false, intended));
            }
            metrics.push(Metric::all(intended));
        }
        metrics
    }
}

fn execute(settings: Settings, args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    // One runtime thread by default: the workers and the driver's connection tasks then wake each
    // other without crossing threads, which on a small machine shared with the server costs a
    // fraction of the CPU (and context switches) of a multi-threaded runtime.
    let runtime = if settings.runtime_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(settings.runtime_threads)
            .enable_all()
            .build()?
    };
    eprintln!("Loading workload...");
    let outcome = runtime.block_on(async {
        let db = Arc::new(CqlDb::connect(settings.cql.clone(), &settings.workload).await?);
        // Created now so that the log's base time is the phase's start, not the connection's.
        let rundir = match &settings.rundir {
            Some(dir) => Some(rundir::RunDir::create(
                dir,
                std::time::SystemTime::now(),
                &format!("{VERSION} {}", settings.phase.name()),
            )?),
            None => None,
        };
        eprintln!("Starting test.");
        let reporter = ReporterConfig {
            status_interval_s: settings.status.then_some(settings.status_interval_s),
            label: settings.status_label.clone(),
            progress_bar: runner::stderr_is_terminal(),
            rundir,
            row_metrics: settings.row_metrics(),
        };
        let outcome = runner::run_phase(
            db,
            Arc::clone(&settings.workload),
            &settings.phase_config,
            reporter,
        )
        .await;
        Ok::<_, Box<dyn std::error::Error>>(outcome)
    })?;
    // Workers are done; do not wait for the driver's background tasks.
    runtime.shutdown_timeout(Duration::from_secs(1));

    let runtime_ms = outcome.runtime.as_millis() as u64;
    let lines = summary::summary_lines(
        runtime_ms,
        outcome.ops_done,
        &outcome.totals,
        &settings.percentiles,
    );
    let text = summary::format_text(&lines);
    print!("{text}");
    if let Some(path) = &settings.export_file {
        let exported = match settings.exporter {
            Exporter::Text => text.clone(),
            Exporter::JsonArray => summary::format_json(&lines, true),
            Exporter::Json => summary::format_json(&lines, false),
        };
        std::fs::write(path, exported)
            .map_err(|e| format!("cannot write exportfile {}: {e}", path.display()))?;
    }
    let failed: u64 = outcome
        .totals
        .returns
        .iter()
        .map(|r| r[measure::Status::Error as usize])
        .sum();
    if failed > 0 {
        eprintln!("hayate-bench: {failed} operations returned ERROR (see Return=ERROR above)");
    }
    if let Some(e) = outcome.rundir_error {
        return Err(e.into());
    }
    if let Some(rd) = outcome.rundir {
        rd.write_file("summary.txt", &text)?;
        let properties: serde_json::Map<String, serde_json::Value> = settings
            .properties
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(v)))
            .collect();
        let mut argv = vec!["hayate-bench".to_string()];
        argv.extend(args.iter().cloned());
        let target = settings.phase_config.target_ops_per_s;
        let meta = serde_json::json!({
            "label": settings.label,
            "phase": settings.phase.name(),
            "argv": argv,
            "properties": properties,
            "threads": settings.phase_config.threads,
            "target_ops": if target > 0 { serde_json::Value::from(target) } else { serde_json::Value::Null },
            "start_unix_ms": outcome.start_unix_ms,
            "end_unix_ms": outcome.end_unix_ms,
            "hosts": settings.properties.str_or("hosts", ""),
            "version": VERSION,
        });
        let mut json = serde_json::to_string_pretty(&meta)?;
        json.push('\n');
        rd.write_file("meta.json", &json)?;
    }
    Ok(())
}
