//! The internode transport over plain TCP.
//!
//! Outbound, per peer and [`Lane`], one connection, opened on the first send and reopened
//! with capped exponential backoff while the peer is unreachable. Sends go into a bounded
//! queue; one writer task per connection takes everything queued, encodes it into one buffer
//! and hands it to the kernel in a single `write_all` (TCP_NODELAY on, no flush or syscall per
//! message). Messages queued while the connection is down wait, within the queue's bounds and
//! `queued_message_expiry_ms`, and go when it opens. When a connection breaks, the messages
//! already handed to the kernel may be lost; the sender's timeout covers them.
//!
//! Inbound, the listener accepts, reads the handshake ([`crate::message::handshake`]), then
//! reads in large chunks and cuts frames out of its buffer, handing each message to the
//! [`Inbox`]. Inbound connections are read-only: a node sends its answers on its own outbound
//! connection to the asker, as Cassandra does, so each connection's bytes flow one way and a
//! reader never waits on a writer. A frame that fails its checksum or does not decode closes
//! that connection (the stream is no longer trusted) and is logged with the peer and the
//! reason; everything else keeps going.
//!
//! Every socket binds to the node's own listen address, outbound ones included, so several
//! nodes share one machine on 127.0.0.x and a peer sees a connection come from the address it
//! knows the node by.

mod inbound;
mod outbound;
mod stats;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::net::TcpSocket;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{Inbox, Lane, Transport};
use crate::message::handshake::CLUSTER_NAME_BYTES_MAX;
use crate::message::{Message, FRAME_BYTES_MAX};
use crate::node::HostId;
use outbound::Peer;
use stats::Counters;

pub use stats::{PeerStats, TransportStats};

/// The most messages one peer's queue holds per lane; past it, sends are dropped.
pub const QUEUE_MESSAGES_MAX: usize = 1 << 16;
/// The most bytes (by [`Message::size_hint_bytes`]) one peer's queue holds per lane. Larger
/// than a frame, so that any message that can be sent fits in an empty queue.
pub const QUEUE_BYTES_MAX: usize = 128 << 20;
/// A writer stops gathering queued messages into one write past this size (a single larger
/// message is written whole).
pub const WRITE_COALESCE_BYTES_MAX: usize = 256 << 10;
/// How much an inbound reader asks the socket for at once.
pub const READ_CHUNK_BYTES: usize = 64 << 10;
/// Inbound connections open at once; more are closed at accept. A cluster needs two per peer.
pub const INBOUND_CONNECTIONS_MAX: usize = 4096;
/// The listener's backlog.
const LISTEN_BACKLOG: u32 = 1024;

const _: () = assert!(QUEUE_BYTES_MAX >= FRAME_BYTES_MAX);

/// Where a node listens and how it treats its peers.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    pub local: HostId,
    /// The node's own address and storage port. Only this address is bound.
    pub listen: SocketAddr,
    /// Nodes of another cluster are refused at the handshake.
    pub cluster_name: String,
    pub queue_messages_max: usize,
    pub queue_bytes_max: usize,
    /// A message that waited this long for a connection is dropped rather than sent late:
    /// longer than any request timeout, after which nobody is waiting for it.
    pub queued_message_expiry_ms: u64,
    pub connect_timeout_ms: u64,
    /// How long either side waits for the other's half of the handshake.
    pub handshake_timeout_ms: u64,
    /// A write that makes no progress for this long means the peer is stuck: the connection is
    /// closed and reopened.
    pub write_timeout_ms: u64,
    /// The first wait before reconnecting to an unreachable peer; it doubles up to the max.
    pub reconnect_backoff_min_ms: u64,
    pub reconnect_backoff_max_ms: u64,
}

impl TcpConfig {
    pub fn new(local: HostId, listen: SocketAddr, cluster_name: impl Into<String>) -> TcpConfig {
        TcpConfig {
            local,
            listen,
            cluster_name: cluster_name.into(),
            queue_messages_max: QUEUE_MESSAGES_MAX,
            queue_bytes_max: QUEUE_BYTES_MAX,
            queued_message_expiry_ms: 30_000,
            connect_timeout_ms: 2_000,
            handshake_timeout_ms: 5_000,
            write_timeout_ms: 10_000,
            reconnect_backoff_min_ms: 100,
            reconnect_backoff_max_ms: 2_000,
        }
    }
}

/// The TCP transport of one node. Dropping it (or [`TcpTransport::shutdown`]) stops its tasks
/// and closes its sockets.
pub struct TcpTransport {
    shared: Arc<Shared>,
}

struct Shared {
    config: TcpConfig,
    local_addr: SocketAddr,
    inbox: Arc<dyn Inbox>,
    runtime: tokio::runtime::Handle,
    peers: RwLock<HashMap<HostId, Arc<Peer>>>,
    counters: Counters,
    closed: AtomicBool,
    shutdown: watch::Sender<bool>,
    /// Every task the transport runs, so that shutdown can wait for them (and the listener
    /// is closed when it returns). Finished ones are reaped as new ones start.
    tasks: Mutex<JoinSet<()>>,
}

impl Shared {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().expect("task set lock poisoned");
        while tasks.try_join_next().is_some() {}
        tasks.spawn_on(task, &self.runtime);
    }

    fn stopping(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// Resolves once the transport is shutting down.
async fn stopped(rx: &mut watch::Receiver<bool>) {
    // An error means the sender is gone, which is a shutdown too.
    let _ = rx.wait_for(|&stop| stop).await;
}

impl TcpTransport {
    /// Binds `config.listen` and starts accepting. Call within a tokio runtime: the
    /// transport's tasks run on it.
    pub async fn start(config: TcpConfig, inbox: Arc<dyn Inbox>) -> io::Result<TcpTransport> {
        if config.cluster_name.len() > CLUSTER_NAME_BYTES_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cluster name of {} bytes exceeds {CLUSTER_NAME_BYTES_MAX}; choose a shorter one",
                    config.cluster_name.len()
                ),
            ));
        }
        let socket = if config.listen.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // A restarted node rebinds its port at once, though connections of its last life may
        // linger in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(config.listen)?;
        let listener = socket.listen(LISTEN_BACKLOG)?;
        let local_addr = listener.local_addr()?;
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            config,
            local_addr,
            inbox,
            runtime: tokio::runtime::Handle::current(),
            peers: RwLock::new(HashMap::new()),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            shutdown,
            tasks: Mutex::new(JoinSet::new()),
        });
        shared.spawn(inbound::accept_loop(shared.clone(), listener));
        tracing::debug!(host = %shared.config.local, address = %local_addr, "internode transport listening");
        Ok(TcpTransport { shared })
    }

    /// The address the listener is bound to (the configured one, with the port filled in if
    /// it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    pub fn local_host(&self) -> HostId {
        self.shared.config.local
    }

    /// Tells the transport where `host` listens (the membership layer calls this). Until
    /// then, messages to it are dropped and counted. A new address takes effect on the next
    /// connection: open ones to the old address are closed.
    pub fn set_peer(&self, host: HostId, address: SocketAddr) {
        if self.shared.closed.load(Ordering::Acquire) {
            return;
        }
        let mut peers = self.shared.peers.write().expect("peer map lock poisoned");
        match peers.get(&host) {
            Some(peer) => peer.set_address(address),
            None => {
                peers.insert(host, Arc::new(Peer::new(host, address)));
            }
        }
    }

    /// Tells the transport that `host` is up again (the failure detector heard from it): a
    /// connection waiting out its reconnect backoff tries at once, so that requests do not wait
    /// up to a whole backoff for a node that is back.
    pub fn peer_up(&self, host: HostId) {
        if let Some(peer) = self
            .shared
            .peers
            .read()
            .expect("peer map lock poisoned")
            .get(&host)
        {
            peer.retry_now();
        }
    }

    /// Forgets `host`: its connections close and what is queued for it is dropped.
    pub fn remove_peer(&self, host: HostId) {
        let peer = self
            .shared
            .peers
            .write()
            .expect("peer map lock poisoned")
            .remove(&host);
        if let Some(peer) = peer {
            peer.remove(&self.shared.counters);
        }
    }

    pub fn stats(&self) -> TransportStats {
        let mut stats = self.shared.counters.snapshot();
        let peers = self.shared.peers.read().expect("peer map lock poisoned");
        for (host, peer) in peers.iter() {
            stats.peers.insert(*host, peer.stats());
        }
        stats
    }

    /// Stops accepting, closes every connection and waits for the transport's tasks to end,
    /// so that the listen address can be bound again when this returns. What is still queued
    /// is dropped.
    pub async fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.shutdown.send_replace(true);
        let peers: Vec<Arc<Peer>> = {
            let mut map = self.shared.peers.write().expect("peer map lock poisoned");
            map.drain().map(|(_, p)| p).collect()
        };
        for peer in peers {
            peer.remove(&self.shared.counters);
        }
        let mut tasks = std::mem::take(&mut *self.shared.tasks.lock().expect("task set lock poisoned"));
        while tasks.join_next().await.is_some() {}
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.shutdown.send_replace(true);
    }
}

impl Transport for TcpTransport {
    fn send(&self, to: HostId, lane: Lane, message: Message) {
        let peer = if self.shared.closed.load(Ordering::Acquire) {
            None
        } else {
            let peers = self.shared.peers.read().expect("peer map lock poisoned");
            peers.get(&to).cloned()
        };
        let Some(peer) = peer else {
            stats::add(&self.shared.counters.dropped_unknown_peer, 1);
            return;
        };
        if peer.enqueue(&self.shared, lane, message) {
            self.shared
                .spawn(outbound::run_writer(self.shared.clone(), peer, lane));
        }
    }
}
