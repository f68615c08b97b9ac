//! EXECUTE (0x0A): run a prepared statement. Spec section 4.1.6.
//!
//! Body: `<id: [short bytes]><query_parameters>`, the parameters being those of QUERY.

use super::query::QueryParameters;
use crate::wire::{read_short_bytes, write_short_bytes, DecodeError};

/// The longest prepared statement id we accept. Ours are 16-byte digests, as Cassandra's are;
/// a longer id cannot be one we issued.
pub const PREPARED_ID_MAX_BYTES: usize = 64;

/// Reads a prepared id ([short bytes]) bounded by [`PREPARED_ID_MAX_BYTES`].
pub(crate) fn read_prepared_id<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let id = read_short_bytes(buf)?;
    if id.len() > PREPARED_ID_MAX_BYTES {
        return Err(DecodeError::TooLong {
            what: "prepared id",
            length: id.len(),
            max: PREPARED_ID_MAX_BYTES,
        });
    }
    Ok(id)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute<'a> {
    pub id: &'a [u8],
    pub parameters: QueryParameters<'a>,
}

impl<'a> Execute<'a> {
    pub fn decode(buf: &mut &'a [u8]) -> Result<Execute<'a>, DecodeError> {
        let id = read_prepared_id(buf)?;
        Ok(Execute {
            id,
            parameters: QueryParameters::decode(buf)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_short_bytes(out, self.id);
        self.parameters.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::query::Values;
    use crate::wire::{Consistency, Value};

    #[test]
    fn an_execute_round_trips_and_rejects_truncation() {
        let mut parameters = QueryParameters::with_consistency(Consistency::Quorum);
        parameters.values = Values::Positional(vec![Value::Bytes(b"key")]);
        parameters.skip_metadata = true;
        let e = Execute {
            id: &[0x5A; 16],
            parameters,
        };
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(Execute::decode(&mut out.as_slice()), Ok(e));
        for cut in 0..out.len() {
            assert!(Execute::decode(&mut &out[..cut]).is_err());
        }
    }

    #[test]
    fn an_id_longer_than_any_we_issue_is_refused() {
        let mut out = Vec::new();
        write_short_bytes(&mut out, &[0; PREPARED_ID_MAX_BYTES + 1]);
        QueryParameters::with_consistency(Consistency::One).encode(&mut out);
        assert!(matches!(
            Execute::decode(&mut out.as_slice()),
            Err(DecodeError::TooLong { .. })
        ));
    }
}
