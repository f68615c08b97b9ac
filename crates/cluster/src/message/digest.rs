//! The digest of a replica's read answer, for digest reads: the coordinator asks one replica
//! for data and the others for a digest of what they would return, and compares.
//!
//! Two replicas holding the same rows must compute the same digest, so it hashes a canonical
//! encoding: each row as it travels in a read response of frame version 1 (token, keys, then the
//! row in the frozen layout of `row_v1.rs` after its newest timestamp), in read order;
//! then the partition's range and partition tombstones, laid out the same way. That layout is
//! deterministic for a given [`Row`](hayate_storage::Row) (cells in their stored order, an
//! expiry without a TTL not written), so equal rows hash equally; and it is frozen, so replicas
//! of every build, before and after the row format of version 4, agree. `more` is left out:
//! whether a replica stopped at the limit says nothing about the rows it holds.
//!
//! MD5, as Cassandra's digests are: it is not a defence against an adversary (replicas trust
//! each other), only a cheap way to notice that two answers differ.

use md5::{Digest as _, Md5};

use super::payload::{put_replica_row, put_replica_tombstones};
use crate::replica::ReadResponse;

/// Rows are encoded into a scratch buffer and hashed once it holds this much, so a large
/// answer is not copied whole.
const HASH_CHUNK_BYTES: usize = 64 << 10;

/// The frame version whose row layout the digest hashes: fixed, whatever version a connection
/// speaks, so that two builds hash the same rows the same way.
const DIGEST_LAYOUT_VERSION: u8 = 1;

/// The digest of `response`'s rows (not of `more`).
pub fn digest(response: &ReadResponse) -> [u8; 16] {
    let mut hasher = Md5::new();
    let mut scratch = Vec::new();
    for row in &response.rows {
        // A key past the wire's bound cannot have come from a replica; hash what it has so the
        // digest still differs from that of any other answer.
        if put_replica_row(&mut scratch, row, DIGEST_LAYOUT_VERSION).is_err() {
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
        if put_replica_tombstones(&mut scratch, t, DIGEST_LAYOUT_VERSION).is_err() {
            scratch.extend_from_slice(&t.partition);
        }
    }
    hasher.update(&scratch);
    hasher.finalize().into()
}
