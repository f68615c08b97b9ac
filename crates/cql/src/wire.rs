//! Cursor readers and writers for the body notations of the v4 spec, section 3 "Notations".
//!
//! Readers take `buf: &mut &[u8]`, consume what they read from the front and borrow from the
//! frame body where they can, so decoding a request copies nothing. Every length prefix is
//! checked against the bytes that remain and against a named `*_MAX` bound before it is
//! trusted, so a hostile length cannot make us allocate. Writers append to a `Vec<u8>`; a value
//! too long for its length prefix is a programmer error and panics.
//! All integers are big-endian (network order).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::frame::FRAME_BODY_MAX_BYTES;

/// The most entries in a [string list], [string map], [string multimap] or [bytes map]. These
/// carry STARTUP options, REGISTER event types, SUPPORTED values and custom payloads: a few
/// dozen at most in practice.
pub const MAP_ENTRIES_MAX: usize = 1024;

/// The most bytes in a [long string], [bytes] or [value]: nothing can be longer than the body.
pub const LONG_BYTES_MAX: usize = FRAME_BODY_MAX_BYTES as usize;

/// Why a message body could not be decoded. Each is answered with a protocol ERROR (0x000A);
/// the frame boundary is still known, so the connection can carry on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body ended while `what` was being read.
    Truncated {
        what: &'static str,
        needed: usize,
        remaining: usize,
    },
    /// A length or count was negative where the spec does not allow it.
    NegativeLength { what: &'static str, length: i32 },
    /// A length or count exceeded its bound.
    TooLong {
        what: &'static str,
        length: usize,
        max: usize,
    },
    /// A [string] or [long string] was not UTF-8.
    InvalidUtf8 { what: &'static str },
    /// A [consistency] short named no consistency level.
    UnknownConsistency { value: u16 },
    /// An [inet] address length other than 4 or 16.
    InvalidInetLength { length: u8 },
    /// A field held a value the spec does not define.
    Invalid { what: &'static str, value: i64 },
    /// A required field or option was absent.
    Missing { what: &'static str },
    /// A string field held a value the spec does not define.
    InvalidName { what: &'static str, value: String },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated {
                what,
                needed,
                remaining,
            } => write!(
                f,
                "message body ends early: reading {what} needs {needed} bytes but {remaining} remain"
            ),
            DecodeError::NegativeLength { what, length } => {
                write!(f, "negative length {length} for {what}")
            }
            DecodeError::TooLong { what, length, max } => {
                write!(f, "{what} has length {length}, more than the maximum of {max}")
            }
            DecodeError::InvalidUtf8 { what } => write!(f, "{what} is not valid UTF-8"),
            DecodeError::UnknownConsistency { value } => {
                write!(f, "unknown consistency level 0x{value:04X}")
            }
            DecodeError::InvalidInetLength { length } => {
                write!(
                    f,
                    "inet address of {length} bytes; expected 4 (IPv4) or 16 (IPv6)"
                )
            }
            DecodeError::Invalid { what, value } => write!(f, "invalid {what}: {value}"),
            DecodeError::Missing { what } => write!(f, "missing {what}"),
            DecodeError::InvalidName { what, value } => write!(f, "invalid {what}: '{value}'"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Takes `n` bytes off the front of `buf`.
pub fn read_raw<'a>(buf: &mut &'a [u8], n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
    if buf.len() < n {
        return Err(DecodeError::Truncated {
            what,
            needed: n,
            remaining: buf.len(),
        });
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Ok(head)
}

fn read_array<const N: usize>(buf: &mut &[u8], what: &'static str) -> Result<[u8; N], DecodeError> {
    let raw = read_raw(buf, N, what)?;
    let mut out = [0u8; N];
    out.copy_from_slice(raw);
    Ok(out)
}

/// [byte]: spec section 3 (used by flags, batch type, inet length).
pub fn read_byte(buf: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(read_array::<1>(buf, "[byte]")?[0])
}

/// [short]: a 2-byte unsigned integer. Spec section 3.
pub fn read_short(buf: &mut &[u8]) -> Result<u16, DecodeError> {
    Ok(u16::from_be_bytes(read_array(buf, "[short]")?))
}

/// [int]: a 4-byte signed integer. Spec section 3.
pub fn read_int(buf: &mut &[u8]) -> Result<i32, DecodeError> {
    Ok(i32::from_be_bytes(read_array(buf, "[int]")?))
}

/// [long]: an 8-byte signed integer. Spec section 3.
pub fn read_long(buf: &mut &[u8]) -> Result<i64, DecodeError> {
    Ok(i64::from_be_bytes(read_array(buf, "[long]")?))
}

/// [uuid]: 16 bytes. Spec section 3.
pub fn read_uuid(buf: &mut &[u8]) -> Result<[u8; 16], DecodeError> {
    read_array(buf, "[uuid]")
}

fn utf8<'a>(raw: &'a [u8], what: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 { what })
}

/// [string]: a [short] n, then n bytes of UTF-8. Spec section 3. The short bounds it at 65535.
pub fn read_string<'a>(buf: &mut &'a [u8]) -> Result<&'a str, DecodeError> {
    let n = read_short(buf)? as usize;
    utf8(read_raw(buf, n, "[string]")?, "[string]")
}

/// Reads an [int] length that must be in `0..=max`.
fn read_length(buf: &mut &[u8], what: &'static str, max: usize) -> Result<usize, DecodeError> {
    let length = read_int(buf)?;
    let n = usize::try_from(length).map_err(|_| DecodeError::NegativeLength { what, length })?;
    if n > max {
        return Err(DecodeError::TooLong { what, length: n, max });
    }
    Ok(n)
}

/// [long string]: an [int] n, then n bytes of UTF-8. Spec section 3. Bounded by
/// [`LONG_BYTES_MAX`].
pub fn read_long_string<'a>(buf: &mut &'a [u8]) -> Result<&'a str, DecodeError> {
    let n = read_length(buf, "[long string]", LONG_BYTES_MAX)?;
    utf8(read_raw(buf, n, "[long string]")?, "[long string]")
}

/// Reads a [short] count bounded by `max`; also refuses counts that cannot fit in what remains
/// given each item's smallest encoding, so `Vec::with_capacity(count)` is safe.
pub fn read_count(
    buf: &mut &[u8],
    what: &'static str,
    max: usize,
    item_min_bytes: usize,
) -> Result<usize, DecodeError> {
    let n = read_short(buf)? as usize;
    if n > max {
        return Err(DecodeError::TooLong { what, length: n, max });
    }
    let needed = n.saturating_mul(item_min_bytes);
    if needed > buf.len() {
        return Err(DecodeError::Truncated {
            what,
            needed,
            remaining: buf.len(),
        });
    }
    Ok(n)
}

/// [string list]: a [short] n, then n [string]. Spec section 3. At most [`MAP_ENTRIES_MAX`].
pub fn read_string_list<'a>(buf: &mut &'a [u8]) -> Result<Vec<&'a str>, DecodeError> {
    let n = read_count(buf, "[string list]", MAP_ENTRIES_MAX, 2)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(read_string(buf)?);
    }
    Ok(out)
}

/// [bytes]: an [int] n, then n bytes; n < 0 is null. Spec section 3. Bounded by
/// [`LONG_BYTES_MAX`].
pub fn read_bytes<'a>(buf: &mut &'a [u8]) -> Result<Option<&'a [u8]>, DecodeError> {
    let length = read_int(buf)?;
    if length < 0 {
        return Ok(None);
    }
    let n = length as usize;
    if n > LONG_BYTES_MAX {
        return Err(DecodeError::TooLong {
            what: "[bytes]",
            length: n,
            max: LONG_BYTES_MAX,
        });
    }
    Ok(Some(read_raw(buf, n, "[bytes]")?))
}

/// A bound variable as sent in QUERY, EXECUTE and BATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Length -1.
    Null,
    /// Length -2: leave the column as it is.
    NotSet,
    Bytes(&'a [u8]),
}

/// [value]: an [int] n, then n bytes; -1 is null, -2 is not set, below -2 is an error.
/// Spec section 3. Bounded by [`LONG_BYTES_MAX`].
pub fn read_value<'a>(buf: &mut &'a [u8]) -> Result<Value<'a>, DecodeError> {
    match read_int(buf)? {
        -1 => Ok(Value::Null),
        -2 => Ok(Value::NotSet),
        length if length < 0 => Err(DecodeError::NegativeLength {
            what: "[value]",
            length,
        }),
        length => {
            let n = length as usize;
            if n > LONG_BYTES_MAX {
                return Err(DecodeError::TooLong {
                    what: "[value]",
                    length: n,
                    max: LONG_BYTES_MAX,
                });
            }
            Ok(Value::Bytes(read_raw(buf, n, "[value]")?))
        }
    }
}

/// [short bytes]: a [short] n, then n bytes. Spec section 3. The short bounds it at 65535.
pub fn read_short_bytes<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let n = read_short(buf)? as usize;
    read_raw(buf, n, "[short bytes]")
}

/// [inet]: a [byte] n (4 or 16), n address bytes, then an [int] port. Spec section 3.
pub fn read_inet(buf: &mut &[u8]) -> Result<SocketAddr, DecodeError> {
    let length = read_byte(buf)?;
    let ip = match length {
        4 => IpAddr::V4(Ipv4Addr::from(read_array::<4>(buf, "[inet] address")?)),
        16 => IpAddr::V6(Ipv6Addr::from(read_array::<16>(buf, "[inet] address")?)),
        _ => return Err(DecodeError::InvalidInetLength { length }),
    };
    let port = read_int(buf)?;
    let port = u16::try_from(port).map_err(|_| DecodeError::Invalid {
        what: "[inet] port",
        value: port.into(),
    })?;
    Ok(SocketAddr::new(ip, port))
}

/// [consistency]: a [short] naming a consistency level. Spec section 3.
#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Consistency {
    Any = 0x0000,
    One = 0x0001,
    Two = 0x0002,
    Three = 0x0003,
    Quorum = 0x0004,
    All = 0x0005,
    LocalQuorum = 0x0006,
    EachQuorum = 0x0007,
    Serial = 0x0008,
    LocalSerial = 0x0009,
    LocalOne = 0x000A,
}

impl Consistency {
    pub const ALL_LEVELS: [Consistency; 11] = [
        Consistency::Any,
        Consistency::One,
        Consistency::Two,
        Consistency::Three,
        Consistency::Quorum,
        Consistency::All,
        Consistency::LocalQuorum,
        Consistency::EachQuorum,
        Consistency::Serial,
        Consistency::LocalSerial,
        Consistency::LocalOne,
    ];

    pub fn from_short(value: u16) -> Result<Consistency, DecodeError> {
        Consistency::ALL_LEVELS
            .into_iter()
            .find(|c| *c as u16 == value)
            .ok_or(DecodeError::UnknownConsistency { value })
    }
}

/// Reads a [consistency]. Spec section 3.
pub fn read_consistency(buf: &mut &[u8]) -> Result<Consistency, DecodeError> {
    Consistency::from_short(read_short(buf)?)
}

/// [string map]: a [short] n, then n <[string] key><[string] value>. Spec section 3. At most
/// [`MAP_ENTRIES_MAX`] entries; order is kept as sent.
pub fn read_string_map<'a>(buf: &mut &'a [u8]) -> Result<Vec<(&'a str, &'a str)>, DecodeError> {
    let n = read_count(buf, "[string map]", MAP_ENTRIES_MAX, 4)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let key = read_string(buf)?;
        out.push((key, read_string(buf)?));
    }
    Ok(out)
}

/// [string multimap]: a [short] n, then n <[string] key><[string list] values>. Spec section 3.
pub fn read_string_multimap<'a>(buf: &mut &'a [u8]) -> Result<Vec<(&'a str, Vec<&'a str>)>, DecodeError> {
    let n = read_count(buf, "[string multimap]", MAP_ENTRIES_MAX, 4)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let key = read_string(buf)?;
        out.push((key, read_string_list(buf)?));
    }
    Ok(out)
}

/// A decoded [bytes map], in wire order; a `None` value was sent as null.
pub type BytesMap<'a> = Vec<(&'a str, Option<&'a [u8]>)>;

/// [bytes map]: a [short] n, then n <[string] key><[bytes] value>. Spec section 3.
pub fn read_bytes_map<'a>(buf: &mut &'a [u8]) -> Result<BytesMap<'a>, DecodeError> {
    let n = read_count(buf, "[bytes map]", MAP_ENTRIES_MAX, 6)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let key = read_string(buf)?;
        out.push((key, read_bytes(buf)?));
    }
    Ok(out)
}

// ---- writers -------------------------------------------------------------------------------

/// Writes a [byte].
pub fn write_byte(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

/// Writes a [short].
pub fn write_short(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Writes an [int].
pub fn write_int(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Writes a [long].
pub fn write_long(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Writes a [uuid].
pub fn write_uuid(out: &mut Vec<u8>, v: &[u8; 16]) {
    out.extend_from_slice(v);
}

fn short_len(len: usize, what: &str) -> u16 {
    u16::try_from(len).unwrap_or_else(|_| panic!("{what} of {len} bytes does not fit a [short] length"))
}

fn int_len(len: usize, what: &str) -> i32 {
    assert!(
        len <= LONG_BYTES_MAX,
        "{what} of {len} bytes exceeds LONG_BYTES_MAX"
    );
    len as i32
}

/// Writes a [string]. Panics if longer than 65535 bytes: callers bound names and messages.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    write_short(out, short_len(s.len(), "[string]"));
    out.extend_from_slice(s.as_bytes());
}

/// Writes a [long string].
pub fn write_long_string(out: &mut Vec<u8>, s: &str) {
    write_int(out, int_len(s.len(), "[long string]"));
    out.extend_from_slice(s.as_bytes());
}

/// Writes a [string list].
pub fn write_string_list<S: AsRef<str>>(out: &mut Vec<u8>, list: &[S]) {
    write_short(out, short_len(list.len(), "[string list]"));
    for s in list {
        write_string(out, s.as_ref());
    }
}

/// Writes [bytes]; `None` is null (length -1).
pub fn write_bytes(out: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => write_int(out, -1),
        Some(b) => {
            write_int(out, int_len(b.len(), "[bytes]"));
            out.extend_from_slice(b);
        }
    }
}

/// Writes a [value].
pub fn write_value(out: &mut Vec<u8>, v: Value<'_>) {
    match v {
        Value::Null => write_int(out, -1),
        Value::NotSet => write_int(out, -2),
        Value::Bytes(b) => write_bytes(out, Some(b)),
    }
}

/// Writes [short bytes].
pub fn write_short_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_short(out, short_len(b.len(), "[short bytes]"));
    out.extend_from_slice(b);
}

/// Writes an [inet].
pub fn write_inet(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(16);
            out.extend_from_slice(&ip.octets());
        }
    }
    write_int(out, i32::from(addr.port()));
}

/// Writes a [consistency].
pub fn write_consistency(out: &mut Vec<u8>, c: Consistency) {
    write_short(out, c as u16);
}

/// Writes a [string map].
pub fn write_string_map<K: AsRef<str>, V: AsRef<str>>(out: &mut Vec<u8>, map: &[(K, V)]) {
    write_short(out, short_len(map.len(), "[string map]"));
    for (k, v) in map {
        write_string(out, k.as_ref());
        write_string(out, v.as_ref());
    }
}

/// Writes a [string multimap].
pub fn write_string_multimap<K: AsRef<str>, V: AsRef<str>>(out: &mut Vec<u8>, map: &[(K, Vec<V>)]) {
    write_short(out, short_len(map.len(), "[string multimap]"));
    for (k, v) in map {
        write_string(out, k.as_ref());
        write_string_list(out, v);
    }
}

/// Writes a [bytes map].
pub fn write_bytes_map<K: AsRef<str>>(out: &mut Vec<u8>, map: &[(K, Option<&[u8]>)]) {
    write_short(out, short_len(map.len(), "[bytes map]"));
    for (k, v) in map {
        write_string(out, k.as_ref());
        write_bytes(out, *v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that `read` gives `expected` on the full encoding, consumes all of it, and fails
    /// with an error (never a panic) on every strict prefix.
    fn round_trip<T, F>(encoded: &[u8], expected: T, read: F)
    where
        T: PartialEq + fmt::Debug,
        F: for<'a> Fn(&mut &'a [u8]) -> Result<T, DecodeError>,
    {
        let mut cursor = encoded;
        assert_eq!(read(&mut cursor).expect("full encoding decodes"), expected);
        assert!(cursor.is_empty(), "reader left {} bytes", cursor.len());
        for cut in 0..encoded.len() {
            let mut cursor = &encoded[..cut];
            assert!(read(&mut cursor).is_err(), "prefix of {cut} bytes was accepted");
        }
    }

    fn encode(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    #[test]
    fn integers_are_big_endian() {
        let e = encode(|o| write_short(o, 0x0102));
        assert_eq!(e, [1, 2]);
        round_trip(&e, 0x0102, read_short);
        let e = encode(|o| write_int(o, -2));
        assert_eq!(e, [0xFF, 0xFF, 0xFF, 0xFE]);
        round_trip(&e, -2, read_int);
        let e = encode(|o| write_long(o, 0x0102_0304_0506_0708));
        assert_eq!(e, [1, 2, 3, 4, 5, 6, 7, 8]);
        round_trip(&e, 0x0102_0304_0506_0708, read_long);
        round_trip(&[7], 7, read_byte);
    }

    #[test]
    fn uuid_round_trips() {
        let id: [u8; 16] = std::array::from_fn(|i| i as u8);
        round_trip(&encode(|o| write_uuid(o, &id)), id, read_uuid);
    }

    #[test]
    fn strings_round_trip_and_reject_bad_utf8() {
        let e = encode(|o| write_string(o, "héllo"));
        assert_eq!(&e[..2], [0, 6]);
        round_trip(&e, "héllo".to_owned(), |b| read_string(b).map(str::to_owned));
        let e = encode(|o| write_long_string(o, "SELECT * FROM t"));
        round_trip(&e, "SELECT * FROM t".to_owned(), |b| {
            read_long_string(b).map(str::to_owned)
        });
        let mut bad: &[u8] = &[0, 2, 0xC3, 0x28];
        assert_eq!(
            read_string(&mut bad),
            Err(DecodeError::InvalidUtf8 { what: "[string]" })
        );
    }

    #[test]
    fn a_long_string_longer_than_the_bound_is_refused_before_reading() {
        let mut b: &[u8] = &[0x7F, 0xFF, 0xFF, 0xFF];
        assert!(matches!(
            read_long_string(&mut b),
            Err(DecodeError::TooLong { .. })
        ));
        let mut b: &[u8] = &[0xFF, 0xFF, 0xFF, 0xFF];
        assert!(matches!(
            read_long_string(&mut b),
            Err(DecodeError::NegativeLength { .. })
        ));
    }

    #[test]
    fn string_list_round_trips_and_counts_are_bounded() {
        let e = encode(|o| write_string_list(o, &["TOPOLOGY_CHANGE", "STATUS_CHANGE"]));
        round_trip(
            &e,
            vec!["TOPOLOGY_CHANGE".to_owned(), "STATUS_CHANGE".to_owned()],
            |b| {
                Ok(read_string_list(b)?
                    .into_iter()
                    .map(str::to_owned)
                    .collect::<Vec<_>>())
            },
        );
        // A count of 65535 with nothing behind it must not allocate room for 65535 entries.
        let mut b: &[u8] = &[0xFF, 0xFF];
        assert!(matches!(
            read_string_list(&mut b),
            Err(DecodeError::TooLong { .. })
        ));
        let mut b: &[u8] = &[0x01, 0x00];
        assert!(matches!(
            read_string_list(&mut b),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn bytes_round_trip_including_null_and_empty() {
        let own = |b: &mut &[u8]| read_bytes(b).map(|v| v.map(<[u8]>::to_vec));
        round_trip(
            &encode(|o| write_bytes(o, Some(b"abc"))),
            Some(b"abc".to_vec()),
            own,
        );
        round_trip(&encode(|o| write_bytes(o, Some(b""))), Some(Vec::new()), own);
        round_trip(&encode(|o| write_bytes(o, None)), None, own);
        // Any negative length is null for [bytes], not only -1.
        let mut b: &[u8] = &[0xFF, 0xFF, 0xFF, 0xFE];
        assert_eq!(read_bytes(&mut b), Ok(None));
    }

    #[test]
    fn value_distinguishes_null_not_set_and_rejects_below_minus_two() {
        let own = |b: &mut &[u8]| {
            read_value(b).map(|v| match v {
                Value::Bytes(x) => Some(x.to_vec()),
                Value::Null => None,
                Value::NotSet => Some(b"<not set>".to_vec()),
            })
        };
        round_trip(
            &encode(|o| write_value(o, Value::Bytes(&[1, 2]))),
            Some(vec![1, 2]),
            own,
        );
        round_trip(&encode(|o| write_value(o, Value::Null)), None, own);
        round_trip(
            &encode(|o| write_value(o, Value::NotSet)),
            Some(b"<not set>".to_vec()),
            own,
        );
        let mut b: &[u8] = &[0xFF, 0xFF, 0xFF, 0xFD];
        assert_eq!(
            read_value(&mut b),
            Err(DecodeError::NegativeLength {
                what: "[value]",
                length: -3
            })
        );
    }

    #[test]
    fn short_bytes_round_trip() {
        let e = encode(|o| write_short_bytes(o, &[9; 16]));
        round_trip(&e, vec![9; 16], |b| read_short_bytes(b).map(<[u8]>::to_vec));
    }

    #[test]
    fn inet_round_trips_for_both_families_and_rejects_other_lengths() {
        let v4: SocketAddr = "127.0.0.2:9042".parse().expect("addr");
        let e = encode(|o| write_inet(o, v4));
        assert_eq!(e, [4, 127, 0, 0, 2, 0, 0, 0x23, 0x52]);
        round_trip(&e, v4, read_inet);
        let v6: SocketAddr = "[::1]:9042".parse().expect("addr");
        round_trip(&encode(|o| write_inet(o, v6)), v6, read_inet);
        let mut b: &[u8] = &[5, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            read_inet(&mut b),
            Err(DecodeError::InvalidInetLength { length: 5 })
        );
    }

    #[test]
    fn every_consistency_round_trips_and_unknown_ones_fail() {
        for c in Consistency::ALL_LEVELS {
            round_trip(&encode(|o| write_consistency(o, c)), c, read_consistency);
        }
        let mut b: &[u8] = &[0, 0x0B];
        assert_eq!(
            read_consistency(&mut b),
            Err(DecodeError::UnknownConsistency { value: 0x0B })
        );
    }

    #[test]
    fn maps_round_trip() {
        let e = encode(|o| write_string_map(o, &[("CQL_VERSION", "3.0.0"), ("DRIVER_NAME", "x")]));
        round_trip(
            &e,
            vec![
                ("CQL_VERSION".to_owned(), "3.0.0".to_owned()),
                ("DRIVER_NAME".into(), "x".into()),
            ],
            |b| {
                Ok(read_string_map(b)?
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect::<Vec<_>>())
            },
        );
        let e =
            encode(|o| write_string_multimap(o, &[("COMPRESSION", vec!["lz4", "snappy"]), ("X", vec![])]));
        round_trip(
            &e,
            vec![
                (
                    "COMPRESSION".to_owned(),
                    vec!["lz4".to_owned(), "snappy".to_owned()],
                ),
                ("X".into(), vec![]),
            ],
            |b| {
                Ok(read_string_multimap(b)?
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect::<Vec<_>>()))
                    .collect::<Vec<_>>())
            },
        );
        let e = encode(|o| write_bytes_map(o, &[("k", Some(&b"v"[..])), ("n", None)]));
        round_trip(
            &e,
            vec![("k".to_owned(), Some(b"v".to_vec())), ("n".into(), None)],
            |b| {
                Ok(read_bytes_map(b)?
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.map(<[u8]>::to_vec)))
                    .collect::<Vec<_>>())
            },
        );
    }
}
