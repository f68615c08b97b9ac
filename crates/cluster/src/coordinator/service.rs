//! The replica side of internode requests: mutations and reads other coordinators send this
//! node, run against the local replica, and answered; and metadata (Raft) requests, handed to
//! whatever the node registered for them.
//!
//! Requests arrive on the transport's reader tasks, which must not block: each becomes a task
//! on the node's service threads, where it reads the device as a client request does. With
//! `commit_to_device`, a mutation waits for its group commit, so it runs on the blocking pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use super::messaging::{Messaging, RequestHandler};
use crate::counter;
use crate::message::{digest, Message, ReadReply};
use crate::node::HostId;
use crate::paxos::acceptor;
use crate::replica::{apply_local, read_local, Replica};
use crate::streaming::{self, Streams};
use crate::transport::Lane;

/// A future answer to a metadata request.
pub type MetadataFuture = Pin<Box<dyn Future<Output = Vec<u8>> + Send>>;

/// What answers metadata requests (the Raft log): given the sender and the payload.
pub type MetadataHandler = dyn Fn(HostId, Vec<u8>) -> MetadataFuture + Send + Sync;

pub struct ReplicaService {
    replica: Arc<dyn Replica>,
    messaging: Arc<Messaging>,
    /// Mutations wait for the device (commit_to_device): run them on the blocking pool.
    blocking_writes: bool,
    metadata: RwLock<Option<Arc<MetadataHandler>>>,
    /// What answers a topology change's control messages (`crate::topology`).
    topology: RwLock<Option<Arc<MetadataHandler>>>,
    streams: Arc<Streams>,
}

impl ReplicaService {
    pub fn new(
        replica: Arc<dyn Replica>,
        messaging: Arc<Messaging>,
        blocking_writes: bool,
    ) -> Arc<ReplicaService> {
        Arc::new(ReplicaService {
            replica,
            messaging,
            blocking_writes,
            metadata: RwLock::new(None),
            topology: RwLock::new(None),
            streams: Streams::new(0),
        })
    }

    /// This node's streams: the chunks it sends (at `streams().throttle`'s rate) and receives.
    pub fn streams(&self) -> &Arc<Streams> {
        &self.streams
    }

    /// Sets what answers topology control messages.
    pub fn set_topology_handler(&self, handler: Arc<MetadataHandler>) {
        *self.topology.write().expect("topology handler lock poisoned") = Some(handler);
    }

    /// Sets what answers metadata requests.
    pub fn set_metadata_handler(&self, handler: Arc<MetadataHandler>) {
        *self.metadata.write().expect("metadata handler lock poisoned") = Some(handler);
    }

    /// Lets go of the metadata handler (which holds the metadata log, which holds the
    /// messaging that holds this service): the node calls it when it stops.
    pub fn close(&self) {
        self.metadata
            .write()
            .expect("metadata handler lock poisoned")
            .take();
        self.topology
            .write()
            .expect("topology handler lock poisoned")
            .take();
    }
}

impl RequestHandler for ReplicaService {
    fn handle(&self, from: HostId, message: Message) {
        let replica = self.replica.clone();
        let messaging = self.messaging.clone();
        match message {
            Message::MutationRequest { id, mutations } => {
                // A decoded message's mutations are its own: no copy.
                let mutations = Arc::unwrap_or_clone(mutations);
                if self.blocking_writes {
                    tokio::task::spawn_blocking(move || {
                        let result = replica.apply(mutations);
                        messaging.respond(from, Lane::Requests, Message::MutationResponse { id, result });
                    });
                } else {
                    tokio::spawn(async move {
                        let result = apply_local(&*replica, mutations).await;
                        messaging.respond(from, Lane::Requests, Message::MutationResponse { id, result });
                    });
                }
            }
            Message::ReadRequest {
                id,
                command,
                digest_only,
            } => {
                tokio::spawn(async move {
                    let result = read_local(&replica, &command).await.map(|r| {
                        if digest_only {
                            ReadReply::Digest {
                                digest: digest(&r),
                                more: r.more,
                            }
                        } else {
                            ReadReply::Data(r)
                        }
                    });
                    messaging.respond(from, Lane::Requests, Message::ReadResponse { id, result });
                });
            }
            Message::MetadataRequest { id, payload } => match self
                .metadata
                .read()
                .expect("metadata handler lock poisoned")
                .clone()
            {
                Some(handler) => {
                    let answer = handler(from, payload);
                    tokio::spawn(async move {
                        let payload = answer.await;
                        messaging.respond(from, Lane::Requests, Message::MetadataResponse { id, payload });
                    });
                }
                None => tracing::debug!(%from, "a metadata request before the metadata log is open; dropped"),
            },
            Message::StreamRequest { id, request } => {
                streaming::serve(&self.streams, &replica, &messaging, from, id, request);
            }
            Message::TopologyRequest { id, payload } => match self
                .topology
                .read()
                .expect("topology handler lock poisoned")
                .clone()
            {
                Some(handler) => {
                    let answer = handler(from, payload);
                    tokio::spawn(async move {
                        let payload = answer.await;
                        messaging.respond(from, Lane::Requests, Message::TopologyResponse { id, payload });
                    });
                }
                None => tracing::debug!(%from, "a topology request before the node is ready; dropped"),
            },
            Message::PaxosRequest { id, request } => {
                let blocking = self.blocking_writes;
                tokio::spawn(async move {
                    let result = acceptor::run(&replica, request, blocking).await;
                    messaging.respond(from, Lane::Requests, Message::PaxosResponse { id, result });
                });
            }
            Message::CounterRequest {
                id,
                timestamp_us,
                updates,
            } => {
                let leader = messaging.local_host();
                let blocking = self.blocking_writes || replica.reads_ahead();
                tokio::spawn(async move {
                    let result = counter::run(&replica, leader, updates, timestamp_us, blocking).await;
                    messaging.respond(from, Lane::Requests, Message::CounterResponse { id, result });
                });
            }
            other => {
                tracing::warn!(%from, kind = ?other.kind(), "an answer or unknown request reached the replica service")
            }
        }
    }
}
