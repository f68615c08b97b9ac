//! The digest of a replica's read answer, for digest reads: the coordinator asks one replica
//! for data and the others for a digest of what they would return, and compares.
//!
//! Two replicas holding the same rows must compute the same digest, so it hashes a canonical
//! encoding: each row as it travels in a read response (token, keys, then the row in the
//! storage engine's body encoding after its newest timestamp), in read order. The body
//! encoding is deterministic for a given [`Row`](hayate_storage::Row) (cells in their stored
//! order, an expiry without a TTL not written), so equal rows hash equally; then the partition's
//! range and partition tombstones, in their stored encoding. `more` is left out: whether a
//! replica stopped at the limit says nothing about the rows it holds.
//!
//! MD5, as Cassandra's digests are: it is not a defence against an adversary (replicas trust
//! each other), only a cheap way to notice that two answers differ.

use md5::{Digest as _, Md5};

use super::payload::{put_replica_row, put_replica_tombstones};
use crate::replica::ReadResponse;

/// Rows are encoded into a scratch buffer and hashed once it holds this much, so a large
/// answer is not copied whole.
const HASH_CHUNK_BYTES: usize = 64 << 10;

/// The digest of `response`'s rows (not of `more`).
pub fn digest(response: &ReadResponse) -> [u8; 16] {
    let mut hasher = Md5::new();
    let mut scratch = Vec::new();
    for row in &response.rows {
        // A key past the wire's bound cannot have come from a replica; hash what it has so the
        // digest still differs from that of any other answer.
        if put_replica_row(&mut scratch, row).is_err() {
            scratch.extend_from_slice(&row.partition);
            scratch.extend_from_slice(&row.clustering);
        }
        if scratch.len() >= HASH_CHUNK_BYTES {
            hasher.update(&scratch);
            scratch.clear();
        }
    }
    // The partition's tombstones count too: a replica that missed a range delete answers with
    // another digest, even where it holds no row the delete covers.
    for t in &response.tombstones {
        scratch.push(b'T');
        if put_replica_tombstones(&mut scratch, t).is_err() {
            scratch.extend_from_slice(&t.partition);
        }
    }
    hasher.update(&scratch);
    hasher.finalize().into()
}
