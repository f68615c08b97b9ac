//! The CQL statement parser: text -> [`ast`]. Filled in by its own change.
