//! Reading one export chunk: which index entries it holds, and reading them from the device.
//!
//! A chunk is a stretch of the index in token order (so that `next` can say where the next one
//! starts), but its rows were written at random times and lie scattered over the whole device:
//! a token range is spread over every block. Read in index order, each record costs one small
//! random read, one after another. Instead, a chunk's entries are sorted by (block, offset);
//! neighbours closer than [`GAP_BYTES_MAX`] are joined into one read of the span over them
//! (skipping a gap costs less than a second read while it is shorter than the device's
//! bandwidth times its time per read: 600 MB/s x 50-100 µs here); and [`READERS_MAX`] reads
//! are in flight at once, since a virtual disk or an SSD serves several reads at once far
//! faster than one after another. The receiver does not care about the order of records in a
//! chunk; they are sent in index order all the same.
//!
//! Measured with `measure.rs` (release build, this project's 2-CPU VM): a 2 GiB device file,
//! 1 M rows of 1 KB, 8 MiB of post-write cache, a quarter of the token range (250 k rows,
//! 268 MB on the device) exported whole, in records/s by chunk size. fio on the same file:
//! 600 MB/s sequential in 1 MiB reads; random 4 KiB reads 8.5 k/s one at a time, 21 k/s from
//! four threads, 25 k/s at queue depth 16.
//!
//! | read order                                   |  4 MiB |  16 MiB |  64 MiB |
//! |----------------------------------------------|-------:|--------:|--------:|
//! | index order, one read per record             |  8.4 k |   8.4 k |   8.4 k |
//! | device order, one read per record            |  8.7 k |   9.4 k |  11.9 k |
//! | device order, joined within 128 KiB          |  7.7 k |   9.4 k |  25.2 k |
//! | one read per record, 4 in flight             | 21.3 k |  26.3 k |  32.5 k |
//! | joined within 32 KiB, 4 in flight            | 22.9 k |  24.2 k |  38.1 k |
//! | joined within 128 KiB, 4 in flight           | 15.8 k |  14.0 k |  32.0 k |
//! | one read per record, 8 in flight             | 33.9 k |  32.1 k |  36.0 k |
//! | **joined within 32 KiB, 8 in flight**        | 31.3 k |  37.8 k |  53.5 k |
//!
//! The choice, the last line, moves 33-57 MB/s of rows, 4 to 6 times index order. A chunk's
//! rows are a thin slice of every block (a 16 MiB chunk holds about 15 of a 1 MiB block's 930
//! rows), so joining pays only as chunks grow, and wide joins read mostly rows of other chunks
//! (the 128 KiB lines). Reading every block of the device once would send a quarter of it at
//! the device's sequential rate, about 130 k rows/s here, but a chunk then could not be a
//! stretch of index order, which is how `next` resumes a stream.

use std::ops::{Bound, Range};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::device::{align_down, align_up, read_in_pieces, AlignedBuf};
use crate::error::ReadError;
use crate::format::record::{decode_body, decode_record, encode_body, encode_tombstones_body};
use crate::format::stream::{ChunkEncoder, RecordKind, CHUNK_DATA_BYTES_MAX, RECORDS_PER_CHUNK_MAX};
use crate::index::{Entry, IndexKey, TableIndex};
use crate::keys::{ScanFrom, ScanPosition, TableId};
use crate::namespace::Namespace;
use crate::row::Row;

use super::{stored_bytes, ExportedChunk};

/// Index entries a chunk's plan takes from the index at once.
const PLAN_BATCH_ENTRIES: usize = 1024;
/// Records of one block closer than this are read in one read, the gap between them with them.
pub(crate) const GAP_BYTES_MAX: usize = 32 << 10;
/// Device reads one export has in flight at once, each from a thread of its own for the
/// export's duration.
pub(crate) const READERS_MAX: usize = 8;

/// How an export reads its records: the engine's choice, and the others `measure.rs` compares
/// it with.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReadOrder {
    /// Each record as a one-row read reads it, in index order.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the baseline measure.rs compares the choice with")
    )]
    Index,
    /// Sorted by place on the device, neighbours within `gap_bytes` read together, `readers`
    /// reads in flight.
    Device { gap_bytes: usize, readers: usize },
}

impl ReadOrder {
    pub(crate) const DEFAULT: ReadOrder = ReadOrder::Device {
        gap_bytes: GAP_BYTES_MAX,
        readers: READERS_MAX,
    };
}

/// An index entry a chunk will hold, with the bytes it takes on the device.
struct Planned {
    entry: Entry,
    stored_bytes: u64,
}

/// The entries of one chunk, in index order; `more` if the range goes on after them.
struct Plan {
    entries: Vec<Planned>,
    more: bool,
}

/// One record read, ready to go into the chunk.
struct Exported {
    key: IndexKey,
    kind: RecordKind,
    token: i64,
    base_timestamp_us: i64,
    partition_key: Vec<u8>,
    clustering_key: Vec<u8>,
    body: Vec<u8>,
    stored_bytes: u64,
}

/// Records of one block read with one device read: the aligned span `start..end` of the block,
/// and which of the sorted entries lie in it.
struct Run {
    block: u32,
    start: usize,
    end: usize,
    entries: Range<usize>,
}

pub(crate) fn export(
    inner: &Namespace,
    table: TableId,
    from: ScanFrom,
    end_token: i64,
    max_bytes: usize,
    order: ReadOrder,
) -> Result<ExportedChunk, ReadError> {
    let budget = max_bytes.clamp(1, CHUNK_DATA_BYTES_MAX);
    let mut encoder = ChunkEncoder::new(table);
    let Some(index) = inner.existing_table(table) else {
        return Ok(ExportedChunk {
            bytes: encoder.finish(),
            records: 0,
            data_bytes: 0,
            next: None,
        });
    };
    let start = match from {
        ScanFrom::Token(t) => Bound::Included(IndexKey {
            token: t,
            ..IndexKey::MIN
        }),
        ScanFrom::After(p) => Bound::Excluded(p.0),
    };
    let end = IndexKey {
        token: end_token,
        ..IndexKey::MAX
    };
    let plan = plan(inner, table, &index, start, end, budget);
    let mut read = match order {
        ReadOrder::Index => read_in_index_order(inner, &index, &plan.entries)?,
        ReadOrder::Device { gap_bytes, readers } => {
            read_in_device_order(inner, table, &index, &plan.entries, gap_bytes, readers)?
        }
    };
    read.sort_unstable_by_key(|r| r.key);

    // Encoded in index order until the chunk holds its budget: what the plan estimated from
    // the device's bytes may come out larger once encoded (a row merged with its delta).
    let (mut data_bytes, mut last_sent, mut cut) = (0, None, false);
    for r in &read {
        if encoder.records() > 0 && (encoder.data_bytes() >= budget || !encoder.has_room()) {
            cut = true;
            break;
        }
        encoder.push(
            r.kind,
            r.token,
            r.base_timestamp_us,
            &r.partition_key,
            &r.clustering_key,
            &r.body,
        );
        data_bytes += r.stored_bytes;
        last_sent = Some(r.key);
    }
    // Uncut, the chunk covers every planned entry, including those gone since the plan.
    let covered = match cut {
        true => last_sent,
        false => plan.entries.last().map(|p| p.entry.key),
    };
    let next = (cut || plan.more).then_some(covered).flatten().map(ScanPosition);
    Ok(ExportedChunk {
        records: encoder.records() as u64,
        bytes: encoder.finish(),
        data_bytes,
        next,
    })
}

/// The entries from `start` on, in index order, until their bytes on the device reach the
/// budget (at least one entry).
fn plan(
    inner: &Namespace,
    table: TableId,
    index: &TableIndex,
    start: Bound<IndexKey>,
    end: IndexKey,
    budget: usize,
) -> Plan {
    let mut entries: Vec<Planned> = Vec::new();
    let mut bytes = 0u64;
    let mut cursor = start;
    loop {
        let batch = index.range(cursor, Bound::Included(end), PLAN_BATCH_ENTRIES);
        for e in &batch {
            if !entries.is_empty() && (bytes >= budget as u64 || entries.len() == RECORDS_PER_CHUNK_MAX) {
                return Plan { entries, more: true };
            }
            let stored_bytes = stored_bytes(inner, table, e);
            bytes += stored_bytes;
            entries.push(Planned {
                entry: *e,
                stored_bytes,
            });
        }
        match batch.last() {
            Some(last) if batch.len() == PLAN_BATCH_ENTRIES => cursor = Bound::Excluded(last.key),
            _ => return Plan { entries, more: false },
        }
    }
}

fn read_in_index_order(
    inner: &Namespace,
    index: &TableIndex,
    plan: &[Planned],
) -> Result<Vec<Exported>, ReadError> {
    let mut out = Vec::with_capacity(plan.len());
    for p in plan {
        out.extend(read_one(inner, index, p)?);
    }
    Ok(out)
}

fn read_in_device_order(
    inner: &Namespace,
    table: TableId,
    index: &TableIndex,
    plan: &[Planned],
    gap_bytes: usize,
    readers: usize,
) -> Result<Vec<Exported>, ReadError> {
    let mut out = Vec::with_capacity(plan.len());
    let mut in_blocks = Vec::with_capacity(plan.len());
    for p in plan {
        // A chunked row's head names blocks of its own, each read whole: read as a one-row
        // read reads it.
        if p.entry.is_chunked() {
            out.extend(read_one(inner, index, p)?);
        } else {
            in_blocks.push(p);
        }
    }
    in_blocks.sort_unstable_by_key(|p| (p.entry.location.block(), p.entry.location.offset()));
    let runs = runs(&in_blocks, gap_bytes);
    let read_runs = |next: &AtomicUsize, failed: &AtomicBool| -> Result<Vec<Exported>, ReadError> {
        let mut mine = Vec::new();
        let mut buf = None;
        let result = loop {
            let Some(run) = runs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break Ok(mine);
            };
            if failed.load(Ordering::Relaxed) {
                break Ok(mine);
            }
            let entries = &in_blocks[run.entries.clone()];
            if let Err(e) = read_run(inner, table, index, run, entries, &mut buf, &mut mine) {
                failed.store(true, Ordering::Relaxed);
                break Err(e);
            }
        };
        if let Some(buf) = buf {
            inner.cache().give_spare(buf);
        }
        result
    };
    let (next, failed) = (AtomicUsize::new(0), AtomicBool::new(false));
    let readers = readers.clamp(1, runs.len().max(1));
    if readers == 1 {
        out.extend(read_runs(&next, &failed)?);
        return Ok(out);
    }
    let results: Vec<Result<Vec<Exported>, ReadError>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..readers)
            .map(|_| s.spawn(|| read_runs(&next, &failed)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

/// Joins entries sorted by place into reads: same block, and no more than `gap_bytes` apart.
fn runs(sorted: &[&Planned], gap_bytes: usize) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, p) in sorted.iter().enumerate() {
        let loc = p.entry.location;
        let start = align_down(loc.offset() as usize);
        let end = align_up(loc.offset() as usize + loc.len() as usize);
        match runs.last_mut() {
            Some(r) if r.block == loc.block() && start <= r.end + gap_bytes => {
                r.end = r.end.max(end);
                r.entries.end = i + 1;
            }
            _ => runs.push(Run {
                block: loc.block(),
                start,
                end,
                entries: i..i + 1,
            }),
        }
    }
    runs
}

/// Reads one run's records: from the post-write cache if the block is there, as one-row reads
/// if it is the open block, else with one device read of the run's span.
fn read_run(
    inner: &Namespace,
    table: TableId,
    index: &TableIndex,
    run: &Run,
    entries: &[&Planned],
    buf: &mut Option<AlignedBuf>,
    out: &mut Vec<Exported>,
) -> Result<(), ReadError> {
    let sequence = inner.blocks().sequence(run.block);
    if let Some(cached) = inner.cache().get(run.block, sequence) {
        inner.stats().add_cache_hit();
        return decode_run(inner, table, index, entries, &cached, 0, sequence, out);
    }
    if inner.writer().is_open(sequence) {
        for p in entries {
            out.extend(read_one(inner, index, p)?);
        }
        return Ok(());
    }
    let block_bytes = inner.config().block_size_bytes as usize;
    let buf = buf.get_or_insert_with(|| {
        inner
            .cache()
            .take_spare(block_bytes)
            .unwrap_or_else(|| AlignedBuf::zeroed(block_bytes))
    });
    let span = &mut buf[..run.end - run.start];
    let (device, block_offset) = inner.devices().locate(run.block);
    read_in_pieces(device, span, block_offset + run.start as u64).map_err(|source| ReadError::Io {
        device: device.name(),
        source,
    })?;
    inner.stats().add_device_read();
    decode_run(inner, table, index, entries, span, run.start, sequence, out)
}

/// Decodes each entry's record from `bytes`, which hold the block from `bytes_start` on; an
/// entry whose record is not there as planned is read again as a one-row read.
#[expect(clippy::too_many_arguments, reason = "one run's parts, from its one caller")]
fn decode_run(
    inner: &Namespace,
    table: TableId,
    index: &TableIndex,
    entries: &[&Planned],
    bytes: &[u8],
    bytes_start: usize,
    sequence: u64,
    out: &mut Vec<Exported>,
) -> Result<(), ReadError> {
    for p in entries {
        let loc = p.entry.location;
        let from = loc.offset() as usize - bytes_start;
        let record = &bytes[from..from + loc.len() as usize];
        match decode_in_place(inner, table, p, record, sequence) {
            Some(r) => {
                inner.stats().add_record_read(u64::from(loc.len()));
                out.push(r);
            }
            // Moved, rewritten or folded since the plan, or damaged: the one-row read looks
            // the row up again, and reports damage as any read does.
            None => out.extend(read_one(inner, index, p)?),
        }
    }
    Ok(())
}

/// The record of `p` from the bytes where the plan said it was, if it is still there as the
/// plan saw it. A plain row or a partition's tombstones goes as stored, its body not decoded:
/// the record's checksum vouches for it, and the receiver decodes every body before it applies
/// anything.
fn decode_in_place(
    inner: &Namespace,
    table: TableId,
    p: &Planned,
    record: &[u8],
    sequence: u64,
) -> Option<Exported> {
    let e = &p.entry;
    let view = decode_record(record, sequence).ok()?;
    let meta = &view.meta;
    let as_planned = meta.token == e.key.token
        && meta.digest == e.key.digest
        && !meta.chunked
        && !meta.delta
        && meta.range_tombstones == e.is_range_tombstones();
    if !as_planned {
        return None;
    }
    let (base_timestamp_us, body) = if e.has_delta() {
        let pending = inner.delta_cells(table, &e.key, Some(e.location)).ok()??;
        let mut row = decode_body(view.body, meta.write_timestamp_us).ok()?;
        row.merge(pending.cells, inner.now_s(), 0);
        encoded_row(&row)
    } else {
        (meta.write_timestamp_us, view.body.to_vec())
    };
    Some(Exported {
        key: e.key,
        kind: match meta.range_tombstones {
            true => RecordKind::Tombstones,
            false => RecordKind::Row,
        },
        token: meta.token,
        base_timestamp_us,
        partition_key: view.partition_key.to_vec(),
        clustering_key: view.clustering_key.to_vec(),
        body,
        stored_bytes: p.stored_bytes,
    })
}

/// The record of `p` as a one-row read reads it (from memory, or one device read; a chunked
/// row's blocks; a delta merged); `None` if the row is gone.
fn read_one(inner: &Namespace, index: &TableIndex, p: &Planned) -> Result<Option<Exported>, ReadError> {
    let e = &p.entry;
    if e.is_range_tombstones() {
        let Some((partition_key, t)) = inner.read_tombstones_entry(index, e)? else {
            return Ok(None);
        };
        let base_timestamp_us = t.max_timestamp_us();
        let mut body = Vec::new();
        encode_tombstones_body(&mut body, &t, base_timestamp_us);
        return Ok(Some(Exported {
            key: e.key,
            kind: RecordKind::Tombstones,
            token: e.key.token,
            base_timestamp_us,
            partition_key,
            clustering_key: Vec::new(),
            body,
            stored_bytes: p.stored_bytes,
        }));
    }
    let Some(found) = inner.read_entry(index, e)? else {
        return Ok(None);
    };
    let (base_timestamp_us, body) = encoded_row(&found.row);
    Ok(Some(Exported {
        key: e.key,
        kind: RecordKind::Row,
        token: found.token,
        base_timestamp_us,
        partition_key: found.partition_key,
        clustering_key: found.clustering_key,
        body,
        stored_bytes: p.stored_bytes,
    }))
}

/// A row's body against its newest timestamp, as the engine encodes a record's.
fn encoded_row(row: &Row) -> (i64, Vec<u8>) {
    let base_timestamp_us = row.max_timestamp_us();
    let mut body = Vec::new();
    encode_body(&mut body, row, base_timestamp_us);
    (base_timestamp_us, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Location;

    fn planned(block: u32, offset: u32, len: u32) -> Planned {
        Planned {
            entry: Entry {
                key: IndexKey::MIN,
                location: Location::new(block, offset, len),
                write_timestamp_us: 0,
                expiry_s: 0,
                flags: 0,
            },
            stored_bytes: u64::from(len),
        }
    }

    /// Records of one block within the gap share a read of the aligned span over them; a wider
    /// gap, or another block, starts a read of its own.
    #[test]
    fn neighbours_within_the_gap_are_read_together() {
        let plan = [
            planned(1, 64, 1_024),
            planned(1, 8_192, 512),
            planned(1, 200_000, 64),
            planned(2, 64, 64),
        ];
        let sorted: Vec<&Planned> = plan.iter().collect();
        let spans = |gap| -> Vec<(u32, usize, usize, Range<usize>)> {
            runs(&sorted, gap)
                .into_iter()
                .map(|r| (r.block, r.start, r.end, r.entries))
                .collect()
        };
        assert_eq!(
            spans(4_096),
            vec![
                (1, 0, 12_288, 0..2),
                (1, 196_608, 200_704, 2..3),
                (2, 0, 4_096, 3..4)
            ]
        );
        assert_eq!(spans(0).len(), 4, "no gap: a read per record on its own page");
        assert_eq!(spans(1 << 20)[0], (1, 0, 200_704, 0..3));
    }
}
