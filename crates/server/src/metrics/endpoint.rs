//! The node's HTTP endpoint: `/metrics` for Prometheus, `/status` for `hayate status`, and
//! the operator's requests (`/netstats`, `/snapshot`, `/backup`, `/info`, ...), which other
//! modules answer through [`NodeFigures::admin`].
//!
//! hyper serves it, on a thread of its own with a small tokio runtime: off the CQL runtime, so
//! that a stuck scrape cannot delay queries and an overloaded runtime cannot hide its own
//! figures. One request per connection (`Connection: close`), its head bounded in bytes
//! ([`HTTP_REQUEST_MAX_BYTES`], 431 beyond; hyper answers 400 to what is not HTTP) and in time
//! ([`HTTP_IO_TIMEOUT`]), and at most [`HTTP_CONNECTIONS_MAX`] connections at once. The node's
//! callbacks block (a scrape reads the engine's figures, `/decommission` waits for the
//! operation), so they run on the runtime's blocking pool of [`CALLBACKS_MAX`] thread: one at
//! a time, as when the endpoint served one connection at a time, while the other connections
//! are still read and written. A panicking callback costs its request a 500, not the endpoint.
//!
//! hyper was chosen over axum: the routes are a handful of paths matched by hand, with the rest
//! handed to the node's callback, so a router would add crates and nothing else; hyper itself
//! was already built (reqwest's client uses it).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use hayate_cluster::coordinator::MetricsSnapshot as CoordinatorSnapshot;
use hayate_storage::{SnapshotSpace, StatsSnapshot};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;

use super::render::{render_coordinator, render_snapshots, render_streams, StreamFigures};
use super::Metrics;

/// The largest HTTP request head read; a scrape sends a few hundred bytes.
pub const HTTP_REQUEST_MAX_BYTES: usize = 8192;
const _: () = assert!(
    HTTP_REQUEST_MAX_BYTES >= 8192,
    "hyper refuses a read buffer under 8 KiB"
);
/// How long a client may take to send its request head, or stall while reading the answer,
/// before it is dropped, so that one stuck client cannot hold a connection for long.
pub const HTTP_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more wait in the listen backlog.
pub const HTTP_CONNECTIONS_MAX: usize = 16;
/// The node's callbacks running at once.
pub const CALLBACKS_MAX: usize = 1;
/// How much unread input, and for how long, is drained before closing (see [`linger`]).
const HTTP_LINGER_MAX_BYTES: usize = 64 << 10;
const HTTP_LINGER_TIMEOUT: Duration = Duration::from_secs(1);

const CONTENT_TYPE_EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";
const CONTENT_TYPE_TEXT: &str = "text/plain; charset=utf-8";
const NOT_FOUND_BODY: &str =
    "the metrics are at /metrics, the cluster's status at /status, streams at /netstats; \
                 /info, /tablestats, /ring, /describecluster, /defragstats and /logging answer the \
                 hayate tools\n";

/// The running endpoint.
pub struct MetricsServer {
    /// Where it listens (the port is filled in when 0 was asked for).
    pub local_addr: SocketAddr,
    /// The thread that serves it; it runs until the process exits.
    #[expect(
        dead_code,
        reason = "the node never joins the endpoint's thread; kept so a caller could"
    )]
    pub thread: JoinHandle<()>,
}

/// What a scrape reads from the node besides the request counters.
pub trait NodeFigures: Send + Sync + 'static {
    fn storage(&self) -> StatsSnapshot;
    fn coordinator(&self) -> CoordinatorSnapshot;
    /// The node's streams (`None` where it has none, as in tests).
    fn streams(&self) -> Option<StreamFigures> {
        None
    }
    /// Device space the node's snapshots pin and hold (`None` where it has no engine, as in
    /// tests).
    fn snapshots(&self) -> Option<SnapshotSpace> {
        None
    }
    /// Each secondary index on this node, with its state (empty where there is no engine).
    fn indexes(&self) -> Vec<super::render::IndexFigures> {
        Vec::new()
    }
    /// The cluster's status as `hayate status` reads it (`/status`), a JSON document.
    fn status(&self) -> String;
    /// An operator's request other than a scrape (`/netstats`, `/decommission`, ...), with
    /// whether it came from this machine: `Some((status line, body))`, or `None` for a path
    /// the node does not serve.
    fn admin(&self, method: &str, path: &str, query: &str, from_loopback: bool) -> Option<(String, String)> {
        let _ = (method, path, query, from_loopback);
        None
    }
}

/// Starts the endpoint on `addr`: `/metrics` for Prometheus, `/status` for `hayate status`.
/// Returns once the port is bound, so a bind failure is reported at startup.
pub fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    node: Arc<dyn NodeFigures>,
) -> io::Result<MetricsServer> {
    let listener = std::net::TcpListener::bind(addr)?;
    let local_addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(CALLBACKS_MAX)
        .thread_name("hayate-metrics-cb")
        .build()?;
    let listener = {
        let _context = runtime.enter();
        TcpListener::from_std(listener)?
    };
    let endpoint = Arc::new(Endpoint { metrics, node });
    let thread = std::thread::Builder::new()
        .name("hayate-metrics".to_string())
        .spawn(move || runtime.block_on(accept_loop(listener, endpoint)))?;
    Ok(MetricsServer { local_addr, thread })
}

/// What the endpoint answers from: the request counters and the node's callbacks.
struct Endpoint {
    metrics: Arc<Metrics>,
    node: Arc<dyn NodeFigures>,
}

/// One request, as the routes read it.
struct Asked {
    method: String,
    path: String,
    query: String,
    from_loopback: bool,
}

async fn accept_loop(listener: TcpListener, endpoint: Arc<Endpoint>) {
    let connections = Arc::new(Semaphore::new(HTTP_CONNECTIONS_MAX));
    loop {
        let Ok(permit) = Arc::clone(&connections).acquire_owned().await else {
            unreachable!("the connection semaphore is never closed");
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                let endpoint = Arc::clone(&endpoint);
                tokio::spawn(async move {
                    serve_connection(stream, peer, endpoint).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of file descriptors, most likely: wait rather than spin, and keep serving.
                tracing::warn!(error = %e, "metrics endpoint: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads one request, answers it, and closes the connection.
async fn serve_connection(stream: TcpStream, peer: SocketAddr, endpoint: Arc<Endpoint>) {
    let from_loopback = peer.ip().is_loopback();
    let service = service_fn(move |request: Request<Incoming>| {
        let asked = Asked {
            method: request.method().as_str().to_owned(),
            path: request.uri().path().to_owned(),
            query: request.uri().query().unwrap_or_default().to_owned(),
            from_loopback,
        };
        let endpoint = Arc::clone(&endpoint);
        async move { Ok::<_, Infallible>(endpoint.answer(asked).await) }
    });
    let mut connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HTTP_IO_TIMEOUT)
        .max_buf_size(HTTP_REQUEST_MAX_BYTES)
        .keep_alive(false)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(ClientStream::new(stream)), service);
    if let Err(e) = (&mut connection).await {
        tracing::debug!(error = %e, "metrics endpoint: a request failed");
    }
    linger(connection.into_parts().io.into_inner().stream).await;
}

impl Endpoint {
    async fn answer(self: Arc<Self>, asked: Asked) -> Response<Full<Bytes>> {
        match tokio::task::spawn_blocking(move || self.route(&asked)).await {
            Ok((status, body)) => response(status, body),
            // `route` catches the callbacks' panics; this is the runtime shutting down.
            Err(_) => response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the request failed\n".to_owned(),
            ),
        }
    }

    /// The status and body of the answer. Runs on the blocking pool: the callbacks block.
    fn route(&self, asked: &Asked) -> (StatusCode, String) {
        let Asked {
            method,
            path,
            query,
            from_loopback,
        } = asked;
        if path != "/metrics" && path != "/status" {
            let answered = catch_unwind(AssertUnwindSafe(|| {
                self.node.admin(method, path, query, *from_loopback)
            }));
            return match answered {
                Ok(Some((status, body))) => (status_code(&status), body),
                Ok(None) => (StatusCode::NOT_FOUND, NOT_FOUND_BODY.to_owned()),
                Err(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the request failed\n".to_owned(),
                ),
            };
        }
        if method != "GET" {
            return (StatusCode::METHOD_NOT_ALLOWED, "use GET\n".to_owned());
        }
        // A panic in a callback must cost one scrape, not the endpoint.
        let body = catch_unwind(AssertUnwindSafe(|| {
            if path == "/status" {
                self.node.status()
            } else {
                self.scrape()
            }
        }));
        match body {
            Ok(body) => (StatusCode::OK, body),
            Err(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "rendering the metrics failed\n".to_owned(),
            ),
        }
    }

    /// The `/metrics` page.
    fn scrape(&self) -> String {
        let node = &self.node;
        let mut body = String::with_capacity(16 << 10);
        self.metrics.render(&node.storage(), &mut body);
        render_coordinator(&node.coordinator(), &mut body);
        if let Some(streams) = node.streams() {
            render_streams(&streams, &mut body);
        }
        if let Some(space) = node.snapshots() {
            render_snapshots(&space, &mut body);
        }
        super::render::render_indexes(&node.indexes(), &mut body);
        body
    }
}

/// The code of a callback's status line ("409 Conflict"). The callbacks write the standard
/// reason phrases, which hyper writes again from the code.
fn status_code(status_line: &str) -> StatusCode {
    let code = status_line.split(' ').next().and_then(|c| c.parse::<u16>().ok());
    match code.and_then(|c| StatusCode::from_u16(c).ok()) {
        Some(code) => code,
        None => {
            tracing::error!(status_line, "an operator endpoint answered with no status code");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

fn response(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let content_type = if status == StatusCode::OK {
        CONTENT_TYPE_EXPOSITION
    } else {
        CONTENT_TYPE_TEXT
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Closes a connection. Unread input left in the socket would make the close a reset, which
/// can destroy the answer before the client reads it (an oversized request is answered
/// before it has all arrived), so the rest of the input is read and dropped first, bounded in
/// bytes and time.
async fn linger(mut stream: TcpStream) {
    // hyper has shut the writing side down already, unless the client left first.
    let _ = stream.shutdown().await;
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut drained_bytes = 0;
        while drained_bytes < HTTP_LINGER_MAX_BYTES {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained_bytes += n,
            }
        }
    };
    let _ = tokio::time::timeout(HTTP_LINGER_TIMEOUT, drain).await;
}

const HTTP_10: &[u8] = b"HTTP/1.0";
const HTTP_11: &[u8] = b"HTTP/1.1";

/// A client's connection as hyper reads and writes it, with two things hyper does not do.
///
/// A write that makes no progress for [`HTTP_IO_TIMEOUT`] fails, so a client that stops
/// reading cannot hold a connection (hyper bounds only the time to read a request head).
///
/// The answer to an HTTP/1.0 request says HTTP/1.1 in its status line, as this endpoint always
/// answered (and as RFC 9110 section 6.2 advises: a server answers with the highest minor
/// version it conforms to). hyper would write 1.0; every answer carries a Content-Length and
/// closes the connection, which a 1.0 client reads either way.
struct ClientStream {
    stream: TcpStream,
    /// Set while a write waits for the client to read.
    write_stalled: Option<Pin<Box<Sleep>>>,
    /// Bytes of the answer written, counted up to the end of its version.
    version_bytes_written: usize,
}

impl ClientStream {
    fn new(stream: TcpStream) -> ClientStream {
        ClientStream {
            stream,
            write_stalled: None,
            version_bytes_written: 0,
        }
    }

    /// What to write of `buf`: itself, or while hyper writes a status line's "HTTP/1.0", the
    /// same bytes of "HTTP/1.1" (as many, so hyper's count of bytes written stays right).
    fn with_version_patched<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        let at = self.version_bytes_written;
        if at >= HTTP_11.len() {
            return buf;
        }
        let n = (HTTP_11.len() - at).min(buf.len());
        if buf[..n] == HTTP_10[at..at + n] {
            &HTTP_11[at..at + n]
        } else {
            buf
        }
    }

    /// Passes on a finished write or flush; a pending one fails once it has waited
    /// [`HTTP_IO_TIMEOUT`] in all.
    fn bounded<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.write_stalled = None;
            return polled;
        }
        let stalled = self
            .write_stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(HTTP_IO_TIMEOUT)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read its answer",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let buf = this.with_version_patched(buf);
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            this.version_bytes_written = this.version_bytes_written.saturating_add(n);
        }
        this.bounded(cx, written)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let flushed = Pin::new(&mut this.stream).poll_flush(cx);
        this.bounded(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_support::{check_format, value};
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    fn http(addr: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream.write_all(request).expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read response");
        response
    }

    /// A node whose storage figures come from a closure.
    struct Figures<F>(F);

    impl<F: Fn() -> StatsSnapshot + Send + Sync + 'static> NodeFigures for Figures<F> {
        fn storage(&self) -> StatsSnapshot {
            (self.0)()
        }

        fn coordinator(&self) -> CoordinatorSnapshot {
            CoordinatorSnapshot {
                hints_written: 3,
                ..CoordinatorSnapshot::default()
            }
        }

        fn snapshots(&self) -> Option<SnapshotSpace> {
            Some(SnapshotSpace {
                pinned_blocks: 3,
                held_bytes: 1024,
                block_size_bytes: 1024,
            })
        }

        fn status(&self) -> String {
            "{\"nodes\": []}".to_owned()
        }
    }

    #[test]
    fn the_endpoint_answers_scrapes_and_survives_garbage() {
        let metrics = Arc::new(Metrics::new());
        metrics.record("select", 100);
        let server = serve(
            "127.0.0.1:0".parse().expect("address"),
            Arc::clone(&metrics),
            Arc::new(Figures(|| StatsSnapshot {
                records: 42,
                ..StatsSnapshot::default()
            })),
        )
        .expect("bind");
        let addr = server.local_addr;

        let scrape = || {
            http(
                addr,
                b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
            )
        };
        let response = scrape();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(
            response.contains("Content-Type: text/plain; version=0.0.4"),
            "{response}"
        );
        let (_, body) = response.split_once("\r\n\r\n").expect("head and body");
        check_format(body);
        assert_eq!(value(body, "hayate_storage_records"), 42.0);
        assert_eq!(value(body, "hayate_requests_total{kind=\"select\"}"), 1.0);
        assert_eq!(value(body, "hayate_hints_written_total"), 3.0);
        assert_eq!(value(body, "hayate_snapshot_pinned_bytes"), 3072.0);
        assert_eq!(value(body, "hayate_snapshot_held_bytes"), 1024.0);
        let status = http(addr, b"GET /status HTTP/1.1\r\n\r\n");
        assert!(status.ends_with("{\"nodes\": []}"), "{status}");

        assert!(http(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(http(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(http(addr, b"\x00\xff garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(http(addr, &[b'A'; 3 * HTTP_REQUEST_MAX_BYTES]).starts_with("HTTP/1.1 431"));
        // A client that connects and leaves, and one that sends half a request and leaves.
        drop(TcpStream::connect(addr).expect("connect"));
        {
            let mut half = TcpStream::connect(addr).expect("connect");
            half.write_all(b"GET /met").expect("send");
        }

        let response = scrape();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        let with_query = http(addr, b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
        assert!(with_query.starts_with("HTTP/1.1 200 OK\r\n"), "{with_query}");
    }

    /// An oversized header, not only an oversized request line, is answered 431; and a client
    /// that connects and sends nothing holds up no one else. Before hyper the endpoint served
    /// one connection at a time, so such a client held every scrape for up to
    /// `HTTP_IO_TIMEOUT`.
    #[test]
    fn an_oversized_header_is_refused_and_a_silent_client_holds_up_no_one() {
        let server = serve(
            "127.0.0.2:0".parse().expect("address"),
            Arc::new(Metrics::new()),
            Arc::new(Figures(StatsSnapshot::default)),
        )
        .expect("bind");
        let addr = server.local_addr;
        let silent = TcpStream::connect(addr).expect("connect");
        let started = std::time::Instant::now();

        let mut request = b"GET /metrics HTTP/1.1\r\nX-Padding: ".to_vec();
        request.extend(std::iter::repeat_n(b'a', 2 * HTTP_REQUEST_MAX_BYTES));
        request.extend_from_slice(b"\r\n\r\n");
        let refused = http(addr, &request);
        assert!(refused.starts_with("HTTP/1.1 431"), "{refused}");

        let response = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(
            started.elapsed() < HTTP_IO_TIMEOUT,
            "the silent client held the endpoint for {:?}",
            started.elapsed()
        );
        drop(silent);
    }

    #[test]
    fn a_panicking_storage_callback_costs_one_scrape() {
        let metrics = Arc::new(Metrics::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let server = serve(
            "127.0.0.1:0".parse().expect("address"),
            metrics,
            Arc::new(Figures(move || {
                if counter.fetch_add(1, Relaxed) == 0 {
                    panic!("the first scrape fails (a test of the endpoint)");
                }
                StatsSnapshot::default()
            })),
        )
        .expect("bind");
        let request = b"GET /metrics HTTP/1.1\r\n\r\n";
        assert!(http(server.local_addr, request).starts_with("HTTP/1.1 500"));
        assert!(http(server.local_addr, request).starts_with("HTTP/1.1 200"));
    }
}
