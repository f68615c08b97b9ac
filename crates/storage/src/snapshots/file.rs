//! A table snapshot's file, `rows.index` in the snapshot's directory: the blocks it pins, then
//! the index entries (and pending deltas) of each table it holds, as they were when it was
//! taken. The records themselves stay in the pinned blocks on the device.
//!
//! ```text
//! header (32 bytes): magic "HYSN" | version u32 | block size u32 | pinned count u32 |
//!                    table count u32 | reserved u32 | taken at (Unix ms) u64
//! pinned:            block u32 | sequence u64, 12 bytes each
//! crc32c of the header and the pinned list, u32 (read alone at open, to pin the blocks)
//! per table:         table id u32 | entry count u64 | entries, 48 bytes each (as the index
//!                    file: token i64 | clustering prefix u64 | digest u64 | location u64 |
//!                    write timestamp i64 | expiry u32 | flags u32) |
//!                    delta count u64 | per delta: token i64 | clustering prefix u64 |
//!                    digest u64 | write timestamp i64 | body length u32 | body
//! trailer:           crc32c of everything before it, u32
//! ```
//! All little-endian. A delta is the pending cells of an entry that has `FLAG_DELTA`: its body
//! is kept here rather than pinned, as the index file keeps it.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use crate::format::{Cursor, DecodeError};
use crate::index::{Entry, IndexKey};
use crate::keys::TableId;
use crate::snapshot::{read_entry, read_key, write_entry, write_key, CrcWriter, ENTRY_BYTES};

const MAGIC: [u8; 4] = *b"HYSN";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 32;
const PIN_BYTES: usize = 12;

/// A pending delta as a snapshot keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SavedDelta {
    pub write_timestamp_us: i64,
    pub body: Box<[u8]>,
}

/// One table's part of a snapshot.
#[derive(Debug, Default)]
pub(crate) struct SavedTable {
    pub entries: Vec<Entry>,
    pub deltas: HashMap<IndexKey, SavedDelta>,
}

/// What a snapshot file holds.
#[derive(Debug, Default)]
pub(crate) struct Contents {
    pub block_size_bytes: u32,
    pub taken_at_ms: u64,
    /// Each pinned block and its sequence when the snapshot was taken.
    pub pinned: Vec<(u32, u64)>,
    pub tables: Vec<(TableId, SavedTable)>,
}

/// Writes `contents` to `path` (through a temporary file, synced, then renamed).
pub(crate) fn write(path: &Path, contents: &Contents) -> io::Result<()> {
    let (tmp, mut w) = CrcWriter::create(path)?;
    w.write_all(&MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())?;
    w.write_all(&contents.block_size_bytes.to_le_bytes())?;
    w.write_all(&(contents.pinned.len() as u32).to_le_bytes())?;
    w.write_all(&(contents.tables.len() as u32).to_le_bytes())?;
    w.write_all(&0u32.to_le_bytes())?;
    w.write_all(&contents.taken_at_ms.to_le_bytes())?;
    for &(b, seq) in &contents.pinned {
        w.write_all(&b.to_le_bytes())?;
        w.write_all(&seq.to_le_bytes())?;
    }
    let prefix_crc = w.crc;
    w.write_all(&prefix_crc.to_le_bytes())?;
    for (id, t) in &contents.tables {
        w.write_all(&id.to_le_bytes())?;
        w.write_all(&(t.entries.len() as u64).to_le_bytes())?;
        for e in &t.entries {
            write_entry(&mut w, e)?;
        }
        w.write_all(&(t.deltas.len() as u64).to_le_bytes())?;
        for (key, d) in &t.deltas {
            write_key(&mut w, key)?;
            w.write_all(&d.write_timestamp_us.to_le_bytes())?;
            w.write_all(&(d.body.len() as u32).to_le_bytes())?;
            w.write_all(&d.body)?;
        }
    }
    w.finish(&tmp, path)
}

/// Why a snapshot file cannot be used.
#[derive(Debug)]
pub(crate) enum Damage {
    Io(io::Error),
    NotASnapshot,
    Version(u32),
    Checksum,
    Decode(DecodeError),
    TooMany,
}

impl From<DecodeError> for Damage {
    fn from(e: DecodeError) -> Damage {
        Damage::Decode(e)
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Io(e) => write!(f, "unreadable ({e})"),
            Damage::NotASnapshot => write!(f, "not a snapshot file"),
            Damage::Version(v) => write!(f, "unknown snapshot file version {v}"),
            Damage::Checksum => write!(f, "checksum mismatch"),
            Damage::Decode(e) => write!(f, "{e}"),
            Damage::TooMany => write!(f, "a count larger than the file"),
        }
    }
}

/// The header's fields and the pinned blocks, checked against their own checksum; the cursor
/// is left after that checksum.
fn read_prefix(r: &mut Cursor<'_>, bytes: &[u8]) -> Result<Contents, Damage> {
    if r.take(4)? != MAGIC {
        return Err(Damage::NotASnapshot);
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(Damage::Version(version));
    }
    let block_size_bytes = r.u32()?;
    let pinned_count = r.u32()? as usize;
    let _tables = r.u32()?;
    r.u32()?;
    let taken_at_ms = r.u64()?;
    if pinned_count > r.remaining() / PIN_BYTES {
        return Err(Damage::TooMany);
    }
    let mut pinned = Vec::with_capacity(pinned_count);
    for _ in 0..pinned_count {
        pinned.push((r.u32()?, r.u64()?));
    }
    let prefix = HEADER_BYTES + pinned_count * PIN_BYTES;
    if crc32c::crc32c(&bytes[..prefix]) != r.u32()? {
        return Err(Damage::Checksum);
    }
    Ok(Contents {
        block_size_bytes,
        taken_at_ms,
        pinned,
        tables: Vec::new(),
    })
}

/// The blocks a snapshot pins, read from the front of its file alone (at open, before the
/// index is rebuilt: a snapshot of millions of rows is not read whole for this).
pub(crate) fn read_pins(path: &Path) -> Result<Contents, Damage> {
    let mut file = File::open(path).map_err(Damage::Io)?;
    let mut head = [0u8; HEADER_BYTES];
    file.read_exact(&mut head)
        .map_err(|_| Damage::Decode(DecodeError::Truncated))?;
    let pinned_count = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as usize;
    let len = file.metadata().map_err(Damage::Io)?.len() as usize;
    if pinned_count > len / PIN_BYTES {
        return Err(Damage::TooMany);
    }
    let mut bytes = head.to_vec();
    bytes.resize(HEADER_BYTES + pinned_count * PIN_BYTES + 4, 0);
    file.read_exact(&mut bytes[HEADER_BYTES..])
        .map_err(|_| Damage::Decode(DecodeError::Truncated))?;
    read_prefix(&mut Cursor::new(&bytes), &bytes)
}

/// The whole file, checked.
pub(crate) fn read(path: &Path) -> Result<Contents, Damage> {
    let bytes = fs::read(path).map_err(Damage::Io)?;
    if bytes.len() < HEADER_BYTES + 8 {
        return Err(Damage::Decode(DecodeError::Truncated));
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(trailer.try_into().expect("4 bytes")) {
        return Err(Damage::Checksum);
    }
    let mut r = Cursor::new(body);
    let mut contents = read_prefix(&mut r, body)?;
    let table_count = u32::from_le_bytes(body[16..20].try_into().expect("4 bytes"));
    for _ in 0..table_count {
        let id = r.u32()?;
        let n = r.u64()?;
        if n > (r.remaining() / ENTRY_BYTES) as u64 {
            return Err(Damage::TooMany);
        }
        let mut table = SavedTable::default();
        table.entries.reserve(n as usize);
        for _ in 0..n {
            table.entries.push(read_entry(&mut r)?);
        }
        let deltas = r.u64()?;
        for _ in 0..deltas {
            let key = read_key(&mut r)?;
            let write_timestamp_us = r.i64()?;
            let len = r.u32()? as usize;
            let body = r.take(len)?.into();
            table.deltas.insert(
                key,
                SavedDelta {
                    write_timestamp_us,
                    body,
                },
            );
        }
        contents.tables.push((id, table));
    }
    if !r.is_empty() {
        return Err(Damage::Decode(DecodeError::TrailingBytes));
    }
    Ok(contents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Location;

    fn sample() -> Contents {
        let entry = |t: i64| Entry {
            key: IndexKey {
                token: t,
                clustering_prefix: 7,
                digest: 9,
            },
            location: Location::new(3, 4096, 112),
            write_timestamp_us: 1_000_000 + t,
            expiry_s: 0,
            flags: 0,
        };
        let mut table = SavedTable {
            entries: vec![entry(1), entry(2)],
            ..SavedTable::default()
        };
        table.deltas.insert(
            entry(2).key,
            SavedDelta {
                write_timestamp_us: 5,
                body: vec![1, 2, 3].into(),
            },
        );
        Contents {
            block_size_bytes: 1 << 20,
            taken_at_ms: 1_700_000_000_000,
            pinned: vec![(3, 11), (8, 12)],
            tables: vec![(42, table), (43, SavedTable::default())],
        }
    }

    #[test]
    fn a_file_reads_back_as_written_and_its_pins_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rows.index");
        write(&path, &sample()).expect("write");
        let back = read(&path).expect("read");
        let want = sample();
        assert_eq!(back.pinned, want.pinned);
        assert_eq!(back.taken_at_ms, want.taken_at_ms);
        assert_eq!(back.tables.len(), 2);
        assert_eq!(back.tables[0].0, 42);
        assert_eq!(back.tables[0].1.entries, want.tables[0].1.entries);
        assert_eq!(back.tables[0].1.deltas, want.tables[0].1.deltas);
        assert_eq!(read_pins(&path).expect("read pins").pinned, want.pinned);
    }

    #[test]
    fn every_flipped_or_missing_byte_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rows.index");
        write(&path, &sample()).expect("write");
        let good = fs::read(&path).expect("read");
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            fs::write(&path, &bad).expect("write");
            assert!(read(&path).is_err(), "a flip at byte {at} went unnoticed");
        }
        for len in 0..good.len() {
            fs::write(&path, &good[..len]).expect("write");
            assert!(read(&path).is_err(), "a file cut at {len} bytes was read");
        }
    }
}
