//! AUTH_RESPONSE: the client's SASL token. PLAIN completes in one step: AUTH_SUCCESS, or an
//! authentication error (0x0100) and the session stays unauthenticated.

use hayate_cql::error::{ErrorBody, WireError};
use hayate_cql::request::AuthResponse;
use hayate_cql::response::{AuthSuccess, Response};

use super::{Phase, Session};

pub async fn handle(session: &Session, auth: &AuthResponse<'_>) -> Response {
    let Some(mut exchange) = session.state().exchange.take() else {
        return Response::Error(WireError::protocol(
            "Unexpected AUTH_RESPONSE: no authentication in progress",
        ));
    };
    let token = auth.token.unwrap_or(&[]);
    // Password hashing takes milliseconds: done without holding the session lock.
    let outcome = exchange.evaluate(token).await;
    let mut state = session.state();
    match outcome {
        Ok(role) => {
            tracing::debug!(peer = %session.peer, role = role.name(), "authenticated");
            state.role = Some(role);
            state.phase = Phase::Ready;
            Response::AuthSuccess(AuthSuccess { token: None })
        }
        Err(e) => {
            tracing::info!(peer = %session.peer, "authentication failed: {e}");
            // A new exchange for the client's next attempt.
            state.exchange = session.node.auth.new_exchange();
            // Always 0x0100 (bad credentials), as Cassandra answers.
            debug_assert_eq!(e.code(), hayate_cql::error::ErrorCode::AuthenticationError);
            Response::Error(WireError::new(ErrorBody::AuthenticationError, e.to_string()))
        }
    }
}
