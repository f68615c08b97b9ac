//! A backup's data file (`<keyspace>.<table>.hyb`): the rows of one table as one node held
//! them, in a format of the backup's own, versioned apart from the storage engine's record
//! format so that either can change without the other. Drawn in `docs/backups.md`.
//!
//! ```text
//! header (16 bytes): magic "HYBK" | version u32 (1) | flags u32 (0) | reserved u32
//! frames:            payload length u32 (> 0) | crc32c of the payload u32 | payload: records
//! end:               0 u32 | record count u64 | crc32c of every byte before it u32
//! record:            kind u8 (1 row, 2 a partition's tombstones) | token zigzag |
//!                    partition key (varint length, bytes) | then for a row: clustering key
//!                    (varint length, bytes) | row; for tombstones: tombstones
//! row:               flags u8 (1 liveness, 2 deletion) | [liveness: timestamp zigzag |
//!                    ttl varint | expires at varint] | [deletion] |
//!                    column deletion count varint | each: column varint | deletion |
//!                    cell count varint | each: column varint | path (varint length, bytes) |
//!                    timestamp zigzag | kind u8 (0 live: ttl varint | expires at varint |
//!                    value (varint length, bytes); 1 tombstone: deleted at varint)
//! deletion:          timestamp zigzag | deleted at varint
//! tombstones:        flags u8 (1 partition deletion) | [deletion] | range count varint |
//!                    each: start bound | end bound | deletion
//! bound:             kind u8 (0 unbounded, 1 included, 2 excluded) | [varint length, bytes]
//! ```
//! Integers are little-endian; timestamps are microseconds, times ("expires at", "deleted at")
//! Unix seconds, exactly as the node held them: a restored cell expires when the original would
//! have.

use std::io::{self, Write};
use std::ops::Bound;

use hayate_storage::format::{put_varint, put_zigzag, Cursor, DecodeError};
use hayate_storage::{Cell, CellValue, Deletion, Liveness, PartitionTombstones, RangeTombstone, Row};

const MAGIC: [u8; 4] = *b"HYBK";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 16;
/// Records are gathered into frames of about this size, each checked on its own.
const FRAME_BYTES: usize = 1 << 20;
/// A frame longer than this is not one this format writes (rows are at most 16 MiB).
const FRAME_MAX_BYTES: usize = 64 << 20;

/// One record of a backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Row {
        token: i64,
        partition: Vec<u8>,
        clustering: Vec<u8>,
        row: Row,
    },
    Tombstones {
        token: i64,
        partition: Vec<u8>,
        tombstones: PartitionTombstones,
    },
}

/// Writes a data file: records go into frames as they come.
pub struct Writer<W: Write> {
    out: W,
    crc: u32,
    frame: Vec<u8>,
    records: u64,
    bytes: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> io::Result<Writer<W>> {
        let mut w = Writer {
            out,
            crc: 0,
            frame: Vec::with_capacity(FRAME_BYTES + 4096),
            records: 0,
            bytes: 0,
        };
        let mut header = Vec::with_capacity(HEADER_BYTES);
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&[0; 8]);
        w.put(&header)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// What was written so far and not taken: a caller writing into a `Vec` drains it from
    /// here as it goes, so that a file is never held whole.
    pub fn out_mut(&mut self) -> &mut W {
        &mut self.out
    }

    pub fn add(&mut self, record: &Record) -> io::Result<()> {
        encode(&mut self.frame, record);
        self.records += 1;
        if self.frame.len() >= FRAME_BYTES {
            self.flush_frame()?;
        }
        Ok(())
    }

    fn flush_frame(&mut self) -> io::Result<()> {
        if self.frame.is_empty() {
            return Ok(());
        }
        let frame = std::mem::take(&mut self.frame);
        self.put(&(frame.len() as u32).to_le_bytes())?;
        self.put(&crc32c::crc32c(&frame).to_le_bytes())?;
        self.put(&frame)?;
        self.frame = frame;
        self.frame.clear();
        Ok(())
    }

    /// Ends the file; its records, bytes and the crc32c of the whole file.
    pub fn finish(mut self) -> io::Result<(W, u64, u64, u32)> {
        self.flush_frame()?;
        self.put(&0u32.to_le_bytes())?;
        let records = self.records;
        self.put(&records.to_le_bytes())?;
        let crc = self.crc;
        self.out.write_all(&crc.to_le_bytes())?;
        let bytes = self.bytes + 4;
        let whole = crc32c::crc32c_append(crc, &crc.to_le_bytes());
        Ok((self.out, records, bytes, whole))
    }
}

/// Why a data file is refused.
#[derive(Debug)]
pub enum Damage {
    NotABackupFile,
    Version(u32),
    /// Cut short, or longer than its end says.
    Truncated,
    Checksum {
        frame: usize,
    },
    Decode {
        frame: usize,
        detail: DecodeError,
    },
    Count {
        said: u64,
        found: u64,
    },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::NotABackupFile => write!(f, "not a hayate backup file"),
            Damage::Version(v) => write!(f, "backup file version {v}, which this hayate does not read"),
            Damage::Truncated => write!(f, "cut short (truncated)"),
            Damage::Checksum { frame } => write!(f, "frame {frame} does not match its checksum"),
            Damage::Decode { frame, detail } => write!(f, "frame {frame} does not decode ({detail})"),
            Damage::Count { said, found } => write!(f, "its end says {said} records, it holds {found}"),
        }
    }
}

/// The frames of a data file, each as its records, checked as they come; after the last, the
/// end is checked (record count, whole-file checksum, nothing after it). A caller that must
/// load nothing of a damaged file runs through it once first ([`check`]).
pub struct Frames<'a> {
    bytes: &'a [u8],
    at: usize,
    frame: usize,
    found: u64,
    done: bool,
}

/// Reads `bytes` as a data file (its header checked now, its frames as they are taken).
pub fn frames(bytes: &[u8]) -> Result<Frames<'_>, Damage> {
    if bytes.len() < HEADER_BYTES || bytes[..4] != MAGIC {
        return Err(if bytes.len() < 4 {
            Damage::Truncated
        } else {
            Damage::NotABackupFile
        });
    }
    let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(Damage::Version(version));
    }
    Ok(Frames {
        bytes,
        at: HEADER_BYTES,
        frame: 0,
        found: 0,
        done: false,
    })
}

/// Checks a whole data file; its record count.
pub fn check(bytes: &[u8]) -> Result<u64, Damage> {
    let mut f = frames(bytes)?;
    for frame in f.by_ref() {
        frame?;
    }
    Ok(f.found)
}

impl Frames<'_> {
    fn u32_at(&self, at: usize) -> Result<u32, Damage> {
        let b = self.bytes.get(at..at + 4).ok_or(Damage::Truncated)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn next_frame(&mut self) -> Result<Option<Vec<Record>>, Damage> {
        let (bytes, at, frame) = (self.bytes, self.at, self.frame);
        let len = self.u32_at(at)? as usize;
        if len == 0 {
            self.done = true;
            let said = bytes.get(at + 4..at + 12).ok_or(Damage::Truncated)?;
            let said = u64::from_le_bytes(said.try_into().expect("8 bytes"));
            let end = at + 12;
            if self.u32_at(end)? != crc32c::crc32c(&bytes[..end]) {
                return Err(Damage::Checksum { frame });
            }
            if end + 4 != bytes.len() {
                return Err(Damage::Truncated);
            }
            if said != self.found {
                return Err(Damage::Count {
                    said,
                    found: self.found,
                });
            }
            return Ok(None);
        }
        if len > FRAME_MAX_BYTES {
            return Err(Damage::Checksum { frame });
        }
        let stored = self.u32_at(at + 4)?;
        let payload = bytes.get(at + 8..at + 8 + len).ok_or(Damage::Truncated)?;
        if crc32c::crc32c(payload) != stored {
            return Err(Damage::Checksum { frame });
        }
        let mut r = Cursor::new(payload);
        let mut records = Vec::new();
        while !r.is_empty() {
            records.push(decode(&mut r).map_err(|detail| Damage::Decode { frame, detail })?);
        }
        self.found += records.len() as u64;
        self.at += 8 + len;
        self.frame += 1;
        Ok(Some(records))
    }
}

impl Iterator for Frames<'_> {
    type Item = Result<Vec<Record>, Damage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_frame() {
            Ok(Some(records)) => Some(Ok(records)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_deletion(out: &mut Vec<u8>, d: &Deletion) {
    put_zigzag(out, d.timestamp_us);
    put_varint(out, u64::from(d.deleted_at_s));
}

fn put_bound(out: &mut Vec<u8>, b: &Bound<Vec<u8>>) {
    match b {
        Bound::Unbounded => out.push(0),
        Bound::Included(k) => {
            out.push(1);
            put_bytes(out, k);
        }
        Bound::Excluded(k) => {
            out.push(2);
            put_bytes(out, k);
        }
    }
}

pub fn encode(out: &mut Vec<u8>, record: &Record) {
    match record {
        Record::Row {
            token,
            partition,
            clustering,
            row,
        } => {
            out.push(1);
            put_zigzag(out, *token);
            put_bytes(out, partition);
            put_bytes(out, clustering);
            out.push(u8::from(row.liveness.is_some()) | (u8::from(row.deletion.is_some()) << 1));
            if let Some(l) = &row.liveness {
                put_zigzag(out, l.timestamp_us);
                put_varint(out, u64::from(l.ttl_s));
                put_varint(out, u64::from(l.expires_at_s));
            }
            if let Some(d) = &row.deletion {
                put_deletion(out, d);
            }
            put_varint(out, row.column_deletions.len() as u64);
            for (c, d) in &row.column_deletions {
                put_varint(out, u64::from(*c));
                put_deletion(out, d);
            }
            put_varint(out, row.cells.len() as u64);
            for c in &row.cells {
                put_varint(out, u64::from(c.column));
                put_bytes(out, &c.path);
                put_zigzag(out, c.timestamp_us);
                match &c.value {
                    CellValue::Live {
                        value,
                        ttl_s,
                        expires_at_s,
                    } => {
                        out.push(0);
                        put_varint(out, u64::from(*ttl_s));
                        put_varint(out, u64::from(*expires_at_s));
                        put_bytes(out, value);
                    }
                    CellValue::Tombstone { deleted_at_s } => {
                        out.push(1);
                        put_varint(out, u64::from(*deleted_at_s));
                    }
                }
            }
        }
        Record::Tombstones {
            token,
            partition,
            tombstones,
        } => {
            out.push(2);
            put_zigzag(out, *token);
            put_bytes(out, partition);
            out.push(u8::from(tombstones.partition.is_some()));
            if let Some(d) = &tombstones.partition {
                put_deletion(out, d);
            }
            put_varint(out, tombstones.ranges.len() as u64);
            for r in &tombstones.ranges {
                put_bound(out, &r.start);
                put_bound(out, &r.end);
                put_deletion(out, &r.deletion);
            }
        }
    }
}

fn deletion(r: &mut Cursor<'_>) -> Result<Deletion, DecodeError> {
    Ok(Deletion {
        timestamp_us: r.zigzag()?,
        deleted_at_s: r.varint_u32()?,
    })
}

fn bound(r: &mut Cursor<'_>) -> Result<Bound<Vec<u8>>, DecodeError> {
    Ok(match r.u8()? {
        0 => Bound::Unbounded,
        1 => Bound::Included(r.bytes()?.to_vec()),
        2 => Bound::Excluded(r.bytes()?.to_vec()),
        k => return Err(DecodeError::BadKind(k)),
    })
}

pub fn decode(r: &mut Cursor<'_>) -> Result<Record, DecodeError> {
    let kind = r.u8()?;
    let token = r.zigzag()?;
    let partition = r.bytes()?.to_vec();
    match kind {
        1 => {
            let clustering = r.bytes()?.to_vec();
            let flags = r.u8()?;
            if flags > 3 {
                return Err(DecodeError::BadFlags(flags));
            }
            let mut row = Row::default();
            if flags & 1 != 0 {
                row.liveness = Some(Liveness {
                    timestamp_us: r.zigzag()?,
                    ttl_s: r.varint_u32()?,
                    expires_at_s: r.varint_u32()?,
                });
            }
            if flags & 2 != 0 {
                row.deletion = Some(deletion(r)?);
            }
            for _ in 0..r.count(usize::MAX)? {
                let column = r.varint_u32()?;
                row.column_deletions.push((column, deletion(r)?));
            }
            for _ in 0..r.count(usize::MAX)? {
                let column = r.varint_u32()?;
                let path = r.bytes()?.to_vec();
                let timestamp_us = r.zigzag()?;
                let value = match r.u8()? {
                    0 => {
                        let ttl_s = r.varint_u32()?;
                        let expires_at_s = r.varint_u32()?;
                        CellValue::Live {
                            value: r.bytes()?.to_vec(),
                            ttl_s,
                            expires_at_s,
                        }
                    }
                    1 => CellValue::Tombstone {
                        deleted_at_s: r.varint_u32()?,
                    },
                    k => return Err(DecodeError::BadKind(k)),
                };
                row.cells.push(Cell {
                    column,
                    path,
                    timestamp_us,
                    value,
                });
            }
            Ok(Record::Row {
                token,
                partition,
                clustering,
                row,
            })
        }
        2 => {
            let flags = r.u8()?;
            if flags > 1 {
                return Err(DecodeError::BadFlags(flags));
            }
            let mut tombstones = PartitionTombstones::default();
            if flags == 1 {
                tombstones.partition = Some(deletion(r)?);
            }
            for _ in 0..r.count(usize::MAX)? {
                let start = bound(r)?;
                let end = bound(r)?;
                tombstones.ranges.push(RangeTombstone {
                    start,
                    end,
                    deletion: deletion(r)?,
                });
            }
            Ok(Record::Tombstones {
                token,
                partition,
                tombstones,
            })
        }
        k => Err(DecodeError::BadKind(k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        let mut out = Vec::new();
        for i in 0..3000i64 {
            let mut row = Row {
                liveness: Some(Liveness {
                    timestamp_us: 1_700_000_000_000_000 + i,
                    ttl_s: if i % 3 == 0 { 60 } else { 0 },
                    expires_at_s: if i % 3 == 0 { 1_900_000_000 } else { 0 },
                }),
                ..Row::default()
            };
            row.cells
                .push(Cell::live(1, i, vec![i as u8; (i % 700) as usize]));
            row.cells.push(Cell::tombstone(2, i - 5, 1_800_000_000));
            if i % 10 == 0 {
                row.deletion = Some(Deletion {
                    timestamp_us: -3,
                    deleted_at_s: 5,
                });
                row.column_deletions.push((
                    4,
                    Deletion {
                        timestamp_us: i,
                        deleted_at_s: 6,
                    },
                ));
            }
            out.push(Record::Row {
                token: i * 7919 - 11_000,
                partition: format!("p{i}").into_bytes(),
                clustering: if i % 2 == 0 { Vec::new() } else { vec![1, 2, 3] },
                row,
            });
        }
        out.push(Record::Tombstones {
            token: i64::MIN,
            partition: b"pt".to_vec(),
            tombstones: PartitionTombstones {
                partition: Some(Deletion {
                    timestamp_us: 9,
                    deleted_at_s: 10,
                }),
                ranges: vec![RangeTombstone {
                    start: Bound::Included(vec![1]),
                    end: Bound::Unbounded,
                    deletion: Deletion {
                        timestamp_us: 11,
                        deleted_at_s: 12,
                    },
                }],
            },
        });
        out
    }

    fn file(records: &[Record]) -> (Vec<u8>, u64, u32) {
        let mut w = Writer::new(Vec::new()).expect("header");
        for r in records {
            w.add(r).expect("add");
        }
        let (bytes, count, len, crc) = w.finish().expect("finish");
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(crc, crc32c::crc32c(&bytes));
        (bytes, count, crc)
    }

    #[test]
    fn records_read_back_as_written_across_frames() {
        let want = sample();
        let (bytes, count, _) = file(&want);
        assert_eq!(count, want.len() as u64);
        assert!(bytes.len() > FRAME_BYTES, "the sample spans frames");
        let mut got = Vec::new();
        for frame in frames(&bytes).expect("header") {
            got.extend(frame.expect("frame"));
        }
        assert_eq!(got, want);
        assert_eq!(check(&bytes).expect("check"), want.len() as u64);
        let (empty, _, _) = file(&[]);
        assert_eq!(check(&empty).expect("an empty file reads"), 0);
    }

    #[test]
    fn a_flipped_byte_or_a_cut_is_refused() {
        let (bytes, _, _) = file(&sample()[..200]);
        for at in (0..bytes.len()).step_by(37).chain([bytes.len() - 1]) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(check(&bad).is_err(), "a flip at byte {at} went unnoticed");
        }
        for len in (0..bytes.len()).step_by(41) {
            assert!(check(&bytes[..len]).is_err(), "a file cut at {len} was read");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(check(&longer), Err(Damage::Truncated)));
    }
}
