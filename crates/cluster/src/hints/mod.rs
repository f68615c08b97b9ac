//! Hints: writes kept on the coordinator for a replica that was down or did not answer in time,
//! replayed when it comes back (Cassandra's hinted handoff).
//!
//! Each target node has a folder of segment files; a hint is appended to the target's open
//! segment, and a segment is replayed and deleted as a whole. A hint's payload is opaque here
//! (the coordinator stores encoded mutations), so this file format knows nothing of rows.
//!
//! ```text
//! <dir>/<host id>/<sequence, 16 hex digits>.hints
//!
//! a segment is a run of records:
//!  0        4        8                16
//!  +--------+--------+----------------+------------------------+
//!  | length | crc32c | created_at_us  | payload (length bytes)  |
//!  |  u32   |  u32   |      i64       |                         |
//!  +--------+--------+----------------+------------------------+
//! ```
//! All integers are big-endian; the checksum covers `created_at_us` and the payload. Appends
//! are not synced one by one (as Cassandra's hints are flushed periodically): [`HintStore::sync`]
//! makes them durable, and the node calls it every [`HintsConfig::sync_interval_ms`]. A torn
//! last record, from a crash, fails its checksum: replay stops there and says so.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::node::HostId;

/// A record header: length, checksum, creation time.
pub const RECORD_HEADER_BYTES: usize = 16;
/// The largest hint payload: a mutation message may be this large (16 MiB rows and more).
pub const HINT_PAYLOAD_MAX_BYTES: usize = 80 << 20;
const SEGMENT_SUFFIX: &str = "hints";

#[derive(Clone, Debug)]
pub struct HintsConfig {
    /// A segment is closed (and can be replayed) past this size.
    pub segment_bytes_max: u64,
    /// Hints kept for one node at most; past it new hints for that node are dropped and
    /// counted, and the node needs a repair instead (Cassandra's `max_hints_size_per_host`).
    pub target_bytes_max: u64,
    pub sync_interval_ms: u64,
}

impl Default for HintsConfig {
    fn default() -> HintsConfig {
        HintsConfig {
            segment_bytes_max: 32 << 20,
            target_bytes_max: 1 << 30,
            sync_interval_ms: 1000,
        }
    }
}

/// One stored hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hint {
    pub created_at_us: i64,
    pub payload: Vec<u8>,
}

/// Why a hint was not stored.
#[derive(Debug)]
#[non_exhaustive]
pub enum HintError {
    /// The target already has `target_bytes_max` of hints waiting.
    TargetFull {
        target: HostId,
        bytes: u64,
    },
    TooLarge {
        bytes: usize,
    },
    Io {
        path: PathBuf,
        source: io::Error,
    },
}

impl std::fmt::Display for HintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HintError::TargetFull { target, bytes } => write!(
                f,
                "not storing a hint for {target}: {bytes} bytes of hints already wait for it \
                 (hints.target_bytes_max); run a repair of that node once it is back"
            ),
            HintError::TooLarge { bytes } => write!(
                f,
                "not storing a hint of {bytes} bytes: larger than {HINT_PAYLOAD_MAX_BYTES}"
            ),
            HintError::Io { path, source } => write!(
                f,
                "cannot write hints to {}: {source}; check the data directory's free space and permissions",
                path.display()
            ),
        }
    }
}

impl std::error::Error for HintError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HintError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The hints of every target on this node.
pub struct HintStore {
    dir: PathBuf,
    config: HintsConfig,
    targets: Mutex<HashMap<HostId, Target>>,
}

#[derive(Default)]
struct Target {
    /// Closed segments, oldest first.
    closed: Vec<(u64, u64)>,
    open: Option<OpenSegment>,
    next_sequence: u64,
    /// Bytes in every segment of this target, open one included.
    bytes: u64,
    hints: u64,
}

struct OpenSegment {
    sequence: u64,
    file: BufWriter<File>,
    bytes: u64,
}

/// A closed segment handed out for replay.
#[derive(Debug)]
pub struct Segment {
    pub target: HostId,
    pub path: PathBuf,
    sequence: u64,
    bytes: u64,
}

/// What reading a segment found.
#[derive(Debug, Default)]
pub struct SegmentHints {
    pub hints: Vec<Hint>,
    /// Set when the segment ends in a record that does not check out (a torn write): the
    /// hints before it are good, the rest is lost.
    pub damaged_at: Option<u64>,
}

impl HintStore {
    /// Opens (or creates) the hints folder and finds the segments a previous run left.
    pub fn open(dir: &Path, config: HintsConfig) -> Result<HintStore, HintError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| HintError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut targets: HashMap<HostId, Target> = HashMap::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            let Some(host) = entry.file_name().to_str().and_then(|n| n.parse::<HostId>().ok()) else {
                continue;
            };
            let target = targets.entry(host).or_default();
            for seg in fs::read_dir(entry.path()).map_err(io_err(&entry.path()))? {
                let seg = seg.map_err(io_err(&entry.path()))?;
                let name = seg.file_name();
                let Some(sequence) = name
                    .to_str()
                    .and_then(|n| n.strip_suffix(&format!(".{SEGMENT_SUFFIX}")))
                    .and_then(|n| u64::from_str_radix(n, 16).ok())
                else {
                    continue;
                };
                let bytes = seg.metadata().map_err(io_err(&seg.path()))?.len();
                target.closed.push((sequence, bytes));
                target.bytes += bytes;
                target.next_sequence = target.next_sequence.max(sequence + 1);
            }
            target.closed.sort_unstable();
        }
        Ok(HintStore {
            dir: dir.to_path_buf(),
            config,
            targets: Mutex::new(targets),
        })
    }

    fn segment_path(&self, target: HostId, sequence: u64) -> PathBuf {
        self.dir
            .join(target.to_string())
            .join(format!("{sequence:016x}.{SEGMENT_SUFFIX}"))
    }

    /// Appends a hint for `target`.
    pub fn store(&self, target: HostId, created_at_us: i64, payload: &[u8]) -> Result<(), HintError> {
        if payload.len() > HINT_PAYLOAD_MAX_BYTES {
            return Err(HintError::TooLarge { bytes: payload.len() });
        }
        let record_bytes = (RECORD_HEADER_BYTES + payload.len()) as u64;
        let mut targets = self.targets.lock().expect("hints lock poisoned");
        let t = targets.entry(target).or_default();
        if t.bytes + record_bytes > self.config.target_bytes_max {
            return Err(HintError::TargetFull {
                target,
                bytes: t.bytes,
            });
        }
        if t.open.is_none() {
            let sequence = t.next_sequence;
            t.next_sequence += 1;
            let path = self.segment_path(target, sequence);
            let io_err = |source| HintError::Io {
                path: path.clone(),
                source,
            };
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(io_err)?;
            }
            let file = OpenOptions::new()
                .create_new(true)
                .write(true)
                .open(&path)
                .map_err(io_err)?;
            t.open = Some(OpenSegment {
                sequence,
                file: BufWriter::new(file),
                bytes: 0,
            });
        }
        let open = t.open.as_mut().expect("opened above");
        let mut checked = Vec::with_capacity(8 + payload.len());
        checked.extend_from_slice(&created_at_us.to_be_bytes());
        checked.extend_from_slice(payload);
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&(payload.len() as u32).to_be_bytes());
        header[4..].copy_from_slice(&crc32c::crc32c(&checked).to_be_bytes());
        let path = self.segment_path(target, open.sequence);
        open.file
            .write_all(&header)
            .and_then(|()| open.file.write_all(&checked))
            .map_err(|source| HintError::Io { path, source })?;
        open.bytes += record_bytes;
        t.bytes += record_bytes;
        t.hints += 1;
        if open.bytes >= self.config.segment_bytes_max {
            close_open(self, target, t)?;
        }
        Ok(())
    }

    /// Makes every hint stored so far durable.
    pub fn sync(&self) -> Result<(), HintError> {
        let mut targets = self.targets.lock().expect("hints lock poisoned");
        for (host, t) in targets.iter_mut() {
            if let Some(open) = &mut t.open {
                let path = self.segment_path(*host, open.sequence);
                open.file
                    .flush()
                    .and_then(|()| open.file.get_ref().sync_data())
                    .map_err(|source| HintError::Io { path, source })?;
            }
        }
        Ok(())
    }

    /// Nodes with hints waiting, with their byte count.
    pub fn targets(&self) -> Vec<(HostId, u64)> {
        let targets = self.targets.lock().expect("hints lock poisoned");
        let mut out: Vec<(HostId, u64)> = targets
            .iter()
            .filter(|(_, t)| t.bytes > 0)
            .map(|(h, t)| (*h, t.bytes))
            .collect();
        out.sort_unstable();
        out
    }

    /// Hints stored since this store opened, for metrics.
    pub fn stored_count(&self) -> u64 {
        let targets = self.targets.lock().expect("hints lock poisoned");
        targets.values().map(|t| t.hints).sum()
    }

    /// The oldest segment of `target`, closing the open one if nothing older waits. The caller
    /// replays it and then [`HintStore::finish`]es it, or [`HintStore::give_back`] if the
    /// target went away meanwhile.
    pub fn take(&self, target: HostId) -> Result<Option<Segment>, HintError> {
        let mut targets = self.targets.lock().expect("hints lock poisoned");
        let Some(t) = targets.get_mut(&target) else {
            return Ok(None);
        };
        if t.closed.is_empty() && t.open.is_some() {
            close_open(self, target, t)?;
        }
        if t.closed.is_empty() {
            return Ok(None);
        }
        let (sequence, bytes) = t.closed.remove(0);
        Ok(Some(Segment {
            target,
            path: self.segment_path(target, sequence),
            sequence,
            bytes,
        }))
    }

    /// A segment whose hints were all delivered: deleted.
    pub fn finish(&self, segment: Segment) -> Result<(), HintError> {
        fs::remove_file(&segment.path).map_err(|source| HintError::Io {
            path: segment.path.clone(),
            source,
        })?;
        let mut targets = self.targets.lock().expect("hints lock poisoned");
        if let Some(t) = targets.get_mut(&segment.target) {
            t.bytes = t.bytes.saturating_sub(segment.bytes);
        }
        Ok(())
    }

    /// A segment that could not be delivered now: kept, to be replayed first next time.
    pub fn give_back(&self, segment: Segment) {
        let mut targets = self.targets.lock().expect("hints lock poisoned");
        let t = targets.entry(segment.target).or_default();
        t.closed.insert(0, (segment.sequence, segment.bytes));
    }
}

fn close_open(store: &HintStore, target: HostId, t: &mut Target) -> Result<(), HintError> {
    if let Some(mut open) = t.open.take() {
        let path = store.segment_path(target, open.sequence);
        open.file
            .flush()
            .and_then(|()| open.file.get_ref().sync_data())
            .map_err(|source| HintError::Io { path, source })?;
        t.closed.push((open.sequence, open.bytes));
    }
    Ok(())
}

impl Segment {
    /// Reads every hint of the segment, stopping at the first record that does not check out.
    pub fn read(&self) -> Result<SegmentHints, HintError> {
        let mut bytes = Vec::new();
        File::open(&self.path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|source| HintError::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(decode_segment(&bytes))
    }
}

fn decode_segment(bytes: &[u8]) -> SegmentHints {
    let mut out = SegmentHints::default();
    let mut at = 0usize;
    while at < bytes.len() {
        let Some(header) = bytes.get(at..at + 8) else {
            out.damaged_at = Some(at as u64);
            break;
        };
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let body = (len <= HINT_PAYLOAD_MAX_BYTES)
            .then(|| bytes.get(at + 8..at + RECORD_HEADER_BYTES + len))
            .flatten();
        match body {
            Some(checked) if crc32c::crc32c(checked) == crc => {
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&checked[..8]);
                out.hints.push(Hint {
                    created_at_us: i64::from_be_bytes(ts),
                    payload: checked[8..].to_vec(),
                });
                at += RECORD_HEADER_BYTES + len;
            }
            _ => {
                out.damaged_at = Some(at as u64);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(b: u8) -> HostId {
        HostId([b; 16])
    }

    #[test]
    fn hints_come_back_in_order_after_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = HintsConfig {
            segment_bytes_max: 256,
            ..HintsConfig::default()
        };
        let store = HintStore::open(dir.path(), config.clone()).expect("opens");
        for i in 0..20u8 {
            store.store(host(1), i64::from(i), &[i; 30]).expect("stored");
        }
        store.store(host(2), 99, b"other").expect("stored");
        store.sync().expect("synced");
        drop(store);
        let store = HintStore::open(dir.path(), config).expect("reopens");
        let mut seen = Vec::new();
        while let Some(segment) = store.take(host(1)).expect("take") {
            let read = segment.read().expect("reads");
            assert_eq!(read.damaged_at, None);
            seen.extend(read.hints.into_iter().map(|h| h.created_at_us));
            store.finish(segment).expect("deleted");
        }
        assert_eq!(seen, (0..20).collect::<Vec<i64>>());
        assert_eq!(store.targets(), vec![(host(2), 16 + 5)]);
    }

    #[test]
    fn a_torn_last_record_loses_only_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = HintStore::open(dir.path(), HintsConfig::default()).expect("opens");
        for i in 0..3 {
            store.store(host(1), i, b"mutation bytes").expect("stored");
        }
        let segment = store.take(host(1)).expect("take").expect("a segment");
        let bytes = fs::read(&segment.path).expect("read");
        fs::write(&segment.path, &bytes[..bytes.len() - 3]).expect("torn");
        let read = segment.read().expect("reads");
        assert_eq!(read.hints.len(), 2);
        assert_eq!(read.damaged_at, Some(2 * (16 + 14)));
    }

    #[test]
    fn a_full_target_refuses_new_hints() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = HintsConfig {
            target_bytes_max: 100,
            ..HintsConfig::default()
        };
        let store = HintStore::open(dir.path(), config).expect("opens");
        store.store(host(1), 0, &[0; 60]).expect("fits");
        assert!(matches!(
            store.store(host(1), 1, &[0; 60]),
            Err(HintError::TargetFull { .. })
        ));
        store
            .store(host(2), 1, &[0; 60])
            .expect("another target has room");
    }

    #[test]
    fn a_segment_given_back_is_replayed_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = HintsConfig {
            segment_bytes_max: 16 + 4,
            ..HintsConfig::default()
        };
        let store = HintStore::open(dir.path(), config).expect("opens");
        for i in 0..3 {
            store.store(host(1), i, b"abcd").expect("stored");
        }
        let first = store.take(host(1)).expect("take").expect("segment");
        let first_path = first.path.clone();
        store.give_back(first);
        let again = store.take(host(1)).expect("take").expect("segment");
        assert_eq!(again.path, first_path);
    }
}
