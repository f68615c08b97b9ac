//! The sending side: a bounded queue per peer and lane, and the writer task that owns that
//! lane's connection.
//!
//! The writer starts on the first send to a lane and lives until the peer is removed or the
//! transport shuts down. It connects only when something is queued, so an idle peer costs no
//! reconnect attempts, and while it waits for messages it also watches its socket for the
//! peer closing it, so a peer that restarted is noticed before the next batch is lost in a
//! dead connection.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::time::{timeout, Instant};

use super::stats::{self, Counters, PeerCounters};
use super::{stopped, PeerStats, Shared, WRITE_COALESCE_BYTES_MAX};
use crate::message::handshake::{HandshakeError, Hello, HelloReply, HELLO_REPLY_BYTES};
use crate::message::{self, Lane, Message, VERSION};
use crate::node::HostId;

/// One peer as the sending side knows it: where it is and a queue per lane.
pub(super) struct Peer {
    host: HostId,
    counters: PeerCounters,
    lanes: [LaneQueue; 2],
}

struct LaneQueue {
    state: Mutex<QueueState>,
    /// Wakes the lane's writer: a message arrived, the address changed or the peer is gone.
    wake: Notify,
    /// Ends a reconnect backoff early: the failure detector heard from the peer again.
    retry_now: Notify,
}

struct QueueState {
    messages: VecDeque<Queued>,
    /// Sum of the queued messages' size hints.
    bytes: usize,
    address: SocketAddr,
    removed: bool,
    writer_running: bool,
}

struct Queued {
    message: Message,
    size_hint_bytes: usize,
    queued_at: Instant,
}

fn lane_index(lane: Lane) -> usize {
    match lane {
        Lane::Requests => 0,
        Lane::Bulk => 1,
    }
}

impl Peer {
    pub fn new(host: HostId, address: SocketAddr) -> Peer {
        let lane = || LaneQueue {
            state: Mutex::new(QueueState {
                messages: VecDeque::new(),
                bytes: 0,
                address,
                removed: false,
                writer_running: false,
            }),
            wake: Notify::new(),
            retry_now: Notify::new(),
        };
        Peer {
            host,
            counters: PeerCounters::default(),
            lanes: [lane(), lane()],
        }
    }

    fn lane(&self, lane: Lane) -> &LaneQueue {
        &self.lanes[lane_index(lane)]
    }

    /// Queues a message; returns true if the caller must start the lane's writer.
    pub fn enqueue(&self, shared: &Shared, lane: Lane, message: Message) -> bool {
        let q = self.lane(lane);
        let size_hint_bytes = message.size_hint_bytes();
        let mut s = q.state.lock().expect("queue lock poisoned");
        if s.removed {
            drop(s);
            self.dropped(&shared.counters.dropped_peer_removed, 1);
            return false;
        }
        let config = &shared.config;
        let full = |s: &QueueState| {
            s.messages.len() >= config.queue_messages_max
                || s.bytes + size_hint_bytes > config.queue_bytes_max
        };
        if full(&s) {
            // A queue full of messages nobody waits for any more should not refuse new ones.
            let expired = s.drop_expired(config.queued_message_expiry_ms);
            if expired > 0 {
                self.dropped(&shared.counters.dropped_expired, expired);
            }
            if full(&s) {
                drop(s);
                self.dropped(&shared.counters.dropped_queue_full, 1);
                return false;
            }
        }
        s.bytes += size_hint_bytes;
        s.messages.push_back(Queued {
            message,
            size_hint_bytes,
            queued_at: Instant::now(),
        });
        let start_writer = !s.writer_running;
        s.writer_running = true;
        drop(s);
        q.wake.notify_one();
        start_writer
    }

    /// The peer is known to be up again: a writer waiting out a reconnect backoff tries now.
    pub fn retry_now(&self) {
        for q in &self.lanes {
            q.retry_now.notify_one();
        }
    }

    pub fn set_address(&self, address: SocketAddr) {
        for q in &self.lanes {
            let mut s = q.state.lock().expect("queue lock poisoned");
            if s.address != address {
                s.address = address;
                drop(s);
                q.wake.notify_one();
            }
        }
    }

    /// The peer is forgotten: drop what is queued and tell the writers to close and end.
    pub fn remove(&self, counters: &Counters) {
        for q in &self.lanes {
            let mut s = q.state.lock().expect("queue lock poisoned");
            s.removed = true;
            let dropped = s.messages.len() as u64;
            s.messages.clear();
            s.bytes = 0;
            drop(s);
            self.dropped(&counters.dropped_peer_removed, dropped);
            q.wake.notify_one();
        }
    }

    pub fn stats(&self) -> PeerStats {
        let queued = self
            .lanes
            .iter()
            .map(|q| q.state.lock().expect("queue lock poisoned").messages.len() as u64)
            .sum();
        self.counters.snapshot(queued)
    }

    pub fn count_received(&self, messages: u64, bytes: u64) {
        stats::add(&self.counters.messages_received, messages);
        stats::add(&self.counters.bytes_received, bytes);
    }

    fn dropped(&self, total: &std::sync::atomic::AtomicU64, n: u64) {
        stats::add(total, n);
        stats::add(&self.counters.messages_dropped, n);
    }
}

impl QueueState {
    /// Drops messages from the front that waited longer than `expiry_ms`; returns how many.
    fn drop_expired(&mut self, expiry_ms: u64) -> u64 {
        let now = Instant::now();
        let mut dropped = 0;
        while let Some(front) = self.messages.front() {
            if now.duration_since(front.queued_at) < Duration::from_millis(expiry_ms) {
                break;
            }
            self.bytes -= front.size_hint_bytes;
            self.messages.pop_front();
            dropped += 1;
        }
        dropped
    }
}

/// Why a writer's connection ended.
enum Closed {
    /// The peer was removed or the transport is shutting down: the writer ends.
    Stop,
    /// The connection broke, the peer closed it or its address changed: connect again.
    Reconnect,
}

/// The writer of one peer's lane.
pub(super) async fn run_writer(shared: Arc<Shared>, peer: Arc<Peer>, lane: Lane) {
    let mut stop = shared.stopping();
    let q = peer.lane(lane);
    let config = &shared.config;
    let mut backoff_ms = config.reconnect_backoff_min_ms;
    let mut connected_before = false;
    let mut failures_in_a_row = 0u64;
    let mut batch = Vec::new();
    loop {
        let Some(address) = wait_for_work(q, &mut stop).await else {
            break;
        };
        let attempt = tokio::select! {
            attempt = connect(&shared, address, lane) => attempt,
            _ = stopped(&mut stop) => break,
        };
        let (stream, version) = match attempt {
            Ok(connection) => connection,
            Err(e) => {
                stats::add(&shared.counters.connect_failures, 1);
                failures_in_a_row += 1;
                // Once per outage at info; every retry after it only at debug, so a node that
                // is down for an hour does not fill the log.
                if failures_in_a_row == 1 {
                    if matches!(e, ConnectError::Handshake(_)) {
                        // Another cluster name or release: a misconfiguration, not an outage.
                        tracing::warn!(peer = %peer.host, %address, %lane, error = %e,
                            "the peer refused this node's internode connection; retrying with backoff");
                    } else {
                        tracing::info!(peer = %peer.host, %address, %lane, error = %e,
                            "cannot reach peer; retrying with backoff");
                    }
                } else {
                    tracing::debug!(peer = %peer.host, %address, %lane, error = %e, "reconnect failed");
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(backoff_ms)) => {
                        backoff_ms = backoff_ms.saturating_mul(2).min(config.reconnect_backoff_max_ms);
                    }
                    _ = q.retry_now.notified() => backoff_ms = config.reconnect_backoff_min_ms,
                    _ = stopped(&mut stop) => break,
                }
                continue;
            }
        };
        if failures_in_a_row > 0 {
            tracing::info!(peer = %peer.host, %address, %lane, failures = failures_in_a_row, "peer reachable again");
        }
        failures_in_a_row = 0;
        backoff_ms = config.reconnect_backoff_min_ms;
        stats::add(&shared.counters.connects, 1);
        if connected_before {
            stats::add(&shared.counters.reconnects, 1);
        }
        connected_before = true;
        stats::add(&shared.counters.connections_outbound, 1);
        let closed = pump(&shared, &peer, q, stream, version, address, &mut batch, &mut stop).await;
        stats::sub(&shared.counters.connections_outbound, 1);
        match closed {
            Closed::Stop => break,
            Closed::Reconnect => continue,
        }
    }
    q.state.lock().expect("queue lock poisoned").writer_running = false;
}

/// Waits until the lane has something to send; returns where to send it, or `None` when the
/// writer should end.
async fn wait_for_work(q: &LaneQueue, stop: &mut watch::Receiver<bool>) -> Option<SocketAddr> {
    loop {
        {
            let s = q.state.lock().expect("queue lock poisoned");
            if s.removed {
                return None;
            }
            if !s.messages.is_empty() {
                return Some(s.address);
            }
        }
        // A wake-up sent between the check above and this wait is kept by `Notify` as a
        // permit, so none is lost.
        tokio::select! {
            _ = q.wake.notified() => {}
            _ = stopped(stop) => return None,
        }
    }
}

/// Writes batches on one connection until it ends.
#[expect(clippy::too_many_arguments, reason = "one connection's state, passed once")]
async fn pump(
    shared: &Shared,
    peer: &Peer,
    q: &LaneQueue,
    stream: TcpStream,
    version: u8,
    address: SocketAddr,
    batch: &mut Vec<u8>,
    stop: &mut watch::Receiver<bool>,
) -> Closed {
    let (mut reader, mut writer) = stream.into_split();
    let mut taken: Vec<Queued> = Vec::new();
    let mut probe = [0u8; 1];
    let write_timeout = Duration::from_millis(shared.config.write_timeout_ms);
    loop {
        // Take a batch's worth under the lock; encode it outside, so senders never wait for
        // the encoder.
        {
            let mut s = q.state.lock().expect("queue lock poisoned");
            if s.removed {
                return Closed::Stop;
            }
            if s.address != address {
                tracing::debug!(peer = %peer.host, old = %address, new = %s.address, "peer moved; reconnecting");
                return Closed::Reconnect;
            }
            let expired = s.drop_expired(shared.config.queued_message_expiry_ms);
            if expired > 0 {
                peer.dropped(&shared.counters.dropped_expired, expired);
            }
            let mut hinted = 0;
            while hinted < WRITE_COALESCE_BYTES_MAX {
                let Some(queued) = s.messages.pop_front() else {
                    break;
                };
                s.bytes -= queued.size_hint_bytes;
                hinted += queued.size_hint_bytes;
                taken.push(queued);
            }
        }
        if taken.is_empty() {
            tokio::select! {
                _ = q.wake.notified() => continue,
                read = reader.read(&mut probe) => {
                    // The acceptor never writes after the handshake: this is the peer closing
                    // (or breaking the protocol, which ends the connection just the same).
                    match read {
                        Ok(0) => tracing::debug!(peer = %peer.host, %address, "peer closed the connection"),
                        Ok(_) => tracing::warn!(peer = %peer.host, %address, "peer wrote on an outbound connection; closing it"),
                        Err(e) => tracing::debug!(peer = %peer.host, %address, error = %e, "connection failed"),
                    }
                    return Closed::Reconnect;
                }
                _ = stopped(stop) => return Closed::Stop,
            }
        }

        batch.clear();
        let mut messages = 0u64;
        for queued in taken.drain(..) {
            match message::encode(&queued.message, version, batch) {
                Ok(_) => messages += 1,
                Err(e) => {
                    peer.dropped(&shared.counters.dropped_unencodable, 1);
                    tracing::warn!(peer = %peer.host, kind = ?queued.message.kind(), id = queued.message.id(),
                        error = %e, "dropping a message that cannot be encoded");
                }
            }
        }
        if batch.is_empty() {
            continue;
        }
        let written = tokio::select! {
            written = timeout(write_timeout, writer.write_all(batch)) => written,
            _ = stopped(stop) => return Closed::Stop,
        };
        match written {
            Ok(Ok(())) => {
                let counters = &shared.counters;
                stats::add(&counters.messages_sent, messages);
                stats::add(&counters.bytes_sent, batch.len() as u64);
                stats::add(&counters.batches_written, 1);
                stats::add(&peer.counters.messages_sent, messages);
                stats::add(&peer.counters.bytes_sent, batch.len() as u64);
            }
            failed => {
                peer.dropped(&shared.counters.dropped_in_failed_write, messages);
                let error = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no progress in {} ms", shared.config.write_timeout_ms),
                };
                tracing::info!(peer = %peer.host, %address, messages, %error,
                    "write to peer failed; reconnecting (the batch may be lost)");
                return Closed::Reconnect;
            }
        }
        // A large message's buffer is not kept for the small ones after it.
        if batch.capacity() > 4 * WRITE_COALESCE_BYTES_MAX {
            *batch = Vec::new();
        }
    }
}

/// Why an outbound connection could not be made.
#[derive(Debug)]
enum ConnectError {
    Io(io::Error),
    Timeout { phase: &'static str, timeout_ms: u64 },
    Handshake(HandshakeError),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Io(e) => write!(f, "{e}"),
            ConnectError::Timeout { phase, timeout_ms } => write!(f, "no {phase} within {timeout_ms} ms"),
            ConnectError::Handshake(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> ConnectError {
        ConnectError::Io(e)
    }
}

/// Opens a connection from the node's own address and shakes hands; returns the stream and the
/// frame version agreed.
async fn connect(shared: &Shared, address: SocketAddr, lane: Lane) -> Result<(TcpStream, u8), ConnectError> {
    let config = &shared.config;
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    let local_ip = config.listen.ip();
    if local_ip.is_ipv4() == address.is_ipv4() && !local_ip.is_unspecified() {
        socket.bind(SocketAddr::new(local_ip, 0))?;
    }
    let mut stream = timeout(
        Duration::from_millis(config.connect_timeout_ms),
        socket.connect(address),
    )
    .await
    .map_err(|_| ConnectError::Timeout {
        phase: "connection",
        timeout_ms: config.connect_timeout_ms,
    })??;
    stream.set_nodelay(true)?;
    let mut hello = Vec::new();
    Hello {
        max_version: VERSION,
        lane,
        sender: config.local,
        cluster_name: config.cluster_name.clone(),
    }
    .encode(&mut hello);
    let mut reply = [0u8; HELLO_REPLY_BYTES];
    timeout(Duration::from_millis(config.handshake_timeout_ms), async {
        stream.write_all(&hello).await?;
        stream.read_exact(&mut reply).await
    })
    .await
    .map_err(|_| ConnectError::Timeout {
        phase: "handshake reply",
        timeout_ms: config.handshake_timeout_ms,
    })??;
    let version = HelloReply::decode(&reply).map_err(ConnectError::Handshake)?;
    Ok((stream, version))
}
