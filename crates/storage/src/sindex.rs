//! Secondary indexes, in RAM (as Aerospike's are): for one indexed column of a table, a map from
//! each value the column holds (a *term*) to the rows holding it, each term's rows in the order
//! a scan returns them (token, partition key, clustering key), so that a lookup pages through a
//! token range as a scan does.
//!
//! Every write of a row (a client's, a replica's, a hint's, a stream's: every write goes through
//! `Namespace::write_row_in`) that sets or deletes an indexed column reads the row's current
//! version (it is never a blind delta, `deltas.rs`), and under the row's lock, once the row is
//! written, the index drops the entries of the terms the row no longer holds and adds those it
//! holds now. So an overwrite, a cell or row deletion, and the expiry pass's deletion of an
//! expired row keep the index exact. An entry can still outlive its term: a range or partition
//! deletion (written without reading the rows it covers), a TTL that ran out (until the expiry
//! pass), an index build that read a row just before a write changed it. Such an entry is
//! *stale*: a lookup reads every row it names anyway, and drops the stale entries it meets.
//! Each entry keeps the sequence number of the write that added it last, and a lookup removes
//! an entry only if it still has the number the lookup found before reading the row: a write
//! that sets the term again renews it after its row is written, so either the lookup's read saw
//! that write, or the entry's number changed. A live entry is never lost.
//!
//! Defragmentation moves records without changing what they hold, so it touches no entry; a
//! whole table's go with TRUNCATE. An index is built, at open and when it is created, by one
//! pass over its table (`Engine::set_indexes`); until that pass ends it answers no lookup.
//!
//! Cost: one entry per (term, row): the map's node space, the row's two keys in one allocation,
//! the sequence number; a node's resident memory grew by 115 bytes per entry for 400,000 rows
//! with a 4-byte key. Nothing on the device. The primary index's 64 bytes per record do not
//! change.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::keys::{RowKey, RowsFrom, TableId};
use crate::row::EpochSeconds;
use crate::row::Row;

/// One secondary index, as the layer above defines it: which cells it reads, and how its terms
/// order (for range lookups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexSpec {
    /// The index's number in its table, stable for its life (the caller's choice).
    pub id: u32,
    /// The cell column number.
    pub column: u32,
    pub target: IndexTarget,
    pub order: TermOrder,
}

/// What of a column's cells an index keeps as terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexTarget {
    /// A cell's value: a plain column, a frozen value, a list's or a map's values.
    Value,
    /// A cell's path: a map's keys, a set's elements.
    Path,
    /// Path and value together (a map's entries): the path's length (4 bytes, big-endian),
    /// the path, the value.
    Entry,
}

/// How terms compare, for range lookups: the term's bytes are turned into bytes that compare
/// as the values do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermOrder {
    /// As unsigned bytes (text, blobs, and types only looked up by equality).
    Bytes,
    /// A fixed-width big-endian two's complement integer.
    Signed,
    /// A big-endian IEEE 754 float or double.
    Float,
}

/// A map entry's term ([`IndexTarget::Entry`]): the path's length (4 bytes, big-endian), the
/// path, the value.
pub fn entry_term(path: &[u8], value: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(4 + path.len() + value.len());
    t.extend_from_slice(&(path.len() as u32).to_be_bytes());
    t.extend_from_slice(path);
    t.extend_from_slice(value);
    t
}

impl TermOrder {
    /// `term`'s bytes in an order that compares as the values do.
    pub fn key(self, term: &[u8]) -> Vec<u8> {
        let mut k = term.to_vec();
        match self {
            TermOrder::Bytes => {}
            TermOrder::Signed => {
                if let Some(b) = k.first_mut() {
                    *b ^= 0x80;
                }
            }
            TermOrder::Float => {
                if k.first().is_some_and(|b| b & 0x80 != 0) {
                    k.iter_mut().for_each(|b| *b = !*b);
                } else if let Some(b) = k.first_mut() {
                    *b ^= 0x80;
                }
            }
        }
        k
    }
}

/// The terms a lookup asks for, as order keys ([`TermOrder::key`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TermRange {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

impl TermRange {
    /// One term.
    pub fn eq(key: Vec<u8>) -> TermRange {
        TermRange {
            start: Bound::Included(key.clone()),
            end: Bound::Included(key),
        }
    }

    fn contains(&self, key: &[u8]) -> bool {
        let bounds = (
            self.start.as_ref().map(Vec::as_slice),
            self.end.as_ref().map(Vec::as_slice),
        );
        std::ops::RangeBounds::<[u8]>::contains(&bounds, key)
    }

    /// False when no term can be in it (`start` past `end`): `BTreeMap::range` panics on those.
    fn is_satisfiable(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s <= e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s < e,
            _ => true,
        }
    }
}

/// A row an entry names: its token, and its partition and clustering keys in one allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RowRef {
    pub token: i64,
    keys: Box<[u8]>,
    split: u32,
}

impl RowRef {
    pub fn new(token: i64, partition: &[u8], clustering: &[u8]) -> RowRef {
        RowRef {
            token,
            keys: [partition, clustering].concat().into_boxed_slice(),
            split: partition.len() as u32,
        }
    }

    pub fn partition(&self) -> &[u8] {
        &self.keys[..self.split as usize]
    }

    pub fn clustering(&self) -> &[u8] {
        &self.keys[self.split as usize..]
    }

    pub fn row_key(&self, table: TableId) -> RowKey<'_> {
        RowKey {
            table,
            token: self.token,
            partition: self.partition(),
            clustering: self.clustering(),
        }
    }

    /// Before every row of the token.
    fn token_start(token: i64) -> RowRef {
        RowRef {
            token,
            keys: Box::default(),
            split: 0,
        }
    }
}

impl Ord for RowRef {
    fn cmp(&self, other: &RowRef) -> CmpOrdering {
        (self.token, self.partition(), self.clustering()).cmp(&(
            other.token,
            other.partition(),
            other.clustering(),
        ))
    }
}

impl PartialOrd for RowRef {
    fn partial_cmp(&self, other: &RowRef) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

/// True if row `r` is at or after `from` in scan order.
fn admits(from: &RowsFrom<'_>, r: &RowRef) -> bool {
    match *from {
        RowsFrom::Token(t) => r.token >= t,
        RowsFrom::After {
            token,
            partition,
            clustering: Some(c),
        } => (r.token, r.partition(), r.clustering()) > (token, partition, c),
        RowsFrom::After {
            token,
            partition,
            clustering: None,
        } => (r.token, r.partition()) > (token, partition),
    }
}

/// A row at or before every row `from` admits, to start a term's rows at.
fn lower(from: &RowsFrom<'_>) -> RowRef {
    match *from {
        RowsFrom::Token(t) => RowRef::token_start(t),
        RowsFrom::After { token, partition, .. } => RowRef::new(token, partition, &[]),
    }
}

/// An entry a lookup found: its term's order key, the row, and the entry's sequence number.
pub(crate) struct Candidate {
    pub key: Vec<u8>,
    pub row: RowRef,
    pub seq: u64,
}

/// One index of one table.
pub(crate) struct SecondaryIndex {
    pub spec: IndexSpec,
    ready: AtomicBool,
    dropped: AtomicBool,
    entries: AtomicU64,
    /// Rows lookups read, and entries they found stale and dropped.
    pub(crate) rows_read: AtomicU64,
    pub(crate) stale_dropped: AtomicU64,
    terms: RwLock<Terms>,
}

/// Each term's order key, and the rows holding it with the sequence number of each entry.
type Terms = BTreeMap<Vec<u8>, BTreeMap<RowRef, u64>>;

impl SecondaryIndex {
    fn new(spec: IndexSpec) -> SecondaryIndex {
        SecondaryIndex {
            spec,
            ready: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            entries: AtomicU64::new(0),
            rows_read: AtomicU64::new(0),
            stale_dropped: AtomicU64::new(0),
            terms: RwLock::new(BTreeMap::new()),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    /// The order keys of the terms `row` holds: its cells of the column live at `now_s`.
    pub fn keys_of(&self, row: &Row, now_s: EpochSeconds) -> Vec<Vec<u8>> {
        let spec = &self.spec;
        let mut keys = Vec::new();
        for cell in row.cells.iter().filter(|c| c.column == spec.column) {
            let value = cell.value_at(now_s);
            let Some(value) = value else { continue };
            let term = match spec.target {
                IndexTarget::Value => value.to_vec(),
                IndexTarget::Path => cell.path.clone(),
                IndexTarget::Entry => entry_term(&cell.path, value),
            };
            keys.push(spec.order.key(&term));
        }
        keys
    }

    /// Drops the entries of `old` terms not in `new`, and adds `new` ones with `seq`.
    fn replace(&self, old: &[Vec<u8>], new: Vec<Vec<u8>>, row: &RowRef, seq: u64) {
        let mut terms = self.terms.write().expect("index lock poisoned");
        for key in old.iter().filter(|k| !new.contains(k)) {
            self.remove_entry(&mut terms, key, row);
        }
        for key in new {
            if terms.entry(key).or_default().insert(row.clone(), seq).is_none() {
                self.entries.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Entries with terms in `range` and rows from `from` up to `end_token`, in scan order,
    /// for at most `rows` distinct rows (each row with every entry of it that matched).
    pub fn candidates(
        &self,
        range: &TermRange,
        from: RowsFrom<'_>,
        end_token: i64,
        rows: usize,
    ) -> Vec<Candidate> {
        if !range.is_satisfiable() || rows == 0 {
            return Vec::new();
        }
        let lower = lower(&from);
        let terms = self.terms.read().expect("index lock poisoned");
        let mut found = Vec::new();
        for (key, refs) in terms.range((range.start.clone(), range.end.clone())) {
            let within = refs.range((Bound::Included(&lower), Bound::Unbounded));
            let within = within
                .take_while(|(r, _)| r.token <= end_token)
                .filter(|(r, _)| admits(&from, r));
            for (r, &seq) in within.take(rows) {
                found.push(Candidate {
                    key: key.clone(),
                    row: r.clone(),
                    seq,
                });
            }
        }
        drop(terms);
        found.sort_by(|a, b| a.row.cmp(&b.row));
        // Keep the first `rows` distinct rows, with all their entries.
        let mut distinct = 0;
        let mut keep = found.len();
        for i in 0..found.len() {
            if i == 0 || found[i].row != found[i - 1].row {
                if distinct == rows {
                    keep = i;
                    break;
                }
                distinct += 1;
            }
        }
        found.truncate(keep);
        found
    }

    /// Removes the entry if no write added it again since a lookup found it with `seq`.
    pub fn remove_if_unchanged(&self, key: &[u8], row: &RowRef, seq: u64) {
        let mut terms = self.terms.write().expect("index lock poisoned");
        let Some(refs) = terms.get_mut(key) else {
            return;
        };
        if refs.get(row) == Some(&seq) {
            self.remove_entry(&mut terms, key, row);
            self.stale_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes `row`'s entry of term `key`, and the term once it names no row.
    fn remove_entry(&self, terms: &mut Terms, key: &[u8], row: &RowRef) {
        let Some(refs) = terms.get_mut(key) else {
            return;
        };
        if refs.remove(row).is_some() {
            self.entries.fetch_sub(1, Ordering::Relaxed);
        }
        if refs.is_empty() {
            terms.remove(key);
        }
    }

    fn clear(&self) {
        self.terms.write().expect("index lock poisoned").clear();
        self.entries.store(0, Ordering::Relaxed);
    }

    /// True if `update` sets or deletes this index's column, or deletes the row.
    fn touched_by(&self, update: &Row) -> bool {
        let column = self.spec.column;
        update.deletion.is_some()
            || update.cells.iter().any(|c| c.column == column)
            || update.column_deletions.iter().any(|(c, _)| *c == column)
    }

    /// True if `range` holds one of `keys`.
    pub fn any_in(range: &TermRange, keys: &[Vec<u8>]) -> bool {
        keys.iter().any(|k| range.contains(k))
    }
}

/// Every table's secondary indexes.
#[derive(Default)]
pub(crate) struct SecondaryIndexes {
    /// True once any table has an index: a write checks this alone otherwise.
    any: AtomicBool,
    tables: RwLock<HashMap<TableId, Vec<Arc<SecondaryIndex>>>>,
    /// Numbers the writes that add entries.
    seq: AtomicU64,
}

impl SecondaryIndexes {
    /// `f` of `table`'s indexes, if it has any (a write to a table without indexes looks at one
    /// atomic flag while no table has any).
    fn with<R>(&self, table: TableId, f: impl FnOnce(&[Arc<SecondaryIndex>]) -> R) -> Option<R> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let tables = self.tables.read().expect("index lock poisoned");
        tables.get(&table).filter(|v| !v.is_empty()).map(|v| f(v))
    }

    pub fn get(&self, table: TableId, id: u32) -> Option<Arc<SecondaryIndex>> {
        self.with(table, |v| v.iter().find(|i| i.spec.id == id).cloned())?
    }

    /// The indexes of `table` that `update` may change: those whose column it sets or deletes,
    /// all of them when it deletes the row. `None` when it changes none.
    pub fn touched_by(&self, table: TableId, update: &Row) -> Option<Vec<Arc<SecondaryIndex>>> {
        let touched: Vec<_> = self.with(table, |v| {
            v.iter().filter(|i| i.touched_by(update)).cloned().collect()
        })?;
        (!touched.is_empty()).then_some(touched)
    }

    /// True if `update` may change one of `table`'s indexes ([`Self::touched_by`]).
    pub fn touches(&self, table: TableId, update: &Row) -> bool {
        self.with(table, |v| v.iter().any(|i| i.touched_by(update)))
            .unwrap_or(false)
    }

    /// Brings `indexes` up to date with a write of the row at `key` from `old` to `new` (both
    /// as visible at `now_s`): drops the entries of the terms it no longer holds, and adds (or
    /// renews) those it holds. Called under the row's lock, after the row is written.
    pub fn reindex(
        &self,
        key: RowKey<'_>,
        indexes: &[Arc<SecondaryIndex>],
        old: &Row,
        new: &Row,
        now_s: EpochSeconds,
    ) {
        let row = RowRef::new(key.token, key.partition, key.clustering);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        for index in indexes {
            let old_keys = index.keys_of(old, now_s);
            let new_keys = if new.is_live(now_s) {
                index.keys_of(new, now_s)
            } else {
                Vec::new()
            };
            index.replace(&old_keys, new_keys, &row, seq);
        }
    }

    /// Adds `row`'s terms to one index (its build); returns how many.
    pub fn add_built(
        &self,
        index: &SecondaryIndex,
        key: RowKey<'_>,
        row: &Row,
        now_s: EpochSeconds,
    ) -> usize {
        let keys = index.keys_of(row, now_s);
        let n = keys.len();
        if n > 0 {
            let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
            index.replace(
                &[],
                keys,
                &RowRef::new(key.token, key.partition, key.clustering),
                seq,
            );
        }
        n
    }

    /// Makes `table`'s indexes `specs`: keeps those unchanged, drops the others, and returns
    /// the new ones (empty and not ready), for the caller to build.
    pub fn set(&self, table: TableId, specs: &[IndexSpec]) -> Vec<Arc<SecondaryIndex>> {
        let mut tables = self.tables.write().expect("index lock poisoned");
        let current = tables.remove(&table).unwrap_or_default();
        let mut kept = Vec::new();
        let mut new = Vec::new();
        for spec in specs {
            match current.iter().find(|i| &i.spec == spec) {
                Some(i) => kept.push(i.clone()),
                None => {
                    let i = Arc::new(SecondaryIndex::new(spec.clone()));
                    new.push(i.clone());
                    kept.push(i);
                }
            }
        }
        for gone in current.iter().filter(|i| !kept.iter().any(|k| Arc::ptr_eq(k, i))) {
            gone.dropped.store(true, Ordering::Release);
            gone.clear();
        }
        if !kept.is_empty() {
            tables.insert(table, kept);
            self.any.store(true, Ordering::Release);
        }
        new
    }

    /// The tables that have indexes.
    pub fn tables(&self) -> Vec<TableId> {
        self.tables
            .read()
            .expect("index lock poisoned")
            .keys()
            .copied()
            .collect()
    }

    /// Forgets every entry of `table` (TRUNCATE, DROP TABLE); its indexes stay.
    pub fn clear_table(&self, table: TableId) {
        self.with(table, |v| v.iter().for_each(|i| i.clear()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Cell;

    fn index(order: TermOrder) -> SecondaryIndex {
        SecondaryIndex::new(IndexSpec {
            id: 1,
            column: 3,
            target: IndexTarget::Value,
            order,
        })
    }

    #[test]
    fn order_keys_compare_as_the_values_do() {
        let ints = [i32::MIN, -5, -1, 0, 1, 7, i32::MAX];
        let keys: Vec<_> = ints
            .iter()
            .map(|v| TermOrder::Signed.key(&v.to_be_bytes()))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let floats = [f64::NEG_INFINITY, -2.5, -0.1, 0.0, 0.1, 3.0, f64::INFINITY];
        let keys: Vec<_> = floats
            .iter()
            .map(|v| TermOrder::Float.key(&v.to_be_bytes()))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_lookup_pages_in_scan_order_and_drops_only_unchanged_stale_entries() {
        let i = index(TermOrder::Signed);
        let term = |v: i32| TermOrder::Signed.key(&v.to_be_bytes());
        for (token, v) in [(30i64, 1i32), (10, 1), (20, 2), (5, 1)] {
            let mut row = Row::default();
            row.cells.push(Cell::live(3, 1, v.to_be_bytes().to_vec()));
            let keys = i.keys_of(&row, 0);
            i.replace(&[], keys, &RowRef::new(token, b"pk", b""), token as u64);
        }
        let ones = TermRange::eq(term(1));
        let tokens = |c: Vec<Candidate>| c.iter().map(|c| c.row.token).collect::<Vec<_>>();
        assert_eq!(
            tokens(i.candidates(&ones, RowsFrom::Token(i64::MIN), i64::MAX, 10)),
            [5, 10, 30]
        );
        assert_eq!(tokens(i.candidates(&ones, RowsFrom::Token(6), 29, 10)), [10]);
        let after = RowsFrom::After {
            token: 10,
            partition: b"pk",
            clustering: Some(b""),
        };
        assert_eq!(tokens(i.candidates(&ones, after, i64::MAX, 1)), [30]);
        let range = TermRange {
            start: Bound::Included(term(1)),
            end: Bound::Included(term(2)),
        };
        assert_eq!(
            tokens(i.candidates(&range, RowsFrom::Token(i64::MIN), i64::MAX, 3)),
            [5, 10, 20]
        );
        // A write added the entry again after the lookup found it: it stays.
        let found = i.candidates(&ones, RowsFrom::Token(30), i64::MAX, 1);
        i.replace(&[], vec![term(1)], &found[0].row, 99);
        i.remove_if_unchanged(&found[0].key, &found[0].row, found[0].seq);
        assert_eq!(i.entries(), 4);
        i.remove_if_unchanged(&found[0].key, &found[0].row, 99);
        assert_eq!(i.entries(), 3);
        assert_eq!(
            tokens(i.candidates(&ones, RowsFrom::Token(i64::MIN), i64::MAX, 10)),
            [5, 10]
        );
        let backwards = TermRange {
            start: Bound::Included(term(2)),
            end: Bound::Excluded(term(1)),
        };
        assert!(i
            .candidates(&backwards, RowsFrom::Token(i64::MIN), i64::MAX, 10)
            .is_empty());
    }
}
