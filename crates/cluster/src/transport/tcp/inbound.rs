//! The receiving side: the listener, the acceptor's half of the handshake, and the reader that
//! cuts frames out of large socket reads and hands each message to the inbox.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;

use super::stats;
use super::{stopped, Shared, INBOUND_CONNECTIONS_MAX, READ_CHUNK_BYTES};
use crate::message::handshake::{HandshakeError, Hello, HelloReply, HELLO_FIXED_BYTES};
use crate::message::{self, DecodeError, Lane};
use crate::node::HostId;

/// How long the listener pauses after a failed accept (out of file descriptors, say), so that
/// it does not spin.
const ACCEPT_RETRY_MS: u64 = 100;

pub(super) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut stop = shared.stopping();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => break,
        };
        match accepted {
            Ok((stream, remote)) => {
                let open = shared
                    .counters
                    .connections_inbound
                    .load(std::sync::atomic::Ordering::Relaxed);
                if open >= INBOUND_CONNECTIONS_MAX as u64 {
                    tracing::warn!(%remote, open, "too many inbound internode connections; closing this one");
                    continue;
                }
                stats::add(&shared.counters.connections_inbound, 1);
                shared.spawn(serve(shared.clone(), stream, remote));
            }
            Err(e) => {
                tracing::warn!(address = %shared.local_addr, error = %e, "internode accept failed");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)) => {}
                    _ = stopped(&mut stop) => break,
                }
            }
        }
    }
}

/// Counts an inbound connection as closed however its task ends.
struct InboundOpen<'a>(&'a Shared);

impl Drop for InboundOpen<'_> {
    fn drop(&mut self) {
        stats::sub(&self.0.counters.connections_inbound, 1);
    }
}

async fn serve(shared: Arc<Shared>, mut stream: TcpStream, remote: SocketAddr) {
    let _open = InboundOpen(&shared);
    let mut stop = shared.stopping();
    let handshake_timeout_ms = shared.config.handshake_timeout_ms;
    let shaken = tokio::select! {
        shaken = timeout(Duration::from_millis(handshake_timeout_ms), handshake(&shared, &mut stream)) => shaken,
        _ = stopped(&mut stop) => return,
    };
    let hello = match shaken {
        Ok(Ok(hello)) => hello,
        Ok(Err(e)) => {
            stats::add(&shared.counters.handshakes_refused, 1);
            match &e {
                // Two clusters on one machine, or a misconfigured seed: worth a warning.
                AcceptError::Refused(e @ HandshakeError::OtherCluster { .. })
                | AcceptError::Refused(e @ HandshakeError::NoCommonVersion { .. }) => {
                    tracing::warn!(%remote, error = %e, "refusing internode connection")
                }
                e => tracing::info!(%remote, error = %e, "closing internode connection at the handshake"),
            }
            return;
        }
        Err(_) => {
            stats::add(&shared.counters.handshakes_refused, 1);
            tracing::info!(%remote, timeout_ms = handshake_timeout_ms, "no internode handshake in time; closing");
            return;
        }
    };
    tracing::debug!(%remote, peer = %hello.sender, lane = %hello.lane, "internode connection accepted");
    read_frames(&shared, stream, remote, hello.sender, hello.lane, &mut stop).await;
}

#[derive(Debug)]
enum AcceptError {
    Io(io::Error),
    Refused(HandshakeError),
}

impl fmt::Display for AcceptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcceptError::Io(e) => write!(f, "{e}"),
            AcceptError::Refused(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for AcceptError {
    fn from(e: io::Error) -> AcceptError {
        AcceptError::Io(e)
    }
}

impl From<HandshakeError> for AcceptError {
    fn from(e: HandshakeError) -> AcceptError {
        AcceptError::Refused(e)
    }
}

/// The acceptor's half: read the hello, answer with the version to use or a refusal.
async fn handshake(shared: &Shared, stream: &mut TcpStream) -> Result<Hello, AcceptError> {
    let mut fixed = [0u8; HELLO_FIXED_BYTES];
    stream.read_exact(&mut fixed).await?;
    // A caller without our magic is not a hayate node: it gets no answer.
    let head = Hello::decode_head(&fixed)?;
    // Bounded by CLUSTER_NAME_BYTES_MAX in `decode_head`.
    let mut name = vec![0u8; head.cluster_name_bytes];
    stream.read_exact(&mut name).await?;
    let hello = Hello::from_parts(head, &name)?;
    match hello.accept(&shared.config.cluster_name) {
        Ok(reply) => {
            stream.write_all(&reply.encode()).await?;
            Ok(hello)
        }
        Err(e) => {
            let _ = stream.write_all(&HelloReply::REFUSED.encode()).await;
            Err(AcceptError::Refused(e))
        }
    }
}

/// Reads frames until the peer closes, a frame is bad, or the transport stops.
async fn read_frames(
    shared: &Shared,
    mut stream: TcpStream,
    remote: SocketAddr,
    from: HostId,
    lane: Lane,
    stop: &mut watch::Receiver<bool>,
) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        let mut messages = 0u64;
        let mut bytes = 0u64;
        let mut bad: Option<DecodeError> = None;
        loop {
            let frame_bytes = match message::frame_bytes(&buf) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            };
            if buf.len() < frame_bytes {
                // The length is within FRAME_BYTES_MAX: `frame_bytes` checked it.
                buf.reserve(frame_bytes - buf.len());
                break;
            }
            let decoded = message::decode(&buf[..frame_bytes]);
            buf.advance(frame_bytes);
            match decoded {
                Ok(m) => {
                    messages += 1;
                    bytes += frame_bytes as u64;
                    shared.inbox.deliver(from, m);
                }
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        if messages > 0 {
            count_received(shared, from, messages, bytes);
        }
        if let Some(e) = bad {
            stats::add(&shared.counters.frames_rejected, 1);
            tracing::warn!(peer = %from, %remote, %lane, error = %e,
                "closing internode connection: a frame cannot be trusted");
            return;
        }
        // A large frame's room is not kept for the small ones after it.
        if buf.is_empty() && buf.capacity() > 4 * READ_CHUNK_BYTES {
            buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        let read = tokio::select! {
            read = stream.read_buf(&mut buf) => read,
            _ = stopped(stop) => return,
        };
        match read {
            Ok(0) => {
                if !buf.is_empty() {
                    tracing::debug!(peer = %from, %remote, bytes = buf.len(), "peer closed mid-frame");
                }
                return;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(peer = %from, %remote, error = %e, "internode read failed");
                return;
            }
        }
    }
}

/// Counts received messages, in total and for the peer if the transport knows it (it may not
/// yet: the other side can learn of us first).
fn count_received(shared: &Shared, from: HostId, messages: u64, bytes: u64) {
    stats::add(&shared.counters.messages_received, messages);
    stats::add(&shared.counters.bytes_received, bytes);
    let peers = shared.peers.read().expect("peer map lock poisoned");
    if let Some(peer) = peers.get(&from) {
        peer.count_received(messages, bytes);
    }
}
