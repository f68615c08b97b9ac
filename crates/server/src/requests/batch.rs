//! BATCH: several INSERT, UPDATE and DELETE statements, by text or prepared id, each with its
//! own values. Every statement is checked before any is applied, and all share one timestamp.
//! A batch over the node's size thresholds warns the client or is refused whole
//! ([`crate::query::guardrails::check_batch_size`]).
//!
//! A logged batch of more than one write is first written to the node's batchlog, so that a
//! crash in the middle leaves all of it or none: the next start applies the rest
//! ([`crate::query::batchlog`]). An unlogged batch is applied write by write.

use hayate_cluster::coordinator::WriteType;
use hayate_cql::request::{Batch, BatchStatement, BatchType};
use hayate_cql::response::result::ResultBody;
use hayate_cql::response::Response;
use hayate_cql::statement::{parse, BatchKind, Statement};

use super::Session;
use crate::error::{invalid, syntax, QueryError, QueryResult};
use crate::query::{guardrails, modify, Binds, Warnings};

pub async fn handle(session: &Session, b: &Batch<'_>, warnings: &Warnings) -> Response {
    match run(session, b, warnings).await {
        Ok(body) => Response::Result(body),
        Err(e) => Response::Error(e.to_wire()),
    }
}

async fn run(session: &Session, b: &Batch<'_>, warnings: &Warnings) -> QueryResult<ResultBody> {
    if b.statements.len() > modify::BATCH_STATEMENTS_MAX {
        return Err(invalid(format!(
            "A batch may hold at most {} statements",
            modify::BATCH_STATEMENTS_MAX
        )));
    }
    // v5 may name the keyspace in the request; it then counts instead of the connection's.
    let keyspace = b.keyspace.map(str::to_owned).or_else(|| session.keyspace());
    let role = session.role();
    let mut ctx = session.context(keyspace.as_deref(), None, warnings);
    ctx.role = role.as_ref();
    let fixed;
    if let Some(now_s) = b.now_in_seconds {
        fixed = super::NowInSeconds::new(ctx.clock, now_s);
        ctx.clock = &fixed;
    }
    ctx.consistency = b.consistency;
    ctx.serial_consistency = b
        .serial_consistency
        .unwrap_or(hayate_cql::wire::Consistency::Serial);
    ctx.default_timestamp_us = Some(b.default_timestamp_us.unwrap_or_else(|| ctx.clock.now_us()));
    let mut parsed_texts = Vec::new();
    let mut prepared = Vec::new();
    for s in &b.statements {
        match s {
            BatchStatement::Query { query, .. } => {
                parsed_texts.push(Some(parse(query).map_err(|e| syntax(e.to_string()))?))
            }
            BatchStatement::Prepared { id, .. } => {
                parsed_texts.push(None);
                let p = session
                    .node
                    .prepared
                    .get(id)
                    .ok_or_else(|| QueryError::Unprepared {
                        id: id.to_vec(),
                        message: "Prepared statement in the batch is unknown to this node; prepare it again"
                            .into(),
                    })?;
                prepared.push(p);
            }
        }
    }
    let disagree = || invalid("batch statements and prepared ids disagree");
    let mut mutations = Vec::new();
    let mut planned = Vec::new();
    let mut next_prepared = prepared.iter();
    for (s, parsed) in b.statements.iter().zip(&parsed_texts) {
        let (statement, markers, names, values): (&Statement, _, &[String], _) = match (s, parsed) {
            (BatchStatement::Query { values, .. }, Some(p)) => {
                ctx.memo = None;
                (&p.statement, &p.bind_markers, &[], values)
            }
            (BatchStatement::Prepared { values, .. }, None) => {
                let p = next_prepared.next().ok_or_else(disagree)?;
                // A prepared statement keeps its plan across batches, as across EXECUTEs.
                ctx.memo = Some(&p.memo);
                (
                    &p.parsed.statement,
                    &p.parsed.bind_markers,
                    &p.prepared.marker_names,
                    values,
                )
            }
            _ => return Err(disagree()),
        };
        if !matches!(
            statement,
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)
        ) {
            return Err(invalid(format!(
                "Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed (got {})",
                statement.kind()
            )));
        }
        session
            .node
            .authorizer
            .authorize(ctx.role, ctx.keyspace, &ctx.schema, statement)
            .map_err(crate::roles::permission_error)?;
        let binds = Binds::new(values, markers, names)?;
        let (plan, keyspaces) = modify::compile(&ctx, statement)?;
        if !plan.is_conditional() {
            plan.bind(&ctx, &keyspaces, &binds, &mut mutations)?;
        }
        planned.push((plan, keyspaces, binds));
    }
    // A statement with an IF clause makes the whole batch one lightweight transaction.
    if planned.iter().any(|(plan, ..)| plan.is_conditional()) {
        let statements: Vec<modify::CasStatement> = planned
            .iter()
            .map(|(plan, keyspaces, binds)| modify::CasStatement {
                plan: plan.clone(),
                keyspaces: keyspaces.clone(),
                binds,
            })
            .collect();
        return modify::run_conditional(&ctx, &session.node.coordinator, &statements, true).await;
    }
    let kind = match b.batch_type {
        BatchType::Logged => BatchKind::Logged,
        BatchType::Unlogged => BatchKind::Unlogged,
        BatchType::Counter => BatchKind::Counter,
    };
    // A frame's timestamp is the client's default, not the BATCH's USING TIMESTAMP.
    modify::check_counter_batch(kind, false, planned.iter().flat_map(|(plan, ..)| plan.tables()))?;
    guardrails::check_batch_size(ctx.guard, &mutations)?;
    let write_type = match b.batch_type {
        _ if planned.iter().any(|(plan, ..)| plan.is_counter()) => WriteType::Counter,
        BatchType::Unlogged => WriteType::UnloggedBatch,
        _ => WriteType::Batch,
    };
    modify::apply(
        &ctx,
        &session.node.coordinator,
        Some(&session.node.batchlog),
        mutations,
        write_type,
    )
    .await?;
    Ok(ResultBody::Void)
}
