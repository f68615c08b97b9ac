//! Just enough arbitrary-precision arithmetic for `varint` and `decimal`: converting between
//! two's-complement bytes, sign and magnitude, and decimal digits. The crate stays free of a
//! bignum dependency; nothing here needs more than schoolbook division by a small number.
//!
//! Magnitudes are big-endian bytes without leading zeros (zero is the empty magnitude). The
//! conversions to and from decimal digits are quadratic in the length, which is why callers
//! only use them on literals and on clustering values, which the server bounds in size.

/// A two's-complement integer split into its sign and magnitude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignMagnitude {
    pub negative: bool,
    pub magnitude: Vec<u8>,
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

/// Adds one to a big-endian number in place, wrapping at its width.
fn increment(bytes: &mut [u8]) {
    for b in bytes.iter_mut().rev() {
        let (sum, carry) = b.overflowing_add(1);
        *b = sum;
        if !carry {
            return;
        }
    }
}

/// Splits big-endian two's-complement bytes (empty is zero).
pub fn to_sign_magnitude(twos: &[u8]) -> SignMagnitude {
    let negative = twos.first().is_some_and(|&b| b & 0x80 != 0);
    if !negative {
        return SignMagnitude {
            negative,
            magnitude: strip_leading_zeros(twos).to_vec(),
        };
    }
    let mut magnitude: Vec<u8> = twos.iter().map(|b| !b).collect();
    increment(&mut magnitude);
    // -2^(8n-1) negates to itself within n bytes; its magnitude then reads correctly as
    // unsigned, so no extra byte is needed.
    SignMagnitude {
        negative,
        magnitude: strip_leading_zeros(&magnitude).to_vec(),
    }
}

/// Appends the shortest two's-complement bytes of a sign and magnitude (`[0]` for zero).
pub fn write_twos(negative: bool, magnitude: &[u8], out: &mut Vec<u8>) {
    let magnitude = strip_leading_zeros(magnitude);
    if magnitude.is_empty() {
        out.push(0);
        return;
    }
    if !negative {
        if magnitude[0] & 0x80 != 0 {
            out.push(0);
        }
        out.extend_from_slice(magnitude);
        return;
    }
    let start = out.len();
    out.extend(magnitude.iter().map(|b| !b));
    increment(&mut out[start..]);
    if out[start] & 0x80 == 0 {
        out.insert(start, 0xFF);
    }
}

/// The length of the shortest two's-complement encoding of the same number as `twos`.
pub fn minimal_len(twos: &[u8]) -> usize {
    let mut i = 0;
    while i + 1 < twos.len() {
        let redundant =
            (twos[i] == 0x00 && twos[i + 1] & 0x80 == 0) || (twos[i] == 0xFF && twos[i + 1] & 0x80 != 0);
        if !redundant {
            break;
        }
        i += 1;
    }
    twos.len() - i
}

/// Appends `twos` sign-extended to `len` bytes; `len` 0 is allowed only for zero.
pub fn write_sign_extended(twos: &[u8], len: usize, out: &mut Vec<u8>) {
    let fill = if twos.first().is_some_and(|&b| b & 0x80 != 0) {
        0xFF
    } else {
        0x00
    };
    let skip = twos.len().saturating_sub(len);
    out.extend(std::iter::repeat_n(fill, len.saturating_sub(twos.len())));
    out.extend_from_slice(&twos[skip..]);
}

const CHUNK: u32 = 1_000_000_000;
const CHUNK_DIGITS: usize = 9;

/// The decimal digits of a magnitude, most significant first, as ASCII; "0" for zero.
pub fn magnitude_to_digits(magnitude: &[u8]) -> Vec<u8> {
    // Little-endian 32-bit limbs, divided by 10^9 until nothing is left.
    let magnitude = strip_leading_zeros(magnitude);
    let mut limbs: Vec<u32> = magnitude
        .rchunks(4)
        .map(|c| c.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)))
        .collect();
    let mut chunks = Vec::new();
    while !limbs.is_empty() {
        let mut rem = 0u64;
        for limb in limbs.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / u64::from(CHUNK)) as u32;
            rem = cur % u64::from(CHUNK);
        }
        chunks.push(rem as u32);
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
    }
    let Some((last, rest)) = chunks.split_last() else {
        return b"0".to_vec();
    };
    let mut out = last.to_string().into_bytes();
    for chunk in rest.iter().rev() {
        out.extend_from_slice(format!("{chunk:09}").as_bytes());
    }
    out
}

/// The magnitude of ASCII decimal digits. The caller has checked that they are all digits.
pub fn digits_to_magnitude(digits: &[u8]) -> Vec<u8> {
    let mut limbs: Vec<u32> = Vec::new();
    let head = digits.len() % CHUNK_DIGITS;
    let mut pieces: Vec<&[u8]> = Vec::with_capacity(digits.len() / CHUNK_DIGITS + 1);
    if head > 0 {
        pieces.push(&digits[..head]);
    }
    pieces.extend(digits[head..].chunks(CHUNK_DIGITS));
    for piece in pieces {
        let scale = 10u64.pow(piece.len() as u32);
        let mut carry = piece
            .iter()
            .fold(0u64, |acc, &d| acc * 10 + u64::from(d.wrapping_sub(b'0')));
        for limb in limbs.iter_mut() {
            let cur = u64::from(*limb) * scale + carry;
            *limb = cur as u32;
            carry = cur >> 32;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
    }
    let mut out = Vec::with_capacity(limbs.len() * 4);
    for limb in limbs.iter().rev() {
        out.extend_from_slice(&limb.to_be_bytes());
    }
    strip_leading_zeros(&out).to_vec()
}

/// Two's-complement bytes as a decimal integer: `-123`.
pub fn twos_to_string(twos: &[u8]) -> String {
    let sm = to_sign_magnitude(twos);
    let digits = magnitude_to_digits(&sm.magnitude);
    let mut out = String::with_capacity(digits.len() + 1);
    if sm.negative {
        out.push('-');
    }
    out.extend(digits.iter().map(|&d| char::from(d)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn twos(v: i128) -> Vec<u8> {
        let mut out = Vec::new();
        write_twos(v < 0, &v.unsigned_abs().to_be_bytes(), &mut out);
        out
    }

    #[test]
    fn twos_complement_matches_native_integers() {
        let mut values = vec![
            0i128,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            255,
            256,
            -256,
            i64::MIN.into(),
            i128::MAX,
            i128::MIN,
        ];
        for shift in 0..127 {
            values.extend([1i128 << shift, -(1i128 << shift), (1i128 << shift) - 1]);
        }
        for v in values {
            let bytes = twos(v);
            let full = v.to_be_bytes();
            let minimal = &full[16 - minimal_len(&full)..];
            assert_eq!(bytes, minimal, "{v}");
            assert_eq!(minimal_len(&bytes), bytes.len());
            let sm = to_sign_magnitude(&bytes);
            assert_eq!(sm.negative, v < 0);
            assert_eq!(twos_to_string(&bytes), v.to_string());
            let digits = v.unsigned_abs().to_string();
            assert_eq!(digits_to_magnitude(digits.as_bytes()), sm.magnitude, "{v}");
            let mut extended = Vec::new();
            write_sign_extended(&bytes, 20, &mut extended);
            assert_eq!(to_sign_magnitude(&extended), sm);
        }
    }

    #[test]
    fn long_numbers_convert_both_ways() {
        let digits = "1234567890".repeat(30);
        let magnitude = digits_to_magnitude(digits.as_bytes());
        assert_eq!(magnitude_to_digits(&magnitude), digits.as_bytes());
        assert_eq!(magnitude_to_digits(&[]), b"0");
        assert_eq!(digits_to_magnitude(b"000"), Vec::<u8>::new());
    }
}
