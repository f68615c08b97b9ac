//! CQL values as JSON, both ways, as Cassandra's `toJson`, `fromJson`, `SELECT JSON` and
//! `INSERT JSON` write and read them.
//!
//! Out ([`to_json`]): text quoted; numbers bare (float and double as Java prints them, NaN and
//! the infinities as `null`, decimal as `BigDecimal.toString`); blobs as `"0x…"`; uuids, inets,
//! durations and the time types as strings in Cassandra's format (`"2011-02-03 04:05:06.789Z"`);
//! lists, sets and tuples as arrays; maps as objects whose keys are the key's JSON, quoted when
//! it is not already a string (`{"1": "one"}`, `{"[1, 2]": "a"}`).
//!
//! In ([`from_json`], [`parse_object`], [`value_from_json`]): the same forms, and strings for
//! any scalar (`"12"` for an int). The text is untrusted: it is bounded by
//! [`JSON_TEXT_MAX_BYTES`], serde_json bounds its nesting (128 levels), and a value is only
//! descended as deep as its CQL type goes. Numbers are read from their text (serde_json's
//! `RawValue`), never through a double, so varint and decimal values stay exact however long
//! they are (Cassandra, through Jackson, reads a JSON decimal as a double; hayate keeps every
//! digit).

use std::collections::BTreeMap;
use std::fmt::{self, Write};

use serde_json::value::RawValue;

use super::bignum;
use super::codec::{encode_list, encode_map, encode_set, encode_tuple, Value};
use super::convert::literal_to_bytes;
use super::literal::Literal;
use super::text::{write_decimal, write_duration, write_uuid};
use super::types::DataType;

/// The longest JSON text decoded: what one frame can carry.
pub const JSON_TEXT_MAX_BYTES: usize = crate::wire::LONG_BYTES_MAX;

/// At most this many characters of a refused JSON value are echoed in a message.
const SHOWN_MAX_CHARS: usize = 100;

/// Why JSON text is not a value of the expected type. Display reads like Cassandra's message
/// for the same mistake; the caller says which column or function it was for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON (serde_json's reason, with line and column).
    Syntax { reason: String },
    /// The text is longer than [`JSON_TEXT_MAX_BYTES`].
    TooLong { length: usize },
    /// A JSON value of the wrong kind: `expected` is Cassandra's phrase ("an int value"),
    /// `got` the Java class Jackson would have made of it ("Double").
    Mismatch {
        expected: &'static str,
        got: &'static str,
        text: String,
    },
    /// A value of the right kind that is not a value of the type ("Unable to make int from
    /// 'abc'").
    Invalid { reason: String },
    /// A null inside a list, set or map.
    NullElement { what: &'static str },
    /// A tuple with more items than its type.
    TupleTooLong { expected: usize, got: usize },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax { reason } => f.write_str(reason),
            JsonError::TooLong { length } => write!(
                f,
                "JSON text of {length} bytes is longer than the maximum of {JSON_TEXT_MAX_BYTES}"
            ),
            JsonError::Mismatch { expected, got, text } => {
                write!(f, "Expected {expected}, but got a {got}: {text}")
            }
            JsonError::Invalid { reason } => f.write_str(reason),
            JsonError::NullElement { what } => write!(f, "Invalid null element in {what}"),
            JsonError::TupleTooLong { expected, got } => {
                write!(f, "Tuple contains extra items (expected {expected}): {got} items")
            }
        }
    }
}

impl std::error::Error for JsonError {}

fn syntax(e: &serde_json::Error) -> JsonError {
    JsonError::Syntax {
        reason: e.to_string(),
    }
}

/// `text`, cut to [`SHOWN_MAX_CHARS`] characters for a message.
pub fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_MAX_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

fn check_length(text: &str) -> Result<(), JsonError> {
    if text.len() > JSON_TEXT_MAX_BYTES {
        return Err(JsonError::TooLong { length: text.len() });
    }
    Ok(())
}

/// The kinds of JSON value, told apart by their first character (serde_json has already
/// checked the text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
    String,
    Bool,
    Null,
    Number,
}

fn kind(raw: &RawValue) -> Kind {
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::Array,
        Some(b'"') => Kind::String,
        Some(b't' | b'f') => Kind::Bool,
        Some(b'n') => Kind::Null,
        _ => Kind::Number,
    }
}

/// True for a JSON number written without a fraction or an exponent.
fn is_integer(number: &str) -> bool {
    !number.contains(['.', 'e', 'E'])
}

/// The Java class Jackson makes of a JSON value, which Cassandra's messages name.
fn java_class(raw: &RawValue) -> &'static str {
    match kind(raw) {
        Kind::Object => "LinkedHashMap",
        Kind::Array => "ArrayList",
        Kind::String => "String",
        Kind::Bool => "Boolean",
        Kind::Null => "null",
        Kind::Number => {
            let n = raw.get().trim();
            if !is_integer(n) {
                "Double"
            } else if n.parse::<i32>().is_ok() {
                "Integer"
            } else if n.parse::<i64>().is_ok() {
                "Long"
            } else {
                "BigInteger"
            }
        }
    }
}

fn mismatch(expected: &'static str, raw: &RawValue) -> JsonError {
    JsonError::Mismatch {
        expected,
        got: java_class(raw),
        text: shown(raw.get().trim()),
    }
}

/// Decodes a whole JSON text as one value of `ty` (`fromJson`): `None` for JSON `null`.
pub fn from_json(ty: &DataType, text: &str) -> Result<Option<Vec<u8>>, JsonError> {
    check_length(text)?;
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| syntax(&e))?;
    value_from_json(ty, raw)
}

/// Reads the object of an `INSERT JSON`: its keys as written, each with its value's JSON.
/// Of two equal keys the last wins. `None` when the text is JSON `null`.
pub fn parse_object(text: &str) -> Result<Option<BTreeMap<String, &RawValue>>, JsonError> {
    check_length(text)?;
    serde_json::from_str(text).map_err(|e| syntax(&e))
}

/// Decodes one JSON value as a value of `ty`: `None` for JSON `null`.
pub fn value_from_json(ty: &DataType, raw: &RawValue) -> Result<Option<Vec<u8>>, JsonError> {
    if kind(raw) == Kind::Null {
        return Ok(None);
    }
    let mut out = Vec::new();
    decode(ty, raw, &mut out)?;
    Ok(Some(out))
}

fn element(ty: &DataType, raw: &RawValue, what: &'static str) -> Result<Vec<u8>, JsonError> {
    value_from_json(ty, raw)?.ok_or(JsonError::NullElement { what })
}

fn decode(ty: &DataType, raw: &RawValue, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let text = raw.get().trim();
    match ty {
        DataType::List { element: e, .. } | DataType::Set { element: e, .. } => {
            let is_set = matches!(ty, DataType::Set { .. });
            if kind(raw) != Kind::Array {
                return Err(mismatch(
                    if is_set {
                        "a list (representing a set)"
                    } else {
                        "a list"
                    },
                    raw,
                ));
            }
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| syntax(&e))?;
            let what = if is_set { "set" } else { "list" };
            let elements = items
                .into_iter()
                .map(|item| element(e, item, what))
                .collect::<Result<Vec<_>, _>>()?;
            if is_set {
                encode_set(e, elements, out);
            } else {
                encode_list(elements, out);
            }
        }
        DataType::Map { key, value, .. } => {
            if kind(raw) != Kind::Object {
                return Err(mismatch("a map", raw));
            }
            let entries: BTreeMap<String, &RawValue> = serde_json::from_str(text).map_err(|e| syntax(&e))?;
            let mut pairs = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                pairs.push((map_key(key, &k)?, element(value, v, "map")?));
            }
            encode_map(key, pairs, out);
        }
        DataType::Tuple(types) => {
            if kind(raw) != Kind::Array {
                return Err(mismatch("a list representation of a tuple", raw));
            }
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| syntax(&e))?;
            if items.len() > types.len() {
                return Err(JsonError::TupleTooLong {
                    expected: types.len(),
                    got: items.len(),
                });
            }
            let components = items
                .into_iter()
                .zip(types)
                .map(|(item, t)| value_from_json(t, item))
                .collect::<Result<Vec<_>, _>>()?;
            encode_tuple(components, out);
        }
        _ => scalar(ty, raw, out)?,
    }
    Ok(())
}

/// A map key is always a JSON string: the text itself for a text key, JSON text for a
/// collection or tuple key, and the string form of any other scalar.
fn map_key(ty: &DataType, key: &str) -> Result<Vec<u8>, JsonError> {
    let mut out = Vec::new();
    match ty {
        DataType::List { .. } | DataType::Set { .. } | DataType::Map { .. } | DataType::Tuple(_) => {
            let raw: &RawValue = serde_json::from_str(key).map_err(|e| syntax(&e))?;
            decode(ty, raw, &mut out)?;
        }
        _ => from_string(ty, key, &mut out)?,
    }
    Ok(out)
}

fn scalar(ty: &DataType, raw: &RawValue, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let text = raw.get().trim();
    match kind(raw) {
        Kind::String => {
            let s: String = serde_json::from_str(text).map_err(|e| syntax(&e))?;
            from_string(ty, &s, out)
        }
        Kind::Bool if *ty == DataType::Boolean => {
            out.push(u8::from(text == "true"));
            Ok(())
        }
        Kind::Number => from_number(ty, raw, text, out),
        _ => Err(mismatch(expected_phrase(ty), raw)),
    }
}

/// Cassandra's phrase for what a type's JSON must be.
fn expected_phrase(ty: &DataType) -> &'static str {
    match ty {
        DataType::Text => "a UTF-8 string",
        DataType::Ascii => "an ascii string",
        DataType::Boolean => "a boolean value",
        DataType::TinyInt => "a tinyint value",
        DataType::SmallInt => "a smallint value",
        DataType::Int => "an int value",
        DataType::BigInt | DataType::Counter => "a bigint value",
        DataType::Varint => "a varint value",
        DataType::Float => "a float value",
        DataType::Double => "a double value",
        DataType::Decimal => "a decimal value",
        DataType::Timestamp => "a long or a datestring representation of a timestamp value",
        DataType::Date => "a string representation of a date value",
        DataType::Time => "a string representation of a time value",
        DataType::Blob => "a hex string representation of a blob value",
        DataType::Uuid | DataType::Timeuuid => "a string representation of a uuid",
        DataType::Inet => "a string representation of an inet value",
        DataType::Duration => "a string representation of a duration value",
        _ => "a value of the column's type",
    }
}

fn from_number(ty: &DataType, raw: &RawValue, number: &str, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let integer = is_integer(number);
    let lit = match ty {
        // Jackson makes an Integer or a Long of a JSON integer, and Cassandra takes only those
        // for int and bigint.
        DataType::Int if integer && number.parse::<i32>().is_ok() => Literal::Int(number.to_owned()),
        DataType::BigInt | DataType::Counter if integer && number.parse::<i64>().is_ok() => {
            Literal::Int(number.to_owned())
        }
        DataType::TinyInt | DataType::SmallInt | DataType::Varint if integer => {
            Literal::Int(number.to_owned())
        }
        DataType::Float | DataType::Double | DataType::Decimal => {
            if integer {
                Literal::Int(number.to_owned())
            } else {
                Literal::Float(number.to_owned())
            }
        }
        DataType::Timestamp | DataType::Date | DataType::Time if integer => Literal::Int(number.to_owned()),
        DataType::TinyInt | DataType::SmallInt | DataType::Varint => {
            return Err(JsonError::Invalid {
                reason: format!(
                    "Value '{}' is not a valid representation of a {ty} value",
                    shown(number)
                ),
            })
        }
        _ => return Err(mismatch(expected_phrase(ty), raw)),
    };
    convert(ty, &lit, out)
}

/// A scalar from its string form, as `fromString` reads it in Cassandra.
fn from_string(ty: &DataType, s: &str, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let lit = match ty {
        DataType::Blob => {
            let Some(hex) = s.strip_prefix("0x") else {
                return Err(JsonError::Invalid {
                    reason: format!(
                        "Value '{}' is not a valid blob representation: String representation of blob is missing 0x prefix",
                        shown(s)
                    ),
                });
            };
            let bytes = hex_bytes(hex).ok_or_else(|| JsonError::Invalid {
                reason: format!(
                    "Value '{}' is not a valid blob representation: cannot parse '{}' as hex bytes",
                    shown(s),
                    shown(hex)
                ),
            })?;
            out.extend_from_slice(&bytes);
            return Ok(());
        }
        DataType::TinyInt
        | DataType::SmallInt
        | DataType::Int
        | DataType::BigInt
        | DataType::Counter
        | DataType::Varint => Literal::Int(s.to_owned()),
        DataType::Float | DataType::Double | DataType::Decimal => {
            if is_integer(s) && !s.is_empty() && !s.contains(['N', 'I', 'n', 'i']) {
                Literal::Int(s.to_owned())
            } else {
                Literal::Float(s.to_owned())
            }
        }
        DataType::Uuid | DataType::Timeuuid => Literal::Uuid(s.to_owned()),
        _ => Literal::Str(s.to_owned()),
    };
    convert(ty, &lit, out)
}

fn convert(ty: &DataType, lit: &Literal, out: &mut Vec<u8>) -> Result<(), JsonError> {
    literal_to_bytes(ty, lit, out).map_err(|e| JsonError::Invalid {
        reason: e.to_string(),
    })
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    hex.as_bytes()
        .chunks(2)
        .map(|pair| Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8))
        .collect()
}

/// A serialized value of `ty` as JSON text (`toJson`). Bytes that are not a value of the type
/// are shown as a blob string, so that reading never fails.
pub fn to_json(ty: &DataType, bytes: &[u8]) -> String {
    let mut out = String::new();
    match Value::decode(ty, bytes) {
        Ok(Value::Empty) => match ty {
            DataType::Text | DataType::Ascii => out.push_str("\"\""),
            DataType::Blob => out.push_str("\"0x\""),
            _ => out.push_str("null"),
        },
        Ok(value) => write_value(&value, &mut out),
        Err(_) => write_hex_string(bytes, &mut out),
    }
    out
}

/// Writes `s` as a JSON string, escaped as Jackson escapes it: quote, backslash and the
/// control characters; everything else as is.
pub fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_hex_string(bytes: &[u8], out: &mut String) {
    out.push_str("\"0x");
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out.push('"');
}

/// A float or double as Java's `toString` writes it: plain between 10^-3 and 10^7, else
/// `d.dddE±n`; always with a fraction digit. `scientific` is Rust's shortest `{:e}` form.
fn write_java_float(scientific: &str, out: &mut String) {
    let (negative, rest) = match scientific.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, scientific),
    };
    let (mantissa, exponent) = rest.split_once('e').unwrap_or((rest, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if negative {
        out.push('-');
    }
    if digits == "0" {
        out.push_str("0.0");
    } else if (-3..7).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                let _ = write!(out, "{digits}{}.0", "0".repeat(int_len - digits.len()));
            } else {
                let _ = write!(out, "{}.{}", &digits[..int_len], &digits[int_len..]);
            }
        } else {
            let _ = write!(out, "0.{}{digits}", "0".repeat((-exponent - 1) as usize));
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        let _ = write!(out, "{first}.{rest}E{exponent}");
    }
}

fn write_ip(ip: &std::net::IpAddr, out: &mut String) {
    // Java prints an IPv4-mapped IPv6 address as IPv4, and IPv6 as eight groups without
    // compression.
    match ip {
        std::net::IpAddr::V4(v4) => write_json_string(&v4.to_string(), out),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => write_json_string(&v4.to_string(), out),
            None => {
                let groups: Vec<String> = v6.segments().iter().map(|g| format!("{g:x}")).collect();
                write_json_string(&groups.join(":"), out);
            }
        },
    }
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Empty => out.push_str("null"),
        Value::Ascii(s) | Value::Text(s) => write_json_string(s, out),
        Value::Blob(b) => write_hex_string(b, out),
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
        Value::Float(v) if v.is_finite() => write_java_float(&format!("{v:e}"), out),
        Value::Double(v) if v.is_finite() => write_java_float(&format!("{v:e}"), out),
        // JSON has no NaN or infinity; Cassandra writes null for them.
        Value::Float(_) | Value::Double(_) => out.push_str("null"),
        Value::Decimal { scale, unscaled } => {
            let mut s = String::new();
            write_decimal(*scale, unscaled, &mut s);
            out.push_str(&s);
        }
        Value::Timestamp(ms) => {
            let days = ms.div_euclid(86_400_000);
            let in_day = ms.rem_euclid(86_400_000);
            let (y, mo, d) = super::convert::civil_from_days(days);
            let s = format!(
                "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}.{:03}Z",
                in_day / 3_600_000,
                in_day / 60_000 % 60,
                in_day / 1000 % 60,
                in_day % 1000
            );
            write_json_string(&s, out);
        }
        Value::Date(days) => {
            let (y, m, d) = super::convert::civil_from_days(i64::from(*days) - super::convert::DATE_EPOCH);
            write_json_string(&format!("{y:04}-{m:02}-{d:02}"), out);
        }
        Value::Time(nanos) => {
            let secs = nanos / 1_000_000_000;
            let s = format!(
                "{:02}:{:02}:{:02}.{:09}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60,
                nanos % 1_000_000_000
            );
            write_json_string(&s, out);
        }
        Value::Uuid(u) | Value::Timeuuid(u) => {
            let mut s = String::new();
            write_uuid(u, &mut s);
            write_json_string(&s, out);
        }
        Value::Inet(ip) => write_ip(ip, out),
        Value::Duration { months, days, nanos } => {
            let mut s = String::new();
            write_duration(*months, *days, *nanos, &mut s);
            write_json_string(&s, out);
        }
        Value::List(items) | Value::Set(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let mut key = String::new();
                write_value(k, &mut key);
                if key.starts_with('"') {
                    out.push_str(&key);
                } else {
                    write_json_string(&key, out);
                }
                out.push_str(": ");
                write_value(v, out);
            }
            out.push('}');
        }
        Value::Tuple(components) => {
            out.push('[');
            for (i, c) in components.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match c {
                    Some(v) => write_value(v, out),
                    None => out.push_str("null"),
                }
            }
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(t: &str) -> DataType {
        DataType::parse(t).expect("type")
    }

    fn round_trip(t: &str, json: &str) -> String {
        let ty = ty(t);
        let bytes = from_json(&ty, json).expect("decodes").expect("not null");
        to_json(&ty, &bytes)
    }

    #[test]
    fn scalars_read_and_print_as_cassandra_does() {
        assert_eq!(round_trip("int", "70000"), "70000");
        assert_eq!(round_trip("int", "\"12\""), "12");
        assert_eq!(
            round_trip("text", "\"a\\\"b\\n\\u0001é\""),
            "\"a\\\"b\\n\\u0001é\""
        );
        assert_eq!(round_trip("blob", "\"0xCAFE\""), "\"0xcafe\"");
        assert_eq!(round_trip("boolean", "\"TRUE\""), "true");
        assert_eq!(round_trip("double", "-2.25e-10"), "-2.25E-10");
        assert_eq!(round_trip("double", "3"), "3.0");
        assert_eq!(round_trip("float", "1e20"), "1.0E20");
        assert_eq!(round_trip("float", "100"), "100.0");
        assert_eq!(round_trip("double", "0.0015"), "0.0015");
        assert_eq!(round_trip("double", "12345678.5"), "1.23456785E7");
        assert_eq!(round_trip("double", "\"NaN\""), "null");
        assert_eq!(
            round_trip("timestamp", "\"2011-02-03 04:05:06.789+0000\""),
            "\"2011-02-03 04:05:06.789Z\""
        );
        assert_eq!(round_trip("timestamp", "-1"), "\"1969-12-31 23:59:59.999Z\"");
        assert_eq!(round_trip("date", "\"2020-01-02\""), "\"2020-01-02\"");
        assert_eq!(
            round_trip("time", "\"01:02:03.000004\""),
            "\"01:02:03.000004000\""
        );
        assert_eq!(round_trip("inet", "\"::1\""), "\"0:0:0:0:0:0:0:1\"");
        assert_eq!(round_trip("inet", "\"::ffff:1.2.3.4\""), "\"1.2.3.4\"");
        assert_eq!(round_trip("duration", "\"1h30m\""), "\"1h30m\"");
    }

    #[test]
    fn big_numbers_stay_exact() {
        let n = "123456789012345678901234567890123456789";
        assert_eq!(round_trip("varint", n), n);
        assert_eq!(
            round_trip("decimal", "1.100000000000000000000000001"),
            "1.100000000000000000000000001"
        );
        assert_eq!(round_trip("decimal", "123.4500"), "123.4500");
    }

    #[test]
    fn collections_nest_and_map_keys_are_strings() {
        assert_eq!(round_trip("list<int>", "[3, 1]"), "[3, 1]");
        assert_eq!(round_trip("set<text>", "[\"z\", \"a\", \"z\"]"), "[\"a\", \"z\"]");
        assert_eq!(
            round_trip("map<int, text>", "{\"2\": \"b\", \"1\": \"a\"}"),
            "{\"1\": \"a\", \"2\": \"b\"}"
        );
        assert_eq!(
            round_trip("map<frozen<set<int>>, text>", "{\"[3, 1]\": \"v\"}"),
            "{\"[1, 3]\": \"v\"}"
        );
        assert_eq!(
            round_trip("map<timestamp, boolean>", "{\"2011-02-03 04:05:00+0000\": true}"),
            "{\"2011-02-03 04:05:00.000Z\": true}"
        );
        assert_eq!(round_trip("tuple<int, text>", "[1, null]"), "[1, null]");
        assert_eq!(
            round_trip("list<frozen<list<int>>>", "[[1], [2, 3]]"),
            "[[1], [2, 3]]"
        );
    }

    #[test]
    fn wrong_json_is_refused_with_cassandras_words() {
        let err = |t: &str, j: &str| from_json(&ty(t), j).expect_err("refused").to_string();
        assert_eq!(err("int", "1.5"), "Expected an int value, but got a Double: 1.5");
        assert_eq!(
            err("int", "3000000000"),
            "Expected an int value, but got a Long: 3000000000"
        );
        assert_eq!(err("text", "5"), "Expected a UTF-8 string, but got a Integer: 5");
        assert_eq!(err("list<int>", "5"), "Expected a list, but got a Integer: 5");
        assert_eq!(err("list<int>", "[null]"), "Invalid null element in list");
        assert!(err("blob", "\"cafe\"").contains("missing 0x prefix"));
        assert!(err("tuple<int, text>", "[1, \"a\", 3]").contains("Tuple contains extra items (expected 2)"));
        assert!(err("int", "{").starts_with("EOF while parsing"));
        assert!(err("varint", "5.0").contains("not a valid representation of a varint value"));
        // Nesting beyond serde_json's limit is refused, not followed.
        let deep = "[".repeat(100_000);
        assert!(from_json(&ty("list<int>"), &deep).is_err());
        assert_eq!(from_json(&ty("int"), "null"), Ok(None));
    }

    #[test]
    fn objects_keep_the_last_of_equal_keys() {
        let m = parse_object("{\"k\": 17, \"k\": 18}")
            .expect("parses")
            .expect("object");
        assert_eq!(m["k"].get(), "18");
        assert!(parse_object("null").expect("parses").is_none());
        assert!(parse_object("[1]").is_err());
    }
}
