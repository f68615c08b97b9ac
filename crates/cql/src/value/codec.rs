//! The serialized form of every type (native_protocol_v4.spec section 6), checked, decoded and
//! encoded.
//!
//! ```text
//! tinyint 1, smallint 2, int 4, bigint/counter/timestamp 8: big-endian two's complement
//! float 4, double 8: IEEE 754 big-endian        boolean 1: 0 false, anything else true
//! date 4: unsigned days, 2^31 = 1970-01-01      time 8: nanoseconds since midnight
//! uuid/timeuuid 16                              inet 4 or 16: the address bytes
//! varint: two's complement, any length          decimal: [int] scale, then a varint
//! ascii/text/blob: the bytes themselves         duration: 3 signed vints (months, days, nanos)
//! list/set: [int] n, n × ([int] len, bytes)     map: [int] n, n × (key, value) as above
//! tuple: one ([int] len, bytes) per component, len < 0 is null; fewer than the type's is fine
//! ```
//!
//! An empty (0-byte) value is accepted where Cassandra accepts one: every type that existed
//! before protocol v4 except duration. tinyint, smallint, date and time refuse it, as in
//! Cassandra.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::compare::compare;
use super::error::{hex_prefix, ValueError};
use super::types::DataType;
use super::vint;

/// The most elements a collection value may claim. Each takes at least its 4-byte length, so
/// this is also what a frame body can hold; the bound lets a decoder size a `Vec` up front.
pub const COLLECTION_ELEMENTS_MAX: usize = crate::wire::LONG_BYTES_MAX / 4;

/// Nanoseconds in a day: a `time` is below this.
pub const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

/// A decoded value of some [`DataType`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A 0-byte value, which Cassandra allows for most scalar types and treats as neither null
    /// nor any value of the type.
    Empty,
    Ascii(String),
    Text(String),
    Blob(Vec<u8>),
    Boolean(bool),
    TinyInt(i8),
    SmallInt(i16),
    Int(i32),
    BigInt(i64),
    Counter(i64),
    /// Big-endian two's complement, as on the wire.
    Varint(Vec<u8>),
    Float(f32),
    Double(f64),
    /// `unscaled × 10^-scale`; `unscaled` is big-endian two's complement.
    Decimal {
        scale: i32,
        unscaled: Vec<u8>,
    },
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    /// Days, with 2^31 the Unix epoch.
    Date(u32),
    /// Nanoseconds since midnight.
    Time(i64),
    Uuid([u8; 16]),
    Timeuuid([u8; 16]),
    Inet(IpAddr),
    Duration {
        months: i32,
        days: i32,
        nanos: i64,
    },
    List(Vec<Value>),
    /// Elements in the set's order once encoded; [`Value::encode`] sorts and deduplicates.
    Set(Vec<Value>),
    Map(Vec<(Value, Value)>),
    /// `None` is a null component.
    Tuple(Vec<Option<Value>>),
}

fn fixed(bytes: &[u8], width: usize, empty_ok: bool, expected: &'static str) -> Result<(), ValueError> {
    if bytes.len() == width || (empty_ok && bytes.is_empty()) {
        Ok(())
    } else {
        Err(ValueError::WrongLength {
            expected,
            length: bytes.len(),
        })
    }
}

/// Reads a collection's or tuple's [int] count or length.
fn read_i32(buf: &mut &[u8], what: &'static str) -> Result<i32, ValueError> {
    let Some((head, tail)) = buf.split_first_chunk::<4>() else {
        return Err(ValueError::Truncated { what });
    };
    *buf = tail;
    Ok(i32::from_be_bytes(*head))
}

/// Reads a collection's element count, refusing one the remaining bytes cannot hold.
pub(crate) fn read_count(
    buf: &mut &[u8],
    what: &'static str,
    per_element: usize,
) -> Result<usize, ValueError> {
    let count = read_i32(buf, what)?;
    let n = usize::try_from(count).map_err(|_| ValueError::NegativeCount { what, count })?;
    if n > COLLECTION_ELEMENTS_MAX || n.saturating_mul(per_element * 4) > buf.len() {
        return Err(ValueError::Truncated { what });
    }
    Ok(n)
}

/// Reads one collection element: a length (never negative: nulls are refused) and its bytes.
pub(crate) fn read_element<'a>(buf: &mut &'a [u8], what: &'static str) -> Result<&'a [u8], ValueError> {
    let len = read_i32(buf, what)?;
    let len = usize::try_from(len).map_err(|_| ValueError::NullInCollection)?;
    if buf.len() < len {
        return Err(ValueError::Truncated { what });
    }
    let (head, tail) = buf.split_at(len);
    *buf = tail;
    Ok(head)
}

/// Reads one tuple component: `None` for a null (length -1).
/// The components of a serialized tuple or user-defined type value, `None` for a null one.
/// A value may stop before its type's last component; the caller checks the count.
pub fn split_components(bytes: &[u8]) -> Result<Vec<Option<&[u8]>>, ValueError> {
    let mut buf = bytes;
    // Each component takes at least its 4-byte length, which bounds the vector.
    let mut out = Vec::with_capacity(bytes.len() / 4);
    while !buf.is_empty() {
        out.push(read_component(&mut buf)?);
    }
    Ok(out)
}

pub(crate) fn read_component<'a>(buf: &mut &'a [u8]) -> Result<Option<&'a [u8]>, ValueError> {
    let what = "a tuple component";
    let len = read_i32(buf, what)?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| ValueError::NegativeCount { what, count: len })?;
    if buf.len() < len {
        return Err(ValueError::Truncated { what });
    }
    let (head, tail) = buf.split_at(len);
    *buf = tail;
    Ok(Some(head))
}

fn collection_name(ty: &DataType) -> &'static str {
    match ty {
        DataType::List { .. } => "a list",
        DataType::Set { .. } => "a set",
        _ => "a map",
    }
}

fn collection_noun(ty: &DataType) -> &'static str {
    match ty {
        DataType::List { .. } => "list",
        DataType::Set { .. } => "set",
        DataType::Map { .. } => "map",
        _ => "tuple",
    }
}

/// Checks that `bytes` is a well-formed value of `ty`, as Cassandra checks a bound value. It
/// allocates nothing unless it fails.
pub fn validate(ty: &DataType, bytes: &[u8]) -> Result<(), ValueError> {
    match ty {
        DataType::Ascii => match bytes.iter().find(|&&b| b > 0x7F) {
            Some(&byte) => Err(ValueError::InvalidAscii { byte }),
            None => Ok(()),
        },
        DataType::Text => match std::str::from_utf8(bytes) {
            Ok(_) => Ok(()),
            Err(_) => Err(ValueError::InvalidUtf8 {
                hex: hex_prefix(bytes),
            }),
        },
        DataType::Blob | DataType::Varint | DataType::Custom(_) => Ok(()),
        DataType::Boolean => fixed(bytes, 1, true, "Expected 1 or 0 byte value"),
        DataType::TinyInt => fixed(bytes, 1, false, "Expected 1 byte for a tinyint"),
        DataType::SmallInt => fixed(bytes, 2, false, "Expected 2 bytes for a smallint"),
        DataType::Int => fixed(bytes, 4, true, "Expected 4 or 0 byte int"),
        DataType::BigInt | DataType::Counter => fixed(bytes, 8, true, "Expected 8 or 0 byte long"),
        DataType::Float => fixed(bytes, 4, true, "Expected 4 or 0 byte value for a float"),
        DataType::Double => fixed(bytes, 8, true, "Expected 8 or 0 byte value for a double"),
        DataType::Timestamp => fixed(bytes, 8, true, "Expected 8 or 0 byte long for date"),
        DataType::Date => fixed(bytes, 4, false, "Expected 4 byte long for date"),
        DataType::Time => {
            fixed(bytes, 8, false, "Expected 8 byte long for time")?;
            let nanos = i64::from_be_bytes(bytes.try_into().unwrap_or_default());
            if !(0..NANOS_PER_DAY).contains(&nanos) {
                return Err(ValueError::TimeOutOfRange { nanos });
            }
            Ok(())
        }
        DataType::Uuid => fixed(bytes, 16, true, "UUID should be 16 or 0 bytes"),
        DataType::Timeuuid => {
            fixed(bytes, 16, true, "UUID should be 16 or 0 bytes")?;
            if !bytes.is_empty() && bytes[6] & 0xF0 != 0x10 {
                return Err(ValueError::TimeuuidVersion);
            }
            Ok(())
        }
        DataType::Inet => match bytes.len() {
            0 | 4 | 16 => Ok(()),
            _ => Err(ValueError::InvalidInet {
                hex: hex_prefix(bytes),
            }),
        },
        DataType::Decimal => {
            if !bytes.is_empty() && bytes.len() < 4 {
                return Err(ValueError::WrongLength {
                    expected: "Expected 0 or at least 4 bytes",
                    length: bytes.len(),
                });
            }
            Ok(())
        }
        DataType::Duration => read_duration(bytes).map(|_| ()),
        DataType::List { element, .. } | DataType::Set { element, .. } => {
            let what = collection_name(ty);
            let mut buf = bytes;
            let n = read_count(&mut buf, what, 1)?;
            for _ in 0..n {
                validate(element, read_element(&mut buf, what)?)?;
            }
            trailing(buf, collection_noun(ty))
        }
        DataType::Map { key, value, .. } => {
            let what = "a map";
            let mut buf = bytes;
            let n = read_count(&mut buf, what, 2)?;
            for _ in 0..n {
                validate(key, read_element(&mut buf, what)?)?;
                validate(value, read_element(&mut buf, what)?)?;
            }
            trailing(buf, "map")
        }
        DataType::Tuple(_) | DataType::Udt { .. } => {
            let types = ty.components().unwrap_or_default();
            let mut buf = bytes;
            let mut count = 0;
            while !buf.is_empty() {
                let component = read_component(&mut buf)?;
                let Some(ty) = types.get(count) else {
                    return Err(ValueError::TooManyComponents {
                        count: count + 1,
                        max: types.len(),
                    });
                };
                if let Some(component) = component {
                    validate(ty, component)?;
                }
                count += 1;
            }
            Ok(())
        }
    }
}

fn trailing(buf: &[u8], what: &'static str) -> Result<(), ValueError> {
    if buf.is_empty() {
        Ok(())
    } else {
        Err(ValueError::TrailingBytes { what })
    }
}

/// Reads and checks a duration: three signed vints that fit (i32, i32, i64) and share a sign.
pub(crate) fn read_duration(bytes: &[u8]) -> Result<(i32, i32, i64), ValueError> {
    if bytes.len() < 3 {
        return Err(ValueError::WrongLength {
            expected: "Expected at least 3 bytes for a duration",
            length: bytes.len(),
        });
    }
    let mut buf = bytes;
    let what = "a duration";
    let mut next = || vint::read_signed(&mut buf).ok_or(ValueError::Truncated { what });
    let (months, days, nanos) = (next()?, next()?, next()?);
    trailing(buf, "duration")?;
    let months32 = i32::try_from(months).map_err(|_| ValueError::DurationFieldRange {
        field: "months",
        value: months,
    })?;
    let days32 = i32::try_from(days).map_err(|_| ValueError::DurationFieldRange {
        field: "days",
        value: days,
    })?;
    let all_non_negative = months >= 0 && days >= 0 && nanos >= 0;
    let all_non_positive = months <= 0 && days <= 0 && nanos <= 0;
    if !(all_non_negative || all_non_positive) {
        return Err(ValueError::DurationSigns { months, days, nanos });
    }
    Ok((months32, days32, nanos))
}

/// Appends a duration's serialized form.
pub(crate) fn write_duration(months: i32, days: i32, nanos: i64, out: &mut Vec<u8>) {
    vint::write_signed(out, months.into());
    vint::write_signed(out, days.into());
    vint::write_signed(out, nanos);
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

impl Value {
    /// Decodes a serialized value of `ty`, checking it as [`validate`] does.
    pub fn decode(ty: &DataType, bytes: &[u8]) -> Result<Value, ValueError> {
        validate(ty, bytes)?;
        let empty_ok = !matches!(
            ty,
            DataType::Ascii
                | DataType::Text
                | DataType::Blob
                | DataType::Varint
                | DataType::Duration
                | DataType::Custom(_)
        ) && !ty.is_collection()
            && ty.components().is_none();
        if bytes.is_empty() && empty_ok {
            return Ok(Value::Empty);
        }
        // `validate` has checked every length below.
        Ok(match ty {
            DataType::Ascii => Value::Ascii(String::from_utf8_lossy(bytes).into_owned()),
            DataType::Text => Value::Text(String::from_utf8_lossy(bytes).into_owned()),
            DataType::Blob | DataType::Custom(_) => Value::Blob(bytes.to_vec()),
            DataType::Boolean => Value::Boolean(bytes[0] != 0),
            DataType::TinyInt => Value::TinyInt(i8::from_be_bytes(array(bytes))),
            DataType::SmallInt => Value::SmallInt(i16::from_be_bytes(array(bytes))),
            DataType::Int => Value::Int(i32::from_be_bytes(array(bytes))),
            DataType::BigInt => Value::BigInt(i64::from_be_bytes(array(bytes))),
            DataType::Counter => Value::Counter(i64::from_be_bytes(array(bytes))),
            DataType::Varint => Value::Varint(bytes.to_vec()),
            DataType::Float => Value::Float(f32::from_be_bytes(array(bytes))),
            DataType::Double => Value::Double(f64::from_be_bytes(array(bytes))),
            DataType::Decimal => Value::Decimal {
                scale: i32::from_be_bytes(array(bytes)),
                unscaled: bytes[4..].to_vec(),
            },
            DataType::Timestamp => Value::Timestamp(i64::from_be_bytes(array(bytes))),
            DataType::Date => Value::Date(u32::from_be_bytes(array(bytes))),
            DataType::Time => Value::Time(i64::from_be_bytes(array(bytes))),
            DataType::Uuid => Value::Uuid(array(bytes)),
            DataType::Timeuuid => Value::Timeuuid(array(bytes)),
            DataType::Inet => match bytes.len() {
                4 => Value::Inet(IpAddr::V4(Ipv4Addr::from(array::<4>(bytes)))),
                _ => Value::Inet(IpAddr::V6(Ipv6Addr::from(array::<16>(bytes)))),
            },
            DataType::Duration => {
                let (months, days, nanos) = read_duration(bytes)?;
                Value::Duration { months, days, nanos }
            }
            DataType::List { element, .. } | DataType::Set { element, .. } => {
                let what = collection_name(ty);
                let mut buf = bytes;
                let n = read_count(&mut buf, what, 1)?;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(Value::decode(element, read_element(&mut buf, what)?)?);
                }
                match ty {
                    DataType::List { .. } => Value::List(out),
                    _ => Value::Set(out),
                }
            }
            DataType::Map { key, value, .. } => {
                let mut buf = bytes;
                let n = read_count(&mut buf, "a map", 2)?;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = Value::decode(key, read_element(&mut buf, "a map")?)?;
                    out.push((k, Value::decode(value, read_element(&mut buf, "a map")?)?));
                }
                Value::Map(out)
            }
            DataType::Tuple(_) | DataType::Udt { .. } => {
                let types = ty.components().unwrap_or_default();
                let mut buf = bytes;
                let mut out = Vec::with_capacity(types.len());
                for ty in types {
                    if buf.is_empty() {
                        break;
                    }
                    out.push(match read_component(&mut buf)? {
                        Some(component) => Some(Value::decode(ty, component)?),
                        None => None,
                    });
                }
                Value::Tuple(out)
            }
        })
    }

    /// Appends the serialized form. The value must belong to the type it is later read as;
    /// sets and maps are written sorted by Cassandra's order of their elements or keys, without
    /// duplicates (the last of equal map keys wins).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Empty => {}
            Value::Ascii(s) | Value::Text(s) => out.extend_from_slice(s.as_bytes()),
            Value::Blob(b) | Value::Varint(b) => out.extend_from_slice(b),
            Value::Boolean(b) => out.push(u8::from(*b)),
            Value::TinyInt(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::SmallInt(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Int(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::BigInt(v) | Value::Counter(v) | Value::Timestamp(v) | Value::Time(v) => {
                out.extend_from_slice(&v.to_be_bytes())
            }
            Value::Float(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Double(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Decimal { scale, unscaled } => {
                out.extend_from_slice(&scale.to_be_bytes());
                out.extend_from_slice(unscaled);
            }
            Value::Date(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Uuid(u) | Value::Timeuuid(u) => out.extend_from_slice(u),
            Value::Inet(IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
            Value::Inet(IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
            Value::Duration { months, days, nanos } => write_duration(*months, *days, *nanos, out),
            Value::List(items) => encode_list(items.iter().map(Value::to_bytes), out),
            Value::Set(items) => {
                // Elements that show no type are all empty, and equal in any type's order.
                let ty = infer_type(items.iter().collect()).unwrap_or(DataType::Blob);
                encode_set(&ty, items.iter().map(Value::to_bytes).collect(), out);
            }
            Value::Map(entries) => {
                let ty = infer_type(entries.iter().map(|(k, _)| k).collect()).unwrap_or(DataType::Blob);
                let pairs = entries
                    .iter()
                    .map(|(k, v)| (k.to_bytes(), v.to_bytes()))
                    .collect();
                encode_map(&ty, pairs, out);
            }
            Value::Tuple(components) => {
                encode_tuple(components.iter().map(|c| c.as_ref().map(Value::to_bytes)), out)
            }
        }
    }

    /// The serialized form in a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// The scalar type of a value of a scalar variant.
    fn scalar_type(&self) -> Option<DataType> {
        Some(match self {
            Value::Ascii(_) => DataType::Ascii,
            Value::Text(_) => DataType::Text,
            Value::Blob(_) => DataType::Blob,
            Value::Boolean(_) => DataType::Boolean,
            Value::TinyInt(_) => DataType::TinyInt,
            Value::SmallInt(_) => DataType::SmallInt,
            Value::Int(_) => DataType::Int,
            Value::BigInt(_) => DataType::BigInt,
            Value::Counter(_) => DataType::Counter,
            Value::Varint(_) => DataType::Varint,
            Value::Float(_) => DataType::Float,
            Value::Double(_) => DataType::Double,
            Value::Decimal { .. } => DataType::Decimal,
            Value::Timestamp(_) => DataType::Timestamp,
            Value::Date(_) => DataType::Date,
            Value::Time(_) => DataType::Time,
            Value::Uuid(_) => DataType::Uuid,
            Value::Timeuuid(_) => DataType::Timeuuid,
            Value::Inet(_) => DataType::Inet,
            Value::Duration { .. } => DataType::Duration,
            _ => return None,
        })
    }
}

/// The type that orders `values`, all of one type, as that type does: found from the values'
/// shapes, looking across all of them, since an `Empty` element or a null tuple component
/// hides its type. Whatever stays unseen is only ever empty or null, which every type orders
/// first, so `blob` stands in for it. `None` when no value shows a shape at all.
fn infer_type(values: Vec<&Value>) -> Option<DataType> {
    let shape = values.iter().find(|v| !matches!(v, Value::Empty))?;
    if let Some(ty) = shape.scalar_type() {
        return Some(ty);
    }
    let or_blob = |ty: Option<DataType>| Box::new(ty.unwrap_or(DataType::Blob));
    Some(match shape {
        Value::List(_) | Value::Set(_) => {
            let items = values.iter().flat_map(|v| match v {
                Value::List(items) | Value::Set(items) => items.as_slice(),
                _ => &[],
            });
            let element = or_blob(infer_type(items.collect()));
            match shape {
                Value::List(_) => DataType::List {
                    element,
                    frozen: true,
                },
                _ => DataType::Set {
                    element,
                    frozen: true,
                },
            }
        }
        Value::Map(_) => {
            let entries: Vec<&(Value, Value)> = values
                .iter()
                .flat_map(|v| match v {
                    Value::Map(entries) => entries.as_slice(),
                    _ => &[],
                })
                .collect();
            DataType::Map {
                key: or_blob(infer_type(entries.iter().map(|(k, _)| k).collect())),
                value: or_blob(infer_type(entries.iter().map(|(_, v)| v).collect())),
                frozen: true,
            }
        }
        _ => {
            let tuples: Vec<&[Option<Value>]> = values
                .iter()
                .filter_map(|v| match v {
                    Value::Tuple(c) => Some(c.as_slice()),
                    _ => None,
                })
                .collect();
            let arity = tuples.iter().map(|c| c.len()).max().unwrap_or(0);
            let types = (0..arity)
                .map(|i| {
                    let column = tuples.iter().filter_map(|c| c.get(i).and_then(Option::as_ref));
                    *or_blob(infer_type(column.collect()))
                })
                .collect();
            DataType::Tuple(types)
        }
    })
}

fn element_len(len: usize) -> i32 {
    i32::try_from(len).unwrap_or_else(|_| panic!("collection element of {len} bytes exceeds an [int] length"))
}

fn write_element(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&element_len(bytes.len()).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn write_pairs(pairs: &[(Vec<u8>, Vec<u8>)], out: &mut Vec<u8>) {
    out.extend_from_slice(&element_len(pairs.len()).to_be_bytes());
    for (k, v) in pairs {
        write_element(k, out);
        write_element(v, out);
    }
}

/// Appends a list of serialized elements, in the order given.
pub fn encode_list<I, B>(elements: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = B>,
    B: AsRef<[u8]>,
{
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut count = 0usize;
    for element in elements {
        write_element(element.as_ref(), out);
        count += 1;
    }
    out[start..start + 4].copy_from_slice(&element_len(count).to_be_bytes());
}

/// Appends a set of serialized elements of type `element`: sorted by Cassandra's order for that
/// type, duplicates dropped.
pub fn encode_set(element: &DataType, mut elements: Vec<Vec<u8>>, out: &mut Vec<u8>) {
    elements.sort_by(|a, b| compare(element, a, b));
    elements.dedup_by(|a, b| compare(element, a, b).is_eq());
    encode_list(elements, out);
}

/// Appends a map of serialized (key, value) pairs whose keys have type `key`: sorted by key;
/// of entries with equal keys the last one given wins, as in a CQL map literal.
pub fn encode_map(key: &DataType, mut entries: Vec<(Vec<u8>, Vec<u8>)>, out: &mut Vec<u8>) {
    // A stable sort keeps equal keys in the order given; keep the last of each run.
    entries.sort_by(|a, b| compare(key, &a.0, &b.0));
    let mut kept: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(entries.len());
    for entry in entries {
        match kept.last_mut() {
            Some(last) if compare(key, &last.0, &entry.0).is_eq() => *last = entry,
            _ => kept.push(entry),
        }
    }
    write_pairs(&kept, out);
}

/// Appends a tuple of serialized components, `None` being null.
pub fn encode_tuple<I, B>(components: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = Option<B>>,
    B: AsRef<[u8]>,
{
    for component in components {
        match component {
            Some(bytes) => write_element(bytes.as_ref(), out),
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
}

/// Rewrites a valid serialized value into the form Cassandra stores: sets and map keys sorted
/// and deduplicated, at every level of nesting. A driver may bind a set in any order, so the
/// server passes bound collection values through here before storing them. Other types are
/// copied unchanged.
pub fn canonicalize(ty: &DataType, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    match ty {
        DataType::List { element, .. } | DataType::Set { element, .. } => {
            let what = collection_name(ty);
            let mut buf = bytes;
            let n = read_count(&mut buf, what, 1)?;
            let mut elements = Vec::with_capacity(n);
            for _ in 0..n {
                let mut e = Vec::new();
                canonicalize(element, read_element(&mut buf, what)?, &mut e)?;
                elements.push(e);
            }
            trailing(buf, collection_noun(ty))?;
            match ty {
                DataType::List { .. } => encode_list(elements, out),
                _ => encode_set(element, elements, out),
            }
        }
        DataType::Map { key, value, .. } => {
            let mut buf = bytes;
            let n = read_count(&mut buf, "a map", 2)?;
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                let (mut k, mut v) = (Vec::new(), Vec::new());
                canonicalize(key, read_element(&mut buf, "a map")?, &mut k)?;
                canonicalize(value, read_element(&mut buf, "a map")?, &mut v)?;
                entries.push((k, v));
            }
            trailing(buf, "map")?;
            encode_map(key, entries, out);
        }
        DataType::Tuple(_) | DataType::Udt { .. } => {
            let types = ty.components().unwrap_or_default();
            validate(ty, bytes)?;
            let mut buf = bytes;
            for ty in types {
                if buf.is_empty() {
                    break;
                }
                match read_component(&mut buf)? {
                    Some(component) => {
                        let start = out.len();
                        out.extend_from_slice(&[0; 4]);
                        canonicalize(ty, component, out)?;
                        let len = element_len(out.len() - start - 4);
                        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
                    }
                    None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                }
            }
        }
        _ => {
            validate(ty, bytes)?;
            out.extend_from_slice(bytes);
        }
    }
    Ok(())
}

/// Used by tests of this module and its neighbours: the minimal two's complement of `v`.
#[cfg(test)]
pub(crate) fn varint_of(v: i128) -> Vec<u8> {
    let mut out = Vec::new();
    super::bignum::write_twos(v < 0, &v.unsigned_abs().to_be_bytes(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> DataType {
        DataType::parse(text).expect("test type parses")
    }

    /// One value of each type, as bytes, with the type.
    pub(crate) fn samples() -> Vec<(DataType, Value)> {
        let uuid4 = [
            0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x42, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00,
        ];
        let mut uuid1 = uuid4;
        uuid1[6] = 0x11;
        vec![
            (ty("ascii"), Value::Ascii("it's".into())),
            (ty("text"), Value::Text("héllo ✓".into())),
            (ty("blob"), Value::Blob(vec![0, 1, 0xFF])),
            (ty("boolean"), Value::Boolean(true)),
            (ty("tinyint"), Value::TinyInt(-7)),
            (ty("smallint"), Value::SmallInt(-300)),
            (ty("int"), Value::Int(i32::MIN)),
            (ty("int"), Value::Empty),
            (ty("bigint"), Value::BigInt(i64::MAX)),
            (ty("counter"), Value::Counter(-5)),
            (
                ty("varint"),
                Value::Varint(varint_of(-1_000_000_000_000_000_000_000)),
            ),
            (ty("float"), Value::Float(-1.5)),
            (ty("double"), Value::Double(f64::INFINITY)),
            (
                ty("decimal"),
                Value::Decimal {
                    scale: 3,
                    unscaled: varint_of(-12345),
                },
            ),
            (ty("timestamp"), Value::Timestamp(1_296_705_900_000)),
            (ty("date"), Value::Date(1 << 31)),
            (ty("time"), Value::Time(NANOS_PER_DAY - 1)),
            (ty("uuid"), Value::Uuid(uuid4)),
            (ty("timeuuid"), Value::Timeuuid(uuid1)),
            (ty("inet"), Value::Inet("127.0.0.1".parse().expect("ip"))),
            (ty("inet"), Value::Inet("::1".parse().expect("ip"))),
            (
                ty("duration"),
                Value::Duration {
                    months: -1,
                    days: -2,
                    nanos: -3_000_000_000,
                },
            ),
            (
                ty("list<int>"),
                Value::List(vec![Value::Int(3), Value::Int(1), Value::Int(3)]),
            ),
            (ty("set<int>"), Value::Set(vec![Value::Int(1), Value::Int(3)])),
            (
                ty("map<text, frozen<list<int>>>"),
                Value::Map(vec![
                    (Value::Text("a".into()), Value::List(vec![Value::Int(1)])),
                    (Value::Text("b".into()), Value::List(vec![])),
                ]),
            ),
            (
                ty("tuple<int, text, blob>"),
                Value::Tuple(vec![Some(Value::Int(1)), None, Some(Value::Blob(vec![]))]),
            ),
            (ty("tuple<int, text>"), Value::Tuple(vec![Some(Value::Int(1))])),
        ]
    }

    #[test]
    fn every_type_round_trips_and_rejects_every_truncation() {
        for (ty, value) in samples() {
            let bytes = value.to_bytes();
            validate(&ty, &bytes).unwrap_or_else(|e| panic!("{ty} {value:?}: {e}"));
            assert_eq!(Value::decode(&ty, &bytes), Ok(value.clone()), "{ty}");
            let fixed_or_nested = !matches!(
                ty,
                DataType::Ascii | DataType::Text | DataType::Blob | DataType::Varint | DataType::Tuple(_)
            );
            if fixed_or_nested && !bytes.is_empty() {
                for cut in 1..bytes.len() {
                    let cut_bytes = &bytes[..cut];
                    if ty == DataType::Decimal && cut >= 4 || ty == DataType::Inet && cut == 4 {
                        continue;
                    }
                    if ty == DataType::Duration && read_duration(cut_bytes).is_ok() {
                        continue;
                    }
                    assert!(
                        validate(&ty, cut_bytes).is_err(),
                        "{ty} accepted a {cut}-byte prefix"
                    );
                }
            }
        }
    }

    #[test]
    fn messages_read_like_cassandras() {
        let err = |t: &str, b: &[u8]| validate(&ty(t), b).expect_err(t).to_string();
        assert_eq!(err("int", &[1, 2, 3]), "Expected 4 or 0 byte int (3)");
        assert_eq!(err("bigint", &[1]), "Expected 8 or 0 byte long (1)");
        assert_eq!(err("smallint", &[]), "Expected 2 bytes for a smallint (0)");
        assert_eq!(err("text", &[0x61, 0xFF]), "Invalid UTF-8 bytes 61ff");
        assert_eq!(err("ascii", b"a\x80"), "Invalid byte for ascii: 128");
        assert_eq!(err("uuid", &[0; 3]), "UUID should be 16 or 0 bytes (3)");
        assert_eq!(err("timeuuid", &[0; 16]), "Invalid version for TimeUUID type.");
        assert_eq!(
            err("inet", &[1, 2, 3]),
            "Expected 4 or 16 byte inetaddress; got 010203"
        );
        assert_eq!(err("decimal", &[0, 0]), "Expected 0 or at least 4 bytes (2)");
        assert_eq!(
            err("duration", &[]),
            "Expected at least 3 bytes for a duration (0)"
        );
        assert!(err("time", &(-1i64).to_be_bytes()).starts_with("Time value must be between"));
        // months 1, days -1: zig-zag 2 and 1.
        assert!(err("duration", &[2, 1, 0]).contains("same sign (1, -1, 0)"));
        assert_eq!(
            err("list<int>", &[0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF]),
            "null is not supported inside collections"
        );
        assert_eq!(
            err("list<int>", &[0, 0, 0, 2, 0, 0, 0, 0]),
            "Not enough bytes to read a list"
        );
        assert_eq!(
            err("set<int>", &[0, 0, 0, 0, 9]),
            "Unexpected extraneous bytes after set value"
        );
        assert_eq!(
            err("list<int>", &[0, 0, 0, 1, 0, 0, 0, 1, 7]),
            "Expected 4 or 0 byte int (1)"
        );
        assert!(err("tuple<int>", &[0, 0, 0, 0, 0, 0, 0, 0]).contains("2 components"));
    }

    #[test]
    fn empty_values_follow_cassandra() {
        for t in [
            "int",
            "bigint",
            "boolean",
            "float",
            "double",
            "timestamp",
            "uuid",
            "timeuuid",
            "inet",
            "decimal",
        ] {
            assert_eq!(Value::decode(&ty(t), &[]), Ok(Value::Empty), "{t}");
        }
        for t in ["tinyint", "smallint", "date", "time", "duration", "list<int>"] {
            assert!(validate(&ty(t), &[]).is_err(), "{t} accepts empty");
        }
        assert_eq!(Value::decode(&ty("text"), &[]), Ok(Value::Text(String::new())));
    }

    #[test]
    fn sets_and_maps_encode_sorted_and_deduplicated() {
        let set = Value::Set(vec![Value::Int(3), Value::Int(-1), Value::Int(3)]);
        let decoded = Value::decode(&ty("set<int>"), &set.to_bytes()).expect("decodes");
        assert_eq!(decoded, Value::Set(vec![Value::Int(-1), Value::Int(3)]));
        let mut out = Vec::new();
        encode_map(
            &DataType::Text,
            vec![
                (b"b".to_vec(), vec![0, 0, 0, 1]),
                (b"a".to_vec(), vec![0, 0, 0, 2]),
                (b"b".to_vec(), vec![0, 0, 0, 3]),
            ],
            &mut out,
        );
        let decoded = Value::decode(&ty("map<text, int>"), &out).expect("decodes");
        assert_eq!(
            decoded,
            Value::Map(vec![
                (Value::Text("a".into()), Value::Int(2)),
                (Value::Text("b".into()), Value::Int(3))
            ])
        );
    }

    #[test]
    fn set_order_does_not_depend_on_which_element_hides_its_type() {
        // Regression guard: the element type was once guessed from the first element alone, so
        // a tuple whose double component was null ordered the other doubles as blobs.
        let t = ty("set<frozen<tuple<double, int>>>");
        let tuple = |d: Option<f64>| Value::Tuple(vec![d.map(Value::Double), Some(Value::Int(0))]);
        let set = Value::Set(vec![tuple(None), tuple(Some(1.0)), tuple(Some(-1.0))]);
        assert_eq!(
            Value::decode(&t, &set.to_bytes()),
            Ok(Value::Set(vec![tuple(None), tuple(Some(-1.0)), tuple(Some(1.0))]))
        );
        let empties = Value::Set(vec![Value::Empty, Value::Empty]);
        assert_eq!(
            Value::decode(&ty("set<int>"), &empties.to_bytes()),
            Ok(Value::Set(vec![Value::Empty]))
        );
    }

    #[test]
    fn canonicalize_sorts_nested_sets_a_driver_sent_unsorted() {
        let t = ty("list<frozen<set<int>>>");
        let mut inner = Vec::new();
        encode_list([5i32.to_be_bytes(), 2i32.to_be_bytes()], &mut inner);
        let mut bound = Vec::new();
        encode_list([inner], &mut bound);
        let mut out = Vec::new();
        canonicalize(&t, &bound, &mut out).expect("valid");
        assert_eq!(
            Value::decode(&t, &out),
            Ok(Value::List(vec![Value::Set(vec![Value::Int(2), Value::Int(5)])]))
        );
    }

    #[test]
    fn a_hostile_count_is_refused_before_allocating() {
        let t = ty("list<int>");
        assert!(Value::decode(&t, &[0x7F, 0xFF, 0xFF, 0xFF]).is_err());
        assert!(validate(&t, &[0xFF, 0xFF, 0xFF, 0xFE]).is_err());
    }
}
