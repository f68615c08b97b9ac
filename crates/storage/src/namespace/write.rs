//! The write path: read, merge and append a row whole, or append it as a delta; and a
//! partition's tombstones record.

use std::sync::atomic::Ordering;

use super::{Found, Namespace};
use crate::blocks::Claim;
use crate::deltas::{Delta, Pending, DELTA_OVERHEAD_BYTES};
use crate::error::{ReadError, WriteError};
use crate::format::record::{body_bytes, encode_body, encode_record, encode_tombstones_body, RecordMeta};
use crate::index::{
    Entry, IndexKey, Location, TableIndex, FLAG_CHUNKED, FLAG_DELTA, FLAG_HAS_DELETIONS, FLAG_HAS_OLDER,
    FLAG_RANGE_TOMBSTONES, FLAG_TOMBSTONE,
};
use crate::keys::{PartitionKey, RowKey, TableId, KEY_MAX_BYTES, ROW_MAX_BYTES};
use crate::range_tombstones::{PartitionTombstones, RANGE_TOMBSTONES_PER_PARTITION_MAX};
use crate::row::Row;
use crate::token::tombstones_digest;
use crate::writer::Position;

/// The largest delta record: a row whose pending cells grow past this is written whole.
const DELTA_RECORD_MAX_BYTES: usize = 16 << 10;

thread_local! {
    static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

impl Namespace {
    /// Merges `update` into the row at `key` and appends the new version; returns the write
    /// position to wait on for durability. An update that only sets cells of a row that is
    /// whole on the device is appended as a delta instead, without reading the row.
    pub(crate) fn write_row(&self, key: RowKey<'_>, update: Row) -> Result<Position, WriteError> {
        self.check_write(&key)?;
        self.write_row_in(&self.table(key.table), key, update)
    }

    /// Refuses a write to a closed namespace or with a key over the limit (before its table is
    /// made, so a refused write leaves no empty table behind).
    pub(crate) fn check_write(&self, key: &RowKey<'_>) -> Result<(), WriteError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(WriteError::Closed);
        }
        for part in [key.partition, key.clustering] {
            if part.len() > KEY_MAX_BYTES {
                return Err(WriteError::KeyTooLarge {
                    bytes: part.len(),
                    max_bytes: KEY_MAX_BYTES,
                });
            }
        }
        Ok(())
    }

    /// [`Namespace::write_row`] into `index`, `key.table`'s, once [`Namespace::check_write`]
    /// passed. When the table has secondary indexes (`sindex.rs`), an update that sets or
    /// deletes an indexed column is written whole, never as a delta, so that the row's old
    /// version is read: under the row's lock, once the row is written, the indexes lose the
    /// terms the row no longer holds and gain those it holds now.
    pub(crate) fn write_row_in(
        &self,
        index: &std::sync::Arc<TableIndex>,
        key: RowKey<'_>,
        update: Row,
    ) -> Result<Position, WriteError> {
        let ikey = key.index_key();
        let now_s = self.clock.now_s();
        let purge_before_s = now_s.saturating_sub(self.tombstone_grace_s(index));
        let indexes = self.sindexes.touched_by(key.table, &update);

        let _row = self.row_lock(key.table, &ikey);
        let previous = index.get(&ikey).filter(|e| !e.is_range_tombstones());
        let mut update = update;
        if let Some(e) = previous.filter(|e| indexes.is_none() && self.may_write_delta(e, &update)) {
            match self.write_delta(key, ikey, index, &e, update, now_s)? {
                Ok(pos) => return Ok(pos),
                // No room: written whole below (the cells include the old delta's, which the
                // read below merges in too; merging twice changes nothing).
                Err(cells) => update = cells,
            }
        }
        let mut row = match &previous {
            Some(e) => match self.read_entry(index, e).map_err(WriteError::Read)? {
                Some(view) => view.row,
                None => Row::default(),
            },
            None => Row::default(),
        };
        let old = indexes.as_ref().map(|_| row.visible(now_s));
        row.merge(update, now_s, purge_before_s);
        let pos = self.write_whole(key, ikey, index, previous.as_ref(), &row, now_s, None)?;
        if let (Some(indexes), Some(old)) = (indexes, old) {
            self.sindexes
                .reindex(key, &indexes, &old, &row.visible(now_s), now_s);
        }
        Ok(pos)
    }

    /// True if an update of the row `e` points at may be written as a delta: the update only
    /// sets cells, and the row is whole on the device, live, with nothing that expires and no
    /// deletions (so the index entry's metadata stays true without reading it).
    pub(super) fn may_write_delta(&self, e: &Entry, update: &Row) -> bool {
        self.deltas.enabled()
            && !e.is_tombstone()
            && !e.is_chunked()
            && !e.has_deletions()
            && e.expiry_s == 0
            && update.sets_only()
    }

    /// Whether an update of the row `e` points at would find room as a delta, judged before it
    /// is written. Reads ahead use it: an update that finds no room reads its row, and that read
    /// must have been started ahead, or it blocks a service thread. A first delta is exactly the
    /// update's cells; a merged one is about the old delta plus them (its timestamps are
    /// encoded against a new base, so it may take a few bytes more: then the write, rarely,
    /// reads its row without a read ahead).
    pub(super) fn delta_may_fit(&self, e: &Entry, update: &Row) -> bool {
        let bytes = body_bytes(update, update.max_timestamp_us()) as u64;
        match e.has_delta() {
            true => self.deltas.has_room(bytes, Some(0)),
            false => self.deltas.has_room(bytes + DELTA_OVERHEAD_BYTES, None),
        }
    }

    /// Appends `update` (merged into the row's pending delta) as the row's delta; `Err` gives
    /// the merged cells back when the delta buffer has no room for them. The caller holds the
    /// row's lock.
    fn write_delta(
        &self,
        key: RowKey<'_>,
        ikey: IndexKey,
        index: &TableIndex,
        e: &Entry,
        update: Row,
        now_s: u32,
    ) -> Result<Result<Position, Row>, WriteError> {
        let old = match e.has_delta() {
            true => self
                .delta_cells(key.table, &ikey, None)
                .map_err(WriteError::Read)?,
            false => None,
        };
        let (mut cells, replacing) = old.map_or((Row::default(), None), |d| (d.cells, Some(d.ram_bytes)));
        cells.merge(update, now_s, 0);
        let written = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (record, body) = &mut *scratch;
            let meta = encode_row(record, body, key, ikey, &cells, now_s, true);
            // The row folded from the two must still fit in a block: a row is refused past
            // ROW_MAX_BYTES when it is written whole, and a fold must never be.
            let folded = e.location.len() as usize + record.len();
            let bytes = body.len() as u64 + DELTA_OVERHEAD_BYTES;
            let fits = record.len() <= DELTA_RECORD_MAX_BYTES
                && folded <= self.writer.record_max_bytes()
                && self.deltas.has_room(bytes, replacing);
            if !fits {
                return Ok(None);
            }
            let (loc, pos) = self.writer.append(record, Claim::Write)?;
            Ok::<_, WriteError>(Some((loc, pos, meta, body.clone().into_boxed_slice())))
        })?;
        let Some((loc, pos, meta, body)) = written else {
            return Ok(Err(cells));
        };
        self.stats.add_user_bytes_written(loc.len() as u64);
        self.stats.add_blind_write();
        let delta = Delta {
            base: e.location,
            location: loc,
            write_timestamp_us: meta.write_timestamp_us,
            body,
        };
        if let Some(replaced) = self.deltas.insert(key.table, ikey, delta) {
            self.blocks
                .sub_live(replaced.location.block(), replaced.location.len());
        }
        // The whole version stays where it is, and live: only the entry's flags and newest
        // timestamp change.
        index.upsert(Entry {
            write_timestamp_us: e.write_timestamp_us.max(meta.write_timestamp_us),
            flags: e.flags | FLAG_DELTA | FLAG_HAS_OLDER,
            ..*e
        });
        Ok(Ok(pos))
    }

    /// Appends `row` whole as the row's new version, replacing `previous` (and its delta, if it
    /// had one: `row` must hold the delta's cells). `claim` is defragmentation's when it folds a
    /// delta. The caller holds the row's lock.
    #[expect(clippy::too_many_arguments, reason = "the write's parts, from three callers")]
    fn write_whole(
        &self,
        key: RowKey<'_>,
        ikey: IndexKey,
        index: &TableIndex,
        previous: Option<&Entry>,
        row: &Row,
        now_s: u32,
        claim: Option<Claim>,
    ) -> Result<Position, WriteError> {
        let (loc, pos, meta, chunks) = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (record, body) = &mut *scratch;
            let mut meta = encode_row(record, body, key, ikey, row, now_s, false);
            // A write that leaves the row without live data is a delete: it may dip into
            // the reserve, so that a full namespace can be emptied.
            let claim = claim.unwrap_or(if meta.tombstone {
                Claim::Delete
            } else {
                Claim::Write
            });
            let mut chunks = None;
            if record.len() > self.writer.record_max_bytes() {
                if record.len() > ROW_MAX_BYTES {
                    return Err(WriteError::RecordTooLarge {
                        bytes: record.len(),
                        max_bytes: ROW_MAX_BYTES,
                    });
                }
                let list = self.writer.write_chunks(body, claim)?;
                body.clear();
                list.encode(body);
                meta.chunked = true;
                record.clear();
                encode_record(record, 0, &meta, key.partition, key.clustering, body);
                chunks = Some(list.chunks.iter().map(|c| c.block).collect::<Vec<_>>());
            }
            match self.writer.append(record, claim) {
                Ok((loc, pos)) => Ok((loc, pos, meta, chunks)),
                Err(e) => {
                    // Named by no head: they go straight back.
                    for &b in chunks.iter().flatten() {
                        self.cache.remove(b);
                        self.blocks.release(b);
                    }
                    Err(e)
                }
            }
        })?;
        if claim.is_none() {
            self.stats.add_user_bytes_written(loc.len() as u64);
        }
        let entry = Entry {
            key: ikey,
            location: loc,
            write_timestamp_us: meta.write_timestamp_us,
            expiry_s: meta.expiry_s,
            flags: if meta.tombstone { FLAG_TOMBSTONE } else { 0 }
                | if meta.has_deletions { FLAG_HAS_DELETIONS } else { 0 }
                | if previous.is_some() { FLAG_HAS_OLDER } else { 0 }
                | if chunks.is_some() { FLAG_CHUNKED } else { 0 },
        };
        if let Some(replaced) = index.upsert(entry) {
            self.blocks
                .sub_live(replaced.location.block(), replaced.location.len());
            if replaced.is_chunked() {
                self.forget_chunks(key.table, &ikey);
            }
            if replaced.has_delta() {
                self.forget_delta(key.table, &ikey);
                self.stats.add_delta_fold();
            }
        }
        if let Some(blocks) = chunks {
            self.lock_chunks().insert((key.table, ikey), blocks);
        }
        Ok(pos)
    }

    /// The row's delta, decoded, if it has one (over `base`, when given).
    pub(crate) fn delta_cells(
        &self,
        table: TableId,
        key: &IndexKey,
        base: Option<Location>,
    ) -> Result<Option<Pending>, ReadError> {
        self.deltas
            .pending(table, key, base)
            .transpose()
            .map_err(|(loc, detail)| self.corrupt(loc, detail))
    }

    /// Writes a row just read whole over its delta, if it still has exactly the delta the read
    /// merged (`found.delta`): the next read then costs one device read and no merge, and the
    /// delta's RAM is free. Best effort: a failure leaves the delta as it was.
    pub(crate) fn fold_after_read(&self, key: RowKey<'_>, ikey: IndexKey, index: &TableIndex, found: &Found) {
        let Some((base, delta_at)) = found.delta else {
            return;
        };
        let _row = self.row_lock(key.table, &ikey);
        let Some(e) = index.get(&ikey) else {
            return;
        };
        if e.location != base || !e.has_delta() || self.deltas.location(key.table, &ikey) != Some(delta_at) {
            return;
        }
        let now_s = self.clock.now_s();
        if let Err(err) = self.write_whole(key, ikey, index, Some(&e), &found.row, now_s, Some(Claim::Write))
        {
            tracing::debug!("a row read with its delta was not folded: {err}");
        }
    }

    /// Defragmentation met the whole version `e` of a row with a delta: the row is written
    /// whole from `base` (the record, decoded from the block in memory) and the delta, and
    /// both old records die. The caller holds the row's lock.
    pub(crate) fn fold_in_defrag(
        &self,
        table: TableId,
        index: &TableIndex,
        e: &Entry,
        mut base: Found,
    ) -> Result<bool, WriteError> {
        let Some(delta) = self
            .delta_cells(table, &e.key, Some(e.location))
            .map_err(WriteError::Read)?
        else {
            return Ok(false);
        };
        let now_s = self.clock.now_s();
        base.row.merge(delta.cells, now_s, 0);
        let key = RowKey {
            table,
            token: e.key.token,
            partition: &base.partition_key,
            clustering: &base.clustering_key,
        };
        self.write_whole(key, e.key, index, Some(e), &base.row, now_s, Some(Claim::Defrag))?;
        Ok(true)
    }

    /// Joins `added` into the partition's tombstones record (read, merge, write, as a row);
    /// returns the write position to wait on for durability.
    pub(crate) fn write_tombstones(
        &self,
        at: PartitionKey<'_>,
        added: PartitionTombstones,
    ) -> Result<Position, WriteError> {
        let (table, partition) = (at.table, at.key);
        if self.stop.load(Ordering::Relaxed) {
            return Err(WriteError::Closed);
        }
        if partition.len() > KEY_MAX_BYTES {
            return Err(WriteError::KeyTooLarge {
                bytes: partition.len(),
                max_bytes: KEY_MAX_BYTES,
            });
        }
        let ikey = tombstones_key(at.checked_token(), partition);
        let index = self.table(table);
        let _row = self.row_lock(table, &ikey);
        let previous = index.get(&ikey).filter(Entry::is_range_tombstones);
        let mut tombstones = match &previous {
            Some(e) => self
                .read_tombstones_entry(&index, e)
                .map_err(WriteError::Read)?
                .map(|(_, t)| t)
                .unwrap_or_default(),
            None => PartitionTombstones::default(),
        };
        tombstones.merge(added);
        if tombstones.ranges.len() > RANGE_TOMBSTONES_PER_PARTITION_MAX {
            return Err(WriteError::TooManyRangeTombstones {
                ranges: tombstones.ranges.len(),
                max: RANGE_TOMBSTONES_PER_PARTITION_MAX,
            });
        }
        let write_timestamp_us = tombstones.max_timestamp_us();
        // Dated by its latest deletion, as a row tombstone is: the grace period runs from there.
        let meta = RecordMeta {
            table,
            token: ikey.token,
            digest: ikey.digest,
            write_timestamp_us,
            expiry_s: tombstones.latest_deleted_at_s().max(1),
            tombstone: true,
            has_deletions: true,
            range_tombstones: true,
            chunked: false,
            delta: false,
        };
        let (loc, pos) = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (record, body) = &mut *scratch;
            body.clear();
            encode_tombstones_body(body, &tombstones, write_timestamp_us);
            record.clear();
            encode_record(record, 0, &meta, partition, &[], body);
            self.writer.append(record, Claim::Delete)
        })?;
        self.stats.add_user_bytes_written(loc.len() as u64);
        let entry = Entry {
            key: ikey,
            location: loc,
            write_timestamp_us,
            expiry_s: meta.expiry_s,
            flags: FLAG_TOMBSTONE
                | FLAG_HAS_DELETIONS
                | FLAG_RANGE_TOMBSTONES
                | if previous.is_some() { FLAG_HAS_OLDER } else { 0 },
        };
        if let Some(replaced) = index.upsert(entry) {
            self.blocks
                .sub_live(replaced.location.block(), replaced.location.len());
        }
        Ok(pos)
    }
}

/// Encodes a row (or a row's delta) as a record into `record`, leaving its body in `body`;
/// returns its metadata.
fn encode_row(
    record: &mut Vec<u8>,
    body: &mut Vec<u8>,
    key: RowKey<'_>,
    ikey: IndexKey,
    row: &Row,
    now_s: u32,
    delta: bool,
) -> RecordMeta {
    let write_timestamp_us = row.max_timestamp_us();
    // A row with nothing live left (only deletions, or content already expired) is stored as a
    // tombstone, dated by its latest deletion or expiry.
    let (tombstone, expiry_s) = match row.live_until_s() {
        None => (false, 0),
        Some(until) if until > now_s => (false, until),
        Some(until) => (true, row.latest_deletion_s().max(until).max(1)),
    };
    let meta = RecordMeta {
        table: key.table,
        token: ikey.token,
        digest: ikey.digest,
        write_timestamp_us,
        expiry_s,
        tombstone,
        has_deletions: row.has_deletions(),
        range_tombstones: false,
        chunked: false,
        delta,
    };
    body.clear();
    encode_body(body, row, write_timestamp_us);
    record.clear();
    encode_record(record, 0, &meta, key.partition, key.clustering, body);
    meta
}

/// Where a partition's tombstones record sits in the index: first among the partition's
/// entries (clustering prefix 0), under a digest no row has.
pub(crate) fn tombstones_key(token: i64, partition: &[u8]) -> IndexKey {
    IndexKey {
        token,
        clustering_prefix: 0,
        digest: tombstones_digest(partition),
    }
}
