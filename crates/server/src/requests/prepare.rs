//! PREPARE: parse once, keep the statement under the MD5 of its keyspace and text, and tell the
//! client its bind markers and result columns.

use hayate_cql::request::Prepare;
use hayate_cql::response::result::{Prepared, ResultBody};
use hayate_cql::response::Response;
use hayate_cql::statement::parse;

use super::Session;
use crate::prepared::{result_metadata_id, statement_id, PreparedStatement};
use crate::query::Warnings;

pub fn handle(session: &Session, p: &Prepare<'_>, warnings: &Warnings) -> Response {
    let parsed = match parse(p.query) {
        Ok(parsed) => parsed,
        Err(e) => return Response::Error(crate::error::syntax(e.to_string()).to_wire()),
    };
    // v5 may name the keyspace in the request; it then counts instead of the connection's.
    let keyspace = p.keyspace.map(str::to_owned).or_else(|| session.keyspace());
    let ctx = session.context(keyspace.as_deref(), None, warnings);
    let prepared = match crate::query::prepare::prepare(&ctx, &parsed.statement, &parsed.bind_markers) {
        Ok(p) => p,
        Err(e) => return Response::Error(e.to_wire()),
    };
    let id = statement_id(keyspace.as_deref(), p.query);
    let metadata_id = result_metadata_id(&prepared.result);
    let body = ResultBody::Prepared(Prepared {
        id: id.to_vec(),
        result_metadata_id: metadata_id.to_vec(),
        metadata: prepared.metadata.clone(),
        result_metadata: prepared.result.clone(),
    });
    session.node.prepared.insert(PreparedStatement {
        id,
        text: p.query.to_owned(),
        keyspace,
        parsed,
        prepared,
        result_metadata_id: metadata_id,
        memo: Default::default(),
    });
    Response::Result(body)
}
