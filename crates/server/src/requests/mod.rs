//! One file per request opcode: what the node does with each message a client sends.
//!
//! [`Session`] holds a connection's state (started, authenticated as whom, compression, the
//! keyspace of USE, event registrations). [`Session::handle`] decodes one frame, checks that
//! the message is allowed in the session's state (nothing but STARTUP, OPTIONS and the
//! authentication exchange before the session is ready), runs it, and queues the response.

mod auth_response;
mod batch;
mod execute;
pub mod framing;
mod options;
mod prepare;
mod query;
mod register;
mod startup;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use hayate_cql::compression::{Compression, CompressionError};
use hayate_cql::error::{ErrorBody, WireError};
use hayate_cql::frame::{FrameFlags, FrameHeader, PROTOCOL_V5};
use hayate_cql::opcode::Opcode;
use hayate_cql::request::{Request, RequestFrame};
use hayate_cql::response::Response;

use hayate_cql::response::result::ResultBody;
use hayate_cql::statement::Statement;

use crate::auth::{AuthenticatedRole, SaslExchange};
use crate::connection::limits::ResponseSender;
use crate::error::{invalid, QueryResult};
use crate::node::Node;
use crate::query::{modify, select, Warnings};
use crate::system::SystemTables;
use crate::trace::Trace;

use framing::FrameWriter;
use hayate_cql::segment::SegmentCodec;
use hayate_storage::Clock;

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
    compression: Option<Compression>,
    /// The client asked, in STARTUP, to be answered Overloaded rather than slowed down.
    throw_on_overload: bool,
    keyspace: Option<String>,
    event_task: Option<tokio::task::JoinHandle<()>>,
    /// How responses are written: version, compression, segments.
    writer: FrameWriter,
    /// The version STARTUP fixed for the connection; before it, each OPTIONS or STARTUP is
    /// answered in its own version, as Cassandra does.
    started_version: Option<u8>,
    /// The options of the client's STARTUP (CQL_VERSION, DRIVER_NAME, DRIVER_VERSION, ...).
    startup_options: Vec<(String, String)>,
}

/// The TLS session of a connection, as `system_views.clients` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsInfo {
    /// "TLSv1.3", as Java names it.
    pub protocol: Option<String>,
    pub cipher_suite: Option<String>,
}

/// One connection as `system_views.clients` shows it, read from its session.
#[derive(Debug, Clone)]
pub struct ClientSnapshot {
    pub peer: SocketAddr,
    /// Cassandra's stage: "established" (before STARTUP), "authenticating" or "ready".
    pub stage: &'static str,
    pub username: Option<String>,
    /// Set once logged in: "Password", or "Unauthenticated" under AllowAllAuthenticator.
    pub authentication_mode: Option<&'static str>,
    pub protocol_version: u8,
    pub startup_options: Vec<(String, String)>,
    pub keyspace: Option<String>,
    pub request_count: u64,
    pub tls: Option<TlsInfo>,
}

pub struct Session {
    pub node: Arc<Node>,
    pub peer: SocketAddr,
    /// `None` on a plain connection.
    tls: Option<TlsInfo>,
    /// Requests read from the connection, for `system_views.clients`.
    requests: AtomicU64,
    outbox: Outbox,
    state: Mutex<State>,
    runtime: tokio::runtime::Handle,
}

/// The requests the tracing flag applies to (spec section 2.2); others ignore it.
fn traceable(request: &Request<'_>) -> bool {
    matches!(
        request,
        Request::Query(_) | Request::Prepare(_) | Request::Execute(_) | Request::Batch(_)
    )
}

/// Requests that change the session's state, and so run in order on the reader.
pub fn runs_inline(header: &FrameHeader) -> bool {
    matches!(
        header.opcode,
        Opcode::Startup | Opcode::Options | Opcode::Register | Opcode::AuthResponse
    )
}

impl Session {
    pub fn new(node: Arc<Node>, peer: SocketAddr, tls: Option<TlsInfo>, tx: ResponseSender) -> Session {
        Session {
            node,
            peer,
            tls,
            requests: AtomicU64::new(0),
            outbox: Outbox::new(tx),
            state: Mutex::new(State {
                phase: Phase::New,
                role: None,
                exchange: None,
                compression: None,
                throw_on_overload: false,
                keyspace: None,
                event_task: None,
                writer: FrameWriter::default(),
                started_version: None,
                startup_options: Vec::new(),
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

    /// Whether a request over the node's limits is answered Overloaded (else it slows the
    /// connection down).
    pub fn throws_on_overload(&self) -> bool {
        self.state().throw_on_overload
    }

    pub fn role(&self) -> Option<AuthenticatedRole> {
        self.state().role.clone()
    }

    /// What `system_views.clients` shows of this connection now.
    pub fn client(&self) -> ClientSnapshot {
        let state = self.state();
        let anonymous = state.role.as_ref().is_some_and(AuthenticatedRole::is_anonymous);
        ClientSnapshot {
            peer: self.peer,
            stage: match state.phase {
                Phase::New => "established",
                Phase::Authenticating => "authenticating",
                Phase::Ready => "ready",
            },
            username: state.role.as_ref().map(|r| r.name().to_owned()),
            authentication_mode: state.role.as_ref().map(|_| {
                if anonymous {
                    "Unauthenticated"
                } else {
                    "Password"
                }
            }),
            protocol_version: state.started_version.unwrap_or(state.writer.version),
            startup_options: state.startup_options.clone(),
            keyspace: state.keyspace.clone(),
            request_count: self.requests.load(Relaxed),
            tls: self.tls.clone(),
        }
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
        let writer = self.writer();
        self.send_with(&writer, stream, response, None, &[]);
    }

    /// Queues a response to a frame whose header was refused, in `version` (the refused
    /// header's own, or the nearest one spoken) unless the connection is already started.
    pub fn send_refusal(&self, stream: i16, version: u8, response: &Response) {
        let mut writer = self.writer();
        if self.state().started_version.is_none() {
            writer.version = version;
        }
        self.send_with(&writer, stream, response, None, &[]);
    }

    fn send_with(
        &self,
        writer: &FrameWriter,
        stream: i16,
        response: &Response,
        tracing_id: Option<&[u8; 16]>,
        warnings: &[String],
    ) {
        let out = writer.encode_traced(stream, response, tracing_id, warnings);
        if out.is_empty() {
            return;
        }
        self.node.metrics.frame_sent(out.len() as u64);
        self.outbox.push(out);
    }

    /// How this connection's responses are written now.
    pub fn writer(&self) -> FrameWriter {
        self.state().writer
    }

    /// The segment codec, once a v5 connection has switched to segments: from then on the
    /// reader cuts frames out of segments.
    pub fn segment_codec(&self) -> Option<SegmentCodec> {
        self.state().writer.segments
    }

    /// Checks a frame's version against the connection's. Before STARTUP a client may probe
    /// with any version spoken (its OPTIONS is answered in that version); after it, a frame of
    /// another version is refused with a protocol error, as in Cassandra.
    pub fn check_version(&self, header: &FrameHeader) -> Result<(), String> {
        let mut state = self.state();
        match state.started_version {
            Some(v) if v != header.version => Err(format!(
                "Invalid message version. Got {0}/v{0} but previous messages on this connection \
                 had version {v}/v{v}",
                header.version
            )),
            Some(_) => Ok(()),
            None => {
                state.writer.version = header.version;
                Ok(())
            }
        }
    }

    /// The context a statement runs in; its guardrails' warnings go to `warnings`.
    pub fn context<'a>(
        &'a self,
        keyspace: Option<&'a str>,
        params: Option<&'a hayate_cql::request::QueryParameters<'a>>,
        warnings: &'a Warnings,
    ) -> crate::query::Context<'a> {
        crate::query::Context {
            schema: self.node.schema.current(),
            keyspace,
            role: None,
            consistency: params.map_or(hayate_cql::wire::Consistency::One, |p| p.consistency),
            serial_consistency: params
                .and_then(|p| p.serial_consistency)
                .unwrap_or(hayate_cql::wire::Consistency::Serial),
            page_size: params.and_then(|p| p.page_size).map(|n| n as usize),
            paging_state: params.and_then(|p| p.paging_state),
            default_timestamp_us: params.and_then(|p| p.default_timestamp_us),
            skip_metadata: params.is_some_and(|p| p.skip_metadata),
            clock: self.node.coordinator.clock().as_ref(),
            memo: None,
            guard: crate::query::Guard {
                config: &self.node.config.guardrails,
                warnings,
            },
        }
    }

    /// Runs one statement for QUERY or EXECUTE; `text` is the statement as the client sent it,
    /// `memo` the prepared statement's.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of a QUERY or an EXECUTE, from their two callers"
    )]
    pub async fn run(
        &self,
        statement: &hayate_cql::statement::Statement,
        text: &str,
        binds: &crate::query::Binds<'_>,
        params: &hayate_cql::request::QueryParameters<'_>,
        keyspace: Option<&str>,
        memo: Option<&crate::query::Memo>,
        warnings: &Warnings,
    ) -> Response {
        let role = self.role();
        let mut ctx = self.context(keyspace, Some(params), warnings);
        ctx.role = role.as_ref();
        ctx.memo = memo;
        let fixed;
        if let Some(now_s) = params.now_in_seconds {
            fixed = NowInSeconds::new(ctx.clock, now_s);
            ctx.clock = &fixed;
        }
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
                modify::run(ctx, &node.coordinator, Some(&node.batchlog), statement, binds).await
            }
            Statement::Use { keyspace } => {
                if ctx.schema.keyspace(keyspace).is_none() {
                    return Err(invalid(format!("Keyspace '{keyspace}' does not exist")));
                }
                Ok(ResultBody::SetKeyspace(keyspace.clone()))
            }
            Statement::Unsupported { what } => Err(invalid(match *what {
                // Cassandra 5.0's answers with these features off, as they are by default.
                "CREATE MATERIALIZED VIEW" => "Materialized views are disabled. Enable in cassandra.yaml to use.".to_owned(),
                "CREATE FUNCTION" | "CREATE AGGREGATE" => {
                    "User-defined functions are disabled in cassandra.yaml - set user_defined_functions_enabled=true to enable"
                        .to_owned()
                }
                _ => format!("hayate does not support {what} yet"),
            })),
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
        self.requests.fetch_add(1, Relaxed);
        self.node.metrics.request_opcode(header.opcode);
        // A drained node answers only OPTIONS (so that a driver gets as far as reading why).
        if self.node.is_drained() && header.opcode != Opcode::Options {
            return self.send(
                stream,
                &Response::Error(WireError::new(
                    ErrorBody::ServerError,
                    crate::node::DRAINED_MESSAGE,
                )),
            );
        }
        let decompressed;
        let body: &[u8] = if header.flags.compression() {
            let (negotiated, segmented) = {
                let state = self.state();
                (state.compression, state.writer.segments.is_some())
            };
            if segmented {
                return self.send(
                    stream,
                    &Response::Error(WireError::protocol(
                        "frame has the compression flag inside a v5 segment; in protocol v5 \
                         segments are compressed, never frames",
                    )),
                );
            }
            let Some(algorithm) = negotiated else {
                return self.send(
                    stream,
                    &Response::Error(WireError::protocol(
                        "frame is compressed but no compression was negotiated in STARTUP",
                    )),
                );
            };
            match algorithm.decompress(&body, self.node.config.limits.max_frame_bytes.0 as usize) {
                Ok(b) => {
                    decompressed = b;
                    header.flags = FrameFlags(header.flags.0 & !FrameFlags::COMPRESSION);
                    header.body_length_bytes = decompressed.len() as u32;
                    &decompressed
                }
                // A body that inflates past the limit is a request too big, not a broken frame:
                // Invalid, as Cassandra answers a mutation over its 16 MiB (the driver keeps the
                // connection).
                Err(CompressionError::LengthTooLarge {
                    claimed_bytes,
                    max_bytes,
                    ..
                }) => {
                    let message = format!(
                        "Request is too big: it decompresses to {claimed_bytes} bytes, more than the \
                         maximum allowed length {max_bytes}. Send smaller requests (smaller batches \
                         or values)"
                    );
                    return self.send(
                        stream,
                        &Response::Error(WireError::new(ErrorBody::Invalid, message)),
                    );
                }
                Err(e) => {
                    return self.send(stream, &Response::Error(WireError::protocol(format!("{e}"))));
                }
            }
        } else {
            &body
        };
        let warnings = Warnings::default();
        let (kind, response, trace) = match Request::decode(&header, body) {
            Ok(frame) if frame.tracing && traceable(&frame.request) => {
                let mut trace = self.start_trace(&frame.request);
                let (kind, response) = self.dispatch_traced(frame, &mut trace, &warnings).await;
                (kind, response, Some(trace))
            }
            Ok(frame) => {
                let (kind, response) = self.dispatch(frame, &warnings).await;
                (kind, response, None)
            }
            Err(e) => (
                "malformed",
                Response::Error(WireError::protocol(format!(
                    "invalid {:?} message: {e}",
                    header.opcode
                ))),
                None,
            ),
        };
        let metrics = &self.node.metrics;
        if let Response::Error(e) = &response {
            metrics.record_error(kind, e.code());
        }
        metrics.record(kind, started.elapsed().as_micros() as u64);
        let warnings = warnings.take();
        match trace {
            Some(trace) => {
                // No "Request complete" event: as with Cassandra, tools show that line from the
                // session's duration.
                let id = trace.session_id();
                // Stored before the answer goes out, so that a driver polling system_traces
                // right after the answer finds the session.
                trace.finish(&self.node.traces);
                self.send_with(&self.writer(), stream, &response, Some(&id), &warnings);
            }
            None => self.send_with(&self.writer(), stream, &response, None, &warnings),
        }
        if header.opcode == Opcode::Startup
            && matches!(response, Response::Ready(_) | Response::Authenticate(_))
        {
            self.started(header.version);
        }
    }

    /// STARTUP was answered with READY or AUTHENTICATE: the version is fixed, and a v5
    /// connection now switches to segments (the answer itself went out bare).
    fn started(&self, version: u8) {
        let mut state = self.state();
        state.started_version = Some(version);
        state.writer.version = version;
        if version >= PROTOCOL_V5 {
            state.writer.segments = Some(SegmentCodec::new(state.compression));
        } else {
            state.writer.compression = state.compression;
        }
    }

    /// Starts the trace of a request that asked for one, with what the session row shows.
    fn start_trace(&self, request: &Request<'_>) -> Trace {
        use crate::system::ClusterView;
        let local = self.node.local();
        let (command, text, consistency) = match request {
            Request::Query(q) => ("QUERY", q.query.to_owned(), Some(q.parameters.consistency)),
            Request::Prepare(p) => ("QUERY", p.query.to_owned(), None),
            Request::Execute(e) => {
                let text = self
                    .node
                    .prepared
                    .get(e.id)
                    .map_or_else(|| "unknown prepared statement".to_owned(), |s| s.text.clone());
                ("QUERY", text, Some(e.parameters.consistency))
            }
            Request::Batch(b) => (
                "QUERY",
                format!("{} statements", b.statements.len()),
                Some(b.consistency),
            ),
            _ => ("QUERY", String::new(), None),
        };
        let mut trace = Trace::start(self.peer.ip(), local.rpc_address, local.cql_port, command);
        let mut parameters = vec![("query".to_owned(), text.clone())];
        if let Some(c) = consistency {
            parameters.push((
                "consistency_level".to_owned(),
                crate::error::consistency_level(c).name().to_owned(),
            ));
        }
        let request_name = match request {
            Request::Query(_) => "Execute CQL3 query",
            Request::Prepare(_) => "Preparing CQL3 query",
            Request::Execute(_) => "Execute CQL3 prepared query",
            _ => "Execute batch of CQL3 queries",
        };
        trace.describe(request_name, parameters);
        trace
    }

    /// Runs a traced request, with events that say where its time went: parsing, the storage
    /// engine's reads (from the device or the post-write cache) and what came out.
    async fn dispatch_traced(
        &self,
        frame: RequestFrame<'_>,
        trace: &mut Trace,
        warnings: &Warnings,
    ) -> (&'static str, Response) {
        let text = match &frame.request {
            Request::Query(q) => Some(q.query),
            Request::Prepare(p) => Some(p.query),
            _ => None,
        };
        if let Some(text) = text {
            trace.event(format!("Parsing {text}"));
            // Parsed once more here so that the time the parser takes shows as its own event;
            // only traced requests pay for it.
            match hayate_cql::statement::parse(text) {
                Ok(parsed) => trace.event(format!("Parsed a {} statement", parsed.statement.kind())),
                Err(e) => trace.event(format!("Parse failed: {e}")),
            }
        }
        if let Request::Execute(e) = &frame.request {
            let hex: String = e.id.iter().map(|b| format!("{b:02x}")).collect();
            trace.event(format!("Looking up prepared statement {hex}"));
        }
        let before = self.node.engine.stats();
        trace.event("Executing statement");
        let (kind, response) = self.dispatch(frame, warnings).await;
        let after = self.node.engine.stats();
        // The engine counts node-wide: requests running at the same time show here too.
        trace.event(format!(
            "Storage engine: {} device reads, {} post-write cache hits",
            after.device_reads.saturating_sub(before.device_reads),
            after.cache_hits.saturating_sub(before.cache_hits)
        ));
        match &response {
            Response::Result(ResultBody::Rows(rows)) => {
                trace.event(format!("Read {} live rows", rows.rows_count))
            }
            Response::Result(ResultBody::Void) => trace.event("Write applied"),
            Response::Result(_) => trace.event("Statement applied"),
            Response::Error(e) => trace.event(format!("Request failed: {e}")),
            _ => {}
        }
        (kind, response)
    }

    async fn dispatch(&self, frame: RequestFrame<'_>, warnings: &Warnings) -> (&'static str, Response) {
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
            (Request::AuthResponse(a), Phase::Authenticating) => {
                ("auth", auth_response::handle(self, a).await)
            }
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
            (Request::Query(q), Phase::Ready) => query::handle(self, q, warnings).await,
            (Request::Prepare(p), Phase::Ready) => ("prepare", prepare::handle(self, p, warnings)),
            (Request::Execute(e), Phase::Ready) => execute::handle(self, e, warnings).await,
            (Request::Batch(b), Phase::Ready) => ("batch", batch::handle(self, b, warnings).await),
        }
    }
}

/// The clock of a request that carried v5's `now_in_seconds`: TTLs and expiry are judged at
/// that second, while write timestamps still come from the real clock, as in Cassandra.
pub struct NowInSeconds<'a> {
    inner: &'a dyn Clock,
    now_s: u32,
}

impl<'a> NowInSeconds<'a> {
    pub fn new(inner: &'a dyn Clock, now_s: i32) -> NowInSeconds<'a> {
        NowInSeconds {
            inner,
            now_s: u32::try_from(now_s).unwrap_or(0),
        }
    }
}

impl Clock for NowInSeconds<'_> {
    fn now_us(&self) -> i64 {
        self.inner.now_us()
    }

    fn now_s(&self) -> u32 {
        self.now_s
    }
}

/// A place responses can be queued from any thread.
#[derive(Clone)]
pub struct Outbox {
    tx: Arc<Mutex<Option<ResponseSender>>>,
}

impl Outbox {
    pub fn new(tx: ResponseSender) -> Outbox {
        Outbox {
            tx: Arc::new(Mutex::new(Some(tx))),
        }
    }

    /// Queues whole frames; silently dropped once the connection is gone.
    pub fn push(&self, frames: Vec<u8>) {
        if let Some(tx) = self.tx.lock().expect("outbox lock poisoned").as_ref() {
            tx.send(frames);
        }
    }

    /// Whether the client has stopped reading its responses.
    pub fn is_full(&self) -> bool {
        self.tx
            .lock()
            .expect("outbox lock poisoned")
            .as_ref()
            .is_some_and(ResponseSender::is_full)
    }

    pub fn close(&self) {
        self.tx.lock().expect("outbox lock poisoned").take();
    }
}
