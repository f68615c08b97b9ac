//! Streaming: moving every record of a token range from one replica to another, the way a
//! topology change hands ranges over (a node joining, leaving, replacing a dead one, or the
//! others taking a removed node's ranges).
//!
//! The receiver drives a stream: it asks the sender for one chunk of a range at a time
//! ([`crate::message::Message::StreamRequest`], on the bulk lane, so that a stream never queues
//! ahead of a read), asking for the next as soon as a chunk arrives and merging each into its
//! own replica while the next one travels ([`fetch`]). A chunk is the storage engine's stream
//! format (versioned, checksummed, refused whole if it does not verify; drawn in
//! `docs/storage-format.md`), carrying each record as stored: timestamps, TTLs, row, range and
//! partition tombstones and large rows arrive as the sender holds them, and merge like any
//! replica write, so a record that arrives twice or late changes nothing. Each chunk names where
//! the range goes on, so a stream interrupted anywhere resumes from its last chunk merged.
//!
//! The sender ([`source`]) reads the chunk on a blocking thread, at most
//! [`STREAM_EXPORTS_MAX`] at once, and sends at most `stream_throughput` bytes a second over all
//! its streams ([`Throttle`]). [`Progress`] is what `hayate netstats` and the metrics show.

mod fetch;
mod progress;
mod source;
mod throttle;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

pub use fetch::{fetch_range, FetchError, FetchRange};
pub use progress::{CountersSnapshot, Direction, Inbound, Progress, StreamStatus};
pub(crate) use source::serve;
pub use throttle::Throttle;

use crate::replica::STREAM_REQUEST_BYTES_MAX;

/// Cassandra's `stream_throughput_outbound` default: 24 MiB/s per node.
pub const STREAM_THROUGHPUT_DEFAULT_BYTES_PER_S: u64 = 24 << 20;
/// Records a receiver asks for in one chunk: large enough that a chunk's round trip costs
/// little against its bytes, and that the sender, which reads a chunk's records in device order
/// joining neighbours, reads many of a block at once (measured on a file device: 31k records/s
/// at 4 MiB, 38k at 16 MiB, 54k at 64 MiB; `storage/src/stream/export.rs`); small enough that a
/// resumed stream sends little twice.
pub const CHUNK_BYTES_DEFAULT: u32 = 16 << 20;
/// Chunks a node reads for senders at once: each holds up to a chunk of memory and a blocking
/// thread.
pub const STREAM_EXPORTS_MAX: usize = 4;

/// A node's streaming: its outbound rate, its reads for senders, and every stream's progress.
pub struct Streams {
    pub throttle: Throttle,
    pub progress: Arc<Progress>,
    exports: tokio::sync::Semaphore,
    chunk_bytes: AtomicU32,
    /// Run the device work of streams on the caller's task rather than the blocking pool.
    inline_blocking: AtomicBool,
}

impl Streams {
    /// Streams sent at most `throughput_bytes_per_s` (0: unthrottled).
    pub fn new(throughput_bytes_per_s: u64) -> Arc<Streams> {
        Arc::new(Streams {
            throttle: Throttle::new(throughput_bytes_per_s),
            progress: Arc::new(Progress::default()),
            exports: tokio::sync::Semaphore::new(STREAM_EXPORTS_MAX),
            chunk_bytes: AtomicU32::new(CHUNK_BYTES_DEFAULT),
            inline_blocking: AtomicBool::new(false),
        })
    }

    /// Runs the device work of streams and topology changes (a chunk's export or import, a
    /// checkpoint's sync, a range's size) inline on the caller's task rather than on the
    /// blocking pool. Only for a simulation on one thread with paused time: the pool's threads
    /// finish when the machine lets them, which would make two runs of one seed differ.
    pub fn set_inline_blocking(&self, inline: bool) {
        self.inline_blocking.store(inline, Ordering::Relaxed);
    }

    /// Runs `work`, which blocks on the device, on the blocking pool (or inline, see
    /// [`Streams::set_inline_blocking`]); `Err` if it panicked there.
    pub async fn blocking<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, String> {
        if self.inline_blocking.load(Ordering::Relaxed) {
            return Ok(work());
        }
        tokio::task::spawn_blocking(work).await.map_err(|e| e.to_string())
    }

    /// The bytes of records this node asks for per chunk when it receives.
    pub fn chunk_bytes(&self) -> u32 {
        self.chunk_bytes.load(Ordering::Relaxed)
    }

    /// Sets the chunk size asked for (tests use small chunks to cross many boundaries).
    pub fn set_chunk_bytes(&self, bytes: u32) {
        self.chunk_bytes
            .store(bytes.clamp(1, STREAM_REQUEST_BYTES_MAX as u32), Ordering::Relaxed);
    }
}
