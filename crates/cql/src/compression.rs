//! Frame body compression (the STARTUP `COMPRESSION` option), LZ4 only.
//!
//! Spec: native_protocol_v4.spec section 5. A compressed body is the uncompressed length as a
//! 4-byte big-endian integer followed by one LZ4 *block* (not the LZ4 frame format):
//!
//! ```text
//!  +----------------------------------+--------------------------------+
//!  | uncompressed length: [int] (BE)  |  LZ4 block (sequences, no size) |
//!  +----------------------------------+--------------------------------+
//! ```
//!
//! The Python driver builds exactly this by taking `lz4.block.compress` (which prefixes the
//! length little-endian) and rewriting the prefix big-endian. The claimed length is checked
//! against the caller's bound before anything is allocated, so a 20-byte frame cannot ask for
//! gigabytes; the decoder is the bounds-checked safe one, so garbage is an error, not a read out
//! of bounds.

//! Frame body compression (the STARTUP `COMPRESSION` option): LZ4 and Snappy, the two that
//! Cassandra 4 and 5 offer to protocol v4 clients.
//!
//! Spec: native_protocol_v4.spec section 5. An LZ4 body is the uncompressed length as a 4-byte
//! big-endian integer followed by one LZ4 *block* (not the LZ4 frame format):
//!
//! ```text
//!  +----------------------------------+--------------------------------+
//!  | uncompressed length: [int] (BE)  |  LZ4 block (sequences, no size) |
//!  +----------------------------------+--------------------------------+
//! ```
//!
//! A Snappy body is one *raw* Snappy block (not the framing format), which carries its own
//! uncompressed length as a little-endian base-128 varint at its start:
//!
//! ```text
//!  +---------------------------------+----------------------------------+
//!  | uncompressed length: varint (LE) |  Snappy elements (literals, copies) |
//!  +---------------------------------+----------------------------------+
//! ```
//!
//! The Python driver builds the LZ4 form by taking `lz4.block.compress` (which prefixes the
//! length little-endian) and rewriting the prefix big-endian; for Snappy it calls
//! `snappy.compress`, the raw format. Either way the claimed length is checked against the
//! caller's bound before anything is allocated, so a 20-byte frame cannot ask for gigabytes;
//! the decoders are bounds-checked safe ones, so garbage is an error, not a read out of bounds.

use std::fmt;

/// Bytes of the big-endian uncompressed-length prefix of an LZ4 body.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// A body compression algorithm a client may ask for in STARTUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Lz4,
    Snappy,
}

impl Compression {
    /// Every algorithm, in the order SUPPORTED lists them.
    pub const ALL: [Compression; 2] = [Compression::Lz4, Compression::Snappy];

    /// The STARTUP name; matched without regard to case, as Cassandra does.
    pub fn from_name(name: &str) -> Option<Compression> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// The name SUPPORTED lists and STARTUP carries.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
        }
    }

    /// Appends `body` compressed with this algorithm.
    pub fn compress(self, body: &[u8], out: &mut Vec<u8>) {
        match self {
            Compression::Lz4 => compress_lz4(body, out),
            Compression::Snappy => compress_snappy(body, out),
        }
    }

    /// Decompresses `body`, refusing one that claims more than `max_bytes` uncompressed bytes.
    pub fn decompress(self, body: &[u8], max_bytes: usize) -> Result<Vec<u8>, CompressionError> {
        match self {
            Compression::Lz4 => decompress_lz4(body, max_bytes),
            Compression::Snappy => decompress_snappy(body, max_bytes),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::Lz4 => "LZ4",
            Compression::Snappy => "Snappy",
        })
    }
}

/// Why a compressed body could not be decompressed. Answered with a protocol ERROR.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompressionError {
    /// The body is shorter than its length prefix.
    Truncated {
        algorithm: Compression,
        body_bytes: usize,
    },
    /// The claimed length is negative or above the bound the caller gave (the frame size limit).
    LengthTooLarge {
        algorithm: Compression,
        claimed_bytes: i64,
        max_bytes: usize,
    },
    /// The block is damaged or does not decompress to the claimed length.
    Corrupt { algorithm: Compression, reason: String },
}

impl fmt::Display for CompressionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressionError::Truncated {
                algorithm,
                body_bytes,
            } => write!(
                f,
                "{algorithm}-compressed body of {body_bytes} bytes is shorter than its length prefix"
            ),
            CompressionError::LengthTooLarge {
                algorithm,
                claimed_bytes,
                max_bytes,
            } => write!(
                f,
                "{algorithm}-compressed body claims {claimed_bytes} uncompressed bytes; the maximum is \
                 {max_bytes}: send smaller requests"
            ),
            CompressionError::Corrupt { algorithm, reason } => {
                write!(f, "{algorithm}-compressed body is corrupt: {reason}")
            }
        }
    }
}

impl std::error::Error for CompressionError {}

/// Decompresses an LZ4 body as spec section 5 says, refusing one that claims more than
/// `max_bytes` uncompressed bytes before allocating them.
pub fn decompress_lz4(body: &[u8], max_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let algorithm = Compression::Lz4;
    let Some((prefix, block)) = body.split_first_chunk::<LENGTH_PREFIX_BYTES>() else {
        return Err(CompressionError::Truncated {
            algorithm,
            body_bytes: body.len(),
        });
    };
    let claimed = i32::from_be_bytes(*prefix);
    let length = usize::try_from(claimed).ok().filter(|&n| n <= max_bytes).ok_or(
        CompressionError::LengthTooLarge {
            algorithm,
            claimed_bytes: claimed.into(),
            max_bytes,
        },
    )?;
    let mut out = vec![0u8; length];
    let written =
        lz4_flex::block::decompress_into(block, &mut out).map_err(|e| CompressionError::Corrupt {
            algorithm,
            reason: e.to_string(),
        })?;
    if written != length {
        return Err(CompressionError::Corrupt {
            algorithm,
            reason: format!("decompressed to {written} bytes, but the prefix claims {length}"),
        });
    }
    Ok(out)
}

/// Appends `body` compressed as spec section 5 says. A body longer than an [int] can count is
/// a programmer error: frames are bounded far below that.
pub fn compress_lz4(body: &[u8], out: &mut Vec<u8>) {
    let length = i32::try_from(body.len()).unwrap_or_else(|_| {
        panic!(
            "body of {} bytes is too long to compress into a frame",
            body.len()
        )
    });
    out.extend_from_slice(&length.to_be_bytes());
    let start = out.len();
    out.resize(start + lz4_flex::block::get_maximum_output_size(body.len()), 0);
    let written = lz4_flex::block::compress_into(body, &mut out[start..])
        .unwrap_or_else(|e| panic!("LZ4 output buffer sized by get_maximum_output_size was too small: {e}"));
    out.truncate(start + written);
}

/// Decompresses a raw Snappy body, refusing one whose varint claims more than `max_bytes`
/// uncompressed bytes before allocating them.
pub fn decompress_snappy(body: &[u8], max_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let algorithm = Compression::Snappy;
    if body.is_empty() {
        // Even an empty body compresses to one byte (its zero length).
        return Err(CompressionError::Truncated {
            algorithm,
            body_bytes: 0,
        });
    }
    let length = snap::raw::decompress_len(body).map_err(|e| CompressionError::Corrupt {
        algorithm,
        reason: e.to_string(),
    })?;
    if length > max_bytes {
        return Err(CompressionError::LengthTooLarge {
            algorithm,
            claimed_bytes: i64::try_from(length).unwrap_or(i64::MAX),
            max_bytes,
        });
    }
    let mut out = vec![0u8; length];
    let written = snap::raw::Decoder::new()
        .decompress(body, &mut out)
        .map_err(|e| CompressionError::Corrupt {
            algorithm,
            reason: e.to_string(),
        })?;
    if written != length {
        return Err(CompressionError::Corrupt {
            algorithm,
            reason: format!("decompressed to {written} bytes, but the header claims {length}"),
        });
    }
    Ok(out)
}

/// Appends `body` compressed as one raw Snappy block. Snappy refuses only inputs over 4 GiB,
/// far above any frame: that would be a programmer error.
pub fn compress_snappy(body: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + snap::raw::max_compress_len(body.len()), 0);
    let written = snap::raw::Encoder::new()
        .compress(body, &mut out[start..])
        .unwrap_or_else(|e| panic!("Snappy refused a body of {} bytes: {e}", body.len()));
    out.truncate(start + written);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FRAME_BODY_MAX_BYTES;

    const MAX: usize = FRAME_BODY_MAX_BYTES as usize;

    fn compress(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        compress_lz4(body, &mut out);
        out
    }

    #[test]
    fn round_trips_small_empty_and_repetitive_bodies() {
        let long: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for body in [
            &b""[..],
            b"x",
            b"SELECT * FROM t WHERE k = ?",
            &[0u8; 70_000],
            &long,
        ] {
            let compressed = compress(body);
            assert_eq!(&compressed[..4], &(body.len() as i32).to_be_bytes());
            assert_eq!(decompress_lz4(&compressed, MAX).as_deref(), Ok(body));
        }
        assert!(compress(&[0u8; 70_000]).len() < 1_000, "repetitive bodies shrink");
    }

    #[test]
    fn a_body_compressed_by_the_python_driver_decompresses() {
        // Made with the cassandra-driver 3.30 recipe and pip lz4 4.4.5:
        //   body = b"\x00\x01\x00\x00\x00\x0bCQL_VERSION\x00\x053.0.0" * 3
        //   struct.pack(">i", len(body)) + lz4.block.compress(body)[4:]
        // (a STARTUP string map repeated so that LZ4 finds a match).
        let compressed = [
            0x00, 0x00, 0x00, 0x48, 0xff, 0x09, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0b, 0x43, 0x51, 0x4c, 0x5f,
            0x56, 0x45, 0x52, 0x53, 0x49, 0x4f, 0x4e, 0x00, 0x05, 0x33, 0x2e, 0x30, 0x2e, 0x30, 0x18, 0x00,
            0x18, 0x50, 0x33, 0x2e, 0x30, 0x2e, 0x30,
        ];
        let body = b"\x00\x01\x00\x00\x00\x0bCQL_VERSION\x00\x053.0.0".repeat(3);
        assert_eq!(decompress_lz4(&compressed, MAX), Ok(body.clone()));
        // And what we send, the driver's lz4.block.decompress reads: the same block format.
        assert_eq!(decompress_lz4(&compress(&body), MAX), Ok(body));
    }

    #[test]
    fn a_claimed_length_over_the_bound_is_refused_before_allocating() {
        let mut body = 0x7FFF_FFFFi32.to_be_bytes().to_vec();
        body.extend_from_slice(&[0x10, 0x41]);
        assert_eq!(
            decompress_lz4(&body, MAX),
            Err(CompressionError::LengthTooLarge {
                algorithm: Compression::Lz4,
                claimed_bytes: 0x7FFF_FFFF,
                max_bytes: MAX
            })
        );
        let negative = [0xFF, 0xFF, 0xFF, 0xFF, 0x00];
        assert!(matches!(
            decompress_lz4(&negative, MAX),
            Err(CompressionError::LengthTooLarge { .. })
        ));
        let fits = compress(&[7u8; 100]);
        assert!(matches!(
            decompress_lz4(&fits, 99),
            Err(CompressionError::LengthTooLarge { .. })
        ));
    }

    #[test]
    fn garbage_and_lies_are_refused() {
        assert_eq!(
            decompress_lz4(&[0, 0], MAX),
            Err(CompressionError::Truncated {
                algorithm: Compression::Lz4,
                body_bytes: 2
            })
        );
        let garbage = [0, 0, 0, 10, 0xF0, 0xFF, 0xFF, 0x13, 0x00];
        assert!(matches!(
            decompress_lz4(&garbage, MAX),
            Err(CompressionError::Corrupt { .. })
        ));
        // A valid block whose prefix overstates its length.
        let mut lie = compress(b"hello hello hello");
        lie[3] += 5;
        assert!(matches!(
            decompress_lz4(&lie, MAX),
            Err(CompressionError::Corrupt { .. })
        ));
        let mut short = compress(b"hello hello hello");
        short[3] -= 5;
        assert!(matches!(
            decompress_lz4(&short, MAX),
            Err(CompressionError::Corrupt { .. })
        ));
        // Every truncation of a real body fails cleanly.
        let real = compress(&b"abcdefgh".repeat(40));
        for cut in 0..real.len() {
            assert!(decompress_lz4(&real[..cut], MAX).is_err(), "{cut}");
        }
    }

    fn snappy(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Compression::Snappy.compress(body, &mut out);
        out
    }

    #[test]
    fn snappy_round_trips_small_empty_and_repetitive_bodies() {
        let long: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for body in [
            &b""[..],
            b"x",
            b"SELECT * FROM t WHERE k = ?",
            &[0u8; 70_000],
            &long,
        ] {
            let compressed = snappy(body);
            assert_eq!(
                Compression::Snappy.decompress(&compressed, MAX).as_deref(),
                Ok(body)
            );
        }
        assert!(snappy(&[0u8; 70_000]).len() < 4_000, "repetitive bodies shrink");
    }

    #[test]
    fn a_body_compressed_by_python_snappy_decompresses() {
        // Made with python-snappy 0.7.3 (what the Python driver calls for 'snappy'):
        //   snappy.compress(b"\x00\x01\x00\x00\x00\x0bCQL_VERSION\x00\x053.0.0" * 3)
        let compressed = [
            0x48, 0x5c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0b, 0x43, 0x51, 0x4c, 0x5f, 0x56, 0x45, 0x52, 0x53,
            0x49, 0x4f, 0x4e, 0x00, 0x05, 0x33, 0x2e, 0x30, 0x2e, 0x30, 0xbe, 0x18, 0x00,
        ];
        let body = b"\x00\x01\x00\x00\x00\x0bCQL_VERSION\x00\x053.0.0".repeat(3);
        assert_eq!(Compression::Snappy.decompress(&compressed, MAX), Ok(body));
    }

    #[test]
    fn snappy_lengths_over_the_bound_and_garbage_are_refused() {
        // A varint claiming 2^31 bytes, then nothing: refused before any allocation.
        let huge = [0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        assert!(matches!(
            Compression::Snappy.decompress(&huge, MAX),
            Err(CompressionError::LengthTooLarge {
                algorithm: Compression::Snappy,
                ..
            })
        ));
        assert!(matches!(
            Compression::Snappy.decompress(&snappy(&[7u8; 100]), 99),
            Err(CompressionError::LengthTooLarge { .. })
        ));
        assert_eq!(
            Compression::Snappy.decompress(&[], MAX),
            Err(CompressionError::Truncated {
                algorithm: Compression::Snappy,
                body_bytes: 0
            })
        );
        // An unterminated varint, and a copy that reaches before the start of the output.
        for garbage in [
            &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF][..],
            &[0x0A, 0x05, 0x10, 0x00],
        ] {
            assert!(
                matches!(
                    Compression::Snappy.decompress(garbage, MAX),
                    Err(CompressionError::Corrupt { .. })
                ),
                "{garbage:?}"
            );
        }
        // A valid block whose varint overstates its length.
        let mut lie = snappy(b"hello hello hello");
        lie[0] += 5;
        assert!(Compression::Snappy.decompress(&lie, MAX).is_err());
        // Every truncation of a real body fails cleanly.
        let real = snappy(&b"abcdefgh".repeat(40));
        for cut in 0..real.len() {
            assert!(
                Compression::Snappy.decompress(&real[..cut], MAX).is_err(),
                "{cut}"
            );
        }
        let message = Compression::Snappy
            .decompress(&lie, MAX)
            .expect_err("corrupt")
            .to_string();
        assert!(
            message.starts_with("Snappy-compressed body is corrupt"),
            "{message}"
        );
    }

    #[test]
    fn startup_names_match_without_regard_to_case() {
        assert_eq!(Compression::from_name("lz4"), Some(Compression::Lz4));
        assert_eq!(Compression::from_name("Snappy"), Some(Compression::Snappy));
        assert_eq!(Compression::from_name("zstd"), None);
    }
}
