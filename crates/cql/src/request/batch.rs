//! BATCH (0x0D): several DML statements applied together. Spec section 4.1.7.
//!
//! ```text
//! <type: [byte]><n: [short]><query_1>...<query_n>
//!   <consistency: [consistency]><flags: [byte]>[<serial_consistency>][<timestamp: [long]>]
//! query_i = <kind: [byte]><string_or_id><n: [short]>([name_i])<value_i>...
//! ```
//!
//! In v5 the flags are an [int], and two may follow the timestamp: `<keyspace: [string]>`
//! (0x80) and `<now_in_seconds: [int]>` (0x100), as in QUERY.
//!
//! kind 0 carries a [long string] statement, kind 1 a [short bytes] prepared id. Flag 0x40
//! (named values) is specified but, as the spec itself says, unusable (CASSANDRA-10246); we
//! decode it anyway because the layout is unambiguous.

use super::execute::read_prepared_id;
use super::query::{
    flags, read_flags, read_keyspace, read_serial_consistency, read_timestamp, read_values, write_flags,
    write_values, Values,
};
use crate::frame::PROTOCOL_V4;
use crate::wire::{
    read_byte, read_consistency, read_count, read_int, read_long_string, write_byte, write_consistency,
    write_int, write_long, write_long_string, write_short, write_short_bytes, write_string, Consistency,
    DecodeError,
};

/// The most statements in one batch. The count is a [short]; each statement is at least 5
/// bytes, so the frame bound caps it further. Cassandra bounds batches by bytes instead
/// (`batch_size_fail_threshold`), which the executor applies.
pub const BATCH_STATEMENTS_MAX: usize = u16::MAX as usize;

const FLAG_WITH_SERIAL_CONSISTENCY: u32 = 0x10;
const FLAG_WITH_DEFAULT_TIMESTAMP: u32 = 0x20;
const FLAG_WITH_NAMES_FOR_VALUES: u32 = 0x40;

#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchType {
    Logged = 0,
    Unlogged = 1,
    Counter = 2,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchStatement<'a> {
    Query { query: &'a str, values: Values<'a> },
    Prepared { id: &'a [u8], values: Values<'a> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<'a> {
    pub batch_type: BatchType,
    pub statements: Vec<BatchStatement<'a>>,
    pub consistency: Consistency,
    pub serial_consistency: Option<Consistency>,
    pub default_timestamp_us: Option<i64>,
    /// v5: the keyspace unqualified names resolve in.
    pub keyspace: Option<&'a str>,
    /// v5: the time, in seconds, at which TTLs are judged.
    pub now_in_seconds: Option<i32>,
}

impl<'a> Batch<'a> {
    /// Decodes a protocol v4 body.
    pub fn decode(buf: &mut &'a [u8]) -> Result<Batch<'a>, DecodeError> {
        Batch::decode_versioned(buf, PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &'a [u8], version: u8) -> Result<Batch<'a>, DecodeError> {
        let batch_type = match read_byte(buf)? {
            0 => BatchType::Logged,
            1 => BatchType::Unlogged,
            2 => BatchType::Counter,
            other => {
                return Err(DecodeError::Invalid {
                    what: "batch type",
                    value: other.into(),
                })
            }
        };
        let n = read_count(buf, "batch statements", BATCH_STATEMENTS_MAX, 5)?;
        let mut statements = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = read_byte(buf)?;
            statements.push(match kind {
                0 => {
                    let query = read_long_string(buf)?;
                    BatchStatement::Query {
                        query,
                        values: read_values(buf, false)?,
                    }
                }
                1 => {
                    let id = read_prepared_id(buf)?;
                    BatchStatement::Prepared {
                        id,
                        values: read_values(buf, false)?,
                    }
                }
                other => {
                    return Err(DecodeError::Invalid {
                        what: "batch statement kind",
                        value: other.into(),
                    })
                }
            });
        }
        let consistency = read_consistency(buf)?;
        let f = read_flags(buf, version)?;
        if f & FLAG_WITH_NAMES_FOR_VALUES != 0 {
            // The names flag comes after the values it governs, so the values above were read
            // as unnamed. The spec calls this feature broken (CASSANDRA-10246); refuse it.
            return Err(DecodeError::Invalid {
                what: "batch flags (named values are unsupported)",
                value: i64::from(f),
            });
        }
        let serial_consistency = if f & FLAG_WITH_SERIAL_CONSISTENCY != 0 {
            Some(read_serial_consistency(buf)?)
        } else {
            None
        };
        let default_timestamp_us = if f & FLAG_WITH_DEFAULT_TIMESTAMP != 0 {
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
        Ok(Batch {
            batch_type,
            statements,
            consistency,
            serial_consistency,
            default_timestamp_us,
            keyspace,
            now_in_seconds,
        })
    }

    /// Encodes a protocol v4 body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        write_byte(out, self.batch_type as u8);
        let n = u16::try_from(self.statements.len())
            .unwrap_or_else(|_| panic!("batch over {BATCH_STATEMENTS_MAX}"));
        write_short(out, n);
        for s in &self.statements {
            let values = match s {
                BatchStatement::Query { query, values } => {
                    write_byte(out, 0);
                    write_long_string(out, query);
                    values
                }
                BatchStatement::Prepared { id, values } => {
                    write_byte(out, 1);
                    write_short_bytes(out, id);
                    values
                }
            };
            assert!(
                !matches!(values, Values::Named(_)),
                "named values in a batch are unsupported"
            );
            write_values(out, values);
        }
        write_consistency(out, self.consistency);
        let mut f = 0;
        if self.serial_consistency.is_some() {
            f |= FLAG_WITH_SERIAL_CONSISTENCY;
        }
        if self.default_timestamp_us.is_some() {
            f |= FLAG_WITH_DEFAULT_TIMESTAMP;
        }
        if self.keyspace.is_some() {
            f |= flags::WITH_KEYSPACE;
        }
        if self.now_in_seconds.is_some() {
            f |= flags::WITH_NOW_IN_SECONDS;
        }
        write_flags(out, f, version);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Value;

    #[test]
    fn a_mixed_batch_round_trips_and_rejects_truncation() {
        let b = Batch {
            batch_type: BatchType::Unlogged,
            statements: vec![
                BatchStatement::Query {
                    query: "INSERT INTO t (k, v) VALUES (?, ?)",
                    values: Values::Positional(vec![Value::Bytes(b"a"), Value::Null]),
                },
                BatchStatement::Prepared {
                    id: &[7; 16],
                    values: Values::Positional(vec![Value::NotSet]),
                },
                BatchStatement::Query {
                    query: "DELETE FROM t WHERE k = 'b'",
                    values: Values::Positional(vec![]),
                },
            ],
            consistency: Consistency::Quorum,
            serial_consistency: Some(Consistency::Serial),
            default_timestamp_us: Some(42),
            keyspace: None,
            now_in_seconds: None,
        };
        let mut out = Vec::new();
        b.encode(&mut out);
        let mut cursor = out.as_slice();
        assert_eq!(Batch::decode(&mut cursor), Ok(b.clone()));
        assert!(cursor.is_empty());
        for cut in 0..out.len() {
            assert!(
                Batch::decode(&mut &out[..cut]).is_err(),
                "accepted a {cut}-byte prefix"
            );
        }
        let v5 = Batch {
            keyspace: Some("ks1"),
            now_in_seconds: Some(1_700_000_000),
            ..b
        };
        let mut out = Vec::new();
        v5.encode_versioned(&mut out, crate::frame::PROTOCOL_V5);
        let mut cursor = out.as_slice();
        assert_eq!(
            Batch::decode_versioned(&mut cursor, crate::frame::PROTOCOL_V5),
            Ok(v5)
        );
        assert!(cursor.is_empty());
    }

    #[test]
    fn unknown_batch_types_and_statement_kinds_are_refused() {
        let mut b: &[u8] = &[3, 0, 0];
        assert!(matches!(
            Batch::decode(&mut b),
            Err(DecodeError::Invalid {
                what: "batch type",
                ..
            })
        ));
        let mut b: &[u8] = &[0, 0, 1, 2, 0, 0, 0, 0, 0];
        assert!(matches!(Batch::decode(&mut b), Err(DecodeError::Invalid { .. })));
    }
}
