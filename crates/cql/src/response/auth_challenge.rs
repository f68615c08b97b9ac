//! AUTH_CHALLENGE (0x0E): a SASL challenge. Spec section 4.2.7. Body: a [bytes] token.

use crate::wire::{read_bytes, write_bytes, DecodeError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthChallenge {
    pub token: Option<Vec<u8>>,
}

impl AuthChallenge {
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_bytes(out, self.token.as_deref());
    }

    pub fn decode(buf: &mut &[u8]) -> Result<AuthChallenge, DecodeError> {
        Ok(AuthChallenge {
            token: read_bytes(buf)?.map(<[u8]>::to_vec),
        })
    }
}
