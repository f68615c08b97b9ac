//! The keys and positions of the engine's API: which row ([`RowKey`]), where a scan starts or
//! resumes ([`ScanFrom`], [`RowsFrom`], [`ScanPosition`]), the rows a read returns
//! ([`StoredRow`], [`RowsPage`]), and the limits on their sizes.

use crate::index::IndexKey;
use crate::range_tombstones::PartitionTombstones;
use crate::row::Row;
use crate::token::{clustering_prefix, digest, token, uncounted_token};

/// Cassandra's limit on a partition key, and ours on a clustering key.
pub const KEY_MAX_BYTES: usize = u16::MAX as usize;
/// The most one row may hold, encoded. A row larger than a write block is written in chunks;
/// this is twice Cassandra's 16 MiB limit on one mutation, so that a row built up by several
/// writes still fits, and well within one internode message.
pub const ROW_MAX_BYTES: usize = 32 << 20;

/// A table, as the schema numbers it.
pub type TableId = u32;

/// A partition's address: table, Murmur3 token and serialized partition key (the bytes
/// Cassandra hashes for the token). The token is computed once, where the request is planned
/// ([`PartitionKey::new`]), and travels with the key to every replica: the engine never hashes
/// a key it is given with its token.
#[derive(Clone, Copy, Debug)]
pub struct PartitionKey<'a> {
    pub table: TableId,
    pub token: i64,
    pub key: &'a [u8],
}

impl<'a> PartitionKey<'a> {
    /// The address of `key` in `table`, computing its token.
    pub fn new(table: TableId, key: &'a [u8]) -> PartitionKey<'a> {
        PartitionKey {
            table,
            token: token(key),
            key,
        }
    }

    /// The row at `clustering` in this partition.
    pub fn row(self, clustering: &'a [u8]) -> RowKey<'a> {
        RowKey {
            table: self.table,
            token: self.token,
            partition: self.key,
            clustering,
        }
    }

    /// A token given with a key is the key's (checked in debug builds: a wrong one would file
    /// the row where no read of that key looks).
    pub(crate) fn checked_token(&self) -> i64 {
        debug_assert_eq!(
            self.token,
            uncounted_token(self.key),
            "a partition key came with another key's token"
        );
        self.token
    }
}

/// The primary key of one row, with its partition's token: table, token, serialized partition
/// key and clustering key (an order-preserving encoding; empty for tables without clustering
/// columns). See [`PartitionKey`] for where the token comes from.
#[derive(Clone, Copy, Debug)]
pub struct RowKey<'a> {
    pub table: TableId,
    pub token: i64,
    pub partition: &'a [u8],
    pub clustering: &'a [u8],
}

impl<'a> RowKey<'a> {
    /// The key of a row, computing its partition's token.
    pub fn new(table: TableId, partition: &'a [u8], clustering: &'a [u8]) -> RowKey<'a> {
        PartitionKey::new(table, partition).row(clustering)
    }

    /// The partition the row is in.
    pub fn partition_key(&self) -> PartitionKey<'a> {
        PartitionKey {
            table: self.table,
            token: self.token,
            key: self.partition,
        }
    }

    /// The row's place in its table's index: the token it came with, and its digest.
    pub(crate) fn index_key(&self) -> IndexKey {
        IndexKey {
            token: self.partition_key().checked_token(),
            clustering_prefix: clustering_prefix(self.clustering),
            digest: digest(self.partition, self.clustering),
        }
    }
}

/// A row returned by a read or scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    pub token: i64,
    pub partition_key: Vec<u8>,
    pub clustering_key: Vec<u8>,
    pub row: Row,
    /// Where a scan that stopped here resumes (pass it to [`Engine::scan`]).
    pub position: ScanPosition,
}

/// A place in a table's index order, for paging through a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScanPosition(pub(crate) IndexKey);

impl ScanPosition {
    pub const BYTES: usize = 24;

    pub fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[..8].copy_from_slice(&self.0.token.to_be_bytes());
        b[8..16].copy_from_slice(&self.0.clustering_prefix.to_be_bytes());
        b[16..].copy_from_slice(&self.0.digest.to_be_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<ScanPosition> {
        if b.len() != Self::BYTES {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            w
        };
        Some(ScanPosition(IndexKey {
            token: i64::from_be_bytes(word(0)),
            clustering_prefix: u64::from_be_bytes(word(8)),
            digest: u64::from_be_bytes(word(16)),
        }))
    }
}

/// Rows that are not live (deleted or expired) one raw read returns at most, besides its live
/// rows: Cassandra's `tombstone_failure_threshold` bounds the same thing.
pub const TOMBSTONES_PER_READ_MAX: usize = 100_000;

/// Where an ordered scan ([`Engine::scan_rows`]) begins.
#[derive(Clone, Copy, Debug)]
pub enum RowsFrom<'a> {
    /// At the first row whose token is at least this.
    Token(i64),
    /// Just after a row (`clustering: Some`), or after every row of a partition (`None`).
    After {
        token: i64,
        partition: &'a [u8],
        clustering: Option<&'a [u8]>,
    },
}

/// Rows as stored, from a raw read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowsPage {
    pub rows: Vec<StoredRow>,
    /// The read stopped at its limit: there may be more rows after the last one.
    pub more: bool,
    /// A partition read's: the partition's range and partition tombstones, which were merged
    /// into its rows (`None` for a scan, and for a partition without any).
    pub tombstones: Option<PartitionTombstones>,
}

/// Where a scan starts.
#[derive(Clone, Copy, Debug)]
pub enum ScanFrom {
    /// At the first row whose token is at least this.
    Token(i64),
    /// Just after a row a previous scan returned.
    After(ScanPosition),
}
