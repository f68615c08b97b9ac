//! One client connection: bytes in, frames out.
//!
//! The reader reads the socket in large chunks and cuts complete frames out of its buffer. Each
//! request becomes a task of its own, so many streams of one connection are in flight at once;
//! a semaphore bounds how many. The task runs the request to completion on a service thread
//! (the runtime's workers, `limits.service_threads`, one per core). A one-row read or write
//! whose record is on the device awaits its read through io_uring and yields the thread
//! meanwhile (`hayate_cluster::replica::read_local`); without io_uring every device read
//! blocks its thread, and there are five service threads per core so that some can wait for
//! the device while others serve, as Aerospike's. Either way the request is not handed to
//! another thread: handing every request to the blocking pool cost two thread wake-ups per
//! request, which measured as half the server's CPU (bench/results). With
//! `commit_to_device`, requests go to the blocking pool instead, since a write there waits for
//! its group commit and the pool has threads enough for a full group.
//!
//! Finished responses go to a writer task through a channel; the writer lets the requests that
//! are ready run first, then takes everything queued and sends it in one `write`, so a
//! pipelining driver gets its answers coalesced (one send for many answers, not one each).
//! What waits there, and the request data in flight, are bounded: a connection over its bounds
//! stops being read for a while (see [`limits`]).
//!
//! A frame header that cannot be trusted (unknown version, a body over the limit, a response
//! bit) is answered with a protocol ERROR and the connection is closed, since the byte stream is
//! no longer known to be aligned on frames. A body that does not decode is answered with an
//! ERROR on its stream and the connection keeps going: the length in the header was honoured.
//!
//! Protocol v5 wraps frames in checksummed segments once STARTUP is answered
//! ([`hayate_cql::segment`]). The reader then cuts segments out of the socket bytes and their
//! payloads into a second buffer, from which frames are cut exactly as before. A segment whose
//! checksum fails closes the connection with a log line: nothing after it can be trusted to be
//! aligned, and Cassandra does the same.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use hayate_cql::error::{ErrorBody, WireError};
use hayate_cql::frame::{
    FrameError, FrameHeader, HEADER_BYTES, PROTOCOL_BODY_MAX_BYTES, PROTOCOL_V4, PROTOCOL_VERSION_MAX,
};
use hayate_cql::response::Response;
use hayate_cql::segment::SegmentCodec;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

use crate::metrics::PauseReason;
use crate::node::Node;
use crate::requests::{self, Session};

pub mod limits;
pub mod registry;
pub mod tls;

use limits::{Backlog, RequestData, ResponseSender};
use tls::{Accepted, Tls};

/// How much the reader asks the socket for at once.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// The writer stops gathering queued responses into one write past this size.
const WRITE_COALESCE_MAX_BYTES: usize = 256 << 10;

/// How long a closing connection's last responses may take to reach a client.
const CLOSE_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What all the node's client connections share.
pub struct Clients {
    /// The allowance for request data in flight (`limits.max_request_data_in_flight*`).
    pub request_data: Arc<RequestData>,
    /// `None` when the port speaks plain CQL only.
    pub tls: Option<Tls>,
}

impl Clients {
    pub fn new(node: &Node, tls: Option<Tls>) -> Clients {
        let limits = &node.config.limits;
        Clients {
            request_data: Arc::new(RequestData::new(
                limits.max_request_data_in_flight_bytes.0,
                limits.max_request_data_in_flight_per_ip_bytes.0,
            )),
            tls,
        }
    }
}

/// Serves one connection until the client closes it or breaks the protocol.
pub async fn serve(node: Arc<Node>, clients: Arc<Clients>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let stream = match &clients.tls {
        None => Accepted::Plain(stream),
        Some(tls) => match tls.accept(stream, peer).await {
            Some(accepted) => accepted,
            None => return,
        },
    };
    match stream {
        Accepted::Plain(stream) => {
            let (reader, writer) = stream.into_split();
            serve_stream(node, &clients, reader, writer, peer, None).await;
        }
        Accepted::Tls(stream) => {
            let info = tls::session_info(stream.get_ref().1);
            // A TLS session has one state for both directions, so its halves share a lock.
            let (reader, writer) = tokio::io::split(stream);
            serve_stream(node, &clients, reader, writer, peer, Some(info)).await;
        }
    }
}

/// Serves one connection over any byte stream (plain TCP, or TLS on top of it).
async fn serve_stream<R, W>(
    node: Arc<Node>,
    clients: &Clients,
    mut reader: R,
    mut writer: W,
    peer: SocketAddr,
    tls: Option<requests::TlsInfo>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    node.metrics.connection_opened();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let backlog = Arc::new(Backlog::default());

    let written = backlog.clone();
    let write_task = tokio::spawn(async move {
        let mut out = Vec::with_capacity(WRITE_COALESCE_MAX_BYTES);
        while let Some(first) = rx.recv().await {
            out.clear();
            out.extend_from_slice(&first);
            let mut frames = 1;
            // Requests of this connection that are ready to run go first, so their answers
            // leave in the same send: the first answer's wake-up would otherwise run this task
            // at once and pay a send (and the client a wake-up) per answer.
            tokio::task::yield_now().await;
            while out.len() < WRITE_COALESCE_MAX_BYTES {
                match rx.try_recv() {
                    Ok(more) => {
                        out.extend_from_slice(&more);
                        frames += 1;
                    }
                    Err(_) => break,
                }
            }
            // TLS keeps what the socket did not take in its own buffer until a flush (a no-op
            // on plain TCP), and the client waits for those bytes.
            if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
                break;
            }
            written.written(out.len(), frames);
        }
        // The reader may be waiting for this writer to make room: it must learn it never will.
        written.close();
        let _ = writer.shutdown().await;
    });

    let session = Arc::new(Session::new(
        node.clone(),
        peer,
        tls,
        ResponseSender::new(tx, backlog.clone()),
    ));
    // Listed in system_views.clients until this function returns.
    let _listed = node.connected.register(&session);
    let request_data = Arc::new(clients.request_data.connection(peer.ip()));
    let max_in_flight = node.config.limits.max_requests_in_flight_per_connection;
    let in_flight = Arc::new(Semaphore::new(max_in_flight as usize));
    let max_frame_bytes = usize::try_from(node.config.limits.max_frame_bytes.0).unwrap_or(usize::MAX);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    // v5: the frames cut out of segments' payloads, and the codec once segments started.
    let mut frames = BytesMut::new();
    let mut segments: Option<SegmentCodec> = None;
    let waits_for_device_writes = node.config.storage.commit_to_device;
    // A frame refused as too big: its body is discarded as it arrives, and it is answered
    // once it has (as Cassandra, after the whole frame: a driver still writing it does not
    // expect an answer sooner).
    let mut skipping: Option<Skipping> = None;

    'read: loop {
        if let Some(codec) = segments {
            if let Err(e) = unwrap_segments(codec, &mut buf, &mut frames) {
                refuse_segment(&session, &e);
                break 'read;
            }
        }
        loop {
            if let Some(refused) = &mut skipping {
                let src = if segments.is_some() { &mut frames } else { &mut buf };
                let n = refused.body_left.min(src.len());
                src.advance(n);
                refused.body_left -= n;
                if refused.body_left > 0 {
                    break;
                }
                let Skipping { stream, message, .. } = skipping.take().expect("just matched");
                session.send(
                    stream,
                    &Response::Error(WireError::new(ErrorBody::Invalid, message)),
                );
            }
            if (if segments.is_some() {
                frames.len()
            } else {
                buf.len()
            }) < HEADER_BYTES
            {
                break;
            }
            if backlog.is_full() {
                // The client is not reading its responses: read no more of its requests until
                // it does, and let TCP's flow control hold the rest of them in its own buffers.
                node.metrics.connection_paused(PauseReason::ResponsesUnread);
                let room = backlog.wait_for_room().await;
                node.metrics.connection_resumed();
                if !room {
                    break 'read;
                }
            }
            let src = if segments.is_some() { &mut frames } else { &mut buf };
            let mut head = [0u8; HEADER_BYTES];
            head.copy_from_slice(&src[..HEADER_BYTES]);
            let decoded = match FrameHeader::decode_request(&head) {
                Ok(h) if h.body_length_bytes as usize > max_frame_bytes => Err(FrameError::BodyTooLarge {
                    body_length_bytes: h.body_length_bytes,
                    stream: h.stream,
                }),
                other => other,
            };
            let header = match decoded {
                Ok(h) => h,
                Err(FrameError::BodyTooLarge {
                    body_length_bytes,
                    stream,
                }) if body_length_bytes <= PROTOCOL_BODY_MAX_BYTES => {
                    // Within what the protocol allows: as Cassandra 5 does, discard the body as
                    // it arrives, then answer on its stream (with Invalid, as it does) and serve
                    // the next frame.
                    let message = too_big(body_length_bytes, max_frame_bytes);
                    tracing::debug!(peer = %session.peer, "{message}");
                    src.advance(HEADER_BYTES);
                    // Never 0 bytes left: the body is larger than the limit.
                    skipping = Some(Skipping {
                        body_left: body_length_bytes as usize,
                        stream,
                        message,
                    });
                    continue;
                }
                Err(e) => {
                    refuse(&session, &e, max_frame_bytes);
                    break 'read;
                }
            };
            let frame_bytes = HEADER_BYTES + header.body_length_bytes as usize;
            if src.len() < frame_bytes {
                src.reserve(frame_bytes - src.len());
                break;
            }
            let mut frame = src.split_to(frame_bytes);
            frame.advance(HEADER_BYTES);
            let body: Bytes = frame.freeze();
            node.metrics.frame_received(frame_bytes as u64);
            if let Err(message) = session.check_version(&header) {
                // The frame was whole and is skipped; the connection goes on, as in Cassandra.
                session.send(header.stream, &Response::Error(WireError::protocol(message)));
                continue;
            }

            if requests::runs_inline(&header) {
                // Connection-level requests (STARTUP, OPTIONS, REGISTER, AUTH_RESPONSE) change
                // the session's state, so they run in order, before the next frame is read. On
                // the blocking pool: a password check hashes for tens of milliseconds.
                let session = session.clone();
                let runtime = tokio::runtime::Handle::current();
                let handling = session.clone();
                let done =
                    tokio::task::spawn_blocking(move || runtime.block_on(handling.handle(header, body)))
                        .await;
                if done.is_err() {
                    break 'read;
                }
                if segments.is_none() {
                    if let Some(codec) = session.segment_codec() {
                        // STARTUP was answered on a v5 connection: whatever follows, already
                        // read or not, comes in segments.
                        segments = Some(codec);
                        if let Err(e) = unwrap_segments(codec, &mut buf, &mut frames) {
                            refuse_segment(&session, &e);
                            break 'read;
                        }
                    }
                }
                continue;
            }
            let Ok(permit) = in_flight.clone().acquire_owned().await else {
                break 'read;
            };
            let request_bytes = u64::from(header.body_length_bytes);
            let (held, over_limit) = match request_data.try_take(request_bytes) {
                Ok(held) => (held, false),
                Err(overload) if session.throws_on_overload() => {
                    node.metrics.request_overloaded();
                    tracing::debug!(%peer, "{overload}");
                    session.send(
                        header.stream,
                        &Response::Error(WireError::new(ErrorBody::Overloaded, overload.to_string())),
                    );
                    continue;
                }
                Err(_) => (request_data.take(request_bytes), true),
            };
            let session = session.clone();
            if waits_for_device_writes {
                let runtime = tokio::runtime::Handle::current();
                tokio::task::spawn_blocking(move || {
                    runtime.block_on(session.handle(header, body));
                    drop((held, permit));
                });
            } else {
                // Boxed before it is spawned: a request's future is several kilobytes (5.9 KB
                // in a release build), and tokio moves the future it is given from call to
                // call on its way into the task, and again when the task ends. A box moves as
                // a pointer.
                let fut = async move {
                    session.handle(header, body).await;
                    drop((held, permit));
                };
                tokio::spawn(Box::pin(fut));
            }
            if over_limit {
                // Cassandra's backpressure for a protocol v4 client: the request runs, and the
                // connection is read again once its requests are done or the node has room.
                node.metrics.connection_paused(PauseReason::RequestData);
                request_data.wait_for_room().await;
                node.metrics.connection_resumed();
            }
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) => {
                if !buf.is_empty() {
                    tracing::debug!(%peer, bytes = buf.len(), "client closed the connection mid-frame");
                }
                break;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "connection read failed");
                break;
            }
        }
    }
    // Let requests still running finish and queue their answers, then close.
    let _ = in_flight.acquire_many(max_in_flight).await;
    session.close();
    node.metrics.connection_closed();
    // A client that stopped reading would hold the writer, and with it this connection's slot,
    // for ever: it gets a while to read what is left, then the connection is dropped.
    let abort = write_task.abort_handle();
    if tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, write_task)
        .await
        .is_err()
    {
        tracing::debug!(%peer, "dropping a closed connection whose client does not read");
        abort.abort();
    }
}

/// Moves every whole segment at the front of `buf` into `frames` as its payload. The frames
/// buffer is bounded by the frame-size check that runs on every header cut out of it: a frame
/// is cut as soon as it is whole, and a header claiming more than the limit closes the
/// connection, so `frames` never holds more than one frame's worth plus a segment.
fn unwrap_segments(
    codec: SegmentCodec,
    buf: &mut BytesMut,
    frames: &mut BytesMut,
) -> Result<(), hayate_cql::segment::SegmentError> {
    while let Some((segment, used)) = codec.decode(buf)? {
        buf.advance(used);
        frames.extend_from_slice(&segment.payload);
    }
    Ok(())
}

/// Answers a segment whose checksum failed with a protocol error on stream 0, as Cassandra
/// does, and logs it; the caller then closes, since the stream can no longer be trusted.
fn refuse_segment(session: &Session, e: &hayate_cql::segment::SegmentError) {
    tracing::warn!(peer = %session.peer, "closing connection: {e}");
    session.send(0, &Response::Error(WireError::protocol(e.to_string())));
}

/// A request frame refused as too big whose body is still arriving.
struct Skipping {
    body_left: usize,
    stream: i16,
    message: String,
}

fn too_big(body_length_bytes: u32, max_frame_bytes: usize) -> String {
    format!(
        "Request is too big: length {body_length_bytes} exceeds maximum allowed length \
         {max_frame_bytes}. Send smaller requests (smaller batches or values)"
    )
}

/// Answers a header we cannot trust with a protocol error; the caller then closes.
fn refuse(session: &Session, e: &FrameError, max_frame_bytes: usize) {
    let message = match e {
        FrameError::BodyTooLarge {
            body_length_bytes, ..
        } => too_big(*body_length_bytes, max_frame_bytes),
        other => other.to_string(),
    };
    tracing::debug!(peer = %session.peer, "closing connection: {message}");
    // A probe above the newest version is answered in the newest, as Cassandra does; one below
    // the oldest in the oldest.
    let version = match e {
        FrameError::UnsupportedVersion { version, .. } => (*version).clamp(PROTOCOL_V4, PROTOCOL_VERSION_MAX),
        _ => PROTOCOL_V4,
    };
    session.send_refusal(
        e.stream(),
        version,
        &Response::Error(WireError::protocol(message)),
    );
}
