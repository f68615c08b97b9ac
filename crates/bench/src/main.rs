//! `hayate-bench`: the YCSB-compatible client (`load`, `run`), charts of its runs (`report`) and
//! the ACT-style device certification (`act`).
//!
//! `load` and `run` take YCSB's own command line (`-P file`, `-p name=value`, `-threads N`,
//! `-target OPS`, `-s`), so a YCSB command line runs with only the program name changed. That is
//! why they are not parsed by clap: YCSB's flags are single-dash words.

use std::process::ExitCode;

mod act;
mod report;
mod ycsb;

const USAGE: &str = "\
usage:
  hayate-bench load|run [cql|cassandra-cql|cassandra2-cql] [-P workloadfile]... [-p name=value]...
                        [-threads N] [-target OPS] [-s]
  hayate-bench report [options] RUNDIR...     charts and a summary page of one or more runs
  hayate-bench act CONFIG                     ACT-style certification of a device or file
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("load") | Some("run") => ycsb::main(&args),
        Some("report") => report::main(&args[1..]),
        Some("act") => act::main(&args[1..]),
        Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprint!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
