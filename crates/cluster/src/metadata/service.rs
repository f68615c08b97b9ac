//! The metadata API: [`Metadata`], one Raft node of the metadata log.
//!
//! The path of a change: [`Metadata::propose`] on any node finds the leader in openraft's
//! metrics. On the leader it confirms a quorum (openraft's `ensure_linearizable`: a round of
//! heartbeats that a majority must answer within a heartbeat interval), then appends the
//! command (`client_write`, which returns once the leader has applied it). On a follower it
//! sends the command to the leader as a [`Request::Propose`], which the leader's
//! [`Metadata::handle`] serves the same way, then waits for its own node to apply the entry.
//!
//! A forwarded command is sent again only when it was certainly not delivered (the leader was
//! unreachable, or answered that it is no longer the leader, which openraft says only for
//! entries it did not append or has since dropped); a timeout after sending it is reported as
//! such, never retried, so a command is never applied twice.
//!
//! The one window where a failed call may still take effect: the leader confirmed its quorum,
//! appended the entry, then lost the quorum before a majority stored it. The call then fails
//! with [`MetadataError::Timeout`] and the entry stays in the leader's log: if that leader keeps
//! its leadership until the others are back, it commits the entry then; if another node is
//! elected first, the entry is dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError};
use openraft::{ChangeMembers, RaftMetrics, ServerState};
use tokio::sync::{watch, Mutex};
use tokio::time::{timeout_at, Instant};

use super::config::millis;
use super::error::quorum_of;
use super::log_store::LogStore;
use super::members::{apply_member_command, check_new_member};
use super::network::{self, encode, Applied, ForwardError, Network, Request, Response};
use super::raft_types::{Raft, RaftPeer, Snapshot};
use super::state_machine::StateMachine;
use super::{
    AppStateMachine, ClusterMetadata, Command, CommandResult, MemberRecord, MetadataConfig, MetadataError,
    MetadataRpc, RpcError, APP_COMMAND_BYTES_MAX, MESSAGE_BYTES_MAX, VOTERS_MAX,
};
use crate::node::HostId;

/// How many times the leader checks for a quorum before it fails a change with
/// [`MetadataError::NoQuorum`].
const QUORUM_CHECKS_MAX: u32 = 3;

/// One node's view of the metadata log. Cheap to clone: clones share the node (the transport's
/// handler keeps one to call [`Metadata::handle`]).
#[derive(Clone)]
pub struct Metadata {
    inner: Arc<Inner>,
}

struct Inner {
    local: HostId,
    config: MetadataConfig,
    raft: Raft,
    rpc: Arc<dyn MetadataRpc>,
    published: watch::Receiver<Arc<ClusterMetadata>>,
    /// Serializes the changes of Raft's voters and learners that this node makes as leader:
    /// openraft refuses a second one while the first is in progress.
    membership_changes: Mutex<()>,
    /// The log or a snapshot on disk at open: openraft loads them in the background, so its
    /// metrics may not show the membership yet right after `open`.
    was_member: bool,
}

/// A node's part in the metadata log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftRole {
    Leader,
    Follower,
    Candidate,
    /// Receives the log but does not vote (beyond [`VOTERS_MAX`], or not yet caught up).
    Learner,
    Stopped,
}

/// What `hayate status` shows of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataStatus {
    pub host_id: HostId,
    pub role: RaftRole,
    pub leader: Option<HostId>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    /// The log is empty up to and including this index (it is in the snapshot).
    pub purged_index: Option<u64>,
    pub voters: Vec<HostId>,
    pub learners: Vec<HostId>,
}

/// What a node asks of the leader.
#[derive(Clone)]
enum Op {
    Propose(Command),
    /// Makes `host` a Raft learner (then a voter, while there are fewer than [`VOTERS_MAX`])
    /// and appends `command`, which brings it into the ring: `AddMember`, `StartJoin` or
    /// `StartReplace`.
    AddNode {
        host: HostId,
        command: Command,
    },
    /// Appends `command`, which takes `host` out of the ring (`RemoveMember`, or the finish or
    /// abort of a change), then takes it out of Raft's voters and learners.
    RemoveNode {
        host: HostId,
        command: Command,
    },
}

impl Op {
    fn request(&self) -> Request {
        match self {
            Op::Propose(command) => Request::Propose(command.clone()),
            Op::AddNode { host, command } => Request::AddNode {
                host: *host,
                command: command.clone(),
            },
            Op::RemoveNode { host, command } => Request::RemoveNode {
                host: *host,
                command: command.clone(),
            },
        }
    }
}

/// Whether a change fails at once when a majority of the voters is out of reach, or waits for
/// a leader until its deadline (as `initialize` does, while the other nodes start).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Patience {
    FailFast,
    WaitForLeader,
}

/// Whether the membership the log holds names any node (none before `initialize` or the first
/// entries from a leader).
fn has_nodes(metrics: &RaftMetrics<u64, RaftPeer>) -> bool {
    metrics.membership_config.membership().nodes().next().is_some()
}

fn host_of(m: &RaftMetrics<u64, RaftPeer>, id: u64) -> Option<HostId> {
    m.membership_config
        .membership()
        .get_node(&id)
        .map(|peer| peer.host_id)
}

fn voters_of(m: &RaftMetrics<u64, RaftPeer>) -> Vec<(u64, HostId)> {
    m.membership_config
        .membership()
        .voter_ids()
        .filter_map(|id| host_of(m, id).map(|host| (id, host)))
        .collect()
}

/// What a failed append or membership change tells the node that asked for it.
fn write_error(e: RaftError<u64, ClientWriteError<u64, RaftPeer>>) -> ForwardError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => not_leader(f),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => ForwardError::MembershipChange {
            reason: e.to_string(),
        },
        RaftError::Fatal(f) => ForwardError::Stopped {
            reason: f.to_string(),
        },
    }
}

fn not_leader(f: ForwardToLeader<u64, RaftPeer>) -> ForwardError {
    ForwardError::NotLeader {
        leader: f.leader_node.map(|peer| peer.host_id),
    }
}

fn check_command_size(command: &Command) -> Result<(), MetadataError> {
    match command {
        Command::App(bytes) if bytes.len() > APP_COMMAND_BYTES_MAX => Err(MetadataError::CommandTooLarge {
            bytes: bytes.len(),
            max_bytes: APP_COMMAND_BYTES_MAX,
        }),
        _ => Ok(()),
    }
}

impl Metadata {
    /// Opens the metadata log in `config.dir` (created if missing): loads the vote, the log and
    /// the latest snapshot, restores `app` from the snapshot and replays the committed entries
    /// after it, then starts the Raft node. A node that is not yet part of a cluster waits,
    /// answering [`Metadata::handle`], until a member adds it or [`Metadata::initialize`] is
    /// called.
    pub async fn open(
        config: MetadataConfig,
        rpc: Arc<dyn MetadataRpc>,
        app: Arc<dyn AppStateMachine>,
    ) -> Result<Metadata, MetadataError> {
        let raft_config = Arc::new(config.raft_config()?);
        let dir = config.dir.clone();
        let (published_tx, published) = watch::channel(Arc::new(ClusterMetadata::default()));
        let (log, state_machine, was_member) = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
            let log = LogStore::open(&dir)?;
            let state_machine = StateMachine::open(&dir, app, published_tx)?;
            let was_member = log.has_history() || state_machine.has_snapshot();
            Ok::<_, MetadataError>((log, state_machine, was_member))
        })
        .await
        .map_err(|e| MetadataError::Stopped {
            reason: e.to_string(),
        })??;
        let local = config.local.host_id;
        let network = Network {
            rpc: rpc.clone(),
            backoff: config.election_timeout_min / 2,
        };
        let raft = Raft::new(local.raft_id(), raft_config, network, log, state_machine)
            .await
            .map_err(|e| MetadataError::Stopped {
                reason: e.to_string(),
            })?;
        Ok(Metadata {
            inner: Arc::new(Inner {
                local,
                config,
                raft,
                rpc,
                published,
                membership_changes: Mutex::new(()),
                was_member,
            }),
        })
    }

    fn metrics(&self) -> RaftMetrics<u64, RaftPeer> {
        self.inner.raft.metrics().borrow().clone()
    }

    /// True once this node has been part of a cluster: initialized here, or added by a member
    /// (its log or snapshot names voters).
    pub fn is_member(&self) -> bool {
        if self.inner.was_member {
            return true;
        }
        has_nodes(&self.inner.raft.metrics().borrow())
    }

    /// Fails with [`MetadataError::NotMember`] unless this node is a member, or becomes one
    /// within an election timeout: right after `initialize` returns on one node, the others
    /// may not have received the first entries yet.
    async fn wait_membership(&self) -> Result<(), MetadataError> {
        let until = Instant::now() + self.inner.config.election_timeout_max;
        let mut metrics = self.inner.raft.metrics();
        loop {
            if has_nodes(&metrics.borrow_and_update()) {
                return Ok(());
            }
            match timeout_at(until, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return Err(MetadataError::NotMember),
            }
        }
    }

    /// Starts a new cluster whose members are `members` (this node among them), on ONE node of
    /// several started together; the others must have [`Metadata::open`]ed, so that they can
    /// vote and receive the first entries. The first [`VOTERS_MAX`] members (this node first)
    /// vote; the rest are added as learners. Returns once every member's record is applied.
    ///
    /// Safe to call again with the same members (after a failure, e.g. because the others were
    /// not up in time: the election goes on in the background, and a second call finishes the
    /// job); refused with [`MetadataError::AlreadyInitialized`] on a node that belongs to a
    /// cluster with other voters.
    pub async fn initialize(&self, members: Vec<MemberRecord>) -> Result<(), MetadataError> {
        let local = self.inner.local;
        if !members.iter().any(|r| r.info.host_id == local) {
            return Err(MetadataError::Config(format!(
                "the initial members must include this node ({local})"
            )));
        }
        let mut scratch = ClusterMetadata::default();
        for record in &members {
            check_new_member(&scratch, record, None)
                .map_err(|reason| MetadataError::Config(format!("the initial members conflict: {reason}")))?;
            scratch.members.insert(record.info.host_id, record.clone());
        }
        let mut voters = BTreeMap::new();
        voters.insert(local.raft_id(), RaftPeer { host_id: local });
        for record in &members {
            if voters.len() == VOTERS_MAX {
                break;
            }
            let host_id = record.info.host_id;
            voters.insert(host_id.raft_id(), RaftPeer { host_id });
        }

        let already_initialized = |m: RaftMetrics<u64, RaftPeer>| {
            let current: BTreeSet<u64> = m.membership_config.membership().voter_ids().collect();
            if current == voters.keys().copied().collect() {
                Ok(())
            } else {
                Err(MetadataError::AlreadyInitialized {
                    voters: voters_of(&m).into_iter().map(|(_, host)| host).collect(),
                })
            }
        };
        if self.is_member() {
            already_initialized(self.metrics())?;
        } else {
            match self.inner.raft.initialize(voters.clone()).await {
                Ok(()) => {}
                Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                    already_initialized(self.metrics())?
                }
                Err(RaftError::APIError(InitializeError::NotInMembers(e))) => {
                    return Err(MetadataError::Config(e.to_string()))
                }
                Err(RaftError::Fatal(e)) => {
                    return Err(MetadataError::Stopped {
                        reason: e.to_string(),
                    })
                }
            }
        }

        for record in members {
            let is_voter = voters.contains_key(&record.info.host_id.raft_id());
            let (op, deadline) = if is_voter {
                (Op::Propose(Command::AddMember(record)), self.propose_deadline())
            } else {
                let host = record.info.host_id;
                (
                    Op::AddNode {
                        host,
                        command: Command::AddMember(record),
                    },
                    self.join_deadline(),
                )
            };
            let applied = self.submit(op, deadline, Patience::WaitForLeader).await?;
            if let CommandResult::Refused(reason) = applied.result {
                return Err(MetadataError::Refused { reason });
            }
            self.wait_applied(applied.index, deadline).await?;
        }
        Ok(())
    }

    fn propose_deadline(&self) -> Instant {
        Instant::now() + self.inner.config.propose_timeout
    }

    fn join_deadline(&self) -> Instant {
        Instant::now() + self.inner.config.catch_up_timeout + self.inner.config.propose_timeout
    }

    /// Adds a node, from any member: as a learner first, then, once it has caught up with the
    /// log, as a voter while there are fewer than [`VOTERS_MAX`]; then appends its
    /// [`Command::AddMember`]. The node must have [`Metadata::open`]ed. A record that clashes
    /// with a member (host id, Raft id or a token) is refused before anything changes, with the
    /// reason in [`CommandResult::Refused`].
    pub async fn add_member(&self, record: MemberRecord) -> Result<CommandResult, MetadataError> {
        let host = record.info.host_id;
        self.add_node(host, Command::AddMember(record)).await
    }

    /// Brings `host` into the metadata log, from any member, as [`Metadata::add_member`] does,
    /// with `command` as the entry that brings it into the ring: [`Command::StartJoin`] or
    /// [`Command::StartReplace`] (a topology change), or [`Command::AddMember`]. A command the
    /// state machine would refuse is refused before Raft's membership changes.
    pub async fn add_node(&self, host: HostId, command: Command) -> Result<CommandResult, MetadataError> {
        self.wait_membership().await?;
        let deadline = self.join_deadline();
        let applied = self
            .submit(Op::AddNode { host, command }, deadline, Patience::FailFast)
            .await?;
        self.wait_applied(applied.index, deadline).await?;
        Ok(applied.result)
    }

    /// Removes a member, from any member: appends its [`Command::RemoveMember`], then takes it
    /// out of Raft's voters (promoting a learner in its place, if there is one) or learners.
    pub async fn remove_member(&self, host: HostId) -> Result<CommandResult, MetadataError> {
        self.remove_node(host, Command::RemoveMember(host)).await
    }

    /// Appends `command`, which takes `host` out of the ring (the finish of a change it departs
    /// with, or the abort of its join), then, if it was applied, takes `host` out of Raft as
    /// [`Metadata::remove_member`] does.
    pub async fn remove_node(&self, host: HostId, command: Command) -> Result<CommandResult, MetadataError> {
        self.wait_membership().await?;
        let deadline = self.join_deadline();
        let applied = self
            .submit(Op::RemoveNode { host, command }, deadline, Patience::FailFast)
            .await?;
        self.wait_applied(applied.index, deadline).await?;
        Ok(applied.result)
    }

    /// Appends a command through the leader (forwarding from a follower) and returns once it is
    /// applied on this node, with the result. Fails with [`MetadataError::NoQuorum`], having
    /// appended nothing, when a majority of the voters cannot be reached; see the module
    /// documentation for the one case where a failed proposal may still be applied later.
    pub async fn propose(&self, command: Command) -> Result<CommandResult, MetadataError> {
        check_command_size(&command)?;
        self.wait_membership().await?;
        let deadline = self.propose_deadline();
        let applied = self
            .submit(Op::Propose(command), deadline, Patience::FailFast)
            .await?;
        self.wait_applied(applied.index, deadline).await?;
        Ok(applied.result)
    }

    /// Waits until this node has applied everything the leader had committed when asked (a
    /// Raft read index): what a restarted node does before it serves, so that it plans no
    /// request on a ring older than the cluster's. Returns the epoch reached; fails when no
    /// leader answers within `timeout`.
    pub async fn catch_up(&self, timeout: std::time::Duration) -> Result<u64, MetadataError> {
        self.wait_membership().await?;
        let deadline = Instant::now() + timeout;
        loop {
            let m = self.metrics();
            let Some(leader) = m.current_leader else {
                self.wait_for_leader_other_than(None, deadline).await?;
                if Instant::now() >= deadline {
                    return Err(MetadataError::NoLeader {
                        timeout_ms: millis(timeout),
                    });
                }
                continue;
            };
            // The node asked for the read index: the leader, which an error must name (it named
            // this node as "the metadata leader" that failed).
            let (asked, index) = if leader == self.inner.local.raft_id() {
                (self.inner.local, self.read_index().await)
            } else {
                let Some(host) = host_of(&m, leader) else {
                    self.wait_for_leader_other_than(Some(leader), deadline).await?;
                    continue;
                };
                let left = deadline.saturating_duration_since(Instant::now());
                let index =
                    match network::call(self.inner.rpc.as_ref(), host, &Request::ReadIndex, left).await {
                        Ok(Response::ReadIndex(r)) => r,
                        Ok(_) => Err(ForwardError::Failed {
                            message: "a reply of the wrong kind".to_owned(),
                        }),
                        Err(e) => Err(ForwardError::Failed {
                            message: e.to_string(),
                        }),
                    };
                (host, index)
            };
            match index {
                Ok(index) => {
                    self.wait_applied(index, deadline).await?;
                    return Ok(self.current().epoch);
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(remote_error(e, asked, &Op::Propose(Command::App(Vec::new()))))
                }
                Err(_) => {
                    tokio::time::sleep(self.inner.config.heartbeat_interval).await;
                }
            }
        }
    }

    /// As the leader: confirms it leads, and the index a read must see.
    async fn read_index(&self) -> Result<u64, ForwardError> {
        match self.inner.raft.ensure_linearizable().await {
            Ok(log_id) => Ok(log_id.map_or(0, |id| id.index)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => Err(not_leader(f)),
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q))) => Err(ForwardError::NoQuorum {
                reachable: q.got.len(),
                members: voters_of(&self.metrics()).len(),
            }),
            Err(RaftError::Fatal(f)) => Err(ForwardError::Stopped {
                reason: f.to_string(),
            }),
        }
    }

    /// The metadata as this node last applied it.
    pub fn current(&self) -> Arc<ClusterMetadata> {
        self.inner.published.borrow().clone()
    }

    /// Every change this node applies, as it applies it.
    pub fn watch(&self) -> watch::Receiver<Arc<ClusterMetadata>> {
        self.inner.published.clone()
    }

    pub fn status(&self) -> MetadataStatus {
        let m = self.metrics();
        let membership = m.membership_config.membership();
        MetadataStatus {
            host_id: self.inner.local,
            role: match m.state {
                ServerState::Leader => RaftRole::Leader,
                ServerState::Follower => RaftRole::Follower,
                ServerState::Candidate => RaftRole::Candidate,
                ServerState::Learner => RaftRole::Learner,
                ServerState::Shutdown => RaftRole::Stopped,
            },
            leader: m.current_leader.and_then(|id| host_of(&m, id)),
            term: m.current_term,
            last_log_index: m.last_log_index,
            last_applied_index: m.last_applied.map(|id| id.index),
            snapshot_index: m.snapshot.map(|id| id.index),
            purged_index: m.purged.map(|id| id.index),
            voters: voters_of(&m).into_iter().map(|(_, host)| host).collect(),
            learners: membership
                .learner_ids()
                .filter_map(|id| host_of(&m, id))
                .collect(),
        }
    }

    /// Serves a message another node's [`MetadataRpc`] sent; returns the reply to send back.
    pub async fn handle(&self, from: HostId, payload: &[u8]) -> Vec<u8> {
        if payload.len() > MESSAGE_BYTES_MAX {
            let reason = format!(
                "a metadata request of {} bytes from {from}, more than the {MESSAGE_BYTES_MAX}-byte limit",
                payload.len()
            );
            tracing::warn!(%reason);
            return encode(&Response::Refused { reason });
        }
        let request: Request = match serde_json::from_slice(payload) {
            Ok(request) => request,
            Err(e) => {
                let reason = format!("undecodable metadata request from {from}: {e}");
                tracing::warn!(%reason);
                return encode(&Response::Refused { reason });
            }
        };
        let raft = &self.inner.raft;
        let response = match request {
            Request::AppendEntries(rpc) => Response::AppendEntries(raft.append_entries(rpc).await),
            Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
            Request::Snapshot { vote, meta, data } => {
                let snapshot = Snapshot {
                    meta,
                    snapshot: Box::new(data),
                };
                Response::Snapshot(raft.install_full_snapshot(vote, snapshot).await)
            }
            Request::Propose(command) => match check_command_size(&command) {
                Ok(()) => Response::Applied(self.lead(Op::Propose(command), self.propose_deadline()).await),
                Err(e) => Response::Applied(Err(ForwardError::Failed {
                    message: e.to_string(),
                })),
            },
            Request::AddMember(record) => {
                let op = Op::AddNode {
                    host: record.info.host_id,
                    command: Command::AddMember(record),
                };
                Response::Applied(self.lead(op, self.join_deadline()).await)
            }
            Request::RemoveMember(host) => {
                let op = Op::RemoveNode {
                    host,
                    command: Command::RemoveMember(host),
                };
                Response::Applied(self.lead(op, self.join_deadline()).await)
            }
            Request::AddNode { host, command } => Response::Applied(
                self.lead(Op::AddNode { host, command }, self.join_deadline())
                    .await,
            ),
            Request::RemoveNode { host, command } => Response::Applied(
                self.lead(Op::RemoveNode { host, command }, self.join_deadline())
                    .await,
            ),
            Request::ReadIndex => Response::ReadIndex(self.read_index().await),
            Request::Ping => Response::Pong,
        };
        encode(&response)
    }

    /// Stops the Raft node; the files stay as they are, to be opened again.
    pub async fn shutdown(self) {
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(error = %e, "the metadata Raft node did not stop cleanly");
        }
    }

    /// Has the leader do `op`, wherever it is, until `deadline`.
    async fn submit(&self, op: Op, deadline: Instant, patience: Patience) -> Result<Applied, MetadataError> {
        let total_ms = millis(deadline.saturating_duration_since(Instant::now()));
        let retry_interval = self.inner.config.election_timeout_min;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(MetadataError::NoLeader { timeout_ms: total_ms });
            }
            let m = self.metrics();
            let Some(leader) = m.current_leader else {
                if patience == Patience::FailFast {
                    self.fail_without_quorum(deadline).await?;
                }
                self.wait_for_leader_other_than(None, deadline).await?;
                continue;
            };
            if leader == self.inner.local.raft_id() {
                match self.lead(op.clone(), deadline).await {
                    Ok(applied) => return Ok(applied),
                    Err(ForwardError::NotLeader { .. }) => {
                        self.wait_for_leader_other_than(Some(leader), deadline.min(now + retry_interval))
                            .await?;
                        continue;
                    }
                    Err(e) => return Err(self.local_error(e, &op)),
                }
            }
            let Some(host) = host_of(&m, leader) else {
                self.wait_for_leader_other_than(Some(leader), deadline.min(now + retry_interval))
                    .await?;
                continue;
            };
            let timeout = deadline.saturating_duration_since(now);
            match network::call(self.inner.rpc.as_ref(), host, &op.request(), timeout).await {
                Ok(Response::Applied(Ok(applied))) => return Ok(applied),
                Ok(Response::Applied(Err(ForwardError::NotLeader { .. }))) => {
                    self.wait_for_leader_other_than(Some(leader), deadline.min(now + retry_interval))
                        .await?;
                }
                Ok(Response::Applied(Err(e))) => return Err(remote_error(e, host, &op)),
                // Not delivered: safe to send again, to whichever node leads by then.
                Ok(Response::Refused { .. }) | Err(RpcError::Unreachable { .. }) => {
                    if patience == Patience::FailFast {
                        self.fail_without_quorum(deadline).await?;
                    }
                    self.wait_for_leader_other_than(Some(leader), deadline.min(now + retry_interval))
                        .await?;
                }
                Ok(_) => {
                    return Err(MetadataError::Remote {
                        host,
                        message: "a reply of the wrong kind".to_owned(),
                    })
                }
                Err(e) => {
                    return Err(MetadataError::Unconfirmed {
                        leader: host,
                        reason: e.to_string(),
                    })
                }
            }
        }
    }

    /// Waits until a leader other than `previous` is known, or until `until`; fails if the Raft
    /// node has stopped (its metrics are gone), which would otherwise make a caller spin.
    async fn wait_for_leader_other_than(
        &self,
        previous: Option<u64>,
        until: Instant,
    ) -> Result<(), MetadataError> {
        let mut metrics = self.inner.raft.metrics();
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.current_leader.is_some() && m.current_leader != previous {
                    return Ok(());
                }
            }
            match timeout_at(until, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(MetadataError::Stopped {
                        reason: "the Raft node stopped".to_owned(),
                    })
                }
                Err(_) => return Ok(()),
            }
        }
    }

    /// Counts the voters that answer a ping, this node included; fails with
    /// [`MetadataError::NoQuorum`] if they are fewer than a majority.
    async fn fail_without_quorum(&self, deadline: Instant) -> Result<(), MetadataError> {
        let m = self.metrics();
        let voters = voters_of(&m);
        let timeout = (self.inner.config.heartbeat_interval * 4)
            .min(deadline.saturating_duration_since(Instant::now()));
        let mut pings = tokio::task::JoinSet::new();
        let mut reachable = 0;
        for (id, host) in &voters {
            if *id == self.inner.local.raft_id() {
                reachable += 1;
                continue;
            }
            let rpc = self.inner.rpc.clone();
            let host = *host;
            pings.spawn(async move {
                matches!(
                    network::call(rpc.as_ref(), host, &Request::Ping, timeout).await,
                    Ok(Response::Pong)
                )
            });
        }
        while let Some(answered) = pings.join_next().await {
            if answered.unwrap_or(false) {
                reachable += 1;
            }
        }
        if reachable < quorum_of(voters.len()) {
            return Err(MetadataError::NoQuorum {
                reachable,
                members: voters.len(),
            });
        }
        Ok(())
    }

    /// Waits until this node has applied `index`.
    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<(), MetadataError> {
        // The leader may have used most of the deadline; a follower still gets the time it
        // takes to hear of the commit.
        let deadline = deadline.max(Instant::now() + self.inner.config.election_timeout_max);
        let mut published = self.inner.published.clone();
        loop {
            if published.borrow_and_update().epoch >= index {
                return Ok(());
            }
            match timeout_at(deadline, published.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(MetadataError::Stopped {
                        reason: "the state machine is gone".to_owned(),
                    })
                }
                Err(_) => return Err(MetadataError::NotYetApplied { index }),
            }
        }
    }

    fn local_error(&self, e: ForwardError, op: &Op) -> MetadataError {
        match e {
            ForwardError::Stopped { reason } => MetadataError::Stopped { reason },
            ForwardError::Failed { message } => MetadataError::Remote {
                host: self.inner.local,
                message,
            },
            e => remote_error(e, self.inner.local, op),
        }
    }

    /// Does `op` as the leader: [`ForwardError::NotLeader`] if this node is not the leader.
    async fn lead(&self, op: Op, deadline: Instant) -> Result<Applied, ForwardError> {
        match op {
            Op::Propose(command) => {
                self.confirm_quorum(deadline).await?;
                self.write(command, deadline).await
            }
            Op::AddNode { host, command } => self.lead_add_node(host, command, deadline).await,
            Op::RemoveNode { host, command } => self.lead_remove_node(host, command, deadline).await,
        }
    }

    /// Confirms that this node leads and that a majority of the voters still answers it, so
    /// that a command is appended only when it can be committed now. A check that misses the
    /// majority is tried again, up to [`QUORUM_CHECKS_MAX`] times a heartbeat apart: one slow
    /// answer (a follower's fsync, a pause) must not fail a schema change.
    async fn confirm_quorum(&self, deadline: Instant) -> Result<(), ForwardError> {
        let mut checks = 0;
        loop {
            checks += 1;
            let result = timeout_at(deadline, self.inner.raft.ensure_linearizable()).await;
            return match result {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => Err(not_leader(f)),
                Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q)))) => {
                    if checks < QUORUM_CHECKS_MAX {
                        tokio::time::sleep(self.inner.config.heartbeat_interval).await;
                        continue;
                    }
                    Err(ForwardError::NoQuorum {
                        reachable: q.got.len(),
                        members: voters_of(&self.metrics()).len(),
                    })
                }
                Ok(Err(RaftError::Fatal(f))) => Err(ForwardError::Stopped {
                    reason: f.to_string(),
                }),
                // A quorum answered, but this node did not apply the entries before it in time.
                Err(_) => Err(self.propose_timed_out()),
            };
        }
    }

    fn propose_timed_out(&self) -> ForwardError {
        ForwardError::Timeout {
            timeout_ms: millis(self.inner.config.propose_timeout),
        }
    }

    /// Appends `command` and waits for it to be applied here.
    async fn write(&self, command: Command, deadline: Instant) -> Result<Applied, ForwardError> {
        match timeout_at(deadline, self.inner.raft.client_write(command)).await {
            Ok(Ok(response)) => Ok(Applied {
                index: response.log_id.index,
                result: response.data,
            }),
            Ok(Err(e)) => Err(write_error(e)),
            Err(_) => Err(self.propose_timed_out()),
        }
    }

    /// Runs a change of Raft's voters or learners.
    async fn change_membership(
        &self,
        change: ChangeMembers<u64, RaftPeer>,
        deadline: Instant,
    ) -> Result<u64, ForwardError> {
        match timeout_at(deadline, self.inner.raft.change_membership(change, false)).await {
            Ok(Ok(response)) => Ok(response.log_id.index),
            Ok(Err(e)) => Err(write_error(e)),
            Err(_) => Err(self.propose_timed_out()),
        }
    }

    async fn lead_add_node(
        &self,
        host: HostId,
        command: Command,
        deadline: Instant,
    ) -> Result<Applied, ForwardError> {
        let _one_at_a_time = self.inner.membership_changes.lock().await;
        self.confirm_quorum(deadline).await?;
        // The confirmed quorum means this node has applied everything committed before: a dry
        // run of the command sees every member and the change in progress. (The command is
        // checked again when it applies.)
        let current = self.current();
        if let CommandResult::Refused(reason) =
            apply_member_command(&mut (*current).clone(), current.epoch + 1, &command)
        {
            return Ok(Applied {
                index: current.epoch,
                result: CommandResult::Refused(reason),
            });
        }
        let id = host.raft_id();
        let m = self.metrics();
        let target_index = match m.membership_config.membership().get_node(&id) {
            Some(peer) if peer.host_id != host => {
                return Ok(Applied {
                    index: current.epoch,
                    result: CommandResult::Refused(format!(
                        "{host} has the same Raft id ({id}) as voter {}: give the new node another host id",
                        peer.host_id
                    )),
                })
            }
            // Added before (a retried join): catch up to the present.
            Some(_) => m.last_log_index.unwrap_or(0),
            None => {
                let change = ChangeMembers::AddNodes(BTreeMap::from([(id, RaftPeer { host_id: host })]));
                self.change_membership(change, deadline).await?
            }
        };
        let catch_up_until = deadline.min(Instant::now() + self.inner.config.catch_up_timeout);
        self.wait_caught_up(id, target_index, catch_up_until).await?;
        let voters: BTreeSet<u64> = self
            .metrics()
            .membership_config
            .membership()
            .voter_ids()
            .collect();
        if !voters.contains(&id) && voters.len() < VOTERS_MAX {
            self.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), deadline)
                .await?;
        }
        self.write(command, deadline).await
    }

    /// Waits until the leader has replicated to `id` up to `index`.
    async fn wait_caught_up(&self, id: u64, index: u64, until: Instant) -> Result<(), ForwardError> {
        let mut metrics = self.inner.raft.metrics();
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state != ServerState::Leader {
                    return Err(ForwardError::NotLeader { leader: None });
                }
                let matched = m.replication.as_ref().and_then(|r| r.get(&id).copied().flatten());
                if matched.is_some_and(|log_id| log_id.index >= index) {
                    return Ok(());
                }
            }
            match timeout_at(until, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(ForwardError::Stopped {
                        reason: "the Raft node stopped".to_owned(),
                    })
                }
                Err(_) => {
                    return Err(ForwardError::CatchUpTimeout {
                        timeout_ms: millis(self.inner.config.catch_up_timeout),
                    })
                }
            }
        }
    }

    async fn lead_remove_node(
        &self,
        host: HostId,
        command: Command,
        deadline: Instant,
    ) -> Result<Applied, ForwardError> {
        let _one_at_a_time = self.inner.membership_changes.lock().await;
        self.confirm_quorum(deadline).await?;
        let applied = self.write(command, deadline).await?;
        if matches!(applied.result, CommandResult::Refused(_)) || self.current().members.contains_key(&host) {
            // The node is still in the ring (the command was refused, or kept it): it keeps its
            // place in Raft.
            return Ok(applied);
        }
        let id = host.raft_id();
        let m = self.metrics();
        let membership = m.membership_config.membership();
        if membership.get_node(&id).is_none_or(|peer| peer.host_id != host) {
            return Ok(applied);
        }
        let mut voters: BTreeSet<u64> = membership.voter_ids().collect();
        if voters.remove(&id) {
            // A learner takes the voter's place, so the cluster keeps its fault tolerance.
            if let Some(learner) = membership.learner_ids().next() {
                voters.insert(learner);
            }
            self.change_membership(ChangeMembers::ReplaceAllVoters(voters), deadline)
                .await?;
        } else {
            self.change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), deadline)
                .await?;
        }
        Ok(applied)
    }
}

/// The error a proposer reports for what the leader (`host`) answered.
fn remote_error(e: ForwardError, host: HostId, op: &Op) -> MetadataError {
    match e {
        ForwardError::NotLeader { .. } => MetadataError::NoLeader { timeout_ms: 0 },
        ForwardError::NoQuorum { reachable, members } => MetadataError::NoQuorum { reachable, members },
        ForwardError::Timeout { timeout_ms } => MetadataError::Timeout { timeout_ms },
        ForwardError::CatchUpTimeout { timeout_ms } => MetadataError::CatchUpTimeout {
            host: match op {
                Op::AddNode { host, .. } => *host,
                _ => host,
            },
            timeout_ms,
        },
        ForwardError::MembershipChange { reason } => MetadataError::MembershipChange { reason },
        ForwardError::Stopped { reason } => MetadataError::Remote {
            host,
            message: format!("its metadata service stopped: {reason}"),
        },
        ForwardError::Failed { message } => MetadataError::Remote { host, message },
    }
}
