//! The CQL native protocol and statement parser. Built by the CQL server issue.
