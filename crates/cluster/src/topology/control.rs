//! The control messages of a topology change, between nodes: small and rare, so JSON (as the
//! metadata log's), in `TopologyRequest` and `TopologyResponse` frames.

use std::sync::Arc;
use std::time::Duration;

use hayate_storage::TableId;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::coordinator::messaging::{Messaging, Waiting};
use crate::message::Message;
use crate::node::HostId;
use crate::ring::TokenRange;
use crate::transport::Lane;

/// A range of a table, as control messages and checkpoints name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Span {
    pub table: TableId,
    pub start_exclusive: i64,
    pub end_inclusive: i64,
}

impl Span {
    pub fn new(table: TableId, range: TokenRange) -> Span {
        Span {
            table,
            start_exclusive: range.start_exclusive,
            end_inclusive: range.end_inclusive,
        }
    }

    pub fn range(&self) -> TokenRange {
        TokenRange {
            start_exclusive: self.start_exclusive,
            end_inclusive: self.end_inclusive,
        }
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "table {} tokens ({}, {}]",
            self.table, self.start_exclusive, self.end_inclusive
        )
    }
}

/// A range to take over and where it may come from, best source first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanFrom {
    pub span: Span,
    pub sources: Vec<HostId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// Answer once this node plans its requests on a ring of `epoch` or later and none it
    /// planned on an older ring runs (`Coordinator::is_drained`), or say it is not there yet.
    Drain { epoch: u64 },
    /// How many records and bytes these ranges hold here.
    Sizes { spans: Vec<Span> },
    /// Take these ranges over for the change started at epoch `change` (a decommission or a
    /// removal, which the leaving node or the node removing a dead one drives): stream them
    /// from their sources. Answered when done, or after a while with the progress so far: ask
    /// again (the streams go on meanwhile, and a repeated ask joins them).
    Fetch {
        change: u64,
        purpose: String,
        spans: Vec<SpanFrom>,
    },
    /// Keep these hints for `target` as this node's own (a decommissioned node hands its hints
    /// over, `hints.rs`). Answered `Kept` once every one is stored.
    KeepHints { target: HostId, hints: Vec<HandedHint> },
}

/// A hint handed over: its creation time and its payload (the encoded mutation message), in
/// hex, as JSON carries bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandedHint {
    pub created_at_us: i64,
    pub payload_hex: String,
}

impl HandedHint {
    pub fn new(created_at_us: i64, payload: &[u8]) -> HandedHint {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(payload.len() * 2);
        for b in payload {
            hex.push(DIGITS[usize::from(b >> 4)] as char);
            hex.push(DIGITS[usize::from(b & 0xf)] as char);
        }
        HandedHint {
            created_at_us,
            payload_hex: hex,
        }
    }

    pub fn payload(&self) -> Result<Vec<u8>, String> {
        let digits = self.payload_hex.as_bytes();
        if !digits.len().is_multiple_of(2) {
            return Err("an odd number of hex digits".to_owned());
        }
        let value = |c: u8| {
            (c as char)
                .to_digit(16)
                .ok_or_else(|| format!("{:?} is not a hex digit", c as char))
        };
        digits
            .chunks(2)
            .map(|pair| Ok((value(pair[0])? * 16 + value(pair[1])?) as u8))
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Drained {
        drained: bool,
        epoch: u64,
    },
    Sizes {
        sizes: Vec<(u64, u64)>,
    },
    Fetching {
        spans_done: u64,
        spans_total: u64,
    },
    Fetched,
    /// Every hint of a `KeepHints` call is stored.
    Kept,
    /// The fetch failed in a way another try cannot mend (a full device): the change must be
    /// aborted; `reason` says what to do.
    Failed {
        reason: String,
    },
    /// The call did not decode, or this node is not ready for it.
    Refused {
        reason: String,
    },
}

/// Sends `call` to `to` and waits at most `timeout` for the answer.
pub(crate) async fn call(
    messaging: &Arc<Messaging>,
    to: HostId,
    call: &Call,
    timeout: Duration,
) -> Result<Answer, String> {
    let payload = serde_json::to_vec(call).expect("a topology call serializes");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut waiting = Waiting::new(messaging.clone());
    let id = messaging
        .request(to, Lane::Requests, &tx, |id| Message::TopologyRequest {
            id,
            payload,
        })
        .ok_or_else(|| format!("{to} cannot be asked (too many requests wait for answers)"))?;
    waiting.push(id);
    match tokio::time::timeout(timeout, rx.recv()).await {
        Ok(Some((_, Message::TopologyResponse { payload, .. }))) if payload.is_empty() => {
            Err(format!("{to} went down before it answered"))
        }
        Ok(Some((_, Message::TopologyResponse { payload, .. }))) => serde_json::from_slice(&payload)
            .map_err(|e| format!("{to} answered what this node cannot read: {e}")),
        Ok(_) => Err(format!("{to} answered with another kind of message")),
        Err(_) => Err(format!("{to} did not answer within {} s", timeout.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handed_hint_carries_its_bytes_exactly() {
        let payload: Vec<u8> = (0..=255).collect();
        let hint = HandedHint::new(42, &payload);
        assert_eq!(hint.payload().expect("decodes"), payload);
        let json = serde_json::to_string(&hint).expect("serializes");
        let back: HandedHint = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, hint);
        for bad in ["abc", "zz", "0g"] {
            let hint = HandedHint {
                created_at_us: 0,
                payload_hex: bad.to_owned(),
            };
            assert!(hint.payload().is_err(), "{bad}");
        }
    }
}
