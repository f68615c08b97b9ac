//! How a row's primary key becomes the storage engine's key, and back.
//!
//! The partition key is serialized as Cassandra serializes it for the token: one column's value
//! as is; several as `<u16 length><bytes><0x00>` each (`CompositeType`), so tokens, and with
//! them token-aware routing in every driver, agree with Cassandra's.
//!
//! The clustering key is the concatenation of each clustering column's order-preserving
//! encoding ([`hayate_cql::value::encode_order_key`]), inverted for `DESC` columns, so the
//! engine's byte order is the table's clustering order and range reads are byte ranges.

use std::ops::Bound;

use hayate_cql::value::{decode_order_key, encode_order_key};

use crate::error::{invalid, QueryResult};
use crate::schema::Table;

/// Serializes a partition key from its components, in key order.
pub fn partition_key(components: &[&[u8]]) -> QueryResult<Vec<u8>> {
    if let [one] = components {
        return Ok(one.to_vec());
    }
    let mut out = Vec::with_capacity(components.iter().map(|c| c.len() + 3).sum());
    for c in components {
        let len = u16::try_from(c.len()).map_err(|_| {
            invalid(format!(
                "Partition key component of {} bytes is too long",
                c.len()
            ))
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(c);
        out.push(0);
    }
    Ok(out)
}

/// The components of a serialized partition key.
pub fn split_partition_key(table: &Table, key: &[u8]) -> Vec<Vec<u8>> {
    if table.partition_key.len() == 1 {
        return vec![key.to_vec()];
    }
    let mut out = Vec::with_capacity(table.partition_key.len());
    let mut rest = key;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        if rest.len() < 2 + len + 1 {
            break;
        }
        out.push(rest[2..2 + len].to_vec());
        rest = &rest[2 + len + 1..];
    }
    out
}

/// The clustering key of a row from its clustering values, in clustering order. With fewer
/// values than clustering columns, this is a prefix (for range bounds).
pub fn clustering_key(table: &Table, values: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let col = &table.columns[table.clustering[i]];
        encode_order_key(&col.ty, v, col.descending, &mut out);
    }
    out
}

/// The clustering values of a stored clustering key.
pub fn split_clustering_key(table: &Table, key: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(table.clustering.len());
    let mut rest = key;
    for &i in &table.clustering {
        let col = &table.columns[i];
        let mut v = Vec::new();
        if decode_order_key(&col.ty, col.descending, &mut rest, &mut v).is_err() {
            tracing::error!(
                table = %format!("{}.{}", table.keyspace, table.name),
                "a stored clustering key does not decode; the row is shown with empty clustering values"
            );
        }
        out.push(v);
    }
    out
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None`
/// if there is none (the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last != 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// A range of clustering keys in byte order, as the engine reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusteringRange {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

impl ClusteringRange {
    pub fn all() -> ClusteringRange {
        ClusteringRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Every row whose key starts with `prefix`.
    pub fn prefix(prefix: Vec<u8>) -> ClusteringRange {
        if prefix.is_empty() {
            return ClusteringRange::all();
        }
        ClusteringRange {
            end: match prefix_successor(&prefix) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            },
            start: Bound::Included(prefix),
        }
    }

    /// Start after (or at) every row starting with `prefix`.
    pub fn start_at(prefix: Vec<u8>, inclusive: bool) -> Bound<Vec<u8>> {
        if inclusive {
            Bound::Included(prefix)
        } else {
            match prefix_successor(&prefix) {
                Some(s) => Bound::Included(s),
                // Nothing is greater than an all-0xFF prefix's extensions: an empty range.
                None => Bound::Excluded(vec![0xFF; prefix.len() + 1]),
            }
        }
    }

    /// End before (or after) every row starting with `prefix`.
    pub fn end_at(prefix: Vec<u8>, inclusive: bool) -> Bound<Vec<u8>> {
        if inclusive {
            match prefix_successor(&prefix) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            }
        } else {
            Bound::Excluded(prefix)
        }
    }

    pub fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
            _ => false,
        }
    }

    #[cfg(test)]
    pub fn contains(&self, key: &[u8]) -> bool {
        let after = match &self.start {
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before = match &self.end {
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
            Bound::Unbounded => true,
        };
        after && before
    }

    /// Narrows the range to keys after `key` (forward paging) or before it (reverse).
    pub fn resume_after(&mut self, key: Vec<u8>, reverse: bool) {
        if reverse {
            self.end = Bound::Excluded(key);
        } else {
            self.start = Bound::Excluded(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_partition_keys_round_trip() {
        let key = partition_key(&[b"ab", b"", b"xyz"]).expect("fits");
        assert_eq!(key, [0, 2, b'a', b'b', 0, 0, 0, 0, 0, 3, b'x', b'y', b'z', 0]);
    }

    #[test]
    fn prefix_successor_skips_trailing_ff() {
        assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
    }

    #[test]
    fn a_prefix_range_holds_exactly_its_extensions() {
        let r = ClusteringRange::prefix(vec![5, 0xFF]);
        assert!(r.contains(&[5, 0xFF]));
        assert!(r.contains(&[5, 0xFF, 0, 1]));
        assert!(r.contains(&[5, 0xFF, 0xFF, 0xFF]));
        assert!(!r.contains(&[6]));
        assert!(!r.contains(&[5, 0xFE, 0xFF]));
    }
}
