//! SELECT: rows of one table, by partition, by token range, or all of them; paged.
//!
//! A SELECT becomes reads the coordinator answers: partition reads when the WHERE clause names
//! the partitions, a token-range read otherwise. Rows come back as stored (deletions included)
//! and are made visible here, at the request's clock.
//!
//! A paging state is ours to define (drivers hand it back untouched). It names a position in
//! the data, not in one node's index, so a driver may resume a page on any coordinator:
//!
//! ```text
//! [version u8 = 2][kind u8][rows returned so far u64][rows of the current partition u32]
//! kind 1, by partition: [index of the partition in the statement's partitions, in token
//!                        order, u32][clustering key of the last row: u32 length, bytes;
//!                        length u32::MAX: start the partition from its beginning]
//! kind 2, by scan:      [token i64][partition key: u32 length, bytes][clustering key of the
//!                        last row: u32 length, bytes; u32::MAX: after the whole partition]
//! kind 3, built-in:     [rows skipped u64]
//! ```

use std::borrow::Cow;
use std::ops::Bound;
use std::sync::Arc;

use hayate_cluster::coordinator::{Coordinator, ReadRequest};
use hayate_cluster::replica::{PartitionRead, RangeRead, RangeStart, ReadCommand, ReplicaRow, RowPosition};
use hayate_cql::response::result::{ColumnSpec, ColumnType, ResultBody, Rows, RowsMetadata, TableSpec};
use hayate_cql::statement::{CompareOp, Relation, RelationLhs, Select, Selection, SelectorExpr, Term};
use hayate_cql::value::{json, split_components, DataType};
use hayate_storage::row::Row;

use super::bind::{evaluate_integer, Binds, Integer};
use super::cells::{is_static_key, row_values, RowValues};
use super::functions::{self, Accumulator, AggregateKind, Scalar};
use super::keys::ClusteringRange;
use super::restrictions::{Restrictions, WherePlan};
use super::{resolve_table, Context, VirtualTables, PAGE_ROWS_MAX};
use crate::error::{consistency_level, invalid, QueryResult};
use crate::schema::{ColumnKind, Keyspace, Table};

const PAGING_VERSION: u8 = 2;
const KIND_PARTITION: u8 = 1;
const KIND_SCAN: u8 = 2;
const KIND_BUILT_IN: u8 = 3;
/// Rows a scan asks the engine for at once.
const SCAN_BATCH_ROWS: usize = 1000;

/// What one output column shows.
#[derive(Clone, Debug)]
pub enum Output {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    Token,
    /// A function of one column's value.
    Scalar {
        f: Scalar,
        column: usize,
        ty: DataType,
    },
    /// One field of a user-defined type column: `col.field`.
    Field {
        column: usize,
        index: usize,
    },
    /// An aggregate over the rows; `column` is `None` for `count(*)`.
    Aggregate {
        kind: AggregateKind,
        column: Option<usize>,
        ty: DataType,
    },
}

/// The selection of a SELECT, resolved against its table.
pub struct Projection {
    pub outputs: Vec<Output>,
    pub specs: Arc<[ColumnSpec]>,
    pub aggregate: bool,
}

/// What a SELECT's text and its table decide, before any bind value: the columns it returns,
/// how rows group, the result metadata, and the WHERE clause compiled. A prepared statement keeps its plan (see
/// [`super::Memo`]) so that each EXECUTE only binds values and reads; a plan is good only for
/// the table it was made from.
pub struct Plan {
    table: Arc<Table>,
    projection: Projection,
    grouping: Grouping,
    result: Arc<[ColumnSpec]>,
    /// The WHERE clause, compiled.
    restrictions: WherePlan,
}

/// SELECT plans made since the node started (see [`plans_compiled`]).
static PLANS_COMPILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many SELECT plans of stored tables this node has made: one per statement text and table,
/// and none per EXECUTE of a prepared statement that has its plan (shown by `/tablestats`).
/// Reads of the virtual tables (`system.local`, `system_schema.*`: drivers query them on
/// their own) are not counted.
pub fn plans_compiled() -> u64 {
    PLANS_COMPILED.load(std::sync::atomic::Ordering::Relaxed)
}

impl Plan {
    fn new(table: &Arc<Table>, select: &Select) -> QueryResult<Plan> {
        if !table.is_virtual {
            PLANS_COMPILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let projection = projection(table, select)?;
        let grouping = grouping(table, select, &projection)?;
        if grouping == Grouping::All && select.per_partition_limit.is_some() {
            return Err(invalid(
                "PER PARTITION LIMIT is not allowed with aggregate queries.",
            ));
        }
        if select.distinct {
            distinct_columns(table, &projection)?;
        }
        let result = result_specs(table, select, &projection);
        let restrictions = WherePlan::compile(table, &select.where_clause, select.allow_filtering)?;
        Ok(Plan {
            table: table.clone(),
            projection,
            grouping,
            result,
            restrictions,
        })
    }

    /// The statement's plan for `table`: the one `ctx` remembers when it was made for this very
    /// table, or a new one, which `ctx` then remembers if it had none.
    fn for_table(ctx: &Context<'_>, table: &Arc<Table>, select: &Select) -> QueryResult<Arc<Plan>> {
        let remembered = ctx.memo.and_then(|m| m.select.get());
        if let Some(plan) = remembered.filter(|p| Arc::ptr_eq(&p.table, table)) {
            return Ok(plan.clone());
        }
        let plan = Arc::new(Plan::new(table, select)?);
        if let Some(memo) = ctx.memo {
            // A memo that holds another table's plan keeps it: this statement is then planned
            // on each request, which is only slower.
            let _ = memo.select.set(plan.clone());
        }
        Ok(plan)
    }
}

pub fn projection(table: &Table, select: &Select) -> QueryResult<Projection> {
    let spec_of = |name: String, ty: ColumnType| ColumnSpec {
        table: TableSpec {
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
        },
        name,
        ty,
    };
    let mut outputs = Vec::new();
    let mut specs = Vec::new();
    match &select.selection {
        Selection::Wildcard => {
            for i in table.select_star_order() {
                let c = &table.columns[i];
                outputs.push(Output::Column(i));
                specs.push(spec_of(c.name.clone(), c.ty.to_column_type()));
            }
        }
        Selection::Selectors(selectors) => {
            for s in selectors {
                let (output, name, ty) = match &s.expr {
                    SelectorExpr::Column(name) => {
                        let i = column(table, name)?;
                        (
                            Output::Column(i),
                            name.clone(),
                            table.columns[i].ty.to_column_type(),
                        )
                    }
                    SelectorExpr::WriteTime(name) | SelectorExpr::Ttl(name) => {
                        let writetime = matches!(s.expr, SelectorExpr::WriteTime(_));
                        let fname = if writetime { "writetime" } else { "ttl" };
                        let i = column(table, name)?;
                        let c = &table.columns[i];
                        if c.kind.is_primary_key() {
                            return Err(invalid(format!(
                                "Cannot use selection function {fname} on PRIMARY KEY part {name}"
                            )));
                        }
                        if c.ty.is_multi_cell() {
                            return Err(invalid(format!(
                                "Cannot use selection function {fname} on non-frozen collection {name}"
                            )));
                        }
                        if writetime {
                            (
                                Output::WriteTime(i),
                                format!("writetime({name})"),
                                ColumnType::Bigint,
                            )
                        } else {
                            (Output::Ttl(i), format!("ttl({name})"), ColumnType::Int)
                        }
                    }
                    SelectorExpr::Field { expr, field } => {
                        let SelectorExpr::Column(name) = expr.as_ref() else {
                            return Err(invalid(
                                "hayate supports field selection only on a column, as column.field",
                            ));
                        };
                        let i = column(table, name)?;
                        let DataType::Udt { def, .. } = &table.columns[i].ty else {
                            return Err(invalid(format!(
                                "Invalid field selection: {name} of type {} is not a user type",
                                table.columns[i].ty
                            )));
                        };
                        let index = def.field_index(field).ok_or_else(|| {
                            invalid(format!("{} of type {} has no field {field}", name, def.name))
                        })?;
                        (
                            Output::Field { column: i, index },
                            format!("{name}.{field}"),
                            def.field_types[index].to_column_type(),
                        )
                    }
                    SelectorExpr::CountRows => (
                        Output::Aggregate {
                            kind: AggregateKind::Count,
                            column: None,
                            ty: DataType::BigInt,
                        },
                        "count".to_owned(),
                        ColumnType::Bigint,
                    ),
                    SelectorExpr::Function { name, args } if name.name.eq_ignore_ascii_case("token") => {
                        let cols: Vec<String> = args
                            .iter()
                            .map(|a| match a {
                                SelectorExpr::Column(c) => Ok(c.clone()),
                                _ => Err(invalid("token() takes the partition key columns")),
                            })
                            .collect::<QueryResult<_>>()?;
                        let expected: Vec<String> =
                            table.partition_columns().map(|c| c.name.clone()).collect();
                        if cols != expected {
                            return Err(invalid(format!(
                                "Type error: token() needs the partition key columns ({})",
                                expected.join(", ")
                            )));
                        }
                        (
                            Output::Token,
                            format!("system.token({})", cols.join(", ")),
                            ColumnType::Bigint,
                        )
                    }
                    SelectorExpr::Function { name, args } => {
                        let fname = name.name.to_ascii_lowercase();
                        let [SelectorExpr::Column(arg)] = args.as_slice() else {
                            return Err(invalid(format!(
                                "hayate supports {fname} only on a column, as {fname}(column)"
                            )));
                        };
                        let i = column(table, arg)?;
                        let arg_ty = &table.columns[i].ty;
                        let label = format!("system.{fname}({arg})");
                        if let Some((kind, ty)) = functions::aggregate(&fname, arg_ty) {
                            let wire = ty.to_column_type();
                            (
                                Output::Aggregate {
                                    kind,
                                    column: Some(i),
                                    ty,
                                },
                                label,
                                wire,
                            )
                        } else if let Some((f, ty)) = functions::scalar(&fname, arg_ty) {
                            let wire = ty.to_column_type();
                            (Output::Scalar { f, column: i, ty }, label, wire)
                        } else {
                            return Err(invalid(format!(
                                "Unknown function {fname} for an argument of type {arg_ty} (hayate supports min, max, sum, avg, count, \
                                 toTimestamp, toDate, toUnixTimestamp, and the <type>AsBlob and blobAs<type> conversions)"
                            )));
                        }
                    }
                    _ => return Err(invalid("hayate does not support this kind of selector yet")),
                };
                outputs.push(output);
                specs.push(spec_of(s.alias.clone().unwrap_or(name), ty));
            }
        }
    }
    // Selectors that are not aggregates may sit beside aggregates: as in Cassandra, they show
    // the first row of each group.
    let aggregate = outputs.iter().any(|o| matches!(o, Output::Aggregate { .. }));
    Ok(Projection {
        outputs,
        specs: specs.into(),
        aggregate,
    })
}

/// How rows read become result rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// Each row read is a result row.
    Rows,
    /// Aggregates without GROUP BY: every row read is in one group, and its one result row
    /// comes back even when no row matched (with `count` 0 and the other selectors null).
    All,
    /// GROUP BY: rows of one partition whose first `clustering` clustering columns are equal
    /// are one group, and each group is one result row. Groups never span partitions, since
    /// the partition key is always part of the group.
    By { clustering: usize },
}

/// Checks GROUP BY as Cassandra does: the columns must be primary key columns, in their
/// declared order, and may skip only columns restricted by `=`; they must cover the whole
/// partition key.
pub fn grouping(table: &Table, select: &Select, projection: &Projection) -> QueryResult<Grouping> {
    if select.group_by.is_empty() {
        return Ok(if projection.aggregate {
            Grouping::All
        } else {
            Grouping::Rows
        });
    }
    let out_of_order = || {
        invalid("Group by currently only support groups of columns following their declared order in the PRIMARY KEY")
    };
    let restricted_by_eq = |i: usize| {
        let name = &table.columns[i].name;
        select.where_clause.iter().any(|r| match r {
            Relation::Compare {
                lhs: RelationLhs::Column(c),
                op: CompareOp::Eq,
                ..
            } => c == name,
            Relation::Compare {
                lhs: RelationLhs::Tuple(cs),
                op: CompareOp::Eq,
                ..
            } => cs.contains(name),
            _ => false,
        })
    };
    let key: Vec<usize> = table
        .partition_key
        .iter()
        .chain(&table.clustering)
        .copied()
        .collect();
    let mut next = 0;
    for name in &select.group_by {
        let i = table.column_index(name).ok_or_else(|| {
            invalid(format!(
                "Undefined column name {name} in table {}.{}",
                table.keyspace, table.name
            ))
        })?;
        if !matches!(
            table.columns[i].kind,
            ColumnKind::PartitionKey | ColumnKind::Clustering
        ) {
            return Err(invalid(format!(
                "Group by is currently only supported on the columns of the PRIMARY KEY, got {name}"
            )));
        }
        loop {
            let Some(&k) = key.get(next) else {
                return Err(out_of_order());
            };
            next += 1;
            if k == i {
                break;
            }
            if !restricted_by_eq(k) {
                return Err(out_of_order());
            }
        }
    }
    if next < table.partition_key.len() {
        return Err(invalid(
            "Group by is not supported on only a part of the partition key",
        ));
    }
    let clustering = next - table.partition_key.len();
    if clustering > 0 && select.distinct {
        return Err(invalid(
            "Grouping on clustering columns is not allowed for SELECT DISTINCT queries",
        ));
    }
    Ok(Grouping::By { clustering })
}

/// The result columns: the selection's, or for SELECT JSON the one text column `[json]`.
pub fn result_specs(table: &Table, select: &Select, projection: &Projection) -> Arc<[ColumnSpec]> {
    if !select.json {
        return projection.specs.clone();
    }
    Arc::new([ColumnSpec {
        table: TableSpec {
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
        },
        name: "[json]".to_owned(),
        ty: ColumnType::Varchar,
    }])
}

fn column(table: &Table, name: &str) -> QueryResult<usize> {
    table
        .column_index(name)
        .ok_or_else(|| invalid(format!("Undefined column name {name} in selection clause")))
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

/// Decoded paging state.
#[derive(Default)]
struct Resume {
    returned: u64,
    partition_rows: u32,
    partition_index: usize,
    clustering: Option<Vec<u8>>,
    scan: Option<RowPosition>,
    skipped: u64,
}

/// Reads a paging state; anything we did not write is refused, never trusted.
fn decode_paging(state: &[u8]) -> QueryResult<(u8, Resume)> {
    let bad = || invalid("Invalid paging state: it was not made by this server for this query");
    let mut c = Cursor(state);
    let head = c.take(2).ok_or_else(bad)?;
    if head[0] != PAGING_VERSION {
        return Err(bad());
    }
    let kind = head[1];
    let mut resume = Resume {
        returned: c.u64().ok_or_else(bad)?,
        partition_rows: c.u32().ok_or_else(bad)?,
        ..Resume::default()
    };
    match kind {
        KIND_PARTITION => {
            resume.partition_index = c.u32().ok_or_else(bad)? as usize;
            resume.clustering = c.bytes().ok_or_else(bad)?;
        }
        KIND_SCAN => {
            let token = c.u64().ok_or_else(bad)? as i64;
            let partition = c.bytes().ok_or_else(bad)?.ok_or_else(bad)?;
            let clustering = c.bytes().ok_or_else(bad)?;
            resume.scan = Some(RowPosition {
                token,
                partition,
                clustering,
            });
        }
        KIND_BUILT_IN => resume.skipped = c.u64().ok_or_else(bad)?,
        _ => return Err(bad()),
    }
    if !c.0.is_empty() {
        return Err(bad());
    }
    Ok((kind, resume))
}

/// Reads big-endian fields off the front of a paging state.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A length-prefixed byte string; the length u32::MAX stands for "none".
    fn bytes(&mut self) -> Option<Option<Vec<u8>>> {
        let len = self.u32()?;
        if len == u32::MAX {
            return Some(None);
        }
        Some(Some(self.take(len as usize)?.to_vec()))
    }
}

fn paging_head(kind: u8, returned: u64, partition_rows: u32) -> Vec<u8> {
    let mut s = vec![PAGING_VERSION, kind];
    s.extend_from_slice(&returned.to_be_bytes());
    s.extend_from_slice(&partition_rows.to_be_bytes());
    s
}

fn put_bytes(s: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            s.extend_from_slice(&(b.len() as u32).to_be_bytes());
            s.extend_from_slice(b);
        }
        None => s.extend_from_slice(&u32::MAX.to_be_bytes()),
    }
}

/// Collects output rows, enforcing LIMIT, PER PARTITION LIMIT and the page size. Under
/// GROUP BY each of these counts groups, as Cassandra counts them, so a group is never split
/// across pages.
struct Sink<'p> {
    projection: &'p Projection,
    grouping: Grouping,
    /// Set for SELECT JSON.
    json: Option<JsonRows>,
    content: Vec<u8>,
    /// Result rows in `content`.
    rows: usize,
    /// The group being aggregated, when grouping.
    group: Option<Group>,
    accumulators: Vec<Accumulator>,
    /// Result rows (or groups) returned so far, by this page and the ones before it.
    returned: u64,
    limit: Option<usize>,
    per_partition: Option<usize>,
    page: usize,
    /// Result rows (or groups) of the current partition.
    partition_rows: u32,
}

/// A group of rows being aggregated: the values of its grouping columns, and the cells its
/// non-aggregate selectors show, which are those of its first row.
struct Group {
    key: Vec<Option<Vec<u8>>>,
    first: Vec<Option<Vec<u8>>>,
}

/// What one output shows for one row; `None` for an aggregate, which shows its group. A
/// column's value is borrowed from the row; what an output computes is owned.
fn cell<'v>(o: &Output, table: &Table, v: &'v RowValues, token: i64) -> Option<Cow<'v, [u8]>> {
    match o {
        Output::Column(i) => v.values[*i].as_deref().map(Cow::Borrowed),
        Output::WriteTime(i) => v.writetimes[*i].map(|t| Cow::Owned(t.to_be_bytes().to_vec())),
        Output::Ttl(i) => v.ttls[*i].map(|t| Cow::Owned(t.to_be_bytes().to_vec())),
        Output::Token => Some(Cow::Owned(token.to_be_bytes().to_vec())),
        Output::Field { column, index } => v.values[*column].as_deref().and_then(|b| {
            split_components(b)
                .ok()
                .and_then(|c| c.get(*index).copied().flatten().map(Cow::Borrowed))
        }),
        // toJson of a null is the JSON text `null`.
        Output::Scalar {
            f: Scalar::ToJson,
            column,
            ..
        } if v.values[*column].is_none() => Some(Cow::Borrowed(b"null")),
        Output::Scalar { f, column, .. } => v.values[*column]
            .as_deref()
            .and_then(|b| functions::apply(f, &table.columns[*column].ty, b))
            .map(Cow::Owned),
        Output::Aggregate { .. } => None,
    }
}

impl Output {
    /// The type of what this output shows.
    fn data_type(&self, table: &Table) -> DataType {
        match self {
            Output::Column(i) => table.columns[*i].ty.clone(),
            Output::WriteTime(_) | Output::Token => DataType::BigInt,
            Output::Ttl(_) => DataType::Int,
            Output::Field { column, index } => match &table.columns[*column].ty {
                DataType::Udt { def, .. } => def.field_types[*index].clone(),
                // A field output is only made for a UDT column (see `projection`).
                other => other.clone(),
            },
            Output::Scalar { ty, .. } | Output::Aggregate { ty, .. } => ty.clone(),
        }
    }
}

/// SELECT JSON: each result row becomes one text value, a JSON object keyed by the names of
/// the selected columns (in double quotes when they are case-sensitive, as Cassandra writes
/// them), in a column named `[json]`.
pub struct JsonRows {
    /// Each output's key, written as a JSON string followed by `": "`.
    keys: Vec<String>,
    types: Vec<DataType>,
}

impl JsonRows {
    fn new(table: &Table, projection: &Projection) -> JsonRows {
        let keys = projection
            .specs
            .iter()
            .map(|spec| {
                let name = if spec.name == spec.name.to_lowercase() {
                    spec.name.clone()
                } else {
                    format!("\"{}\"", spec.name)
                };
                let mut key = String::new();
                json::write_json_string(&name, &mut key);
                key.push_str(": ");
                key
            })
            .collect();
        let types = projection.outputs.iter().map(|o| o.data_type(table)).collect();
        JsonRows { keys, types }
    }

    fn object(&self, cells: &[Option<impl AsRef<[u8]>>]) -> Vec<u8> {
        let mut out = String::from("{");
        for (i, ((key, ty), cell)) in self.keys.iter().zip(&self.types).zip(cells).enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(key);
            match cell {
                Some(b) => out.push_str(&json::to_json(ty, b.as_ref())),
                None => out.push_str("null"),
            }
        }
        out.push('}');
        out.into_bytes()
    }
}

fn put_cell(content: &mut Vec<u8>, cell: Option<&[u8]>) {
    match cell {
        Some(b) => {
            content.extend_from_slice(&(b.len() as i32).to_be_bytes());
            content.extend_from_slice(b);
        }
        None => content.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

impl Sink<'_> {
    fn done(&self) -> bool {
        self.limit_reached() || self.rows >= self.page
    }

    fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.returned as usize >= l)
    }

    fn partition_full(&self) -> bool {
        self.per_partition
            .is_some_and(|l| self.partition_rows as usize >= l)
    }

    /// Rows to ask the engine for at once: no more than the page holds or the LIMIT leaves,
    /// unless rows are grouped, when a page of groups may take any number of rows. Rows a
    /// filter drops do not count towards the LIMIT, so a `filtered` read asks for the page.
    ///
    /// Asking for more than the LIMIT leaves costs a read of each row too many: before
    /// 2026-12-02 a YCSB scan (`LIMIT ?` of 1 to 100 rows, unpaged) read 1,000 rows each time.
    fn want(&self, filtered: bool) -> usize {
        match self.grouping {
            Grouping::Rows => {
                let left = match self.limit {
                    Some(limit) if !filtered => limit.saturating_sub(self.returned as usize),
                    _ => usize::MAX,
                };
                (self.page - self.rows).min(left).clamp(1, SCAN_BATCH_ROWS)
            }
            Grouping::All | Grouping::By { .. } => SCAN_BATCH_ROWS,
        }
    }

    /// Takes one row. Returns false when the row starts a group that this page has no room
    /// for (or that LIMIT excludes): the caller stops before it, and the next page starts at it.
    fn push(&mut self, table: &Table, v: &RowValues, token: i64) -> bool {
        match self.grouping {
            Grouping::Rows => {
                self.returned += 1;
                self.partition_rows += 1;
                self.rows += 1;
                if let Some(json) = &self.json {
                    let cells: Vec<Option<Cow<[u8]>>> = self
                        .projection
                        .outputs
                        .iter()
                        .map(|o| cell(o, table, v, token))
                        .collect();
                    put_cell(&mut self.content, Some(&json.object(&cells)));
                } else {
                    // Each cell is a 4-byte length and its bytes: a column's are known, the
                    // computed outputs are mostly 8 (writetime, token) and may grow the page.
                    let bytes: usize = (self.projection.outputs.iter())
                        .map(|o| match o {
                            Output::Column(i) => 4 + v.values[*i].as_ref().map_or(0, |b| b.len()),
                            _ => 4 + 8,
                        })
                        .sum();
                    self.content.reserve(bytes);
                    for o in &self.projection.outputs {
                        put_cell(&mut self.content, cell(o, table, v, token).as_deref());
                    }
                }
                true
            }
            Grouping::All => {
                // Counted only so that DISTINCT takes one row of each partition; PER PARTITION
                // LIMIT is refused with aggregates.
                self.partition_rows += 1;
                if self.group.is_none() {
                    self.start_group(table, v, token, Vec::new());
                }
                self.accumulate(table, v);
                true
            }
            Grouping::By { clustering } => {
                let key: Vec<Option<Vec<u8>>> = table
                    .partition_key
                    .iter()
                    .chain(&table.clustering[..clustering])
                    .map(|&i| v.values[i].as_deref().map(<[u8]>::to_vec))
                    .collect();
                if self.group.as_ref().is_some_and(|g| g.key == key) {
                    self.accumulate(table, v);
                    return true;
                }
                self.flush_group();
                if self.done() {
                    return false;
                }
                if !self.partition_full() {
                    self.start_group(table, v, token, key);
                    self.accumulate(table, v);
                }
                true
            }
        }
    }

    fn start_group(&mut self, table: &Table, v: &RowValues, token: i64, key: Vec<Option<Vec<u8>>>) {
        let first = self
            .projection
            .outputs
            .iter()
            .map(|o| cell(o, table, v, token).map(Cow::into_owned))
            .collect();
        self.group = Some(Group { key, first });
        self.accumulators = vec![Accumulator::default(); self.projection.outputs.len()];
    }

    fn accumulate(&mut self, table: &Table, v: &RowValues) {
        for (o, acc) in self.projection.outputs.iter().zip(&mut self.accumulators) {
            if let Output::Aggregate { kind, column, .. } = o {
                match column {
                    Some(i) => acc.add(*kind, &table.columns[*i].ty, v.values[*i].as_deref()),
                    // count(*): every row counts.
                    None => acc.add(*kind, &DataType::Blob, Some(&[1])),
                }
            }
        }
    }

    /// Writes the group being aggregated as a result row, if there is one. A partition's end
    /// ends its groups, so the readers call this there too.
    fn flush_group(&mut self) {
        // Without GROUP BY, the one group spans partitions and ends with the reads.
        if !matches!(self.grouping, Grouping::By { .. }) {
            return;
        }
        let Some(group) = self.group.take() else {
            return;
        };
        self.write_group(&group.first);
        self.returned += 1;
        self.partition_rows += 1;
    }

    fn write_group(&mut self, first: &[Option<Vec<u8>>]) {
        let cells: Vec<Option<Vec<u8>>> = self
            .projection
            .outputs
            .iter()
            .enumerate()
            .map(|(i, o)| match o {
                Output::Aggregate { kind, ty, .. } => self.accumulators[i].finish(*kind, ty),
                _ => first.get(i).cloned().flatten(),
            })
            .collect();
        match &self.json {
            Some(json) => put_cell(&mut self.content, Some(&json.object(&cells))),
            None => {
                for c in &cells {
                    put_cell(&mut self.content, c.as_deref());
                }
            }
        }
        self.rows += 1;
    }

    /// Ends the reads: the last group is written, and aggregates without GROUP BY write their
    /// one row even when no row matched.
    fn finish(&mut self) {
        match self.grouping {
            Grouping::Rows => {}
            Grouping::By { .. } => self.flush_group(),
            Grouping::All => {
                let first = self.group.take().map(|g| g.first).unwrap_or_default();
                if first.is_empty() {
                    self.accumulators = vec![Accumulator::default(); self.projection.outputs.len()];
                }
                self.write_group(&first);
            }
        }
    }
}

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

/// SELECT DISTINCT returns one row per partition, so it may show only what a partition has
/// once: its key and its static columns.
fn distinct_columns(table: &Table, projection: &Projection) -> QueryResult<()> {
    for o in &projection.outputs {
        let column = match o {
            Output::Column(i) | Output::WriteTime(i) | Output::Ttl(i) | Output::Field { column: i, .. } => {
                Some(*i)
            }
            Output::Scalar { column, .. } => Some(*column),
            Output::Aggregate { column, .. } => *column,
            Output::Token => None,
        };
        if let Some(i) = column {
            let c = &table.columns[i];
            if matches!(c.kind, ColumnKind::Clustering | ColumnKind::Regular) && !table.is_virtual {
                return Err(invalid(format!(
                    "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {})",
                    c.name
                )));
            }
        }
    }
    Ok(())
}

/// Whether rows come in reverse clustering order, checking ORDER BY as Cassandra does.
fn ordering(table: &Table, select: &Select, r: &Restrictions) -> QueryResult<bool> {
    if select.order_by.is_empty() {
        return Ok(false);
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

fn passes(table: &Table, r: &Restrictions, v: &RowValues) -> bool {
    r.filters
        .iter()
        .all(|f| f.matches(&table.columns[f.column].ty, v.values[f.column].as_deref()))
}

/// One SELECT's reads of stored rows.
struct Reads<'a> {
    ctx: &'a Context<'a>,
    coordinator: &'a Coordinator,
    keyspace: &'a Keyspace,
    table: &'a Table,
    restrictions: &'a Restrictions,
    distinct: bool,
}

impl Reads<'_> {
    async fn read(&self, command: ReadCommand) -> QueryResult<hayate_cluster::coordinator::ReadResult> {
        Ok(self
            .coordinator
            .read(ReadRequest {
                replication: self.keyspace.strategy(),
                consistency: consistency_level(self.ctx.consistency),
                command,
                speculative_retry: self.table.speculative_retry(),
            })
            .await?)
    }

    /// True when the rest of the current partition is not wanted.
    fn partition_done(&self, sink: &Sink<'_>) -> bool {
        sink.partition_full() || (self.distinct && sink.partition_rows > 0)
    }

    /// Partitions named by the WHERE clause, in token order, each read in clustering order.
    async fn by_partition(
        &self,
        partitions: &[Vec<u8>],
        reverse: bool,
        sink: &mut Sink<'_>,
        resume: Option<Resume>,
    ) -> QueryResult<Option<Vec<u8>>> {
        let table = self.table;
        let (start_index, mut after) = match resume {
            Some(r) => (r.partition_index, r.clustering),
            None => (0, None),
        };
        let mut ordered: Vec<(i64, &Vec<u8>)> = partitions
            .iter()
            .map(|p| (hayate_storage::token::token(p), p))
            .collect();
        // Cassandra returns IN partitions in token order.
        ordered.sort();
        ordered.dedup();
        for (pi, &(token, pk)) in ordered.iter().enumerate().skip(start_index) {
            if pi > start_index {
                sink.partition_rows = 0;
                after = None;
            }
            // The row read before the current one in this partition, where a page that ends
            // before a group resumes.
            let mut prev = after.clone();
            let statics = self.static_row(token, pk).await?;
            let ranges: Vec<ClusteringRange> = if table.clustering.is_empty() {
                if after.is_some() {
                    continue;
                }
                // The partition is one row, whose clustering key is empty.
                vec![ClusteringRange {
                    start: Bound::Included(Vec::new()),
                    end: Bound::Included(Vec::new()),
                }]
            } else {
                let mut ranges = self.restrictions.clustering.clone();
                if reverse {
                    ranges.reverse();
                }
                ranges
            };
            'ranges: for mut range in ranges {
                if let Some(last) = &after {
                    // Skip ranges wholly before the resume point, and narrow the one holding it.
                    range.resume_after(last.clone(), reverse);
                    if range.is_empty() {
                        continue;
                    }
                }
                loop {
                    if sink.done() || self.partition_done(sink) {
                        break 'ranges;
                    }
                    let want = sink.want(!self.restrictions.filters.is_empty());
                    let result = self
                        .read(ReadCommand::Partition(PartitionRead {
                            table: table.storage_id,
                            token,
                            partition: pk.clone(),
                            start: range.start.clone(),
                            end: range.end.clone(),
                            reverse,
                            limit: want,
                        }))
                        .await?;
                    let mut last_key = None;
                    for mut row in result.rows {
                        if !emit(
                            self.ctx,
                            table,
                            self.restrictions,
                            sink,
                            &mut row,
                            statics.as_ref(),
                        ) {
                            if sink.limit_reached() {
                                return Ok(None);
                            }
                            return Ok(Some(partition_state(sink, pi, prev.as_deref())));
                        }
                        prev = Some(row.clustering.clone());
                        last_key = Some(row.clustering);
                        if sink.done() || self.partition_done(sink) {
                            break;
                        }
                    }
                    let Some(last) = last_key else { break };
                    if sink.done() && !sink.limit_reached() && !sink.partition_full() {
                        return Ok(Some(partition_state(sink, pi, Some(&last))));
                    }
                    if !result.more {
                        break;
                    }
                    range.resume_after(last, reverse);
                }
            }
            after = None;
            self.statics_alone(sink, token, pk, statics.as_ref());
            sink.flush_group();
            if sink.limit_reached() {
                return Ok(None);
            }
            if sink.rows >= sink.page && pi + 1 < ordered.len() {
                sink.partition_rows = 0;
                return Ok(Some(partition_state(sink, pi + 1, None)));
            }
        }
        Ok(None)
    }

    /// The whole table, or a token range of it, in token order.
    async fn scan(&self, sink: &mut Sink<'_>, resume: Option<Resume>) -> QueryResult<Option<Vec<u8>>> {
        let r = self.restrictions;
        let start_token = match r.token_start {
            Some(Bound::Included(t)) => Some(t),
            Some(Bound::Excluded(t)) => t.checked_add(1),
            _ => Some(i64::MIN),
        };
        let end_token = match r.token_end {
            Some(Bound::Included(t)) => Some(t),
            Some(Bound::Excluded(t)) => t.checked_sub(1),
            _ => Some(i64::MAX),
        };
        let (Some(start_token), Some(end_token)) = (start_token, end_token) else {
            return Ok(None);
        };
        if start_token > end_token {
            return Ok(None);
        }
        // The partition the rows being counted in `sink.partition_rows` belong to, with its
        // token and its static row (visible, if live).
        let mut current: Option<Vec<u8>> = None;
        let mut current_token = 0;
        let mut statics: Option<Row> = None;
        // The row read last, where a page that ends before a group resumes.
        let mut prev: Option<RowPosition> = None;
        let mut start = match resume.and_then(|r| r.scan) {
            Some(p) => {
                current = Some(p.partition.clone());
                current_token = p.token;
                if p.clustering.is_some() {
                    // Resuming inside a partition, whose static row the last page read.
                    statics = self.static_row(p.token, &p.partition).await?;
                }
                prev = Some(p.clone());
                RangeStart::After(p)
            }
            None => RangeStart::Token(start_token),
        };
        loop {
            let want = sink.want(!self.restrictions.filters.is_empty());
            let mut result = self
                .read(ReadCommand::Range(RangeRead {
                    table: self.table.storage_id,
                    start: start.clone(),
                    end_token,
                    limit: want,
                }))
                .await?;
            let mut next: Option<RowPosition> = None;
            for row in &mut result.rows {
                if current.as_deref() != Some(row.partition.as_slice()) {
                    if let Some(state) =
                        self.end_scanned_partition(sink, current_token, &current, statics.take())
                    {
                        return Ok(state);
                    }
                    // A partition's end ends its group, which may fill the page.
                    sink.flush_group();
                    if sink.limit_reached() {
                        return Ok(None);
                    }
                    if let (true, Some(p)) = (sink.done(), &prev) {
                        return Ok(Some(scan_state(sink, p.token, &p.partition, None)));
                    }
                    sink.partition_rows = 0;
                    current = Some(row.partition.clone());
                    current_token = row.token;
                }
                if is_static_key(self.table, &row.clustering) {
                    // The static row sorts first in its partition.
                    statics = self.visible_statics(&row.row);
                    prev = Some(row.position());
                    continue;
                }
                if self.partition_done(sink) {
                    // Go straight to the next partition.
                    next = Some(RowPosition {
                        token: row.token,
                        partition: row.partition.clone(),
                        clustering: None,
                    });
                    break;
                }
                if !emit(self.ctx, self.table, r, sink, row, statics.as_ref()) {
                    if sink.limit_reached() {
                        return Ok(None);
                    }
                    // The row starts a group this page has no room for: resume before it.
                    let Some(p) = &prev else {
                        return Err(invalid(
                            "internal error: a page of groups ended before its first row",
                        ));
                    };
                    return Ok(Some(scan_state(
                        sink,
                        p.token,
                        &p.partition,
                        p.clustering.as_deref(),
                    )));
                }
                prev = Some(row.position());
                if sink.limit_reached() {
                    return Ok(None);
                }
                if sink.done() {
                    return Ok(Some(scan_state(
                        sink,
                        row.token,
                        &row.partition,
                        Some(&row.clustering),
                    )));
                }
            }
            start = match next {
                Some(p) => RangeStart::After(p),
                None if result.more => match result.rows.last() {
                    Some(last) => RangeStart::After(last.position()),
                    None => return Ok(None),
                },
                None => {
                    return Ok(self
                        .end_scanned_partition(sink, current_token, &current, statics.take())
                        .flatten())
                }
            };
        }
    }

    /// A partition's static row, visible at the request's clock, if the table has static
    /// columns and the partition has live static cells.
    async fn static_row(&self, token: i64, partition: &[u8]) -> QueryResult<Option<Row>> {
        if !self.table.has_statics() {
            return Ok(None);
        }
        let result = self
            .read(ReadCommand::Partition(PartitionRead {
                table: self.table.storage_id,
                token,
                partition: partition.to_vec(),
                start: Bound::Included(Vec::new()),
                end: Bound::Included(Vec::new()),
                reverse: false,
                limit: 1,
            }))
            .await?;
        Ok(result.rows.first().and_then(|r| self.visible_statics(&r.row)))
    }

    fn visible_statics(&self, row: &Row) -> Option<Row> {
        let now = self.ctx.clock.now_s();
        let visible = row.visible(now);
        visible.is_live(now).then_some(visible)
    }

    /// Adds the row a partition shows when it has live static cells but no row the query
    /// returned, as Cassandra does when the query asks for whole partitions: the partition
    /// key, the static values, and nulls elsewhere.
    fn statics_alone(&self, sink: &mut Sink<'_>, token: i64, partition: &[u8], statics: Option<&Row>) {
        let Some(statics) = statics else { return };
        if sink.partition_rows > 0 || self.restrictions.restricts_clustering() || sink.done() {
            return;
        }
        let now = self.ctx.clock.now_s();
        let none = Row::default();
        let v = row_values(self.table, partition, &[], &none, Some(statics), now);
        if passes(self.table, self.restrictions, &v) {
            // A group that does not fit this page refuses it; the partition's statics then
            // show with the group on the next page.
            let _ = sink.push(self.table, &v, token);
        }
    }

    /// Ends a scanned partition: shows its static row alone if nothing else of it was shown.
    /// Returns the scan's result when that filled the page (`Some(None)`: the scan is over).
    fn end_scanned_partition(
        &self,
        sink: &mut Sink<'_>,
        token: i64,
        partition: &Option<Vec<u8>>,
        statics: Option<Row>,
    ) -> Option<Option<Vec<u8>>> {
        let partition = partition.as_deref()?;
        let before = sink.returned;
        self.statics_alone(sink, token, partition, statics.as_ref());
        if sink.returned == before {
            return None;
        }
        if sink.limit_reached() {
            return Some(None);
        }
        if sink.done() {
            // Resume after the whole partition.
            let mut s = paging_head(KIND_SCAN, sink.returned, 0);
            s.extend_from_slice(&token.to_be_bytes());
            put_bytes(&mut s, Some(partition));
            put_bytes(&mut s, None);
            return Some(Some(s));
        }
        None
    }
}

/// Resume a scan after the row at `clustering` of `partition`, or after the whole partition.
fn scan_state(sink: &Sink<'_>, token: i64, partition: &[u8], clustering: Option<&[u8]>) -> Vec<u8> {
    let mut s = paging_head(KIND_SCAN, sink.returned, sink.partition_rows);
    s.extend_from_slice(&token.to_be_bytes());
    put_bytes(&mut s, Some(partition));
    put_bytes(&mut s, clustering);
    s
}

/// Adds a row to the page if it is live at the request's clock and passes the filters; the
/// partition's static row (`statics`) lends it the static columns' values, and is not a row of
/// the result itself. Returns false when the sink refused it (see [`Sink::push`]). The row's
/// cells are taken (its key stays), so that the read's row is made visible without a copy.
fn emit(
    ctx: &Context<'_>,
    table: &Table,
    r: &Restrictions,
    sink: &mut Sink<'_>,
    row: &mut ReplicaRow,
    statics: Option<&Row>,
) -> bool {
    if is_static_key(table, &row.clustering) {
        return true;
    }
    let now = ctx.clock.now_s();
    let visible = std::mem::take(&mut row.row).into_visible(now);
    if !visible.is_live(now) {
        return true;
    }
    let v = row_values(table, &row.partition, &row.clustering, &visible, statics, now);
    !passes(table, r, &v) || sink.push(table, &v, row.token)
}

/// Resume in partition `pi` after the row with clustering key `last`, or at its start.
fn partition_state(sink: &Sink<'_>, pi: usize, last: Option<&[u8]>) -> Vec<u8> {
    let partition_rows = if last.is_some() { sink.partition_rows } else { 0 };
    let mut s = paging_head(KIND_PARTITION, sink.returned, partition_rows);
    s.extend_from_slice(&(pi as u32).to_be_bytes());
    put_bytes(&mut s, last);
    s
}

fn built_in(
    ctx: &Context<'_>,
    virtual_tables: &dyn VirtualTables,
    table: &Table,
    r: &Restrictions,
    sink: &mut Sink<'_>,
    resume: Option<Resume>,
) -> QueryResult<Option<Vec<u8>>> {
    let rows = virtual_tables.rows(&ctx.schema, table)?;
    let skip = resume.map_or(0, |r| r.skipped as usize);
    for (i, values) in rows.into_iter().enumerate().skip(skip) {
        let v = RowValues {
            writetimes: vec![None; values.len()],
            ttls: vec![None; values.len()],
            values: values.into_iter().map(|v| v.map(Cow::Owned)).collect(),
        };
        if !passes(table, r, &v) {
            continue;
        }
        if !sink.push(table, &v, 0) {
            if sink.limit_reached() {
                return Ok(None);
            }
            let mut s = paging_head(KIND_BUILT_IN, sink.returned, 0);
            s.extend_from_slice(&(i as u64).to_be_bytes());
            return Ok(Some(s));
        }
        if sink.limit_reached() {
            return Ok(None);
        }
        if sink.done() {
            let mut s = paging_head(KIND_BUILT_IN, sink.returned, 0);
            s.extend_from_slice(&((i + 1) as u64).to_be_bytes());
            return Ok(Some(s));
        }
    }
    Ok(None)
}
