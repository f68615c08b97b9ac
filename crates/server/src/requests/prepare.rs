//! PREPARE: parse once, keep the statement under the MD5 of its keyspace and text, and tell the
//! client its bind markers and result columns.

use hayate_cql::request::Prepare;
use hayate_cql::response::result::{Prepared, ResultBody};
use hayate_cql::response::Response;
use hayate_cql::statement::parse;

use super::Session;
use crate::prepared::{statement_id, PreparedStatement};

pub fn handle(session: &Session, p: &Prepare<'_>) -> Response {
    let parsed = match parse(p.query) {
        Ok(parsed) => parsed,
        Err(e) => return Response::Error(crate::error::syntax(e.to_string()).to_wire()),
    };
    let keyspace = session.keyspace();
    let ctx = session.context(keyspace.as_deref(), None);
    let prepared = match crate::query::prepare::prepare(&ctx, &parsed.statement, &parsed.bind_markers) {
        Ok(p) => p,
        Err(e) => return Response::Error(e.to_wire()),
    };
    let id = statement_id(keyspace.as_deref(), p.query);
    let body = ResultBody::Prepared(Prepared {
        id: id.to_vec(),
        metadata: prepared.metadata.clone(),
        result_metadata: prepared.result.clone(),
    });
    session.node.prepared.insert(PreparedStatement {
        id,
        text: p.query.to_owned(),
        keyspace,
        parsed,
        prepared,
    });
    Response::Result(body)
}
