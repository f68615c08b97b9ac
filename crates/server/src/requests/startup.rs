//! STARTUP: the CQL version and compression the client wants; answered with READY, or with
//! AUTHENTICATE when the node checks passwords.

use hayate_cql::compression::Compression;
use hayate_cql::error::WireError;
use hayate_cql::request::Startup;
use hayate_cql::response::{Authenticate, Ready, Response};

use super::options::supported_names;
use super::{Phase, Session};

pub fn handle(session: &Session, startup: &Startup<'_>) -> Response {
    // Cassandra asks only for a well-formed version of at least 3 (the scylla driver sends
    // 4.0.0).
    let version = startup.cql_version().unwrap_or("");
    let well_formed = version.split('.').count() >= 2
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if !well_formed || major < 3 {
        return Response::Error(WireError::protocol(format!(
            "Invalid or unsupported CQL version {version}; this node speaks CQL {}",
            crate::system::CQL_VERSION
        )));
    }
    // An algorithm we do not know is refused, as Cassandra does, rather than silently
    // answered uncompressed: the client would send compressed frames we cannot read.
    let compression = match startup.compression() {
        None => None,
        Some(name) => match Compression::from_name(name) {
            Some(c) => Some(c),
            None => {
                return Response::Error(WireError::protocol(format!(
                    "Unknown compression algorithm: {name}; this node supports {}",
                    supported_names().join(", ")
                )))
            }
        },
    };
    // v5 compresses whole segments with LZ4 only; Cassandra refuses Snappy there.
    if compression == Some(Compression::Snappy) && version_of(session) >= hayate_cql::frame::PROTOCOL_V5 {
        return Response::Error(WireError::protocol(
            "Snappy compression is not supported in protocol V5",
        ));
    }
    let auth = &session.node.auth;
    let mut state = session.state();
    state.compression = compression;
    // Cassandra's STARTUP option: "true" asks for Overloaded errors instead of backpressure.
    state.throw_on_overload = startup
        .option("THROW_ON_OVERLOAD")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    // For system_views.clients; the frame bound keeps them small.
    state.startup_options = startup
        .options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
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

/// The version the STARTUP frame came in (the writer follows each frame before STARTUP).
fn version_of(session: &Session) -> u8 {
    session.writer().version
}
