//! Request, connection and storage figures, served to Prometheus as text, and the node's HTTP
//! endpoint that serves them with the operator's requests.
//!
//! - `registry`: [`Metrics`], the counters every request records (atomics, and one
//!   HdrHistogram lock per statement kind), and the latency summaries `system_views` reads.
//! - `render`: every family a scrape shows: the request counters, the storage engine's, the
//!   coordinator's, the streams' and the snapshots' figures (and why not `prometheus-client`).
//! - `text`: the text exposition format's lines (HELP, TYPE, samples, decimal seconds).
//! - `endpoint`: the HTTP server (hyper, on a thread and runtime of its own): `/metrics`,
//!   `/status`, and the operator's paths handed to [`NodeFigures::admin`].

mod endpoint;
mod registry;
mod render;
#[cfg(test)]
mod test_support;
mod text;

pub use endpoint::{serve, NodeFigures};
pub use registry::{LatencySummary, Metrics, PauseReason};
pub use render::{IndexFigures, StreamFigures};
