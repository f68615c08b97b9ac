//! The index snapshot: a clean shutdown saves the RAM index to a file, so the next start loads
//! it instead of reading every block. It is used only if it matches the devices exactly: the
//! set of blocks holding data and their sequence numbers must be what they were at save time
//! (read back from every block header, which is cheap), otherwise the engine scans. The file is
//! deleted as soon as it is loaded, before anything new is written, so a later crash can never
//! meet a stale snapshot.
//!
//! ```text
//! header (40 bytes): magic "HYIX" | version u32 | block size u32 | blocks u32 |
//!                    next sequence u64 | block fingerprint u64 | table count u32 | reserved u32
//! per table:         table id u32 | entry count u64 | entries, 48 bytes each:
//!                    token i64 | clustering prefix u64 | digest u64 | location u64 |
//!                    write timestamp i64 | expiry u32 | flags u32
//! deltas (version 2): delta count u64 | per delta: table u32 | token i64 |
//!                    clustering prefix u64 | digest u64 | base location u64 |
//!                    record location u64 | write timestamp i64 | body length u32 | body
//! trailer:           crc32c of everything before it, u32
//! ```
//! All little-endian.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};

use crate::files::{sync_dir, tmp_path};
use std::path::Path;
use std::sync::{Arc, RwLock};

use crate::blocks::{read_header, BlockState, BlockTable, DeviceSet};
use crate::deltas::{Delta, Deltas};
use crate::format::{Cursor, DecodeError};
use crate::index::{Entry, IndexKey, Location, TableIndex, PARTITIONS};
use crate::namespace::{Namespace, Recovered};

const MAGIC: [u8; 4] = *b"HYIX";
/// Version 2 added the deltas (`deltas.rs`); a version 1 file, which has none, still loads.
const VERSION: u32 = 2;
const HEADER_BYTES: usize = 40;
pub(crate) const ENTRY_BYTES: usize = 48;

/// A checksum of which blocks hold data and at which sequence.
fn fingerprint(blocks: impl Iterator<Item = (u32, u64)>) -> u64 {
    let mut lo = 0u32;
    let mut hi = 0x5eed_u32;
    for (b, seq) in blocks {
        let mut rec = [0u8; 12];
        rec[..4].copy_from_slice(&b.to_le_bytes());
        rec[4..].copy_from_slice(&seq.to_le_bytes());
        lo = crc32c::crc32c_append(lo, &rec);
        hi = crc32c::crc32c_append(hi, &rec);
    }
    u64::from(hi) << 32 | u64::from(lo)
}

/// A writer that keeps the crc32c of what went through it.
pub(crate) struct CrcWriter<W: Write> {
    pub inner: W,
    pub crc: u32,
}

impl CrcWriter<BufWriter<File>> {
    /// A writer to a temporary file beside `path` ([`CrcWriter::finish`] puts it in place).
    pub(crate) fn create(path: &Path) -> io::Result<(std::path::PathBuf, CrcWriter<BufWriter<File>>)> {
        let tmp = tmp_path(path);
        let file = File::create(&tmp)?;
        let w = CrcWriter {
            inner: BufWriter::with_capacity(1 << 20, file),
            crc: 0,
        };
        Ok((tmp, w))
    }

    /// Appends the checksum of everything written, syncs, and renames `tmp` to `path`.
    pub(crate) fn finish(self, tmp: &Path, path: &Path) -> io::Result<()> {
        let crc = self.crc;
        let mut file = self.inner.into_inner().map_err(|e| e.into_error())?;
        file.write_all(&crc.to_le_bytes())?;
        file.sync_all()?;
        fs::rename(tmp, path)?;
        sync_dir(path)
    }
}

/// An index entry as the index file (and a table snapshot's) holds it: `ENTRY_BYTES` bytes.
pub(crate) fn write_entry(w: &mut impl Write, e: &Entry) -> io::Result<()> {
    write_key(w, &e.key)?;
    w.write_all(&e.location.to_raw().to_le_bytes())?;
    w.write_all(&e.write_timestamp_us.to_le_bytes())?;
    w.write_all(&e.expiry_s.to_le_bytes())?;
    w.write_all(&e.flags.to_le_bytes())
}

pub(crate) fn read_entry(r: &mut Cursor<'_>) -> Result<Entry, DecodeError> {
    Ok(Entry {
        key: read_key(r)?,
        location: Location::from_raw(r.u64()?),
        write_timestamp_us: r.u64()? as i64,
        expiry_s: r.u32()?,
        flags: r.u32()?,
    })
}

/// An index key: token, clustering prefix, digest (24 bytes).
pub(crate) fn write_key(w: &mut impl Write, key: &IndexKey) -> io::Result<()> {
    w.write_all(&key.token.to_le_bytes())?;
    w.write_all(&key.clustering_prefix.to_le_bytes())?;
    w.write_all(&key.digest.to_le_bytes())
}

pub(crate) fn read_key(r: &mut Cursor<'_>) -> Result<IndexKey, DecodeError> {
    Ok(IndexKey {
        token: r.u64()? as i64,
        clustering_prefix: r.u64()?,
        digest: r.u64()?,
    })
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Saves the index. Call only after the writer has stopped and synced.
pub(crate) fn save(inner: &Namespace, path: &Path) -> io::Result<()> {
    let blocks = &inner.blocks();
    let holding: Vec<(u32, u64)> = (0..blocks.len())
        .filter(|&b| blocks.state(b) != BlockState::Free)
        .map(|b| (b, blocks.sequence(b)))
        .collect();
    let next_sequence = inner.writer().next_sequence();
    let tables: Vec<(u32, Arc<TableIndex>)> = inner.tables();
    let (tmp, mut w) = CrcWriter::create(path)?;
    w.write_all(&MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())?;
    w.write_all(&inner.config().block_size_bytes.to_le_bytes())?;
    w.write_all(&blocks.len().to_le_bytes())?;
    w.write_all(&next_sequence.to_le_bytes())?;
    w.write_all(&fingerprint(holding.into_iter()).to_le_bytes())?;
    w.write_all(&(tables.len() as u32).to_le_bytes())?;
    w.write_all(&0u32.to_le_bytes())?;
    for (id, t) in tables {
        w.write_all(&id.to_le_bytes())?;
        w.write_all(&(t.len() as u64).to_le_bytes())?;
        for p in 0..PARTITIONS {
            for e in t.partition_select(p, |_| true) {
                write_entry(&mut w, &e)?;
            }
        }
    }
    let deltas = inner.deltas().all();
    w.write_all(&(deltas.len() as u64).to_le_bytes())?;
    for (table, key, d) in deltas {
        w.write_all(&table.to_le_bytes())?;
        write_key(&mut w, &key)?;
        w.write_all(&d.base.to_raw().to_le_bytes())?;
        w.write_all(&d.location.to_raw().to_le_bytes())?;
        w.write_all(&d.write_timestamp_us.to_le_bytes())?;
        w.write_all(&(d.body.len() as u32).to_le_bytes())?;
        w.write_all(&d.body)?;
    }
    w.finish(&tmp, path)
}

/// Loads a snapshot if it exists and is current; on success the block table and `tables` are
/// filled in. Always removes the file.
pub(crate) fn load(
    path: &Path,
    devices: &DeviceSet,
    blocks: &BlockTable,
    tables: &RwLock<HashMap<u32, Arc<TableIndex>>>,
    deltas: &Deltas,
    chunk_blocks: &mut Vec<u32>,
) -> Option<Recovered> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(
                "index snapshot {} unreadable ({e}); scanning the devices",
                path.display()
            );
            return None;
        }
    };
    if let Err(e) = fs::remove_file(path).and_then(|()| sync_dir(path)) {
        tracing::warn!(
            "cannot remove the index snapshot {} ({e}); scanning the devices instead of trusting it",
            path.display()
        );
        return None;
    }
    match parse(&bytes, devices, blocks, tables, deltas, chunk_blocks) {
        Ok(r) => {
            tracing::info!("index loaded from snapshot {}", path.display());
            Some(r)
        }
        Err(why) => {
            tracing::warn!(
                "index snapshot {} not used: {why}; scanning the devices",
                path.display()
            );
            tables.write().expect("tables lock poisoned").clear();
            deltas.clear();
            None
        }
    }
}

fn parse(
    bytes: &[u8],
    devices: &DeviceSet,
    blocks: &BlockTable,
    tables: &RwLock<HashMap<u32, Arc<TableIndex>>>,
    deltas: &Deltas,
    chunk_blocks: &mut Vec<u32>,
) -> Result<Recovered, Unusable> {
    if bytes.len() < HEADER_BYTES + 4 {
        return Err(Unusable::TooShort);
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 4);
    let mut stored = [0u8; 4];
    stored.copy_from_slice(trailer);
    if crc32c::crc32c(body) != u32::from_le_bytes(stored) {
        return Err(Unusable::Checksum);
    }
    let mut r = Cursor::new(body);
    if r.take(4)? != MAGIC {
        return Err(Unusable::NotASnapshot);
    }
    let version = r.u32()?;
    if !(1..=VERSION).contains(&version) {
        return Err(Unusable::Version(version));
    }
    if r.u32()? != devices.block_size_bytes() || r.u32()? != blocks.len() {
        return Err(Unusable::Geometry);
    }
    let next_sequence = r.u64()?;
    let expected = r.u64()?;
    let table_count = r.u32()?;
    r.u32()?;
    // The snapshot is current only if the devices hold exactly the blocks it knew.
    let mut holding = Vec::new();
    for b in 0..blocks.len() {
        match read_header(devices, b) {
            Some(h) if !h.free => {
                holding.push((b, h.sequence));
                if h.chunk {
                    chunk_blocks.push(b);
                }
            }
            _ => {}
        }
    }
    if fingerprint(holding.iter().copied()) != expected {
        return Err(Unusable::DevicesChanged);
    }
    for &(b, seq) in &holding {
        blocks.mark_holding(b, seq);
    }
    let mut is_holding = vec![false; blocks.len() as usize];
    for &(b, _) in &holding {
        is_holding[b as usize] = true;
    }
    let mut map = tables.write().expect("tables lock poisoned");
    for _ in 0..table_count {
        let id = r.u32()?;
        let n = r.u64()?;
        if n > (r.remaining() / ENTRY_BYTES) as u64 {
            return Err(Unusable::EntryCount);
        }
        let index = Arc::new(TableIndex::new());
        for _ in 0..n {
            let e = read_entry(&mut r)?;
            let b = e.location.block();
            if b >= blocks.len() || !is_holding[b as usize] {
                return Err(Unusable::EntryInFreeBlock { block: b });
            }
            blocks.add_live(b, e.location.len());
            index.upsert(e);
        }
        map.insert(id, index);
    }
    let delta_count = if version >= 2 { r.u64()? } else { 0 };
    for _ in 0..delta_count {
        let table = r.u32()?;
        let key = read_key(&mut r)?;
        let base = Location::from_raw(r.u64()?);
        let location = Location::from_raw(r.u64()?);
        let write_timestamp_us = r.u64()? as i64;
        let len = r.u32()? as usize;
        let body = r.take(len)?.into();
        let b = location.block();
        if b >= blocks.len() || !is_holding[b as usize] {
            return Err(Unusable::DeltaInFreeBlock { block: b });
        }
        let whole = map.get(&table).and_then(|t| t.get(&key));
        if whole.is_none_or(|e| !e.has_delta() || e.location != base) {
            return Err(Unusable::DeltaWithoutEntry);
        }
        blocks.add_live(b, location.len());
        deltas.insert(
            table,
            key,
            Delta {
                base,
                location,
                write_timestamp_us,
                body,
            },
        );
    }
    if !r.is_empty() {
        return Err(Unusable::TrailingBytes);
    }
    for b in 0..blocks.len() {
        if !is_holding[b as usize] {
            blocks.release(b);
        }
    }
    Ok(Recovered {
        next_sequence,
        chunks: Default::default(),
    })
}

/// Why a snapshot file was not used (the engine then scans the devices).
#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    TooShort,
    Checksum,
    NotASnapshot,
    Version(u32),
    Geometry,
    DevicesChanged,
    /// A section ends past the end of the file.
    CutShort,
    EntryCount,
    EntryInFreeBlock {
        block: u32,
    },
    DeltaInFreeBlock {
        block: u32,
    },
    DeltaWithoutEntry,
    TrailingBytes,
}

impl From<DecodeError> for Unusable {
    /// The cursor's only failure on fixed-width fields is running out of bytes.
    fn from(_: DecodeError) -> Unusable {
        Unusable::CutShort
    }
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::TooShort => write!(f, "file too short"),
            Unusable::Checksum => write!(f, "checksum mismatch"),
            Unusable::NotASnapshot => write!(f, "not an index snapshot"),
            Unusable::Version(v) => write!(f, "index snapshot version {v}, not one this build reads"),
            Unusable::Geometry => write!(f, "block size or device size changed"),
            Unusable::DevicesChanged => write!(f, "the devices changed after it was written"),
            Unusable::CutShort => write!(f, "file cut short"),
            Unusable::EntryCount => write!(f, "entry count exceeds the file"),
            Unusable::EntryInFreeBlock { block } => {
                write!(f, "an entry points into block {block}, which holds no data")
            }
            Unusable::DeltaInFreeBlock { block } => {
                write!(f, "a delta points into block {block}, which holds no data")
            }
            Unusable::DeltaWithoutEntry => write!(f, "a delta does not match its row's entry"),
            Unusable::TrailingBytes => write!(f, "bytes left after the last section"),
        }
    }
}
