//! Order-preserving keys: serialized values turned into byte strings whose unsigned byte order
//! (memcmp) is [`compare`]'s order, and back.
//!
//! The storage engine sorts clustering keys as plain bytes, so the server stores each clustering
//! column as [`encode_order_key`] of its value and concatenates the columns. For that to sort
//! like Cassandra, every key is *prefix-free*: no key of a type is a proper prefix of another
//! key of the same type, so two concatenations first differ inside the first column that
//! differs, and that column decides. A clustering prefix (fewer columns) is a prefix of the
//! longer keys and sorts before them, as a slice bound should. A DESC column stores its key
//! with every byte inverted; inverting a prefix-free code reverses its order and keeps it
//! prefix-free. Non-frozen set elements and map keys use the same keys as cell paths, so cells
//! iterate in Cassandra's order.
//!
//! Layout, ascending (DESC inverts every byte of the component):
//!
//! ```text
//! escaped bytes     ascii, text, blob, inet, duration:   content with 00 → 00 FF, then 00 01
//! fixed width       00 (empty) | 01 value | 02 escaped (malformed length)
//!     signed ints   value = big-endian with the sign bit flipped
//!     date/time/boolean  value = the bytes as they are (Cassandra orders them as unsigned)
//!     float/double  00 | 01 ordered bits | 02 raw bits (NaN) | 03 escaped
//!                   ordered bits = bits ^ sign bit if positive, !bits if negative
//!     uuid          01 version, msb (time fields first if version 1), lsb
//!     timeuuid      01 msb with time fields first and top bit flipped, lsb bytes ^ 0x80
//! varint            00 (empty) | 01 negative | 02 zero | 03 positive, then
//!                   positive: len u32, magnitude   negative: !len, !magnitude
//!                   then the encoded length u32 (ties between redundant encodings)
//! decimal           00 | 01 neg | 02 zero | 03 pos | 04 escaped (1 to 3 bytes), then for ±:
//!                   exponent i64 (sign flipped), digits 1..=10 (0-9 + 1), 00   (neg: all inverted)
//!                   then scale i32 (sign flipped) and unscaled length u32 (the tie-breaks)
//! frozen list/set/map/tuple  00 (empty, not tuples) | 02 escaped (malformed) |
//!                   01 { 01 (null) | 02 element key }* 00   (map: key, value, key, value...)
//! ```
//!
//! Numeric magnitudes for decimal are decimal digits so that `0.1` and `1e-1` meet; computing
//! them is quadratic in the value's length, which the server bounds for clustering values.

use super::bignum;
use super::codec::{read_component, COLLECTION_ELEMENTS_MAX};
use super::error::ValueError;
use super::types::DataType;

/// The longest value whose key [`decode_order_key`] turns back into bytes, and so the longest
/// clustering value, set element or map key the server may store: Cassandra's limit too (it
/// refuses longer ones with "Key length ... is longer than maximum of 65535"). The bound keeps a
/// damaged key from claiming a huge varint or decimal; the server must refuse longer values
/// before making keys of them, and before sorting them with [`super::compare`], whose decimal
/// arithmetic is quadratic in length.
pub const ORDERED_VALUE_MAX_BYTES: usize = 65_535;

pub(crate) const CLASS_EMPTY: u8 = 0x00;
pub(crate) const CLASS_VALID: u8 = 0x01;
pub(crate) const CLASS_MALFORMED: u8 = 0x02;

const FLOAT_NUMBER: u8 = 0x01;
const FLOAT_NAN: u8 = 0x02;
const FLOAT_MALFORMED: u8 = 0x03;

const NUMBER_NEGATIVE: u8 = 0x01;
const NUMBER_ZERO: u8 = 0x02;
const NUMBER_POSITIVE: u8 = 0x03;
const DECIMAL_MALFORMED: u8 = 0x04;

const ITEM_END: u8 = 0x00;
const ITEM_NULL: u8 = 0x01;
const ITEM_PRESENT: u8 = 0x02;

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const ESCAPED_END: u8 = 0x01;

/// Appends the order key of `value`, a serialized value of `ty`, inverted when the column is
/// clustered DESC. Any bytes have a key; values that `validate` would refuse sort after the
/// valid ones.
pub fn encode_order_key(ty: &DataType, value: &[u8], descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    encode_ascending(ty, value, out);
    if descending {
        out[start..].iter_mut().for_each(|b| *b = !*b);
    }
}

/// Reads one key of `ty` from the front of `input` and appends the serialized value it was made
/// from, exactly. `input` is left after the key, at the next column's key.
pub fn decode_order_key(
    ty: &DataType,
    descending: bool,
    input: &mut &[u8],
    out: &mut Vec<u8>,
) -> Result<(), ValueError> {
    let mut reader = Reader {
        input,
        mask: if descending { 0xFF } else { 0x00 },
    };
    decode_ascending(ty, &mut reader, out)
}

/// The width of a fixed-width type, 0 for the others.
pub(crate) fn fixed_width(ty: &DataType) -> usize {
    match ty {
        DataType::Boolean | DataType::TinyInt => 1,
        DataType::SmallInt => 2,
        DataType::Int | DataType::Float | DataType::Date => 4,
        DataType::BigInt | DataType::Counter | DataType::Double | DataType::Timestamp | DataType::Time => 8,
        DataType::Uuid | DataType::Timeuuid => 16,
        _ => 0,
    }
}

pub(crate) fn fixed_class(v: &[u8], width: usize) -> u8 {
    match v.len() {
        0 => CLASS_EMPTY,
        n if n == width => CLASS_VALID,
        _ => CLASS_MALFORMED,
    }
}

/// The class and the fixed-width part of a float or double's key, for comparing without
/// allocating. Malformed values need their bytes as a tie-break.
pub(crate) fn float_key(ty: &DataType, v: &[u8]) -> (u8, u64) {
    let width = fixed_width(ty);
    match fixed_class(v, width) {
        CLASS_EMPTY => (CLASS_EMPTY, 0),
        CLASS_MALFORMED => (FLOAT_MALFORMED, 0),
        _ => {
            let bits = v.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
            let sign = 1u64 << (width * 8 - 1);
            let is_nan = if width == 4 {
                f32::from_bits(bits as u32).is_nan()
            } else {
                f64::from_bits(bits).is_nan()
            };
            if is_nan {
                (FLOAT_NAN, bits)
            } else if bits & sign != 0 {
                // Negative: larger magnitudes are smaller numbers.
                (FLOAT_NUMBER, !bits & (sign | (sign - 1)))
            } else {
                (FLOAT_NUMBER, bits | sign)
            }
        }
    }
}

/// Moves a version 1 UUID's timestamp fields to the front: time_hi (bytes 6-7, with the
/// version), time_mid (4-5), time_low (0-3).
fn reorder_time(msb: &[u8]) -> [u8; 8] {
    [msb[6], msb[7], msb[4], msb[5], msb[0], msb[1], msb[2], msb[3]]
}

fn unreorder_time(key: &[u8; 8]) -> [u8; 8] {
    [key[4], key[5], key[6], key[7], key[2], key[3], key[0], key[1]]
}

/// The class and the 17 (uuid) or 16 (timeuuid, then a 0) key bytes of a uuid or timeuuid.
pub(crate) fn uuid_key(ty: &DataType, v: &[u8]) -> (u8, [u8; 17]) {
    let mut key = [0u8; 17];
    let class = fixed_class(v, 16);
    if class != CLASS_VALID {
        return (class, key);
    }
    if matches!(ty, DataType::Timeuuid) {
        // Cassandra compares the reordered msb as a signed long and the lsb as signed bytes.
        key[..8].copy_from_slice(&reorder_time(&v[..8]));
        key[0] ^= 0x80;
        for (k, b) in key[8..16].iter_mut().zip(&v[8..16]) {
            *k = b ^ 0x80;
        }
    } else {
        let version = v[6] >> 4;
        key[0] = version;
        if version == 1 {
            key[1..9].copy_from_slice(&reorder_time(&v[..8]));
        } else {
            key[1..9].copy_from_slice(&v[..8]);
        }
        key[9..17].copy_from_slice(&v[8..16]);
    }
    (class, key)
}

fn uuid_from_key(ty: &DataType, key: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let mut msb = [0u8; 8];
    if matches!(ty, DataType::Timeuuid) {
        msb.copy_from_slice(&key[..8]);
        msb[0] ^= 0x80;
        out[..8].copy_from_slice(&unreorder_time(&msb));
        for (o, k) in out[8..].iter_mut().zip(&key[8..16]) {
            *o = k ^ 0x80;
        }
    } else {
        msb.copy_from_slice(&key[1..9]);
        if key[0] == 1 {
            msb = unreorder_time(&msb);
        }
        out[..8].copy_from_slice(&msb);
        out[8..].copy_from_slice(&key[9..17]);
    }
    out
}

/// Whether a frozen collection or tuple value is empty, well formed, or neither. Well formed
/// means its structure parses (counts, lengths, no trailing bytes); its elements may still be
/// malformed for their own types, which their own keys handle.
pub(crate) fn nested_class(ty: &DataType, v: &[u8]) -> u8 {
    if v.is_empty() && ty.components().is_none() {
        return CLASS_EMPTY;
    }
    let mut items = ItemsIter::new(ty, v);
    for _ in items.by_ref() {}
    if items.failed {
        CLASS_MALFORMED
    } else {
        CLASS_VALID
    }
}

/// The items of a frozen collection or tuple, with the type of each: list and set elements,
/// map keys and values alternately, tuple components. `None` is a null item. Stops at the
/// first structural error and sets `failed`.
pub(crate) struct ItemsIter<'t, 'a> {
    ty: &'t DataType,
    buf: &'a [u8],
    /// Items still to read for a collection; `None` for a tuple, which ends with its bytes.
    remaining: Option<usize>,
    index: usize,
    pub(crate) failed: bool,
}

impl<'t, 'a> ItemsIter<'t, 'a> {
    pub(crate) fn new(ty: &'t DataType, v: &'a [u8]) -> Self {
        let mut it = ItemsIter {
            ty,
            buf: v,
            remaining: None,
            index: 0,
            failed: false,
        };
        if ty.components().is_none() {
            let per_item = if matches!(ty, DataType::Map { .. }) { 2 } else { 1 };
            match it.buf.split_first_chunk::<4>() {
                Some((count, rest)) => {
                    let count = i32::from_be_bytes(*count);
                    it.buf = rest;
                    match usize::try_from(count) {
                        Ok(n) if n <= COLLECTION_ELEMENTS_MAX => it.remaining = Some(n * per_item),
                        _ => it.failed = true,
                    }
                }
                None => it.failed = true,
            }
        }
        it
    }

    fn item_type(&self) -> Option<&'t DataType> {
        match self.ty {
            DataType::List { element, .. } | DataType::Set { element, .. } => Some(element),
            DataType::Map { key, value, .. } => Some(if self.index & 1 == 0 { key } else { value }),
            DataType::Tuple(_) | DataType::Udt { .. } => self.ty.components()?.get(self.index),
            _ => None,
        }
    }
}

impl<'t, 'a> Iterator for ItemsIter<'t, 'a> {
    type Item = (&'t DataType, Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.remaining {
            Some(0) => {
                if !self.buf.is_empty() {
                    self.failed = true;
                }
                return None;
            }
            None if self.buf.is_empty() => return None,
            _ => {}
        }
        let Some(ty) = self.item_type() else {
            self.failed = true;
            return None;
        };
        let Ok(item) = read_component(&mut self.buf) else {
            self.failed = true;
            return None;
        };
        self.index += 1;
        if let Some(n) = self.remaining.as_mut() {
            *n -= 1;
        }
        Some((ty, item))
    }
}

fn write_escaped(v: &[u8], out: &mut Vec<u8>) {
    for &b in v {
        if b == 0 {
            out.extend_from_slice(&[ESCAPE, ESCAPED_ZERO]);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&[ESCAPE, ESCAPED_END]);
}

fn write_len(len: usize, out: &mut Vec<u8>) {
    let len = u32::try_from(len).unwrap_or_else(|_| panic!("value of {len} bytes is beyond any frame"));
    out.extend_from_slice(&len.to_be_bytes());
}

fn encode_ascending(ty: &DataType, v: &[u8], out: &mut Vec<u8>) {
    match ty {
        DataType::Ascii
        | DataType::Text
        | DataType::Blob
        | DataType::Inet
        | DataType::Duration
        | DataType::Custom(_) => write_escaped(v, out),
        DataType::Float | DataType::Double => {
            let (class, bits) = float_key(ty, v);
            out.push(class);
            let width = fixed_width(ty);
            match class {
                FLOAT_NUMBER | FLOAT_NAN => out.extend_from_slice(&bits.to_be_bytes()[8 - width..]),
                FLOAT_MALFORMED => write_escaped(v, out),
                _ => {}
            }
        }
        DataType::Uuid | DataType::Timeuuid => {
            let (class, key) = uuid_key(ty, v);
            out.push(class);
            match class {
                CLASS_VALID if matches!(ty, DataType::Timeuuid) => out.extend_from_slice(&key[..16]),
                CLASS_VALID => out.extend_from_slice(&key),
                CLASS_MALFORMED => write_escaped(v, out),
                _ => {}
            }
        }
        DataType::Boolean
        | DataType::TinyInt
        | DataType::SmallInt
        | DataType::Int
        | DataType::BigInt
        | DataType::Counter
        | DataType::Timestamp
        | DataType::Date
        | DataType::Time => {
            let class = fixed_class(v, fixed_width(ty));
            out.push(class);
            match class {
                CLASS_VALID => {
                    let start = out.len();
                    out.extend_from_slice(v);
                    if !matches!(ty, DataType::Boolean | DataType::Date | DataType::Time) {
                        out[start] ^= 0x80;
                    }
                }
                CLASS_MALFORMED => write_escaped(v, out),
                _ => {}
            }
        }
        DataType::Varint => {
            if v.is_empty() {
                out.push(CLASS_EMPTY);
                return;
            }
            let sm = bignum::to_sign_magnitude(v);
            write_integer_class(&sm, out);
            write_len(v.len(), out);
        }
        DataType::Decimal => encode_decimal(v, out),
        DataType::List { .. }
        | DataType::Set { .. }
        | DataType::Map { .. }
        | DataType::Tuple(_)
        | DataType::Udt { .. } => {
            let class = nested_class(ty, v);
            out.push(class);
            match class {
                CLASS_VALID => {
                    for (item_ty, item) in ItemsIter::new(ty, v) {
                        match item {
                            None => out.push(ITEM_NULL),
                            Some(item) => {
                                out.push(ITEM_PRESENT);
                                encode_ascending(item_ty, item, out);
                            }
                        }
                    }
                    out.push(ITEM_END);
                }
                CLASS_MALFORMED => write_escaped(v, out),
                _ => {}
            }
        }
    }
}

/// Sign class, then the magnitude's length and bytes, inverted for negatives.
fn write_integer_class(sm: &bignum::SignMagnitude, out: &mut Vec<u8>) {
    if sm.magnitude.is_empty() {
        out.push(NUMBER_ZERO);
        return;
    }
    let start = out.len();
    out.push(NUMBER_POSITIVE);
    write_len(sm.magnitude.len(), out);
    out.extend_from_slice(&sm.magnitude);
    if sm.negative {
        out[start] = NUMBER_NEGATIVE;
        out[start + 1..].iter_mut().for_each(|b| *b = !*b);
    }
}

fn encode_decimal(v: &[u8], out: &mut Vec<u8>) {
    if v.is_empty() {
        out.push(CLASS_EMPTY);
        return;
    }
    let Some((scale, unscaled)) = v.split_first_chunk::<4>() else {
        out.push(DECIMAL_MALFORMED);
        write_escaped(v, out);
        return;
    };
    let scale = i32::from_be_bytes(*scale);
    let sm = bignum::to_sign_magnitude(unscaled);
    if sm.magnitude.is_empty() {
        out.push(NUMBER_ZERO);
    } else {
        let digits = bignum::magnitude_to_digits(&sm.magnitude);
        let significant = digits.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
        // value = 0.d1d2... × 10^exponent, with d1 ≠ 0.
        let exponent = digits.len() as i64 - i64::from(scale);
        let start = out.len();
        out.push(NUMBER_POSITIVE);
        out.extend_from_slice(&((exponent as u64) ^ (1 << 63)).to_be_bytes());
        out.extend(digits[..significant].iter().map(|d| d - b'0' + 1));
        out.push(ITEM_END);
        if sm.negative {
            out[start] = NUMBER_NEGATIVE;
            out[start + 1..].iter_mut().for_each(|b| *b = !*b);
        }
    }
    out.extend_from_slice(&((scale as u32) ^ (1 << 31)).to_be_bytes());
    write_len(unscaled.len(), out);
}

/// A cursor over a key that undoes the DESC inversion as it reads.
struct Reader<'r, 'a> {
    input: &'r mut &'a [u8],
    mask: u8,
}

fn corrupt(reason: &'static str) -> ValueError {
    ValueError::CorruptOrderKey { reason }
}

impl Reader<'_, '_> {
    fn byte(&mut self) -> Result<u8, ValueError> {
        let (&b, rest) = self.input.split_first().ok_or(corrupt("key ends early"))?;
        *self.input = rest;
        Ok(b ^ self.mask)
    }

    fn bytes_into(&mut self, n: usize, out: &mut Vec<u8>) -> Result<(), ValueError> {
        if self.input.len() < n {
            return Err(corrupt("key ends early"));
        }
        let (head, rest) = self.input.split_at(n);
        out.extend(head.iter().map(|b| b ^ self.mask));
        *self.input = rest;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ValueError> {
        let mut out = [0u8; N];
        for b in out.iter_mut() {
            *b = self.byte()?;
        }
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, ValueError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn escaped_into(&mut self, out: &mut Vec<u8>) -> Result<(), ValueError> {
        loop {
            match self.byte()? {
                ESCAPE => match self.byte()? {
                    ESCAPED_ZERO => out.push(0),
                    ESCAPED_END => return Ok(()),
                    _ => return Err(corrupt("bad escape in a byte string")),
                },
                b => out.push(b),
            }
        }
    }
}

fn decode_ascending(ty: &DataType, r: &mut Reader<'_, '_>, out: &mut Vec<u8>) -> Result<(), ValueError> {
    match ty {
        DataType::Ascii
        | DataType::Text
        | DataType::Blob
        | DataType::Inet
        | DataType::Duration
        | DataType::Custom(_) => r.escaped_into(out),
        DataType::Float | DataType::Double => {
            let width = fixed_width(ty);
            match r.byte()? {
                CLASS_EMPTY => Ok(()),
                FLOAT_NAN => r.bytes_into(width, out),
                FLOAT_NUMBER => {
                    let start = out.len();
                    r.bytes_into(width, out)?;
                    if out[start] & 0x80 != 0 {
                        out[start] ^= 0x80;
                    } else {
                        out[start..].iter_mut().for_each(|b| *b = !*b);
                    }
                    Ok(())
                }
                FLOAT_MALFORMED => r.escaped_into(out),
                _ => Err(corrupt("unknown float class")),
            }
        }
        DataType::Uuid | DataType::Timeuuid => match r.byte()? {
            CLASS_EMPTY => Ok(()),
            CLASS_VALID => {
                let mut key = [0u8; 17];
                let len = if matches!(ty, DataType::Timeuuid) { 16 } else { 17 };
                for k in key[..len].iter_mut() {
                    *k = r.byte()?;
                }
                out.extend_from_slice(&uuid_from_key(ty, &key));
                Ok(())
            }
            CLASS_MALFORMED => r.escaped_into(out),
            _ => Err(corrupt("unknown uuid class")),
        },
        DataType::Boolean
        | DataType::TinyInt
        | DataType::SmallInt
        | DataType::Int
        | DataType::BigInt
        | DataType::Counter
        | DataType::Timestamp
        | DataType::Date
        | DataType::Time => match r.byte()? {
            CLASS_EMPTY => Ok(()),
            CLASS_VALID => {
                let start = out.len();
                r.bytes_into(fixed_width(ty), out)?;
                if !matches!(ty, DataType::Boolean | DataType::Date | DataType::Time) {
                    out[start] ^= 0x80;
                }
                Ok(())
            }
            CLASS_MALFORMED => r.escaped_into(out),
            _ => Err(corrupt("unknown fixed-width class")),
        },
        DataType::Varint => {
            let class = r.byte()?;
            if class == CLASS_EMPTY {
                return Ok(());
            }
            let (negative, magnitude) = read_integer_class(class, r)?;
            let len = bounded_len(r.u32()?)?;
            let mut twos = Vec::new();
            bignum::write_twos(negative, &magnitude, &mut twos);
            extend_to(&twos, len, out)
        }
        DataType::Decimal => decode_decimal(r, out),
        DataType::List { .. }
        | DataType::Set { .. }
        | DataType::Map { .. }
        | DataType::Tuple(_)
        | DataType::Udt { .. } => decode_nested(ty, r, out),
    }
}

/// A varint's or unscaled decimal's length read from a key, within [`ORDERED_VALUE_MAX_BYTES`].
fn bounded_len(len: u32) -> Result<usize, ValueError> {
    let len = len as usize;
    if len > ORDERED_VALUE_MAX_BYTES {
        return Err(corrupt("number longer than any ordered value"));
    }
    Ok(len)
}

/// Appends `twos` sign-extended to `len` bytes, refusing a length shorter than the number.
fn extend_to(twos: &[u8], len: usize, out: &mut Vec<u8>) -> Result<(), ValueError> {
    let is_zero = twos.iter().all(|&b| b == 0);
    if len < bignum::minimal_len(twos) && !(is_zero && len == 0) {
        return Err(corrupt("integer length shorter than its value"));
    }
    bignum::write_sign_extended(twos, len, out);
    Ok(())
}

fn read_integer_class(class: u8, r: &mut Reader<'_, '_>) -> Result<(bool, Vec<u8>), ValueError> {
    let invert = match class {
        NUMBER_ZERO => return Ok((false, Vec::new())),
        NUMBER_POSITIVE => 0x00,
        NUMBER_NEGATIVE => 0xFF,
        _ => return Err(corrupt("unknown integer class")),
    };
    let len = (r.u32()? ^ if invert == 0 { 0 } else { u32::MAX }) as usize;
    if len > r.input.len() {
        return Err(corrupt("key ends early"));
    }
    let mut magnitude = Vec::with_capacity(len);
    r.bytes_into(len, &mut magnitude)?;
    magnitude.iter_mut().for_each(|b| *b ^= invert);
    Ok((invert != 0, magnitude))
}

fn decode_decimal(r: &mut Reader<'_, '_>, out: &mut Vec<u8>) -> Result<(), ValueError> {
    let class = r.byte()?;
    let (negative, exponent, digits) = match class {
        CLASS_EMPTY => return Ok(()),
        DECIMAL_MALFORMED => return r.escaped_into(out),
        NUMBER_ZERO => (false, 0, Vec::new()),
        NUMBER_POSITIVE | NUMBER_NEGATIVE => {
            let invert = if class == NUMBER_NEGATIVE { 0xFF } else { 0x00 };
            let e: [u8; 8] = r.array()?;
            let exponent = (u64::from_be_bytes(e.map(|b| b ^ invert)) ^ (1 << 63)) as i64;
            let mut digits = Vec::new();
            loop {
                match r.byte()? ^ invert {
                    ITEM_END => break,
                    d @ 1..=10 => digits.push(b'0' + d - 1),
                    _ => return Err(corrupt("bad decimal digit")),
                }
            }
            (class == NUMBER_NEGATIVE, exponent, digits)
        }
        _ => return Err(corrupt("unknown decimal class")),
    };
    let scale = (r.u32()? ^ (1 << 31)) as i32;
    let len = bounded_len(r.u32()?)?;
    out.extend_from_slice(&scale.to_be_bytes());
    if digits.is_empty() {
        return extend_to(&[0], len, out);
    }
    // unscaled = digits × 10^zeros, where value = 0.digits × 10^exponent = unscaled × 10^-scale.
    // A damaged key can hold any exponent, so the arithmetic is checked.
    let zeros = exponent
        .checked_sub(digits.len() as i64)
        .and_then(|z| z.checked_add(i64::from(scale)))
        .and_then(|z| usize::try_from(z).ok())
        .ok_or(corrupt("decimal exponent does not match its scale"))?;
    // A number of `len` bytes has fewer than 2.5 decimal digits per byte, plus one.
    let digits_max = len.saturating_mul(5) / 2 + 1;
    if digits.len().saturating_add(zeros) > digits_max {
        return Err(corrupt("decimal digits beyond its length"));
    }
    let mut all = digits;
    all.resize(all.len() + zeros, b'0');
    let mut twos = Vec::new();
    bignum::write_twos(negative, &bignum::digits_to_magnitude(&all), &mut twos);
    extend_to(&twos, len, out)
}

fn decode_nested(ty: &DataType, r: &mut Reader<'_, '_>, out: &mut Vec<u8>) -> Result<(), ValueError> {
    match r.byte()? {
        CLASS_EMPTY if ty.components().is_none() => return Ok(()),
        CLASS_MALFORMED => return r.escaped_into(out),
        CLASS_VALID => {}
        _ => return Err(corrupt("unknown collection class")),
    }
    let is_tuple = ty.components().is_some();
    let count_at = out.len();
    if !is_tuple {
        out.extend_from_slice(&[0; 4]);
    }
    let mut index = 0usize;
    loop {
        let item_ty = match ty {
            DataType::List { element, .. } | DataType::Set { element, .. } => element,
            DataType::Map { key, value, .. } => {
                if index & 1 == 0 {
                    key
                } else {
                    value
                }
            }
            DataType::Tuple(_) | DataType::Udt { .. } => match ty.components().and_then(|t| t.get(index)) {
                Some(t) => t,
                // Only the end marker may follow the last component.
                None => &DataType::Blob,
            },
            _ => return Err(corrupt("not a collection")),
        };
        match r.byte()? {
            ITEM_END => break,
            _ if is_tuple && index >= tuple_arity(ty) => return Err(corrupt("too many tuple components")),
            ITEM_NULL => out.extend_from_slice(&(-1i32).to_be_bytes()),
            ITEM_PRESENT => {
                let len_at = out.len();
                out.extend_from_slice(&[0; 4]);
                decode_ascending(item_ty, r, out)?;
                let len = i32::try_from(out.len() - len_at - 4).map_err(|_| corrupt("element too long"))?;
                out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
            }
            _ => return Err(corrupt("unknown element marker")),
        }
        index += 1;
    }
    if !is_tuple {
        let pairs = matches!(ty, DataType::Map { .. });
        if pairs && index & 1 != 0 {
            return Err(corrupt("map key without a value"));
        }
        let count = if pairs { index / 2 } else { index };
        let count = i32::try_from(count).map_err(|_| corrupt("too many elements"))?;
        out[count_at..count_at + 4].copy_from_slice(&count.to_be_bytes());
    }
    Ok(())
}

fn tuple_arity(ty: &DataType) -> usize {
    ty.components().map_or(0, <[DataType]>::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::codec::{encode_list, encode_tuple, varint_of};
    use crate::value::compare::compare;
    use std::cmp::Ordering;

    /// A small deterministic generator, so a failure names a seed that reproduces it.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn bytes(&mut self, len: usize) -> Vec<u8> {
            // Few distinct bytes, zeros and 0xFF often, so ties and escapes are common.
            const ALPHABET: [u8; 6] = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF];
            (0..len)
                .map(|_| {
                    if self.below(2) == 0 {
                        ALPHABET[self.below(6) as usize]
                    } else {
                        self.next() as u8
                    }
                })
                .collect()
        }
    }

    fn ty(text: &str) -> DataType {
        DataType::parse(text).expect("test type parses")
    }

    /// A random value of `ty`: mostly valid, sometimes empty, sometimes malformed.
    fn random_value(ty: &DataType, rng: &mut Rng, depth: usize) -> Vec<u8> {
        if rng.below(20) == 0 {
            return Vec::new();
        }
        if rng.below(30) == 0 && depth == 0 {
            let len = rng.below(6) as usize;
            return rng.bytes(len);
        }
        let width = fixed_width(ty);
        match ty {
            DataType::Float if rng.below(5) == 0 => {
                let specials = [
                    f32::NAN,
                    -0.0,
                    0.0,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::MIN_POSITIVE,
                ];
                specials[rng.below(6) as usize].to_be_bytes().to_vec()
            }
            DataType::Double if rng.below(5) == 0 => {
                let specials = [f64::NAN, -0.0, 0.0, f64::INFINITY, -f64::NAN, f64::MAX];
                specials[rng.below(6) as usize].to_be_bytes().to_vec()
            }
            DataType::Uuid | DataType::Timeuuid => {
                let mut u = rng.bytes(16);
                let version = if matches!(ty, DataType::Timeuuid) || rng.below(2) == 0 {
                    1
                } else {
                    rng.below(16) as u8
                };
                u[6] = (u[6] & 0x0F) | (version << 4);
                u
            }
            _ if width > 0 => rng.bytes(width),
            DataType::Varint => {
                let len = 1 + rng.below(4) as usize;
                rng.bytes(len)
            }
            DataType::Decimal => {
                let mut out = (rng.below(7) as i32 - 3).to_be_bytes().to_vec();
                if rng.below(8) == 0 {
                    out = rng.bytes(4);
                }
                let len = rng.below(4) as usize;
                out.extend(rng.bytes(len));
                out
            }
            DataType::List { element, .. } | DataType::Set { element, .. } => {
                let n = rng.below(4);
                let items: Vec<_> = (0..n).map(|_| random_value(element, rng, depth + 1)).collect();
                let mut out = Vec::new();
                encode_list(items, &mut out);
                out
            }
            DataType::Map { key, value, .. } => {
                let n = rng.below(3) as usize;
                let mut out = (n as i32).to_be_bytes().to_vec();
                for _ in 0..n {
                    for t in [key, value] {
                        let v = random_value(t, rng, depth + 1);
                        out.extend((v.len() as i32).to_be_bytes());
                        out.extend(v);
                    }
                }
                out
            }
            DataType::Tuple(types) => {
                let n = rng.below(types.len() as u64 + 1) as usize;
                let mut out = Vec::new();
                let components = types[..n]
                    .iter()
                    .map(|t| (rng.below(4) != 0).then(|| random_value(t, rng, depth + 1)));
                let components: Vec<_> = components.collect();
                encode_tuple(components, &mut out);
                out
            }
            _ => {
                let len = rng.below(5) as usize;
                rng.bytes(len)
            }
        }
    }

    fn all_types() -> Vec<DataType> {
        [
            "ascii",
            "text",
            "blob",
            "boolean",
            "tinyint",
            "smallint",
            "int",
            "bigint",
            "varint",
            "float",
            "double",
            "decimal",
            "timestamp",
            "date",
            "time",
            "uuid",
            "timeuuid",
            "inet",
            "duration",
            "counter",
            "frozen<list<int>>",
            "frozen<set<text>>",
            "frozen<map<int, blob>>",
            "tuple<int, text, double>",
            "frozen<list<frozen<list<varint>>>>",
            "tuple<decimal, frozen<map<timeuuid, boolean>>>",
        ]
        .iter()
        .map(|t| ty(t))
        .collect()
    }

    fn key(ty: &DataType, v: &[u8], desc: bool) -> Vec<u8> {
        let mut out = Vec::new();
        encode_order_key(ty, v, desc, &mut out);
        out
    }

    fn round_trip(ty: &DataType, v: &[u8], desc: bool) {
        let k = key(ty, v, desc);
        let mut input = k.as_slice();
        let mut out = Vec::new();
        decode_order_key(ty, desc, &mut input, &mut out).unwrap_or_else(|e| panic!("{ty} {v:02x?}: {e}"));
        assert_eq!(out, v, "{ty} desc={desc} key {k:02x?}");
        assert!(input.is_empty(), "{ty}: key not fully consumed");
    }

    #[test]
    fn memcmp_of_keys_is_compare_for_every_type_and_direction() {
        for (seed, ty) in all_types().iter().enumerate() {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1));
            let values: Vec<Vec<u8>> = (0..120).map(|_| random_value(ty, &mut rng, 0)).collect();
            for a in &values {
                round_trip(ty, a, false);
                round_trip(ty, a, true);
                for b in &values {
                    let expected = compare(ty, a, b);
                    assert_eq!(
                        compare(ty, b, a),
                        expected.reverse(),
                        "{ty}: compare is antisymmetric"
                    );
                    assert_eq!(
                        key(ty, a, false).cmp(&key(ty, b, false)),
                        expected,
                        "{ty}: {a:02x?} vs {b:02x?}"
                    );
                    assert_eq!(
                        key(ty, a, true).cmp(&key(ty, b, true)),
                        expected.reverse(),
                        "{ty} desc"
                    );
                    if expected.is_eq() {
                        assert_eq!(a, b, "{ty}: equal in order means identical bytes");
                    }
                }
            }
        }
    }

    #[test]
    fn two_column_concatenations_sort_column_by_column() {
        let types = all_types();
        let mut rng = Rng(42);
        for _ in 0..200 {
            let t1 = &types[rng.below(types.len() as u64) as usize];
            let t2 = &types[rng.below(types.len() as u64) as usize];
            let (d1, d2) = (rng.below(2) == 0, rng.below(2) == 0);
            let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..12)
                .map(|_| (random_value(t1, &mut rng, 0), random_value(t2, &mut rng, 0)))
                .collect();
            let concat = |(a, b): &(Vec<u8>, Vec<u8>)| {
                let mut k = key(t1, a, d1);
                encode_order_key(t2, b, d2, &mut k);
                k
            };
            let dir = |o: Ordering, desc: bool| if desc { o.reverse() } else { o };
            for x in &rows {
                let kx = concat(x);
                let mut input = kx.as_slice();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                decode_order_key(t1, d1, &mut input, &mut a).expect("first column decodes");
                decode_order_key(t2, d2, &mut input, &mut b).expect("second column decodes");
                assert_eq!((&a, &b), (&x.0, &x.1));
                assert!(input.is_empty());
                // A one-column prefix sorts before every row that starts with it.
                let prefix = key(t1, &x.0, d1);
                assert!(prefix < kx);
                for y in &rows {
                    let expected = dir(compare(t1, &x.0, &y.0), d1).then(dir(compare(t2, &x.1, &y.1), d2));
                    assert_eq!(kx.cmp(&concat(y)), expected, "{t1} {d1} / {t2} {d2}");
                }
            }
        }
    }

    #[test]
    fn keys_of_known_values() {
        // Text: zero bytes escaped, then the terminator.
        assert_eq!(
            key(&DataType::Text, b"a\0", false),
            [0x61, 0x00, 0xFF, 0x00, 0x01]
        );
        assert_eq!(
            key(&DataType::Int, &1i32.to_be_bytes(), false),
            [0x01, 0x80, 0, 0, 1]
        );
        assert_eq!(key(&DataType::Int, &[], false), [0x00]);
        assert_eq!(key(&DataType::Int, &[], true), [0xFF]);
        // Redundant sign bytes survive the round trip.
        round_trip(&DataType::Varint, &[0x00, 0x00, 0x05], false);
        round_trip(&DataType::Varint, &[0xFF, 0xFF], true);
        let mut dec = 5i32.to_be_bytes().to_vec();
        dec.extend(varint_of(-1_000_000_000_000_000_000));
        round_trip(&DataType::Decimal, &dec, false);
        round_trip(&DataType::Decimal, &[0, 0, 0, 0], true);
    }

    #[test]
    fn corrupt_keys_are_errors_not_panics() {
        // Regression guard (found by the frame_decode fuzz target): a positive decimal whose
        // exponent is i64::MAX overflowed the exponent arithmetic.
        let mut huge = vec![NUMBER_POSITIVE];
        huge.extend([0xFF; 8]);
        huge.extend([0x02, ITEM_END, 0x80, 0, 0, 0, 0, 0, 0, 4]);
        let mut input = huge.as_slice();
        assert!(decode_order_key(&DataType::Decimal, false, &mut input, &mut Vec::new()).is_err());
        let mut rng = Rng(7);
        for ty in all_types() {
            for _ in 0..300 {
                let len = rng.below(24) as usize;
                let junk = rng.bytes(len);
                let mut input = junk.as_slice();
                let mut out = Vec::new();
                let _ = decode_order_key(&ty, rng.below(2) == 0, &mut input, &mut out);
            }
        }
    }
}
