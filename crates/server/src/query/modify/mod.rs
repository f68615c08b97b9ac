//! INSERT, UPDATE, DELETE and BATCH: statements become row updates ([`plan`]), and the updates
//! go to the coordinator as mutations ([`apply`]), which sends them to the replicas; each
//! replica merges them with the stored row (last write wins per cell).
//!
//! An INSERT writes the row marker (the row exists even with every column null); an UPDATE
//! writes only cells, so a row whose cells are all deleted disappears, as in Cassandra.
//! Setting a whole non-frozen collection first deletes the column (at the write's timestamp
//! minus one) and then writes the elements. Deleting a range of rows, or a partition of a table
//! with clustering columns, writes one range (or partition) tombstone on each replica, which
//! also shadows rows written later with an older timestamp. A list operation by index or by
//! value reads the list first, at the request's consistency level.

use std::sync::Arc;

use hayate_cluster::batchlog::Batchlog;
use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{Coordinator, ReadRequest, WriteRequest, WriteType};
use hayate_cluster::replica::{self, MutationKind, PartitionRead, ReadCommand};
use hayate_cql::response::result::ResultBody;
use hayate_cql::statement::{
    Assignment, BatchKind, BatchStatement, Condition, Delete, DeleteTarget, Insert, InsertValues, Operation,
    QualifiedName, Relation, Statement, Term, Update, Using,
};
use hayate_cql::value::{json, split_components, DataType};
use hayate_storage::row::{Cell, Deletion, Liveness, Row};

use super::bind::{evaluate, evaluate_integer, Binds, Evaluated, Integer, Receiver};
use super::cells::{element_path, field_path, list_path};
use super::keys::ClusteringRange;
use super::restrictions::{analyse, split_list, Restrictions};
use super::{resolve_table, Context, TTL_MAX_S};
use crate::error::{consistency_level, invalid, QueryResult};
use crate::schema::{Column, ColumnKind, Keyspace, Table};

/// Statements one BATCH may hold.
pub const BATCH_STATEMENTS_MAX: usize = 65_535;

/// One change to one row, or to every row of a clustering range, as planned from a statement.
pub struct Mutation {
    keyspace: Arc<Keyspace>,
    table: Arc<Table>,
    partition: Vec<u8>,
    target: Target,
}

enum Target {
    /// A row, and the update merged into it.
    Row {
        clustering: Vec<u8>,
        update: Row,
        reads: Vec<ReadOp>,
    },
    /// Every row in a clustering range of the partition.
    Range {
        range: ClusteringRange,
        deletion: Deletion,
    },
}

impl Mutation {
    /// The table the mutation writes.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The partition key, serialized.
    pub fn partition(&self) -> &[u8] {
        &self.partition
    }

    /// The data the mutation writes, as the batch size thresholds count it.
    pub fn data_size_bytes(&self) -> u64 {
        match &self.target {
            Target::Row {
                clustering, update, ..
            } => super::guardrails::row_data_size_bytes(clustering, update),
            Target::Range { range, .. } => super::guardrails::range_data_size_bytes(range),
        }
    }
}

/// A list operation that needs the current list: by index, or removal by value.
#[derive(Clone)]
struct ReadOp {
    column: usize,
    kind: ReadOpKind,
    timestamp_us: i64,
    ttl_s: u32,
}

#[derive(Clone)]
enum ReadOpKind {
    SetIndex { index: i32, value: Option<Vec<u8>> },
    RemoveValues(Vec<Vec<u8>>),
}

/// Timestamp and TTL of a write.
#[derive(Clone, Copy)]
struct WriteTime {
    timestamp_us: i64,
    ttl_s: u32,
    now_s: u32,
}

pub async fn run(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    batchlog: Option<&Batchlog>,
    stmt: &Statement,
    binds: &Binds<'_>,
) -> QueryResult<ResultBody> {
    let mut mutations = Vec::new();
    plan(ctx, stmt, binds, &mut mutations)?;
    if let Statement::Batch(_) = stmt {
        super::guardrails::check_batch_size(ctx.guard, &mutations)?;
    }
    let write_type = match stmt {
        Statement::Batch(b) if b.kind == BatchKind::Unlogged => WriteType::UnloggedBatch,
        Statement::Batch(_) => WriteType::Batch,
        _ => WriteType::Simple,
    };
    apply(ctx, coordinator, batchlog, mutations, write_type).await?;
    Ok(ResultBody::Void)
}

/// Checks a statement and turns it into row updates, without applying them.
pub fn plan(
    ctx: &Context<'_>,
    stmt: &Statement,
    binds: &Binds<'_>,
    mutations: &mut Vec<Mutation>,
) -> QueryResult<()> {
    match stmt {
        Statement::Insert(s) => insert(ctx, s, binds, None, mutations)?,
        Statement::Update(s) => update(ctx, s, binds, None, mutations)?,
        Statement::Delete(s) => delete(ctx, s, binds, None, mutations)?,
        Statement::Batch(b) => {
            if b.kind == BatchKind::Counter {
                return Err(invalid("hayate does not support counters yet (COUNTER BATCH)"));
            }
            if b.statements.len() > BATCH_STATEMENTS_MAX {
                return Err(invalid(format!(
                    "A batch may hold at most {BATCH_STATEMENTS_MAX} statements"
                )));
            }
            let batch_ts = timestamp(ctx, &b.using, binds)?;
            if b.using.ttl.is_some() {
                return Err(invalid("Global TTL on the BATCH statement is not supported."));
            }
            for s in &b.statements {
                match s {
                    BatchStatement::Insert(s) => insert(ctx, s, binds, Some(batch_ts), mutations)?,
                    BatchStatement::Update(s) => update(ctx, s, binds, Some(batch_ts), mutations)?,
                    BatchStatement::Delete(s) => delete(ctx, s, binds, Some(batch_ts), mutations)?,
                }
            }
        }
        _ => {
            return Err(invalid(format!(
                "{} is not a modification statement",
                stmt.kind()
            )))
        }
    }
    Ok(())
}

/// A batch's own USING TIMESTAMP, or the request's default, or now.
fn timestamp(ctx: &Context<'_>, using: &Using, binds: &Binds<'_>) -> QueryResult<i64> {
    if let Some(t) = &using.timestamp {
        match evaluate_integer(t, "[timestamp]", &DataType::BigInt, binds)? {
            Integer::Value(ts) if ts == i64::MIN => {
                return Err(invalid(format!("Invalid timestamp value {ts}")))
            }
            Integer::Value(ts) => return Ok(ts),
            Integer::Unset => {}
            Integer::Null => return Err(invalid("Invalid null value of timestamp")),
        }
    }
    Ok(ctx.default_timestamp_us.unwrap_or_else(|| ctx.clock.now_us()))
}

fn write_time(
    ctx: &Context<'_>,
    table: &Table,
    using: &Using,
    binds: &Binds<'_>,
    batch_ts: Option<i64>,
) -> QueryResult<WriteTime> {
    if batch_ts.is_some() && using.timestamp.is_some() {
        return Err(invalid(
            "Timestamp must be set either on BATCH or individual statements",
        ));
    }
    let timestamp_us = match batch_ts {
        Some(ts) => ts,
        None => timestamp(ctx, using, binds)?,
    };
    let mut ttl_s = table.default_ttl_s();
    if let Some(t) = &using.ttl {
        match evaluate_integer(t, "[ttl]", &DataType::Int, binds)? {
            Integer::Value(ttl) if ttl < 0 => {
                return Err(invalid(format!(
                    "A TTL must be greater or equal to 0, but was {ttl}"
                )))
            }
            Integer::Value(ttl) if ttl > i64::from(TTL_MAX_S) => {
                return Err(invalid(format!(
                    "ttl is too large. requested ({ttl}) maximum ({TTL_MAX_S})"
                )))
            }
            Integer::Value(ttl) => ttl_s = ttl as u32,
            Integer::Unset => {}
            Integer::Null => return Err(invalid("Invalid null value of TTL")),
        }
    }
    Ok(WriteTime {
        timestamp_us,
        ttl_s,
        now_s: ctx.clock.now_s(),
    })
}

fn no_conditions(condition: &Condition) -> QueryResult<()> {
    match condition {
        Condition::None => Ok(()),
        _ => Err(invalid(
            "hayate does not support lightweight transactions (IF conditions) yet",
        )),
    }
}

fn live_cell(col: &Column, path: Vec<u8>, value: Vec<u8>, wt: WriteTime) -> Cell {
    let mut cell = if wt.ttl_s > 0 {
        Cell::expiring(col.id, wt.timestamp_us, value, wt.ttl_s, wt.now_s)
    } else {
        Cell::live(col.id, wt.timestamp_us, value)
    };
    cell.path = path;
    cell
}

fn tombstone_cell(col: &Column, path: Vec<u8>, wt: WriteTime) -> Cell {
    let mut cell = Cell::tombstone(col.id, wt.timestamp_us, wt.now_s);
    cell.path = path;
    cell
}

fn insert(
    ctx: &Context<'_>,
    s: &Insert,
    binds: &Binds<'_>,
    batch_ts: Option<i64>,
    out: &mut Vec<Mutation>,
) -> QueryResult<()> {
    let (ks, table) = resolve_table(ctx, &s.table)?;
    writable(&table)?;
    if s.if_not_exists {
        return Err(invalid(
            "hayate does not support lightweight transactions (INSERT ... IF NOT EXISTS) yet",
        ));
    }
    let assigned = match &s.values {
        InsertValues::Columns { columns, values } => {
            if columns.len() != values.len() {
                return Err(invalid("Unmatched column names/values"));
            }
            let mut seen = vec![false; table.columns.len()];
            let mut assigned = Vec::with_capacity(columns.len());
            for (name, term) in columns.iter().zip(values) {
                let i = table
                    .column_index(name)
                    .ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
                if std::mem::replace(&mut seen[i], true) {
                    return Err(invalid(format!("Multiple definitions found for column {name}")));
                }
                let ty = &table.columns[i].ty;
                assigned.push((i, evaluate(term, &Receiver { name, ty }, binds)?));
            }
            assigned
        }
        InsertValues::Json { json, default_unset } => json_values(&table, json, *default_unset, binds)?,
    };
    let wt = write_time(ctx, &table, &s.using, binds, batch_ts)?;
    let mut key_values: Vec<Option<Vec<u8>>> = vec![None; table.columns.len()];
    let mut update = Row {
        liveness: Some(Liveness {
            timestamp_us: wt.timestamp_us,
            ttl_s: wt.ttl_s,
            expires_at_s: wt.now_s.saturating_add(wt.ttl_s),
        }),
        ..Row::default()
    };
    // Static cells go to the partition's static row, which has no row marker: a partition
    // whose static cells are all deleted or expired has no static row left, as in Cassandra.
    let mut statics = Row::default();
    let (mut any_static, mut any_regular) = (false, false);
    for (i, v) in assigned {
        let col = &table.columns[i];
        match col.kind {
            ColumnKind::PartitionKey | ColumnKind::Clustering => key_values[i] = Some(key_value(col, v)?),
            ColumnKind::Static => {
                any_static = true;
                set_column(col, v, wt, &mut statics)?
            }
            ColumnKind::Regular => {
                any_regular = true;
                set_column(col, v, wt, &mut update)?
            }
        }
    }
    // `INSERT INTO t (k, s) VALUES (...)`: no clustering key and only static columns writes
    // the static row alone.
    let static_only = !table.clustering.is_empty()
        && table.clustering.iter().all(|&i| key_values[i].is_none())
        && any_static
        && !any_regular;
    let (partition, clustering) = if static_only {
        (partition_key_only(&table, &key_values)?, Vec::new())
    } else {
        full_key(&table, &key_values)?
    };
    if !static_only {
        update.normalize();
        out.push(Mutation {
            keyspace: ks.clone(),
            table: table.clone(),
            partition: partition.clone(),
            target: Target::Row {
                clustering,
                update,
                reads: Vec::new(),
            },
        });
    }
    if static_only || !statics.cells.is_empty() || !statics.column_deletions.is_empty() {
        statics.normalize();
        out.push(Mutation {
            keyspace: ks,
            table,
            partition,
            target: Target::Row {
                clustering: Vec::new(),
                update: statics,
                reads: Vec::new(),
            },
        });
    }
    Ok(())
}

/// The values of `INSERT INTO t JSON '{...}'`, by column index. The object's keys name
/// columns as CQL identifiers do: folded to lower case unless in double quotes. A column the
/// object leaves out is set to null, or left as it is with `DEFAULT UNSET`.
fn json_values(
    table: &Table,
    json: &Term,
    default_unset: bool,
    binds: &Binds<'_>,
) -> QueryResult<Vec<(usize, Evaluated)>> {
    let text = match evaluate(
        json,
        &Receiver {
            name: "[json]",
            ty: &DataType::Text,
        },
        binds,
    )? {
        Evaluated::Bytes(b) => b,
        Evaluated::Null => return Err(invalid("Got null for INSERT JSON values")),
        Evaluated::Unset => return Err(invalid("Got unset for INSERT JSON values")),
    };
    // Text values were validated as UTF-8 when bound or parsed.
    let text = std::str::from_utf8(&text).map_err(|e| invalid(format!("Invalid JSON text: {e}")))?;
    let object = json::parse_object(text)
        .map_err(|e| {
            invalid(format!(
                "Could not decode JSON string as a map: {e}. (String was: {})",
                json::shown(text)
            ))
        })?
        .ok_or_else(|| invalid("Got null for INSERT JSON values"))?;
    let mut given = vec![None; table.columns.len()];
    for (key, raw) in object {
        let name = match key.strip_prefix('"').and_then(|k| k.strip_suffix('"')) {
            Some(quoted) => quoted.to_owned(),
            None => key.to_lowercase(),
        };
        let i = table
            .column_index(&name)
            .ok_or_else(|| invalid(format!("JSON values map contains unrecognized column: {name}")))?;
        given[i] = Some(raw);
    }
    let mut assigned = Vec::with_capacity(table.columns.len());
    for (i, (col, raw)) in table.columns.iter().zip(given).enumerate() {
        let value = match raw {
            Some(raw) => match json::value_from_json(&col.ty, raw)
                .map_err(|e| invalid(format!("Error decoding JSON value for {}: {e}", col.name)))?
            {
                Some(b) => Evaluated::Bytes(b),
                None => Evaluated::Null,
            },
            // A missing key column is a null key, which the key check refuses by name.
            None if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) => Evaluated::Null,
            None if default_unset => continue,
            None => Evaluated::Null,
        };
        assigned.push((i, value));
    }
    Ok(assigned)
}

/// The partition key alone, for a write of the static row.
fn partition_key_only(table: &Table, key_values: &[Option<Vec<u8>>]) -> QueryResult<Vec<u8>> {
    let missing: Vec<String> = table
        .partition_key
        .iter()
        .filter(|&&i| key_values[i].is_none())
        .map(|&i| table.columns[i].name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(invalid(format!(
            "Some partition key parts are missing: {}",
            missing.join(", ")
        )));
    }
    let pk: Vec<&[u8]> = table
        .partition_key
        .iter()
        .map(|&i| key_values[i].as_deref().unwrap_or(&[]))
        .collect();
    super::keys::partition_key(&pk)
}

/// The table an UPDATE or DELETE writes, checked as every write is.
fn target_table(
    ctx: &Context<'_>,
    name: &QualifiedName,
    condition: &Condition,
) -> QueryResult<(Arc<Keyspace>, Arc<Table>)> {
    let (ks, table) = resolve_table(ctx, name)?;
    writable(&table)?;
    no_conditions(condition)?;
    Ok((ks, table))
}

/// The partitions and clustering ranges an UPDATE or DELETE names: the whole partition key,
/// and nothing but primary key columns.
fn named_rows(
    ctx: &Context<'_>,
    table: &Table,
    where_clause: &[Relation],
    binds: &Binds<'_>,
) -> QueryResult<(Vec<Vec<u8>>, Restrictions)> {
    let mut r = analyse(table, where_clause, binds, false, ctx.guard)?;
    let partitions = r
        .partitions
        .take()
        .ok_or_else(|| invalid("Some partition key parts are missing"))?;
    if !r.filters.is_empty() {
        return Err(invalid("Non PRIMARY KEY columns found in where clause"));
    }
    Ok((partitions, r))
}

fn writable(table: &Table) -> QueryResult<()> {
    if table.is_virtual {
        return Err(crate::error::unauthorized(format!(
            "{} keyspace is not user-modifiable.",
            table.keyspace
        )));
    }
    Ok(())
}

fn key_value(col: &Column, v: Evaluated) -> QueryResult<Vec<u8>> {
    match v {
        Evaluated::Bytes(b) => {
            if b.is_empty() && col.kind == ColumnKind::PartitionKey {
                return Err(invalid(format!("Key may not be empty (column {})", col.name)));
            }
            Ok(b)
        }
        Evaluated::Null => Err(invalid(format!(
            "Invalid null value in condition for column {}",
            col.name
        ))),
        Evaluated::Unset => Err(invalid(format!("Invalid unset value for column {}", col.name))),
    }
}

fn full_key(table: &Table, key_values: &[Option<Vec<u8>>]) -> QueryResult<(Vec<u8>, Vec<u8>)> {
    let missing = |cols: &[usize]| -> Vec<String> {
        cols.iter()
            .filter(|&&i| key_values[i].is_none())
            .map(|&i| table.columns[i].name.clone())
            .collect()
    };
    let m = missing(&table.partition_key);
    if !m.is_empty() {
        return Err(invalid(format!(
            "Some partition key parts are missing: {}",
            m.join(", ")
        )));
    }
    let m = missing(&table.clustering);
    if !m.is_empty() {
        return Err(invalid(format!(
            "Some clustering keys are missing: {}",
            m.join(", ")
        )));
    }
    let pk: Vec<&[u8]> = table
        .partition_key
        .iter()
        .map(|&i| key_values[i].as_deref().unwrap_or(&[]))
        .collect();
    let ck: Vec<&[u8]> = table
        .clustering
        .iter()
        .map(|&i| key_values[i].as_deref().unwrap_or(&[]))
        .collect();
    Ok((
        super::keys::partition_key(&pk)?,
        super::keys::clustering_key(table, &ck),
    ))
}

/// `col = value`: the whole column.
fn set_column(col: &Column, v: Evaluated, wt: WriteTime, update: &mut Row) -> QueryResult<()> {
    match v {
        Evaluated::Unset => {}
        Evaluated::Null if col.ty.is_multi_cell() => delete_column(col, wt.timestamp_us, wt.now_s, update),
        Evaluated::Null => update.cells.push(tombstone_cell(col, Vec::new(), wt)),
        Evaluated::Bytes(b) if col.ty.is_multi_cell() => {
            delete_column(col, wt.timestamp_us - 1, wt.now_s, update);
            add_elements(col, &b, wt, false, update)?;
        }
        Evaluated::Bytes(b) => update.cells.push(live_cell(col, Vec::new(), b, wt)),
    }
    Ok(())
}

fn delete_column(col: &Column, timestamp_us: i64, now_s: u32, update: &mut Row) {
    update.column_deletions.push((
        col.id,
        Deletion {
            timestamp_us,
            deleted_at_s: now_s,
        },
    ));
    update.column_deletions.sort_by_key(|(c, _)| *c);
}

/// Appends (or prepends) the elements of a serialized collection value as cells.
fn add_elements(
    col: &Column,
    value: &[u8],
    wt: WriteTime,
    prepend: bool,
    update: &mut Row,
) -> QueryResult<()> {
    let bad = || invalid(format!("Invalid collection value for {}", col.name));
    match &col.ty {
        DataType::List { .. } => {
            let items = split_list(value).ok_or_else(bad)?;
            let n = items.len() as u64;
            for (seq, item) in items.into_iter().enumerate() {
                // Prepended elements keep their order: the first gets the smallest id.
                let seq = if prepend { n - seq as u64 } else { seq as u64 };
                update
                    .cells
                    .push(live_cell(col, list_path(wt.timestamp_us, seq, prepend), item, wt));
            }
        }
        DataType::Set { element, .. } => {
            for item in split_list(value).ok_or_else(bad)? {
                key_size(col, &item)?;
                update
                    .cells
                    .push(live_cell(col, element_path(element, &item), Vec::new(), wt));
            }
        }
        DataType::Map { key, .. } => {
            for (k, v) in split_map(value).ok_or_else(bad)? {
                key_size(col, &k)?;
                update.cells.push(live_cell(col, element_path(key, &k), v, wt));
            }
        }
        DataType::Udt { def, .. } => {
            let fields = split_components(value).map_err(|_| bad())?;
            if fields.len() > def.field_names.len() {
                return Err(bad());
            }
            // Null fields need no cell: the column deletion before them removed the old ones.
            for (i, field) in fields.into_iter().enumerate() {
                if let Some(v) = field {
                    update.cells.push(live_cell(col, field_path(i), v.to_vec(), wt));
                }
            }
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// A set element or map key is a cell's key, bounded as a clustering value is.
fn key_size(col: &Column, key: &[u8]) -> QueryResult<()> {
    let max = hayate_cql::value::ORDERED_VALUE_MAX_BYTES;
    if key.len() > max {
        return Err(invalid(format!(
            "Set element or map key of {} bytes in {} is larger than the maximum of {max} bytes",
            key.len(),
            col.name
        )));
    }
    Ok(())
}

/// A term as Cassandra quotes it in an error message, as near as we can.
fn value_text(t: &Term) -> String {
    match t {
        Term::Literal(hayate_cql::value::Literal::Int(v) | hayate_cql::value::Literal::Float(v)) => v.clone(),
        Term::Literal(hayate_cql::value::Literal::Str(v)) => format!("'{v}'"),
        Term::Marker(_) => "?".to_owned(),
        _ => "...".to_owned(),
    }
}

fn split_map(bytes: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    // A map is a list of 2n elements, alternating key and value, after a count of n.
    let n = i32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
    let mut as_list = Vec::with_capacity(bytes.len());
    as_list.extend_from_slice(&n.checked_mul(2)?.to_be_bytes());
    as_list.extend_from_slice(&bytes[4..]);
    let flat = split_list(&as_list)?;
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}

fn update(
    ctx: &Context<'_>,
    s: &Update,
    binds: &Binds<'_>,
    batch_ts: Option<i64>,
    out: &mut Vec<Mutation>,
) -> QueryResult<()> {
    let (ks, table) = target_table(ctx, &s.table, &s.condition)?;
    let wt = write_time(ctx, &table, &s.using, binds, batch_ts)?;
    let (partitions, r) = named_rows(ctx, &table, &s.where_clause, binds)?;
    let is_static = |name: &str| table.column(name).is_some_and(|c| c.kind == ColumnKind::Static);
    let static_only = s.assignments.iter().all(|a| is_static(&a.column));
    if static_only && r.restricts_clustering() {
        return Err(invalid(
            "Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns",
        ));
    }
    if !static_only && !r.clustering_complete {
        let missing: Vec<&str> = table.clustering_columns().map(|c| c.name.as_str()).collect();
        return Err(invalid(format!(
            "Some clustering keys are missing: {}",
            missing.join(", ")
        )));
    }
    let mut update = Row::default();
    let mut reads = Vec::new();
    let mut statics = Row::default();
    let mut static_reads = Vec::new();
    for a in &s.assignments {
        if is_static(&a.column) {
            assign(&table, a, binds, wt, &mut statics, &mut static_reads)?;
        } else {
            assign(&table, a, binds, wt, &mut update, &mut reads)?;
        }
    }
    if !static_only {
        update.normalize();
        each_row(&ks, &table, &partitions, &r.clustering, update, reads, out);
    }
    if s.assignments.iter().any(|a| is_static(&a.column)) {
        statics.normalize();
        each_row(
            &ks,
            &table,
            &partitions,
            &[ClusteringRange::prefix(Vec::new())],
            statics,
            static_reads,
            out,
        );
    }
    Ok(())
}

fn assign(
    table: &Table,
    a: &Assignment,
    binds: &Binds<'_>,
    wt: WriteTime,
    update: &mut Row,
    reads: &mut Vec<ReadOp>,
) -> QueryResult<()> {
    let i = table
        .column_index(&a.column)
        .ok_or_else(|| invalid(format!("Undefined column name {}", a.column)))?;
    let col = &table.columns[i];
    if col.kind.is_primary_key() {
        return Err(invalid(format!(
            "PRIMARY KEY part {} found in SET part",
            col.name
        )));
    }
    let eval = |t: &Term, ty: &DataType| evaluate(t, &Receiver { name: &col.name, ty }, binds);
    let needs_collection = |op: &str| -> QueryResult<()> {
        if col.ty.is_multi_cell() {
            Ok(())
        } else if col.ty.is_collection() {
            Err(invalid(format!(
                "Invalid operation ({} = {} {op} ?) for frozen collection column {}",
                col.name, col.name, col.name
            )))
        } else {
            Err(invalid(format!(
                "Invalid operation ({} = {} {op} ?) for non counter column {}",
                col.name, col.name, col.name
            )))
        }
    };
    match &a.operation {
        Operation::Set(t) => set_column(col, eval(t, &col.ty)?, wt, update)?,
        Operation::Add(t) => {
            needs_collection("+")?;
            if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                add_elements(col, &b, wt, false, update)?;
            }
        }
        Operation::Prepend(t) => {
            if !matches!(col.ty, DataType::List { frozen: false, .. }) {
                return Err(invalid(format!(
                    "Invalid operation (prepend) for non list column {}",
                    col.name
                )));
            }
            if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                add_elements(col, &b, wt, true, update)?;
            }
        }
        Operation::Subtract(t) => {
            needs_collection("-")?;
            match &col.ty {
                DataType::List { .. } => {
                    if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                        let values = split_list(&b).ok_or_else(|| invalid("Invalid list value"))?;
                        reads.push(ReadOp {
                            column: i,
                            kind: ReadOpKind::RemoveValues(values),
                            timestamp_us: wt.timestamp_us,
                            ttl_s: wt.ttl_s,
                        });
                    }
                }
                DataType::Set { element, .. } => {
                    if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                        for e in split_list(&b).ok_or_else(|| invalid("Invalid set value"))? {
                            update
                                .cells
                                .push(tombstone_cell(col, element_path(element, &e), wt));
                        }
                    }
                }
                DataType::Map { key, .. } => {
                    // `m = m - {k1, k2}` removes keys: the term is a set of keys.
                    let keys_ty = DataType::Set {
                        element: key.clone(),
                        frozen: true,
                    };
                    if let Evaluated::Bytes(b) = eval(t, &keys_ty)? {
                        for k in split_list(&b).ok_or_else(|| invalid("Invalid set of map keys"))? {
                            update.cells.push(tombstone_cell(col, element_path(key, &k), wt));
                        }
                    }
                }
                _ => unreachable!("needs_collection checked the type"),
            }
        }
        Operation::SetElement { key, value } => match &col.ty {
            DataType::Map {
                key: kt,
                value: vt,
                frozen: false,
            } => {
                let k = match eval(key, kt)? {
                    Evaluated::Bytes(k) => k,
                    _ => return Err(invalid(format!("Invalid null map key for {}", col.name))),
                };
                match eval(value, vt)? {
                    Evaluated::Bytes(v) => update.cells.push(live_cell(col, element_path(kt, &k), v, wt)),
                    Evaluated::Null => update.cells.push(tombstone_cell(col, element_path(kt, &k), wt)),
                    Evaluated::Unset => {}
                }
            }
            DataType::List {
                element,
                frozen: false,
            } => {
                let Integer::Value(index) = evaluate_integer(key, &col.name, &DataType::Int, binds)? else {
                    return Err(invalid(format!("Invalid null list index for {}", col.name)));
                };
                let index = index as i32; // an int's 4 bytes
                let value = match eval(value, element)? {
                    Evaluated::Bytes(v) => Some(v),
                    Evaluated::Null => None,
                    Evaluated::Unset => return Ok(()),
                };
                reads.push(ReadOp {
                    column: i,
                    kind: ReadOpKind::SetIndex { index, value },
                    timestamp_us: wt.timestamp_us,
                    ttl_s: wt.ttl_s,
                });
            }
            _ => {
                return Err(invalid(format!(
                    "Invalid operation ({}[?] = ?) for non-collection or frozen column {}",
                    col.name, col.name
                )))
            }
        },
        Operation::SetField { field, value } => {
            let DataType::Udt { def, frozen: false } = &col.ty else {
                return Err(invalid(
                    if col.ty.is_frozen() && matches!(col.ty, DataType::Udt { .. }) {
                        format!(
                            "Invalid operation ({}.{field} = {}) for frozen UDT column {}",
                            col.name,
                            value_text(value),
                            col.name
                        )
                    } else {
                        format!(
                            "Invalid operation ({}.{field} = ...) for non-UDT column {}",
                            col.name, col.name
                        )
                    },
                ));
            };
            let i = def.field_index(field).ok_or_else(|| {
                invalid(format!(
                    "UDT column {} does not have a field named {field}",
                    col.name
                ))
            })?;
            match eval(value, &def.field_types[i])? {
                Evaluated::Bytes(v) => update.cells.push(live_cell(col, field_path(i), v, wt)),
                Evaluated::Null => update.cells.push(tombstone_cell(col, field_path(i), wt)),
                Evaluated::Unset => {}
            }
        }
    }
    Ok(())
}

fn delete(
    ctx: &Context<'_>,
    s: &Delete,
    binds: &Binds<'_>,
    batch_ts: Option<i64>,
    out: &mut Vec<Mutation>,
) -> QueryResult<()> {
    let (ks, table) = target_table(ctx, &s.table, &s.condition)?;
    if s.using.ttl.is_some() {
        return Err(invalid("DELETE does not take a TTL"));
    }
    let wt = write_time(ctx, &table, &s.using, binds, batch_ts)?;
    let (partitions, r) = named_rows(ctx, &table, &s.where_clause, binds)?;
    if s.targets.is_empty() {
        for partition in &partitions {
            for range in &r.clustering {
                let target = if r.clustering_complete {
                    let clustering = match &range.start {
                        std::ops::Bound::Included(k) => k.clone(),
                        _ => Vec::new(),
                    };
                    Target::Row {
                        clustering,
                        update: Row::deleted(wt.timestamp_us, wt.now_s),
                        reads: Vec::new(),
                    }
                } else {
                    let mut range = range.clone();
                    // A clustering range open at its start (`c < 5`) must not cover the static
                    // row, whose key is the empty one that sorts first: only a partition delete
                    // (no clustering restriction, both ends open) removes statics, as in
                    // Cassandra.
                    let whole_partition = matches!(
                        (&range.start, &range.end),
                        (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                    );
                    if table.has_statics() && !whole_partition && range.start == std::ops::Bound::Unbounded {
                        range.start = std::ops::Bound::Excluded(Vec::new());
                    }
                    Target::Range {
                        range,
                        deletion: Deletion {
                            timestamp_us: wt.timestamp_us,
                            deleted_at_s: wt.now_s,
                        },
                    }
                };
                out.push(Mutation {
                    keyspace: ks.clone(),
                    table: table.clone(),
                    partition: partition.clone(),
                    target,
                });
            }
        }
        return Ok(());
    }
    let target_name = |t: &DeleteTarget| match t {
        DeleteTarget::Column(c) => c.clone(),
        DeleteTarget::Element { column, .. } => column.clone(),
        DeleteTarget::Field { column, .. } => column.clone(),
    };
    let is_static = |name: &str| table.column(name).is_some_and(|c| c.kind == ColumnKind::Static);
    let static_only = s.targets.iter().all(|t| is_static(&target_name(t)));
    if static_only && r.restricts_clustering() {
        return Err(invalid(
            "Invalid restrictions on clustering columns since the DELETE statement modifies only static columns",
        ));
    }
    if !static_only && !r.clustering_complete {
        return Err(invalid("Range deletions are not supported for specific columns"));
    }
    let mut regular = (Row::default(), Vec::new());
    let mut statics = (Row::default(), Vec::new());
    for t in &s.targets {
        let (name, key) = match t {
            DeleteTarget::Column(c) => (c, None),
            DeleteTarget::Element { column, key } => (column, Some(key)),
            DeleteTarget::Field { column, field } => {
                let i = table
                    .column_index(column)
                    .ok_or_else(|| invalid(format!("Undefined column name {column}")))?;
                let col = &table.columns[i];
                let DataType::Udt { def, frozen: false } = &col.ty else {
                    return Err(invalid(format!(
                        "Invalid field deletion on non-UDT or frozen UDT column {column}"
                    )));
                };
                let f = def.field_index(field).ok_or_else(|| {
                    invalid(format!("UDT column {column} does not have a field named {field}"))
                })?;
                let update = if col.kind == ColumnKind::Static {
                    &mut statics.0
                } else {
                    &mut regular.0
                };
                update.cells.push(tombstone_cell(col, field_path(f), wt));
                continue;
            }
        };
        let i = table
            .column_index(name)
            .ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
        let col = &table.columns[i];
        if col.kind.is_primary_key() {
            return Err(invalid(format!(
                "Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)"
            )));
        }
        let (update, reads) = if col.kind == ColumnKind::Static {
            (&mut statics.0, &mut statics.1)
        } else {
            (&mut regular.0, &mut regular.1)
        };
        match (key, &col.ty) {
            (None, ty) if ty.is_multi_cell() => delete_column(col, wt.timestamp_us, wt.now_s, update),
            (None, _) => update.cells.push(tombstone_cell(col, Vec::new(), wt)),
            (
                Some(k),
                DataType::Map {
                    key: kt,
                    frozen: false,
                    ..
                },
            ) => {
                if let Evaluated::Bytes(k) = evaluate(k, &Receiver { name, ty: kt }, binds)? {
                    update.cells.push(tombstone_cell(col, element_path(kt, &k), wt));
                }
            }
            (
                Some(k),
                DataType::Set {
                    element,
                    frozen: false,
                },
            ) => {
                if let Evaluated::Bytes(k) = evaluate(k, &Receiver { name, ty: element }, binds)? {
                    update
                        .cells
                        .push(tombstone_cell(col, element_path(element, &k), wt));
                }
            }
            (Some(k), DataType::List { frozen: false, .. }) => {
                let Integer::Value(index) = evaluate_integer(k, name, &DataType::Int, binds)? else {
                    return Err(invalid(format!("Invalid null list index for {name}")));
                };
                let index = index as i32; // an int's 4 bytes
                reads.push(ReadOp {
                    column: i,
                    kind: ReadOpKind::SetIndex { index, value: None },
                    timestamp_us: wt.timestamp_us,
                    ttl_s: 0,
                });
            }
            (Some(_), _) => {
                return Err(invalid(format!(
                    "Invalid element deletion on non-collection or frozen column {name}"
                )))
            }
        }
    }
    if !static_only {
        let (mut update, reads) = regular;
        update.normalize();
        each_row(&ks, &table, &partitions, &r.clustering, update, reads, out);
    }
    if s.targets.iter().any(|t| is_static(&target_name(t))) {
        let (mut update, reads) = statics;
        update.normalize();
        let whole = [ClusteringRange::prefix(Vec::new())];
        each_row(&ks, &table, &partitions, &whole, update, reads, out);
    }
    Ok(())
}

/// The same update for every row a WHERE clause names: each partition, and in it each
/// clustering key (a complete key is a one-row range starting at it).
fn each_row(
    keyspace: &Arc<Keyspace>,
    table: &Arc<Table>,
    partitions: &[Vec<u8>],
    ranges: &[ClusteringRange],
    update: Row,
    reads: Vec<ReadOp>,
    out: &mut Vec<Mutation>,
) {
    for partition in partitions {
        for range in ranges {
            let clustering = match &range.start {
                std::ops::Bound::Included(k) => k.clone(),
                _ => Vec::new(),
            };
            out.push(Mutation {
                keyspace: keyspace.clone(),
                table: table.clone(),
                partition: partition.clone(),
                target: Target::Row {
                    clustering,
                    update: update.clone(),
                    reads: reads.clone(),
                },
            });
        }
    }
}

/// Sends planned mutations to the coordinator: one write per keyspace (each has its own
/// replication), in the order planned.
/// Applies planned mutations through the coordinator. A logged batch of more than one write
/// goes through `batchlog` (when the node has one), so that a crash leaves all of it or none.
pub async fn apply(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    batchlog: Option<&Batchlog>,
    mutations: Vec<Mutation>,
    write_type: WriteType,
) -> QueryResult<()> {
    let logged = write_type == WriteType::Batch && mutations.len() > 1;
    let consistency = consistency_level(ctx.consistency);
    let mut groups: Vec<(Arc<Keyspace>, Vec<replica::Mutation>)> = Vec::new();
    for m in mutations {
        let token = hayate_storage::token::token(&m.partition);
        let kind = match m.target {
            Target::Row {
                clustering,
                mut update,
                reads,
            } => {
                if !reads.is_empty() {
                    let current = read_row(
                        ctx,
                        coordinator,
                        &m.keyspace,
                        &m.table,
                        token,
                        &m.partition,
                        &clustering,
                    )
                    .await?;
                    let now = ctx.clock.now_s();
                    for op in reads {
                        list_read_op(&m.table, current.as_ref(), op, now, &mut update)?;
                    }
                    update.normalize();
                }
                MutationKind::Row { clustering, update }
            }
            Target::Range { range, deletion } => MutationKind::DeleteRange {
                start: range.start,
                end: range.end,
                deletion,
            },
        };
        let mutation = replica::Mutation {
            table: m.table.storage_id,
            token,
            partition: m.partition,
            kind,
        };
        match groups.last_mut() {
            Some((ks, group)) if Arc::ptr_eq(ks, &m.keyspace) => group.push(mutation),
            _ => groups.push((m.keyspace, vec![mutation])),
        }
    }
    if let Some(log) = batchlog.filter(|_| logged) {
        return super::batchlog::apply_logged(log, coordinator, consistency, groups).await;
    }
    for (keyspace, mutations) in groups {
        coordinator
            .write(WriteRequest {
                replication: keyspace.strategy(),
                consistency,
                mutations,
                write_type,
            })
            .await?;
    }
    Ok(())
}

/// The current version of one row (for list operations that need it), as a read at the
/// request's level sees it now.
async fn read_row(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    keyspace: &Keyspace,
    table: &Table,
    token: i64,
    partition: &[u8],
    clustering: &[u8],
) -> QueryResult<Option<Row>> {
    let command = ReadCommand::Partition(PartitionRead {
        table: table.storage_id,
        token,
        partition: partition.to_vec(),
        start: std::ops::Bound::Included(clustering.to_vec()),
        end: std::ops::Bound::Included(clustering.to_vec()),
        reverse: false,
        limit: 1,
    });
    let result = coordinator
        .read(ReadRequest {
            replication: keyspace.strategy(),
            // A write at ANY still reads the list it changes from a live replica.
            consistency: match consistency_level(ctx.consistency) {
                ConsistencyLevel::Any => ConsistencyLevel::One,
                level => level,
            },
            command,
            speculative_retry: table.speculative_retry(),
        })
        .await?;
    let now = ctx.clock.now_s();
    Ok(result.rows.into_iter().next().map(|r| r.row.into_visible(now)))
}

fn list_read_op(
    table: &Table,
    current: Option<&Row>,
    op: ReadOp,
    now: u32,
    update: &mut Row,
) -> QueryResult<()> {
    let col = &table.columns[op.column];
    let wt = WriteTime {
        timestamp_us: op.timestamp_us,
        ttl_s: op.ttl_s,
        now_s: now,
    };
    let elements: Vec<&Cell> = current
        .map(|r| {
            r.cells
                .iter()
                .filter(|c| c.column == col.id && c.value_at(now).is_some())
                .collect()
        })
        .unwrap_or_default();
    match op.kind {
        ReadOpKind::SetIndex { index, value } => {
            let cell = usize::try_from(index)
                .ok()
                .and_then(|i| elements.get(i))
                .ok_or_else(|| {
                    invalid(format!(
                        "List index {index} out of bound, list has size {}",
                        elements.len()
                    ))
                })?;
            update.cells.push(match value {
                Some(v) => live_cell(col, cell.path.clone(), v, wt),
                None => tombstone_cell(col, cell.path.clone(), wt),
            });
        }
        ReadOpKind::RemoveValues(values) => {
            for cell in elements {
                if cell
                    .value_at(now)
                    .is_some_and(|v| values.iter().any(|x| x.as_slice() == v))
                {
                    update.cells.push(tombstone_cell(col, cell.path.clone(), wt));
                }
            }
        }
    }
    Ok(())
}
