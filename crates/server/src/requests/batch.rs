//! BATCH: several INSERT, UPDATE and DELETE statements, by text or prepared id, each with its
//! own values. Every statement is checked before any is applied, and all share one timestamp.
//!
//! A logged batch is applied like an unlogged one: each row update is atomic and the engine
//! applies them in order, but a crash in the middle leaves the first part applied (Cassandra's
//! batchlog replays the rest; hayate has no batchlog yet).

use hayate_cql::request::{Batch, BatchStatement, BatchType};
use hayate_cql::response::result::ResultBody;
use hayate_cql::response::Response;
use hayate_cql::statement::{parse, Statement};

use super::Session;
use crate::error::invalid;
use crate::query::{modify, Binds};

pub fn handle(session: &Session, b: &Batch<'_>) -> Response {
    if b.batch_type == BatchType::Counter {
        return Response::Error(invalid("hayate does not support counters yet (COUNTER BATCH)"));
    }
    if b.statements.len() > modify::BATCH_STATEMENTS_MAX {
        return Response::Error(invalid(format!(
            "A batch may hold at most {} statements",
            modify::BATCH_STATEMENTS_MAX
        )));
    }
    let keyspace = session.keyspace();
    let timestamp = b.default_timestamp_us.unwrap_or_else(crate::query::bind::now_us);
    let mut ctx = session.context(keyspace.as_deref(), None);
    ctx.consistency = b.consistency;
    ctx.default_timestamp_us = Some(timestamp);
    let mut parsed_texts = Vec::new();
    let mut prepared = Vec::new();
    for s in &b.statements {
        match s {
            BatchStatement::Query { query, .. } => match parse(query) {
                Ok(p) => parsed_texts.push(Some(p)),
                Err(e) => return Response::Error(crate::error::syntax(e.to_string())),
            },
            BatchStatement::Prepared { id, .. } => {
                parsed_texts.push(None);
                match session.node.prepared.get(id) {
                    Some(p) => prepared.push(p),
                    None => {
                        return Response::Error(hayate_cql::error::WireError::new(
                            hayate_cql::error::ErrorBody::Unprepared { id: id.to_vec() },
                            "Prepared statement in the batch is unknown to this node; prepare it again",
                        ))
                    }
                }
            }
        }
    }
    let mut mutations = Vec::new();
    let mut next_prepared = prepared.iter();
    for (s, parsed) in b.statements.iter().zip(&parsed_texts) {
        let (statement, markers, names, values): (&Statement, _, &[String], _) = match (s, parsed) {
            (BatchStatement::Query { values, .. }, Some(p)) => (&p.statement, &p.bind_markers, &[], values),
            (BatchStatement::Prepared { values, .. }, None) => {
                let Some(p) = next_prepared.next() else {
                    return Response::Error(invalid("batch statements and prepared ids disagree"));
                };
                (
                    &p.parsed.statement,
                    &p.parsed.bind_markers,
                    &p.prepared.marker_names,
                    values,
                )
            }
            _ => return Response::Error(invalid("batch statements and prepared ids disagree")),
        };
        if !matches!(
            statement,
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)
        ) {
            return Response::Error(invalid(format!(
                "Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed (got {})",
                statement.kind()
            )));
        }
        let binds = match Binds::new(values, markers, names) {
            Ok(b) => b,
            Err(e) => return Response::Error(e),
        };
        if let Err(e) = modify::plan(&ctx, statement, &binds, &mut mutations) {
            return Response::Error(e);
        }
    }
    match modify::apply(&ctx, mutations) {
        Ok(()) => Response::Result(ResultBody::Void),
        Err(e) => Response::Error(e),
    }
}
