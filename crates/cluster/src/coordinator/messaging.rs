//! Requests to other nodes and their answers: ids, the table of requests waiting for an answer,
//! and where incoming requests go.
//!
//! The coordinator sends the requests of one coordinated operation with one reply channel, so
//! it waits on all of them at once; an answer that comes after the operation gave up finds the
//! channel closed and is dropped. A [`Waiting`] guard removes the operation's entries when it is
//! dropped, so a peer that never answers leaves nothing behind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use tokio::sync::mpsc;

use crate::message::{Kind, Message, RequestId};
use crate::node::HostId;
use crate::replica::{ReplicaError, ReplicaErrorKind};
use crate::transport::{Inbox, Lane, Transport};

/// Requests waiting for an answer at once, across the node; past this, new requests are
/// refused as if the peer had not answered (bounded memory under a flood of slow peers).
pub const PENDING_REQUESTS_MAX: usize = 1 << 20;

/// An answer, with the node that sent it.
pub type Reply = (HostId, Message);

/// What runs the requests other nodes send: the replica service and the metadata handler.
pub trait RequestHandler: Send + Sync + 'static {
    /// A request from `from`; answer it with [`Messaging::respond`]. Must not block.
    fn handle(&self, from: HostId, message: Message);
}

/// A request waiting for its answer: to whom it went, what kind of answer it expects, and
/// where the answer goes.
struct Pending {
    to: HostId,
    kind: Kind,
    reply_to: mpsc::UnboundedSender<Reply>,
}

pub struct Messaging {
    local: HostId,
    transport: RwLock<Option<Arc<dyn Transport>>>,
    handler: RwLock<Option<Arc<dyn RequestHandler>>>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<RequestId, Pending>>,
}

impl Messaging {
    pub fn new(local: HostId) -> Arc<Messaging> {
        Arc::new(Messaging {
            local,
            transport: RwLock::new(None),
            handler: RwLock::new(None),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        })
    }

    pub fn local_host(&self) -> HostId {
        self.local
    }

    /// Sets the transport (it is made after the messaging it delivers to).
    pub fn set_transport(&self, transport: Arc<dyn Transport>) {
        *self.transport.write().expect("transport lock poisoned") = Some(transport);
    }

    /// Sets what handles incoming requests.
    pub fn set_handler(&self, handler: Arc<dyn RequestHandler>) {
        *self.handler.write().expect("handler lock poisoned") = Some(handler);
    }

    /// Lets go of the transport and the handler (which hold this messaging in turn): the node
    /// calls it when it stops, so that what they hold (the storage engine) can close.
    pub fn close(&self) {
        self.transport.write().expect("transport lock poisoned").take();
        self.handler.write().expect("handler lock poisoned").take();
    }

    /// The transport, read under its lock (which only `close` ever contends) rather than
    /// cloned, so that a message costs no reference count; `None` before the node made it or
    /// after it stopped.
    fn transport(&self) -> RwLockReadGuard<'_, Option<Arc<dyn Transport>>> {
        self.transport.read().expect("transport lock poisoned")
    }

    /// Sends a request made by `make` from a fresh id; its answer goes to `reply_to`. The
    /// caller keeps the id in a [`Waiting`] guard. Returns `None` (nothing sent) if too many
    /// requests are waiting already.
    pub fn request(
        &self,
        to: HostId,
        lane: Lane,
        reply_to: &mpsc::UnboundedSender<Reply>,
        make: impl FnOnce(RequestId) -> Message,
    ) -> Option<RequestId> {
        let transport = self.transport();
        let transport = transport.as_ref()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = make(id);
        {
            let mut pending = self.pending.lock().expect("pending lock poisoned");
            if pending.len() >= PENDING_REQUESTS_MAX {
                tracing::warn!(
                    "{PENDING_REQUESTS_MAX} internode requests wait for answers; not sending more"
                );
                return None;
            }
            pending.insert(
                id,
                Pending {
                    to,
                    kind: message.kind(),
                    reply_to: reply_to.clone(),
                },
            );
        }
        transport.send(to, lane, message);
        Some(id)
    }

    /// Answers a request.
    pub fn respond(&self, to: HostId, lane: Lane, message: Message) {
        if let Some(t) = self.transport().as_ref() {
            t.send(to, lane, message);
        }
    }

    fn forget(&self, ids: &[RequestId]) {
        let mut pending = self.pending.lock().expect("pending lock poisoned");
        for id in ids {
            pending.remove(id);
        }
    }

    /// `host` went down (the failure detector convicted it): every request waiting for its
    /// answer gets an `Unreachable` error now instead of waiting out its timeout, so that a
    /// coordinator asks another replica, hints, or fails at once.
    pub fn fail_requests_to(&self, host: HostId) {
        let failed: Vec<(RequestId, Pending)> = {
            let mut pending = self.pending.lock().expect("pending lock poisoned");
            let mut ids: Vec<RequestId> = pending
                .iter()
                .filter(|(_, p)| p.to == host)
                .map(|(id, _)| *id)
                .collect();
            // In the order they were sent, whatever the map's: a simulation replays exactly.
            ids.sort_unstable();
            ids.into_iter()
                .filter_map(|id| pending.remove(&id).map(|p| (id, p)))
                .collect()
        };
        let error = || {
            ReplicaError::new(
                ReplicaErrorKind::Unreachable,
                format!("node {host} went down before it answered"),
            )
        };
        for (id, p) in failed {
            let answer = match p.kind {
                Kind::MutationRequest => Message::MutationResponse {
                    id,
                    result: Err(error()),
                },
                Kind::ReadRequest => Message::ReadResponse {
                    id,
                    result: Err(error()),
                },
                // An empty metadata answer: no real one is empty (they are JSON).
                Kind::MetadataRequest => Message::MetadataResponse {
                    id,
                    payload: Vec::new(),
                },
                Kind::StreamRequest => Message::StreamResponse {
                    id,
                    result: Err(error()),
                },
                // Empty, as for metadata: a real topology answer is JSON.
                Kind::TopologyRequest => Message::TopologyResponse {
                    id,
                    payload: Vec::new(),
                },
                Kind::PaxosRequest => Message::PaxosResponse {
                    id,
                    result: Err(error()),
                },
                Kind::CounterRequest => Message::CounterResponse {
                    id,
                    result: Err(error()),
                },
                _ => continue,
            };
            let _ = p.reply_to.send((host, answer));
        }
    }

    /// Requests waiting for an answer now (for metrics and tests).
    pub fn pending_requests(&self) -> usize {
        self.pending.lock().expect("pending lock poisoned").len()
    }
}

impl Inbox for Messaging {
    fn deliver(&self, from: HostId, message: Message) {
        match &message {
            Message::MutationResponse { id, .. }
            | Message::ReadResponse { id, .. }
            | Message::MetadataResponse { id, .. }
            | Message::StreamResponse { id, .. }
            | Message::TopologyResponse { id, .. }
            | Message::PaxosResponse { id, .. }
            | Message::CounterResponse { id, .. }
            | Message::Pong { id } => {
                let waiter = self.pending.lock().expect("pending lock poisoned").remove(id);
                match waiter {
                    // An answer from another node than the one asked is not the answer.
                    Some(p) if p.to == from => {
                        let _ = p.reply_to.send((from, message));
                    }
                    Some(_) => tracing::warn!(%from, id, "an answer came from a node that was not asked"),
                    None => {}
                }
            }
            Message::Ping { id } => self.respond(from, Lane::Requests, Message::Pong { id: *id }),
            _ => match self.handler.read().expect("handler lock poisoned").as_ref() {
                Some(h) => h.handle(from, message),
                None => tracing::debug!(%from, "dropping a request that arrived before the node was ready"),
            },
        }
    }
}

/// The ids one operation waits on; dropping it forgets them.
pub struct Waiting {
    messaging: Arc<Messaging>,
    ids: Vec<RequestId>,
}

impl Waiting {
    pub fn new(messaging: Arc<Messaging>) -> Waiting {
        Waiting {
            messaging,
            ids: Vec::new(),
        }
    }

    pub fn push(&mut self, id: RequestId) {
        self.ids.push(id);
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.ids.is_empty() {
            self.messaging.forget(&self.ids);
        }
    }
}
