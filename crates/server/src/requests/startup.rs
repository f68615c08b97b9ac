//! STARTUP: the CQL version and compression the client wants; answered with READY, or with
//! AUTHENTICATE when the node checks passwords.

use hayate_cql::error::WireError;
use hayate_cql::request::Startup;
use hayate_cql::response::{Authenticate, Ready, Response};

use super::{Phase, Session};

pub fn handle(session: &Session, startup: &Startup<'_>) -> Response {
    // Cassandra checks only that the version is well formed (the scylla driver sends 4.0.0).
    let version = startup.cql_version().unwrap_or("");
    let well_formed = version.split('.').count() >= 2
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !well_formed {
        return Response::Error(WireError::protocol(format!(
            "Invalid or unsupported CQL version {version}; this node speaks CQL {}",
            crate::node::CQL_VERSION
        )));
    }
    let compression = match startup.compression() {
        None => false,
        Some(c) if c.eq_ignore_ascii_case("lz4") => true,
        Some(other) => {
            return Response::Error(WireError::protocol(format!(
                "Unknown compression algorithm: {other}; this node supports lz4"
            )))
        }
    };
    let auth = &session.node.auth;
    let mut state = session.state();
    state.compression = compression;
    match auth.new_exchange() {
        Some(exchange) => {
            state.exchange = Some(exchange);
            state.phase = Phase::Authenticating;
            Response::Authenticate(Authenticate {
                authenticator: auth.class_name().to_owned(),
            })
        }
        None => {
            state.role = Some(crate::auth::AuthenticatedRole::anonymous());
            state.phase = Phase::Ready;
            Response::Ready(Ready)
        }
    }
}
