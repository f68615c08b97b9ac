//! YCSB's command line, as `bin/ycsb` passes it on to `site.ycsb.Client`:
//!
//! ```text
//! hayate-bench load|run [cql|cassandra-cql|cassandra2-cql] [-P file]... [-p name=value]...
//!              [-threads N] [-target OPS] [-s] [-l label] [-load|-t] [-db class]
//! ```
//!
//! Files are read in order, each overriding the ones before; then every `-p` and flag overrides
//! the files, wherever it stood, which is YCSB's rule.

use std::fmt;
use std::path::Path;

use super::properties::{Properties, PropertyError};

/// The binding names YCSB users type for the Cassandra binding; all mean CQL here.
const BINDINGS: [&str; 3] = ["cql", "cassandra-cql", "cassandra2-cql"];
/// The Java class `-db` names for the same binding.
const BINDING_CLASSES: [&str; 2] = [
    "site.ycsb.db.CassandraCQLClient",
    "com.yahoo.ycsb.db.CassandraCQLClient",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Load,
    Run,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

#[derive(Debug)]
pub struct CommandLine {
    pub phase: Phase,
    pub properties: Properties,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum ArgsError {
    MissingPhase,
    MissingValue { flag: String },
    NotANumber { flag: String, value: String },
    NotKeyValue { value: String },
    UnknownBinding { name: String },
    UnknownOption { option: String },
    Property(PropertyError),
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::MissingPhase => write!(f, "the first argument must be `load` or `run`"),
            ArgsError::MissingValue { flag } => write!(f, "{flag} needs a value after it"),
            ArgsError::NotANumber { flag, value } => write!(f, "{flag} {value}: expected an integer"),
            ArgsError::NotKeyValue { value } => write!(
                f,
                "-p {value}: expected name=value (for example -p operationcount=99999)"
            ),
            ArgsError::UnknownBinding { name } => write!(
                f,
                "unknown binding {name:?}: hayate-bench speaks CQL only; use one of {}",
                BINDINGS.join(", ")
            ),
            ArgsError::UnknownOption { option } => write!(f, "unknown option {option}"),
            ArgsError::Property(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ArgsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArgsError::Property(e) => Some(e),
            _ => None,
        }
    }
}

/// Parses the argument list that starts with `load` or `run`.
pub fn parse(args: &[String]) -> Result<CommandLine, ArgsError> {
    let phase = match args.first().map(String::as_str) {
        Some("load") => Phase::Load,
        Some("run") => Phase::Run,
        _ => return Err(ArgsError::MissingPhase),
    };
    let mut rest = &args[1..];
    if let Some(binding) = rest.first().filter(|a| !a.starts_with('-')) {
        if !BINDINGS.contains(&binding.as_str()) {
            return Err(ArgsError::UnknownBinding {
                name: binding.clone(),
            });
        }
        rest = &rest[1..];
    }

    let mut files = Properties::new();
    let mut cli = Properties::new();
    let mut i = 0;
    let value = |i: usize, flag: &str| -> Result<&String, ArgsError> {
        rest.get(i + 1).ok_or_else(|| ArgsError::MissingValue {
            flag: flag.to_string(),
        })
    };
    while i < rest.len() {
        let flag = rest[i].as_str();
        match flag {
            "-P" => {
                files
                    .load_file(Path::new(value(i, flag)?))
                    .map_err(ArgsError::Property)?;
                i += 2;
            }
            "-p" => {
                let kv = value(i, flag)?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| ArgsError::NotKeyValue { value: kv.clone() })?;
                cli.set(k, v);
                i += 2;
            }
            "-threads" | "-target" => {
                let v = value(i, flag)?;
                v.parse::<u64>().map_err(|_| ArgsError::NotANumber {
                    flag: flag.to_string(),
                    value: v.clone(),
                })?;
                cli.set(
                    if flag == "-threads" {
                        "threadcount"
                    } else {
                        "target"
                    },
                    v,
                );
                i += 2;
            }
            "-s" => {
                cli.set("status", "true");
                i += 1;
            }
            "-l" => {
                cli.set("label", value(i, flag)?);
                i += 2;
            }
            "-db" => {
                let class = value(i, flag)?;
                if !BINDING_CLASSES.contains(&class.as_str()) {
                    return Err(ArgsError::UnknownBinding { name: class.clone() });
                }
                i += 2;
            }
            "-load" => {
                cli.set("dotransactions", "false");
                i += 1;
            }
            "-t" => {
                cli.set("dotransactions", "true");
                i += 1;
            }
            _ => {
                return Err(ArgsError::UnknownOption {
                    option: flag.to_string(),
                })
            }
        }
    }
    files.override_with(&cli);
    // `-load` / `-t` win over the subcommand, as they do in YCSB's own Client.
    let phase = match files.get("dotransactions") {
        Some("false") => Phase::Load,
        Some("true") => Phase::Run,
        _ => phase,
    };
    files.set(
        "dotransactions",
        if phase == Phase::Run { "true" } else { "false" },
    );
    Ok(CommandLine {
        phase,
        properties: files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_ycsb_command_line_runs_with_only_the_program_name_changed() {
        let dir = std::env::temp_dir().join(format!("hayate-bench-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let a = dir.join("workloada");
        let b = dir.join("extra");
        std::fs::write(&a, "recordcount=1000\noperationcount=1000\nreadproportion=0.5\n").expect("write");
        std::fs::write(&b, "recordcount=2000\n").expect("write");
        let line = format!(
            "run cassandra-cql -p recordcount=3 -P {} -P {} -threads 8 -target 500 -s -p hosts=h1,h2",
            a.display(),
            b.display()
        );
        let parsed = parse(&argv(&line)).expect("parses");
        assert_eq!(parsed.phase, Phase::Run);
        let p = &parsed.properties;
        // -p beats every file even when it came before them.
        assert_eq!(p.get("recordcount"), Some("3"));
        assert_eq!(p.get("operationcount"), Some("1000"));
        assert_eq!(p.get("threadcount"), Some("8"));
        assert_eq!(p.get("target"), Some("500"));
        assert_eq!(p.get("status"), Some("true"));
        assert_eq!(p.get("hosts"), Some("h1,h2"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn bindings_flags_and_mistakes() {
        assert_eq!(parse(&argv("load cql -p a=b")).expect("cql").phase, Phase::Load);
        assert_eq!(
            parse(&argv("load cassandra2-cql")).expect("c2").phase,
            Phase::Load
        );
        assert_eq!(parse(&argv("run -load")).expect("-load").phase, Phase::Load);
        assert_eq!(
            parse(&argv("load -t -db site.ycsb.db.CassandraCQLClient"))
                .expect("-t")
                .phase,
            Phase::Run
        );
        assert!(matches!(
            parse(&argv("run mongodb")),
            Err(ArgsError::UnknownBinding { .. })
        ));
        assert!(matches!(
            parse(&argv("run -p novalue")),
            Err(ArgsError::NotKeyValue { .. })
        ));
        assert!(matches!(
            parse(&argv("run -threads")),
            Err(ArgsError::MissingValue { .. })
        ));
        assert!(matches!(
            parse(&argv("run -threads x")),
            Err(ArgsError::NotANumber { .. })
        ));
        assert!(matches!(
            parse(&argv("run -x")),
            Err(ArgsError::UnknownOption { .. })
        ));
        assert!(matches!(
            parse(&argv("run -P /nonexistent/workload")),
            Err(ArgsError::Property(_))
        ));
        // A value may itself contain '=': only the first one splits.
        let p = parse(&argv("run -p a=b=c")).expect("parses").properties;
        assert_eq!(p.get("a"), Some("b=c"));
    }
}
