//! AUTH_SUCCESS (0x10): authentication is complete. Spec section 4.2.8.
//! Body: a [bytes] token (null for PasswordAuthenticator).

use crate::wire::{read_bytes, write_bytes, DecodeError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSuccess {
    pub token: Option<Vec<u8>>,
}

impl AuthSuccess {
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_bytes(out, self.token.as_deref());
    }

    pub fn decode(buf: &mut &[u8]) -> Result<AuthSuccess, DecodeError> {
        Ok(AuthSuccess {
            token: read_bytes(buf)?.map(<[u8]>::to_vec),
        })
    }
}
