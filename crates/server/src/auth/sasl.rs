//! SASL PLAIN (RFC 4616), the one mechanism Cassandra's PasswordAuthenticator speaks.
//!
//! After the server answers STARTUP with AUTHENTICATE, the driver sends one AUTH_RESPONSE whose
//! token is
//!
//! ```text
//! +-----------------+-----+------------------+-----+------------------+
//! | authzid (UTF-8) | NUL | authcid (UTF-8)  | NUL | password (UTF-8) |
//! +-----------------+-----+------------------+-----+------------------+
//! ```
//!
//! The Java and Python drivers leave the authorization identity empty, so the token starts
//! with NUL; Cassandra ignores it, and so do we. Cassandra reads the fields from the end, so a
//! token with only one NUL is a password without a name, and a third NUL is a format error.
//! The messages are Cassandra's, since drivers show them to people as they are.

use std::fmt;

/// The largest token accepted: far beyond any real name and password, and small enough that
/// a client cannot make the server hash megabytes.
pub const SASL_TOKEN_MAX_BYTES: usize = 4096;

/// The parts of a PLAIN token, borrowed from it.
#[derive(PartialEq, Eq)]
pub struct PlainCredentials<'a> {
    /// The authorization identity, usually empty; unused, as in Cassandra.
    pub authzid: &'a str,
    /// The role to log in as.
    pub username: &'a str,
    pub password: &'a str,
}

impl fmt::Debug for PlainCredentials<'_> {
    /// Never prints the password, so that a credential cannot reach a log through `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Why a PLAIN token was refused. Every case is answered with an AUTHENTICATION error (0x0100).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaslError {
    TooLarge {
        len_bytes: usize,
    },
    /// No NUL, or nothing after the last one.
    MissingPassword,
    /// One NUL only, or nothing between the two.
    MissingUsername,
    /// More than two NULs: a name or password cannot contain one.
    ExtraNul,
    NotUtf8,
}

impl fmt::Display for SaslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaslError::TooLarge { len_bytes } => write!(
                f,
                "Credential format error: the SASL token of {len_bytes} bytes exceeds the maximum of \
                 {SASL_TOKEN_MAX_BYTES} bytes"
            ),
            SaslError::MissingPassword => f.write_str("Password must not be null"),
            SaslError::MissingUsername => f.write_str("Authentication ID must not be null"),
            SaslError::ExtraNul => f.write_str(
                "Credential format error: username or password is empty or contains NUL(\\0) character",
            ),
            SaslError::NotUtf8 => f.write_str("Credential format error: username and password must be UTF-8"),
        }
    }
}

impl std::error::Error for SaslError {}

/// Splits a PLAIN token into its three fields.
pub fn parse_plain(token: &[u8]) -> Result<PlainCredentials<'_>, SaslError> {
    if token.len() > SASL_TOKEN_MAX_BYTES {
        return Err(SaslError::TooLarge {
            len_bytes: token.len(),
        });
    }
    let mut fields = token.rsplitn(4, |b| *b == 0);
    // `rsplitn` always yields at least one field: everything after the last NUL.
    let password = fields.next().unwrap_or_default();
    let username = fields.next();
    let authzid = fields.next();
    if fields.next().is_some() {
        return Err(SaslError::ExtraNul);
    }
    // Cassandra checks the password first, so a token with one NUL and an empty tail is
    // reported as a missing password.
    let Some(username) = username.filter(|_| !password.is_empty()) else {
        return Err(SaslError::MissingPassword);
    };
    let Some(authzid) = authzid.filter(|_| !username.is_empty()) else {
        return Err(SaslError::MissingUsername);
    };
    let text = |bytes| std::str::from_utf8(bytes).map_err(|_| SaslError::NotUtf8);
    Ok(PlainCredentials {
        authzid: text(authzid)?,
        username: text(username)?,
        password: text(password)?,
    })
}

/// The token a driver sends for `username` and `password` (for tests and the bench).
#[cfg(test)]
pub fn encode_plain(username: &str, password: &str) -> Vec<u8> {
    let mut token = Vec::with_capacity(2 + username.len() + password.len());
    token.push(0);
    token.extend_from_slice(username.as_bytes());
    token.push(0);
    token.extend_from_slice(password.as_bytes());
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_token_parses() {
        // What the Python driver's PlainTextAuthenticator and the Java driver send.
        let creds = parse_plain(b"\0cassandra\0cassandra").expect("valid token");
        assert_eq!(creds.authzid, "");
        assert_eq!(creds.username, "cassandra");
        assert_eq!(creds.password, "cassandra");
        assert_eq!(encode_plain("cassandra", "cassandra"), b"\0cassandra\0cassandra");
    }

    #[test]
    fn an_authorization_identity_is_accepted_and_kept_apart() {
        let creds = parse_plain(b"admin\0alice\0s3cr\xc3\xa9t").expect("valid token");
        assert_eq!(creds.authzid, "admin");
        assert_eq!(creds.username, "alice");
        assert_eq!(creds.password, "s3cr\u{e9}t");
    }

    #[test]
    fn truncated_tokens_are_refused_with_cassandras_messages() {
        let cases: [(&[u8], SaslError); 8] = [
            (b"", SaslError::MissingPassword),
            (b"alice", SaslError::MissingPassword),
            (b"\0", SaslError::MissingPassword),
            (b"\0alice\0", SaslError::MissingPassword),
            (b"alice\0secret", SaslError::MissingUsername),
            (b"\0\0secret", SaslError::MissingUsername),
            (b"\0\0", SaslError::MissingPassword),
            (b"\0a\0b\0c", SaslError::ExtraNul),
        ];
        for (token, expected) in cases {
            assert_eq!(parse_plain(token), Err(expected), "token {token:?}");
        }
        assert_eq!(
            SaslError::MissingUsername.to_string(),
            "Authentication ID must not be null"
        );
        assert_eq!(
            SaslError::MissingPassword.to_string(),
            "Password must not be null"
        );
    }

    #[test]
    fn garbage_tokens_are_refused_not_panicked_on() {
        assert_eq!(parse_plain(b"\0\xff\xfe\0pw"), Err(SaslError::NotUtf8));
        assert_eq!(parse_plain(b"\0alice\0\xc3"), Err(SaslError::NotUtf8));
        let huge = vec![b'a'; SASL_TOKEN_MAX_BYTES + 1];
        assert_eq!(
            parse_plain(&huge),
            Err(SaslError::TooLarge {
                len_bytes: SASL_TOKEN_MAX_BYTES + 1
            })
        );
        // Every byte string of up to five bytes over a small alphabet: none may panic, and any
        // that parses must reassemble into the token it came from.
        let alphabet = [0u8, b'a', 0xff];
        for len in 0..=5 {
            let mut token = vec![0u8; len];
            for n in 0..alphabet.len().pow(len as u32) {
                let mut k = n;
                for byte in token.iter_mut() {
                    *byte = alphabet[k % alphabet.len()];
                    k /= alphabet.len();
                }
                if let Ok(c) = parse_plain(&token) {
                    let again = format!("{}\0{}\0{}", c.authzid, c.username, c.password);
                    assert_eq!(again.as_bytes(), &token[..]);
                }
            }
        }
    }

    #[test]
    fn debug_output_hides_the_password() {
        let creds = parse_plain(b"\0alice\0hunter2").expect("valid token");
        let shown = format!("{creds:?}");
        assert!(shown.contains("alice") && !shown.contains("hunter2"), "{shown}");
    }
}
