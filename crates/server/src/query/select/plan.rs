//! A SELECT's plan: what its text and its table decide before any bind value.

use std::sync::Arc;

use hayate_cluster::coordinator::SpeculativeRetry;
use hayate_cql::response::result::{ColumnSpec, ColumnType, TableSpec};
use hayate_cql::statement::{CompareOp, Relation, RelationLhs, Select, Selection, SelectorExpr};
use hayate_cql::value::DataType;

use super::super::functions::{self, AggregateKind, Scalar};
use super::super::restrictions::WherePlan;
use super::super::Context;
use crate::error::{invalid, QueryResult};
use crate::schema::{ColumnKind, Table};

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
/// [`crate::query::Memo`]) so that each EXECUTE only binds values and reads; a plan is good only for
/// the table it was made from.
pub struct Plan {
    pub(super) table: Arc<Table>,
    pub(super) projection: Projection,
    pub(super) grouping: Grouping,
    pub(super) result: Arc<[ColumnSpec]>,
    /// The WHERE clause, compiled.
    pub(super) restrictions: WherePlan,
    /// The table's `speculative_retry` option, parsed.
    pub(super) speculative_retry: SpeculativeRetry,
}

impl Plan {
    pub(super) fn new(table: &Arc<Table>, select: &Select) -> QueryResult<Plan> {
        if !table.is_virtual {
            super::super::plan_compiled();
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
            speculative_retry: table.speculative_retry(),
        })
    }

    /// The statement's plan for `table`: the one `ctx` remembers when it was made for this very
    /// table, or a new one, which `ctx` then remembers if it had none.
    pub(super) fn for_table(
        ctx: &Context<'_>,
        table: &Arc<Table>,
        select: &Select,
    ) -> QueryResult<Arc<Plan>> {
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

pub(super) fn column(table: &Table, name: &str) -> QueryResult<usize> {
    table
        .column_index(name)
        .ok_or_else(|| invalid(format!("Undefined column name {name} in selection clause")))
}

impl Output {
    /// The type of what this output shows.
    pub(super) fn data_type(&self, table: &Table) -> DataType {
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

/// SELECT DISTINCT returns one row per partition, so it may show only what a partition has
/// once: its key and its static columns.
pub(super) fn distinct_columns(table: &Table, projection: &Projection) -> QueryResult<()> {
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
