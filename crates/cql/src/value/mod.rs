//! CQL values: types, the serialized form of each type (both directions), and literals.
//!
//! A value travels through the server in one form only: the bytes of a v4 [bytes] field
//! (native_protocol_v4.spec section 6). Clients bind them, the storage engine stores them and
//! RESULT rows return them unchanged, so this module works on `&[u8]` wherever it can:
//! [`validate`] checks bound bytes without allocating, [`compare`] orders them as Cassandra
//! does, and [`order`] turns them into keys whose byte order is that order. [`Value`] is the
//! decoded tree, for the places that need to look inside (literals, DESCRIBE, tests).

pub mod literal;

mod bignum;
mod codec;
mod compare;
mod convert;
mod error;
pub mod json;
pub mod order;
mod text;
mod types;
mod vint;

pub use codec::{
    canonicalize, encode_list, encode_map, encode_set, encode_tuple, split_components, validate, Value,
    COLLECTION_ELEMENTS_MAX,
};
pub use compare::compare;
pub use convert::literal_to_bytes;
pub use error::ValueError;
pub use literal::Literal;
pub use order::{decode_order_key, encode_order_key, ORDERED_VALUE_MAX_BYTES};
pub use text::to_cql_literal;
pub use types::{
    DataType, TypeError, UserType, TUPLE_COMPONENTS_MAX, TYPE_NESTING_MAX, TYPE_TEXT_MAX_BYTES,
    UDT_FIELDS_MAX,
};
