//! How messages reach other nodes: a [`Transport`] that queues a message for a peer and
//! returns at once, and an [`Inbox`] that receives what peers send.
//!
//! Two implementations: [`tcp::TcpTransport`], the real one (one TCP connection per peer and
//! [`Lane`], frames coalesced into large writes), and [`sim::SimNetwork`], an in-process network
//! on tokio's clock that drops, delays, duplicates and partitions messages from a seed, so a
//! coordinator test replays exactly.
//!
//! Delivery is at most once and may fail silently: a send never blocks and never reports an
//! error. The sender of a request keeps its own timeout, and that timeout is what notices a
//! lost message, a dead peer or a partition, as in Cassandra. What the transports promise is
//! order per (sender, receiver, lane) — the simulated one only when asked to — and that a
//! message is delivered whole or not at all.

pub mod sim;
pub mod tcp;

use crate::message::Message;
use crate::node::HostId;

pub use crate::message::Lane;
pub use sim::{SimNetwork, SimStats, SimTransport};
pub use tcp::{PeerStats, TcpConfig, TcpTransport, TransportStats};

/// Where incoming messages go.
pub trait Inbox: Send + Sync + 'static {
    /// Called from the transport's reader tasks, one message at a time per connection: it must
    /// not block (hand long work to another task or thread).
    fn deliver(&self, from: HostId, message: Message);
}

impl<F> Inbox for F
where
    F: Fn(HostId, Message) + Send + Sync + 'static,
{
    fn deliver(&self, from: HostId, message: Message) {
        self(from, message)
    }
}

pub trait Transport: Send + Sync + 'static {
    /// Queues `message` for `to` on a lane and returns at once. Never blocks, never fails: a
    /// message that cannot be delivered (peer unknown or unreachable, queue over its bound) is
    /// dropped and counted; the sender's own timeout notices. Order is kept per (to, lane).
    fn send(&self, to: HostId, lane: Lane, message: Message);
}
