//! SELECT: rows of one table, by partition, by token range, or all of them; paged.
//!
//! A SELECT becomes reads the coordinator answers: partition reads when the WHERE clause names
//! the partitions, a token-range read otherwise. Rows come back as stored (deletions included)
//! and are made visible here, at the request's clock.
//!
//! ```text
//! plan.rs    what the text and the table decide, once per statement: projection, grouping,
//!            result metadata, the compiled WHERE clause (the Plan a prepared statement keeps)
//! mod.rs     running a plan with one request's values (run)
//! reads.rs   the reads of stored rows (by partition, by token-range scan) and of built-in tables
//! sink.rs    rows made result rows: LIMIT, PER PARTITION LIMIT, pages, GROUP BY, JSON
//! paging.rs  the paging state a driver hands back
//! ```

mod paging;
mod plan;
mod reads;
mod sink;

use hayate_cluster::coordinator::Coordinator;
use hayate_cql::response::result::{ResultBody, Rows, RowsMetadata};
use hayate_cql::statement::{Select, Term};
use hayate_cql::value::DataType;

use super::bind::{evaluate_integer, Binds, Integer};
use super::functions::Accumulator;
use super::restrictions::Restrictions;
use super::{resolve_table, Context, VirtualTables, PAGE_ROWS_MAX};
use crate::error::{invalid, QueryResult};
use crate::schema::Table;
use paging::decode_paging;
use reads::{built_in, Reads};
use sink::Sink;

pub use plan::{projection, result_specs, Grouping, Plan};
pub use sink::JsonRows;

/// Runs a SELECT: built-in tables from `virtual_tables`, stored ones through `coordinator`.
pub async fn run(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    virtual_tables: &dyn VirtualTables,
    select: &Select,
    binds: &Binds<'_>,
) -> QueryResult<ResultBody> {
    let (ks, table) = resolve_table(ctx, &select.table)?;
    let plan = Plan::for_table(ctx, &table, select)?;
    let (projection, grouping) = (&plan.projection, plan.grouping);
    let restrictions = plan.restrictions.bind(&table, binds, ctx.guard)?;
    if let Some(keys) = restrictions.partitions.as_deref().filter(|k| k.len() > 1) {
        super::guardrails::check_partition_keys_in_select(ctx.guard, &table, keys)?;
    }
    let reverse = ordering(&table, select, &restrictions)?;
    let limit = limit_value(&select.limit, binds, "[limit]")?;
    let per_partition = limit_value(&select.per_partition_limit, binds, "[per_partition_limit]")?;
    let page = if grouping == Grouping::All {
        usize::MAX
    } else {
        ctx.page_size
            .unwrap_or(usize::MAX)
            .min(if ctx.page_size.is_some() {
                PAGE_ROWS_MAX
            } else {
                usize::MAX
            })
    };
    let resume = match ctx.paging_state {
        Some(s) if !s.is_empty() => Some(decode_paging(s)?),
        _ => None,
    };
    let mut sink = Sink {
        projection,
        grouping,
        json: select.json.then(|| JsonRows::new(&table, projection)),
        content: Vec::new(),
        rows: 0,
        group: None,
        accumulators: vec![Accumulator::default(); projection.outputs.len()],
        returned: resume.as_ref().map_or(0, |(_, r)| r.returned),
        limit,
        per_partition,
        page,
        partition_rows: resume.as_ref().map_or(0, |(_, r)| r.partition_rows),
    };
    let distinct = select.distinct;
    let resume = resume.map(|(_, r)| r);
    let next_state = if table.is_virtual {
        built_in(ctx, virtual_tables, &table, &restrictions, &mut sink, resume)?
    } else {
        let reads = Reads {
            ctx,
            coordinator,
            keyspace: &ks,
            table: &table,
            restrictions: &restrictions,
            distinct,
            speculative_retry: plan.speculative_retry,
        };
        if let Some(partitions) = &restrictions.partitions {
            reads.by_partition(partitions, reverse, &mut sink, resume).await?
        } else {
            if reverse {
                return Err(invalid(
                    "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
                ));
            }
            reads.scan(&mut sink, resume).await?
        }
    };
    sink.finish();
    let mut metadata = RowsMetadata::new(plan.result.clone());
    metadata.paging_state = if grouping == Grouping::All {
        None
    } else {
        next_state
    };
    metadata.no_metadata = ctx.skip_metadata;
    Ok(ResultBody::Rows(Rows {
        metadata,
        rows_count: sink.rows,
        rows_content: sink.content,
    }))
}

fn limit_value(term: &Option<Term>, binds: &Binds<'_>, what: &str) -> QueryResult<Option<usize>> {
    let Some(t) = term else {
        return Ok(None);
    };
    match evaluate_integer(t, what, &DataType::Int, binds)? {
        Integer::Value(n) if n <= 0 => Err(invalid(format!(
            "{} must be strictly positive",
            what.trim_matches(['[', ']']).to_uppercase()
        ))),
        Integer::Value(n) => Ok(Some(n as usize)),
        Integer::Unset => Ok(None),
        Integer::Null => Err(invalid(format!("Invalid null value of {what}"))),
    }
}

/// Whether rows come in reverse clustering order, checking ORDER BY as Cassandra does.
fn ordering(table: &Table, select: &Select, r: &Restrictions) -> QueryResult<bool> {
    if select.order_by.is_empty() {
        return Ok(false);
    }
    if r.index.is_some() {
        return Err(invalid(
            "ORDER BY with 2ndary indexes is not supported, except for ANN queries.",
        ));
    }
    if r.partitions.is_none() && !table.is_virtual {
        return Err(invalid(
            "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
        ));
    }
    let mut reverse = None;
    for (i, o) in select.order_by.iter().enumerate() {
        let col = table
            .column_index(&o.column)
            .ok_or_else(|| invalid(format!("Undefined column name {}", o.column)))?;
        if table.clustering.get(i) != Some(&col) {
            return Err(invalid(format!(
                "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY ({} is out of place)",
                o.column
            )));
        }
        let flips = o.descending != table.columns[col].descending;
        if reverse.is_some_and(|r| r != flips) {
            return Err(invalid("Unsupported order by relation"));
        }
        reverse = Some(flips);
    }
    Ok(reverse.unwrap_or(false))
}
