//! STARTUP: the CQL version and compression the client wants; answered with READY, or with
//! AUTHENTICATE when the node checks passwords.

use hayate_cql::error::WireError;
use hayate_cql::request::Startup;
use hayate_cql::response::{Authenticate, Ready, Response};

use super::{Phase, Session};

pub fn handle(session: &Session, startup: &Startup<'_>) -> Response {
    let version = startup.cql_version().unwrap_or("");
    if !version.starts_with("3.") {
        return Response::Error(WireError::protocol(format!(
            "Unsupported CQL version {version}; this node speaks CQL 3 ({})",
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
