//! The errors of the metadata log, each saying what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::node::HostId;

#[derive(Debug)]
#[non_exhaustive]
pub enum MetadataError {
    /// A setting of [`crate::metadata::MetadataConfig`] is out of range.
    Config(String),
    /// A file of the metadata directory could not be read or written.
    Io {
        path: PathBuf,
        source: io::Error,
    },
    /// A file fails its checksum or does not decode, somewhere other than a torn last record
    /// (which is cut off and forgotten at open, as a crash leaves it).
    Corrupt {
        path: PathBuf,
        offset_bytes: u64,
        reason: String,
    },
    UnsupportedVersion {
        path: PathBuf,
        version: u32,
        supported: u32,
    },
    /// The server's state machine refused the snapshot it was given at open.
    Restore {
        index: u64,
        reason: String,
    },
    /// Fewer voters than a majority answer: nothing was appended.
    NoQuorum {
        reachable: usize,
        members: usize,
    },
    /// No leader could be reached within the timeout (an election that does not end, or a
    /// leader this node cannot reach): nothing was appended.
    NoLeader {
        timeout_ms: u64,
    },
    /// No answer within the propose timeout after the command was handed to the leader: it may
    /// still be applied later.
    Timeout {
        timeout_ms: u64,
    },
    /// The command was sent to the leader but the answer was lost: it may have been applied.
    Unconfirmed {
        leader: HostId,
        reason: String,
    },
    /// The command was applied by the leader at `index`, but not yet by this node within the
    /// timeout.
    NotYetApplied {
        index: u64,
    },
    /// This node is not part of a metadata cluster yet.
    NotMember,
    /// `initialize` on a node that already belongs to a cluster with other voters.
    AlreadyInitialized {
        voters: Vec<HostId>,
    },
    CommandTooLarge {
        bytes: usize,
        max_bytes: usize,
    },
    /// `initialize` found a member's record refused (another record for the same host is
    /// already there).
    Refused {
        reason: String,
    },
    /// A node being added did not catch up with the log in time; it stays a learner.
    CatchUpTimeout {
        host: HostId,
        timeout_ms: u64,
    },
    /// Raft refused a change of its voters (usually: another change is in progress).
    MembershipChange {
        reason: String,
    },
    /// The leader failed in a way that is not one of the above.
    Remote {
        host: HostId,
        message: String,
    },
    /// The metadata Raft node has stopped: shut down, or stopped by a storage error.
    Stopped {
        reason: String,
    },
}

impl MetadataError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> MetadataError {
        MetadataError::Io {
            path: path.into(),
            source,
        }
    }
}

/// The majority of `members` voters.
pub(crate) fn quorum_of(members: usize) -> usize {
    members / 2 + 1
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetadataError::Config(msg) => write!(f, "invalid cluster metadata configuration: {msg}"),
            MetadataError::Io { path, source } => write!(
                f,
                "cannot read or write cluster metadata file {}: {source} (check the data directory's \
                 permissions and free space)",
                path.display()
            ),
            MetadataError::Corrupt {
                path,
                offset_bytes,
                reason,
            } => write!(
                f,
                "cluster metadata file {} is damaged at byte {offset_bytes}: {reason}; move the metadata \
                 directory aside and add the node back from a healthy member",
                path.display()
            ),
            MetadataError::UnsupportedVersion {
                path,
                version,
                supported,
            } => write!(
                f,
                "cluster metadata file {} has format version {version}, this hayate reads version \
                 {supported}; run the hayate that wrote it",
                path.display()
            ),
            MetadataError::Restore { index, reason } => write!(
                f,
                "the schema could not be restored from the metadata snapshot at index {index}: {reason}"
            ),
            MetadataError::NoQuorum { reachable, members } => write!(
                f,
                "cannot change the cluster metadata: only {reachable} of {members} voting members are \
                 reachable and {} are needed; nothing was changed; bring the missing nodes back (or mend \
                 the network between them) and retry",
                quorum_of(*members)
            ),
            MetadataError::NoLeader { timeout_ms } => write!(
                f,
                "no metadata leader could be reached within {timeout_ms} ms; nothing was changed; check \
                 that a majority of the voting members are up and can reach each other, then retry"
            ),
            MetadataError::Timeout { timeout_ms } => write!(
                f,
                "the cluster metadata change was not confirmed within {timeout_ms} ms; it may still be \
                 applied: check the schema before retrying"
            ),
            MetadataError::Unconfirmed { leader, reason } => write!(
                f,
                "the cluster metadata change was sent to the leader {leader} but its answer was lost \
                 ({reason}); it may have been applied: check the schema before retrying"
            ),
            MetadataError::NotYetApplied { index } => write!(
                f,
                "the cluster metadata change was applied at index {index} by the leader but not yet by \
                 this node, which is behind; it will catch up once it hears from the leader"
            ),
            MetadataError::NotMember => write!(
                f,
                "this node is not part of a cluster yet: initialize a new cluster, or add this node from \
                 a member"
            ),
            MetadataError::AlreadyInitialized { voters } => {
                write!(f, "this node already belongs to a cluster whose voters are ")?;
                for (i, voter) in voters.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{voter}")?;
                }
                write!(
                    f,
                    "; add nodes to it instead, or start from an empty metadata directory"
                )
            }
            MetadataError::CommandTooLarge { bytes, max_bytes } => write!(
                f,
                "a cluster metadata command of {bytes} bytes is larger than the {max_bytes}-byte limit"
            ),
            MetadataError::Refused { reason } => write!(f, "the cluster refused the change: {reason}"),
            MetadataError::CatchUpTimeout { host, timeout_ms } => write!(
                f,
                "node {host} did not catch up with the metadata log within {timeout_ms} ms and stays a \
                 non-voting learner; check that it runs and is reachable, then add it again"
            ),
            MetadataError::MembershipChange { reason } => write!(
                f,
                "the metadata voters could not be changed: {reason}; retry once the change in progress \
                 is done"
            ),
            MetadataError::Remote { host, message } => {
                write!(f, "the metadata leader {host} failed: {message}")
            }
            MetadataError::Stopped { reason } => write!(
                f,
                "the cluster metadata service has stopped ({reason}); restart the node"
            ),
        }
    }
}

impl std::error::Error for MetadataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MetadataError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why a [`crate::metadata::MetadataRpc`] call failed. The variants differ in what the caller
/// may assume: after `Unreachable` the message was not delivered, after the others it may have
/// been.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RpcError {
    /// Not delivered: no connection to the node (down, unknown, or cut off).
    Unreachable { host: HostId, reason: String },
    /// Sent, but no answer within the timeout.
    Timeout { host: HostId, timeout_ms: u64 },
    /// Sent, then the connection failed before the answer came.
    Failed { host: HostId, reason: String },
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Unreachable { host, reason } => write!(f, "node {host} is unreachable: {reason}"),
            RpcError::Timeout { host, timeout_ms } => {
                write!(f, "node {host} did not answer within {timeout_ms} ms")
            }
            RpcError::Failed { host, reason } => write!(f, "the call to node {host} failed: {reason}"),
        }
    }
}

impl std::error::Error for RpcError {}
