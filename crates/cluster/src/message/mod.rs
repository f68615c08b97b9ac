//! Internode messages and their frames: what one node says to another, byte by byte.
//!
//! Pure encoding and decoding, no I/O: the [`transport`](crate::transport) moves frames, this
//! module says what is in them. `docs/internode-protocol.md` draws the same layout.
//!
//! ```text
//!  0          4          8     9     10                     18
//!  +----------+----------+-----+-----+----------------------+---------------------+
//!  |  length  |  crc32c  | ver |kind |      request id      |       payload       |
//!  |  u32 BE  |  u32 BE  | u8  | u8  |        u64 BE        | length - 14 bytes   |
//!  +----------+----------+-----+-----+----------------------+---------------------+
//! ```
//!
//! All integers big-endian. `length` counts the bytes after itself (so a frame is `4 + length`
//! bytes, at most [`FRAME_BYTES_MAX`]); `crc32c` covers every byte after itself. A reader first
//! checks the length against the bound (before it allocates), waits for the whole frame, then
//! checks the checksum, then the version, then decodes. A frame that fails any of these means
//! the byte stream can no longer be trusted: the connection is closed.
//!
//! The payload of each kind is encoded in [`payload`]; rows and tombstones travel in the
//! internode protocol's own format (`row.rs`), apart from the storage engine's record body, so
//! that the disk and the wire can change apart (a peer that speaks only versions 1 to 3 hears
//! the frozen layout of `row_v1.rs`). The connection handshake is in [`handshake`]; [`digest()`]
//! hashes a read answer the way digest reads compare replicas.

mod digest;
pub mod handshake;
pub mod paxos;
pub mod payload;
mod row;
mod row_v1;
mod wire;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

use crate::counter::CounterUpdate;
use crate::paxos::{PaxosReply, PaxosRequest};
use crate::replica::{Mutation, ReadCommand, ReadResponse, ReplicaError, StreamChunk, StreamRequest};

pub use digest::digest;
pub use handshake::{HandshakeError, Hello, HelloReply};

/// Matches a response to its request; chosen by the node that sends the request.
pub type RequestId = u64;

/// The frame format version this build writes when the peer speaks it too. Version 2 added
/// the partition's range and partition tombstones to a data reply (`payload.rs`); version 3
/// the stream and topology messages (kinds 9 to 12), which a node sends only to peers that
/// speak it; version 4 the internode row format (`row.rs`) in place of the storage engine's
/// record body; version 5 the Paxos and counter messages (kinds 13 to 16). Any change to the bytes of a
/// message, a row included, takes a new version.
pub const VERSION: u8 = 5;
/// The oldest frame format version this build still reads and writes.
pub const VERSION_MIN: u8 = 1;

/// The largest frame, length field included: room for a 16 MiB row and its overhead several
/// times over. Checked before a reader allocates anything for a frame.
pub const FRAME_BYTES_MAX: usize = 80 << 20;
/// The fixed part of every frame: length, checksum, version, kind and request id.
pub const FRAME_HEADER_BYTES: usize = 18;
/// The bytes the `length` field counts beyond the payload: checksum, version, kind, id.
const LENGTH_COUNTED_HEADER_BYTES: usize = FRAME_HEADER_BYTES - OFFSET_CRC;

/// The most mutations one `MutationRequest` carries (a batch, or hints replayed together).
pub const MUTATIONS_PER_MESSAGE_MAX: usize = 1 << 16;
/// The most rows one `ReadResponse` carries (a page is far smaller).
pub const ROWS_PER_MESSAGE_MAX: usize = 1 << 20;
/// The longest partition or clustering key (or clustering bound): the engine's own limit.
pub const KEY_BYTES_MAX: usize = hayate_storage::KEY_MAX_BYTES;
/// The longest error message a replica sends back; longer ones are cut at a character
/// boundary when encoded.
pub const ERROR_MESSAGE_BYTES_MAX: usize = 16 << 10;
/// Every row and every mutation takes at least this many bytes on the wire. A decoder
/// reserves room for at most `remaining bytes / this` items, so a count that lies cannot make
/// it allocate more than a small multiple of the frame it read.
const ENCODED_ITEM_BYTES_MIN: usize = 16;

const OFFSET_LENGTH: usize = 0;
const OFFSET_CRC: usize = 4;
const OFFSET_VERSION: usize = 8;
const OFFSET_KIND: usize = 9;
const OFFSET_ID: usize = 10;

const _: () = assert!(OFFSET_ID + 8 == FRAME_HEADER_BYTES);
const _: () = assert!(FRAME_BYTES_MAX <= u32::MAX as usize);

/// One internode message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Apply these mutations (a coordinator's write, a read repair, or a hint being replayed).
    /// Shared: a coordinator sends the one copy to every replica and keeps it for hints.
    MutationRequest {
        id: RequestId,
        mutations: Arc<Vec<Mutation>>,
    },
    MutationResponse {
        id: RequestId,
        result: Result<(), ReplicaError>,
    },
    /// A read; with `digest_only` the replica answers with a digest of what it would return.
    ReadRequest {
        id: RequestId,
        command: ReadCommand,
        digest_only: bool,
    },
    ReadResponse {
        id: RequestId,
        result: Result<ReadReply, ReplicaError>,
    },
    /// Cluster metadata (Raft) traffic: opaque bytes another module encodes.
    MetadataRequest {
        id: RequestId,
        payload: Vec<u8>,
    },
    MetadataResponse {
        id: RequestId,
        payload: Vec<u8>,
    },
    Ping {
        id: RequestId,
    },
    Pong {
        id: RequestId,
    },
    /// Send the records of a piece of a token range (a topology change streams them, on the
    /// bulk lane).
    StreamRequest {
        id: RequestId,
        request: StreamRequest,
    },
    StreamResponse {
        id: RequestId,
        result: Result<StreamChunk, ReplicaError>,
    },
    /// A topology change's control traffic (wait for a ring epoch, fetch these ranges): opaque
    /// bytes the `topology` module encodes.
    TopologyRequest {
        id: RequestId,
        payload: Vec<u8>,
    },
    TopologyResponse {
        id: RequestId,
        payload: Vec<u8>,
    },
    /// One step of a lightweight transaction's Paxos round (`crate::paxos`).
    PaxosRequest {
        id: RequestId,
        request: PaxosRequest,
    },
    PaxosResponse {
        id: RequestId,
        result: Result<PaxosReply, ReplicaError>,
    },
    /// Lead these counter increments on this replica (`crate::counter`), at the coordinator's
    /// time.
    CounterRequest {
        id: RequestId,
        timestamp_us: i64,
        updates: Vec<CounterUpdate>,
    },
    /// The new shards the leader wrote, for the other replicas.
    CounterResponse {
        id: RequestId,
        result: Result<Vec<Mutation>, ReplicaError>,
    },
}

/// A replica's answer to a [`Message::ReadRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadReply {
    Data(ReadResponse),
    /// What [`digest()`] makes of the rows the replica would have returned, and whether it
    /// stopped at the limit.
    Digest {
        digest: [u8; 16],
        more: bool,
    },
}

/// Which connection a message travels on: requests and their answers, or bulk traffic
/// (hint replay, streaming) that must not queue ahead of them. Order is kept per lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    Requests,
    Bulk,
}

impl Lane {
    pub const ALL: [Lane; 2] = [Lane::Requests, Lane::Bulk];

    pub fn tag(self) -> u8 {
        match self {
            Lane::Requests => 0,
            Lane::Bulk => 1,
        }
    }

    pub fn from_tag(tag: u8) -> Option<Lane> {
        match tag {
            0 => Some(Lane::Requests),
            1 => Some(Lane::Bulk),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Lane::Requests => "requests",
            Lane::Bulk => "bulk",
        }
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `kind` byte of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    MutationRequest = 1,
    MutationResponse = 2,
    ReadRequest = 3,
    ReadResponse = 4,
    MetadataRequest = 5,
    MetadataResponse = 6,
    Ping = 7,
    Pong = 8,
    StreamRequest = 9,
    StreamResponse = 10,
    TopologyRequest = 11,
    TopologyResponse = 12,
    PaxosRequest = 13,
    PaxosResponse = 14,
    CounterRequest = 15,
    CounterResponse = 16,
}

impl Kind {
    pub fn from_u8(kind: u8) -> Option<Kind> {
        Some(match kind {
            1 => Kind::MutationRequest,
            2 => Kind::MutationResponse,
            3 => Kind::ReadRequest,
            4 => Kind::ReadResponse,
            5 => Kind::MetadataRequest,
            6 => Kind::MetadataResponse,
            7 => Kind::Ping,
            8 => Kind::Pong,
            9 => Kind::StreamRequest,
            10 => Kind::StreamResponse,
            11 => Kind::TopologyRequest,
            12 => Kind::TopologyResponse,
            13 => Kind::PaxosRequest,
            14 => Kind::PaxosResponse,
            15 => Kind::CounterRequest,
            16 => Kind::CounterResponse,
            _ => return None,
        })
    }
}

impl Message {
    pub fn id(&self) -> RequestId {
        match self {
            Message::MutationRequest { id, .. }
            | Message::MutationResponse { id, .. }
            | Message::ReadRequest { id, .. }
            | Message::ReadResponse { id, .. }
            | Message::MetadataRequest { id, .. }
            | Message::MetadataResponse { id, .. }
            | Message::Ping { id }
            | Message::Pong { id }
            | Message::StreamRequest { id, .. }
            | Message::StreamResponse { id, .. }
            | Message::TopologyRequest { id, .. }
            | Message::TopologyResponse { id, .. }
            | Message::PaxosRequest { id, .. }
            | Message::PaxosResponse { id, .. }
            | Message::CounterRequest { id, .. }
            | Message::CounterResponse { id, .. } => *id,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Message::MutationRequest { .. } => Kind::MutationRequest,
            Message::MutationResponse { .. } => Kind::MutationResponse,
            Message::ReadRequest { .. } => Kind::ReadRequest,
            Message::ReadResponse { .. } => Kind::ReadResponse,
            Message::MetadataRequest { .. } => Kind::MetadataRequest,
            Message::MetadataResponse { .. } => Kind::MetadataResponse,
            Message::Ping { .. } => Kind::Ping,
            Message::Pong { .. } => Kind::Pong,
            Message::StreamRequest { .. } => Kind::StreamRequest,
            Message::StreamResponse { .. } => Kind::StreamResponse,
            Message::TopologyRequest { .. } => Kind::TopologyRequest,
            Message::TopologyResponse { .. } => Kind::TopologyResponse,
            Message::PaxosRequest { .. } => Kind::PaxosRequest,
            Message::PaxosResponse { .. } => Kind::PaxosResponse,
            Message::CounterRequest { .. } => Kind::CounterRequest,
            Message::CounterResponse { .. } => Kind::CounterResponse,
        }
    }

    /// About how many bytes the message takes encoded, without encoding it: what a send
    /// queue counts against its byte bound. Never less than the frame header.
    pub fn size_hint_bytes(&self) -> usize {
        FRAME_HEADER_BYTES + payload::size_hint_bytes(self)
    }
}

/// Why a message could not be encoded. These are bounds the sender broke (a batch with too
/// many mutations, a reply too large for one frame); the transport drops such a message and
/// counts it, and the sender's timeout reports the failure.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    FrameTooLarge {
        frame_bytes: usize,
        max_bytes: usize,
    },
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    TooLong {
        what: &'static str,
        len_bytes: usize,
        max_bytes: usize,
    },
    /// The connection's frame version predates this kind of message: the peer runs an older
    /// build.
    NotInVersion {
        kind: Kind,
        version: u8,
    },
}

/// The first frame version that has the stream and topology messages.
pub const VERSION_STREAMS: u8 = 3;
/// The first frame version whose rows and tombstones travel in the internode row format
/// (`row.rs`); older ones carry the frozen layout of `row_v1.rs`.
pub const VERSION_ROWS: u8 = 4;
/// The first frame version that has the Paxos and counter messages.
pub const VERSION_PAXOS: u8 = 5;

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::FrameTooLarge {
                frame_bytes,
                max_bytes,
            } => write!(
                f,
                "message of {frame_bytes} bytes exceeds the internode frame limit of {max_bytes}; \
                 split it (fewer mutations or rows per message)"
            ),
            EncodeError::TooMany { what, count, max } => {
                write!(
                    f,
                    "{count} {what} in one message exceed the limit of {max}; split it"
                )
            }
            EncodeError::TooLong {
                what,
                len_bytes,
                max_bytes,
            } => {
                write!(
                    f,
                    "{what} of {len_bytes} bytes exceeds the limit of {max_bytes} bytes"
                )
            }
            EncodeError::NotInVersion { kind, version } => write!(
                f,
                "a {kind:?} message cannot travel in frame version {version}: the peer runs an older \
                 build; upgrade it before changing the ring"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Why bytes from a peer are not a frame this build accepts. Any of these closes the
/// connection: after it, the stream is no longer known to be aligned on frames.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end before `what` does.
    Truncated {
        what: &'static str,
    },
    /// The length field says fewer bytes than a header holds.
    FrameTooShort {
        length_bytes: u32,
    },
    FrameTooLarge {
        frame_bytes: u64,
        max_bytes: usize,
    },
    BadChecksum {
        stored: u32,
        computed: u32,
    },
    UnknownVersion {
        version: u8,
    },
    UnknownKind {
        kind: u8,
    },
    /// A tag or boolean byte holds a value no encoder writes.
    BadTag {
        what: &'static str,
        tag: u8,
    },
    TooMany {
        what: &'static str,
        count: u64,
        max: u64,
    },
    TooLong {
        what: &'static str,
        len_bytes: u64,
        max_bytes: u64,
    },
    BadUtf8 {
        what: &'static str,
    },
    /// A varint longer than ten bytes or past 64 bits (or past 32 where a u32 is meant).
    BadVarint {
        what: &'static str,
    },
    /// Bytes left after `what` was complete.
    TrailingBytes {
        what: &'static str,
        bytes: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { what } => write!(f, "frame ends inside its {what}"),
            DecodeError::FrameTooShort { length_bytes } => write!(
                f,
                "frame length {length_bytes} is shorter than a frame header ({LENGTH_COUNTED_HEADER_BYTES})"
            ),
            DecodeError::FrameTooLarge {
                frame_bytes,
                max_bytes,
            } => write!(
                f,
                "frame of {frame_bytes} bytes exceeds the internode limit of {max_bytes}; the peer \
                 runs a build with a larger limit or the stream is corrupt"
            ),
            DecodeError::BadChecksum { stored, computed } => write!(
                f,
                "frame checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the \
                 bytes were damaged on the way"
            ),
            DecodeError::UnknownVersion { version } => write!(
                f,
                "frame version {version} is not one this build speaks ({VERSION_MIN}..={VERSION}); \
                 upgrade the older node"
            ),
            DecodeError::UnknownKind { kind } => write!(
                f,
                "unknown message kind {kind}; the peer runs a newer build than this one"
            ),
            DecodeError::BadTag { what, tag } => write!(f, "{what} has the impossible value {tag}"),
            DecodeError::TooMany { what, count, max } => {
                write!(f, "{count} {what} exceed the limit of {max}")
            }
            DecodeError::TooLong {
                what,
                len_bytes,
                max_bytes,
            } => {
                write!(f, "{what} of {len_bytes} bytes exceeds the limit of {max_bytes}")
            }
            DecodeError::BadUtf8 { what } => write!(f, "{what} is not UTF-8"),
            DecodeError::BadVarint { what } => write!(f, "{what} is not a varint of its width"),
            DecodeError::TrailingBytes { what, bytes } => {
                write!(f, "{bytes} bytes left over after the {what}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Appends `message` to `out` as one frame of format `version`; returns the frame's length.
/// On error `out` is left as it was. Allocates nothing beyond growing `out`.
///
/// Panics if `version` is not one this build speaks (the handshake only agrees on those).
pub fn encode(message: &Message, version: u8, out: &mut Vec<u8>) -> Result<usize, EncodeError> {
    assert!(
        (VERSION_MIN..=VERSION).contains(&version),
        "frame version {version} was never negotiated"
    );
    let start = out.len();
    out.extend_from_slice(&[0u8; OFFSET_VERSION]); // length and crc, filled in below
    wire::put_u8(out, version);
    wire::put_u8(out, message.kind() as u8);
    wire::put_u64(out, message.id());
    if let Err(e) = payload::encode(message, version, out) {
        out.truncate(start);
        return Err(e);
    }
    let frame_bytes = out.len() - start;
    if frame_bytes > FRAME_BYTES_MAX {
        out.truncate(start);
        return Err(EncodeError::FrameTooLarge {
            frame_bytes,
            max_bytes: FRAME_BYTES_MAX,
        });
    }
    let frame = &mut out[start..];
    wire::set_u32(frame, OFFSET_LENGTH, (frame_bytes - OFFSET_CRC) as u32);
    let crc = crc32c::crc32c(&frame[OFFSET_VERSION..]);
    wire::set_u32(frame, OFFSET_CRC, crc);
    Ok(frame_bytes)
}

/// How long the frame at the start of `buf` is (length field included), once its length field
/// is there: `Ok(None)` until then. Refuses an impossible length before the caller reserves
/// room for the rest.
pub fn frame_bytes(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buf.len() < OFFSET_CRC {
        return Ok(None);
    }
    let length = wire::get_u32(buf, OFFSET_LENGTH);
    if (length as usize) < LENGTH_COUNTED_HEADER_BYTES {
        return Err(DecodeError::FrameTooShort { length_bytes: length });
    }
    let frame_bytes = u64::from(length) + OFFSET_CRC as u64;
    if frame_bytes > FRAME_BYTES_MAX as u64 {
        return Err(DecodeError::FrameTooLarge {
            frame_bytes,
            max_bytes: FRAME_BYTES_MAX,
        });
    }
    Ok(Some(frame_bytes as usize))
}

/// Decodes one whole frame: `frame` is exactly the bytes [`frame_bytes`] measured. Never
/// panics, whatever the bytes.
pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    let Some(len) = frame_bytes(frame)? else {
        return Err(DecodeError::Truncated { what: "length field" });
    };
    if frame.len() < len {
        return Err(DecodeError::Truncated { what: "frame" });
    }
    if frame.len() > len {
        return Err(DecodeError::TrailingBytes {
            what: "frame",
            bytes: frame.len() - len,
        });
    }
    let stored = wire::get_u32(frame, OFFSET_CRC);
    let computed = crc32c::crc32c(&frame[OFFSET_VERSION..]);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    let version = frame[OFFSET_VERSION];
    if !(VERSION_MIN..=VERSION).contains(&version) {
        return Err(DecodeError::UnknownVersion { version });
    }
    let kind = Kind::from_u8(frame[OFFSET_KIND]).ok_or(DecodeError::UnknownKind {
        kind: frame[OFFSET_KIND],
    })?;
    let mut id = wire::Reader::new(&frame[OFFSET_ID..FRAME_HEADER_BYTES]);
    let id = id.u64("request id")?;
    payload::decode(kind, id, version, &frame[FRAME_HEADER_BYTES..])
}

/// Rewrites the length field and checksum of `frame` to fit its bytes as they are: for tests
/// and the fuzz target, which build or damage frames and want the decoder to look past the
/// checksum. Leaves a frame too short or too long to be one alone.
pub fn seal(frame: &mut [u8]) {
    if frame.len() < FRAME_HEADER_BYTES || frame.len() > FRAME_BYTES_MAX {
        return;
    }
    wire::set_u32(frame, OFFSET_LENGTH, (frame.len() - OFFSET_CRC) as u32);
    let crc = crc32c::crc32c(&frame[OFFSET_VERSION..]);
    wire::set_u32(frame, OFFSET_CRC, crc);
}
