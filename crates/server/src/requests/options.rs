//! OPTIONS: what STARTUP may ask for.

use hayate_cql::compression::Compression;
use hayate_cql::response::{Response, Supported};

use crate::system::CQL_VERSION;

pub fn handle() -> Response {
    Response::Supported(Supported {
        options: vec![
            ("CQL_VERSION".to_owned(), vec![CQL_VERSION.to_owned()]),
            ("COMPRESSION".to_owned(), supported_names()),
            (
                "PROTOCOL_VERSIONS".to_owned(),
                hayate_cql::frame::PROTOCOL_VERSIONS
                    .iter()
                    .map(|v| (*v).to_owned())
                    .collect(),
            ),
        ],
    })
}

/// The compression algorithms STARTUP may name, as SUPPORTED lists them (Cassandra 4 and 5
/// offer the same two to protocol v4 clients).
pub fn supported_names() -> Vec<String> {
    Compression::ALL.iter().map(|c| c.name().to_owned()).collect()
}
