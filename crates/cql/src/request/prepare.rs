//! PREPARE (0x09): prepare a statement for EXECUTE. Spec section 4.1.5.
//!
//! Body: the statement as a [long string]. (v5 adds flags and a keyspace; v4 has neither.)

use crate::wire::{read_long_string, write_long_string, DecodeError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare<'a> {
    pub query: &'a str,
}

impl<'a> Prepare<'a> {
    pub fn decode(buf: &mut &'a [u8]) -> Result<Prepare<'a>, DecodeError> {
        Ok(Prepare {
            query: read_long_string(buf)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_long_string(out, self.query);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_round_trips() {
        let p = Prepare {
            query: "SELECT * FROM ks.t WHERE k = ?",
        };
        let mut out = Vec::new();
        p.encode(&mut out);
        assert_eq!(Prepare::decode(&mut out.as_slice()), Ok(p));
        for cut in 0..out.len() {
            assert!(Prepare::decode(&mut &out[..cut]).is_err());
        }
    }
}
