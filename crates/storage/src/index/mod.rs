//! The RAM index: for every row of a table, where its newest version lives on the device and
//! the metadata a read or a replica merge needs without a device read.
//!
//! Each table has its own index of [`PARTITIONS`] partitions, split by the top bits of the token,
//! so partition order is token order and a token-range scan walks partitions in sequence. Within
//! a partition, entries are ordered by (token, clustering prefix, digest): a CQL partition's rows
//! sit together, in clustering order as far as the first eight bytes of the clustering key tell.
//!
//! A partition is a sorted array (`base`) plus a small sorted array of recent inserts (`delta`)
//! that is merged into the base when it grows past an eighth of it. The base is held to its
//! size, in pages of its own once it is large ([`page_vec`]), so an entry costs its 48 bytes
//! plus a little: a B-tree would waste a third of its nodes at the fill factor random inserts
//! leave it. Updates, which move a row to a new place on
//! the device, change the entry in place; removals mark it and are swept out at the next merge.

mod page_vec;

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::Mutex;

use page_vec::PageVec;

use crate::stats::TableFigures;

pub const PARTITIONS: usize = 4096;
const PARTITION_BITS: u32 = 12;
const DELTA_MIN: usize = 16;
const DELTA_MAX: usize = 1024;

/// Where a record is: block, offset and length, packed in 64 bits.
///
/// ```text
///  63            38 37             19 18              0
///  +---------------+-----------------+-----------------+
///  |  block index  | offset / 16     | length / 16     |
///  |   26 bits     |   19 bits       |   19 bits       |
///  +---------------+-----------------+-----------------+
/// ```
/// 26 bits of block index address 64 Mi blocks, of which the last is not used (64 TiB at
/// 1 MiB); 19 bits of 16-byte units
/// cover an 8 MiB block, the largest allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location(u64);

pub const BLOCKS_MAX: u64 = 1 << 26;
const UNIT: u32 = 16;

impl Location {
    pub fn new(block: u32, offset: u32, len: u32) -> Location {
        assert!(u64::from(block) < BLOCKS_MAX, "block index {block} out of range");
        assert!(
            offset.is_multiple_of(UNIT) && len.is_multiple_of(UNIT),
            "unaligned record {offset}+{len}"
        );
        let (o, l) = (offset / UNIT, len / UNIT);
        assert!(
            o < 1 << 19 && l < 1 << 19,
            "record {offset}+{len} beyond an 8 MiB block"
        );
        Location(u64::from(block) << 38 | u64::from(o) << 19 | u64::from(l))
    }

    pub fn to_raw(self) -> u64 {
        self.0
    }

    pub fn from_raw(raw: u64) -> Location {
        Location(raw)
    }

    pub fn block(self) -> u32 {
        (self.0 >> 38) as u32
    }

    pub fn offset(self) -> u32 {
        ((self.0 >> 19) & ((1 << 19) - 1)) as u32 * UNIT
    }

    #[expect(clippy::len_without_is_empty, reason = "a record is never empty")]
    pub fn len(self) -> u32 {
        (self.0 & ((1 << 19) - 1)) as u32 * UNIT
    }
}

/// The order of rows in the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexKey {
    pub token: i64,
    pub clustering_prefix: u64,
    pub digest: u64,
}

impl IndexKey {
    pub const MIN: IndexKey = IndexKey {
        token: i64::MIN,
        clustering_prefix: 0,
        digest: 0,
    };
    pub const MAX: IndexKey = IndexKey {
        token: i64::MAX,
        clustering_prefix: u64::MAX,
        digest: u64::MAX,
    };
}

/// The entry is a tombstone: reads see nothing, merges see the deletion.
pub const FLAG_TOMBSTONE: u32 = 1;
/// Earlier versions of the row may still be on the device, so dropping this entry could let one
/// of them come back at cold start.
pub const FLAG_HAS_OLDER: u32 = 2;
/// Removed from the base array; swept out at the next merge.
const FLAG_REMOVED: u32 = 4;
/// The row carries deletions: when its live content expires it becomes a tombstone, kept for
/// the grace period, rather than being dropped.
pub const FLAG_HAS_DELETIONS: u32 = 8;
/// The entry is a partition's range and partition tombstones (`range_tombstones.rs`), not a
/// row: reads of rows skip it and look it up by its own key instead.
pub const FLAG_RANGE_TOMBSTONES: u32 = 16;
/// The entry points at the head record of a row written in chunks (`format/chunks.rs`).
pub const FLAG_CHUNKED: u32 = 32;
/// The row has a delta (`deltas.rs`): the entry points at its whole version, and the cells
/// written since are in the delta buffer, to be merged into every read.
pub const FLAG_DELTA: u32 = 64;

/// One row in the index: 48 bytes, so that with the partition arrays' slack an entry stays
/// within DESIGN.md's budget of 64 bytes of RAM per record, all in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: IndexKey,
    pub location: Location,
    pub write_timestamp_us: i64,
    /// Live entry: when its content stops being live (0: never). Tombstone: its deletion time.
    pub expiry_s: u32,
    pub flags: u32,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 48);

/// Fills slots of the base while a merge moves entries into them.
const PLACEHOLDER: Entry = Entry {
    key: IndexKey::MIN,
    location: Location(0),
    write_timestamp_us: 0,
    expiry_s: 0,
    flags: 0,
};

impl Entry {
    pub fn is_tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }

    pub fn has_deletions(&self) -> bool {
        self.flags & FLAG_HAS_DELETIONS != 0
    }

    pub fn is_range_tombstones(&self) -> bool {
        self.flags & FLAG_RANGE_TOMBSTONES != 0
    }

    pub fn is_chunked(&self) -> bool {
        self.flags & FLAG_CHUNKED != 0
    }

    pub fn has_delta(&self) -> bool {
        self.flags & FLAG_DELTA != 0
    }

    pub fn has_older(&self) -> bool {
        self.flags & FLAG_HAS_OLDER != 0
    }

    /// True if a read at `now_s` sees this row.
    pub fn is_visible(&self, now_s: u32) -> bool {
        !self.is_tombstone() && (self.expiry_s == 0 || self.expiry_s > now_s)
    }

    fn is_removed(&self) -> bool {
        self.flags & FLAG_REMOVED != 0
    }
}

#[derive(Default)]
struct Partition {
    base: PageVec<Entry>,
    removed: usize,
    delta: Vec<Entry>,
}

impl Partition {
    fn find_base(&self, key: &IndexKey) -> Result<usize, usize> {
        search(&self.base, key)
    }

    fn find_delta(&self, key: &IndexKey) -> Result<usize, usize> {
        self.delta.binary_search_by(|e| e.key.cmp(key))
    }

    fn get_mut(&mut self, key: &IndexKey) -> Option<&mut Entry> {
        if let Ok(i) = self.find_base(key) {
            if !self.base[i].is_removed() {
                return Some(&mut self.base[i]);
            }
        }
        match self.find_delta(key) {
            Ok(i) => Some(&mut self.delta[i]),
            Err(_) => None,
        }
    }

    fn live_len(&self) -> usize {
        self.base.len() - self.removed + self.delta.len()
    }

    fn insert(&mut self, entry: Entry) {
        match self.find_base(&entry.key) {
            // A removed entry's slot is reused in place.
            Ok(i) => {
                debug_assert!(self.base[i].is_removed());
                self.base[i] = entry;
                self.removed -= 1;
            }
            Err(_) => {
                // Absent from the delta too: the caller looked the key up under this lock.
                let found = self.find_delta(&entry.key);
                debug_assert!(found.is_err(), "insert of a key already in the delta");
                let (Ok(at) | Err(at)) = found;
                self.delta.insert(at, entry);
                if self.delta.len() > (self.base.len() / 8).clamp(DELTA_MIN, DELTA_MAX) {
                    self.merge_delta();
                }
            }
        }
    }

    fn remove(&mut self, key: &IndexKey) -> Option<Entry> {
        if let Ok(i) = self.find_base(key) {
            if !self.base[i].is_removed() {
                let old = self.base[i];
                self.base[i].flags |= FLAG_REMOVED;
                self.removed += 1;
                if self.removed > self.base.len() / 4 + DELTA_MIN {
                    self.merge_delta();
                }
                return Some(old);
            }
        }
        match self.find_delta(key) {
            Ok(i) => Some(self.delta.remove(i)),
            Err(_) => None,
        }
    }

    /// Folds the delta into the base, dropping removed entries. The base grows in place by the
    /// delta's length (see [`PageVec`]) and is merged from the back, so a merge never copies
    /// the base to a new allocation.
    fn merge_delta(&mut self) {
        if self.removed > 0 {
            self.base.retain(|e| !e.is_removed());
            self.removed = 0;
        }
        let delta = std::mem::take(&mut self.delta);
        let (n, d) = (self.base.len(), delta.len());
        self.base.resize(n + d, PLACEHOLDER);
        let (mut i, mut j) = (n, d);
        for k in (0..n + d).rev() {
            if j == 0 {
                break; // the rest of the base is already in place
            }
            if i > 0 && self.base[i - 1].key > delta[j - 1].key {
                self.base[k] = self.base[i - 1];
                i -= 1;
            } else {
                self.base[k] = delta[j - 1];
                j -= 1;
            }
        }
    }

    /// Entries with keys in range, in order, appended to `out` until it holds `limit`.
    fn collect(&self, from: Bound<&IndexKey>, to: Bound<&IndexKey>, limit: usize, out: &mut Vec<Entry>) {
        let start = |v: &[Entry]| match from {
            Bound::Included(k) => v.partition_point(|e| e.key < *k),
            Bound::Excluded(k) => v.partition_point(|e| e.key <= *k),
            Bound::Unbounded => 0,
        };
        let in_range = |e: &Entry| match to {
            Bound::Included(k) => e.key <= *k,
            Bound::Excluded(k) => e.key < *k,
            Bound::Unbounded => true,
        };
        let mut b = self.base[start(&self.base)..]
            .iter()
            .filter(|e| !e.is_removed())
            .peekable();
        let mut d = self.delta[start(&self.delta)..].iter().peekable();
        while out.len() < limit {
            let next = match (b.peek(), d.peek()) {
                (Some(x), Some(y)) if x.key <= y.key => b.next(),
                (Some(_), Some(_)) => d.next(),
                (Some(_), None) => b.next(),
                (None, Some(_)) => d.next(),
                (None, None) => None,
            };
            match next {
                Some(e) if in_range(e) => out.push(*e),
                _ => break,
            }
        }
    }

    /// Entries with keys in range, in descending order from `to`, appended to `out` until it
    /// holds `limit`.
    fn collect_rev(&self, from: Bound<&IndexKey>, to: Bound<&IndexKey>, limit: usize, out: &mut Vec<Entry>) {
        let end = |v: &[Entry]| match to {
            Bound::Included(k) => v.partition_point(|e| e.key <= *k),
            Bound::Excluded(k) => v.partition_point(|e| e.key < *k),
            Bound::Unbounded => v.len(),
        };
        let in_range = |e: &Entry| match from {
            Bound::Included(k) => e.key >= *k,
            Bound::Excluded(k) => e.key > *k,
            Bound::Unbounded => true,
        };
        let mut b = self.base[..end(&self.base)]
            .iter()
            .rev()
            .filter(|e| !e.is_removed())
            .peekable();
        let mut d = self.delta[..end(&self.delta)].iter().rev().peekable();
        while out.len() < limit {
            let next = match (b.peek(), d.peek()) {
                (Some(x), Some(y)) if x.key >= y.key => b.next(),
                (Some(_), Some(_)) => d.next(),
                (Some(_), None) => b.next(),
                (None, Some(_)) => d.next(),
                (None, None) => None,
            };
            match next {
                Some(e) if in_range(e) => out.push(*e),
                _ => break,
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        self.base.held_bytes() + self.delta.capacity() * std::mem::size_of::<Entry>()
    }
}

/// Where `key` is in a sorted array, as `binary_search` answers. Tokens are Murmur3 hashes,
/// spread evenly over a partition's range, and every entry of a partition shares the top
/// [`PARTITION_BITS`] of its token, so the first probe goes where the key's token would sit if
/// the entries were exactly even over the rest of the bits, and a gallop from there brackets
/// the key within a few entries. A plain binary search misses the cache at nearly every step
/// (about six steps over a partition's 50 entries at 200k rows); this touches the entries near
/// the guess only, and reads no other entry to make it (in the profile of cached workload A,
/// the search's share of node CPU halved). Any spread of tokens gives the right answer, only
/// slower.
fn search(v: &[Entry], key: &IndexKey) -> Result<usize, usize> {
    let n = v.len();
    let exact = |lo: usize, hi: usize| match v[lo..hi].binary_search_by(|e| e.key.cmp(key)) {
        Ok(i) => Ok(lo + i),
        Err(i) => Err(lo + i),
    };
    if n < 8 {
        return exact(0, n);
    }
    const WITHIN_BITS: u32 = 64 - PARTITION_BITS;
    let within = token_order(key.token) & ((1 << WITHIN_BITS) - 1);
    let guess = ((u128::from(within) * n as u128) >> WITHIN_BITS) as usize;
    // Everything before `lo` is less than the key and everything from `hi` on is greater.
    let (lo, hi) = if v[guess].key < *key {
        let (mut lo, mut step) = (guess + 1, 1);
        let hi = loop {
            let p = guess + step;
            if p >= n {
                break n;
            }
            if v[p].key < *key {
                lo = p + 1;
                step *= 2;
            } else {
                break p + 1;
            }
        };
        (lo, hi)
    } else {
        let (mut hi, mut step) = (guess + 1, 1);
        let lo = loop {
            if step > guess {
                break 0;
            }
            let p = guess - step;
            if v[p].key >= *key {
                hi = p + 1;
                step *= 2;
            } else {
                break p + 1;
            }
        };
        (lo, hi)
    };
    exact(lo, hi)
}

pub struct TableIndex {
    partitions: Box<[Mutex<Partition>]>,
    /// Set once any partition of the table has range or partition tombstones (never cleared
    /// while the engine runs): until then a read need not look for them.
    range_tombstones: AtomicBool,
    /// The table's own tombstone grace period in seconds (Cassandra's `gc_grace_seconds`), or
    /// [`GRACE_UNSET`] for the namespace's.
    tombstone_grace_s: AtomicU64,
    /// Tombstones and record bytes, counted as entries change, and the table's latencies.
    figures: TableFigures,
}

const GRACE_UNSET: u64 = u64::MAX;

impl Default for TableIndex {
    fn default() -> Self {
        TableIndex::new()
    }
}

pub fn partition_of(token: i64) -> usize {
    (token_order(token) >> (64 - PARTITION_BITS)) as usize
}

/// The token with its sign bit flipped, so that unsigned order is token order: its top
/// [`PARTITION_BITS`] are its partition, the rest its place within the partition's range.
fn token_order(token: i64) -> u64 {
    (token as u64) ^ (1 << 63)
}

impl TableIndex {
    pub fn new() -> TableIndex {
        TableIndex {
            partitions: (0..PARTITIONS)
                .map(|_| Mutex::new(Partition::default()))
                .collect(),
            range_tombstones: AtomicBool::new(false),
            tombstone_grace_s: AtomicU64::new(GRACE_UNSET),
            figures: TableFigures::default(),
        }
    }

    /// The table's figures: counts kept as entries change, and latencies.
    pub(crate) fn figures(&self) -> &TableFigures {
        &self.figures
    }

    /// Counts `old` out of the table's figures and `new` in; called under the lock of the
    /// entries' partition, so that a counter never passes below zero.
    fn account(&self, old: Option<&Entry>, new: Option<&Entry>) {
        for (e, added) in [(old, false), (new, true)] {
            if let Some(e) = e {
                self.figures
                    .count_entry(e.is_tombstone(), e.is_range_tombstones(), e.location.len(), added);
            }
        }
    }

    /// The table's own tombstone grace period, if it has one.
    pub fn tombstone_grace_s(&self) -> Option<u32> {
        u32::try_from(self.tombstone_grace_s.load(AtomicOrdering::Relaxed)).ok()
    }

    pub fn set_tombstone_grace_s(&self, grace_s: Option<u32>) {
        let raw = grace_s.map_or(GRACE_UNSET, u64::from);
        self.tombstone_grace_s.store(raw, AtomicOrdering::Relaxed);
    }

    fn partition(&self, token: i64) -> std::sync::MutexGuard<'_, Partition> {
        self.partitions[partition_of(token)]
            .lock()
            .expect("index partition lock poisoned")
    }

    pub fn get(&self, key: &IndexKey) -> Option<Entry> {
        self.figures.count_lookup();
        self.partition(key.token).get_mut(key).map(|e| *e)
    }

    /// True if some partition of the table may have range or partition tombstones.
    pub fn may_have_range_tombstones(&self) -> bool {
        self.range_tombstones.load(AtomicOrdering::Acquire)
    }

    fn note(&self, entry: &Entry) {
        if entry.is_range_tombstones() && !self.may_have_range_tombstones() {
            self.range_tombstones.store(true, AtomicOrdering::Release);
        }
    }

    /// Inserts or replaces; returns the entry replaced.
    pub fn upsert(&self, entry: Entry) -> Option<Entry> {
        self.note(&entry);
        let mut p = self.partition(entry.key.token);
        if let Some(e) = p.get_mut(&entry.key) {
            let old = std::mem::replace(e, entry);
            self.account(Some(&old), Some(&entry));
            return Some(old);
        }
        p.insert(entry);
        self.account(None, Some(&entry));
        None
    }

    /// Inserts `entry` unless the index already has a version that `is_newer` prefers; returns
    /// what happened for the caller's accounting. Used by cold start.
    pub fn offer(&self, entry: Entry, is_newer: impl Fn(&Entry, &Entry) -> bool) -> Offer {
        self.note(&entry);
        let mut p = self.partition(entry.key.token);
        if let Some(e) = p.get_mut(&entry.key) {
            if is_newer(&entry, e) {
                let mut entry = entry;
                entry.flags |= FLAG_HAS_OLDER;
                let old = std::mem::replace(e, entry);
                self.account(Some(&old), Some(&entry));
                return Offer::Replaced(old);
            }
            e.flags |= FLAG_HAS_OLDER;
            return Offer::Rejected;
        }
        p.insert(entry);
        self.account(None, Some(&entry));
        Offer::Inserted
    }

    /// Moves an entry to `to` if it still points at `from` (defragmentation).
    pub fn relocate(&self, key: &IndexKey, from: Location, to: Location) -> bool {
        match self.partition(key.token).get_mut(key) {
            Some(e) if e.location == from => {
                let old = *e;
                e.location = to;
                self.account(Some(&old), Some(&*e));
                true
            }
            _ => false,
        }
    }

    /// Applies `change` to the entry if it is still exactly `expected`; returns the entry as it
    /// was, if it was changed. `change` returning `None` removes the entry.
    pub fn update_if(&self, expected: &Entry, change: impl FnOnce(Entry) -> Option<Entry>) -> bool {
        let mut p = self.partition(expected.key.token);
        match p.get_mut(&expected.key) {
            Some(e) if e == expected => match change(*e) {
                Some(new) => {
                    *e = new;
                    self.account(Some(expected), Some(&new));
                    true
                }
                None => {
                    p.remove(&expected.key);
                    self.account(Some(expected), None);
                    true
                }
            },
            _ => false,
        }
    }

    /// Entries in `[from, to]` order, at most `limit`, walking partitions in token order.
    pub fn range(&self, from: Bound<IndexKey>, to: Bound<IndexKey>, limit: usize) -> Vec<Entry> {
        let mut out = Vec::new();
        let first = match from {
            Bound::Included(k) | Bound::Excluded(k) => partition_of(k.token),
            Bound::Unbounded => 0,
        };
        let last = match to {
            Bound::Included(k) | Bound::Excluded(k) => partition_of(k.token),
            Bound::Unbounded => PARTITIONS - 1,
        };
        for p in first..=last {
            if out.len() >= limit {
                break;
            }
            let part = self.partitions[p].lock().expect("index partition lock poisoned");
            part.collect(from.as_ref(), to.as_ref(), limit, &mut out);
        }
        out
    }

    /// Entries in `[from, to]` in descending order from `to`, at most `limit`.
    pub fn range_rev(&self, from: Bound<IndexKey>, to: Bound<IndexKey>, limit: usize) -> Vec<Entry> {
        let mut out = Vec::new();
        let first = match from {
            Bound::Included(k) | Bound::Excluded(k) => partition_of(k.token),
            Bound::Unbounded => 0,
        };
        let last = match to {
            Bound::Included(k) | Bound::Excluded(k) => partition_of(k.token),
            Bound::Unbounded => PARTITIONS - 1,
        };
        for p in (first..=last).rev() {
            if out.len() >= limit {
                break;
            }
            let part = self.partitions[p].lock().expect("index partition lock poisoned");
            part.collect_rev(from.as_ref(), to.as_ref(), limit, &mut out);
        }
        out
    }

    /// The entries of one partition that `pred` selects, copied out under a short lock.
    pub fn partition_select(&self, p: usize, mut pred: impl FnMut(&Entry) -> bool) -> Vec<Entry> {
        let part = self.partitions[p].lock().expect("index partition lock poisoned");
        let live = |e: &&Entry| !e.is_removed();
        part.base
            .iter()
            .filter(live)
            .chain(part.delta.iter())
            .filter(|e| pred(e))
            .copied()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.lock().expect("index partition lock poisoned").live_len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes held by the entry arrays (not counting allocator overhead).
    pub fn heap_bytes(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.lock().expect("index partition lock poisoned").heap_bytes())
            .sum()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    Inserted,
    Replaced(Entry),
    Rejected,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn entry(token: i64, digest: u64) -> Entry {
        Entry {
            key: IndexKey {
                token,
                clustering_prefix: 0,
                digest,
            },
            location: Location::new(1, 16, 32),
            write_timestamp_us: 0,
            expiry_s: 0,
            flags: 0,
        }
    }

    #[test]
    fn location_packs_its_fields() {
        let l = Location::new((1 << 26) - 1, (8 << 20) - 16, 1024);
        assert_eq!(l.block(), (1 << 26) - 1);
        assert_eq!(l.offset(), (8 << 20) - 16);
        assert_eq!(l.len(), 1024);
    }

    /// The interpolating search answers as a binary search does, for even, clumped and
    /// duplicated tokens (many rows of one partition share a token).
    #[test]
    fn search_agrees_with_binary_search() {
        let mut x: u64 = 7;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for spread in [u64::MAX, 1 << 20, 16] {
            let mut v: Vec<Entry> = (0..3000)
                .map(|_| {
                    let r = next();
                    entry((r % spread).wrapping_sub(spread / 2) as i64, next() % 50)
                })
                .collect();
            v.sort_by_key(|e| e.key);
            v.dedup_by_key(|e| e.key);
            for _ in 0..3000 {
                let r = next();
                let probe = if r % 2 == 0 {
                    v[(r % v.len() as u64) as usize].key
                } else {
                    entry((r % spread).wrapping_sub(spread / 2) as i64, next() % 50).key
                };
                assert_eq!(search(&v, &probe), v.binary_search_by(|e| e.key.cmp(&probe)));
            }
        }
        // As a partition holds them: every token in one partition's range, from a handful of
        // entries (where the guess is coarsest) to a few hundred, evenly spread or all on a few
        // tokens; probes inside the range and outside it on both sides.
        let base = (7u64 << (64 - PARTITION_BITS)) ^ (1 << 63);
        let width = 1u64 << (64 - PARTITION_BITS);
        for n in (1..=80).chain([200, 500]) {
            for spread in [width, width / 1000, 3] {
                let mut v: Vec<Entry> = (0..n)
                    .map(|_| entry((base + next() % spread) as i64, next() % 50))
                    .collect();
                v.sort_by_key(|e| e.key);
                v.dedup_by_key(|e| e.key);
                for _ in 0..200 {
                    let r = next();
                    let probe = match r % 4 {
                        0 => v[(r / 4 % v.len() as u64) as usize].key,
                        1 => entry((base + next() % width) as i64, next() % 50).key,
                        2 => entry(base.wrapping_sub(1 + next() % 1000) as i64, 0).key,
                        _ => entry((base + width + next() % 1000) as i64, 0).key,
                    };
                    assert_eq!(search(&v, &probe), v.binary_search_by(|e| e.key.cmp(&probe)));
                }
            }
        }
    }

    #[test]
    fn partitions_follow_token_order() {
        assert_eq!(partition_of(i64::MIN), 0);
        assert_eq!(partition_of(i64::MAX), PARTITIONS - 1);
        assert!(partition_of(-1) < partition_of(0));
    }

    /// The index against a BTreeMap through inserts, updates, removals and range reads, with
    /// enough entries in one partition to force many delta merges.
    #[test]
    fn behaves_like_a_sorted_map() {
        let index = TableIndex::new();
        let mut model = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct tokens, so partitions grow large and merge often.
            let token = (x % 64) as i64 * (1 << 50);
            let digest = (x >> 20) % 3000;
            let e = entry(token, digest);
            match x % 5 {
                0 => {
                    let current = index.get(&e.key);
                    assert_eq!(current, model.remove(&e.key), "step {step}");
                    if let Some(current) = current {
                        assert!(index.update_if(&current, |_| None));
                        assert!(index.get(&e.key).is_none(), "step {step}");
                    }
                }
                _ => {
                    let mut e = e;
                    e.write_timestamp_us = step as i64;
                    assert_eq!(index.upsert(e).is_some(), model.insert(e.key, e).is_some());
                }
            }
        }
        assert_eq!(index.len(), model.len());
        let all = index.range(Bound::Unbounded, Bound::Unbounded, usize::MAX);
        assert_eq!(all, model.values().copied().collect::<Vec<_>>());
        let from = IndexKey {
            token: 5 * (1 << 50),
            clustering_prefix: 0,
            digest: 100,
        };
        let got = index.range(Bound::Excluded(from), Bound::Unbounded, 50);
        let want: Vec<Entry> = model
            .range((Bound::Excluded(from), Bound::Unbounded))
            .take(50)
            .map(|(_, e)| *e)
            .collect();
        assert_eq!(got, want);
    }
}
