//! Cassandra's order for each type, on serialized values.
//!
//! This is the order of clustering rows, of set elements and of map keys. It follows
//! Cassandra's `AbstractType` comparators: signed integers, `Float.compare` for float and
//! double (-0.0 before 0.0, NaN after +Infinity), unsigned bytes for ascii, text, blob, inet,
//! date, time and duration, numeric order for varint and decimal, timeuuid by timestamp and then
//! its low bytes as *signed* bytes, uuid by version, then (version 1) timestamp, then unsigned
//! bytes, and frozen collections and tuples element by element, a prefix first. An empty value
//! sorts before every other value of its type.
//!
//! Where Cassandra calls two different byte strings equal, we still order them, because the
//! storage engine keys rows by [`super::order`] keys, which must round-trip the exact bytes:
//! NaNs with different bit patterns, decimals equal in value but not in scale (1.0 and 1.00,
//! lower scale first) and varints with redundant sign bytes (shorter first). Values that are
//! not well formed for the type (which [`super::validate`] refuses) sort after all valid ones,
//! by their bytes, so that this is a total order on any input.

use std::cmp::Ordering;

use super::order::{self, ItemsIter};
use super::types::DataType;

/// Compares two serialized values of `ty` in Cassandra's order (see the module comment).
pub fn compare(ty: &DataType, a: &[u8], b: &[u8]) -> Ordering {
    match ty {
        DataType::Ascii
        | DataType::Text
        | DataType::Blob
        | DataType::Custom(_)
        | DataType::Inet
        | DataType::Duration
        | DataType::Date
        | DataType::Time
        | DataType::Boolean
            if is_byte_ordered(ty, a) && is_byte_ordered(ty, b) =>
        {
            a.cmp(b)
        }
        DataType::TinyInt
        | DataType::SmallInt
        | DataType::Int
        | DataType::BigInt
        | DataType::Counter
        | DataType::Timestamp => {
            let width = order::fixed_width(ty);
            let (ca, cb) = (order::fixed_class(a, width), order::fixed_class(b, width));
            ca.cmp(&cb).then_with(|| match ca {
                order::CLASS_VALID => signed(a).cmp(&signed(b)),
                _ => a.cmp(b),
            })
        }
        DataType::Float | DataType::Double => {
            let (ka, kb) = (order::float_key(ty, a), order::float_key(ty, b));
            ka.cmp(&kb).then_with(|| a.cmp(b))
        }
        DataType::Uuid | DataType::Timeuuid => {
            let (ka, kb) = (order::uuid_key(ty, a), order::uuid_key(ty, b));
            ka.cmp(&kb).then_with(|| a.cmp(b))
        }
        DataType::Varint | DataType::Decimal => {
            let (mut ka, mut kb) = (Vec::new(), Vec::new());
            order::encode_order_key(ty, a, false, &mut ka);
            order::encode_order_key(ty, b, false, &mut kb);
            ka.cmp(&kb)
        }
        DataType::List { .. }
        | DataType::Set { .. }
        | DataType::Map { .. }
        | DataType::Tuple(_)
        | DataType::Udt { .. } => compare_nested(ty, a, b),
        // Fixed-width byte-ordered types with a malformed side: classes, then bytes.
        _ => {
            let width = order::fixed_width(ty);
            let (ca, cb) = (order::fixed_class(a, width), order::fixed_class(b, width));
            ca.cmp(&cb).then_with(|| a.cmp(b))
        }
    }
}

/// True when the plain byte order is the whole story for this value: every value of the
/// variable-length byte-ordered types, and well-formed or empty values of the fixed ones.
fn is_byte_ordered(ty: &DataType, v: &[u8]) -> bool {
    match ty {
        DataType::Date | DataType::Time | DataType::Boolean => {
            order::fixed_class(v, order::fixed_width(ty)) != order::CLASS_MALFORMED
        }
        _ => true,
    }
}

fn signed(v: &[u8]) -> i64 {
    v.iter()
        .skip(1)
        .fold(i64::from(v[0] as i8), |acc, &b| (acc << 8) | i64::from(b))
}

/// Frozen collections and tuples: well-formed values element by element, a null element before
/// a present one and a prefix before a longer value; empty (0-byte) collections first and
/// malformed values last.
fn compare_nested(ty: &DataType, a: &[u8], b: &[u8]) -> Ordering {
    let (ca, cb) = (order::nested_class(ty, a), order::nested_class(ty, b));
    if ca != cb || ca != order::CLASS_VALID {
        return ca.cmp(&cb).then_with(|| a.cmp(b));
    }
    let mut ia = ItemsIter::new(ty, a);
    let mut ib = ItemsIter::new(ty, b);
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ty, ea)), Some((_, eb))) => {
                let c = match (ea, eb) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(ea), Some(eb)) => compare(ty, ea, eb),
                };
                if c.is_ne() {
                    return c;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::codec::varint_of;

    fn ty(text: &str) -> DataType {
        DataType::parse(text).expect("test type parses")
    }

    fn assert_sorted(t: &str, values: &[Vec<u8>]) {
        let ty = ty(t);
        for (i, a) in values.iter().enumerate() {
            for (j, b) in values.iter().enumerate() {
                assert_eq!(compare(&ty, a, b), i.cmp(&j), "{t}: {a:02x?} vs {b:02x?}");
            }
        }
    }

    #[test]
    fn integers_are_signed_and_empty_sorts_first() {
        let v: Vec<Vec<u8>> = [i32::MIN, -1, 0, 1, i32::MAX]
            .iter()
            .map(|v| v.to_be_bytes().to_vec())
            .collect();
        let mut with_empty = vec![vec![]];
        with_empty.extend(v);
        assert_sorted("int", &with_empty);
        assert_sorted("tinyint", &[vec![0x80], vec![0xFF], vec![0], vec![0x7F]]);
    }

    #[test]
    fn floats_follow_java_float_compare() {
        let v: Vec<Vec<u8>> = [
            f64::NEG_INFINITY,
            -1.0,
            -0.0,
            0.0,
            1e-300,
            f64::INFINITY,
            f64::NAN,
        ]
        .iter()
        .map(|v| v.to_be_bytes().to_vec())
        .collect();
        assert_sorted("double", &v);
    }

    #[test]
    fn varints_and_decimals_sort_numerically() {
        let ints = [-(1i128 << 100), -256, -129, -1, 0, 1, 127, 128, 1 << 70];
        let v: Vec<Vec<u8>> = ints.iter().map(|&i| varint_of(i)).collect();
        assert_sorted("varint", &v);
        // -1.5, -0.15, 0, 0.0 (scale 1 after scale 0), 0.0099, 0.01, 1.0, 1.00, 12, 1.2e2
        let dec = |scale: i32, unscaled: i128| {
            let mut out = scale.to_be_bytes().to_vec();
            out.extend(varint_of(unscaled));
            out
        };
        assert_sorted(
            "decimal",
            &[
                dec(1, -15),
                dec(2, -15),
                dec(0, 0),
                dec(1, 0),
                dec(4, 99),
                dec(2, 1),
                dec(1, 10),
                dec(2, 100),
                dec(0, 12),
                dec(-1, 12),
            ],
        );
    }

    #[test]
    fn timeuuids_sort_by_timestamp_then_signed_low_bytes() {
        // Same timestamp fields rearranged: time_hi (bytes 6-7) outranks time_mid (4-5), which
        // outranks time_low (0-3).
        let base = |time_low: u8, time_mid: u8, time_hi: u8, low: u8| {
            let mut u = [0u8; 16];
            u[3] = time_low;
            u[5] = time_mid;
            u[6] = 0x10;
            u[7] = time_hi;
            u[8] = low;
            u.to_vec()
        };
        assert_sorted(
            "timeuuid",
            &[
                base(0, 0, 0, 0x80),
                base(0, 0, 0, 0x7F),
                base(9, 0, 0, 0),
                base(0, 1, 0, 0),
                base(0, 0, 1, 0),
            ],
        );
    }

    #[test]
    fn uuids_sort_by_version_first() {
        let with = |version: u8, first: u8| {
            let mut u = [0u8; 16];
            u[0] = first;
            u[6] = version << 4;
            u.to_vec()
        };
        assert_sorted("uuid", &[vec![], with(1, 0xFF), with(4, 0), with(4, 1)]);
    }

    #[test]
    fn frozen_collections_sort_element_by_element_prefix_first() {
        let list = |items: &[i32]| {
            let mut out = Vec::new();
            crate::value::encode_list(items.iter().map(|i| i.to_be_bytes()), &mut out);
            out
        };
        assert_sorted(
            "frozen<list<int>>",
            &[
                vec![],
                list(&[]),
                list(&[-5, 9]),
                list(&[1]),
                list(&[1, 0]),
                list(&[2]),
            ],
        );
    }
}
