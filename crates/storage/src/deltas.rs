//! Deltas: updates written without reading the row first.
//!
//! An update that only sets cells (no deletion, no TTL) of a row whose whole version is on the
//! device need not read that version: it appends a **delta record** holding just the cells it
//! sets (`FLAG_DELTA` in the record's flags), and keeps the same cells here, in RAM, keyed by
//! the row. The index entry keeps pointing at the whole version (the delta's *base*) and gains
//! `FLAG_DELTA`, so a read still costs one device read: the base from the device, the delta from
//! RAM, merged. A second update of the row merges into the delta here and appends the merged
//! delta, so a row has at most one live delta record.
//!
//! A delta is **folded** (the row written whole again, base and delta record both dead) when:
//! - a one-row read has just read the base and merged it (`fold_after_read`): the row is at
//!   hand, so folding costs a write and no read;
//! - defragmentation moves the base: the block is in memory, so again no read;
//! - a write that is not blind (a deletion, a TTL) reads the row, as every write did before.
//!
//! The buffer holds at most `delta_buffer_bytes`, the last sixteenth for rows that already have
//! a delta; an update that finds it full reads the row and writes it whole, as before. With
//! uniform keys the reads a blind update saves come back only when the row is read again while
//! its delta is here, so the buffer's size decides the saving (`bench/blind-updates.py` models
//! it).
//!
//! Cold start finds each row's newest delta record and keeps it if it is newer than the row's
//! newest whole version (`recovery.rs`); a clean shutdown saves the buffer in the index
//! snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use crate::format::record::decode_body;
use crate::format::DecodeError;
use crate::index::{IndexKey, Location};
use crate::row::Row;
use crate::TableId;

const SHARDS: usize = 64;
/// New deltas stop at `budget - budget / RESERVE_SHARE`; the rest is for rows that already have
/// a delta. Reads and defragmentation fold deltas as fast as updates make them, so the buffer
/// runs full: without a reserve, a second update of a row whose delta grows would find no room
/// and read the row, a device read that the delta existed to save.
const RESERVE_SHARE: u64 = 16;
/// What a delta costs in RAM beyond its body: the map's slot (key and fields, 72 bytes) at the
/// map's load factor, and the allocator's rounding and header for the body. Measured, not
/// derived: `examples/delta_ram.rs` found the process's RSS grow by 295 bytes per one-column
/// YCSB delta, whose body is 107 bytes.
pub(crate) const DELTA_OVERHEAD_BYTES: u64 = 192;

/// A row's pending delta, decoded.
pub(crate) struct Pending {
    pub cells: Row,
    /// The delta's record on the device.
    pub location: Location,
    pub ram_bytes: u64,
}

/// One row's pending delta.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Delta {
    /// The whole version the delta applies over: the index entry's location when it was written.
    pub base: Location,
    /// The delta's record on the device.
    pub location: Location,
    /// The record's write timestamp, which the body's timestamps are relative to.
    pub write_timestamp_us: i64,
    /// The cells, encoded as a record body (`format::record::encode_body`).
    pub body: Box<[u8]>,
}

impl Delta {
    pub fn ram_bytes(&self) -> u64 {
        self.body.len() as u64 + DELTA_OVERHEAD_BYTES
    }
}

type Key = (TableId, IndexKey);

/// The pending deltas of a namespace, in shards by row.
pub(crate) struct Deltas {
    shards: Vec<Mutex<HashMap<Key, Delta>>>,
    bytes: AtomicU64,
    count: AtomicU64,
    budget: u64,
}

impl Deltas {
    pub fn new(budget_bytes: u64) -> Deltas {
        Deltas {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            bytes: AtomicU64::new(0),
            count: AtomicU64::new(0),
            budget: budget_bytes,
        }
    }

    /// True if updates may be written as deltas at all.
    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    fn shard(&self, key: &Key) -> MutexGuard<'_, HashMap<Key, Delta>> {
        let i = (key.1.digest ^ u64::from(key.0).rotate_left(17)) as usize % SHARDS;
        self.shards[i].lock().expect("deltas lock poisoned")
    }

    /// True if a delta of `bytes` may be taken: by a row without one (`replacing` is `None`),
    /// within the budget less its last part ([`RESERVE_SHARE`]); or in place of the row's delta
    /// of `replacing` bytes, within the whole budget.
    pub fn has_room(&self, bytes: u64, replacing: Option<u64>) -> bool {
        let limit = match replacing {
            None => self.budget - self.budget / RESERVE_SHARE,
            Some(old) => self.budget + old,
        };
        self.bytes.load(Relaxed) + bytes <= limit
    }

    /// A copy of the row's delta, if it has one.
    pub fn get(&self, table: TableId, key: &IndexKey) -> Option<Delta> {
        self.shard(&(table, *key)).get(&(table, *key)).cloned()
    }

    /// The row's delta decoded (without copying its body out first), if it has one and, when
    /// `base` is given, the delta applies over that whole version. `Err` names the delta's
    /// record, whose cells do not decode.
    pub fn pending(
        &self,
        table: TableId,
        key: &IndexKey,
        base: Option<Location>,
    ) -> Option<Result<Pending, (Location, DecodeError)>> {
        let shard = self.shard(&(table, *key));
        let d = shard
            .get(&(table, *key))
            .filter(|d| base.is_none_or(|b| b == d.base))?;
        Some(match decode_body(&d.body, d.write_timestamp_us) {
            Ok(cells) => Ok(Pending {
                cells,
                location: d.location,
                ram_bytes: d.ram_bytes(),
            }),
            Err(detail) => Err((d.location, detail)),
        })
    }

    /// The delta's record location, if the row has a delta.
    pub fn location(&self, table: TableId, key: &IndexKey) -> Option<Location> {
        self.shard(&(table, *key)).get(&(table, *key)).map(|d| d.location)
    }

    /// Sets the row's delta; returns the one it replaces.
    pub fn insert(&self, table: TableId, key: IndexKey, delta: Delta) -> Option<Delta> {
        let added = delta.ram_bytes();
        let old = self.shard(&(table, key)).insert((table, key), delta);
        self.bytes.fetch_add(added, Relaxed);
        match &old {
            Some(o) => {
                self.bytes.fetch_sub(o.ram_bytes(), Relaxed);
            }
            None => {
                self.count.fetch_add(1, Relaxed);
            }
        }
        old
    }

    pub fn remove(&self, table: TableId, key: &IndexKey) -> Option<Delta> {
        let old = self.shard(&(table, *key)).remove(&(table, *key));
        if let Some(o) = &old {
            self.bytes.fetch_sub(o.ram_bytes(), Relaxed);
            self.count.fetch_sub(1, Relaxed);
        }
        old
    }

    /// Moves the row's delta record from `from` to `to` if it is still there (defragmentation).
    pub fn relocate(&self, table: TableId, key: &IndexKey, from: Location, to: Location) -> bool {
        match self.shard(&(table, *key)).get_mut(&(table, *key)) {
            Some(d) if d.location == from => {
                d.location = to;
                true
            }
            _ => false,
        }
    }

    /// Points the row's delta at its base's new place if the base moved from `from` as it is
    /// (defragmentation, when it could not fold the row).
    pub fn rebase(&self, table: TableId, key: &IndexKey, from: Location, to: Location) {
        if let Some(d) = self.shard(&(table, *key)).get_mut(&(table, *key)) {
            if d.base == from {
                d.base = to;
            }
        }
    }

    /// Every pending delta (the index snapshot).
    pub fn all(&self) -> Vec<(TableId, IndexKey, Delta)> {
        let mut out = Vec::with_capacity(self.count.load(Relaxed) as usize);
        for shard in &self.shards {
            let shard = shard.lock().expect("deltas lock poisoned");
            out.extend(shard.iter().map(|((t, k), d)| (*t, *k, d.clone())));
        }
        out
    }

    /// Forgets every delta (a snapshot that turned out unusable).
    pub fn clear(&self) {
        for shard in &self.shards {
            shard.lock().expect("deltas lock poisoned").clear();
        }
        self.bytes.store(0, Relaxed);
        self.count.store(0, Relaxed);
    }

    /// Pending deltas and the RAM they hold.
    pub fn usage(&self) -> (u64, u64) {
        (self.count.load(Relaxed), self.bytes.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(d: u64) -> IndexKey {
        IndexKey {
            token: 1,
            clustering_prefix: 0,
            digest: d,
        }
    }

    fn delta(body: usize, at: u32) -> Delta {
        Delta {
            base: Location::new(1, 0, 64),
            location: Location::new(2, at, 64),
            write_timestamp_us: 5,
            body: vec![0; body].into_boxed_slice(),
        }
    }

    #[test]
    fn the_budget_counts_what_is_held_and_replacing_frees_the_old_bytes() {
        let budget = 2 * (100 + DELTA_OVERHEAD_BYTES);
        let d = Deltas::new(budget);
        assert!(d.enabled());
        assert!(d.has_room(100 + DELTA_OVERHEAD_BYTES, None));
        assert_eq!(d.insert(7, key(1), delta(100, 0)), None);
        assert!(
            !d.has_room(100 + DELTA_OVERHEAD_BYTES, None),
            "the reserve is not for new rows"
        );
        assert!(
            d.has_room(100 + DELTA_OVERHEAD_BYTES, Some(0)),
            "it is for rows with a delta"
        );
        assert_eq!(d.insert(7, key(2), delta(100, 64)), None);
        assert_eq!(d.usage(), (2, budget));
        assert!(
            !d.has_room(101 + DELTA_OVERHEAD_BYTES, Some(100 + DELTA_OVERHEAD_BYTES)),
            "full"
        );
        assert!(d.has_room(100 + DELTA_OVERHEAD_BYTES, Some(100 + DELTA_OVERHEAD_BYTES)));
        let old = d.insert(7, key(2), delta(50, 128)).expect("replaced");
        assert_eq!(old.location, Location::new(2, 64, 64));
        assert_eq!(d.usage(), (2, budget - 50));
        assert!(d.relocate(7, &key(2), Location::new(2, 128, 64), Location::new(3, 0, 64)));
        assert!(!d.relocate(7, &key(2), Location::new(2, 128, 64), Location::new(3, 64, 64)));
        assert_eq!(d.location(7, &key(2)), Some(Location::new(3, 0, 64)));
        assert_eq!(d.get(8, &key(2)), None, "another table's row");
        assert_eq!(d.remove(7, &key(1)).map(|d| d.body.len()), Some(100));
        assert_eq!(d.all().len(), 1);
        assert_eq!(d.usage(), (1, 50 + DELTA_OVERHEAD_BYTES));
        assert!(!Deltas::new(0).enabled());
    }
}
