//! CQL values: types, the serialized form of each type (both directions), and literals.

pub mod literal;

pub use literal::Literal;
