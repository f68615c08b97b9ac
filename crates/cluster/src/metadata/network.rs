//! The metadata messages between nodes, and openraft's network over [`MetadataRpc`].
//!
//! Every message is one JSON [`Request`] answered by one JSON [`Response`]: Raft's own three
//! (append entries, which is also the heartbeat; vote; a whole snapshot) and ours: a proposal
//! or a join forwarded by a follower to the leader, and a ping that counts who is reachable
//! when a change fails for want of a quorum.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{RaftNetwork, RaftNetworkFactory};
use serde::{Deserialize, Serialize};

use super::raft_types::{MetadataSnapshot, RaftPeer, Snapshot, SnapshotMeta, TypeConfig, Vote};
use super::{Command, CommandResult, MemberRecord, MetadataRpc, RpcError, MESSAGE_BYTES_MAX};
use crate::node::HostId;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    Snapshot {
        vote: Vote,
        meta: SnapshotMeta,
        data: MetadataSnapshot,
    },
    /// A command proposed on a follower, for the leader to append.
    Propose(Command),
    /// A node to add, asked of the leader by a follower.
    AddMember(MemberRecord),
    /// A member to remove, asked of the leader by a follower.
    RemoveMember(HostId),
    /// A node to bring into Raft and the ring with `command` (a join or replacement), asked of
    /// the leader by a follower.
    AddNode {
        host: HostId,
        command: Command,
    },
    /// A node to take out of the ring with `command`, then out of Raft.
    RemoveNode {
        host: HostId,
        command: Command,
    },
    /// The index up to which the leader has committed, once it has confirmed it still leads:
    /// what a restarted node applies before it serves.
    ReadIndex,
    Ping,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Response {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    Snapshot(Result<SnapshotResponse<u64>, Fatal<u64>>),
    /// The answer to `Propose`, `AddMember` and `RemoveMember`.
    Applied(Result<Applied, ForwardError>),
    /// The answer to `ReadIndex`.
    ReadIndex(Result<u64, ForwardError>),
    Pong,
    /// The request could not be served at all (it did not decode, or this node is not running).
    Refused {
        reason: String,
    },
}

/// A command the leader applied: at which index, with which result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Applied {
    pub index: u64,
    pub result: CommandResult,
}

/// Why the leader did not apply a forwarded command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ForwardError {
    /// This node is not the leader (any more): nothing was appended; ask `leader`.
    NotLeader {
        leader: Option<HostId>,
    },
    /// Nothing was appended.
    NoQuorum {
        reachable: usize,
        members: usize,
    },
    /// Appended but not confirmed in time: it may still be applied.
    Timeout {
        timeout_ms: u64,
    },
    /// A node to add did not catch up in time; it stays a learner.
    CatchUpTimeout {
        timeout_ms: u64,
    },
    MembershipChange {
        reason: String,
    },
    /// The leader's Raft node stopped.
    Stopped {
        reason: String,
    },
    Failed {
        message: String,
    },
}

pub(crate) fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    serde_json::to_vec(message).expect("metadata messages serialize")
}

/// Sends `request` to `to` and decodes its answer.
pub(crate) async fn call(
    rpc: &dyn MetadataRpc,
    to: HostId,
    request: &Request,
    timeout: Duration,
) -> Result<Response, RpcError> {
    let reply = rpc.call(to, encode(request), timeout).await?;
    if reply.len() > MESSAGE_BYTES_MAX {
        return Err(RpcError::Failed {
            host: to,
            reason: format!(
                "a metadata reply of {} bytes, more than the {MESSAGE_BYTES_MAX}-byte limit",
                reply.len()
            ),
        });
    }
    serde_json::from_slice(&reply).map_err(|e| RpcError::Failed {
        host: to,
        reason: format!("undecodable metadata reply: {e}"),
    })
}

/// Openraft's network: one [`PeerClient`] per target, all over one [`MetadataRpc`].
pub(crate) struct Network {
    pub rpc: Arc<dyn MetadataRpc>,
    /// How long replication to a node that was unreachable waits before trying again.
    pub backoff: Duration,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &RaftPeer) -> PeerClient {
        PeerClient {
            rpc: self.rpc.clone(),
            target,
            host: node.host_id,
            backoff: self.backoff,
        }
    }
}

pub(crate) struct PeerClient {
    rpc: Arc<dyn MetadataRpc>,
    target: u64,
    host: HostId,
    backoff: Duration,
}

/// What went wrong with a Raft message, as openraft classifies it: a node that is unreachable
/// is backed off from, the rest retried at once.
enum Failure {
    Unreachable(Unreachable),
    Network(NetworkError),
}

impl PeerClient {
    async fn send(&self, request: &Request, timeout: Duration) -> Result<Response, Failure> {
        match call(self.rpc.as_ref(), self.host, request, timeout).await {
            Ok(Response::Refused { reason }) => {
                Err(Failure::Unreachable(Unreachable::new(&RpcError::Failed {
                    host: self.host,
                    reason,
                })))
            }
            Ok(response) => Ok(response),
            // A failed call is backed off from, whatever its cause: a node that answers nothing
            // would otherwise be retried in a tight loop.
            Err(e @ RpcError::Unreachable { .. }) | Err(e @ RpcError::Failed { .. }) => {
                Err(Failure::Unreachable(Unreachable::new(&e)))
            }
            Err(e @ RpcError::Timeout { .. }) => Err(Failure::Network(NetworkError::new(&e))),
        }
    }

    fn unexpected(&self) -> NetworkError {
        NetworkError::new(&RpcError::Failed {
            host: self.host,
            reason: "a reply of the wrong kind".to_owned(),
        })
    }
}

impl<E: std::error::Error> From<Failure> for RPCError<u64, RaftPeer, E> {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Unreachable(e) => RPCError::Unreachable(e),
            Failure::Network(e) => RPCError::Network(e),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, RaftPeer, RaftError<u64>>> {
        match self.send(&Request::AppendEntries(rpc), option.hard_ttl()).await? {
            Response::AppendEntries(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(RPCError::Network(self.unexpected())),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, RaftPeer, RaftError<u64>>> {
        match self.send(&Request::Vote(rpc), option.hard_ttl()).await? {
            Response::Vote(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(RPCError::Network(self.unexpected())),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<u64>, StreamingError<TypeConfig, Fatal<u64>>> {
        let request = Request::Snapshot {
            vote,
            meta: snapshot.meta,
            data: *snapshot.snapshot,
        };
        let sent = tokio::select! {
            sent = self.send(&request, option.hard_ttl()) => sent,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        match sent {
            Ok(Response::Snapshot(result)) => {
                result.map_err(|e| StreamingError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(_) => Err(StreamingError::Network(self.unexpected())),
            Err(Failure::Unreachable(e)) => Err(StreamingError::Unreachable(e)),
            Err(Failure::Network(e)) => Err(StreamingError::Network(e)),
        }
    }

    fn backoff(&self) -> openraft::network::Backoff {
        openraft::network::Backoff::new(std::iter::repeat(self.backoff))
    }
}
