//! Cassandra's variable-length integers, which `duration` values are made of.
//!
//! An unsigned vint puts its length in the first byte's leading one bits: `0xxxxxxx` is one
//! byte, `10xxxxxx` + 1 byte, ..., `11111111` + 8 bytes. The remaining bits of the first byte
//! and the following bytes are the value, big-endian. A signed vint is the unsigned vint of the
//! zig-zag encoding, so small magnitudes of either sign stay short.

/// The most bytes a vint takes: the first byte and a whole `u64`.
pub const VINT_MAX_BYTES: usize = 9;

/// Appends `value` as an unsigned vint, in its shortest form.
pub fn write_unsigned(out: &mut Vec<u8>, value: u64) {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    let size = bits.div_ceil(7).clamp(1, VINT_MAX_BYTES);
    if size == VINT_MAX_BYTES {
        out.push(0xFF);
        out.extend_from_slice(&value.to_be_bytes());
        return;
    }
    let extra = size - 1;
    let be = value.to_be_bytes();
    let start = out.len();
    out.extend_from_slice(&be[8 - size..]);
    // The top `extra` bits say how many bytes follow; the value is below 2^(7 * size), so those
    // bits and the zero bit after them are free.
    out[start] |= !(0xFFu8 >> extra);
}

/// Reads an unsigned vint from the front of `buf`, or `None` if it ends first.
pub fn read_unsigned(buf: &mut &[u8]) -> Option<u64> {
    let (&first, rest) = buf.split_first()?;
    let extra = first.leading_ones() as usize;
    if rest.len() < extra {
        return None;
    }
    let mut value = u64::from(first) & (0xFFu64 >> extra);
    for &b in &rest[..extra] {
        value = (value << 8) | u64::from(b);
    }
    *buf = &rest[extra..];
    Some(value)
}

pub fn write_signed(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

pub fn read_signed(buf: &mut &[u8]) -> Option<i64> {
    let zigzag = read_unsigned(buf)?;
    Some((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_every_length_boundary() {
        let mut values = vec![0i64, 1, -1, 63, -64, 64, -65, i64::MAX, i64::MIN];
        for shift in 0..63 {
            values.extend([1i64 << shift, (1i64 << shift) - 1, -(1i64 << shift)]);
        }
        for v in values {
            let mut out = Vec::new();
            write_signed(&mut out, v);
            assert!(out.len() <= VINT_MAX_BYTES);
            let mut cursor = out.as_slice();
            assert_eq!(read_signed(&mut cursor), Some(v), "{v}: {out:02x?}");
            assert!(cursor.is_empty());
            assert_eq!(read_signed(&mut &out[..out.len() - 1]), None, "{v} truncated");
        }
    }

    #[test]
    fn known_encodings() {
        // The zig-zag of 1 is 2 (one byte); of -1 is 1; 64 zig-zags to 128, which needs two
        // bytes: a 10 prefix and 14 bits of value.
        let enc = |v| {
            let mut out = Vec::new();
            write_signed(&mut out, v);
            out
        };
        assert_eq!(enc(1), [0x02]);
        assert_eq!(enc(-1), [0x01]);
        assert_eq!(enc(64), [0x80, 0x80]);
        assert_eq!(enc(i64::MIN)[0], 0xFF);
    }
}
