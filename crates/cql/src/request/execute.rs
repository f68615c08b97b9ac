//! EXECUTE (0x0A): run a prepared statement. Spec section 4.1.6.
//!
//! Body: `<id: [short bytes]><query_parameters>`, the parameters being those of QUERY. In v5,
//! `<result_metadata_id: [short bytes]>` follows the id: the digest of the result columns the
//! client knows, so that the server can tell it when they changed (spec v5 section 4.1.6).

use super::query::QueryParameters;
use crate::frame::{PROTOCOL_V4, PROTOCOL_V5};
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
    /// v5: the result metadata id the client holds (`None` before v5).
    pub result_metadata_id: Option<&'a [u8]>,
    pub parameters: QueryParameters<'a>,
}

impl<'a> Execute<'a> {
    /// Decodes a protocol v4 body.
    pub fn decode(buf: &mut &'a [u8]) -> Result<Execute<'a>, DecodeError> {
        Execute::decode_versioned(buf, PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &'a [u8], version: u8) -> Result<Execute<'a>, DecodeError> {
        let id = read_prepared_id(buf)?;
        let result_metadata_id = if version >= PROTOCOL_V5 {
            Some(read_prepared_id(buf)?)
        } else {
            None
        };
        Ok(Execute {
            id,
            result_metadata_id,
            parameters: QueryParameters::decode_versioned(buf, version)?,
        })
    }

    /// Encodes a protocol v4 body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        write_short_bytes(out, self.id);
        if version >= PROTOCOL_V5 {
            write_short_bytes(out, self.result_metadata_id.unwrap_or_default());
        }
        self.parameters.encode_versioned(out, version);
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
        let mut e = Execute {
            id: &[0x5A; 16],
            result_metadata_id: None,
            parameters,
        };
        let mut out = Vec::new();
        e.encode(&mut out);
        assert_eq!(Execute::decode(&mut out.as_slice()), Ok(e.clone()));
        for cut in 0..out.len() {
            assert!(Execute::decode(&mut &out[..cut]).is_err());
        }
        // v5 adds the result metadata id after the statement id.
        e.result_metadata_id = Some(&[0xA5; 16]);
        let mut out = Vec::new();
        e.encode_versioned(&mut out, PROTOCOL_V5);
        assert_eq!(&out[18..20], &[0, 16]);
        assert_eq!(Execute::decode_versioned(&mut out.as_slice(), PROTOCOL_V5), Ok(e));
        for cut in 0..out.len() {
            assert!(Execute::decode_versioned(&mut &out[..cut], PROTOCOL_V5).is_err());
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
