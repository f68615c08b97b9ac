//! One file per request opcode: what the node does with each message a client sends.
//!
//! [`Session`] holds a connection's state (started, authenticated as whom, compression, the
//! keyspace of USE, event registrations). [`Session::handle`] decodes one frame, checks that
//! the message is allowed in the session's state (nothing but STARTUP, OPTIONS and the
//! authentication exchange before the session is ready), runs it, and queues the response.

mod auth_response;
mod batch;
mod execute;
mod options;
mod prepare;
mod query;
mod register;
mod startup;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use hayate_cql::compression::{compress_lz4, decompress_lz4};
use hayate_cql::error::WireError;
use hayate_cql::frame::{FrameFlags, FrameHeader, HEADER_BYTES};
use hayate_cql::opcode::Opcode;
use hayate_cql::request::{Request, RequestFrame};
use hayate_cql::response::Response;
use tokio::sync::mpsc;

use hayate_cql::response::result::ResultBody;
use hayate_cql::statement::Statement;

use crate::auth::{AuthenticatedRole, SaslExchange};
use crate::error::{invalid, QueryResult};
use crate::node::Node;
use crate::query::{modify, select};
use crate::system::SystemTables;

/// Responses smaller than this are sent uncompressed even when LZ4 was negotiated: the flag
/// is per frame, and compressing a few bytes costs more than it saves.
const COMPRESS_MIN_BYTES: usize = 512;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before STARTUP.
    New,
    /// STARTUP answered with AUTHENTICATE; waiting for credentials.
    Authenticating,
    Ready,
}

struct State {
    phase: Phase,
    role: Option<AuthenticatedRole>,
    exchange: Option<SaslExchange>,
    compression: bool,
    keyspace: Option<String>,
    event_task: Option<tokio::task::JoinHandle<()>>,
}

pub struct Session {
    pub node: Arc<Node>,
    pub peer: SocketAddr,
    outbox: Outbox,
    state: Mutex<State>,
    runtime: tokio::runtime::Handle,
}

/// Requests that change the session's state, and so run in order on the reader.
pub fn runs_inline(header: &FrameHeader) -> bool {
    matches!(
        header.opcode,
        Opcode::Startup | Opcode::Options | Opcode::Register | Opcode::AuthResponse
    )
}

impl Session {
    pub fn new(node: Arc<Node>, peer: SocketAddr, tx: mpsc::UnboundedSender<Vec<u8>>) -> Session {
        Session {
            node,
            peer,
            outbox: Outbox::new(tx),
            state: Mutex::new(State {
                phase: Phase::New,
                role: None,
                exchange: None,
                compression: false,
                keyspace: None,
                event_task: None,
            }),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("session lock poisoned")
    }

    pub fn keyspace(&self) -> Option<String> {
        self.state().keyspace.clone()
    }

    pub fn set_keyspace(&self, keyspace: String) {
        self.state().keyspace = Some(keyspace);
    }

    pub fn role(&self) -> Option<AuthenticatedRole> {
        self.state().role.clone()
    }

    /// Called once the connection is closing.
    pub fn close(&self) {
        if let Some(task) = self.state().event_task.take() {
            task.abort();
        }
        self.outbox.close();
    }

    /// Queues one response on `stream`.
    pub fn send(&self, stream: i16, response: &Response) {
        let compression = self.state().compression;
        let mut out = Vec::new();
        if let Err(e) = response.encode_frame(stream, &mut out) {
            let error = Response::Error(crate::error::server_error(e.to_string()).to_wire());
            out.clear();
            if error.encode_frame(stream, &mut out).is_err() {
                return;
            }
        }
        if compression && out.len() - HEADER_BYTES >= COMPRESS_MIN_BYTES {
            let mut compressed = Vec::with_capacity(out.len());
            compressed.extend_from_slice(&out[..HEADER_BYTES]);
            compress_lz4(&out[HEADER_BYTES..], &mut compressed);
            let length = (compressed.len() - HEADER_BYTES) as u32;
            compressed[1] |= FrameFlags::COMPRESSION;
            compressed[5..9].copy_from_slice(&length.to_be_bytes());
            out = compressed;
        }
        self.node.metrics.frame_sent(out.len() as u64);
        self.outbox.push(out);
    }

    /// The context a statement runs in.
    pub fn context<'a>(
        &'a self,
        keyspace: Option<&'a str>,
        params: Option<&'a hayate_cql::request::QueryParameters<'a>>,
    ) -> crate::query::Context<'a> {
        crate::query::Context {
            schema: self.node.schema.current(),
            keyspace,
            role: None,
            consistency: params.map_or(hayate_cql::wire::Consistency::One, |p| p.consistency),
            page_size: params.and_then(|p| p.page_size).map(|n| n as usize),
            paging_state: params.and_then(|p| p.paging_state),
            default_timestamp_us: params.and_then(|p| p.default_timestamp_us),
            skip_metadata: params.is_some_and(|p| p.skip_metadata),
            clock: self.node.coordinator.clock().as_ref(),
        }
    }

    /// Runs one statement for QUERY or EXECUTE; `text` is the statement as the client sent it.
    pub async fn run(
        &self,
        statement: &hayate_cql::statement::Statement,
        text: &str,
        binds: &crate::query::Binds<'_>,
        params: &hayate_cql::request::QueryParameters<'_>,
        keyspace: Option<&str>,
    ) -> Response {
        let role = self.role();
        let mut ctx = self.context(keyspace, Some(params));
        ctx.role = role.as_ref();
        match self.execute(&ctx, statement, text, binds).await {
            Ok(body) => {
                if let ResultBody::SetKeyspace(k) = &body {
                    self.set_keyspace(k.clone());
                }
                Response::Result(body)
            }
            Err(e) => Response::Error(e.to_wire()),
        }
    }

    /// Hands a statement to the layer that runs its kind, with the handles that layer needs.
    async fn execute(
        &self,
        ctx: &crate::query::Context<'_>,
        statement: &Statement,
        text: &str,
        binds: &crate::query::Binds<'_>,
    ) -> QueryResult<ResultBody> {
        let node = &*self.node;
        node.authorizer
            .authorize(ctx.role, ctx.keyspace, &ctx.schema, statement)
            .map_err(crate::roles::permission_error)?;
        match statement {
            Statement::Select(s) => {
                let system = SystemTables { cluster: node };
                select::run(ctx, &node.coordinator, &system, s, binds).await
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Batch(_) => {
                modify::run(ctx, &node.coordinator, statement, binds).await
            }
            Statement::Use { keyspace } => {
                if ctx.schema.keyspace(keyspace).is_none() {
                    return Err(invalid(format!("Keyspace '{keyspace}' does not exist")));
                }
                Ok(ResultBody::SetKeyspace(keyspace.clone()))
            }
            Statement::Unsupported { what } => Err(invalid(format!("hayate does not support {what} yet"))),
            Statement::Describe(d) => crate::system::describe::run(ctx, &node.config.cluster_name, d),
            s if crate::admin::is_schema_statement(s) => {
                let body = crate::admin::run(ctx, &*node.schema_log, text).await?;
                if let ResultBody::SchemaChange(change) = &body {
                    node.authorizer
                        .schema_changed(ctx.role, change)
                        .map_err(crate::roles::permission_error)?;
                }
                Ok(body)
            }
            other => crate::roles::run(ctx, &node.authorizer, other),
        }
    }

    /// Decodes and runs one request, and queues its response.
    pub async fn handle(&self, mut header: FrameHeader, body: Bytes) {
        let started = Instant::now();
        let stream = header.stream;
        self.node.metrics.request_opcode(header.opcode);
        let decompressed;
        let body: &[u8] = if header.flags.compression() {
            if !self.state().compression {
                return self.send(
                    stream,
                    &Response::Error(WireError::protocol(
                        "frame is compressed but no compression was negotiated in STARTUP",
                    )),
                );
            }
            match decompress_lz4(&body, self.node.config.limits.max_frame_bytes.0 as usize) {
                Ok(b) => {
                    decompressed = b;
                    header.flags = FrameFlags(header.flags.0 & !FrameFlags::COMPRESSION);
                    header.body_length_bytes = decompressed.len() as u32;
                    &decompressed
                }
                Err(e) => {
                    return self.send(stream, &Response::Error(WireError::protocol(format!("{e}"))));
                }
            }
        } else {
            &body
        };
        let (kind, response) = match Request::decode(&header, body) {
            Ok(frame) => self.dispatch(frame).await,
            Err(e) => (
                "malformed",
                Response::Error(WireError::protocol(format!(
                    "invalid {:?} message: {e}",
                    header.opcode
                ))),
            ),
        };
        let metrics = &self.node.metrics;
        if let Response::Error(e) = &response {
            metrics.record_error(kind, e.code());
        }
        metrics.record(kind, started.elapsed().as_micros() as u64);
        self.send(stream, &response);
    }

    async fn dispatch(&self, frame: RequestFrame<'_>) -> (&'static str, Response) {
        let phase = self.state().phase;
        match (&frame.request, phase) {
            (Request::Options(_), _) => ("options", options::handle()),
            (Request::Startup(s), Phase::New) => ("startup", startup::handle(self, s)),
            (Request::Startup(_), _) => (
                "startup",
                Response::Error(WireError::protocol(
                    "Unexpected message STARTUP, the connection is already started",
                )),
            ),
            (Request::AuthResponse(a), Phase::Authenticating) => ("auth", auth_response::handle(self, a)),
            (_, Phase::New) => (
                "refused",
                Response::Error(WireError::protocol(format!(
                    "Unexpected message {:?}, expecting STARTUP or OPTIONS",
                    frame.request.opcode()
                ))),
            ),
            (_, Phase::Authenticating) => (
                "refused",
                Response::Error(WireError::protocol(format!(
                    "Unexpected message {:?}, expecting SASL_RESPONSE: authenticate first",
                    frame.request.opcode()
                ))),
            ),
            (Request::AuthResponse(_), Phase::Ready) => (
                "auth",
                Response::Error(WireError::protocol(
                    "Unexpected message AUTH_RESPONSE, already authenticated",
                )),
            ),
            (Request::Register(r), Phase::Ready) => ("register", register::handle(self, r)),
            (Request::Query(q), Phase::Ready) => query::handle(self, q).await,
            (Request::Prepare(p), Phase::Ready) => ("prepare", prepare::handle(self, p)),
            (Request::Execute(e), Phase::Ready) => execute::handle(self, e).await,
            (Request::Batch(b), Phase::Ready) => ("batch", batch::handle(self, b).await),
        }
    }
}

/// A place responses can be queued from any thread.
#[derive(Clone)]
pub struct Outbox {
    tx: Arc<Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>>,
}

impl Outbox {
    pub fn new(tx: mpsc::UnboundedSender<Vec<u8>>) -> Outbox {
        Outbox {
            tx: Arc::new(Mutex::new(Some(tx))),
        }
    }

    /// Queues whole frames; silently dropped once the connection is gone.
    pub fn push(&self, frames: Vec<u8>) {
        if let Some(tx) = self.tx.lock().expect("outbox lock poisoned").as_ref() {
            let _ = tx.send(frames);
        }
    }

    pub fn close(&self) {
        self.tx.lock().expect("outbox lock poisoned").take();
    }
}
