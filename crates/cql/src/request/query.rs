//! QUERY (0x07): run a CQL statement given as text. Spec section 4.1.4.
//!
//! Body: `<query: [long string]><query_parameters>`, where the query parameters (shared with
//! EXECUTE) are
//!
//! ```text
//! <consistency: [consistency]><flags: [byte]>
//!   [<n: [short]> n × ([name: [string]] if 0x40) <value: [value]>]   if 0x01
//!   [<result_page_size: [int]>]                                      if 0x04
//!   [<paging_state: [bytes]>]                                        if 0x08
//!   [<serial_consistency: [consistency]>]                            if 0x10
//!   [<timestamp: [long]>]                                            if 0x20
//! ```

use crate::frame::{PROTOCOL_V4, PROTOCOL_V5};
use crate::wire::{
    read_byte, read_bytes, read_consistency, read_count, read_int, read_long, read_long_string, read_string,
    read_value, write_byte, write_bytes, write_consistency, write_int, write_long, write_long_string,
    write_short, write_string, write_value, Consistency, DecodeError, Value,
};

/// The most bound values in one statement: the count is a [short], and Cassandra limits bind
/// markers to 65535 too. Each value is at least 4 bytes, so the frame bound also applies.
pub const BIND_VALUES_MAX: usize = u16::MAX as usize;

/// The largest paging state we accept back. The server creates paging states, and ours are
/// far smaller; anything bigger was not made by us.
pub const PAGING_STATE_MAX_BYTES: usize = 64 * 1024;

/// Query parameter flags (spec section 4.1.4).
pub mod flags {
    pub const VALUES: u8 = 0x01;
    pub const SKIP_METADATA: u8 = 0x02;
    pub const PAGE_SIZE: u8 = 0x04;
    pub const WITH_PAGING_STATE: u8 = 0x08;
    pub const WITH_SERIAL_CONSISTENCY: u8 = 0x10;
    pub const WITH_DEFAULT_TIMESTAMP: u8 = 0x20;
    pub const WITH_NAMES_FOR_VALUES: u8 = 0x40;
    /// v5 only: the flags below need the [int] form of the flags.
    pub const WITH_KEYSPACE: u32 = 0x80;
    pub const WITH_NOW_IN_SECONDS: u32 = 0x100;
}

/// Reads the flags of QUERY, EXECUTE and BATCH: a [byte] before v5, an [int] from v5 on.
pub(crate) fn read_flags(buf: &mut &[u8], version: u8) -> Result<u32, DecodeError> {
    if version >= PROTOCOL_V5 {
        Ok(read_int(buf)? as u32)
    } else {
        // 0x80 and above mean nothing before v5; they are ignored, as the spec says.
        Ok(u32::from(read_byte(buf)? & 0x7F))
    }
}

/// Writes flags in the form `version` uses.
pub(crate) fn write_flags(out: &mut Vec<u8>, flags: u32, version: u8) {
    if version >= PROTOCOL_V5 {
        write_int(out, flags as i32);
    } else {
        let byte = u8::try_from(flags).unwrap_or_else(|_| panic!("flags {flags:#x} need protocol v5"));
        write_byte(out, byte);
    }
}

/// The longest keyspace name a request may carry: Cassandra's limit is 48 characters, and a
/// longer one cannot name a keyspace, so it is refused at decoding.
pub const KEYSPACE_NAME_MAX_BYTES: usize = 256;

/// Reads a v5 per-request keyspace.
pub(crate) fn read_keyspace<'a>(buf: &mut &'a [u8]) -> Result<&'a str, DecodeError> {
    let keyspace = read_string(buf)?;
    if keyspace.len() > KEYSPACE_NAME_MAX_BYTES {
        return Err(DecodeError::TooLong {
            what: "keyspace",
            length: keyspace.len(),
            max: KEYSPACE_NAME_MAX_BYTES,
        });
    }
    Ok(keyspace)
}

/// Bound values: by position, or by marker name (flag 0x40).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Values<'a> {
    #[default]
    None,
    Positional(Vec<Value<'a>>),
    Named(Vec<(&'a str, Value<'a>)>),
}

impl Values<'_> {
    pub fn len(&self) -> usize {
        match self {
            Values::None => 0,
            Values::Positional(v) => v.len(),
            Values::Named(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads `<n>` then n values, each preceded by a name if `named`.
pub(crate) fn read_values<'a>(buf: &mut &'a [u8], named: bool) -> Result<Values<'a>, DecodeError> {
    let n = read_count(buf, "bound values", BIND_VALUES_MAX, if named { 6 } else { 4 })?;
    if named {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let name = read_string(buf)?;
            out.push((name, read_value(buf)?));
        }
        Ok(Values::Named(out))
    } else {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(read_value(buf)?);
        }
        Ok(Values::Positional(out))
    }
}

/// Writes `<n>` then the values (and names); `Values::None` writes a zero count.
pub(crate) fn write_values(out: &mut Vec<u8>, values: &Values<'_>) {
    let n = u16::try_from(values.len()).unwrap_or_else(|_| panic!("more than {BIND_VALUES_MAX} values"));
    write_short(out, n);
    match values {
        Values::None => {}
        Values::Positional(v) => v.iter().for_each(|v| write_value(out, *v)),
        Values::Named(v) => v.iter().for_each(|(name, v)| {
            write_string(out, name);
            write_value(out, *v);
        }),
    }
}

/// Reads a serial consistency, which must be SERIAL or LOCAL_SERIAL.
pub(crate) fn read_serial_consistency(buf: &mut &[u8]) -> Result<Consistency, DecodeError> {
    let c = read_consistency(buf)?;
    match c {
        Consistency::Serial | Consistency::LocalSerial => Ok(c),
        other => Err(DecodeError::Invalid {
            what: "serial consistency",
            value: other as i64,
        }),
    }
}

/// Reads a default timestamp. The spec forbids negatives, but Cassandra only refuses
/// `i64::MIN` (its "no timestamp" marker), and we follow the server drivers were tested against.
pub(crate) fn read_timestamp(buf: &mut &[u8]) -> Result<i64, DecodeError> {
    let ts = read_long(buf)?;
    if ts == i64::MIN {
        return Err(DecodeError::Invalid {
            what: "default timestamp",
            value: ts,
        });
    }
    Ok(ts)
}

/// The parameters shared by QUERY and EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryParameters<'a> {
    pub consistency: Consistency,
    pub values: Values<'a>,
    /// The client already has the result metadata (from PREPARE) and asks us not to resend it.
    pub skip_metadata: bool,
    /// Rows per page; `None` means unpaged (absent or negative on the wire).
    pub page_size: Option<i32>,
    pub paging_state: Option<&'a [u8]>,
    pub serial_consistency: Option<Consistency>,
    pub default_timestamp_us: Option<i64>,
    /// v5: the keyspace to run in instead of the connection's.
    pub keyspace: Option<&'a str>,
    /// v5: the time, in seconds since the epoch, at which TTLs and expiry are judged.
    pub now_in_seconds: Option<i32>,
}

impl<'a> QueryParameters<'a> {
    /// Parameters with only a consistency level, as a driver sends for a simple statement.
    pub fn with_consistency(consistency: Consistency) -> QueryParameters<'a> {
        QueryParameters {
            consistency,
            values: Values::None,
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: None,
            default_timestamp_us: None,
            keyspace: None,
            now_in_seconds: None,
        }
    }

    /// Decodes protocol v4 parameters.
    pub fn decode(buf: &mut &'a [u8]) -> Result<QueryParameters<'a>, DecodeError> {
        QueryParameters::decode_versioned(buf, PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &'a [u8], version: u8) -> Result<QueryParameters<'a>, DecodeError> {
        let consistency = read_consistency(buf)?;
        let f = read_flags(buf, version)?;
        let f8 = f as u8;
        let values = if f8 & flags::VALUES != 0 {
            read_values(buf, f8 & flags::WITH_NAMES_FOR_VALUES != 0)?
        } else {
            Values::None
        };
        let page_size = if f8 & flags::PAGE_SIZE != 0 {
            match read_int(buf)? {
                // Cassandra refuses 0 rather than guess whether it means "unpaged".
                0 => {
                    return Err(DecodeError::Invalid {
                        what: "page size",
                        value: 0,
                    })
                }
                n if n < 0 => None,
                n => Some(n),
            }
        } else {
            None
        };
        let paging_state = if f8 & flags::WITH_PAGING_STATE != 0 {
            let state = read_bytes(buf)?;
            if let Some(s) = state {
                if s.len() > PAGING_STATE_MAX_BYTES {
                    return Err(DecodeError::TooLong {
                        what: "paging state",
                        length: s.len(),
                        max: PAGING_STATE_MAX_BYTES,
                    });
                }
            }
            state
        } else {
            None
        };
        let serial_consistency = if f8 & flags::WITH_SERIAL_CONSISTENCY != 0 {
            Some(read_serial_consistency(buf)?)
        } else {
            None
        };
        let default_timestamp_us = if f8 & flags::WITH_DEFAULT_TIMESTAMP != 0 {
            Some(read_timestamp(buf)?)
        } else {
            None
        };
        let keyspace = if f & flags::WITH_KEYSPACE != 0 {
            Some(read_keyspace(buf)?)
        } else {
            None
        };
        let now_in_seconds = if f & flags::WITH_NOW_IN_SECONDS != 0 {
            Some(read_int(buf)?)
        } else {
            None
        };
        Ok(QueryParameters {
            consistency,
            values,
            skip_metadata: f8 & flags::SKIP_METADATA != 0,
            page_size,
            paging_state,
            serial_consistency,
            default_timestamp_us,
            keyspace,
            now_in_seconds,
        })
    }

    /// Encodes protocol v4 parameters.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        write_consistency(out, self.consistency);
        let mut f = 0u8;
        match self.values {
            Values::None => {}
            Values::Positional(_) => f |= flags::VALUES,
            Values::Named(_) => f |= flags::VALUES | flags::WITH_NAMES_FOR_VALUES,
        }
        if self.skip_metadata {
            f |= flags::SKIP_METADATA;
        }
        if self.page_size.is_some() {
            f |= flags::PAGE_SIZE;
        }
        if self.paging_state.is_some() {
            f |= flags::WITH_PAGING_STATE;
        }
        if self.serial_consistency.is_some() {
            f |= flags::WITH_SERIAL_CONSISTENCY;
        }
        if self.default_timestamp_us.is_some() {
            f |= flags::WITH_DEFAULT_TIMESTAMP;
        }
        let mut wide = u32::from(f);
        if self.keyspace.is_some() {
            wide |= flags::WITH_KEYSPACE;
        }
        if self.now_in_seconds.is_some() {
            wide |= flags::WITH_NOW_IN_SECONDS;
        }
        write_flags(out, wide, version);
        if f & flags::VALUES != 0 {
            write_values(out, &self.values);
        }
        if let Some(n) = self.page_size {
            write_int(out, n);
        }
        if let Some(state) = self.paging_state {
            write_bytes(out, Some(state));
        }
        if let Some(c) = self.serial_consistency {
            write_consistency(out, c);
        }
        if let Some(ts) = self.default_timestamp_us {
            write_long(out, ts);
        }
        if let Some(keyspace) = self.keyspace {
            write_string(out, keyspace);
        }
        if let Some(now) = self.now_in_seconds {
            write_int(out, now);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    pub query: &'a str,
    pub parameters: QueryParameters<'a>,
}

impl<'a> Query<'a> {
    pub fn decode(buf: &mut &'a [u8]) -> Result<Query<'a>, DecodeError> {
        Query::decode_versioned(buf, PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &'a [u8], version: u8) -> Result<Query<'a>, DecodeError> {
        let query = read_long_string(buf)?;
        Ok(Query {
            query,
            parameters: QueryParameters::decode_versioned(buf, version)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        write_long_string(out, self.query);
        self.parameters.encode_versioned(out, version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_round_trip(q: &Query<'_>) {
        let mut out = Vec::new();
        q.encode(&mut out);
        let mut cursor = out.as_slice();
        assert_eq!(&Query::decode(&mut cursor).expect("decodes"), q);
        assert!(cursor.is_empty());
        for cut in 0..out.len() {
            assert!(
                Query::decode(&mut &out[..cut]).is_err(),
                "accepted a {cut}-byte prefix"
            );
        }
    }

    #[test]
    fn a_bare_query_round_trips() {
        check_round_trip(&Query {
            query: "SELECT * FROM system.local",
            parameters: QueryParameters::with_consistency(Consistency::One),
        });
    }

    #[test]
    fn every_parameter_round_trips() {
        let mut p = QueryParameters::with_consistency(Consistency::LocalQuorum);
        p.values = Values::Positional(vec![Value::Bytes(&[0, 0, 0, 1]), Value::Null, Value::NotSet]);
        p.skip_metadata = true;
        p.page_size = Some(5000);
        p.paging_state = Some(&[1, 2, 3]);
        p.serial_consistency = Some(Consistency::LocalSerial);
        p.default_timestamp_us = Some(1_700_000_000_000_000);
        check_round_trip(&Query {
            query: "UPDATE t SET v = ? WHERE k = ? IF v = ?",
            parameters: p.clone(),
        });
        p.values = Values::Named(vec![("k", Value::Bytes(b"x")), ("v", Value::Null)]);
        check_round_trip(&Query {
            query: "UPDATE t SET v = :v WHERE k = :k",
            parameters: p,
        });
    }

    #[test]
    fn v5_parameters_carry_int_flags_a_keyspace_and_now_in_seconds() {
        let mut p = QueryParameters::with_consistency(Consistency::One);
        p.values = Values::Positional(vec![Value::Bytes(&[0, 0, 0, 1])]);
        p.page_size = Some(100);
        p.keyspace = Some("ks1");
        p.now_in_seconds = Some(1_700_000_000);
        let q = Query {
            query: "SELECT * FROM t WHERE k = ?",
            parameters: p,
        };
        let mut out = Vec::new();
        q.encode_versioned(&mut out, PROTOCOL_V5);
        // <long string><consistency><flags: [int]>
        let flags_at = 4 + q.query.len() + 2;
        assert_eq!(&out[flags_at..flags_at + 4], &[0, 0, 0x01, 0x85]);
        let mut cursor = out.as_slice();
        assert_eq!(Query::decode_versioned(&mut cursor, PROTOCOL_V5).as_ref(), Ok(&q));
        assert!(cursor.is_empty());
        for cut in 0..out.len() {
            assert!(
                Query::decode_versioned(&mut &out[..cut], PROTOCOL_V5).is_err(),
                "{cut}"
            );
        }
        // A v4 body read as v5 (or the reverse) does not decode to the same thing.
        let mut v4 = Vec::new();
        Query {
            query: "SELECT 1",
            parameters: QueryParameters::with_consistency(Consistency::One),
        }
        .encode(&mut v4);
        assert!(Query::decode_versioned(&mut v4.as_slice(), PROTOCOL_V5).is_err());
    }

    #[test]
    fn a_zero_page_size_and_a_non_serial_serial_consistency_are_refused() {
        let mut body = Vec::new();
        write_long_string(&mut body, "SELECT 1");
        write_consistency(&mut body, Consistency::One);
        write_byte(&mut body, flags::PAGE_SIZE);
        write_int(&mut body, 0);
        assert!(matches!(
            Query::decode(&mut body.as_slice()),
            Err(DecodeError::Invalid { .. })
        ));

        let mut body = Vec::new();
        write_long_string(&mut body, "SELECT 1");
        write_consistency(&mut body, Consistency::One);
        write_byte(&mut body, flags::WITH_SERIAL_CONSISTENCY);
        write_consistency(&mut body, Consistency::Quorum);
        assert!(matches!(
            Query::decode(&mut body.as_slice()),
            Err(DecodeError::Invalid { .. })
        ));
    }

    #[test]
    fn a_negative_page_size_means_unpaged() {
        let mut body = Vec::new();
        write_long_string(&mut body, "SELECT 1");
        write_consistency(&mut body, Consistency::One);
        write_byte(&mut body, flags::PAGE_SIZE);
        write_int(&mut body, -1);
        let q = Query::decode(&mut body.as_slice()).expect("decodes");
        assert_eq!(q.parameters.page_size, None);
    }
}
