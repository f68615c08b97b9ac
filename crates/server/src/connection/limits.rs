//! What a client may make the node hold, and how a connection is paused when it holds too much.
//!
//! Two things grow with what a client sends:
//!
//! - **Responses it has not read.** A response waits in its connection's backlog until the
//!   writer has handed it to the socket; a client that sends requests and never reads would
//!   grow that backlog without end. Once [`RESPONSE_BACKLOG_MAX_BYTES`] or
//!   [`RESPONSE_BACKLOG_MAX_FRAMES`] wait, the reader stops reading that connection's requests
//!   until the writer has drained the backlog below both, so the client meets TCP's own flow
//!   control and no other connection notices.
//! - **Requests in flight.** The bodies of running requests count against the node's
//!   `limits.max_request_data_in_flight` and against the client address's
//!   `limits.max_request_data_in_flight_per_ip`, as Cassandra's
//!   `native_transport_max_request_data_in_flight(_per_ip)`. A request that does not fit is
//!   handled as Cassandra 5.0 handles a protocol v4 client's: by default it is run all the same
//!   and its connection is paused until the connection's own requests have finished or the
//!   node is below both limits again (backpressure); a client that asked for
//!   `THROW_ON_OVERLOAD` in its STARTUP is answered `Overloaded` instead, and the request is
//!   not run.
//!
//! A request's bytes are returned when its response is queued: from then on the response is
//! the backlog's to bound.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::AcqRel, Ordering::Acquire};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{mpsc, Notify};

/// Bytes of responses a connection may have waiting for its client before the node stops
/// reading its requests. Large enough that a driver reading at full speed never meets it (the
/// writer takes up to 256 KiB per write), small enough that a thousand stalled clients cost a
/// few GiB at worst.
pub const RESPONSE_BACKLOG_MAX_BYTES: usize = 4 << 20;
/// Responses a connection may have waiting, whatever their size: each queued response costs an
/// allocation of its own besides its bytes.
pub const RESPONSE_BACKLOG_MAX_FRAMES: usize = 4096;

/// Responses queued for one connection and not yet written to its socket.
#[derive(Default)]
pub struct Backlog {
    bytes: AtomicUsize,
    frames: AtomicUsize,
    /// Set when the writer has stopped: nothing will drain the backlog any more.
    closed: AtomicBool,
    drained: Notify,
}

impl Backlog {
    /// Whether the reader must wait before reading more requests.
    pub fn is_full(&self) -> bool {
        self.bytes.load(Acquire) >= RESPONSE_BACKLOG_MAX_BYTES
            || self.frames.load(Acquire) >= RESPONSE_BACKLOG_MAX_FRAMES
    }

    fn queued(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, AcqRel);
        self.frames.fetch_add(1, AcqRel);
    }

    /// The writer has handed `frames` responses of `bytes` in all to the socket.
    pub fn written(&self, bytes: usize, frames: usize) {
        let before = self.bytes.fetch_sub(bytes, AcqRel);
        debug_assert!(before >= bytes, "the backlog wrote more than was queued");
        self.frames.fetch_sub(frames, AcqRel);
        self.drained.notify_waiters();
    }

    /// The writer has stopped (the client is gone); wakes a reader waiting for room.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        self.drained.notify_waiters();
    }

    /// Waits until the backlog has room again; false if the writer stopped first.
    pub async fn wait_for_room(&self) -> bool {
        loop {
            // Registered before the checks, so that a drain between them is not missed.
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.closed.load(Acquire) {
                return false;
            }
            if !self.is_full() {
                return true;
            }
            drained.await;
        }
    }
}

/// The sending side of a connection's response queue: every frame queued is counted in the
/// connection's [`Backlog`] until the writer has written it.
#[derive(Clone)]
pub struct ResponseSender {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    backlog: Arc<Backlog>,
}

impl ResponseSender {
    pub fn new(tx: mpsc::UnboundedSender<Vec<u8>>, backlog: Arc<Backlog>) -> ResponseSender {
        ResponseSender { tx, backlog }
    }

    /// Queues whole frames; dropped silently once the writer is gone.
    pub fn send(&self, frames: Vec<u8>) {
        let bytes = frames.len();
        // Counted before it is sent: the writer may take and write it before `send` returns.
        self.backlog.queued(bytes);
        if self.tx.send(frames).is_err() {
            self.backlog.written(bytes, 1);
        }
    }

    /// Whether the client has stopped reading (events are dropped rather than queued then).
    pub fn is_full(&self) -> bool {
        self.backlog.is_full()
    }
}

/// A byte allowance several holders draw from.
struct Reserve {
    limit_bytes: u64,
    using_bytes: AtomicU64,
}

impl Reserve {
    fn new(limit_bytes: u64) -> Reserve {
        Reserve {
            limit_bytes,
            using_bytes: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` if they fit under the limit.
    fn try_take(&self, bytes: u64) -> bool {
        self.using_bytes
            .fetch_update(AcqRel, Acquire, |using| {
                using
                    .checked_add(bytes)
                    .filter(|total| *total <= self.limit_bytes)
            })
            .is_ok()
    }

    /// Takes `bytes` whether they fit or not.
    fn take(&self, bytes: u64) {
        self.using_bytes.fetch_add(bytes, AcqRel);
    }

    fn give_back(&self, bytes: u64) {
        let before = self.using_bytes.fetch_sub(bytes, AcqRel);
        debug_assert!(before >= bytes, "a reserve was given back more than was taken");
    }

    fn using(&self) -> u64 {
        self.using_bytes.load(Acquire)
    }

    fn is_over(&self) -> bool {
        self.using() > self.limit_bytes
    }
}

/// The node's allowance for request data in flight, and one per client address.
pub struct RequestData {
    global: Reserve,
    per_ip_limit_bytes: u64,
    /// Weak, so that an address's reserve goes when its last connection does; the map is
    /// pruned then, so it holds at most one entry per open connection.
    per_ip: Mutex<HashMap<IpAddr, Weak<Reserve>>>,
}

impl RequestData {
    pub fn new(global_limit_bytes: u64, per_ip_limit_bytes: u64) -> RequestData {
        RequestData {
            global: Reserve::new(global_limit_bytes),
            per_ip_limit_bytes,
            per_ip: Mutex::new(HashMap::new()),
        }
    }

    /// The allowance of a new connection from `ip`.
    pub fn connection(self: &Arc<Self>, ip: IpAddr) -> ConnectionData {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        let endpoint = match per_ip.get(&ip).and_then(Weak::upgrade) {
            Some(reserve) => reserve,
            None => {
                let reserve = Arc::new(Reserve::new(self.per_ip_limit_bytes));
                per_ip.insert(ip, Arc::downgrade(&reserve));
                reserve
            }
        };
        ConnectionData {
            node: self.clone(),
            ip,
            endpoint,
            connection_bytes: AtomicU64::new(0),
            released: Notify::new(),
        }
    }

    /// Bytes of request data the whole node holds now.
    #[cfg(test)]
    fn using_bytes(&self) -> u64 {
        self.global.using()
    }
}

/// Why a request did not fit: the figures Cassandra's Overloaded message gives too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overload {
    pub request_bytes: u64,
    pub endpoint_using_bytes: u64,
    pub endpoint_limit_bytes: u64,
    pub global_using_bytes: u64,
    pub global_limit_bytes: u64,
}

impl std::fmt::Display for Overload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Request of {} bytes breached the limit on request data in flight: using {}/{} bytes \
             of this client address's limit (limits.max_request_data_in_flight_per_ip) and {}/{} \
             bytes of the node's (limits.max_request_data_in_flight); retry later, or send less \
             at once",
            self.request_bytes,
            self.endpoint_using_bytes,
            self.endpoint_limit_bytes,
            self.global_using_bytes,
            self.global_limit_bytes
        )
    }
}

/// One connection's share of the node's and its address's allowances.
pub struct ConnectionData {
    node: Arc<RequestData>,
    ip: IpAddr,
    endpoint: Arc<Reserve>,
    connection_bytes: AtomicU64,
    released: Notify,
}

impl ConnectionData {
    /// Takes `bytes` from the address's and the node's allowances if they fit in both.
    pub fn try_take(self: &Arc<Self>, bytes: u64) -> Result<InFlight, Overload> {
        if self.endpoint.try_take(bytes) {
            if self.node.global.try_take(bytes) {
                return Ok(self.taken(bytes));
            }
            self.endpoint.give_back(bytes);
        }
        Err(Overload {
            request_bytes: bytes,
            endpoint_using_bytes: self.endpoint.using(),
            endpoint_limit_bytes: self.endpoint.limit_bytes,
            global_using_bytes: self.node.global.using(),
            global_limit_bytes: self.node.global.limit_bytes,
        })
    }

    /// Takes `bytes` from both allowances even past their limits (the request runs, and the
    /// caller pauses the connection).
    pub fn take(self: &Arc<Self>, bytes: u64) -> InFlight {
        self.endpoint.take(bytes);
        self.node.global.take(bytes);
        self.taken(bytes)
    }

    fn taken(self: &Arc<Self>, bytes: u64) -> InFlight {
        self.connection_bytes.fetch_add(bytes, AcqRel);
        InFlight {
            connection: self.clone(),
            bytes,
        }
    }

    /// Waits until this connection may be read again after a request that did not fit: when
    /// its own requests have all finished, or when the node and the address are below their
    /// limits again, as Cassandra unpauses a v4 connection.
    pub async fn wait_for_room(&self) {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if self.connection_bytes.load(Acquire) == 0
                || (!self.endpoint.is_over() && !self.node.global.is_over())
            {
                return;
            }
            released.await;
        }
    }
}

impl Drop for ConnectionData {
    fn drop(&mut self) {
        let mut per_ip = self.node.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        // Ours is the last strong reference if no other connection from the address is open.
        if Arc::strong_count(&self.endpoint) == 1 {
            per_ip.remove(&self.ip);
        }
    }
}

/// One request's bytes, given back when it is dropped (its response queued, or its task
/// ended some other way, a panic included).
pub struct InFlight {
    connection: Arc<ConnectionData>,
    bytes: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.connection;
        c.endpoint.give_back(self.bytes);
        c.node.global.give_back(self.bytes);
        c.connection_bytes.fetch_sub(self.bytes, AcqRel);
        c.released.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_request_fits_only_under_both_limits() {
        let node = Arc::new(RequestData::new(1000, 600));
        let a = Arc::new(node.connection(ip(1)));
        let b = Arc::new(node.connection(ip(2)));
        let first = a.try_take(500).expect("fits both");
        // The address has 100 bytes left, the node 500.
        let Err(overload) = a.try_take(200) else {
            panic!("200 more bytes are over the address's limit");
        };
        assert_eq!(overload.endpoint_using_bytes, 500);
        assert_eq!(overload.global_using_bytes, 500);
        // Another address still fits, until the node's limit.
        let second = b.try_take(500).expect("fits the other address and the node");
        assert!(b.try_take(1).is_err(), "the node is full");
        drop(first);
        assert_eq!(node.using_bytes(), 500);
        let third = a.try_take(400).expect("room again");
        drop((second, third));
        assert_eq!(node.using_bytes(), 0);
    }

    #[test]
    fn a_failed_attempt_takes_nothing() {
        let node = Arc::new(RequestData::new(100, 1000));
        let a = Arc::new(node.connection(ip(1)));
        assert!(a.try_take(101).is_err());
        assert_eq!(a.endpoint.using(), 0, "the address's share was given back");
        assert_eq!(node.using_bytes(), 0);
    }

    #[test]
    fn addresses_are_forgotten_with_their_last_connection() {
        let node = Arc::new(RequestData::new(1000, 1000));
        let a1 = node.connection(ip(1));
        let a2 = node.connection(ip(1));
        assert!(Arc::ptr_eq(&a1.endpoint, &a2.endpoint), "one reserve per address");
        drop(a1);
        assert_eq!(node.per_ip.lock().expect("lock").len(), 1);
        drop(a2);
        assert!(node.per_ip.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_paused_connection_resumes_when_its_requests_finish() {
        let node = Arc::new(RequestData::new(100, 100));
        let a = Arc::new(node.connection(ip(1)));
        let big = a.take(150);
        let waiter = {
            let a = a.clone();
            tokio::spawn(async move { a.wait_for_room().await })
        };
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "over the limit with a request in flight: paused"
        );
        drop(big);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("resumed")
            .expect("joined");
    }

    #[tokio::test]
    async fn a_full_backlog_waits_for_the_writer() {
        let backlog = Arc::new(Backlog::default());
        let (tx, _rx) = mpsc::unbounded_channel();
        let sender = ResponseSender::new(tx, backlog.clone());
        for _ in 0..RESPONSE_BACKLOG_MAX_FRAMES {
            sender.send(vec![0; 9]);
        }
        assert!(backlog.is_full());
        let waiter = {
            let backlog = backlog.clone();
            tokio::spawn(async move { backlog.wait_for_room().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        backlog.written(9 * 10, 10);
        assert!(waiter.await.expect("joined"), "room again");
        // A writer that stops wakes the reader with the news.
        for _ in 0..10 {
            sender.send(vec![0; 9]);
        }
        backlog.close();
        assert!(!backlog.wait_for_room().await);
    }
}
