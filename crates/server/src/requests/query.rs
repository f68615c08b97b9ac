//! QUERY: a statement as text, parsed and run at once.

use hayate_cql::request::Query;
use hayate_cql::response::Response;
use hayate_cql::statement::parse;

use super::Session;
use crate::query::{Binds, Warnings};

pub async fn handle(session: &Session, q: &Query<'_>, warnings: &Warnings) -> (&'static str, Response) {
    let parsed = match parse(q.query) {
        Ok(p) => p,
        Err(e) => {
            return (
                "syntax",
                Response::Error(crate::error::syntax(e.to_string()).to_wire()),
            )
        }
    };
    let kind = parsed.statement.kind();
    let binds = match Binds::new(&q.parameters.values, &parsed.bind_markers, &[]) {
        Ok(b) => b,
        Err(e) => return (kind, Response::Error(e.to_wire())),
    };
    if !parsed.bind_markers.is_empty() && q.parameters.values.is_empty() {
        return (
            kind,
            Response::Error(
                crate::error::invalid(format!(
                    "There were {} markers(?) in CQL but 0 bound variables",
                    parsed.bind_markers.len()
                ))
                .to_wire(),
            ),
        );
    }
    // v5 may name the keyspace in the request; it then counts instead of the connection's.
    let keyspace = q
        .parameters
        .keyspace
        .map(str::to_owned)
        .or_else(|| session.keyspace());
    (
        kind,
        session
            .run(
                &parsed.statement,
                q.query,
                &binds,
                &q.parameters,
                keyspace.as_deref(),
                None,
                warnings,
            )
            .await,
    )
}
