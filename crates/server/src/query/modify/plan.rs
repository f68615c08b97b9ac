//! An INSERT, UPDATE, DELETE or BATCH compiled against its tables, once per statement and table:
//! each table resolved and checked as every write is, each column an INSERT lists, an UPDATE
//! assigns or a DELETE removes found by name and its operation checked against the column's
//! type, the statement's shape decided (does it write only static columns?), and the WHERE
//! clause compiled. Binding a request's values ([`super::rows`]) then looks nothing up by name.
//!
//! A prepared statement keeps its plan in its [`Memo`](crate::query::Memo) and uses it while
//! every table the plan names is still the one the statement resolves to: a schema change makes
//! a new table, and the statement is compiled again.
//!
//! Errors that depend on the text and the tables alone are raised here, with one exception kept
//! for the order in which errors are reported: a column that cannot be resolved (an unknown
//! name, a key column in SET, an operation the column's type does not take) ends its list with
//! its error, and binding raises that error where it reaches the column, after the checks
//! and values that came before it, as when nothing was compiled.

use std::sync::Arc;

use hayate_cql::statement::{
    Assignment, BatchKind, BatchStatement, Condition, Delete, DeleteTarget, Insert, InsertValues, Operation,
    QualifiedName, Statement, Term, Update, Using,
};
use hayate_cql::value::DataType;

use super::condition::{self, Conditions};
use super::BATCH_STATEMENTS_MAX;
use crate::error::{invalid, QueryError, QueryResult};
use crate::query::restrictions::WherePlan;
use crate::query::{resolve_table, Context};
use crate::schema::{ColumnKind, Keyspace, Table};

/// A modification statement, compiled: one [`Write`] per statement (one, or each of a BATCH's).
pub struct Plan {
    /// The BATCH around the writes, if the statement is one.
    pub(super) batch: Option<BatchPlan>,
    pub(super) writes: Vec<Write>,
    /// The writes are to counter tables (all of them: a statement cannot mix).
    pub(super) counter: bool,
}

/// What a BATCH adds to its statements.
pub(super) struct BatchPlan {
    /// The batch's own USING TIMESTAMP, shared by every statement.
    pub(super) timestamp: Option<Term>,
}

/// One INSERT, UPDATE or DELETE, against the table it was compiled for.
pub(super) struct Write {
    pub(super) table: Arc<Table>,
    /// USING TIMESTAMP and TTL, as written (their values are bound per request).
    pub(super) using: Using,
    pub(super) shape: Shape,
    /// The IF clause of a conditional statement (a lightweight transaction).
    pub(super) condition: Option<Conditions>,
}

pub(super) enum Shape {
    Insert(InsertPlan),
    Update(UpdatePlan),
    Delete(DeletePlan),
}

/// Items compiled in the statement's order, up to the first that could not be: its error is
/// raised when binding reaches it, so that what came before it is judged first.
pub(super) struct Compiled<T> {
    pub(super) items: Vec<T>,
    pub(super) refused: Option<QueryError>,
}

impl<T> Compiled<T> {
    /// Takes `items` (a lazy iterator) up to the first error.
    fn of(items: impl IntoIterator<Item = QueryResult<T>>) -> Compiled<T> {
        let mut compiled = Compiled {
            items: Vec::new(),
            refused: None,
        };
        for item in items {
            match item {
                Ok(item) => compiled.items.push(item),
                Err(e) => {
                    compiled.refused = Some(e);
                    break;
                }
            }
        }
        compiled
    }

    /// The error that ended the list, for binding to raise once it has gone through the items.
    pub(super) fn refused(&self) -> QueryResult<()> {
        match &self.refused {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

pub(super) enum InsertPlan {
    /// `(columns) VALUES (terms)`: the column index each term goes to.
    Columns {
        values: Compiled<(usize, Term)>,
        /// No clustering column is given and every other column given is static (with at least
        /// one): the write goes to the partition's static row alone.
        static_only: bool,
    },
    /// `JSON '{...}'`: the object's keys are names in the value, looked up when bound.
    Json { json: Term, default_unset: bool },
}

pub(super) struct UpdatePlan {
    pub(super) rows: WherePlan,
    /// Every assignment is to a static column: the rows named are the partitions' static rows.
    pub(super) static_only: bool,
    /// Some assignment is to a static column.
    pub(super) any_static: bool,
    pub(super) assignments: Compiled<Assign>,
}

/// One `SET` assignment, its column resolved and its operation checked against the column.
pub(super) struct Assign {
    pub(super) column: usize,
    pub(super) is_static: bool,
    pub(super) op: AssignOp,
}

pub(super) enum AssignOp {
    /// `c = term`: the whole column.
    Set(Term),
    /// `c = c + term` on a non-frozen collection.
    Add(Term),
    /// `c = term + c` on a non-frozen list.
    Prepend(Term),
    /// `c = c + term` or `c = c - term` (`negate`) on a counter.
    Increment { term: Term, negate: bool },
    /// `l = l - [values]`: needs the current list.
    SubtractList(Term),
    /// `s = s - {elements}`.
    SubtractSet(Term),
    /// `m = m - {keys}`: the term is a set of the map's keys.
    SubtractMapKeys { term: Term, keys: DataType },
    /// `m[key] = value`.
    SetMapValue { key: Term, value: Term },
    /// `l[index] = value`: needs the current list.
    SetListElement { index: Term, value: Term },
    /// `u.field = value`, the field by position.
    SetField { field: usize, value: Term },
}

pub(super) struct DeletePlan {
    pub(super) rows: WherePlan,
    /// `None` when the DELETE names no column: it removes whole rows.
    pub(super) columns: Option<Removals>,
}

pub(super) struct Removals {
    /// Every column removed is static.
    pub(super) static_only: bool,
    pub(super) any_static: bool,
    pub(super) removals: Compiled<Removal>,
}

/// One column (or part of one) a DELETE removes.
pub(super) struct Removal {
    pub(super) column: usize,
    pub(super) is_static: bool,
    pub(super) what: RemovalKind,
}

pub(super) enum RemovalKind {
    /// The whole column.
    Column,
    /// One field of a non-frozen UDT, by position.
    Field(usize),
    /// `m[key]`.
    MapKey(Term),
    /// `s[element]`.
    SetElement(Term),
    /// `l[index]`: needs the current list.
    ListIndex(Term),
}

/// The table name of each write of `stmt`, in order: the statement's own, or each of a BATCH's.
fn table_names(stmt: &Statement) -> impl Iterator<Item = &QualifiedName> {
    let batch = match stmt {
        Statement::Batch(b) => b.statements.as_slice(),
        _ => &[],
    };
    stmt.table()
        .into_iter()
        .chain(batch.iter().map(BatchStatement::table))
}

impl Plan {
    /// The plan of `stmt` and the keyspace of each of its writes, as they are now: the plan
    /// `ctx`'s memo holds when every table it names is still the one `stmt` resolves to, or a
    /// new one, which the memo then keeps if it had none.
    ///
    /// The keyspaces are resolved anew each time: a change of replication does not change the
    /// plan, and the writes must go where the keyspace says now.
    pub(super) fn for_statement(
        ctx: &Context<'_>,
        stmt: &Statement,
    ) -> QueryResult<(Arc<Plan>, Vec<Arc<Keyspace>>)> {
        let remembered = ctx.memo.and_then(|m| m.modify.get());
        if let Some(plan) = remembered {
            if let Some(keyspaces) = plan.keyspaces_if_current(ctx, stmt) {
                return Ok((plan.clone(), keyspaces));
            }
        }
        let (plan, keyspaces) = Plan::compile(ctx, stmt)?;
        let plan = Arc::new(plan);
        if let Some(memo) = ctx.memo {
            // A memo that holds another table's plan keeps it: this statement is then compiled
            // on each request, which is only slower.
            let _ = memo.modify.set(plan.clone());
        }
        Ok((plan, keyspaces))
    }

    /// The keyspaces of the plan's writes, if `stmt` still resolves to every table the plan was
    /// made for.
    fn keyspaces_if_current(&self, ctx: &Context<'_>, stmt: &Statement) -> Option<Vec<Arc<Keyspace>>> {
        // A statement's text gives its plan the same number of writes every time.
        let keyspaces: Vec<_> = table_names(stmt)
            .zip(&self.writes)
            .map(|(name, write)| {
                let (ks, table) = resolve_table(ctx, name).ok()?;
                Arc::ptr_eq(&table, &write.table).then_some(ks)
            })
            .collect::<Option<_>>()?;
        (keyspaces.len() == self.writes.len()).then_some(keyspaces)
    }

    /// Compiles `stmt` against the tables it names now.
    fn compile(ctx: &Context<'_>, stmt: &Statement) -> QueryResult<(Plan, Vec<Arc<Keyspace>>)> {
        let mut keyspaces = Vec::new();
        let mut writes = Vec::new();
        let mut batch = None;
        match stmt {
            Statement::Insert(s) => writes.push(insert(ctx, s, &mut keyspaces)?),
            Statement::Update(s) => writes.push(update(ctx, s, &mut keyspaces)?),
            Statement::Delete(s) => writes.push(delete(ctx, s, &mut keyspaces)?),
            Statement::Batch(b) => {
                if b.statements.len() > BATCH_STATEMENTS_MAX {
                    return Err(invalid(format!(
                        "A batch may hold at most {BATCH_STATEMENTS_MAX} statements"
                    )));
                }
                if b.using.ttl.is_some() {
                    return Err(invalid("Global TTL on the BATCH statement is not supported."));
                }
                batch = Some(BatchPlan {
                    timestamp: b.using.timestamp.clone(),
                });
                for s in &b.statements {
                    writes.push(match s {
                        BatchStatement::Insert(s) => insert(ctx, s, &mut keyspaces)?,
                        BatchStatement::Update(s) => update(ctx, s, &mut keyspaces)?,
                        BatchStatement::Delete(s) => delete(ctx, s, &mut keyspaces)?,
                    });
                }
                if writes.iter().any(|w| w.condition.is_some()) {
                    check_conditional_batch(b.using.timestamp.is_some(), writes.iter().map(|w| &*w.table))?;
                }
                check_counter_batch(
                    b.kind,
                    b.using.timestamp.is_some(),
                    writes.iter().map(|w| &*w.table),
                )?;
            }
            _ => {
                return Err(invalid(format!(
                    "{} is not a modification statement",
                    stmt.kind()
                )))
            }
        }
        super::super::plan_compiled();
        let counter = writes.iter().any(|w| w.table.is_counter());
        Ok((
            Plan {
                batch,
                writes,
                counter,
            },
            keyspaces,
        ))
    }
}

/// The table a statement writes, checked as every write is; its keyspace goes to `keyspaces`.
fn writable_table(
    ctx: &Context<'_>,
    name: &QualifiedName,
    keyspaces: &mut Vec<Arc<Keyspace>>,
) -> QueryResult<Arc<Table>> {
    let (ks, table) = resolve_table(ctx, name)?;
    if table.is_virtual {
        return Err(crate::error::unauthorized(format!(
            "{} keyspace is not user-modifiable.",
            table.keyspace
        )));
    }
    keyspaces.push(ks);
    Ok(table)
}

impl Plan {
    /// True when some write has an IF clause: the statement is a lightweight transaction.
    pub fn is_conditional(&self) -> bool {
        self.writes.iter().any(|w| w.condition.is_some())
    }

    /// The table of each write, in order.
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.writes.iter().map(|w| &*w.table)
    }

    /// True when the writes are to counter tables: they go through a counter's leader.
    pub fn is_counter(&self) -> bool {
        self.counter
    }
}

/// The refusals of a BATCH that holds counter writes, or is a COUNTER BATCH (Cassandra's
/// `BatchStatement.validate`): `timestamp` is whether the BATCH has its own USING TIMESTAMP.
pub fn check_counter_batch<'t>(
    kind: BatchKind,
    timestamp: bool,
    tables: impl Iterator<Item = &'t Table>,
) -> QueryResult<()> {
    if timestamp && kind == BatchKind::Counter {
        return Err(invalid("Cannot provide custom timestamp for counter BATCH"));
    }
    let (mut counters, mut others) = (false, false);
    for t in tables {
        if t.is_counter() {
            counters = true;
        } else {
            others = true;
        }
    }
    if kind == BatchKind::Counter && others {
        return Err(invalid("Cannot include non-counter statement in a counter batch"));
    }
    if counters && others {
        return Err(invalid(
            "Counter and non-counter mutations cannot exist in the same batch",
        ));
    }
    if kind == BatchKind::Logged && counters {
        return Err(invalid("Cannot include a counter statement in a logged batch"));
    }
    Ok(())
}

/// The refusals of a BATCH with conditions that its statements alone decide (Cassandra's
/// `BatchStatement.validate`): `timestamp` is whether the BATCH has its own USING TIMESTAMP.
pub(super) fn check_conditional_batch<'t>(
    timestamp: bool,
    mut tables: impl Iterator<Item = &'t Table>,
) -> QueryResult<()> {
    if timestamp {
        return Err(invalid("Cannot provide custom timestamp for conditional BATCH"));
    }
    if let Some(first) = tables.next() {
        if tables.any(|t| t.keyspace != first.keyspace || t.name != first.name) {
            return Err(invalid("Batch with conditions cannot span multiple tables"));
        }
    }
    Ok(())
}

/// The compiled IF clause of an UPDATE or DELETE, refused where Cassandra refuses it.
fn conditions(table: &Table, condition: &Condition, using: &Using) -> QueryResult<Option<Conditions>> {
    let compiled = match condition {
        Condition::None => return Ok(None),
        Condition::Exists => Conditions::Exists,
        Condition::If(relations) => {
            if using.timestamp.is_some() {
                return Err(custom_timestamp());
            }
            let compiled = condition::compile(table, relations)?;
            if table.is_counter() {
                return Err(invalid("Conditions on counters are not supported"));
            }
            Conditions::Columns(compiled)
        }
    };
    if table.is_counter() {
        return Err(invalid("Conditional updates are not supported on counter tables"));
    }
    if using.timestamp.is_some() {
        return Err(custom_timestamp());
    }
    Ok(Some(compiled))
}

fn custom_timestamp() -> QueryError {
    invalid("Cannot provide custom timestamp for conditional updates")
}

/// Refuses what an UPDATE or DELETE of a counter table cannot take: an increment has no TTL and
/// its time is the counter leader's (Cassandra's `ModificationStatement.validate`).
fn check_counter_using(table: &Table, using: &Using) -> QueryResult<()> {
    if !table.is_counter() {
        return Ok(());
    }
    if using.timestamp.is_some() {
        return Err(invalid("Cannot provide custom timestamp for counter updates"));
    }
    if using.ttl.is_some() {
        return Err(invalid("Cannot provide custom TTL for counter updates"));
    }
    Ok(())
}

fn is_static(table: &Table, name: &str) -> bool {
    table.column(name).is_some_and(|c| c.kind == ColumnKind::Static)
}

fn column_index(table: &Table, name: &str) -> QueryResult<usize> {
    table
        .column_index(name)
        .ok_or_else(|| invalid(format!("Undefined column name {name}")))
}

fn insert(ctx: &Context<'_>, s: &Insert, keyspaces: &mut Vec<Arc<Keyspace>>) -> QueryResult<Write> {
    let table = writable_table(ctx, &s.table, keyspaces)?;
    if table.is_counter() {
        return Err(invalid(
            "INSERT statements are not allowed on counter tables, use UPDATE instead",
        ));
    }
    if s.if_not_exists && s.using.timestamp.is_some() {
        return Err(custom_timestamp());
    }
    let plan = match &s.values {
        InsertValues::Columns { columns, values } => {
            if columns.len() != values.len() {
                return Err(invalid("Unmatched column names/values"));
            }
            let mut seen = vec![false; table.columns.len()];
            let values = Compiled::of(columns.iter().zip(values).map(|(name, term)| {
                let i = column_index(&table, name)?;
                if std::mem::replace(&mut seen[i], true) {
                    return Err(invalid(format!("Multiple definitions found for column {name}")));
                }
                Ok((i, term.clone()))
            }));
            // `INSERT INTO t (k, s) VALUES (...)`: no clustering key and only static columns
            // writes the static row alone.
            let kinds = || values.items.iter().map(|&(i, _)| table.columns[i].kind);
            let static_only = !table.clustering.is_empty()
                && !kinds().any(|k| k == ColumnKind::Clustering)
                && kinds().any(|k| k == ColumnKind::Static)
                && !kinds().any(|k| k == ColumnKind::Regular);
            InsertPlan::Columns { values, static_only }
        }
        InsertValues::Json { json, default_unset } => InsertPlan::Json {
            json: json.clone(),
            default_unset: *default_unset,
        },
    };
    Ok(Write {
        table,
        using: s.using.clone(),
        shape: Shape::Insert(plan),
        condition: s.if_not_exists.then_some(Conditions::NotExists),
    })
}

fn update(ctx: &Context<'_>, s: &Update, keyspaces: &mut Vec<Arc<Keyspace>>) -> QueryResult<Write> {
    let table = writable_table(ctx, &s.table, keyspaces)?;
    let condition = conditions(&table, &s.condition, &s.using)?;
    let rows = WherePlan::compile(&table, &s.where_clause, false)?;
    let assignments = Compiled::of(s.assignments.iter().map(|a| assign(&table, a)));
    check_counter_using(&table, &s.using)?;
    Ok(Write {
        using: s.using.clone(),
        shape: Shape::Update(UpdatePlan {
            rows,
            static_only: s.assignments.iter().all(|a| is_static(&table, &a.column)),
            any_static: s.assignments.iter().any(|a| is_static(&table, &a.column)),
            assignments,
        }),
        table,
        condition,
    })
}

/// One assignment, checked against its column's kind and type.
fn assign(table: &Table, a: &Assignment) -> QueryResult<Assign> {
    let column = column_index(table, &a.column)?;
    let col = &table.columns[column];
    if col.kind.is_primary_key() {
        return Err(invalid(format!(
            "PRIMARY KEY part {} found in SET part",
            col.name
        )));
    }
    let needs_collection = |op: &str, t: &Term| -> QueryResult<()> {
        let what = format!("{} = {} {op} {}", col.name, col.name, value_text(t));
        if col.ty.is_multi_cell() {
            Ok(())
        } else if col.ty.is_collection() {
            Err(invalid(format!(
                "Invalid operation ({what}) for frozen collection column {}",
                col.name
            )))
        } else {
            Err(invalid(format!(
                "Invalid operation ({what}) for non counter column {}",
                col.name
            )))
        }
    };
    let op = match &a.operation {
        Operation::Set(_) if col.ty.is_counter() => {
            return Err(invalid(format!(
                "Cannot set the value of counter column {} (counters can only be incremented/decremented, not set)",
                col.name
            )))
        }
        Operation::Set(t) => AssignOp::Set(t.clone()),
        Operation::Add(t) | Operation::Subtract(t) if col.ty.is_counter() => {
            if matches!(t, Term::Literal(hayate_cql::value::Literal::Null)) {
                return Err(invalid("Invalid null value for counter increment/decrement"));
            }
            AssignOp::Increment {
                term: t.clone(),
                negate: matches!(a.operation, Operation::Subtract(_)),
            }
        }
        Operation::Add(t) => {
            needs_collection("+", t)?;
            AssignOp::Add(t.clone())
        }
        Operation::Prepend(t) => {
            if !matches!(col.ty, DataType::List { frozen: false, .. }) {
                // Cassandra's message shows the operation with a minus.
                return Err(invalid(format!(
                    "Invalid operation ({} = {} - {}) for non list column {}",
                    col.name,
                    value_text(t),
                    col.name,
                    col.name
                )));
            }
            AssignOp::Prepend(t.clone())
        }
        Operation::Subtract(t) => {
            needs_collection("-", t)?;
            match &col.ty {
                DataType::List { .. } => AssignOp::SubtractList(t.clone()),
                DataType::Set { .. } => AssignOp::SubtractSet(t.clone()),
                DataType::Map { key, .. } => AssignOp::SubtractMapKeys {
                    term: t.clone(),
                    keys: DataType::Set {
                        element: key.clone(),
                        frozen: true,
                    },
                },
                _ => unreachable!("needs_collection checked the type"),
            }
        }
        Operation::SetElement { key, value } => match &col.ty {
            DataType::Map { frozen: false, .. } => AssignOp::SetMapValue {
                key: key.clone(),
                value: value.clone(),
            },
            DataType::List { frozen: false, .. } => AssignOp::SetListElement {
                index: key.clone(),
                value: value.clone(),
            },
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
            let field = def.field_index(field).ok_or_else(|| {
                invalid(format!(
                    "UDT column {} does not have a field named {field}",
                    col.name
                ))
            })?;
            AssignOp::SetField {
                field,
                value: value.clone(),
            }
        }
    };
    Ok(Assign {
        column,
        is_static: col.kind == ColumnKind::Static,
        op,
    })
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

fn delete(ctx: &Context<'_>, s: &Delete, keyspaces: &mut Vec<Arc<Keyspace>>) -> QueryResult<Write> {
    let table = writable_table(ctx, &s.table, keyspaces)?;
    let condition = conditions(&table, &s.condition, &s.using)?;
    if s.using.ttl.is_some() {
        return Err(invalid("DELETE does not take a TTL"));
    }
    check_counter_using(&table, &s.using)?;
    let rows = WherePlan::compile(&table, &s.where_clause, false)?;
    let columns = (!s.targets.is_empty()).then(|| {
        let target_name = |t: &DeleteTarget| match t {
            DeleteTarget::Column(c) => c.clone(),
            DeleteTarget::Element { column, .. } => column.clone(),
            DeleteTarget::Field { column, .. } => column.clone(),
        };
        Removals {
            static_only: s.targets.iter().all(|t| is_static(&table, &target_name(t))),
            any_static: s.targets.iter().any(|t| is_static(&table, &target_name(t))),
            removals: Compiled::of(s.targets.iter().map(|t| removal(&table, t))),
        }
    });
    Ok(Write {
        table,
        using: s.using.clone(),
        shape: Shape::Delete(DeletePlan { rows, columns }),
        condition,
    })
}

/// One DELETE target, checked against its column's kind and type.
fn removal(table: &Table, t: &DeleteTarget) -> QueryResult<Removal> {
    let (name, key) = match t {
        DeleteTarget::Column(c) => (c, None),
        DeleteTarget::Element { column, key } => (column, Some(key)),
        DeleteTarget::Field { column, field } => {
            let i = column_index(table, column)?;
            let col = &table.columns[i];
            let DataType::Udt { def, frozen: false } = &col.ty else {
                return Err(invalid(format!(
                    "Invalid field deletion on non-UDT or frozen UDT column {column}"
                )));
            };
            let f = def
                .field_index(field)
                .ok_or_else(|| invalid(format!("UDT column {column} does not have a field named {field}")))?;
            return Ok(Removal {
                column: i,
                is_static: col.kind == ColumnKind::Static,
                what: RemovalKind::Field(f),
            });
        }
    };
    let i = column_index(table, name)?;
    let col = &table.columns[i];
    if col.kind.is_primary_key() {
        return Err(invalid(format!(
            "Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)"
        )));
    }
    let what = match (key, &col.ty) {
        (None, _) => RemovalKind::Column,
        (Some(k), DataType::Map { frozen: false, .. }) => RemovalKind::MapKey(k.clone()),
        (Some(k), DataType::Set { frozen: false, .. }) => RemovalKind::SetElement(k.clone()),
        (Some(k), DataType::List { frozen: false, .. }) => RemovalKind::ListIndex(k.clone()),
        (Some(_), _) => {
            return Err(invalid(format!(
                "Invalid element deletion on non-collection or frozen column {name}"
            )))
        }
    };
    Ok(Removal {
        column: i,
        is_static: col.kind == ColumnKind::Static,
        what,
    })
}
