//! `storage-bench`: hayate's storage engine beside RocksDB on the same machine and workload.
//!
//! For each engine, in one process: load `--records` YCSB-like records of 1000 bytes (ten fields
//! of 100), then uniform random reads for `--seconds`, then a 50/50 mix of reads and one-field
//! updates for `--seconds`, all with `--threads` client threads. It prints, per phase, ops/s and
//! latency percentiles, and per engine write amplification and RAM per record (see
//! [`measure`] for how both are counted). The last line is one JSON object for scripts.
//!
//! ```text
//! cargo run --release -p hayate-storage --features rocksdb --bin storage-bench -- \
//!     --engine both --records 10000000 --threads 2 --dir /work/bench-data --seconds 60
//! ```

mod hayate;
mod measure;
#[cfg(feature = "rocksdb")]
#[expect(
    unexpected_cfgs,
    reason = "`storage_bench_system_rocksdb` is set through RUSTFLAGS by bench/storage-bench.sh"
)]
mod rocks;
mod workload;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use measure::{ProcIo, GIB, MIB};
use workload::{percentile_us, BenchResult, PhaseResult, Store};

/// Client threads beyond this are a typo, not a benchmark.
const THREADS_MAX: usize = 1024;
/// Share of updates in the mixed phase, percent.
const MIXED_UPDATE_PCT: u64 = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EngineChoice {
    Hayate,
    Rocksdb,
    Both,
}

/// Benchmark hayate's storage engine (and RocksDB) on a YCSB-like workload.
#[derive(Parser, Debug)]
#[command(name = "storage-bench")]
struct Args {
    /// Which engine to run; `rocksdb` and `both` need the `rocksdb` feature.
    #[arg(long, value_enum)]
    engine: EngineChoice,
    /// Records to load (1000-byte values).
    #[arg(long)]
    records: u64,
    /// Client threads in every phase.
    #[arg(long)]
    threads: usize,
    /// A directory for the engines' files; `<dir>/hayate` and `<dir>/rocksdb` must not exist or
    /// be empty.
    #[arg(long)]
    dir: PathBuf,
    /// Length of the read phase and of the mixed phase.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Delete `<dir>/hayate` and `<dir>/rocksdb` left by an earlier run before starting.
    #[arg(long)]
    fresh: bool,
}

/// An engine as the benchmark drives and describes it.
pub trait Subject: Store {
    fn name(&self) -> &'static str;
    /// The configuration, one setting per line, for the results.
    fn settings(&self) -> Vec<String>;
    /// The fixed-size cache that RAM per record excludes: its name and resident bytes now.
    fn cache(&self) -> (&'static str, u64);
    /// The engine's own counters, as a cross-check of the process-level figures.
    fn own_counters(&self) -> Vec<String>;
}

/// Everything measured for one engine.
struct EngineReport {
    name: &'static str,
    settings: Vec<String>,
    counters: Vec<String>,
    phases: Vec<(PhaseResult, ProcIo)>,
    records: u64,
    rss_growth_bytes: i64,
    cache_name: &'static str,
    cache_bytes: u64,
}

impl EngineReport {
    fn phase(&self, name: &str) -> &PhaseResult {
        &self
            .phases
            .iter()
            .find(|(p, _)| p.name == name)
            .expect("every phase ran")
            .0
    }

    fn device_bytes(&self) -> u64 {
        self.phases.iter().map(|(_, io)| io.write_bytes).sum()
    }

    fn user_bytes(&self) -> u64 {
        self.phases.iter().map(|(p, _)| p.user_bytes).sum()
    }

    fn write_amplification(&self) -> f64 {
        self.device_bytes() as f64 / self.user_bytes().max(1) as f64
    }

    /// Device bytes written in the mixed phase per byte of the rows its updates rewrote: both
    /// engines rewrite the whole 1000-byte row on an update, so this is what the log, flushes,
    /// defragmentation or compaction add on top, in the steady state of a long mixed phase.
    fn mixed_row_write_amplification(&self) -> (u64, f64) {
        let (p, io) = self
            .phases
            .iter()
            .find(|(p, _)| p.name == "mixed")
            .expect("every phase ran");
        let updates = p.writes_ns.len();
        let row_bytes = updates * workload::RECORD_VALUE_BYTES as u64;
        (updates, io.write_bytes as f64 / row_bytes.max(1) as f64)
    }

    fn ram_bytes_per_record(&self) -> f64 {
        (self.rss_growth_bytes - self.cache_bytes as i64) as f64 / self.records.max(1) as f64
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("storage-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> BenchResult<()> {
    if args.records == 0 || args.seconds == 0 {
        return Err("--records and --seconds must be at least 1".into());
    }
    if !(1..=THREADS_MAX).contains(&args.threads) {
        return Err(format!("--threads {}: must be 1 to {THREADS_MAX}", args.threads).into());
    }
    let wants_rocksdb = matches!(args.engine, EngineChoice::Rocksdb | EngineChoice::Both);
    if wants_rocksdb && !cfg!(feature = "rocksdb") {
        return Err(
            "--engine rocksdb/both needs RocksDB, which this binary was built without; \
                    rebuild with `--features rocksdb`, or run `--engine hayate`"
                .into(),
        );
    }

    let mut reports = Vec::new();
    if matches!(args.engine, EngineChoice::Hayate | EngineChoice::Both) {
        let dir = fresh_dir(&args.dir, "hayate", args.fresh)?;
        let subject = hayate::Hayate::open(&dir, args.records)?;
        reports.push(bench(&subject, args)?);
        drop(subject);
        measure::release_free_heap();
    }
    #[cfg(feature = "rocksdb")]
    if wants_rocksdb {
        let dir = fresh_dir(&args.dir, "rocksdb", args.fresh)?;
        let cache_bytes = hayate_storage::NamespaceConfig::with_file("bench", &dir, 0).post_write_cache_bytes;
        let subject = rocks::Rocks::open(&dir, cache_bytes)?;
        reports.push(bench(&subject, args)?);
        drop(subject);
        measure::release_free_heap();
    }
    print!("{}", render(args, &reports));
    Ok(())
}

/// `<dir>/<name>`, created; refuses to reuse one that holds files, since a benchmark on top of
/// an earlier run's data measures something else.
fn fresh_dir(dir: &Path, name: &str, fresh: bool) -> BenchResult<PathBuf> {
    let path = dir.join(name);
    if fresh && path.exists() {
        std::fs::remove_dir_all(&path)?;
    }
    if path.exists() && std::fs::read_dir(&path)?.next().is_some() {
        return Err(format!(
            "{} is not empty: delete it, pass --fresh, or pass another --dir",
            path.display()
        )
        .into());
    }
    std::fs::create_dir_all(&path)?;
    Ok(path)
}

fn bench(subject: &dyn Subject, args: &Args) -> BenchResult<EngineReport> {
    let name = subject.name();
    measure::release_free_heap();
    let rss_before = measure::rss_bytes()?;
    let mut io = ProcIo::now()?;
    let mut phases = Vec::new();
    let io_since = |io: &mut ProcIo| -> BenchResult<ProcIo> {
        let now = ProcIo::now()?;
        let delta = now.since(*io);
        *io = now;
        Ok(delta)
    };

    eprintln!(
        "{name}: loading {} records with {} threads",
        args.records, args.threads
    );
    let load = workload::load(subject, args.records, args.threads)?;
    let rss_after_load = measure::rss_bytes()?;
    let (cache_name, cache_bytes) = subject.cache();
    eprintln!(
        "{name}: loaded in {:.1} s; RSS grew {:.1} MiB, {cache_name} holds {:.1} MiB",
        load.elapsed.as_secs_f64(),
        (rss_after_load as f64 - rss_before as f64) / MIB,
        cache_bytes as f64 / MIB
    );
    phases.push((load, io_since(&mut io)?));

    eprintln!("{name}: random reads for {} s", args.seconds);
    let read = workload::run_timed("read", subject, args.records, args.threads, args.seconds, 0)?;
    phases.push((read, io_since(&mut io)?));

    eprintln!("{name}: 50/50 reads and updates for {} s", args.seconds);
    let mixed = workload::run_timed(
        "mixed",
        subject,
        args.records,
        args.threads,
        args.seconds,
        MIXED_UPDATE_PCT,
    )?;
    phases.push((mixed, io_since(&mut io)?));

    let counters = subject.own_counters();
    for line in &counters {
        eprintln!("{name}: {line}");
    }
    Ok(EngineReport {
        name,
        settings: subject.settings(),
        counters,
        phases,
        records: args.records,
        rss_growth_bytes: rss_after_load as i64 - rss_before as i64,
        cache_name,
        cache_bytes,
    })
}

/// The results: settings, a markdown table per engine, a summary, and the JSON line last.
fn render(args: &Args, reports: &[EngineReport]) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "storage-bench: {} records of 1000 bytes (10 fields x 100), {} threads, {} s per timed phase\n",
        args.records, args.threads, args.seconds
    );
    for r in reports {
        let _ = writeln!(w, "### {}\n", r.name);
        for s in &r.settings {
            let _ = writeln!(w, "- {s}");
        }
        let _ = writeln!(
            w,
            "\n| phase | ops | s | ops/s | p50 us | p95 us | p99 us | p99.9 us | not found | written (/proc/self/io) |"
        );
        let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (p, io) in &r.phases {
            let mut rows = vec![(p.name.to_string(), &p.all_ns)];
            if p.name == "mixed" {
                rows.push(("mixed: reads".into(), &p.reads_ns));
                rows.push(("mixed: updates".into(), &p.writes_ns));
            }
            for (i, (label, h)) in rows.into_iter().enumerate() {
                let ops_per_s = h.len() as f64 / p.elapsed.as_secs_f64().max(1e-9);
                let (not_found, written) = if i == 0 {
                    (
                        p.not_found.to_string(),
                        format!(
                            "{:.2} GiB (+{:.2} GiB cancelled)",
                            io.write_bytes as f64 / GIB,
                            io.cancelled_write_bytes as f64 / GIB
                        ),
                    )
                } else {
                    (String::new(), String::new())
                };
                let _ = writeln!(
                    w,
                    "| {label} | {} | {:.1} | {ops_per_s:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {not_found} | {written} |",
                    h.len(),
                    p.elapsed.as_secs_f64(),
                    percentile_us(h, 50.0),
                    percentile_us(h, 95.0),
                    percentile_us(h, 99.0),
                    percentile_us(h, 99.9),
                );
            }
        }
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "- write amplification: {:.2} GiB written by the process (/proc/self/io write_bytes, all phases) / {:.2} GiB of keys and values written by the client = **{:.3}**",
            r.device_bytes() as f64 / GIB,
            r.user_bytes() as f64 / GIB,
            r.write_amplification()
        );
        let (updates, mixed_wa) = r.mixed_row_write_amplification();
        let _ = writeln!(
            w,
            "- mixed phase: device bytes written per byte of the 1000-byte rows its {updates} updates rewrote = **{mixed_wa:.3}** (log, flushes, defragmentation or compaction on top of the rows themselves)"
        );
        let _ = writeln!(
            w,
            "- RAM per record: (VmRSS growth over the load {:.1} MiB - {} {:.1} MiB) / {} records = **{:.1} bytes**",
            r.rss_growth_bytes as f64 / MIB,
            r.cache_name,
            r.cache_bytes as f64 / MIB,
            r.records,
            r.ram_bytes_per_record()
        );
        for c in &r.counters {
            let _ = writeln!(w, "- {c}");
        }
        let _ = writeln!(w);
    }
    if let [a, b] = reports {
        let _ = writeln!(w, "### {} / {}\n", a.name, b.name);
        for phase in ["load", "read", "mixed"] {
            let _ = writeln!(
                w,
                "- {phase}: {:.2}x the ops/s; p99 {:.2}x",
                a.phase(phase).ops_per_s() / b.phase(phase).ops_per_s().max(1e-9),
                percentile_us(&a.phase(phase).all_ns, 99.0)
                    / percentile_us(&b.phase(phase).all_ns, 99.0).max(1e-9)
            );
        }
        let _ = writeln!(w);
    }
    let _ = writeln!(w, "{}", json(args.records, reports));
    out
}

fn json(records: u64, reports: &[EngineReport]) -> String {
    let engines: Vec<String> = reports
        .iter()
        .map(|r| {
            format!(
                "\"{}\": {{\"load_ops_per_s\": {:.1}, \"read_ops_per_s\": {:.1}, \"mixed_ops_per_s\": {:.1}, \"read_p99_us\": {:.1}, \"mixed_p99_us\": {:.1}, \"ram_bytes_per_record\": {:.1}, \"write_amplification\": {:.3}}}",
                r.name,
                r.phase("load").ops_per_s(),
                r.phase("read").ops_per_s(),
                r.phase("mixed").ops_per_s(),
                percentile_us(&r.phase("read").all_ns, 99.0),
                percentile_us(&r.phase("mixed").all_ns, 99.0),
                r.ram_bytes_per_record(),
                r.write_amplification()
            )
        })
        .collect();
    format!(
        "{{\"records\": {records}, \"engines\": {{{}}}}}",
        engines.join(", ")
    )
}
