//! OPTIONS: what STARTUP may ask for.

use hayate_cql::response::{Response, Supported};

use crate::system::CQL_VERSION;

pub fn handle() -> Response {
    Response::Supported(Supported {
        options: vec![
            ("CQL_VERSION".to_owned(), vec![CQL_VERSION.to_owned()]),
            ("COMPRESSION".to_owned(), vec!["lz4".to_owned()]),
            ("PROTOCOL_VERSIONS".to_owned(), vec!["4/v4".to_owned()]),
        ],
    })
}
