//! PREPARE (0x09): prepare a statement for EXECUTE. Spec section 4.1.5.
//!
//! Body: the statement as a [long string]. v5 adds `<flags: [int]>` and, with flag 0x01,
//! `<keyspace: [string]>`: the keyspace unqualified names resolve in, instead of the
//! connection's.

use super::query::read_keyspace;
use crate::frame::{PROTOCOL_V4, PROTOCOL_V5};
use crate::wire::{read_int, read_long_string, write_int, write_long_string, write_string, DecodeError};

/// v5 PREPARE flag: a keyspace follows.
pub const FLAG_WITH_KEYSPACE: i32 = 0x01;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare<'a> {
    pub query: &'a str,
    /// v5: the keyspace to prepare in.
    pub keyspace: Option<&'a str>,
}

impl<'a> Prepare<'a> {
    /// Decodes a protocol v4 body.
    pub fn decode(buf: &mut &'a [u8]) -> Result<Prepare<'a>, DecodeError> {
        Prepare::decode_versioned(buf, PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &'a [u8], version: u8) -> Result<Prepare<'a>, DecodeError> {
        let query = read_long_string(buf)?;
        let keyspace = if version >= PROTOCOL_V5 && read_int(buf)? & FLAG_WITH_KEYSPACE != 0 {
            Some(read_keyspace(buf)?)
        } else {
            None
        };
        Ok(Prepare { query, keyspace })
    }

    /// Encodes a protocol v4 body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        write_long_string(out, self.query);
        if version >= PROTOCOL_V5 {
            write_int(
                out,
                if self.keyspace.is_some() {
                    FLAG_WITH_KEYSPACE
                } else {
                    0
                },
            );
            if let Some(keyspace) = self.keyspace {
                write_string(out, keyspace);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_round_trips() {
        let p = Prepare {
            query: "SELECT * FROM ks.t WHERE k = ?",
            keyspace: None,
        };
        let mut out = Vec::new();
        p.encode(&mut out);
        assert_eq!(Prepare::decode(&mut out.as_slice()), Ok(p));
        for cut in 0..out.len() {
            assert!(Prepare::decode(&mut &out[..cut]).is_err());
        }
    }

    #[test]
    fn a_v5_statement_carries_flags_and_a_keyspace() {
        for keyspace in [None, Some("ks1")] {
            let p = Prepare {
                query: "SELECT * FROM t WHERE k = ?",
                keyspace,
            };
            let mut out = Vec::new();
            p.encode_versioned(&mut out, PROTOCOL_V5);
            assert_eq!(Prepare::decode_versioned(&mut out.as_slice(), PROTOCOL_V5), Ok(p));
            for cut in 0..out.len() {
                assert!(Prepare::decode_versioned(&mut &out[..cut], PROTOCOL_V5).is_err());
            }
        }
    }
}
