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

use std::fmt;

/// Bytes of the big-endian uncompressed-length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Why a compressed body could not be decompressed. Answered with a protocol ERROR.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompressionError {
    /// The body is shorter than the length prefix.
    Truncated { body_bytes: usize },
    /// The prefix is negative or above the bound the caller gave (the frame size limit).
    LengthTooLarge { claimed_bytes: i64, max_bytes: usize },
    /// The LZ4 block is damaged or does not decompress to the claimed length.
    Corrupt { reason: String },
}

impl fmt::Display for CompressionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressionError::Truncated { body_bytes } => write!(
                f,
                "LZ4-compressed body of {body_bytes} bytes is shorter than its 4-byte length prefix"
            ),
            CompressionError::LengthTooLarge {
                claimed_bytes,
                max_bytes,
            } => write!(
                f,
                "LZ4-compressed body claims {claimed_bytes} uncompressed bytes; the maximum is \
                 {max_bytes}: send smaller requests"
            ),
            CompressionError::Corrupt { reason } => {
                write!(f, "LZ4-compressed body is corrupt: {reason}")
            }
        }
    }
}

impl std::error::Error for CompressionError {}

/// Decompresses a body compressed as spec section 5 says, refusing one that claims more than
/// `max_bytes` uncompressed bytes before allocating them.
pub fn decompress_lz4(body: &[u8], max_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let Some((prefix, block)) = body.split_first_chunk::<LENGTH_PREFIX_BYTES>() else {
        return Err(CompressionError::Truncated {
            body_bytes: body.len(),
        });
    };
    let claimed = i32::from_be_bytes(*prefix);
    let length = usize::try_from(claimed).ok().filter(|&n| n <= max_bytes).ok_or(
        CompressionError::LengthTooLarge {
            claimed_bytes: claimed.into(),
            max_bytes,
        },
    )?;
    let mut out = vec![0u8; length];
    let written =
        lz4_flex::block::decompress_into(block, &mut out).map_err(|e| CompressionError::Corrupt {
            reason: e.to_string(),
        })?;
    if written != length {
        return Err(CompressionError::Corrupt {
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
            Err(CompressionError::Truncated { body_bytes: 2 })
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
}
