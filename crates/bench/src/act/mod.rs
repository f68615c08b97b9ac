//! `hayate-bench act CONFIG`: certifies a device (or a file) the way Aerospike's ACT
//! (`act_storage`) does, from an ACT config file.
//!
//! Small reads of `record-bytes` at random places at `read-reqs-per-sec`, large-block writes and
//! reads at the rate the write load and defrag imply, all with direct I/O; a histogram dump every
//! `report-interval-sec` in ACT's layout; then `act_latency.py`'s table of the share of reads
//! slower than 1 … 64 ms per hour, and ACT's verdict.
//!
//! Exit status: 0 the device passed, 1 it failed (a slice over a limit, or the load could not be
//! kept up), 2 the command line or config is wrong, 3 the device could not be opened or an I/O
//! failed.

mod config;
mod device;
mod histogram;
mod load;
mod table;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;

use config::Config;
use device::{Device, FileDevice, OpenSpec};
use histogram::Scale;
use load::{Failure, Kind, Pattern, Plan, Run, Target, TwinSnapshot};
use table::{Column, Table, SLICE_COUNT_MAX};

const EXIT_FAIL: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_DEVICE: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "hayate-bench act",
    about = "ACT-style certification of a device or file, from an ACT (act_storage) config file"
)]
struct Args {
    /// ACT config file (act_storage keys: device-names, test-duration-sec, read-reqs-per-sec…).
    config: PathBuf,
    /// Run for this many seconds instead of the config's test-duration-sec.
    #[arg(long, value_name = "SECONDS")]
    duration_sec: Option<u64>,
    /// Length of a slice of the final table; ACT judges hours. A shorter run is one slice.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    slice_sec: u64,
    /// Seed of the random offsets, for a repeatable pattern.
    #[arg(long)]
    seed: Option<u64>,
}

pub fn main(args: &[String]) -> ExitCode {
    let args = match Args::try_parse_from(
        std::iter::once("hayate-bench act".to_string()).chain(args.iter().cloned()),
    ) {
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
    let mut config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("hayate-bench act: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(duration_sec) = args.duration_sec {
        if duration_sec == 0 {
            eprintln!("hayate-bench act: --duration-sec must be above 0");
            return ExitCode::from(EXIT_USAGE);
        }
        config.test_duration_sec = duration_sec;
    }
    if args.slice_sec == 0 || config.test_duration_sec / args.slice_sec > SLICE_COUNT_MAX {
        eprintln!("hayate-bench act: --slice-sec must be above 0 and give at most {SLICE_COUNT_MAX} slices");
        return ExitCode::from(EXIT_USAGE);
    }
    run(&config, &args)
}

fn run(config: &Config, args: &Args) -> ExitCode {
    let cpu_count = std::thread::available_parallelism().map_or(1, |n| n.get());
    let service_threads = config.service_threads_resolved(cpu_count);
    println!(
        "\nhayate-bench act {} (ACT act_storage compatible)",
        env!("CARGO_PKG_VERSION")
    );
    println!("Storage device IO test\n");
    print!("{}", config.echo(service_threads));
    println!();

    let derived = config.derive();
    let spec = OpenSpec {
        file_size_bytes: config.file_size_bytes,
        dsync: !config.disable_odsync,
        large_block_bytes: u64::from(config.large_block_op_bytes),
    };
    let mut targets = Vec::new();
    for path in &config.device_names {
        let mut progress = |message: &str| {
            println!("{message}");
            let _ = std::io::stdout().flush();
        };
        let device = match FileDevice::open(path, spec, &mut progress) {
            Ok(device) => device,
            Err(error) => {
                eprintln!("hayate-bench act: {error}");
                return ExitCode::from(EXIT_DEVICE);
            }
        };
        let pattern = Pattern::new(
            device.size_bytes(),
            device.min_op_bytes(),
            &derived,
            config.large_block_op_bytes,
        );
        println!(
            "{} size = {} bytes, {} large blocks, minimum IO size = {} bytes",
            device.name(),
            device.size_bytes(),
            pattern.large_blocks,
            pattern.min_op_bytes
        );
        targets.push(Target {
            device: Arc::new(device),
            pattern,
        });
    }

    let duration = Duration::from_secs(config.test_duration_sec);
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let plan = Plan::new(config, service_threads, duration, seed);
    let kinds = plan.kinds();
    println!("\nHISTOGRAM NAMES");
    for kind in &kinds {
        println!("{}", kind.name());
        if matches!(kind, Kind::Reads | Kind::Writes) && targets.len() > 1 {
            for target in &targets {
                println!("{}-{}", target.device.name(), kind.name());
            }
        }
    }
    println!();
    let _ = std::io::stdout().flush();

    let device_names: Vec<String> = targets.iter().map(|t| t.device.name().to_string()).collect();
    let (run, handles) = load::start(&plan, targets);
    let scale = if config.microsecond_histograms {
        Scale::Microseconds
    } else {
        Scale::Milliseconds
    };
    let table = report(&run, config, args.slice_sec, scale, &kinds, &device_names);
    run.stop();
    for handle in handles {
        if handle.join().is_err() {
            eprintln!("hayate-bench act: a load thread panicked");
        }
    }

    println!("LATENCY TABLE (slices of {} s; all = whole run)", table.slice_sec);
    print!("{}", table.render());
    println!();
    let failure = run.failure();
    let judgements = table.judge();
    for judgement in &judgements {
        println!("{}", judgement.describe());
    }
    match &failure {
        Some(Failure::Lag { who, behind_ms }) => {
            println!(
                "{who} fell {behind_ms} ms behind schedule (max-lag-sec {}): the device can't \
                 keep up with this load - test stopped",
                config.max_lag_sec
            );
        }
        Some(Failure::Io { detail }) => eprintln!("hayate-bench act: I/O error: {detail}"),
        None => {}
    }
    let pass = failure.is_none() && judgements.iter().all(|j| j.pass);
    println!("\nRESULT: {}", if pass { "PASS" } else { "FAIL" });
    match failure {
        Some(Failure::Io { .. }) => ExitCode::from(EXIT_DEVICE),
        _ if pass => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_FAIL),
    }
}

/// Prints ACT's cumulative dumps every report interval until the run ends, and collects the
/// slices of the final table.
fn report(
    run: &Run,
    config: &Config,
    slice_sec: u64,
    scale: Scale,
    kinds: &[Kind],
    device_names: &[String],
) -> Table {
    let interval = Duration::from_secs(config.report_interval_sec);
    // Slices are whole report intervals, as act_latency.py rounds them.
    let slice_intervals = slice_sec.div_ceil(config.report_interval_sec).max(1);
    let mut columns: Vec<Column> = kinds
        .iter()
        .map(|kind| Column {
            kind: *kind,
            slices: Vec::new(),
            whole: TwinSnapshot::default(),
        })
        .collect();
    let mut slice_start: Vec<TwinSnapshot> = vec![TwinSnapshot::default(); kinds.len()];
    let mut previous: Vec<TwinSnapshot> = vec![TwinSnapshot::default(); kinds.len()];
    let mut count: u64 = 0;
    let mut slice_first_interval: u64 = 0;
    loop {
        count += 1;
        let at = run.start + interval * count as u32;
        let last = at >= run.end;
        let at = at.min(run.end);
        while run.running() && Instant::now() < at {
            std::thread::sleep((at - Instant::now()).min(Duration::from_millis(50)));
        }
        let stopped = !run.running();
        let slice_full = count - slice_first_interval == slice_intervals;
        if slice_full {
            slice_first_interval = count;
        }
        let elapsed_sec = (interval * count as u32).min(run.end - run.start).as_secs();
        let mut out = format!("after {elapsed_sec} sec:\n");
        let mut interval_line = String::from("  %>(ms) this interval:");
        for (i, kind) in kinds.iter().enumerate() {
            let twin = run.recorders.of(*kind);
            let now = twin.snapshot();
            out.push_str(&now.at(scale).dump(kind.name()));
            if matches!(kind, Kind::Reads | Kind::Writes) && device_names.len() > 1 {
                let per_device = match kind {
                    Kind::Reads => &run.recorders.device_reads,
                    _ => &run.recorders.device_writes,
                };
                for (name, twin) in device_names.iter().zip(per_device) {
                    let tag = format!("{name}-{}", kind.name());
                    out.push_str(&twin.snapshot().at(scale).dump(&tag));
                }
            }
            let this = now.since(&previous[i]).ms.percents_over();
            interval_line.push_str(&format!(
                " {} {:.2}/{:.2}/{:.2}",
                kind.name(),
                this[0],
                this[3],
                this[6]
            ));
            previous[i] = now;
            columns[i].whole = now;
            if slice_full {
                columns[i].slices.push(now.since(&slice_start[i]));
                slice_start[i] = now;
            }
        }
        if !kinds.is_empty() {
            out.push_str(&interval_line);
            out.push_str(" (>1/>8/>64 ms)\n");
        }
        println!("{out}");
        let _ = std::io::stdout().flush();
        if last || stopped {
            break;
        }
    }
    // A run shorter than one slice is judged as one slice; after whole slices, a short tail
    // is left out of the rows, as act_latency.py leaves it, but counts in the whole-run row.
    for (column, start) in columns.iter_mut().zip(&slice_start) {
        if column.slices.is_empty() {
            column.slices.push(column.whole.since(start));
        }
    }
    Table {
        scale,
        slice_sec: slice_intervals * config.report_interval_sec,
        columns,
    }
}
