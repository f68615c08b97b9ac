//! One run directory, as `hayate-bench run … -p rundir=DIR` leaves it: `summary.txt` (YCSB's
//! summary block), `timeseries.csv` (per second, per operation) and `meta.json` (label, phase,
//! threads…). Only one of the first two is required: a directory holding just the summary of a
//! real YCSB run still gives a table row.

use std::path::{Path, PathBuf};

use super::summary::Summary;
use super::timeseries::TimeSeries;

/// Larger files are not something the client writes; refusing them bounds memory.
pub const FILE_BYTES_MAX: u64 = 1 << 30;

#[derive(Debug, Clone)]
pub struct RunData {
    pub dir: PathBuf,
    pub label: String,
    pub phase: String,
    pub threads: Option<u64>,
    pub summary: Summary,
    pub series: Option<TimeSeries>,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    NotADirectory {
        dir: PathBuf,
    },
    Empty {
        dir: PathBuf,
    },
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    TooLarge {
        path: PathBuf,
        size_bytes: u64,
    },
    Csv {
        path: PathBuf,
        error: super::timeseries::CsvError,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NotADirectory { dir } => {
                write!(
                    f,
                    "{} is not a directory; give run directories (-p rundir=DIR)",
                    dir.display()
                )
            }
            RunError::Empty { dir } => write!(
                f,
                "{} has neither summary.txt nor timeseries.csv; is it a run directory?",
                dir.display()
            ),
            RunError::Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            RunError::TooLarge { path, size_bytes } => write!(
                f,
                "{} is {size_bytes} bytes, more than the {FILE_BYTES_MAX} a run writes",
                path.display()
            ),
            RunError::Csv { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl RunData {
    /// Loads a run directory. A missing or malformed `meta.json` is only a warning: the label
    /// falls back to the directory's name and the phase to what the summary suggests.
    pub fn load(dir: &Path, warn: &mut dyn FnMut(String)) -> Result<RunData, RunError> {
        if !dir.is_dir() {
            return Err(RunError::NotADirectory {
                dir: dir.to_path_buf(),
            });
        }
        let summary_text = read_optional(&dir.join("summary.txt"))?;
        let csv_path = dir.join("timeseries.csv");
        let csv_text = read_optional(&csv_path)?;
        if summary_text.is_none() && csv_text.is_none() {
            return Err(RunError::Empty {
                dir: dir.to_path_buf(),
            });
        }
        let summary = summary_text.as_deref().map(Summary::parse).unwrap_or_default();
        if summary_text.is_some() && summary.is_empty() {
            warn(format!(
                "{}: no '[SECTION], metric, value' lines; the table row will be empty",
                dir.join("summary.txt").display()
            ));
        }
        let series = match csv_text {
            Some(text) => Some(TimeSeries::parse(&text).map_err(|error| RunError::Csv {
                path: csv_path,
                error,
            })?),
            None => None,
        };
        let meta_path = dir.join("meta.json");
        let meta = match read_optional(&meta_path)? {
            Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(value) => value,
                Err(error) => {
                    warn(format!(
                        "{}: not valid JSON ({error}); ignored",
                        meta_path.display()
                    ));
                    serde_json::Value::Null
                }
            },
            None => serde_json::Value::Null,
        };
        let dir_name = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        let label = meta["label"]
            .as_str()
            .filter(|l| !l.trim().is_empty())
            .map_or(dir_name, str::to_string);
        let phase = meta["phase"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| guess_phase(&summary, series.as_ref()).to_string());
        let threads = meta["threads"].as_u64().or_else(|| {
            meta["properties"]["threadcount"]
                .as_str()
                .and_then(|t| t.parse().ok())
        });
        Ok(RunData {
            dir: dir.to_path_buf(),
            label,
            phase,
            threads,
            summary,
            series,
        })
    }
}

/// YCSB's load phase does nothing but inserts; anything else is a run phase.
fn guess_phase(summary: &Summary, series: Option<&TimeSeries>) -> &'static str {
    let others = ["READ", "UPDATE", "SCAN", "READ-MODIFY-WRITE", "DELETE"];
    let has_inserts =
        summary.operations("INSERT").is_some() || series.is_some_and(|s| s.operations.contains_key("INSERT"));
    let has_others = others
        .iter()
        .any(|op| summary.operations(op).is_some() || series.is_some_and(|s| s.operations.contains_key(*op)));
    if has_inserts && !has_others {
        "load"
    } else {
        "run"
    }
}

fn read_optional(path: &Path) -> Result<Option<String>, RunError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RunError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if metadata.len() > FILE_BYTES_MAX {
        return Err(RunError::TooLarge {
            path: path.to_path_buf(),
            size_bytes: metadata.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| RunError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phase_is_guessed_from_the_operations() {
        let load = Summary::parse("[INSERT], Operations, 10\n[CLEANUP], Operations, 1\n");
        assert_eq!(guess_phase(&load, None), "load");
        let run = Summary::parse("[INSERT], Operations, 10\n[READ], Operations, 10\n");
        assert_eq!(guess_phase(&run, None), "run");
        assert_eq!(guess_phase(&Summary::default(), None), "run");
    }
}
