//! How every file of the metadata directory is framed: a header, then checksummed records.
//!
//! ```text
//!  file:    0                 8          12
//!           +-----------------+----------+--------+--------+-----
//!           |      magic      | version  | record | record | ...
//!           |     8 bytes     |  u32 LE  |        |        |
//!           +-----------------+----------+--------+--------+-----
//!
//!  record:  0          4          8
//!           +----------+----------+---------------------------+
//!           |  bytes   |  crc32c  |  payload: JSON, `bytes`   |
//!           |  u32 LE  |  u32 LE  |  long                     |
//!           +----------+----------+---------------------------+
//! ```
//!
//! `crc32c` covers the four length bytes, then the payload, so a damaged length is caught as
//! surely as a damaged payload. The log (`log`) is a run of records appended one after another
//! and cut short (`ftruncate`) when Raft truncates it; the vote (`vote`), the snapshot
//! (`snapshot`) and the committed hint (`committed`) hold one record each and are replaced
//! whole: written to a temporary file, fsynced, renamed over the old one, and the directory
//! fsynced (the committed hint skips both fsyncs: see `log_store.rs`).
//!
//! A crash can leave the log's last record torn (its length runs past the end of the file, or
//! its checksum fails and nothing follows it). That record was never acknowledged (an append
//! returns only after its fsync), so it is cut off at open. A bad record with good ones after
//! it is damage, not a crash, and the open fails.

use std::fs;
use std::path::Path;

use hayate_storage::files;

use super::MetadataError;

/// The version of every file's format; a file of another version is refused.
pub(crate) const FORMAT_VERSION: u32 = 1;
pub(crate) const HEADER_BYTES: usize = 12;
pub(crate) const RECORD_HEADER_BYTES: usize = 8;
/// A record's payload at most. The largest records are snapshots (members with their tokens
/// and the schema); anything larger is damage.
pub(crate) const RECORD_BYTES_MAX: usize = 256 << 20;

pub(crate) const LOG_MAGIC: [u8; 8] = *b"HYMDLOG\0";
pub(crate) const VOTE_MAGIC: [u8; 8] = *b"HYMDVOTE";
pub(crate) const SNAPSHOT_MAGIC: [u8; 8] = *b"HYMDSNAP";
pub(crate) const COMMITTED_MAGIC: [u8; 8] = *b"HYMDCMIT";

/// Whether a replaced file must survive a crash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Fsynced before and after the rename: the vote, the snapshot.
    Fsync,
    /// Renamed into place without an fsync: a crash may leave the old file, or (on some file
    /// systems) an empty or partial one, which its reader must treat as absent.
    Hint,
}

const OFFSET_VERSION: usize = 8;
const OFFSET_RECORD_CRC: usize = 4;

pub(crate) fn header(magic: [u8; 8]) -> [u8; HEADER_BYTES] {
    let mut out = [0u8; HEADER_BYTES];
    out[..OFFSET_VERSION].copy_from_slice(&magic);
    out[OFFSET_VERSION..].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out
}

/// Checks a file's header: its magic and version.
pub(crate) fn check_header(path: &Path, bytes: &[u8], magic: [u8; 8]) -> Result<(), MetadataError> {
    if bytes.len() < HEADER_BYTES || bytes[..OFFSET_VERSION] != magic {
        return Err(MetadataError::Corrupt {
            path: path.to_owned(),
            offset_bytes: 0,
            reason: format!(
                "not a hayate metadata file of this kind (expected magic {:?})",
                String::from_utf8_lossy(&magic)
            ),
        });
    }
    let version = u32::from_le_bytes(
        bytes[OFFSET_VERSION..HEADER_BYTES]
            .try_into()
            .expect("four bytes, as sliced"),
    );
    if version != FORMAT_VERSION {
        return Err(MetadataError::UnsupportedVersion {
            path: path.to_owned(),
            version,
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

/// One record, ready to write.
pub(crate) fn encode_record(payload: &[u8]) -> Vec<u8> {
    assert!(
        payload.len() <= RECORD_BYTES_MAX,
        "metadata record of {} bytes: commands are bounded well below RECORD_BYTES_MAX",
        payload.len()
    );
    let len = u32::try_from(payload.len()).expect("bounded by RECORD_BYTES_MAX");
    let len_bytes = len.to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload);
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// What reading a run of records found at its end.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// The records fill the bytes exactly.
    Clean,
    /// The last record is torn: the file should end at `offset`.
    Torn { offset: usize, reason: String },
    /// A bad record at `offset` with more bytes after it.
    Corrupt { offset: usize, reason: String },
}

/// A record found by [`decode_records`]: where it starts in the buffer and its payload.
pub(crate) struct FoundRecord<'a> {
    pub offset: usize,
    pub payload: &'a [u8],
}

/// Decodes the records of `bytes` starting at `start` (past the header), stopping at the first
/// one that does not check.
pub(crate) fn decode_records(bytes: &[u8], start: usize) -> (Vec<FoundRecord<'_>>, Tail) {
    let mut out = Vec::new();
    let mut offset = start;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        if rest.len() < RECORD_HEADER_BYTES {
            let reason = format!("{} bytes left, less than a record header", rest.len());
            return (out, Tail::Torn { offset, reason });
        }
        let len_bytes: [u8; 4] = rest[..OFFSET_RECORD_CRC].try_into().expect("four bytes");
        let len = usize::try_from(u32::from_le_bytes(len_bytes)).expect("u32 fits usize");
        let crc = u32::from_le_bytes(
            rest[OFFSET_RECORD_CRC..RECORD_HEADER_BYTES]
                .try_into()
                .expect("four bytes"),
        );
        let end = RECORD_HEADER_BYTES.saturating_add(len);
        if end > rest.len() {
            // A record that runs past the end is the torn last write of a crash, whether its
            // length is damaged or its bytes never reached the disk.
            let reason = format!("a {len}-byte record runs past the end of the file");
            return (out, Tail::Torn { offset, reason });
        }
        let payload = &rest[RECORD_HEADER_BYTES..end];
        if len > RECORD_BYTES_MAX || crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload) != crc {
            let reason = format!("record of {len} bytes fails its checksum");
            return if end == rest.len() {
                (out, Tail::Torn { offset, reason })
            } else {
                (out, Tail::Corrupt { offset, reason })
            };
        }
        out.push(FoundRecord { offset, payload });
        offset += end;
    }
    (out, Tail::Clean)
}

/// Replaces `path` with a file holding the header and one record, atomically: a crash leaves
/// either the old file or the new one, whole.
pub(crate) fn write_single(
    path: &Path,
    magic: [u8; 8],
    payload: &[u8],
    durability: Durability,
) -> Result<(), MetadataError> {
    let mut bytes = header(magic).to_vec();
    bytes.extend_from_slice(&encode_record(payload));
    match durability {
        Durability::Fsync => replace_file(path, &bytes),
        Durability::Hint => {
            let tmp = files::tmp_path(path);
            fs::write(&tmp, &bytes).map_err(|e| MetadataError::io(&tmp, e))?;
            fs::rename(&tmp, path).map_err(|e| MetadataError::io(path, e))
        }
    }
}

/// Writes `bytes` to `path` through a temporary file, fsync and rename, then fsyncs the
/// directory so that the rename itself is durable.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), MetadataError> {
    files::write_atomically(path, bytes).map_err(|e| MetadataError::io(path, e))
}

/// Reads a file written by [`write_single`]: `None` if it does not exist.
pub(crate) fn read_single(path: &Path, magic: [u8; 8]) -> Result<Option<Vec<u8>>, MetadataError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MetadataError::io(path, e)),
    };
    check_header(path, &bytes, magic)?;
    let (records, tail) = decode_records(&bytes, HEADER_BYTES);
    // These files are replaced whole, never appended to: any damage is damage.
    let damage = match tail {
        Tail::Clean if records.len() == 1 => None,
        Tail::Clean => Some((
            HEADER_BYTES,
            format!("{} records where one was written", records.len()),
        )),
        Tail::Torn { offset, reason } | Tail::Corrupt { offset, reason } => Some((offset, reason)),
    };
    if let Some((offset, reason)) = damage {
        return Err(MetadataError::Corrupt {
            path: path.to_owned(),
            offset_bytes: offset as u64,
            reason,
        });
    }
    Ok(Some(records[0].payload.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = header(LOG_MAGIC).to_vec();
        for p in payloads {
            out.extend_from_slice(&encode_record(p));
        }
        out
    }

    #[test]
    fn records_round_trip() {
        let bytes = records(&[b"one", b"", b"three"]);
        let (found, tail) = decode_records(&bytes, HEADER_BYTES);
        assert_eq!(tail, Tail::Clean);
        let payloads: Vec<&[u8]> = found.iter().map(|r| r.payload).collect();
        assert_eq!(payloads, vec![&b"one"[..], b"", b"three"]);
        assert_eq!(found[1].offset, HEADER_BYTES + RECORD_HEADER_BYTES + 3);
    }

    #[test]
    fn a_torn_last_record_is_told_apart_from_damage_in_the_middle() {
        let bytes = records(&[b"one", b"two"]);
        let second = HEADER_BYTES + RECORD_HEADER_BYTES + 3;
        // Cut inside the last record: it runs past the end.
        for cut in second + 1..bytes.len() {
            let (found, tail) = decode_records(&bytes[..cut], HEADER_BYTES);
            assert_eq!(found.len(), 1);
            assert!(
                matches!(tail, Tail::Torn { offset, .. } if offset == second),
                "cut at {cut}: {tail:?}"
            );
        }
        // A flipped bit in the last record: torn.
        let mut flipped = bytes.clone();
        *flipped.last_mut().expect("not empty") ^= 1;
        assert!(matches!(
            decode_records(&flipped, HEADER_BYTES).1,
            Tail::Torn { .. }
        ));
        // A flipped bit in the first record, with the second after it: damage.
        let mut flipped = bytes.clone();
        flipped[HEADER_BYTES + RECORD_HEADER_BYTES] ^= 1;
        assert!(matches!(
            decode_records(&flipped, HEADER_BYTES).1,
            Tail::Corrupt {
                offset: HEADER_BYTES,
                ..
            }
        ));
    }

    #[test]
    fn single_record_files_are_replaced_whole_and_checked() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("vote");
        assert_eq!(read_single(&path, VOTE_MAGIC).expect("reads"), None);
        write_single(&path, VOTE_MAGIC, b"{\"a\":1}", Durability::Fsync).expect("writes");
        write_single(&path, VOTE_MAGIC, b"{\"a\":2}", Durability::Hint).expect("writes");
        assert_eq!(
            read_single(&path, VOTE_MAGIC).expect("reads").as_deref(),
            Some(&b"{\"a\":2}"[..])
        );
        assert!(matches!(
            read_single(&path, SNAPSHOT_MAGIC),
            Err(MetadataError::Corrupt { .. })
        ));
        let mut bytes = fs::read(&path).expect("reads");
        bytes[OFFSET_VERSION] = 9;
        fs::write(&path, &bytes).expect("writes");
        assert!(matches!(
            read_single(&path, VOTE_MAGIC),
            Err(MetadataError::UnsupportedVersion { version: 9, .. })
        ));
    }
}
