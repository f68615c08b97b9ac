//! Values rendered as CQL literals, the way `DESCRIBE` writes them in a CREATE statement:
//! `'it''s'`, `0xcafe`, `{'a': 1}`, `(1, null)`. Every rendering parses back, through the
//! statement parser and [`super::literal_to_bytes`], to the same value.

use std::fmt::Write;

use super::bignum;
use super::codec::{Value, NANOS_PER_DAY};
use super::convert::{civil_from_days, DATE_EPOCH};
use super::types::DataType;

/// Renders a serialized value of `ty` as a CQL literal. Bytes that are not a valid value of
/// the type are shown as a blob literal, so that DESCRIBE never fails.
pub fn to_cql_literal(ty: &DataType, bytes: &[u8]) -> String {
    let mut out = String::new();
    match Value::decode(ty, bytes) {
        Ok(value) => write_value(&value, &mut out),
        Err(_) => write_hex(bytes, &mut out),
    }
    out
}

fn write_hex(bytes: &[u8], out: &mut String) {
    out.push_str("0x");
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

fn write_quoted(s: &str, out: &mut String) {
    out.push('\'');
    out.push_str(&s.replace('\'', "''"));
    out.push('\'');
}

fn write_float(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        // Debug keeps a ".0" or an exponent, so the text stays a float literal.
        let _ = write!(out, "{v:?}");
    }
}

pub(super) fn write_uuid(u: &[u8; 16], out: &mut String) {
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{b:02x}");
    }
}

/// A decimal as Java's `BigDecimal.toString` writes it: plain when the scale is not negative
/// and the number is not tiny, otherwise scientific with an `E`.
pub(super) fn write_decimal(scale: i32, unscaled: &[u8], out: &mut String) {
    let sm = bignum::to_sign_magnitude(unscaled);
    let digits = bignum::magnitude_to_digits(&sm.magnitude);
    let digits = String::from_utf8_lossy(&digits);
    if sm.negative {
        out.push('-');
    }
    let adjusted = digits.len() as i64 - 1 - i64::from(scale);
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            out.push_str(&digits);
        } else if digits.len() > scale {
            let (int, frac) = digits.split_at(digits.len() - scale);
            let _ = write!(out, "{int}.{frac}");
        } else {
            let _ = write!(out, "0.{}{digits}", "0".repeat(scale - digits.len()));
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            let _ = write!(out, ".{rest}");
        }
        let _ = write!(out, "E{}{adjusted}", if adjusted >= 0 { "+" } else { "" });
    }
}

/// Cassandra's own duration notation: `1y2mo3d4h5m6s7ms8us9ns`, a leading `-` if negative.
pub(super) fn write_duration(months: i32, days: i32, nanos: i64, out: &mut String) {
    if months < 0 || days < 0 || nanos < 0 {
        out.push('-');
    }
    let (months, days, mut nanos) = (months.unsigned_abs(), days.unsigned_abs(), nanos.unsigned_abs());
    let start = out.len();
    let part = |n: u64, unit: &str, out: &mut String| {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    };
    part(u64::from(months / 12), "y", out);
    part(u64::from(months % 12), "mo", out);
    part(u64::from(days), "d", out);
    for (unit, per) in [
        ("h", 3_600_000_000_000u64),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        part(nanos / per, unit, out);
        nanos %= per;
    }
    if out.len() == start {
        out.push_str("0s");
    }
}

fn write_date(days: u32, out: &mut String) {
    let (y, m, d) = civil_from_days(i64::from(days) - DATE_EPOCH);
    let _ = write!(out, "'{y:04}-{m:02}-{d:02}'");
}

fn write_timestamp(ms: i64, out: &mut String) {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let _ = write!(out, "'{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z'");
}

fn write_time(nanos: i64, out: &mut String) {
    debug_assert!((0..NANOS_PER_DAY).contains(&nanos));
    let secs = nanos / 1_000_000_000;
    let _ = write!(
        out,
        "'{:02}:{:02}:{:02}.{:09}'",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        nanos % 1_000_000_000
    );
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        // Cassandra has no literal for an empty non-text value; null is the closest text.
        Value::Empty => out.push_str("null"),
        Value::Ascii(s) | Value::Text(s) => write_quoted(s, out),
        Value::Blob(b) => write_hex(b, out),
        Value::Boolean(b) => {
            let _ = write!(out, "{b}");
        }
        Value::TinyInt(v) => {
            let _ = write!(out, "{v}");
        }
        Value::SmallInt(v) => {
            let _ = write!(out, "{v}");
        }
        Value::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Value::BigInt(v) | Value::Counter(v) => {
            let _ = write!(out, "{v}");
        }
        Value::Varint(b) => out.push_str(&bignum::twos_to_string(b)),
        Value::Float(v) => write_float(f64::from(*v), out),
        Value::Double(v) => write_float(*v, out),
        Value::Decimal { scale, unscaled } => write_decimal(*scale, unscaled, out),
        Value::Timestamp(ms) => write_timestamp(*ms, out),
        Value::Date(days) => write_date(*days, out),
        Value::Time(nanos) => write_time(*nanos, out),
        Value::Uuid(u) | Value::Timeuuid(u) => write_uuid(u, out),
        Value::Inet(ip) => write_quoted(&ip.to_string(), out),
        Value::Duration { months, days, nanos } => write_duration(*months, *days, *nanos, out),
        Value::List(items) | Value::Set(items) => {
            let (open, close) = if matches!(value, Value::List(_)) {
                ('[', ']')
            } else {
                ('{', '}')
            };
            out.push(open);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(item, out);
            }
            out.push(close);
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(k, out);
                out.push_str(": ");
                write_value(v, out);
            }
            out.push('}');
        }
        Value::Tuple(components) => {
            out.push('(');
            for (i, c) in components.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match c {
                    Some(v) => write_value(v, out),
                    None => out.push_str("null"),
                }
            }
            out.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{literal_to_bytes, Literal};

    fn lit(t: &str, l: Literal) -> String {
        let ty = DataType::parse(t).expect("type");
        let mut bytes = Vec::new();
        literal_to_bytes(&ty, &l, &mut bytes).expect("literal converts");
        to_cql_literal(&ty, &bytes)
    }

    #[test]
    fn scalars_render_as_cql_literals() {
        assert_eq!(lit("text", Literal::Str("it's".into())), "'it''s'");
        assert_eq!(lit("blob", Literal::Hex(vec![0xCA, 0xFE])), "0xcafe");
        assert_eq!(lit("int", Literal::Int("-7".into())), "-7");
        assert_eq!(lit("double", Literal::Float("1.5".into())), "1.5");
        assert_eq!(lit("double", Literal::Int("2".into())), "2.0");
        assert_eq!(lit("float", Literal::Float("-Infinity".into())), "-Infinity");
        assert_eq!(
            lit("varint", Literal::Int("-123456789012345678901234567890".into())),
            "-123456789012345678901234567890"
        );
        assert_eq!(lit("decimal", Literal::Float("-1.50".into())), "-1.50");
        assert_eq!(lit("decimal", Literal::Float("1e3".into())), "1E+3");
        assert_eq!(lit("decimal", Literal::Float("0.0001".into())), "0.0001");
        assert_eq!(lit("decimal", Literal::Float("1e-9".into())), "1E-9");
        assert_eq!(
            lit("timestamp", Literal::Str("2011-02-03 04:05+0000".into())),
            "'2011-02-03T04:05:00.000Z'"
        );
        assert_eq!(
            lit("timestamp", Literal::Int("-1".into())),
            "'1969-12-31T23:59:59.999Z'"
        );
        assert_eq!(lit("date", Literal::Str("2000-02-29".into())), "'2000-02-29'");
        assert_eq!(
            lit("time", Literal::Str("01:02:03.5".into())),
            "'01:02:03.500000000'"
        );
        let u = "123e4567-e89b-12d3-a456-426614174000";
        assert_eq!(lit("timeuuid", Literal::Uuid(u.into())), u);
        assert_eq!(lit("inet", Literal::Str("::1".into())), "'::1'");
        assert_eq!(lit("duration", Literal::Str("P1Y2M3DT4H".into())), "1y2mo3d4h");
        assert_eq!(lit("duration", Literal::Str("-90m".into())), "-1h30m");
        assert_eq!(lit("boolean", Literal::Bool(true)), "true");
    }

    #[test]
    fn collections_and_tuples_render_nested() {
        let ty = DataType::parse("map<text, frozen<list<int>>>").expect("type");
        let value = Value::Map(vec![(
            Value::Text("a".into()),
            Value::List(vec![Value::Int(1), Value::Int(2)]),
        )]);
        assert_eq!(to_cql_literal(&ty, &value.to_bytes()), "{'a': [1, 2]}");
        let ty = DataType::parse("tuple<int, text>").expect("type");
        let value = Value::Tuple(vec![Some(Value::Int(1)), None]);
        assert_eq!(to_cql_literal(&ty, &value.to_bytes()), "(1, null)");
        assert_eq!(to_cql_literal(&DataType::Int, &[1, 2, 3]), "0x010203");
    }
}
