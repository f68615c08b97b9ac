//! How far a node got receiving the ranges of one topology change, on disk, so that a
//! receiver killed mid-stream resumes from its last chunk rather than from scratch.
//!
//! `<state dir>/change-<id>.json`, replaced whole (write, fsync, rename) four times a second
//! while chunks arrive and once when the receive ends, and only after the replica has made every chunk it counts
//! durable (`Replica::sync`): a checkpoint never claims more than the device holds.
//!
//! ```json
//! {"change": 7, "spans": [{"span": {"table": 3, "start_exclusive": -9, "end_inclusive": 42},
//!                          "after": "0000…(48 hex digits)", "done": false}]}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::control::Span;
use crate::replica::STREAM_POSITION_BYTES;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanState {
    pub after: Option<[u8; STREAM_POSITION_BYTES]>,
    pub done: bool,
}

#[derive(Serialize, Deserialize)]
struct File {
    change: u64,
    spans: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    span: Span,
    after: Option<String>,
    done: bool,
}

/// The checkpoint file of change `change` in `dir`.
pub fn path(dir: &Path, change: u64) -> PathBuf {
    dir.join(format!("change-{change}.json"))
}

/// What a checkpoint holds; empty if there is none (or it does not read: the streams start
/// over, which costs time, not data).
pub fn load(dir: &Path, change: u64) -> BTreeMap<Span, SpanState> {
    let path = path(dir, change);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(_) => return BTreeMap::new(),
    };
    let file: File = match serde_json::from_slice(&bytes) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(
                "ignoring the stream checkpoint {}: {e}; its ranges stream again",
                path.display()
            );
            return BTreeMap::new();
        }
    };
    if file.change != change {
        return BTreeMap::new();
    }
    file.spans
        .into_iter()
        .map(|e| {
            let after = e.after.as_deref().and_then(from_hex);
            (e.span, SpanState { after, done: e.done })
        })
        .collect()
}

/// Replaces the checkpoint with `state`.
pub fn save(dir: &Path, change: u64, state: &BTreeMap<Span, SpanState>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = File {
        change,
        spans: state
            .iter()
            .map(|(span, s)| Entry {
                span: *span,
                after: s.after.map(|p| to_hex(&p)),
                done: s.done,
            })
            .collect(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    let path = path(dir, change);
    let tmp = path.with_extension("json.tmp");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Removes the checkpoints of every change but `keep` (finished or aborted ones).
pub fn remove_others(dir: &Path, keep: Option<u64>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let Some(id) = name
            .strip_prefix("change-")
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if Some(id) != keep {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn from_hex(s: &str) -> Option<[u8; STREAM_POSITION_BYTES]> {
    if s.len() != 2 * STREAM_POSITION_BYTES || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; STREAM_POSITION_BYTES];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_others_are_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let span = Span {
            table: 3,
            start_exclusive: i64::MIN,
            end_inclusive: 42,
        };
        let mut state = BTreeMap::new();
        state.insert(
            span,
            SpanState {
                after: Some([7; STREAM_POSITION_BYTES]),
                done: false,
            },
        );
        save(dir.path(), 9, &state).expect("saved");
        assert_eq!(load(dir.path(), 9), state);
        assert!(load(dir.path(), 10).is_empty());
        save(dir.path(), 10, &BTreeMap::new()).expect("saved");
        remove_others(dir.path(), Some(10));
        assert!(!path(dir.path(), 9).exists());
        assert!(path(dir.path(), 10).exists());
        std::fs::write(path(dir.path(), 10), b"{not json").expect("written");
        assert!(load(dir.path(), 10).is_empty());
    }
}
