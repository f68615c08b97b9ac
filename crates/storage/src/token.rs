//! Partition tokens and row digests.
//!
//! The token is Cassandra's `Murmur3Partitioner` token of the partition key bytes, so that a
//! driver's token-aware routing and `token(k)` in CQL agree with us bit for bit. Cassandra's
//! MurmurHash3 (x64, 128-bit) differs from the reference algorithm in one way that matters: the
//! tail bytes are sign-extended before they are shifted. We reproduce that quirk on purpose.
//!
//! The digest identifies one row (partition key, clustering key) inside its table's RAM index
//! (each table has its own index, which keeps tables apart). It is a second, independently seeded Murmur3 hash; together with the token it gives 128 bits of
//! identity across partitions and 64 bits between rows of one partition. The full key is stored
//! on the device and compared on every read, so a collision is detected, never served.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// Seed for the row digest; any constant other than Cassandra's 0 keeps it independent of the
/// token.
const DIGEST_SEED: u64 = 0x6861_7961_7465_2121;

#[inline]
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Streaming-free MurmurHash3 x64/128 as Cassandra implements it (`MurmurHash.hash3_x64_128`).
/// Returns `(h1, h2)`.
fn murmur3_cassandra(data: &[u8], seed: u64) -> (u64, u64) {
    let mut h1 = seed;
    let mut h2 = seed;
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (lo, hi) = block.split_at(8);
        let mut k1 = u64::from_le_bytes(lo.try_into().expect("8 bytes"));
        let mut k2 = u64::from_le_bytes(hi.try_into().expect("8 bytes"));
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    // Cassandra reads tail bytes as Java `byte`, which is signed: `(long) b << n` sign-extends.
    let signed = |i: usize| tail[i] as i8 as i64 as u64;
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    for i in (8..tail.len()).rev() {
        k2 ^= signed(i) << ((i - 8) * 8);
    }
    if tail.len() > 8 {
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    for i in (0..tail.len().min(8)).rev() {
        k1 ^= signed(i) << (i * 8);
    }
    if !tail.is_empty() {
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// Tokens computed since the process started, for the test that a request computes its
/// partition's token once ([`computed_tokens`]).
static TOKENS_COMPUTED: AtomicU64 = AtomicU64::new(0);

/// How many tokens [`token`] has computed in this process: a request path that hashes a
/// partition key more than once shows up here (see `hayate_storage_tokens_computed_total`).
pub fn computed_tokens() -> u64 {
    TOKENS_COMPUTED.load(Relaxed)
}

/// Cassandra's `Murmur3Partitioner` token of a serialized partition key. Computed once per
/// partition a request names, by whoever plans the request; the engine takes it with the key
/// ([`crate::RowKey`], [`crate::PartitionKey`]) rather than hashing again.
pub fn token(partition_key: &[u8]) -> i64 {
    TOKENS_COMPUTED.fetch_add(1, Relaxed);
    uncounted_token(partition_key)
}

/// [`token`], without counting: for checks that a token given with a key is the key's.
pub(crate) fn uncounted_token(partition_key: &[u8]) -> i64 {
    let (h1, _) = murmur3_cassandra(partition_key, 0);
    // Cassandra reserves i64::MIN as the ring's minimum token, so it maps it to i64::MAX.
    let t = h1 as i64;
    if t == i64::MIN {
        i64::MAX
    } else {
        t
    }
}

/// The 64-bit identity of a row inside its table's index.
pub fn digest(partition_key: &[u8], clustering_key: &[u8]) -> u64 {
    // Length-prefix the partition key so that ("ab", "c") and ("a", "bc") differ. Keys are
    // usually short: hash them from the stack, and allocate only for long ones.
    const STACK_BYTES: usize = 256;
    let len = 4 + partition_key.len() + clustering_key.len();
    let fill = |buf: &mut [u8]| {
        buf[..4].copy_from_slice(&(partition_key.len() as u32).to_le_bytes());
        buf[4..4 + partition_key.len()].copy_from_slice(partition_key);
        buf[4 + partition_key.len()..].copy_from_slice(clustering_key);
    };
    if len <= STACK_BYTES {
        let mut stack = [0u8; STACK_BYTES];
        fill(&mut stack[..len]);
        murmur3_cassandra(&stack[..len], DIGEST_SEED).0
    } else {
        let mut heap = vec![0u8; len];
        fill(&mut heap);
        murmur3_cassandra(&heap, DIGEST_SEED).0
    }
}

/// The identity, inside its table's index, of a partition's range and partition tombstones
/// (one record per partition, see `range_tombstones.rs`). The length prefix carries bit 31,
/// which no row's can (a partition key is at most 65 535 bytes), so the hashed bytes never
/// equal those of a row and the record sits apart from every row of its partition.
pub fn tombstones_digest(partition_key: &[u8]) -> u64 {
    let mut buf = Vec::with_capacity(4 + partition_key.len());
    buf.extend_from_slice(&(partition_key.len() as u32 | 1 << 31).to_le_bytes());
    buf.extend_from_slice(partition_key);
    murmur3_cassandra(&buf, DIGEST_SEED).0
}

/// The first eight bytes of a clustering key, zero-padded, as a big-endian number. Clustering
/// keys are order-preserving byte strings, so this prefix orders rows within a partition.
pub fn clustering_prefix(clustering_key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = clustering_key.len().min(8);
    b[..n].copy_from_slice(&clustering_key[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens computed by the Python cassandra-driver's `cassandra.murmur3.murmur3`, which
    /// reproduces Cassandra's partitioner; the lengths cover every tail case (0..=16 and more)
    /// and bytes >= 0x80 exercise the sign-extension quirk.
    #[test]
    fn tokens_match_cassandra() {
        for (key, expected) in crate::token::vectors::VECTORS {
            assert_eq!(token(key), *expected, "token of {key:?}");
        }
    }

    #[test]
    fn digest_separates_partition_and_clustering() {
        assert_ne!(digest(b"ab", b"c"), digest(b"a", b"bc"));
        assert_eq!(digest(b"k", b""), digest(b"k", b""));
    }

    #[test]
    fn clustering_prefix_preserves_order() {
        let keys: [&[u8]; 5] = [b"", b"\x00", b"a", b"ab", b"abcdefghij"];
        for w in keys.windows(2) {
            assert!(clustering_prefix(w[0]) <= clustering_prefix(w[1]));
        }
    }
}

#[cfg(test)]
#[path = "token_vectors.rs"]
mod vectors;
