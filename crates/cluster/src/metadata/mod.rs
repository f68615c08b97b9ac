//! Cluster metadata that must be agreed, not gossiped: which node owns which tokens, and the
//! schema. Both go through one Raft log (openraft), so every node applies the same changes in
//! the same order, and a change that cannot reach a majority of the voters fails instead of
//! diverging.
//!
//! The log carries [`Command`]s. This module applies the membership commands itself (token
//! ownership is a cluster matter) and hands [`Command::App`] payloads to an
//! [`AppStateMachine`] the server supplies: the schema, which this crate knows only as bytes.
//! What a node has applied is a [`ClusterMetadata`], as of one log index (its `epoch`), which
//! [`Metadata::current`] and [`Metadata::watch`] publish.
//!
//! A change can be proposed on any node: a follower forwards it to the leader over
//! [`MetadataRpc`], the leader first confirms it still hears from a majority (so that without
//! one the call fails with [`MetadataError::NoQuorum`] and nothing is appended), appends it,
//! waits for a majority to store it, applies it and answers; the proposer returns once the
//! change is applied on its own node too.
//!
//! On disk (`MetadataConfig::dir`): the Raft log, the vote and the latest snapshot, in the
//! formats drawn in `files.rs` and `docs/cluster-metadata.md`. The state machine itself is not
//! persisted: at open it is rebuilt from the snapshot plus a replay of the committed entries.
//!
//! The parts: `service.rs` is the API ([`Metadata`]); `state_machine.rs` applies entries and
//! keeps snapshots; `log_store.rs` keeps the log and the vote; `network.rs` carries Raft's
//! messages and forwarded proposals over [`MetadataRpc`]; `files.rs` frames every file;
//! `raft_types.rs` tells openraft our types.

mod config;
mod error;
mod files;
mod log_store;
mod members;
mod network;
mod opaque;
mod raft_types;
mod service;
mod state_machine;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::node::{HostId, NodeInfo};

pub use config::MetadataConfig;
pub use error::{MetadataError, RpcError};
pub use service::{Metadata, MetadataStatus, RaftRole};

/// Voters at most. Nodes added beyond it stay learners: they receive and apply the whole log
/// but do not vote, so a change waits for 3 of 5 acknowledgements rather than for a majority of
/// a large cluster, and five voters still survive the loss of any two. A learner is promoted
/// when a voter is removed.
pub const VOTERS_MAX: usize = 5;

/// Tokens one member may own (Cassandra's `num_tokens` is 16 by default, 256 in old clusters).
pub const TOKENS_PER_MEMBER_MAX: usize = 4096;

/// The largest [`Command::App`] payload. Schema changes are small; the bound keeps one entry,
/// and so one Raft message, from growing without limit.
pub const APP_COMMAND_BYTES_MAX: usize = 256 << 10;

/// Log entries one Raft message carries at most. With [`APP_COMMAND_BYTES_MAX`] (and JSON's
/// hex for binary payloads) a message stays under about 16 MiB at worst; metadata entries are
/// usually a few hundred bytes.
pub const ENTRIES_PER_MESSAGE_MAX: u64 = 32;

/// The largest metadata message, either way. The largest messages are snapshots (every member
/// with its tokens, and the server's whole schema), sent whole to a node too far behind for the
/// log: the server's snapshot must stay well below this, or lagging nodes cannot catch up.
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// Where a member is in its life. `Joining` members own no range yet (their ranges are
/// pending: they receive writes, not reads); `Normal` and `Leaving` members own theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    /// Owns its tokens but is still streaming their data.
    Joining,
    Normal,
    /// Handing its tokens over before it is removed.
    Leaving,
}

/// One node as the cluster agrees it: who it is, the tokens it owns and its status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub info: NodeInfo,
    pub tokens: Vec<i64>,
    pub status: MemberStatus,
}

/// The change of the ring in progress: one at a time, started, streamed and finished (or
/// aborted) through the log, so that every node sees the same owners and the same pending
/// replicas at the same epoch. See `docs/topology-changes.md`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyChange {
    /// The epoch (log index) of the entry that started it: [`Command::FinishChange`] and
    /// [`Command::AbortChange`] name it, so that a late finish cannot end a later change.
    pub id: u64,
    pub kind: ChangeKind,
}

/// What a [`TopologyChange`] does to the ring once it finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// `node` (status `Joining`, its tokens recorded) streams the ranges it will own, then
    /// becomes `Normal` (Cassandra's bootstrap).
    Join { node: HostId },
    /// `node` (status `Leaving`) streams its ranges to their next owners, then leaves the ring
    /// (decommission).
    Leave { node: HostId },
    /// `new` (status `Joining`, with the tokens of the dead `old`) streams `old`'s ranges from
    /// the other replicas, then takes `old`'s place (`--replace-address`).
    Replace { old: HostId, new: HostId },
    /// The dead `node` (shown `Leaving`) is forgotten once the other replicas have streamed its
    /// ranges to their new owners (removenode).
    Remove { node: HostId },
}

impl ChangeKind {
    /// The node the change is about: the one joining, leaving, being replaced or removed.
    pub fn subject(self) -> HostId {
        match self {
            ChangeKind::Join { node } | ChangeKind::Leave { node } | ChangeKind::Remove { node } => node,
            ChangeKind::Replace { old, .. } => old,
        }
    }

    /// The member that leaves the ring when the change finishes, if one does.
    pub fn departing(self) -> Option<HostId> {
        match self {
            ChangeKind::Join { .. } => None,
            ChangeKind::Leave { node } | ChangeKind::Remove { node } => Some(node),
            ChangeKind::Replace { old, .. } => Some(old),
        }
    }

    /// The member that enters the ring when the change finishes, if one does.
    pub fn arriving(self) -> Option<HostId> {
        match self {
            ChangeKind::Join { node } => Some(node),
            ChangeKind::Replace { new, .. } => Some(new),
            ChangeKind::Leave { .. } | ChangeKind::Remove { .. } => None,
        }
    }

    /// What `nodetool` calls it.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Join { .. } => "join",
            ChangeKind::Leave { .. } => "decommission",
            ChangeKind::Replace { .. } => "replace",
            ChangeKind::Remove { .. } => "removenode",
        }
    }
}

impl std::fmt::Display for TopologyChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            ChangeKind::Replace { old, new } => {
                write!(
                    f,
                    "the replacement of {old} by {new} (started at epoch {})",
                    self.id
                )
            }
            kind => write!(
                f,
                "the {} of {} (started at epoch {})",
                kind.name(),
                kind.subject(),
                self.id
            ),
        }
    }
}

/// The agreed state, as of one log index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The index of the last applied log entry. Every node that has applied the same index has
    /// the same metadata, so it serves as a version number (the schema version derives from it).
    pub epoch: u64,
    pub members: BTreeMap<HostId, MemberRecord>,
    /// The change of the ring in progress, if any.
    pub change: Option<TopologyChange>,
}

impl ClusterMetadata {
    /// The ring reads follow: every member that owns its tokens now, that is all but the ones
    /// still `Joining` (a joining node, or a replacement, receives writes but serves no read
    /// until it has streamed its data). A leaving node and a node being replaced or removed
    /// are in it until their change finishes.
    pub fn ring(&self) -> Result<crate::ring::TokenRing, crate::ring::RingError> {
        ring_of(
            self.members
                .values()
                .filter(|r| r.status != MemberStatus::Joining),
        )
    }

    /// The ring as it will be when the change in progress finishes (`None` without one): the
    /// ring writes also go to, so that a write acknowledged during the change is on the final
    /// replicas too (Cassandra's pending ranges).
    pub fn pending_ring(&self) -> Option<Result<crate::ring::TokenRing, crate::ring::RingError>> {
        let change = self.change.as_ref()?;
        let departing = change.kind.departing();
        Some(ring_of(
            self.members
                .values()
                .filter(|r| Some(r.info.host_id) != departing),
        ))
    }

    /// Applies a membership command as the log entry at `index`, as the state machine does:
    /// for a log of another kind (the coordinator simulation's) that must reach the same states.
    /// Panics on [`Command::App`], which only the server's state machine knows.
    pub fn apply(&mut self, index: u64, command: &Command) -> CommandResult {
        assert!(
            !matches!(command, Command::App(_)),
            "app commands go to the app state machine"
        );
        let result = members::apply_member_command(self, index, command);
        self.epoch = index;
        result
    }

    /// The member that owns `token`, if any.
    pub fn token_owner(&self, token: i64) -> Option<HostId> {
        self.members
            .iter()
            .find(|(_, record)| record.tokens.contains(&token))
            .map(|(host, _)| *host)
    }
}

fn ring_of<'a>(
    records: impl Iterator<Item = &'a MemberRecord>,
) -> Result<crate::ring::TokenRing, crate::ring::RingError> {
    crate::ring::TokenRing::new(
        records
            .map(|r| crate::ring::RingNode {
                host: r.info.host_id,
                placement: r.info.placement.clone(),
                tokens: r.tokens.clone(),
            })
            .collect(),
    )
}

/// A change to the cluster metadata: one Raft log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Records a new member and its tokens. Refused (a [`CommandResult::Refused`], the log
    /// moves on) if another member has its host id, its Raft id or any of its tokens. The same
    /// record twice is accepted, so a retried join is harmless.
    AddMember(MemberRecord),
    SetStatus {
        host: HostId,
        status: MemberStatus,
    },
    /// Forgets a member and its tokens. Refused if there is no such member.
    RemoveMember(HostId),
    /// Starts a join: records the node (status `Joining`) and its tokens, whose ranges become
    /// pending. Refused while another change is in progress, and as `AddMember` is.
    StartJoin(MemberRecord),
    /// Starts a decommission: the member becomes `Leaving`; its ranges are pending on their
    /// next owners. Refused while another change is in progress, for a member that is not
    /// `Normal`, and for the last member.
    StartLeave(HostId),
    /// Starts the replacement of `old` (a `Normal` member) by `new` (status `Joining`, the same
    /// tokens as `old`). Refused while another change is in progress.
    StartReplace {
        old: HostId,
        new: MemberRecord,
    },
    /// Starts the removal of a dead member: it shows `Leaving`, and its ranges are pending on
    /// their next owners until they have streamed them from the other replicas.
    StartRemove(HostId),
    /// Ends the change started at epoch `id`: the ring becomes the pending one. Refused if that
    /// change is not the one in progress (it ended already).
    FinishChange {
        id: u64,
    },
    /// Undoes the change started at epoch `id`: the ring stays as it was before it.
    AbortChange {
        id: u64,
    },
    /// A command for the server's state machine (a schema change), opaque to this crate.
    App(#[serde(with = "opaque")] Vec<u8>),
}

/// What applying a [`Command`] answered, returned to the node that proposed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandResult {
    Done,
    /// The command was applied as a no-op, for this reason.
    Refused(String),
    /// The answer of [`AppStateMachine::apply`].
    App(#[serde(with = "opaque")] Vec<u8>),
}

/// The server's state machine (the schema). Deterministic: every node applies the same commands
/// in the same order and must reach the same state, so `apply` may depend only on its state,
/// `index` and `command`, never on the clock or the node it runs on.
///
/// All three methods run on the metadata state machine's task, one at a time. `apply` runs on a
/// blocking thread and may write files; `snapshot` should only serialize what is in memory.
pub trait AppStateMachine: Send + Sync + 'static {
    /// Applies the command at log `index`; the answer goes back to the proposer.
    fn apply(&self, index: u64, command: &[u8]) -> Vec<u8>;
    /// The whole state, to be given back to `restore` on this or another node.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the whole state with a snapshot taken at log `index`. Called at open when a
    /// snapshot exists (before the entries after it are replayed) and when a lagging node
    /// receives one from the leader. Without a snapshot the state machine starts empty.
    fn restore(&self, index: u64, snapshot: &[u8]) -> Result<(), String>;
}

/// A boxed future, as [`MetadataRpc::call`] returns it.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How metadata messages reach other nodes. The node wires it to the internode transport; the
/// other side hands the payload to [`Metadata::handle`] and sends back what it returns.
pub trait MetadataRpc: Send + Sync + 'static {
    /// Sends `payload` to `to` and waits at most `timeout` for its reply.
    fn call(&self, to: HostId, payload: Vec<u8>, timeout: Duration) -> BoxFuture<Result<Vec<u8>, RpcError>>;
}
