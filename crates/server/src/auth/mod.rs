//! Who a connection is: Cassandra's two built-in authenticators and the role store behind
//! the password one. What it may do is the [`authorizer`]'s business, with the permissions
//! granted to roles in [`permissions`].
//!
//! The handshake, as Cassandra runs it (native_protocol_v4.spec, sections 4.1.2 and 4.2.3):
//!
//! ```text
//! client                               server
//! STARTUP               ──────────▶
//!                       ◀──────────    READY                        (AllowAllAuthenticator)
//!                       ◀──────────    AUTHENTICATE <class name>    (PasswordAuthenticator)
//! AUTH_RESPONSE <token> ──────────▶    SaslExchange::evaluate
//!                       ◀──────────    AUTH_SUCCESS (null token)  or  ERROR 0x0100
//! ```
//!
//! Until a connection has authenticated, Cassandra answers every request but STARTUP,
//! OPTIONS and AUTH_RESPONSE with a protocol error; that belongs to the connection code.
//! Drivers pick their SASL mechanism from the class name in AUTHENTICATE, so it must be
//! Cassandra's exactly. A failed AUTH_RESPONSE leaves the connection open for another try,
//! as in Cassandra; a driver usually closes it.

pub mod authorizer;
pub mod permissions;
pub mod roles;
pub mod sasl;

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use hayate_cql::error::ErrorCode;

use crate::config::AuthenticatorKind;
pub use authorizer::{Authorizer, PermissionError};
pub use roles::RoleStore;
pub use sasl::SaslError;

/// The class name drivers see in AUTHENTICATE and choose PLAIN by.
pub const PASSWORD_AUTHENTICATOR_CLASS: &str = "org.apache.cassandra.auth.PasswordAuthenticator";
pub const ALLOW_ALL_AUTHENTICATOR_CLASS: &str = "org.apache.cassandra.auth.AllowAllAuthenticator";

/// The name Cassandra gives the user of an unauthenticated session.
pub const ANONYMOUS_NAME: &str = "anonymous";

/// How connections authenticate, chosen by `[auth] authenticator`.
#[derive(Clone)]
pub enum Authenticator {
    /// Every connection is [`AuthenticatedRole::anonymous`] from STARTUP on.
    AllowAll,
    /// Connections log in with a role's name and password.
    Password(Arc<RoleStore>),
}

impl Authenticator {
    /// The authenticator `kind` names. The role store exists either way (CREATE ROLE and
    /// friends need it to answer, as Cassandra's `system_auth.roles` does), but only the
    /// password authenticator consults it at login.
    pub fn new(kind: AuthenticatorKind, roles: Arc<RoleStore>) -> Authenticator {
        match kind {
            AuthenticatorKind::AllowAll => Authenticator::AllowAll,
            AuthenticatorKind::Password => Authenticator::Password(roles),
        }
    }

    /// Whether STARTUP is answered with AUTHENTICATE rather than READY.
    #[cfg(test)]
    pub fn requires_authentication(&self) -> bool {
        matches!(self, Authenticator::Password(_))
    }

    /// Cassandra's class name, the body of AUTHENTICATE.
    pub fn class_name(&self) -> &'static str {
        match self {
            Authenticator::AllowAll => ALLOW_ALL_AUTHENTICATOR_CLASS,
            Authenticator::Password(_) => PASSWORD_AUTHENTICATOR_CLASS,
        }
    }

    /// A fresh exchange for a connection that sent STARTUP; `None` when no authentication is
    /// required (answer READY and use [`AuthenticatedRole::anonymous`]).
    pub fn new_exchange(&self) -> Option<SaslExchange> {
        match self {
            Authenticator::AllowAll => None,
            Authenticator::Password(roles) => Some(SaslExchange {
                roles: Arc::clone(roles),
                completed: false,
            }),
        }
    }
}

/// One connection's SASL negotiation. PLAIN completes in one step: the first token either
/// logs in or fails.
pub struct SaslExchange {
    roles: Arc<RoleStore>,
    completed: bool,
}

impl SaslExchange {
    /// Evaluates an AUTH_RESPONSE token (a null token is `&[]`). Blocks its thread for one
    /// password check: await it on the blocking pool. On success answer AUTH_SUCCESS with a
    /// null token; on error answer ERROR with [`AuthError::code`] and the Display message.
    pub async fn evaluate(&mut self, token: &[u8]) -> Result<AuthenticatedRole, AuthError> {
        if self.completed {
            return Err(AuthError::AlreadyAuthenticated);
        }
        let credentials = sasl::parse_plain(token).map_err(AuthError::Sasl)?;
        let role = self
            .roles
            .authenticate(credentials.username, credentials.password)
            .await?;
        self.completed = true;
        Ok(role)
    }

    /// Whether a login succeeded.
    #[cfg(test)]
    pub fn is_complete(&self) -> bool {
        self.completed
    }
}

/// The role a connection acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedRole {
    name: String,
    anonymous: bool,
}

impl AuthenticatedRole {
    /// The user of every connection under AllowAllAuthenticator. Role statements refuse it.
    pub fn anonymous() -> AuthenticatedRole {
        AuthenticatedRole {
            name: ANONYMOUS_NAME.to_string(),
            anonymous: true,
        }
    }

    /// Made only by a successful login (and by tests).
    fn logged_in(name: &str) -> AuthenticatedRole {
        AuthenticatedRole {
            name: name.to_string(),
            anonymous: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_anonymous(&self) -> bool {
        self.anonymous
    }
}

/// Why a login failed. Every case is an AUTHENTICATION error (0x0100); Display is
/// Cassandra's message, which drivers show as it is.
#[derive(Debug)]
#[non_exhaustive]
pub enum AuthError {
    /// The AUTH_RESPONSE token is not a SASL PLAIN token.
    Sasl(SaslError),
    /// Unknown role, wrong password, or a role without a password: one message for all, so
    /// that a failed login does not tell which role names exist.
    BadCredentials { name: String },
    /// The password was right but the role lacks LOGIN.
    LoginNotPermitted { name: String },
    /// Another AUTH_RESPONSE after a successful one.
    AlreadyAuthenticated,
}

impl AuthError {
    pub fn code(&self) -> ErrorCode {
        ErrorCode::AuthenticationError
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::Sasl(e) => write!(f, "{e}"),
            AuthError::BadCredentials { name } => {
                write!(f, "Provided username {name} and/or password are incorrect")
            }
            AuthError::LoginNotPermitted { name } => write!(f, "{name} is not permitted to log in"),
            AuthError::AlreadyAuthenticated => {
                f.write_str("SASL negotiation already complete: this connection has authenticated")
            }
        }
    }
}

impl std::error::Error for AuthError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AuthError::Sasl(e) => Some(e),
            _ => None,
        }
    }
}

/// Why one of the auth stores' JSON files (roles, permissions) could not be read.
pub(crate) enum JsonFileError {
    Read(io::Error),
    Corrupt(String),
}

/// Reads a JSON file of at most `max_bytes` (a larger one is corrupt, not read whole); `None`
/// if it does not exist.
pub(crate) fn read_json_file<T: serde::de::DeserializeOwned>(
    path: &Path,
    max_bytes: u64,
) -> Result<Option<T>, JsonFileError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(JsonFileError::Read(e)),
    };
    let mut text = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut text)
        .map_err(JsonFileError::Read)?;
    if text.len() as u64 > max_bytes {
        return Err(JsonFileError::Corrupt(format!(
            "it is larger than {max_bytes} bytes"
        )));
    }
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| JsonFileError::Corrupt(e.to_string()))
}

/// Runs a login to its end outside any runtime, for the tests.
#[cfg(test)]
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime for the test")
        .block_on(future)
}

#[cfg(test)]
mod tests {
    use super::roles::HashCost;
    use super::*;

    fn password_authenticator(dir: &std::path::Path) -> Authenticator {
        let roles =
            RoleStore::open_with_cost(&dir.join("roles.json"), true, HashCost::CHEAP).expect("open roles");
        Authenticator::new(AuthenticatorKind::Password, Arc::new(roles))
    }

    #[test]
    fn allow_all_needs_no_exchange() {
        let dir = tempfile::tempdir().expect("temp dir");
        let roles = Arc::new(
            RoleStore::open_with_cost(&dir.path().join("roles.json"), true, HashCost::CHEAP).expect("open"),
        );
        let auth = Authenticator::new(AuthenticatorKind::AllowAll, roles);
        assert!(!auth.requires_authentication());
        assert!(auth.new_exchange().is_none());
        assert!(AuthenticatedRole::anonymous().is_anonymous());
    }

    #[test]
    fn a_plain_token_logs_in_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let auth = password_authenticator(dir.path());
        assert!(auth.requires_authentication());
        assert_eq!(
            auth.class_name(),
            "org.apache.cassandra.auth.PasswordAuthenticator"
        );

        let mut exchange = auth.new_exchange().expect("password auth has an exchange");
        let err = block_on(exchange.evaluate(&sasl::encode_plain("cassandra", "wrong")))
            .expect_err("wrong password");
        assert_eq!(
            err.to_string(),
            "Provided username cassandra and/or password are incorrect"
        );
        assert_eq!(err.code(), ErrorCode::AuthenticationError);
        assert!(!exchange.is_complete());

        // A failed attempt leaves the exchange open for another, as Cassandra does.
        let role = block_on(exchange.evaluate(&sasl::encode_plain("cassandra", "cassandra")))
            .expect("right password");
        assert_eq!(role.name(), "cassandra");
        assert!(!role.is_anonymous());
        assert!(exchange.is_complete());
        assert!(matches!(
            block_on(exchange.evaluate(&sasl::encode_plain("cassandra", "cassandra"))),
            Err(AuthError::AlreadyAuthenticated)
        ));
    }

    #[test]
    fn a_malformed_token_is_an_authentication_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let auth = password_authenticator(dir.path());
        let mut exchange = auth.new_exchange().expect("exchange");
        for token in [&b""[..], b"cassandra", b"\0\0", b"\0a\0b\0c"] {
            let err = block_on(exchange.evaluate(token)).expect_err("malformed");
            assert!(matches!(err, AuthError::Sasl(_)), "{err}");
            assert_eq!(err.code(), ErrorCode::AuthenticationError);
        }
    }
}
