//! AUTHENTICATE (0x03): the server requires authentication. Spec section 4.2.3.
//!
//! Body: a [string], the authenticator's class name. Drivers pick their SASL mechanism from
//! it, so it must be a name they know, e.g. `org.apache.cassandra.auth.PasswordAuthenticator`.

use crate::wire::{read_string, write_string, DecodeError};

pub const PASSWORD_AUTHENTICATOR: &str = "org.apache.cassandra.auth.PasswordAuthenticator";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticate {
    pub authenticator: String,
}

impl Authenticate {
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_string(out, &self.authenticator);
    }

    pub fn decode(buf: &mut &[u8]) -> Result<Authenticate, DecodeError> {
        Ok(Authenticate {
            authenticator: read_string(buf)?.to_owned(),
        })
    }
}
