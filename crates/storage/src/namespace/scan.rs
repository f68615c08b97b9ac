//! Range reads: rows of an index range, and of one partition in clustering order, with the
//! partition's range and partition tombstones merged in.

use std::ops::Bound;

use super::{Found, Namespace};
use crate::error::ReadError;
use crate::index::{Entry, IndexKey, TableIndex};
use crate::keys::{PartitionKey, RowsFrom, RowsPage, StoredRow, TOMBSTONES_PER_READ_MAX};
use crate::range_tombstones::PartitionTombstones;
use crate::token::clustering_prefix;

/// Index entries a raw read takes from the index at once.
const STORED_BATCH_ENTRIES: usize = 1024;

impl Namespace {
    /// [`crate::Engine::scan_rows`]: rows as stored, in the order a client reads a table (by
    /// token, then partition key bytes, then clustering key bytes), from `from` up to
    /// `to_token`, until `live_limit` of them are live.
    ///
    /// Index entries come in batches of about the rows wanted, one index lookup each (before
    /// 2026-12-02 a scan looked the index up twice per token). A token's rows are read whole
    /// and sorted by their keys, since the index orders them by digest after the clustering
    /// key's first eight bytes: a batch that ends inside a token leaves that token to the next
    /// batch, and a token with more entries than a batch is read alone.
    pub(crate) fn scan_rows(
        &self,
        index: &TableIndex,
        from: RowsFrom<'_>,
        to_token: i64,
        live_limit: usize,
    ) -> Result<RowsPage, ReadError> {
        let now_s = self.clock.now_s();
        let start_token = match from {
            RowsFrom::Token(t) => t,
            RowsFrom::After { token, .. } => token,
        };
        let mut page = RowsPage::default();
        if start_token > to_token || live_limit == 0 {
            page.more = live_limit == 0;
            return Ok(page);
        }
        let end = Bound::Included(IndexKey {
            token: to_token,
            ..IndexKey::MAX
        });
        let mut cursor = Bound::Included(IndexKey {
            token: start_token,
            ..IndexKey::MIN
        });
        let mut shadows = Shadows::new(self, index);
        let mut rows = Vec::new();
        let (mut live, mut dead) = (0usize, 0usize);
        loop {
            // The live rows still wanted, and one more, which tells whether there is more.
            let batch = (live_limit - live).saturating_add(1).min(STORED_BATCH_ENTRIES);
            let entries = index.range(cursor, end, batch);
            let Some(last) = entries.last() else {
                return Ok(page);
            };
            // The entries of the batch's last token may go on past it, unless the batch ended
            // before the limit.
            let whole = if entries.len() < batch {
                entries.len()
            } else {
                entries.partition_point(|e| e.key.token < last.key.token)
            };
            let last_token = if whole > 0 {
                self.read_entries_stored(index, &entries[..whole], &mut shadows, &mut rows)?;
                entries[whole - 1].key.token
            } else {
                // One token fills the batch: its rows are read alone, from its first entry.
                let t = last.key.token;
                self.read_stored(
                    index,
                    Bound::Included(entries[0].key),
                    Bound::Included(token_end(t)),
                    &mut shadows,
                    &mut rows,
                )?;
                t
            };
            rows.sort_by(|a, b| {
                (a.token, &a.partition_key, &a.clustering_key).cmp(&(
                    b.token,
                    &b.partition_key,
                    &b.clustering_key,
                ))
            });
            for row in rows.drain(..) {
                if let RowsFrom::After {
                    token,
                    partition,
                    clustering,
                } = from
                {
                    if row.token == token && !is_after(&row, partition, clustering) {
                        continue;
                    }
                }
                let is_live = row.row.is_live(now_s);
                if (is_live && live == live_limit) || (!is_live && dead == TOMBSTONES_PER_READ_MAX) {
                    page.more = true;
                    return Ok(page);
                }
                if is_live {
                    live += 1;
                } else {
                    dead += 1;
                }
                page.rows.push(row);
            }
            if last_token == to_token {
                return Ok(page);
            }
            cursor = Bound::Excluded(token_end(last_token));
        }
    }

    /// Reads every row among the index entries in a range as stored onto `out`, as
    /// [`Namespace::read_entries_stored`] does.
    fn read_stored(
        &self,
        index: &TableIndex,
        start: Bound<IndexKey>,
        end: Bound<IndexKey>,
        shadows: &mut Shadows<'_>,
        out: &mut Vec<StoredRow>,
    ) -> Result<(), ReadError> {
        let mut cursor = start;
        loop {
            let entries = index.range(cursor, end, STORED_BATCH_ENTRIES);
            self.read_entries_stored(index, &entries, shadows, out)?;
            match entries.last() {
                Some(last) if entries.len() == STORED_BATCH_ENTRIES => cursor = Bound::Excluded(last.key),
                _ => return Ok(()),
            }
        }
    }

    /// Reads the rows of `entries` as stored (deleted and expired ones included, range
    /// tombstones merged in) onto `out`, skipping the entries that are not rows and those
    /// whose row moved away while we read.
    fn read_entries_stored(
        &self,
        index: &TableIndex,
        entries: &[Entry],
        shadows: &mut Shadows<'_>,
        out: &mut Vec<StoredRow>,
    ) -> Result<(), ReadError> {
        let now_s = self.clock.now_s();
        out.reserve(entries.len());
        for e in entries {
            if e.is_range_tombstones() {
                continue;
            }
            let Some(mut found) = self.read_entry(index, e)? else {
                continue;
            };
            shadows.apply(&mut found, now_s)?;
            let row = std::mem::take(&mut found.row);
            out.push(found.stored(row, e.key));
        }
        Ok(())
    }

    /// Keeps rows in order until `live_limit` of them are live now.
    pub(crate) fn take_live(&self, rows: Vec<StoredRow>, live_limit: usize) -> RowsPage {
        let now_s = self.clock.now_s();
        let mut page = RowsPage::default();
        let mut live = 0;
        for row in rows {
            let is_live = row.row.is_live(now_s);
            if is_live && live == live_limit {
                page.more = true;
                break;
            }
            live += usize::from(is_live);
            page.rows.push(row);
        }
        page
    }

    /// Reads the live rows among the index entries in a range, keeping those `keep` accepts.
    pub(crate) fn read_range(
        &self,
        index: &TableIndex,
        mut start: Bound<IndexKey>,
        end: Bound<IndexKey>,
        limit: usize,
        keep: impl Fn(&Found) -> bool,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let now_s = self.clock.now_s();
        let mut shadows = Shadows::new(self, index);
        let mut out = Vec::new();
        let batch = limit.clamp(16, 4096);
        loop {
            let entries = index.range(start, end, batch);
            let exhausted = entries.len() < batch;
            for e in &entries {
                if out.len() >= limit {
                    return Ok(out);
                }
                if !e.is_visible(now_s) {
                    continue;
                }
                let Some(mut found) = self.read_entry(index, e)? else {
                    continue;
                };
                if !keep(&found) {
                    continue;
                }
                shadows.apply(&mut found, now_s)?;
                let row = std::mem::take(&mut found.row).into_visible(now_s);
                if row.is_live(now_s) {
                    out.push(found.stored(row, e.key));
                }
            }
            match entries.last() {
                Some(last) if !exhausted && out.len() < limit => start = Bound::Excluded(last.key),
                _ => return Ok(out),
            }
        }
    }
}

impl Namespace {
    /// The rows of one partition between the bounds, in clustering order (reversed if asked),
    /// as stored, with the partition's tombstones merged in; with `keep_dead` false, only rows
    /// live now (still as stored: the caller makes them visible).
    ///
    /// The index orders a partition's rows by the first eight bytes of the clustering key, then
    /// by digest: rows sharing those eight bytes are read whole as a group and sorted. A read
    /// walks the index from its start bound (forward) or its end bound (reversed) and stops at
    /// the first group boundary once it holds more than `live_limit` live rows, since every row
    /// past the boundary sorts after every row before it in the read's order; the one row too
    /// many tells [`Namespace::take_live`] that there is more.
    #[expect(
        clippy::too_many_arguments,
        reason = "the read's shape, passed through from two public reads"
    )]
    pub(crate) fn partition_rows(
        &self,
        index: &TableIndex,
        at: PartitionKey<'_>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        live_limit: usize,
        keep_dead: bool,
    ) -> Result<(Vec<StoredRow>, Option<PartitionTombstones>), ReadError> {
        let now_s = self.clock.now_s();
        let (t, partition) = (at.checked_token(), at.key);
        let prefix = |b: Bound<&[u8]>, open: u64| match b {
            Bound::Included(c) | Bound::Excluded(c) => clustering_prefix(c),
            Bound::Unbounded => open,
        };
        let low = IndexKey {
            token: t,
            clustering_prefix: prefix(start, 0),
            digest: 0,
        };
        let high = IndexKey {
            token: t,
            clustering_prefix: prefix(end, u64::MAX),
            digest: u64::MAX,
        };
        // A forward read walks up from the start bound, a reversed one down from the end bound.
        let mut cursor = if reverse { high } else { low };
        let mut first = true;
        let tombstones = self.tombstones_of(index, t, partition)?;
        let stop_early = live_limit < usize::MAX;
        let batch = if stop_early {
            live_limit.saturating_add(1).clamp(16, STORED_BATCH_ENTRIES)
        } else {
            STORED_BATCH_ENTRIES
        };
        let mut rows = Vec::new();
        let mut live = 0usize;
        let mut group: Option<u64> = None;
        'walk: loop {
            let (from, to) = match (reverse, first) {
                (false, true) => (Bound::Included(cursor), Bound::Included(high)),
                (false, false) => (Bound::Excluded(cursor), Bound::Included(high)),
                (true, true) => (Bound::Included(low), Bound::Included(cursor)),
                (true, false) => (Bound::Included(low), Bound::Excluded(cursor)),
            };
            let entries = if reverse {
                index.range_rev(from, to, batch)
            } else {
                index.range(from, to, batch)
            };
            first = false;
            for e in &entries {
                if group != Some(e.key.clustering_prefix) {
                    if stop_early && live > live_limit {
                        break 'walk;
                    }
                    group = Some(e.key.clustering_prefix);
                }
                if e.is_range_tombstones() || (!keep_dead && !e.is_visible(now_s)) {
                    continue;
                }
                let Some(mut found) = self.read_entry(index, e)? else {
                    continue;
                };
                if found.partition_key != partition || !in_bounds(&found.clustering_key, start, end) {
                    continue;
                }
                let mut row = std::mem::take(&mut found.row);
                if let Some(t) = &tombstones {
                    t.shadow(&found.clustering_key, &mut row, now_s);
                }
                let is_live = row.is_live(now_s);
                if !is_live && !keep_dead {
                    continue;
                }
                live += usize::from(is_live);
                rows.push(found.stored(row, e.key));
            }
            match entries.last() {
                Some(last) if entries.len() == batch => cursor = last.key,
                _ => break,
            }
        }
        rows.sort_by(|a, b| a.clustering_key.cmp(&b.clustering_key));
        if reverse {
            rows.reverse();
        }
        Ok((rows, tombstones))
    }
}

/// Merges a table's range and partition tombstones into the rows a read meets, looking each
/// partition's up once (rows of a partition come together).
struct Shadows<'a> {
    inner: &'a Namespace,
    index: &'a TableIndex,
    last: Option<(i64, Vec<u8>, Option<PartitionTombstones>)>,
}

impl<'a> Shadows<'a> {
    fn new(inner: &'a Namespace, index: &'a TableIndex) -> Shadows<'a> {
        Shadows {
            inner,
            index,
            last: None,
        }
    }

    fn apply(&mut self, found: &mut Found, now_s: u32) -> Result<(), ReadError> {
        if !self.index.may_have_range_tombstones() {
            return Ok(());
        }
        let same = matches!(&self.last, Some((t, p, _)) if *t == found.token && *p == found.partition_key);
        if !same {
            let t = self
                .inner
                .tombstones_of(self.index, found.token, &found.partition_key)?;
            self.last = Some((found.token, found.partition_key.clone(), t));
        }
        if let Some((_, _, Some(t))) = &self.last {
            t.shadow(&found.clustering_key, &mut found.row, now_s);
        }
        Ok(())
    }
}

/// The last index key a token may have.
fn token_end(token: i64) -> IndexKey {
    IndexKey {
        token,
        ..IndexKey::MAX
    }
}

/// True if `row` (of the position's token) comes after the position: after the row
/// (`clustering: Some`) or after the whole partition (`None`).
fn is_after(row: &StoredRow, partition: &[u8], clustering: Option<&[u8]>) -> bool {
    match row.partition_key.as_slice().cmp(partition) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => clustering.is_some_and(|c| row.clustering_key.as_slice() > c),
    }
}

fn in_bounds(ck: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    let after_start = match start {
        Bound::Included(s) => ck >= s,
        Bound::Excluded(s) => ck > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => ck <= e,
        Bound::Excluded(e) => ck < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}
