//! The sending side of a stream: one chunk per request, read off the service threads and sent
//! at the node's stream rate.

use std::sync::Arc;

use super::Streams;
use crate::coordinator::messaging::Messaging;
use crate::message::Message;
use crate::node::HostId;
use crate::replica::{Replica, ReplicaError, ReplicaErrorKind, StreamRequest};
use crate::transport::Lane;

/// Answers `from`'s request for a chunk (spawns; never blocks the caller).
pub(crate) fn serve(
    streams: &Arc<Streams>,
    replica: &Arc<dyn Replica>,
    messaging: &Arc<Messaging>,
    from: HostId,
    id: u64,
    request: StreamRequest,
) {
    let (streams, replica, messaging) = (streams.clone(), replica.clone(), messaging.clone());
    tokio::spawn(async move {
        let result = {
            let Ok(_permit) = streams.exports.acquire().await else {
                return;
            };
            streams
                .blocking(move || replica.export(&request))
                .await
                .unwrap_or_else(|e| {
                    Err(ReplicaError::new(
                        ReplicaErrorKind::Failed,
                        format!("reading a stream chunk failed: {e}"),
                    ))
                })
        };
        match &result {
            Ok(chunk) => {
                streams.throttle.acquire(chunk.bytes.len() as u64).await;
                streams.progress.sent(from, chunk.records, chunk.data_bytes);
                if chunk.next.is_none() {
                    streams.progress.sent_range(from);
                }
            }
            Err(e) => tracing::warn!(to = %from, "a stream chunk could not be read: {e}"),
        }
        messaging.respond(from, Lane::Bulk, Message::StreamResponse { id, result });
    });
}
