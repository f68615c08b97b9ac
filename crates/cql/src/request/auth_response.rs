//! AUTH_RESPONSE (0x0F): the client's answer to AUTHENTICATE or AUTH_CHALLENGE.
//! Spec section 4.1.2.
//!
//! Body: a single [bytes] token; its meaning belongs to the authenticator (for
//! PasswordAuthenticator: `\0user\0password`).

use crate::wire::{read_bytes, write_bytes, DecodeError};

/// The largest token we accept. SASL PLAIN tokens are a user name and a password.
pub const AUTH_TOKEN_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthResponse<'a> {
    pub token: Option<&'a [u8]>,
}

impl<'a> AuthResponse<'a> {
    pub fn decode(buf: &mut &'a [u8]) -> Result<AuthResponse<'a>, DecodeError> {
        let token = read_bytes(buf)?;
        if let Some(t) = token {
            if t.len() > AUTH_TOKEN_MAX_BYTES {
                return Err(DecodeError::TooLong {
                    what: "AUTH_RESPONSE token",
                    length: t.len(),
                    max: AUTH_TOKEN_MAX_BYTES,
                });
            }
        }
        Ok(AuthResponse { token })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_bytes(out, self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_sasl_token_round_trips() {
        let r = AuthResponse {
            token: Some(b"\0cassandra\0cassandra"),
        };
        let mut out = Vec::new();
        r.encode(&mut out);
        assert_eq!(AuthResponse::decode(&mut out.as_slice()), Ok(r));
        for cut in 0..out.len() {
            assert!(AuthResponse::decode(&mut &out[..cut]).is_err());
        }
    }
}
