//! Requests: messages a client sends. One file per opcode (spec section 4.1).

pub mod auth_response;
pub mod batch;
pub mod execute;
pub mod options;
pub mod prepare;
pub mod query;
pub mod register;
pub mod startup;

pub use auth_response::AuthResponse;
pub use batch::{Batch, BatchStatement, BatchType};
pub use execute::Execute;
pub use options::Options;
pub use prepare::Prepare;
pub use query::{Query, QueryParameters, Values};
pub use register::{EventType, Register};
pub use startup::Startup;
