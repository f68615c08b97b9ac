//! Responses: messages the server sends. One file per opcode (spec section 4.2).

pub mod auth_challenge;
pub mod auth_success;
pub mod authenticate;
pub mod error;
pub mod event;
pub mod ready;
pub mod result;
pub mod supported;

pub use auth_challenge::AuthChallenge;
pub use auth_success::AuthSuccess;
pub use authenticate::Authenticate;
pub use event::{Event, SchemaChange};
pub use ready::Ready;
pub use result::ResultBody;
pub use supported::Supported;
