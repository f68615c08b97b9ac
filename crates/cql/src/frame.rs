//! The 9-byte frame header that starts every message.
//!
//! Spec: native_protocol_v4.spec, section 2 "Frame header". Big-endian throughout. Protocol v5
//! keeps the same header (its spec calls the frame an "envelope") but, once STARTUP is answered,
//! carries frames inside checksummed segments: see [`crate::segment`].
//!
//! ```text
//!  0         8        16        24        32         40
//!  +---------+---------+---------+---------+---------+
//!  | version |  flags  |      stream       | opcode  |
//!  +---------+---------+---------+---------+---------+
//!  |                length                 |
//!  +---------+---------+---------+---------+
//!  |             body (length bytes)       |
//! ```
//!
//! The top bit of `version` is the direction (0 request, 1 response); the low 7 bits are the
//! protocol version.

use std::fmt;

use crate::opcode::Opcode;

/// Bytes in a frame header.
pub const HEADER_BYTES: usize = 9;

/// The largest frame body we accept. The v4 spec allows 256 MiB, but Cassandra's
/// `native_transport_max_frame_size` defaults to 16 MiB in current releases, and a body is
/// buffered whole before it is decoded, so this bounds memory per connection.
pub const FRAME_BODY_MAX_BYTES: u32 = 16 * 1024 * 1024;
/// The largest body the protocol allows (the v4 spec's 256 MiB, also the Java driver's default
/// `max-frame-length`). Responses may be this large: Cassandra bounds what it reads, not what it
/// answers, so a page of a few rows of up to 16 MiB each goes out whole. A request above
/// [`FRAME_BODY_MAX_BYTES`] but within this is answered with an error and skipped, as Cassandra
/// does; one claiming more is not a frame we can trust, and its connection is closed.
pub const PROTOCOL_BODY_MAX_BYTES: u32 = 256 * 1024 * 1024;

/// Protocol v4, the oldest version this crate speaks.
pub const PROTOCOL_V4: u8 = 4;
/// Protocol v5: segments with checksums, per-query keyspace, result metadata ids.
pub const PROTOCOL_V5: u8 = 5;
/// The newest version this crate speaks: a client probing with a higher one is answered in it.
pub const PROTOCOL_VERSION_MAX: u8 = PROTOCOL_V5;
/// What SUPPORTED's `PROTOCOL_VERSIONS` lists and the version error message names.
pub const PROTOCOL_VERSIONS: [&str; 2] = ["4/v4", "5/v5"];

const DIRECTION_RESPONSE_BIT: u8 = 0x80;
const VERSION_MASK: u8 = 0x7F;

/// Which way a frame travels, from the top bit of the version byte (spec section 2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Request,
    Response,
}

/// Frame flags (spec section 2.2). Unknown bits are kept but ignored, as the spec asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameFlags(pub u8);

impl FrameFlags {
    pub const COMPRESSION: u8 = 0x01;
    pub const TRACING: u8 = 0x02;
    pub const CUSTOM_PAYLOAD: u8 = 0x04;
    pub const WARNING: u8 = 0x08;
    /// v5: the client opts in to a beta protocol version. v5 is not beta, so it is ignored.
    pub const USE_BETA: u8 = 0x10;

    pub fn compression(self) -> bool {
        self.0 & Self::COMPRESSION != 0
    }
    pub fn tracing(self) -> bool {
        self.0 & Self::TRACING != 0
    }
    pub fn custom_payload(self) -> bool {
        self.0 & Self::CUSTOM_PAYLOAD != 0
    }
    pub fn warning(self) -> bool {
        self.0 & Self::WARNING != 0
    }
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The protocol version, without the direction bit.
    pub version: u8,
    pub direction: Direction,
    pub flags: FrameFlags,
    /// Chosen by the client; EVENT frames use -1 (spec section 2.3).
    pub stream: i16,
    pub opcode: Opcode,
    pub body_length_bytes: u32,
}

/// Why a frame header was rejected. Each of these is answered with a protocol ERROR (0x000A)
/// on `stream`, and then the connection should be closed: the byte stream can no longer be
/// trusted to be aligned on frames.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The client asked for a protocol version we do not speak. Drivers look for this exact
    /// message ("Invalid or unsupported protocol version") and retry with a lower version.
    UnsupportedVersion { version: u8, stream: i16 },
    /// A frame flowing from client to server had the response direction bit set.
    NotARequest { stream: i16 },
    /// The opcode byte names no v4 message.
    UnknownOpcode { opcode: u8, stream: i16 },
    /// The body is larger than [`FRAME_BODY_MAX_BYTES`].
    BodyTooLarge { body_length_bytes: u32, stream: i16 },
}

impl FrameError {
    /// The stream the ERROR response should go back on.
    pub fn stream(&self) -> i16 {
        match *self {
            FrameError::UnsupportedVersion { stream, .. }
            | FrameError::NotARequest { stream }
            | FrameError::UnknownOpcode { stream, .. }
            | FrameError::BodyTooLarge { stream, .. } => stream,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnsupportedVersion { version, .. } => write!(
                f,
                "Invalid or unsupported protocol version ({version}); supported versions are ({})",
                PROTOCOL_VERSIONS.join(", ")
            ),
            FrameError::NotARequest { .. } => {
                write!(
                    f,
                    "frame has the response direction bit set; clients must send requests"
                )
            }
            FrameError::UnknownOpcode { opcode, .. } => {
                write!(f, "unknown opcode 0x{opcode:02X} in a protocol frame")
            }
            FrameError::BodyTooLarge {
                body_length_bytes, ..
            } => write!(
                f,
                "frame body of {body_length_bytes} bytes exceeds the maximum of \
                 {FRAME_BODY_MAX_BYTES} bytes; send smaller requests (smaller batches or pages)"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

impl FrameHeader {
    /// Decodes a header the server received. The version is checked before anything else so
    /// that a driver probing with v6 gets the message it expects even if the rest differs.
    pub fn decode(bytes: &[u8; HEADER_BYTES]) -> Result<FrameHeader, FrameError> {
        let stream = i16::from_be_bytes([bytes[2], bytes[3]]);
        let version = bytes[0] & VERSION_MASK;
        if !(PROTOCOL_V4..=PROTOCOL_VERSION_MAX).contains(&version) {
            return Err(FrameError::UnsupportedVersion { version, stream });
        }
        let direction = if bytes[0] & DIRECTION_RESPONSE_BIT != 0 {
            Direction::Response
        } else {
            Direction::Request
        };
        let opcode = Opcode::from_byte(bytes[4]).ok_or(FrameError::UnknownOpcode {
            opcode: bytes[4],
            stream,
        })?;
        let body_length_bytes = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        if body_length_bytes > FRAME_BODY_MAX_BYTES {
            return Err(FrameError::BodyTooLarge {
                body_length_bytes,
                stream,
            });
        }
        Ok(FrameHeader {
            version,
            direction,
            flags: FrameFlags(bytes[1]),
            stream,
            opcode,
            body_length_bytes,
        })
    }

    /// Like [`FrameHeader::decode`], but also rejects frames whose direction bit says response.
    pub fn decode_request(bytes: &[u8; HEADER_BYTES]) -> Result<FrameHeader, FrameError> {
        let header = FrameHeader::decode(bytes)?;
        if header.direction != Direction::Request {
            return Err(FrameError::NotARequest {
                stream: header.stream,
            });
        }
        Ok(header)
    }

    /// Appends the 9 header bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(
            self.version & DIRECTION_RESPONSE_BIT == 0,
            "version must not carry the direction bit"
        );
        let direction = match self.direction {
            Direction::Request => 0,
            Direction::Response => DIRECTION_RESPONSE_BIT,
        };
        out.push(self.version | direction);
        out.push(self.flags.0);
        out.extend_from_slice(&self.stream.to_be_bytes());
        out.push(self.opcode as u8);
        out.extend_from_slice(&self.body_length_bytes.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: [u8; HEADER_BYTES]) -> Result<FrameHeader, FrameError> {
        FrameHeader::decode_request(&bytes)
    }

    #[test]
    fn an_options_request_on_stream_zero_decodes() {
        let h = header([0x04, 0x00, 0x00, 0x00, 0x05, 0, 0, 0, 0]).expect("valid header");
        assert_eq!(h.version, 4);
        assert_eq!(h.direction, Direction::Request);
        assert_eq!(h.stream, 0);
        assert_eq!(h.opcode, Opcode::Options);
        assert_eq!(h.body_length_bytes, 0);
    }

    #[test]
    fn stream_and_length_are_big_endian() {
        let h = header([0x04, 0x02, 0x01, 0x02, 0x07, 0x00, 0x01, 0x00, 0x00]).expect("valid");
        assert_eq!(h.stream, 0x0102);
        assert_eq!(h.body_length_bytes, 0x0001_0000);
        assert!(h.flags.tracing());
    }

    #[test]
    fn a_v6_probe_gets_the_message_drivers_look_for() {
        // The Python driver opens with its highest version and downgrades when the protocol
        // error message contains "Invalid or unsupported protocol version".
        assert_eq!(
            header([0x05, 0, 0, 0, 0x05, 0, 0, 0, 0]).map(|h| h.version),
            Ok(5)
        );
        let err = header([0x06, 0, 0, 0, 0x05, 0, 0, 0, 0]).expect_err("v6 is not spoken");
        assert_eq!(
            err,
            FrameError::UnsupportedVersion {
                version: 6,
                stream: 0
            }
        );
        assert_eq!(
            err.to_string(),
            "Invalid or unsupported protocol version (6); supported versions are (4/v4, 5/v5)"
        );
        // A TLS ClientHello begins with 0x16: it must fail the same way, not panic.
        let err = header([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0, 0, 0]).expect_err("TLS");
        assert!(matches!(
            err,
            FrameError::UnsupportedVersion { version: 0x16, .. }
        ));
    }

    #[test]
    fn unknown_opcodes_and_responses_are_rejected_on_their_stream() {
        let err = header([0x04, 0, 0, 7, 0x04, 0, 0, 0, 0]).expect_err("0x04 is unused");
        assert_eq!(
            err,
            FrameError::UnknownOpcode {
                opcode: 0x04,
                stream: 7
            }
        );
        let err = header([0x84, 0, 0, 9, 0x02, 0, 0, 0, 0]).expect_err("response");
        assert_eq!(err, FrameError::NotARequest { stream: 9 });
    }

    #[test]
    fn bodies_over_the_maximum_are_rejected_and_the_maximum_is_accepted() {
        let mut bytes = [0x04, 0, 0, 1, 0x07, 0, 0, 0, 0];
        bytes[5..9].copy_from_slice(&FRAME_BODY_MAX_BYTES.to_be_bytes());
        assert!(header(bytes).is_ok());
        bytes[5..9].copy_from_slice(&(FRAME_BODY_MAX_BYTES + 1).to_be_bytes());
        let err = header(bytes).expect_err("too large");
        assert_eq!(err.stream(), 1);
        assert!(matches!(err, FrameError::BodyTooLarge { .. }));
    }

    #[test]
    fn encode_then_decode_is_identity() {
        let h = FrameHeader {
            version: 4,
            direction: Direction::Response,
            flags: FrameFlags(FrameFlags::WARNING),
            stream: -1,
            opcode: Opcode::Event,
            body_length_bytes: 1234,
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        assert_eq!(out[0], 0x84);
        let bytes: [u8; HEADER_BYTES] = out.as_slice().try_into().expect("9 bytes");
        assert_eq!(FrameHeader::decode(&bytes), Ok(h));
    }
}
