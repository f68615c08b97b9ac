//! EXECUTE: a prepared statement with its bind values. An unknown id (a restart, or a cache
//! that forgot it) gets UNPREPARED, and drivers re-prepare by themselves.

use hayate_cql::error::{ErrorBody, WireError};
use hayate_cql::request::Execute;
use hayate_cql::response::result::ResultBody;
use hayate_cql::response::Response;

use super::Session;
use crate::query::{Binds, Warnings};

pub async fn handle(session: &Session, e: &Execute<'_>, warnings: &Warnings) -> (&'static str, Response) {
    let Some(statement) = session.node.prepared.get(e.id) else {
        let hex: String = e.id.iter().map(|b| format!("{b:02x}")).collect();
        return (
            "execute",
            Response::Error(WireError::new(
                ErrorBody::Unprepared { id: e.id.to_vec() },
                format!("Prepared query with ID {hex} not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)"),
            )),
        );
    };
    let kind = statement.parsed.statement.kind();
    let binds = match Binds::new(
        &e.parameters.values,
        &statement.parsed.bind_markers,
        &statement.prepared.marker_names,
    ) {
        Ok(b) => b,
        Err(err) => return (kind, Response::Error(err.to_wire())),
    };
    let keyspace = statement.keyspace.clone().or_else(|| session.keyspace());
    // v5: a client whose result metadata id is not the statement's has stale columns; it gets
    // the full metadata and the current id (METADATA_CHANGED), whatever it asked to skip.
    let stale = e
        .result_metadata_id
        .filter(|id| *id != statement.result_metadata_id.as_slice())
        .is_some();
    let mut parameters = e.parameters.clone();
    if stale {
        parameters.skip_metadata = false;
    }
    let mut response = session
        .run(
            &statement.parsed.statement,
            &statement.text,
            &binds,
            &parameters,
            keyspace.as_deref(),
            Some(&statement.memo),
            warnings,
        )
        .await;
    if let (true, Response::Result(ResultBody::Rows(rows))) = (stale, &mut response) {
        rows.metadata.new_metadata_id = Some(statement.result_metadata_id.to_vec());
    }
    (kind, response)
}
