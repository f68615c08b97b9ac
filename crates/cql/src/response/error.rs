//! ERROR (0x00): a request failed. Spec section 4.2.1.
//!
//! Body: `<code: [int]><message: [string]>` and the code's fields. The codes and their fields
//! live in [`crate::error`], shared with the layers that raise them; this file is the opcode's
//! place in the tree.

pub use crate::error::{ErrorBody, ErrorCode, WireError as Error};
