//! The read path: from an index entry to the row, through the open block, the post-write
//! cache, a read ahead or the device; and starting reads ahead.

use std::sync::Arc;

use super::{tombstones_key, Namespace};
use crate::device::{align_up, AlignedBuf};
use crate::error::ReadError;
use crate::format::block::{BlockHeader, BLOCK_HEADER_BYTES};
use crate::format::chunks::ChunkList;
use crate::format::record::{decode_body, decode_record, decode_tombstones_body, RecordView};
use crate::format::DecodeError;
use crate::index::{Entry, IndexKey, Location, TableIndex};
use crate::keys::{RowKey, ScanPosition, StoredRow, ROW_MAX_BYTES};
use crate::range_tombstones::PartitionTombstones;
use crate::read_ahead::{ReadsAhead, Span};
use crate::row::Row;

/// A read retries this often when the block it was sent to was reused under it.
const READ_ATTEMPTS_MAX: usize = 4;

thread_local! {
    /// An aligned buffer for device reads, reused across reads on the same thread.
    static READ_BUF: std::cell::RefCell<Option<AlignedBuf>> = const { std::cell::RefCell::new(None) };
}

/// A decoded record, owned.
pub(crate) struct Found {
    pub token: i64,
    pub partition_key: Vec<u8>,
    pub clustering_key: Vec<u8>,
    pub row: Row,
    /// The row had a delta, merged into `row`: the whole version read, and the delta's record.
    pub delta: Option<(Location, Location)>,
}

impl Found {
    /// The row as a scan returns it, `row` in place of the one read (which the caller made
    /// visible as of now, or kept as it was), resuming after index entry `key`.
    pub fn stored(self, row: Row, key: IndexKey) -> StoredRow {
        StoredRow {
            token: self.token,
            partition_key: self.partition_key,
            clustering_key: self.clustering_key,
            row,
            position: ScanPosition(key),
        }
    }
}

impl Namespace {
    /// The tombstones of one partition, if it has any.
    pub(crate) fn tombstones_of(
        &self,
        index: &TableIndex,
        token: i64,
        partition: &[u8],
    ) -> Result<Option<PartitionTombstones>, ReadError> {
        if !index.may_have_range_tombstones() {
            return Ok(None);
        }
        let Some(entry) = index.get(&tombstones_key(token, partition)) else {
            return Ok(None);
        };
        if !entry.is_range_tombstones() {
            return Ok(None);
        }
        Ok(self
            .read_tombstones_entry(index, &entry)?
            .filter(|(pk, _)| pk == partition)
            .map(|(_, t)| t))
    }

    /// Reads a tombstones record: its partition key and tombstones.
    pub(crate) fn read_tombstones_entry(
        &self,
        index: &TableIndex,
        entry: &Entry,
    ) -> Result<Option<(Vec<u8>, PartitionTombstones)>, ReadError> {
        Ok(self
            .read_entry_with(index, entry, |view| {
                if !view.meta.range_tombstones {
                    return Err(DecodeError::OtherKey);
                }
                let t = decode_tombstones_body(view.body, view.meta.write_timestamp_us)?;
                Ok((view.partition_key.to_vec(), t))
            })?
            .map(|(_, t)| t))
    }

    /// Reads and decodes the record an index entry points to. `None` if the entry moved while
    /// we read (the caller's view is stale and the row is being rewritten).
    ///
    /// A row with a delta comes back with the delta merged in, as long as the delta is still
    /// the one over the version read; if it was folded meanwhile the row is read again where
    /// the fold put it.
    pub(crate) fn read_entry(&self, index: &TableIndex, entry: &Entry) -> Result<Option<Found>, ReadError> {
        let mut entry = *entry;
        let mut _still = None;
        for attempt in 1.. {
            let read = self.read_entry_with(index, &entry, |view| {
                if view.meta.range_tombstones {
                    return Err(DecodeError::OtherKey);
                }
                decode_found(view).map(|found| (view.meta.table, found))
            })?;
            let Some((read, (table, mut found))) = read else {
                return Ok(None);
            };
            if !read.has_delta() {
                return Ok(Some(found));
            }
            if let Some(delta) = self.delta_cells(table, &read.key, Some(read.location))? {
                found.row.merge(delta.cells, self.clock.now_s(), 0);
                found.delta = Some((read.location, delta.location));
                return Ok(Some(found));
            }
            // Folded since the index was read: the row is whole somewhere else now.
            match index.get(&read.key) {
                Some(now) if now != read => entry = now,
                _ => return Ok(Some(found)),
            }
            if attempt == READ_ATTEMPTS_MAX {
                // Folded and written again on every try: the last holds the row still. (A
                // caller holding the row's lock never gets here: its row cannot change.)
                _still = Some(self.row_lock(table, &read.key));
            }
        }
        unreachable!("the loop returns")
    }

    /// Reads the record an index entry points to and decodes it with `decode`; with it, the
    /// entry as it was when read (the row may have moved since `entry` was looked up).
    fn read_entry_with<T>(
        &self,
        index: &TableIndex,
        entry: &Entry,
        decode: impl Fn(&RecordView<'_>) -> Result<T, DecodeError>,
    ) -> Result<Option<(Entry, T)>, ReadError> {
        let mut entry = *entry;
        let mut last_err = None;
        // Past the page cache, once a read through it failed its checks.
        let mut direct = false;
        for _ in 0..READ_ATTEMPTS_MAX {
            let loc = entry.location;
            let sequence = self.blocks.sequence(loc.block());
            match self.decode_at(&entry, sequence, direct, &decode) {
                Ok(found) => {
                    self.stats.add_record_read(u64::from(loc.len()));
                    return Ok(Some((entry, found)));
                }
                Err(e) => last_err = Some(e),
            }
            // The block may have been defragmented and reused between the index lookup and the
            // read: look again, and retry if the row moved.
            match index.get(&entry.key) {
                Some(now) if now.location != loc => entry = now,
                // The row did not move: the page cache may hold a page the device has since
                // overwritten. Read the device itself once before calling the record damaged.
                Some(_) if !direct && self.forget_cached(loc, sequence) => {
                    direct = true;
                    self.stats.add_cached_reread();
                }
                Some(_) => break,
                None => return Ok(None),
            }
        }
        let err = last_err.expect("at least one attempt");
        self.stats.add_read_error();
        tracing::error!("{err}");
        Err(err)
    }

    /// Reads the record of `entry` in its block at `sequence` and decodes it with `decode`
    /// (a chunked row's chunks read too). Nothing here looks at the index: a record a snapshot
    /// pins is read the same way.
    pub(crate) fn decode_at<T>(
        &self,
        entry: &Entry,
        sequence: u64,
        direct: bool,
        decode: impl Fn(&RecordView<'_>) -> Result<T, DecodeError>,
    ) -> Result<T, ReadError> {
        let loc = entry.location;
        // Decoded straight from where the bytes are (the cache or the read buffer).
        let key = entry.key;
        // A chunked row's head comes back as bytes, to be read on once the buffer it sits in
        // is let go.
        let decoded = self.with_record_bytes(loc, sequence, direct, |bytes| {
            let view = decode_record(bytes, sequence)?;
            if view.meta.digest != key.digest || view.meta.token != key.token {
                return Err(DecodeError::OtherKey);
            }
            if view.meta.chunked {
                return Ok(Err(bytes[..view.record_bytes].to_vec()));
            }
            decode(&view).map(Ok)
        });
        match decoded {
            Ok(Ok(Err(head))) => self.read_chunked(loc, &head, sequence, &decode),
            Ok(Ok(Ok(found))) => Ok(found),
            Ok(Err(detail)) => Err(self.corrupt(loc, detail)),
            Err(e) => Err(e),
        }
    }

    /// Reads the chunks a chunked row's head names and decodes the row they make up.
    fn read_chunked<T>(
        &self,
        loc: Location,
        head: &[u8],
        sequence: u64,
        decode: impl Fn(&RecordView<'_>) -> Result<T, DecodeError>,
    ) -> Result<T, ReadError> {
        let view = decode_record(head, sequence).map_err(|d| self.corrupt(loc, d))?;
        let list = ChunkList::decode(view.body).map_err(|d| self.corrupt(loc, d))?;
        let body = self.read_chunks(loc, &list)?;
        decode(&RecordView { body: &body, ..view }).map_err(|d| self.corrupt(loc, d))
    }

    /// A chunked row's body: one device read per chunk, each checked to still be the chunk
    /// the head names, and the whole checked against the head's checksum.
    fn read_chunks(&self, head: Location, list: &ChunkList) -> Result<Vec<u8>, ReadError> {
        let block_size = self.config.block_size_bytes as usize;
        // The list is checked against its chunks, not yet against anything in RAM: reserve no
        // more than a row may hold.
        let mut body = Vec::with_capacity((list.body_bytes as usize).min(ROW_MAX_BYTES));
        let mut buf = AlignedBuf::zeroed(block_size);
        for c in &list.chunks {
            let end = BLOCK_HEADER_BYTES + c.bytes as usize;
            if c.block >= self.blocks.len() || end > block_size {
                return Err(self.corrupt(head, DecodeError::ChunkGone { block: c.block }));
            }
            if let Some(cached) = self.cache.get(c.block, c.sequence) {
                self.stats.add_cache_hit();
                body.extend_from_slice(&cached[BLOCK_HEADER_BYTES..end]);
                continue;
            }
            let (device, offset) = self.devices.locate(c.block);
            let len = align_up(end);
            device
                .read_at(&mut buf[..len], offset)
                .map_err(|source| ReadError::Io {
                    device: device.name(),
                    source,
                })?;
            self.stats.add_device_read();
            match BlockHeader::decode(&buf) {
                Ok(h) if h.chunk && !h.free && h.sequence == c.sequence && h.block_index == c.block => {}
                _ => return Err(self.corrupt(head, DecodeError::ChunkGone { block: c.block })),
            }
            body.extend_from_slice(&buf[BLOCK_HEADER_BYTES..end]);
        }
        let computed = crc32c::crc32c(&body);
        if computed != list.crc32c {
            return Err(self.corrupt(
                head,
                DecodeError::BadChecksum {
                    stored: list.crc32c,
                    computed,
                },
            ));
        }
        Ok(body)
    }

    /// Drops the page cache's copy of the span a record read covers; false when its device
    /// reads records past the page cache, so a direct read would see the same bytes.
    fn forget_cached(&self, loc: Location, sequence: u64) -> bool {
        let (device, block_offset) = self.devices.locate(loc.block());
        let span = Span::of(loc, sequence);
        device.forget_cached(block_offset + span.start as u64, span.len)
    }

    /// Runs `f` on the bytes of one record: from the open block, the post-write cache, a read
    /// ahead, or one device read into this thread's aligned buffer (`direct`: past the page
    /// cache and any read ahead, which may have come through it).
    fn with_record_bytes<R>(
        &self,
        loc: Location,
        sequence: u64,
        direct: bool,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, ReadError> {
        if let Some(bytes) = self.writer.read_open(loc, sequence) {
            return Ok(f(&bytes));
        }
        let (start, len) = (loc.offset() as usize, loc.len() as usize);
        if let Some(buf) = self.cache.get(loc.block(), sequence) {
            self.stats.add_cache_hit();
            return Ok(f(&buf[start..start + len]));
        }
        let (device, block_offset) = self.devices.locate(loc.block());
        let span = Span::of(loc, sequence);
        let (aligned_start, aligned_len) = (span.start, span.len);
        if let Some(buf) = crate::read_ahead::take(span).filter(|_| !direct) {
            let from = start - aligned_start;
            return Ok(f(&buf[from..from + len]));
        }
        READ_BUF.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|b| b.len() < aligned_len) {
                *slot = Some(AlignedBuf::zeroed(aligned_len));
            }
            let buf = &mut slot.as_mut().expect("just filled")[..aligned_len];
            let offset = block_offset + aligned_start as u64;
            let read = if direct {
                device.read_at(buf, offset)
            } else {
                device.read_record_at(buf, offset)
            };
            read.map_err(|source| ReadError::Io {
                device: device.name(),
                source,
            })?;
            self.stats.add_device_read();
            let from = start - aligned_start;
            Ok(f(&buf[from..from + len]))
        })
    }

    /// The reads [`crate::Engine::read_ahead`] starts: see there.
    pub(crate) fn start_reads<'a>(
        &self,
        calls: impl Iterator<Item = (RowKey<'a>, Option<&'a Row>)>,
    ) -> Option<ReadsAhead> {
        let inner = self;
        let ring = inner.ring.as_ref().filter(|r| r.is_driven())?;
        let mut reads = Vec::new();
        let mut entries = Vec::new();
        for (key, update) in calls {
            let Some(index) = inner.existing_table(key.table) else {
                continue;
            };
            let Some(entry) = index.get(&key.index_key()) else {
                continue;
            };
            if entry.is_range_tombstones() || entry.is_chunked() {
                continue;
            }
            if update.is_some_and(|u| {
                inner.may_write_delta(&entry, u)
                    && inner.delta_may_fit(&entry, u)
                    && !inner.sindexes.touches(key.table, u)
            }) {
                continue;
            }
            if update.is_none() {
                // A read takes this lookup instead of making its own, wherever the record is.
                entries.push((key.table, entry));
            }
            let loc = entry.location;
            let sequence = inner.blocks.sequence(loc.block());
            if inner.writer.is_open(sequence) || inner.cache.contains(loc.block(), sequence) {
                continue;
            }
            let (device, block_offset) = inner.devices.locate(loc.block());
            let Some(fd) = device.record_fd() else {
                continue;
            };
            let span = Span::of(loc, sequence);
            if reads.iter().any(|(s, _)| *s == span) {
                continue;
            }
            let Some(read) = ring.start(fd, block_offset + span.start as u64, span.len) else {
                break;
            };
            reads.push((span, read));
        }
        (!reads.is_empty() || !entries.is_empty()).then(|| ReadsAhead {
            reads,
            entries,
            stats: Arc::clone(&inner.stats),
        })
    }
}

pub(crate) fn decode_found(view: &RecordView<'_>) -> Result<Found, DecodeError> {
    Ok(Found {
        token: view.meta.token,
        partition_key: view.partition_key.to_vec(),
        clustering_key: view.clustering_key.to_vec(),
        row: decode_body(view.body, view.meta.write_timestamp_us)?,
        delta: None,
    })
}
