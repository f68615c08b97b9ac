//! Metadata requests between nodes, over the internode messaging: Raft's own messages, and a
//! new node's request to be added to the cluster.
//!
//! Both travel as `MetadataRequest` payloads whose first byte says which they are, so one
//! handler on each node routes them: Raft's to [`Metadata::handle`], a join to
//! [`super::join::handle_join`].

use std::sync::Arc;
use std::time::Duration;

use hayate_cluster::coordinator::messaging::{Messaging, Waiting};
use hayate_cluster::message::Message;
use hayate_cluster::metadata::{BoxFuture, MetadataRpc, RpcError};
use hayate_cluster::node::HostId;
use hayate_cluster::transport::Lane;
use tokio::sync::mpsc;

/// A Raft message (openraft's RPCs and forwarded proposals).
pub const TAG_RAFT: u8 = 0;
/// A node asking to be added to the cluster.
pub const TAG_JOIN: u8 = 1;

/// Sends one tagged metadata request and waits for its answer.
pub async fn call(
    messaging: &Arc<Messaging>,
    to: HostId,
    tag: u8,
    payload: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, RpcError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut waiting = Waiting::new(messaging.clone());
    let mut tagged = Vec::with_capacity(payload.len() + 1);
    tagged.push(tag);
    tagged.extend_from_slice(payload);
    let Some(id) = messaging.request(to, Lane::Requests, &tx, |id| Message::MetadataRequest {
        id,
        payload: tagged,
    }) else {
        return Err(RpcError::Unreachable {
            host: to,
            reason: "too many requests wait for answers".into(),
        });
    };
    waiting.push(id);
    match tokio::time::timeout(timeout, rx.recv()).await {
        // Empty: the node went down before it answered (`Messaging::fail_requests_to`).
        Ok(Some((_, Message::MetadataResponse { payload, .. }))) if payload.is_empty() => {
            Err(RpcError::Unreachable {
                host: to,
                reason: "it went down before it answered".into(),
            })
        }
        Ok(Some((_, Message::MetadataResponse { payload, .. }))) => Ok(payload),
        Ok(_) => Err(RpcError::Failed {
            host: to,
            reason: "the answer was not a metadata answer".into(),
        }),
        Err(_) => Err(RpcError::Timeout {
            host: to,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
    }
}

/// Raft's messages over the internode messaging.
pub struct Rpc {
    pub messaging: Arc<Messaging>,
    /// Gossip's view: a message to a node it knows to be down, or has not heard from since this
    /// node started (a node restarted while the others are down), is not sent, so that Raft hears
    /// "unreachable" at once rather than a timeout that could mean the answer was lost.
    pub membership: hayate_cluster::membership::Membership,
}

impl MetadataRpc for Rpc {
    fn call(&self, to: HostId, payload: Vec<u8>, timeout: Duration) -> BoxFuture<Result<Vec<u8>, RpcError>> {
        let messaging = self.messaging.clone();
        let known_down = self.membership.peer(to).is_none_or(|p| !p.alive);
        Box::pin(async move {
            if known_down {
                return Err(RpcError::Unreachable {
                    host: to,
                    reason: "the failure detector has it down, or has not heard from it yet".into(),
                });
            }
            call(&messaging, to, TAG_RAFT, &payload, timeout).await
        })
    }
}
