//! The Raft log and the vote, on disk: openraft's `RaftLogStorage`.
//!
//! The log is one append-only file (`log`, framed as `files.rs` draws) whose records are JSON
//! [`LogRecord`]s: first, once the log has been purged, the id of the last purged entry, then
//! the entries in index order. Every append is written and fsynced before openraft hears it is
//! done; a truncation (a follower dropping entries that conflict with its new leader) cuts the
//! file with `ftruncate`; a purge (after a snapshot) rewrites the file without the purged
//! entries, through a temporary file and a rename. The entries are also kept in memory, where
//! reads are served: the metadata log is small, and a snapshot bounds it.
//!
//! The vote lives in `vote`, one record replaced whole (and fsynced) on every change. The last
//! committed log id lives in `committed`, replaced whole on every change but not fsynced: it is
//! a hint that lets a restarted node replay its committed entries at once instead of waiting
//! to hear from a leader, and losing it costs only that wait. Keeping it out of `vote` keeps a
//! commit from costing two fsyncs on every node, and a torn hint from ever touching the vote.
//!
//! File I/O runs on tokio's blocking threads so that an fsync never stalls the runtime.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader};
use serde::{Deserialize, Serialize};

use super::files::{self, Tail, COMMITTED_MAGIC, HEADER_BYTES, LOG_MAGIC, VOTE_MAGIC};
use super::raft_types::{storage_error, Entry, LogId, StorageError, TypeConfig, Vote};
use super::MetadataError;

pub(crate) const LOG_FILE: &str = "log";
pub(crate) const VOTE_FILE: &str = "vote";
pub(crate) const COMMITTED_FILE: &str = "committed";

/// One record of the log file.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum LogRecord {
    /// Entries up to and including this id were purged (they are in the snapshot). Only ever
    /// the first record.
    Purged(LogId),
    Entry(Entry),
}

/// The payload of the vote file.
#[derive(Serialize, Deserialize)]
struct VoteRecord {
    vote: Vote,
}

/// The payload of the committed file.
#[derive(Serialize, Deserialize)]
struct CommittedRecord {
    committed: Option<LogId>,
}

/// The log store openraft writes through; clones share one log (a clone is the log reader).
#[derive(Clone)]
pub(crate) struct LogStore {
    inner: Arc<Mutex<LogInner>>,
}

struct LogInner {
    log_path: PathBuf,
    vote_path: PathBuf,
    committed_path: PathBuf,
    /// Opened for appending; replaced when a purge rewrites the file.
    file: File,
    file_bytes: u64,
    /// Every entry in the file, by index, with the offset of its record.
    entries: BTreeMap<u64, (u64, Entry)>,
    purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

impl LogStore {
    /// Loads the log and the vote from `dir`, cutting off a torn last log record.
    pub(crate) fn open(dir: &Path) -> Result<LogStore, MetadataError> {
        let log_path = dir.join(LOG_FILE);
        let vote_path = dir.join(VOTE_FILE);
        let vote = match files::read_single(&vote_path, VOTE_MAGIC)? {
            Some(payload) => Some(
                serde_json::from_slice::<VoteRecord>(&payload)
                    .map_err(|e| MetadataError::Corrupt {
                        path: vote_path.clone(),
                        offset_bytes: HEADER_BYTES as u64,
                        reason: format!("vote record does not decode: {e}"),
                    })?
                    .vote,
            ),
            None => None,
        };
        let committed_path = dir.join(COMMITTED_FILE);
        let committed = read_committed_hint(&committed_path);
        if !log_path.exists() {
            files::replace_file(&log_path, &files::header(LOG_MAGIC))?;
        }
        let (purged, entries, good_bytes) = load_log(&log_path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&log_path)
            .map_err(|e| MetadataError::io(&log_path, e))?;
        let on_disk_bytes = file
            .metadata()
            .map_err(|e| MetadataError::io(&log_path, e))?
            .len();
        if on_disk_bytes != good_bytes {
            tracing::warn!(
                path = %log_path.display(),
                torn_bytes = on_disk_bytes - good_bytes,
                "cutting off the torn last record of the metadata log (a crash during its write)"
            );
            file.set_len(good_bytes)
                .map_err(|e| MetadataError::io(&log_path, e))?;
            file.sync_all().map_err(|e| MetadataError::io(&log_path, e))?;
        }
        Ok(LogStore {
            inner: Arc::new(Mutex::new(LogInner {
                log_path,
                vote_path,
                committed_path,
                file,
                file_bytes: good_bytes,
                entries,
                purged,
                vote,
                committed,
            })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        self.inner.lock().expect("a metadata log operation panicked")
    }

    /// True if the log holds entries or was purged after a snapshot: this node has been part
    /// of a cluster.
    pub(crate) fn has_history(&self) -> bool {
        let inner = self.lock();
        !inner.entries.is_empty() || inner.purged.is_some()
    }

    /// Runs `f` on a blocking thread with the log locked; a failure becomes openraft's error
    /// about `subject`.
    async fn blocking<T, F>(
        &self,
        subject: ErrorSubject<u64>,
        verb: ErrorVerb,
        f: F,
    ) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(&mut LogInner) -> Result<T, MetadataError> + Send + 'static,
    {
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            f(&mut inner.lock().expect("a metadata log operation panicked"))
        })
        .await;
        match joined {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(storage_error(subject, verb, &e)),
            Err(e) => Err(storage_error(subject, verb, &e)),
        }
    }
}

/// Reads the committed hint; a missing or damaged one is no hint (the leader tells the node
/// again).
fn read_committed_hint(path: &Path) -> Option<LogId> {
    let payload = match files::read_single(path, COMMITTED_MAGIC) {
        Ok(payload) => payload?,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring the metadata log's committed hint");
            return None;
        }
    };
    match serde_json::from_slice::<CommittedRecord>(&payload) {
        Ok(record) => record.committed,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring the metadata log's undecodable committed hint");
            None
        }
    }
}

/// Reads the log file: the purged id, the entries with their offsets, and where the good
/// records end.
#[expect(clippy::type_complexity, reason = "a private loader's plain result")]
fn load_log(path: &Path) -> Result<(Option<LogId>, BTreeMap<u64, (u64, Entry)>, u64), MetadataError> {
    let bytes = std::fs::read(path).map_err(|e| MetadataError::io(path, e))?;
    files::check_header(path, &bytes, LOG_MAGIC)?;
    let (records, tail) = files::decode_records(&bytes, HEADER_BYTES);
    let good_bytes = match tail {
        Tail::Clean => bytes.len(),
        Tail::Torn { offset, reason } => {
            tracing::warn!(path = %path.display(), offset, %reason, "torn metadata log record");
            offset
        }
        Tail::Corrupt { offset, reason } => {
            return Err(MetadataError::Corrupt {
                path: path.to_owned(),
                offset_bytes: offset as u64,
                reason,
            })
        }
    };
    let corrupt = |offset: usize, reason: String| MetadataError::Corrupt {
        path: path.to_owned(),
        offset_bytes: offset as u64,
        reason,
    };
    let mut purged = None;
    let mut entries = BTreeMap::new();
    for (i, record) in records.iter().enumerate() {
        let decoded: LogRecord = serde_json::from_slice(record.payload)
            .map_err(|e| corrupt(record.offset, format!("log record does not decode: {e}")))?;
        match decoded {
            LogRecord::Purged(id) if i == 0 => purged = Some(id),
            LogRecord::Purged(_) => {
                return Err(corrupt(
                    record.offset,
                    "a purge record after the first".to_owned(),
                ))
            }
            LogRecord::Entry(entry) => {
                let expected = match entries.last_key_value() {
                    Some((last, _)) => Some(last + 1),
                    None => purged.map(|p: LogId| p.index + 1),
                };
                if expected.is_some_and(|e| e != entry.log_id.index) {
                    return Err(corrupt(
                        record.offset,
                        format!(
                            "entry {} where entry {expected:?} was expected",
                            entry.log_id.index
                        ),
                    ));
                }
                entries.insert(entry.log_id.index, (record.offset as u64, entry));
            }
        }
    }
    Ok((purged, entries, good_bytes as u64))
}

impl LogInner {
    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .last_key_value()
            .map(|(_, (_, e))| e.log_id)
            .or(self.purged)
    }

    fn write_vote(&mut self, vote: Vote) -> Result<(), MetadataError> {
        let payload = serde_json::to_vec(&VoteRecord { vote }).expect("a vote serializes");
        files::write_single(&self.vote_path, VOTE_MAGIC, &payload, files::Durability::Fsync)?;
        self.vote = Some(vote);
        Ok(())
    }

    fn write_committed(&mut self, committed: Option<LogId>) -> Result<(), MetadataError> {
        let payload = serde_json::to_vec(&CommittedRecord { committed }).expect("a log id serializes");
        files::write_single(
            &self.committed_path,
            COMMITTED_MAGIC,
            &payload,
            files::Durability::Hint,
        )?;
        self.committed = committed;
        Ok(())
    }

    fn append(&mut self, new: Vec<Entry>) -> Result<(), MetadataError> {
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(new.len());
        for entry in &new {
            offsets.push(self.file_bytes + buf.len() as u64);
            let record = LogRecord::Entry(entry.clone());
            buf.extend_from_slice(&files::encode_record(
                &serde_json::to_vec(&record).expect("an entry serializes"),
            ));
        }
        let path = &self.log_path;
        self.file
            .write_all(&buf)
            .map_err(|e| MetadataError::io(path, e))?;
        self.file.sync_data().map_err(|e| MetadataError::io(path, e))?;
        self.file_bytes += buf.len() as u64;
        for (entry, offset) in new.into_iter().zip(offsets) {
            if let Some((last, _)) = self.entries.last_key_value() {
                assert_eq!(last + 1, entry.log_id.index, "openraft appends without holes");
            }
            self.entries.insert(entry.log_id.index, (offset, entry));
        }
        Ok(())
    }

    fn truncate(&mut self, since: u64) -> Result<(), MetadataError> {
        let Some((offset, _)) = self.entries.get(&since) else {
            return Ok(());
        };
        let offset = *offset;
        let path = &self.log_path;
        self.file
            .set_len(offset)
            .map_err(|e| MetadataError::io(path, e))?;
        self.file.sync_data().map_err(|e| MetadataError::io(path, e))?;
        self.file_bytes = offset;
        self.entries.split_off(&since);
        Ok(())
    }

    /// Drops the entries up to `upto` by rewriting the file without them.
    fn purge(&mut self, upto: LogId) -> Result<(), MetadataError> {
        let kept = self.entries.split_off(&(upto.index + 1));
        let mut bytes = files::header(LOG_MAGIC).to_vec();
        bytes.extend_from_slice(&files::encode_record(
            &serde_json::to_vec(&LogRecord::Purged(upto)).expect("a log id serializes"),
        ));
        let mut entries = BTreeMap::new();
        for (index, (_, entry)) in kept {
            let offset = bytes.len() as u64;
            let record = LogRecord::Entry(entry);
            bytes.extend_from_slice(&files::encode_record(
                &serde_json::to_vec(&record).expect("an entry serializes"),
            ));
            let LogRecord::Entry(entry) = record else {
                unreachable!("built as an entry just above")
            };
            entries.insert(index, (offset, entry));
        }
        files::replace_file(&self.log_path, &bytes)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .map_err(|e| MetadataError::io(&self.log_path, e))?;
        self.file_bytes = bytes.len() as u64;
        self.entries = entries;
        self.purged = Some(upto);
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let inner = self.lock();
        Ok(inner.entries.range(range).map(|(_, (_, e))| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.lock();
        Ok(LogState {
            last_purged_log_id: inner.purged,
            last_log_id: inner.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = *vote;
        self.blocking(ErrorSubject::Vote, ErrorVerb::Write, move |inner| {
            inner.write_vote(vote)
        })
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.blocking(ErrorSubject::Store, ErrorVerb::Write, move |inner| {
            if inner.committed == committed {
                return Ok(());
            }
            inner.write_committed(committed)
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let inner = self.lock();
        let committed = inner.committed;
        let last = inner.last_log_id();
        // Entries are committed only after they are durable here, so the committed id cannot
        // pass the log's end, unless the log lost records it had acknowledged (a torn tail cut
        // at open that was not really a crash's). Replay what there is; the leader sends the
        // rest again.
        if committed.map(|c| c.index) > last.map(|l| l.index) {
            tracing::warn!(?committed, ?last, "metadata log ends before its committed entry");
            return Ok(last);
        }
        Ok(committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let result = self
            .blocking(ErrorSubject::Logs, ErrorVerb::Write, move |inner| {
                inner.append(entries)
            })
            .await;
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        result
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.blocking(ErrorSubject::Logs, ErrorVerb::Delete, move |inner| {
            inner.truncate(log_id.index)
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.blocking(ErrorSubject::Logs, ErrorVerb::Delete, move |inner| {
            inner.purge(log_id)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;
    use crate::metadata::Command;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Command::App(format!("command {index}").into_bytes())),
        }
    }

    fn indexes(store: &LogStore) -> Vec<u64> {
        store.lock().entries.keys().copied().collect()
    }

    #[test]
    fn appends_truncations_and_purges_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LogStore::open(dir.path()).expect("opens");
        {
            let mut inner = store.lock();
            inner
                .append((0..10).map(|i| entry(1, i)).collect())
                .expect("appends");
            inner.truncate(7).expect("truncates");
            inner
                .append((7..9).map(|i| entry(2, i)).collect())
                .expect("appends");
            inner
                .purge(LogId::new(CommittedLeaderId::new(1, 1), 3))
                .expect("purges");
            inner.append(vec![entry(2, 9)]).expect("appends");
            inner.write_vote(Vote::new(2, 1)).expect("writes the vote");
            inner
                .write_committed(Some(LogId::new(CommittedLeaderId::new(2, 1), 8)))
                .expect("writes");
        }
        drop(store);
        let store = LogStore::open(dir.path()).expect("reopens");
        assert_eq!(indexes(&store), (4..10).collect::<Vec<_>>());
        let inner = store.lock();
        assert_eq!(inner.purged.map(|p| p.index), Some(3));
        assert_eq!(inner.entries[&8].1.log_id.leader_id.term, 2);
        assert_eq!(inner.entries[&6].1.log_id.leader_id.term, 1);
        assert_eq!(inner.vote, Some(Vote::new(2, 1)));
        assert_eq!(inner.committed.map(|c| c.index), Some(8));
    }

    #[test]
    fn a_torn_last_record_is_cut_off_and_the_log_goes_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LogStore::open(dir.path()).expect("opens");
        store
            .lock()
            .append((0..5).map(|i| entry(1, i)).collect())
            .expect("appends");
        drop(store);
        let path = dir.path().join(LOG_FILE);
        let len = std::fs::metadata(&path).expect("exists").len();
        let file = OpenOptions::new().write(true).open(&path).expect("opens");
        file.set_len(len - 5).expect("cuts");
        drop(file);

        let store = LogStore::open(dir.path()).expect("reopens past the torn record");
        assert_eq!(indexes(&store), vec![0, 1, 2, 3]);
        store
            .lock()
            .append(vec![entry(1, 4)])
            .expect("appends after the cut");
        drop(store);
        let store = LogStore::open(dir.path()).expect("reopens");
        assert_eq!(indexes(&store), vec![0, 1, 2, 3, 4]);
    }
}
