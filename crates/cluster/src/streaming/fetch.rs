//! The receiving side of a stream: pull a range from one sender, chunk by chunk, with the next
//! chunk on its way while this one merges.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Inbound, Streams};
use crate::coordinator::messaging::{Messaging, Reply, Waiting};
use crate::message::Message;
use crate::node::HostId;
use crate::replica::{
    RangeSize, Replica, ReplicaError, ReplicaErrorKind, StreamChunk, StreamRequest, STREAM_POSITION_BYTES,
};
use crate::ring::TokenRange;
use crate::transport::Lane;
use hayate_storage::TableId;

/// How long one chunk may take to arrive: the sender reads it, waits for its rate, and sends it
/// behind other streams' chunks on the bulk lane.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(120);

/// One range of one table to pull, from where an earlier stream left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRange {
    pub table: TableId,
    pub range: TokenRange,
    pub after: Option<[u8; STREAM_POSITION_BYTES]>,
}

/// Why a range was not pulled to its end.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FetchError {
    /// The sender could not read the range (its error says why).
    Source { host: HostId, error: ReplicaError },
    /// The sender went down, or could not be asked.
    Unreachable { host: HostId },
    /// No chunk arrived within the timeout.
    Timeout { host: HostId },
    /// This node could not merge a chunk (a full device, a chunk that does not verify).
    Import(ReplicaError),
}

impl FetchError {
    /// True if another try (perhaps from another sender) may succeed; false for a failure of
    /// this node, such as a full device, that the operator must fix.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, FetchError::Import(e) if e.kind == ReplicaErrorKind::Refused)
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Source { host, error } => write!(f, "{host} could not send the range: {error}"),
            FetchError::Unreachable { host } => write!(f, "{host} is down or unreachable"),
            FetchError::Timeout { host } => {
                write!(f, "{host} sent no chunk within {} s", CHUNK_TIMEOUT.as_secs())
            }
            FetchError::Import(e) => write!(f, "this node could not store a chunk: {e}"),
        }
    }
}

impl std::error::Error for FetchError {}

/// Pulls `fetch` from `source` into `replica` to the end of the range. After each chunk is
/// merged, `reached` is told where the range goes on (`None`: it is complete), so that a caller
/// can record how far it got and resume there. Returns the first range total the sender
/// reported (with its first chunk), if it did.
pub async fn fetch_range(
    messaging: &Arc<Messaging>,
    replica: &Arc<dyn Replica>,
    streams: &Streams,
    source: HostId,
    fetch: &FetchRange,
    inbound: &Inbound,
    mut reached: impl FnMut(Option<[u8; STREAM_POSITION_BYTES]>),
) -> Result<Option<RangeSize>, FetchError> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
    let mut waiting = Waiting::new(messaging.clone());
    let ask = |after: Option<[u8; STREAM_POSITION_BYTES]>, waiting: &mut Waiting| {
        let request = StreamRequest {
            table: fetch.table,
            range: fetch.range,
            after,
            max_bytes: streams.chunk_bytes(),
        };
        messaging
            .request(source, Lane::Bulk, &tx, |id| Message::StreamRequest {
                id,
                request,
            })
            .map(|id| waiting.push(id))
            .ok_or(FetchError::Unreachable { host: source })
    };
    ask(fetch.after, &mut waiting)?;
    let mut total = None;
    loop {
        let chunk = match tokio::time::timeout(CHUNK_TIMEOUT, rx.recv()).await {
            Ok(Some((
                _,
                Message::StreamResponse {
                    result: Ok(chunk), ..
                },
            ))) => chunk,
            Ok(Some((_, Message::StreamResponse { result: Err(e), .. }))) => {
                return Err(match e.kind {
                    ReplicaErrorKind::Unreachable => FetchError::Unreachable { host: source },
                    _ => FetchError::Source {
                        host: source,
                        error: e,
                    },
                })
            }
            Ok(Some(_)) => continue,
            Ok(None) => return Err(FetchError::Unreachable { host: source }),
            Err(_) => return Err(FetchError::Timeout { host: source }),
        };
        // The next chunk travels while this one merges.
        if chunk.next.is_some() {
            ask(chunk.next, &mut waiting)?;
        }
        if total.is_none() {
            total = chunk.total;
        }
        let StreamChunk {
            bytes,
            records,
            data_bytes,
            next,
            ..
        } = chunk;
        let (r, table) = (replica.clone(), fetch.table);
        streams
            .blocking(move || r.import(table, &bytes))
            .await
            .unwrap_or_else(|e| {
                Err(ReplicaError::new(
                    ReplicaErrorKind::Failed,
                    format!("import failed: {e}"),
                ))
            })
            .map_err(FetchError::Import)?;
        inbound.chunk(records, data_bytes);
        reached(next);
        if next.is_none() {
            return Ok(total);
        }
    }
}
