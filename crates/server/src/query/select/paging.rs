//! The paging state of a SELECT. It is ours to define (drivers hand it back untouched). It
//! names a position in the data, not in one node's index, so a driver may resume a page on any
//! coordinator:
//!
//! ```text
//! [version u8 = 2][kind u8][rows returned so far u64][rows of the current partition u32]
//! kind 1, by partition: [index of the partition in the statement's partitions, in token
//!                        order, u32][clustering key of the last row: u32 length, bytes;
//!                        length u32::MAX: start the partition from its beginning]
//! kind 2, by scan:      [token i64][partition key: u32 length, bytes][clustering key of the
//!                        last row: u32 length, bytes; u32::MAX: after the whole partition]
//! kind 3, built-in:     [rows skipped u64]
//! ```

use hayate_cluster::replica::RowPosition;

use super::sink::Sink;
use crate::error::{invalid, QueryResult};

pub(super) const PAGING_VERSION: u8 = 2;
pub(super) const KIND_PARTITION: u8 = 1;
pub(super) const KIND_SCAN: u8 = 2;
pub(super) const KIND_BUILT_IN: u8 = 3;

/// Decoded paging state.
#[derive(Default)]
pub(super) struct Resume {
    pub(super) returned: u64,
    pub(super) partition_rows: u32,
    pub(super) partition_index: usize,
    pub(super) clustering: Option<Vec<u8>>,
    pub(super) scan: Option<RowPosition>,
    pub(super) skipped: u64,
}

/// Reads a paging state; anything we did not write is refused, never trusted.
pub(super) fn decode_paging(state: &[u8]) -> QueryResult<(u8, Resume)> {
    let bad = || invalid("Invalid paging state: it was not made by this server for this query");
    let mut c = Cursor(state);
    let head = c.take(2).ok_or_else(bad)?;
    if head[0] != PAGING_VERSION {
        return Err(bad());
    }
    let kind = head[1];
    let mut resume = Resume {
        returned: c.u64().ok_or_else(bad)?,
        partition_rows: c.u32().ok_or_else(bad)?,
        ..Resume::default()
    };
    match kind {
        KIND_PARTITION => {
            resume.partition_index = c.u32().ok_or_else(bad)? as usize;
            resume.clustering = c.bytes().ok_or_else(bad)?;
        }
        KIND_SCAN => {
            let token = c.u64().ok_or_else(bad)? as i64;
            let partition = c.bytes().ok_or_else(bad)?.ok_or_else(bad)?;
            let clustering = c.bytes().ok_or_else(bad)?;
            resume.scan = Some(RowPosition {
                token,
                partition,
                clustering,
            });
        }
        KIND_BUILT_IN => resume.skipped = c.u64().ok_or_else(bad)?,
        _ => return Err(bad()),
    }
    if !c.0.is_empty() {
        return Err(bad());
    }
    Ok((kind, resume))
}

/// Reads big-endian fields off the front of a paging state.
pub(super) struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A length-prefixed byte string; the length u32::MAX stands for "none".
    pub(super) fn bytes(&mut self) -> Option<Option<Vec<u8>>> {
        let len = self.u32()?;
        if len == u32::MAX {
            return Some(None);
        }
        Some(Some(self.take(len as usize)?.to_vec()))
    }
}

pub(super) fn paging_head(kind: u8, returned: u64, partition_rows: u32) -> Vec<u8> {
    let mut s = vec![PAGING_VERSION, kind];
    s.extend_from_slice(&returned.to_be_bytes());
    s.extend_from_slice(&partition_rows.to_be_bytes());
    s
}

pub(super) fn put_bytes(s: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            s.extend_from_slice(&(b.len() as u32).to_be_bytes());
            s.extend_from_slice(b);
        }
        None => s.extend_from_slice(&u32::MAX.to_be_bytes()),
    }
}

/// Resume a scan after the row at `clustering` of `partition`, or after the whole partition.
pub(super) fn scan_state(
    sink: &Sink<'_>,
    token: i64,
    partition: &[u8],
    clustering: Option<&[u8]>,
) -> Vec<u8> {
    let mut s = paging_head(KIND_SCAN, sink.returned, sink.partition_rows);
    s.extend_from_slice(&token.to_be_bytes());
    put_bytes(&mut s, Some(partition));
    put_bytes(&mut s, clustering);
    s
}

/// Resume in partition `pi` after the row with clustering key `last`, or at its start.
pub(super) fn partition_state(sink: &Sink<'_>, pi: usize, last: Option<&[u8]>) -> Vec<u8> {
    let partition_rows = if last.is_some() { sink.partition_rows } else { 0 };
    let mut s = paging_head(KIND_PARTITION, sink.returned, partition_rows);
    s.extend_from_slice(&(pi as u32).to_be_bytes());
    put_bytes(&mut s, last);
    s
}
