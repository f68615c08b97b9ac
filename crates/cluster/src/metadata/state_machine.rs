//! The state machine: applies committed entries to the [`ClusterMetadata`] and the server's
//! [`AppStateMachine`], and keeps the snapshot (openraft's `RaftStateMachine`).
//!
//! Nothing here is persisted on apply: the snapshot is what is durable. At open the state
//! machine is the latest snapshot (the server's state machine restored from it), and openraft
//! replays the committed entries after it. A snapshot is built every
//! `MetadataConfig::snapshot_every_entries` entries and written atomically to `snapshot`:
//! a [`SnapshotFile`] in the framing of `files.rs`. Openraft then purges the log before it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::files::{self, HEADER_BYTES, SNAPSHOT_MAGIC};
use super::members::apply_member_command;
use super::raft_types::{
    storage_error, Entry, LogId, MetadataSnapshot, Snapshot, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig,
};
use super::{AppStateMachine, ClusterMetadata, Command, CommandResult, MetadataError};

pub(crate) const SNAPSHOT_FILE: &str = "snapshot";

/// The payload of the snapshot file.
#[derive(Serialize, Deserialize)]
pub(crate) struct SnapshotFile {
    pub meta: SnapshotMeta,
    pub data: MetadataSnapshot,
}

/// The state machine openraft drives; clones share one state.
#[derive(Clone)]
pub(crate) struct StateMachine {
    shared: Arc<Shared>,
}

struct Shared {
    app: Arc<dyn AppStateMachine>,
    snapshot_path: PathBuf,
    state: Mutex<State>,
    /// Held while the snapshot file is replaced, so that a snapshot built in the background
    /// never overwrites a newer one installed from the leader.
    snapshot_file: Mutex<Option<LogId>>,
    published: watch::Sender<Arc<ClusterMetadata>>,
}

struct State {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    metadata: ClusterMetadata,
}

impl StateMachine {
    /// Loads the latest snapshot from `dir`, if any, and restores the server's state machine
    /// from it.
    pub(crate) fn open(
        dir: &Path,
        app: Arc<dyn AppStateMachine>,
        published: watch::Sender<Arc<ClusterMetadata>>,
    ) -> Result<StateMachine, MetadataError> {
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        let mut state = State {
            last_applied: None,
            membership: StoredMembership::default(),
            metadata: ClusterMetadata::default(),
        };
        let mut on_disk = None;
        if let Some(file) = read_snapshot_file(&snapshot_path)? {
            let index = file.meta.last_log_id.map_or(0, |id| id.index);
            app.restore(index, &file.data.app)
                .map_err(|reason| MetadataError::Restore { index, reason })?;
            state.last_applied = file.meta.last_log_id;
            state.membership = file.meta.last_membership;
            state.metadata = ClusterMetadata {
                epoch: index,
                members: file.data.members,
                change: file.data.change,
            };
            on_disk = file.meta.last_log_id;
        }
        published.send_replace(Arc::new(state.metadata.clone()));
        Ok(StateMachine {
            shared: Arc::new(Shared {
                app,
                snapshot_path,
                state: Mutex::new(state),
                snapshot_file: Mutex::new(on_disk),
                published,
            }),
        })
    }

    /// True if a snapshot was loaded at open: this node has been part of a cluster.
    pub(crate) fn has_snapshot(&self) -> bool {
        self.shared
            .snapshot_file
            .lock()
            .expect("a metadata apply panicked")
            .is_some()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().expect("a metadata apply panicked")
    }
}

fn read_snapshot_file(path: &Path) -> Result<Option<SnapshotFile>, MetadataError> {
    let Some(payload) = files::read_single(path, SNAPSHOT_MAGIC)? else {
        return Ok(None);
    };
    let file = serde_json::from_slice(&payload).map_err(|e| MetadataError::Corrupt {
        path: path.to_owned(),
        offset_bytes: HEADER_BYTES as u64,
        reason: format!("snapshot does not decode: {e}"),
    })?;
    Ok(Some(file))
}

impl Shared {
    /// Replaces the snapshot file with `file` unless the one there is as new.
    fn write_snapshot(&self, file: &SnapshotFile) -> Result<(), MetadataError> {
        let mut current = self.snapshot_file.lock().expect("a snapshot write panicked");
        if *current >= file.meta.last_log_id && current.is_some() {
            return Ok(());
        }
        let payload = serde_json::to_vec(file).expect("a snapshot serializes");
        files::write_single(
            &self.snapshot_path,
            SNAPSHOT_MAGIC,
            &payload,
            files::Durability::Fsync,
        )?;
        *current = file.meta.last_log_id;
        Ok(())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let state = self.lock();
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let shared = self.shared.clone();
        // The server's apply may write files: keep it off the runtime's threads.
        let applied = tokio::task::spawn_blocking(move || {
            let mut state = shared.state.lock().expect("a metadata apply panicked");
            let mut results = Vec::with_capacity(entries.len());
            for entry in entries {
                let index = entry.log_id.index;
                let result = match entry.payload {
                    EntryPayload::Blank => CommandResult::Done,
                    EntryPayload::Normal(Command::App(bytes)) => {
                        CommandResult::App(shared.app.apply(index, &bytes))
                    }
                    EntryPayload::Normal(command) => {
                        apply_member_command(&mut state.metadata, index, &command)
                    }
                    EntryPayload::Membership(membership) => {
                        state.membership = StoredMembership::new(Some(entry.log_id), membership);
                        CommandResult::Done
                    }
                };
                state.last_applied = Some(entry.log_id);
                state.metadata.epoch = index;
                results.push(result);
            }
            shared.published.send_replace(Arc::new(state.metadata.clone()));
            results
        })
        .await
        .map_err(|e| storage_error(ErrorSubject::StateMachine, ErrorVerb::Write, &e))?;
        Ok(applied)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        // Taken here, between two applies, so that the snapshot is of one log position; the
        // file is written later, off this task.
        let state = self.lock();
        let last = state.last_applied;
        SnapshotBuilder {
            shared: self.shared.clone(),
            file: SnapshotFile {
                meta: SnapshotMeta {
                    last_log_id: last,
                    last_membership: state.membership.clone(),
                    snapshot_id: last.map_or_else(|| "empty".to_owned(), |id| id.to_string()),
                },
                data: MetadataSnapshot {
                    members: state.metadata.members.clone(),
                    change: state.metadata.change.clone(),
                    app: self.shared.app.snapshot(),
                },
            },
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<MetadataSnapshot>, StorageError> {
        Ok(Box::default())
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        data: Box<MetadataSnapshot>,
    ) -> Result<(), StorageError> {
        let shared = self.shared.clone();
        let file = SnapshotFile {
            meta: meta.clone(),
            data: *data,
        };
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let installed = tokio::task::spawn_blocking(move || {
            shared.write_snapshot(&file)?;
            let index = file.meta.last_log_id.map_or(0, |id| id.index);
            let mut state = shared.state.lock().expect("a metadata apply panicked");
            shared
                .app
                .restore(index, &file.data.app)
                .map_err(|reason| MetadataError::Restore { index, reason })?;
            state.last_applied = file.meta.last_log_id;
            state.membership = file.meta.last_membership.clone();
            state.metadata = ClusterMetadata {
                epoch: index,
                members: file.data.members,
                change: file.data.change,
            };
            shared.published.send_replace(Arc::new(state.metadata.clone()));
            tracing::info!(index, "installed a cluster metadata snapshot from the leader");
            Ok::<(), MetadataError>(())
        })
        .await;
        match installed {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(storage_error(subject, ErrorVerb::Write, &e)),
            Err(e) => Err(storage_error(subject, ErrorVerb::Write, &e)),
        }
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let path = self.shared.snapshot_path.clone();
        let file = tokio::task::spawn_blocking(move || read_snapshot_file(&path))
            .await
            .map_err(|e| storage_error(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))?
            .map_err(|e| storage_error(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))?;
        Ok(file.map(|file| Snapshot {
            meta: file.meta,
            snapshot: Box::new(file.data),
        }))
    }
}

/// A snapshot taken at one log position, to be written to disk.
pub(crate) struct SnapshotBuilder {
    shared: Arc<Shared>,
    file: SnapshotFile,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let shared = self.shared.clone();
        let file = SnapshotFile {
            meta: self.file.meta.clone(),
            data: self.file.data.clone(),
        };
        let subject = ErrorSubject::Snapshot(Some(file.meta.signature()));
        let file =
            match tokio::task::spawn_blocking(move || shared.write_snapshot(&file).map(|()| file)).await {
                Ok(Ok(file)) => file,
                Ok(Err(e)) => return Err(storage_error(subject, ErrorVerb::Write, &e)),
                Err(e) => return Err(storage_error(subject, ErrorVerb::Write, &e)),
            };
        tracing::info!(snapshot = %file.meta, "built a cluster metadata snapshot");
        Ok(Snapshot {
            meta: file.meta,
            snapshot: Box::new(file.data),
        })
    }
}
