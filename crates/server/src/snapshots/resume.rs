//! Where an interrupted restore goes on from. A restore writes its units (a snapshot's tables,
//! a backup's parts) one after another, page by page; this file records the units finished and
//! how far the current one is, so that the same restore asked again (after a node restart, a
//! replica down at ALL, a closed tool) starts where the last one stopped rather than from the
//! beginning. Writing a page twice is harmless (a row's merge keeps the newest cells), so the
//! record may lag: it is saved at most once a second, and each time a unit ends.
//!
//! `<data_dir>/restore-progress.json`, one per node (one restore runs at a time):
//! `{"request": "...", "done": ["unit", ...], "current": ["unit", position]}`. `request`
//! names the source, the tables and the target; another request starts afresh.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The file, under `data_dir`.
pub const FILE: &str = "restore-progress.json";

/// How often the position within a unit is saved, at most.
const SAVE_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    request: String,
    done: Vec<String>,
    current: Option<(String, u64)>,
}

/// A restore's progress, kept on disk.
pub struct Checkpoint {
    path: PathBuf,
    state: State,
    resumed: bool,
    saved: Instant,
}

impl Checkpoint {
    /// The progress of `request` recorded under `data_dir`, if the last restore there was the
    /// same request and did not finish; else a fresh start.
    pub fn open(data_dir: &Path, request: String) -> Checkpoint {
        let path = data_dir.join(FILE);
        let kept = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .filter(|s| s.request == request);
        let resumed = kept.is_some();
        Checkpoint {
            path,
            state: kept.unwrap_or(State {
                request,
                ..State::default()
            }),
            resumed,
            // The first page's progress is saved at once: a restore stopped after it goes on.
            saved: Instant::now()
                .checked_sub(SAVE_EVERY)
                .unwrap_or_else(Instant::now),
        }
    }

    /// Whether an earlier run of the same restore left progress to go on from.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    /// Where unit `unit` starts: `None` if an earlier run finished it, else the position it
    /// reached (0 for a unit not begun).
    pub fn start(&self, unit: &str) -> Option<u64> {
        if self.state.done.iter().any(|u| u == unit) {
            return None;
        }
        Some(match &self.state.current {
            Some((u, at)) if u == unit => *at,
            _ => 0,
        })
    }

    /// Unit `unit` is written up to `position` (exclusive); saved if the last save is a second
    /// old.
    pub fn advance(&mut self, unit: &str, position: u64) -> Result<(), String> {
        self.state.current = Some((unit.to_owned(), position));
        if self.saved.elapsed() >= SAVE_EVERY {
            self.save()?;
        }
        Ok(())
    }

    /// Unit `unit` is written whole.
    pub fn finish_unit(&mut self, unit: &str) -> Result<(), String> {
        self.state.done.push(unit.to_owned());
        self.state.current = None;
        self.save()
    }

    /// The restore finished: nothing to resume.
    pub fn finish(self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", self.path.display());
            }
        }
    }

    fn save(&mut self) -> Result<(), String> {
        self.saved = Instant::now();
        let bytes = serde_json::to_vec(&self.state).map_err(|e| e.to_string())?;
        hayate_storage::files::write_atomically(&self.path, &bytes).map_err(|e| {
            format!(
                "cannot record the restore's progress in {}: {e}",
                self.path.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_request_goes_on_where_it_stopped_and_another_starts_afresh() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = Checkpoint::open(dir.path(), "snapshot s1 into ks.t".into());
        assert!(!c.resumed());
        c.finish_unit("ks.a").expect("save");
        c.advance("ks.b", 512).expect("advance");
        c.save().expect("save");
        drop(c);

        let c = Checkpoint::open(dir.path(), "snapshot s1 into ks.t".into());
        assert!(c.resumed());
        assert_eq!(c.start("ks.a"), None, "finished before");
        assert_eq!(c.start("ks.b"), Some(512), "goes on from its position");
        assert_eq!(c.start("ks.c"), Some(0), "not begun");

        let other = Checkpoint::open(dir.path(), "snapshot s2 into ks.t".into());
        assert!(!other.resumed());
        assert_eq!(other.start("ks.a"), Some(0));

        c.finish();
        assert!(!dir.path().join(FILE).exists());
        let again = Checkpoint::open(dir.path(), "snapshot s1 into ks.t".into());
        assert!(!again.resumed(), "a finished restore is not resumed");
    }

    #[test]
    fn an_unreadable_file_is_a_fresh_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(FILE), b"{not json").expect("write");
        let c = Checkpoint::open(dir.path(), "r".into());
        assert!(!c.resumed());
        assert_eq!(c.start("u"), Some(0));
    }
}
