//! The batchlog: what makes a logged batch all-or-nothing across a crash (Cassandra's
//! BatchlogManager, kept on the coordinator).
//!
//! Before the coordinator applies the mutations of a logged batch it appends them, encoded, to
//! the batchlog; once every write of the batch has been answered it appends a `done` record for
//! the batch. A node that starts again finds each batch that has no `done` record and applies
//! it again, whole. A crash before the batch record is complete leaves a torn record that fails
//! its checksum: none of the batch was applied (the coordinator applies nothing before the
//! record is written), so none of it is. Applying a batch a second time is harmless, as with
//! hints: every cell carries the batch's timestamp and replicas merge by last-write-wins.
//!
//! Records are written with one `write` call each, not buffered in the process, so they
//! survive a crash of the process as soon as `append` returns (as the write buffer makes the
//! mutations themselves survive it). With `sync_each` (the node's `commit_to_device`) a batch
//! record is also synced before the batch is applied, so a power failure cannot keep part of
//! a batch either. `done` records are never synced: one lost to a power failure only makes the
//! batch apply again.
//!
//! ```text
//! <dir>/<sequence, 16 hex digits>.batchlog
//!
//! a segment is a run of records:
//!  0        4        8     9                17
//!  +--------+--------+-----+----------------+----------------------------+
//!  | length | crc32c | kind|    batch id    | payload (length bytes)      |
//!  |  u32   |  u32   | u8  |      u64       | (kind 1 only; empty for 2) |
//!  +--------+--------+-----+----------------+----------------------------+
//! ```
//! Integers are big-endian; the checksum covers kind, batch id and payload. Kind 1 is a batch,
//! kind 2 the `done` record of the batch with that id. Batch ids count up across segments and
//! restarts. A segment is deleted once it is no longer the open one and every batch in it is
//! done; the segments found at start are deleted by [`Batchlog::forget_recovered`] once the
//! caller has applied what they held.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The fixed part of a record: length, checksum, kind, batch id.
pub const RECORD_HEADER_BYTES: usize = 17;
/// The largest batch record: a batch of 65,535 statements of large rows is far smaller than
/// an internode frame, which is this large.
pub const BATCH_PAYLOAD_MAX_BYTES: usize = crate::message::FRAME_BYTES_MAX;
/// A segment is closed and a new one opened past this size.
const SEGMENT_BYTES_MAX: u64 = 32 << 20;
const SEGMENT_SUFFIX: &str = "batchlog";
const KIND_BATCH: u8 = 1;
const KIND_DONE: u8 = 2;

/// A batch a previous run logged and did not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedBatch {
    pub id: u64,
    pub payload: Vec<u8>,
}

/// A batch in the log, to be passed to [`Batchlog::done`] once it has been applied.
#[derive(Debug)]
#[must_use = "a batch that is never marked done is applied again at the next start"]
pub struct Ticket {
    id: u64,
    segment: u64,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum BatchlogError {
    TooLarge { bytes: usize },
    Io { path: PathBuf, source: io::Error },
}

impl std::fmt::Display for BatchlogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchlogError::TooLarge { bytes } => write!(
                f,
                "a logged batch of {bytes} bytes is larger than {BATCH_PAYLOAD_MAX_BYTES}; split it"
            ),
            BatchlogError::Io { path, source } => write!(
                f,
                "cannot write the batchlog {}: {source}; check the data directory's free space and permissions",
                path.display()
            ),
        }
    }
}

impl std::error::Error for BatchlogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BatchlogError::Io { source, .. } => Some(source),
            BatchlogError::TooLarge { .. } => None,
        }
    }
}

pub struct Batchlog {
    dir: PathBuf,
    sync_each: bool,
    state: Mutex<State>,
}

struct State {
    open: File,
    open_sequence: u64,
    open_bytes: u64,
    next_id: u64,
    /// Batches not yet done, by the segment that holds them.
    pending: BTreeMap<u64, BTreeSet<u64>>,
    /// Segments found at start, deleted once the caller applied what they held.
    recovered: Vec<u64>,
}

impl Batchlog {
    /// Opens the batchlog folder, reads what a previous run left, and returns the batches it
    /// did not finish (oldest first) for the caller to apply and then
    /// [`forget_recovered`](Batchlog::forget_recovered). A torn or corrupt record ends its
    /// segment (it can only be the last one a crash interrupted) and is logged.
    pub fn open(dir: &Path, sync_each: bool) -> Result<(Batchlog, Vec<LoggedBatch>), BatchlogError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BatchlogError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut sequences = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            let name = entry.file_name();
            if let Some(sequence) = name
                .to_str()
                .and_then(|n| n.strip_suffix(&format!(".{SEGMENT_SUFFIX}")))
                .and_then(|n| u64::from_str_radix(n, 16).ok())
            {
                sequences.push(sequence);
            }
        }
        sequences.sort_unstable();
        let mut batches: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        let mut next_id = 0;
        for &sequence in &sequences {
            let path = segment_path(dir, sequence);
            let mut bytes = Vec::new();
            File::open(&path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(io_err(&path))?;
            let mut rest = bytes.as_slice();
            while !rest.is_empty() {
                let Some((kind, id, payload, after)) = read_record(rest) else {
                    tracing::warn!(
                        "batchlog {}: a torn or corrupt record at byte {} ends the segment \
                         (a crash while a batch was being logged: that batch was not applied)",
                        path.display(),
                        bytes.len() - rest.len()
                    );
                    break;
                };
                next_id = next_id.max(id + 1);
                match kind {
                    KIND_BATCH => {
                        batches.insert(id, payload.to_vec());
                    }
                    _ => {
                        batches.remove(&id);
                    }
                }
                rest = after;
            }
        }
        let open_sequence = sequences.last().map_or(0, |s| s + 1);
        let path = segment_path(dir, open_sequence);
        let open = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let log = Batchlog {
            dir: dir.to_path_buf(),
            sync_each,
            state: Mutex::new(State {
                open,
                open_sequence,
                open_bytes: 0,
                next_id,
                pending: BTreeMap::new(),
                recovered: sequences,
            }),
        };
        let unfinished = batches
            .into_iter()
            .map(|(id, payload)| LoggedBatch { id, payload })
            .collect();
        Ok((log, unfinished))
    }

    /// Logs a batch before it is applied. When this returns the batch survives a crash of the
    /// process (and of the machine, with `sync_each`).
    pub fn append(&self, payload: &[u8]) -> Result<Ticket, BatchlogError> {
        if payload.len() > BATCH_PAYLOAD_MAX_BYTES {
            return Err(BatchlogError::TooLarge { bytes: payload.len() });
        }
        let mut state = self.state.lock().expect("batchlog lock poisoned");
        let id = state.next_id;
        let record = encode_record(KIND_BATCH, id, payload);
        self.write(&mut state, &record, self.sync_each)?;
        state.next_id += 1;
        let segment = state.open_sequence;
        state.pending.entry(segment).or_default().insert(id);
        Ok(Ticket { id, segment })
    }

    /// Records that every write of the batch was answered, and deletes segments left with
    /// nothing to replay. A failure to write the record only means the batch is applied again
    /// at the next start, so it is logged, not returned.
    pub fn done(&self, ticket: Ticket) {
        let mut state = self.state.lock().expect("batchlog lock poisoned");
        let record = encode_record(KIND_DONE, ticket.id, &[]);
        if let Err(e) = self.write(&mut state, &record, false) {
            tracing::warn!("{e} (the batch will be applied again at the next start)");
        }
        if let Some(ids) = state.pending.get_mut(&ticket.segment) {
            ids.remove(&ticket.id);
            if ids.is_empty() {
                state.pending.remove(&ticket.segment);
            }
        }
        self.delete_finished(&mut state);
    }

    /// Deletes the segments found at start: call it once the batches [`Batchlog::open`]
    /// returned have been applied.
    pub fn forget_recovered(&self) {
        let mut state = self.state.lock().expect("batchlog lock poisoned");
        for sequence in std::mem::take(&mut state.recovered) {
            remove_segment(&self.dir, sequence);
        }
    }

    /// Batches logged and not yet done in this run.
    pub fn pending_count(&self) -> usize {
        let state = self.state.lock().expect("batchlog lock poisoned");
        state.pending.values().map(BTreeSet::len).sum()
    }

    fn write(&self, state: &mut State, record: &[u8], sync: bool) -> Result<(), BatchlogError> {
        let path = segment_path(&self.dir, state.open_sequence);
        let io_err = |source| BatchlogError::Io {
            path: path.clone(),
            source,
        };
        state.open.write_all(record).map_err(io_err)?;
        if sync {
            state.open.sync_data().map_err(io_err)?;
        }
        state.open_bytes += record.len() as u64;
        if state.open_bytes >= SEGMENT_BYTES_MAX {
            let sequence = state.open_sequence + 1;
            let next = segment_path(&self.dir, sequence);
            state.open = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&next)
                .map_err(|source| BatchlogError::Io { path: next, source })?;
            state.open_sequence = sequence;
            state.open_bytes = 0;
            self.delete_finished(state);
        }
        Ok(())
    }

    /// Deletes closed segments of this run whose batches are all done.
    fn delete_finished(&self, state: &mut State) {
        let recovered_max = state.recovered.last().copied();
        let first_this_run = recovered_max.map_or(0, |s| s + 1);
        for sequence in first_this_run..state.open_sequence {
            if !state.pending.contains_key(&sequence) && segment_path(&self.dir, sequence).exists() {
                remove_segment(&self.dir, sequence);
            }
        }
    }
}

fn segment_path(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("{sequence:016x}.{SEGMENT_SUFFIX}"))
}

fn remove_segment(dir: &Path, sequence: u64) {
    let path = segment_path(dir, sequence);
    if let Err(e) = fs::remove_file(&path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!("cannot delete the batchlog segment {}: {e}", path.display());
        }
    }
}

fn encode_record(kind: u8, id: u64, payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
    record.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    record.extend_from_slice(&[0; 4]);
    record.push(kind);
    record.extend_from_slice(&id.to_be_bytes());
    record.extend_from_slice(payload);
    let crc = crc32c::crc32c(&record[8..]);
    record[4..8].copy_from_slice(&crc.to_be_bytes());
    record
}

/// One record from the front of `b`: (kind, batch id, payload, the bytes after it), or None if
/// the record is torn, corrupt or of an unknown kind.
fn read_record(b: &[u8]) -> Option<(u8, u64, &[u8], &[u8])> {
    let header = b.get(..RECORD_HEADER_BYTES)?;
    let length = u32::from_be_bytes(header[0..4].try_into().ok()?) as usize;
    if length > BATCH_PAYLOAD_MAX_BYTES {
        return None;
    }
    let crc = u32::from_be_bytes(header[4..8].try_into().ok()?);
    let end = RECORD_HEADER_BYTES.checked_add(length)?;
    let checked = b.get(8..end)?;
    if crc32c::crc32c(checked) != crc {
        return None;
    }
    let kind = header[8];
    if kind != KIND_BATCH && kind != KIND_DONE {
        return None;
    }
    let id = u64::from_be_bytes(header[9..17].try_into().ok()?);
    Some((kind, id, &b[RECORD_HEADER_BYTES..end], &b[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> (Batchlog, Vec<LoggedBatch>) {
        Batchlog::open(dir, false).expect("opens")
    }

    #[test]
    fn a_batch_not_done_is_returned_at_the_next_open_and_a_done_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, unfinished) = open(dir.path());
        assert!(unfinished.is_empty());
        let a = log.append(b"batch a").expect("appends");
        let _b = log.append(b"batch b").expect("appends");
        log.done(a);
        drop(log);
        let (log, unfinished) = open(dir.path());
        assert_eq!(unfinished.len(), 1);
        assert_eq!(unfinished[0].payload, b"batch b");
        // Ids go on counting, so a new batch is never confused with a recovered one.
        let c = log.append(b"batch c").expect("appends");
        assert!(c.id > unfinished[0].id);
        log.done(c);
        log.forget_recovered();
        drop(log);
        let (_, unfinished) = open(dir.path());
        assert!(unfinished.is_empty(), "{unfinished:?}");
    }

    #[test]
    fn a_torn_batch_record_is_not_replayed_and_earlier_ones_are() {
        // A crash in the middle of logging a batch: the coordinator applied none of it, so
        // none of it may come back.
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = open(dir.path());
        let _kept = log.append(b"complete").expect("appends");
        let _torn = log.append(&[7u8; 1000]).expect("appends");
        drop(log);
        let path = segment_path(dir.path(), 0);
        let len = fs::metadata(&path).expect("exists").len();
        let f = OpenOptions::new().write(true).open(&path).expect("opens");
        f.set_len(len - 10).expect("truncates");
        let (_, unfinished) = open(dir.path());
        assert_eq!(unfinished.len(), 1);
        assert_eq!(unfinished[0].payload, b"complete");
    }

    #[test]
    fn a_flipped_bit_fails_the_checksum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = open(dir.path());
        let _t = log.append(b"payload").expect("appends");
        drop(log);
        let path = segment_path(dir.path(), 0);
        let mut bytes = fs::read(&path).expect("reads");
        bytes[RECORD_HEADER_BYTES + 2] ^= 1;
        fs::write(&path, bytes).expect("writes");
        let (_, unfinished) = open(dir.path());
        assert!(unfinished.is_empty());
    }

    #[test]
    fn segments_whose_batches_are_done_are_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = open(dir.path());
        let big = vec![1u8; 1 << 20];
        let mut tickets = Vec::new();
        for _ in 0..(SEGMENT_BYTES_MAX >> 20) + 2 {
            tickets.push(log.append(&big).expect("appends"));
        }
        let segments = || fs::read_dir(dir.path()).expect("lists").count();
        assert!(segments() >= 2);
        for t in tickets {
            log.done(t);
        }
        assert_eq!(segments(), 1, "only the open segment is left");
        assert_eq!(log.pending_count(), 0);
    }

    #[test]
    fn an_oversized_batch_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, _) = open(dir.path());
        let huge = vec![0u8; BATCH_PAYLOAD_MAX_BYTES + 1];
        assert!(matches!(log.append(&huge), Err(BatchlogError::TooLarge { .. })));
        assert_eq!(
            fs::metadata(segment_path(dir.path(), 0)).expect("exists").len(),
            0
        );
    }
}
