//! The types openraft is instantiated with.
//!
//! A Raft node id is the host id's [`HostId::raft_id`]; the node data openraft keeps in the
//! membership carries the whole host id, which is how a Raft message finds its way through
//! [`super::MetadataRpc`] (by host id, never by address: addresses may change).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Command, CommandResult, MemberRecord, TopologyChange};
use crate::node::HostId;

openraft::declare_raft_types!(
    pub(crate) TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = RaftPeer,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = MetadataSnapshot,
        AsyncRuntime = openraft::TokioRuntime,
);

pub(crate) type Entry = openraft::Entry<TypeConfig>;
pub(crate) type LogId = openraft::LogId<u64>;
pub(crate) type Vote = openraft::Vote<u64>;
pub(crate) type StorageError = openraft::StorageError<u64>;
pub(crate) type StoredMembership = openraft::StoredMembership<u64, RaftPeer>;
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<u64, RaftPeer>;
pub(crate) type Snapshot = openraft::Snapshot<TypeConfig>;
pub(crate) type Raft = openraft::Raft<TypeConfig>;

/// A node as openraft's membership records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RaftPeer {
    pub host_id: HostId,
}

/// Openraft wants a default node; no real node has the all-zero host id.
impl Default for RaftPeer {
    fn default() -> RaftPeer {
        RaftPeer {
            host_id: HostId([0; HostId::BYTES]),
        }
    }
}

/// A snapshot's content (its position and Raft membership travel beside it, in openraft's
/// `SnapshotMeta`): the members with their tokens, and the server's state machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetadataSnapshot {
    pub members: BTreeMap<HostId, MemberRecord>,
    /// The topology change in progress at the snapshot's index (absent in snapshots from
    /// before topology changes existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<TopologyChange>,
    #[serde(with = "super::opaque")]
    pub app: Vec<u8>,
}

/// Turns a storage failure into the error openraft expects from its storage traits.
pub(crate) fn storage_error(
    subject: openraft::ErrorSubject<u64>,
    verb: openraft::ErrorVerb,
    e: &(dyn std::error::Error + 'static),
) -> StorageError {
    openraft::StorageIOError::new(subject, verb, openraft::AnyError::from_dyn(e, None)).into()
}
