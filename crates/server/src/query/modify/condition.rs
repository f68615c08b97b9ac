//! The IF clause of a conditional INSERT, UPDATE or DELETE (a lightweight transaction):
//! compiled once per statement and table ([`compile`], kept in the statement's
//! [`Plan`](super::Plan)), bound to each request's values ([`ColumnCondition::bind`]), and
//! judged on the partition's current rows as Paxos read them ([`Bound::holds`]).
//!
//! The rules are Cassandra's (`ColumnCondition`, `Operator`):
//!
//! - `c op v` compares the column's current value with `v` in the type's order; a null `v`
//!   takes only `=` (the column is null) and `!=` (it is not), any other operator is refused.
//!   A null current value satisfies only `!=` a non-null `v`.
//! - `c IN (v1, v2)` holds if `c = vi` holds for one of them (a null among them matches a null
//!   column).
//! - A whole non-frozen collection compares element by element; an absent one is the empty
//!   collection to `=` and `!=`, and null to `<`, `<=`, `>`, `>=` (`l < [1]` does not hold).
//! - `m[k]`, `l[i]` and `u.f` compare the element or field (null when absent).
//! - A row that does not exist has every column null.

use std::cmp::Ordering;

use hayate_cql::statement::{CompareOp, InValues, MarkerIndex, Relation, RelationLhs, Term};
use hayate_cql::value::{canonicalize, compare, split_components, DataType};
use hayate_storage::row::Row;

use crate::error::{invalid, QueryError, QueryResult};
use crate::query::bind::{evaluate, Binds, Evaluated, Receiver};
use crate::query::cells::{collection_value, element_path, field_path};
use crate::query::restrictions::{split_list, split_map};
use crate::schema::{ColumnKind, Table};

/// A statement's IF clause, compiled.
pub(super) enum Conditions {
    /// `IF EXISTS`: the statement's row has live data.
    Exists,
    /// `INSERT ... IF NOT EXISTS`: it has none.
    NotExists,
    /// `IF c = v AND ...`, in the statement's order.
    Columns(Vec<ColumnCondition>),
}

impl Conditions {
    /// True when some condition is on a regular (not static) column.
    pub(super) fn on_regular_columns(&self) -> bool {
        match self {
            Conditions::Exists | Conditions::NotExists => false,
            Conditions::Columns(c) => c.iter().any(|c| !c.is_static),
        }
    }
}

/// One `IF` relation: a column, or an element or field of one, an operator and its values.
pub(super) struct ColumnCondition {
    pub(super) column: usize,
    pub(super) is_static: bool,
    access: Access,
    op: Op,
    values: ValueTerms,
}

enum Access {
    /// The whole column.
    Whole,
    /// `m[key]` or `l[index]`.
    Element(Term),
    /// `u.field`, the field by position.
    Field(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
    Contains,
    ContainsKey,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Neq => "!=",
            Op::Lt => "<",
            Op::Lte => "<=",
            Op::Gt => ">",
            Op::Gte => ">=",
            Op::In => "IN",
            Op::Contains => "CONTAINS",
            Op::ContainsKey => "CONTAINS KEY",
        }
    }

    fn is_slice(self) -> bool {
        matches!(self, Op::Lt | Op::Lte | Op::Gt | Op::Gte)
    }

    /// Whether `current` compared with a value as `ord` satisfies the operator (`=` for IN).
    fn accepts(self, ord: Ordering) -> bool {
        match self {
            Op::Eq | Op::In => ord == Ordering::Equal,
            Op::Neq => ord != Ordering::Equal,
            Op::Lt => ord == Ordering::Less,
            Op::Lte => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Gte => ord != Ordering::Less,
            Op::Contains | Op::ContainsKey => false,
        }
    }
}

enum ValueTerms {
    One(Term),
    List(Vec<Term>),
    /// `IN ?`: the whole list is one bound value.
    Marker(MarkerIndex),
}

/// Compiles the relations of an `IF` clause against `table`: each column found, and its kind,
/// type and access checked as Cassandra checks them.
pub(super) fn compile(table: &Table, relations: &[Relation]) -> QueryResult<Vec<ColumnCondition>> {
    relations.iter().map(|r| compile_one(table, r)).collect()
}

fn compile_one(table: &Table, relation: &Relation) -> QueryResult<ColumnCondition> {
    let (lhs, op, values) = match relation {
        Relation::Compare { lhs, op, rhs } => {
            let op = match op {
                CompareOp::Eq => Op::Eq,
                CompareOp::Neq => Op::Neq,
                CompareOp::Lt => Op::Lt,
                CompareOp::Lte => Op::Lte,
                CompareOp::Gt => Op::Gt,
                CompareOp::Gte => Op::Gte,
                CompareOp::Contains => Op::Contains,
                CompareOp::ContainsKey => Op::ContainsKey,
                CompareOp::Like => return Err(invalid("LIKE is not supported in IF conditions")),
            };
            (lhs, op, ValueTerms::One(rhs.clone()))
        }
        Relation::In { lhs, values } => {
            let values = match values {
                InValues::Terms(t) => ValueTerms::List(t.clone()),
                InValues::Marker(m) => ValueTerms::Marker(*m),
            };
            (lhs, Op::In, values)
        }
        Relation::IsNotNull { .. } => return Err(invalid("IS NOT NULL is not supported in IF conditions")),
    };
    let name = match lhs {
        RelationLhs::Column(c) => c,
        RelationLhs::Element { column, .. } | RelationLhs::Field { column, .. } => column,
        RelationLhs::Tuple(_) | RelationLhs::Token(_) => {
            return Err(invalid("IF conditions take a column, an element or a field"))
        }
    };
    let column = table
        .column_index(name)
        .ok_or_else(|| invalid(format!("Undefined column name {name}")))?;
    let col = &table.columns[column];
    let access = match lhs {
        RelationLhs::Element { key, .. } => match &col.ty {
            DataType::Map { .. } | DataType::List { .. } => Access::Element(key.clone()),
            DataType::Set { .. } => {
                return Err(invalid(format!(
                    "Invalid element access syntax for set column {name}"
                )))
            }
            _ => {
                return Err(invalid(format!(
                    "Invalid element access syntax for non-collection column {name}"
                )))
            }
        },
        RelationLhs::Field { field, .. } => {
            let DataType::Udt { def, .. } = &col.ty else {
                return Err(invalid(format!(
                    "Invalid field selection: {name} of type {} is not a user type",
                    col.ty
                )));
            };
            let i = def
                .field_index(field)
                .ok_or_else(|| invalid(format!("Unknown field {field} for column {name}")))?;
            Access::Field(i)
        }
        _ => Access::Whole,
    };
    let condition = ColumnCondition {
        column,
        is_static: col.kind == ColumnKind::Static,
        access,
        op,
        values,
    };
    let value_ty = condition.value_type(table);
    if op.is_slice() && has_duration(value_ty) {
        return Err(invalid(match value_ty {
            t if t.is_collection() => {
                "Slice conditions are not supported on collections containing durations".to_owned()
            }
            DataType::Tuple(_) => {
                "Slice conditions are not supported on tuples containing durations".to_owned()
            }
            DataType::Udt { .. } => {
                "Slice conditions are not supported on UDTs containing durations".to_owned()
            }
            _ => format!(
                "Slice conditions ( {} ) are not supported on durations",
                op.symbol()
            ),
        }));
    }
    if op == Op::ContainsKey && !matches!(value_ty, DataType::Map { .. }) {
        return Err(invalid(format!(
            "Cannot use CONTAINS KEY on non-map column {name}"
        )));
    }
    if op == Op::Contains && !value_ty.is_collection() {
        return Err(invalid(format!(
            "Cannot use CONTAINS on non-collection column {name}"
        )));
    }
    if col.kind.is_primary_key() {
        return Err(invalid(format!(
            "PRIMARY KEY column '{name}' cannot have IF conditions"
        )));
    }
    Ok(condition)
}

impl ColumnCondition {
    /// The type of what the condition compares: the column's, its elements' or its field's.
    fn value_type<'t>(&self, table: &'t Table) -> &'t DataType {
        let ty = &table.columns[self.column].ty;
        match (&self.access, ty) {
            (Access::Element(_), DataType::Map { value, .. }) => value,
            (Access::Element(_), DataType::List { element, .. }) => element,
            (Access::Field(i), DataType::Udt { def, .. }) => &def.field_types[*i],
            _ => ty,
        }
    }

    /// The type of each value of the condition: a CONTAINS takes an element (or a map value),
    /// a CONTAINS KEY a key.
    fn operand_type<'t>(&self, table: &'t Table) -> &'t DataType {
        let ty = self.value_type(table);
        match (self.op, ty) {
            (Op::ContainsKey, DataType::Map { key, .. }) => key,
            (Op::Contains, DataType::Map { value, .. }) => value,
            (Op::Contains, DataType::List { element, .. } | DataType::Set { element, .. }) => element,
            _ => ty,
        }
    }

    /// The name Cassandra gives the receiver of the condition's values, as drivers show it.
    fn receiver_name(&self, table: &Table) -> String {
        let col = &table.columns[self.column];
        match (&self.access, &col.ty) {
            (Access::Element(_), _) => format!("value({})", col.name),
            (Access::Field(i), DataType::Udt { def, .. }) => format!("{}.{}", col.name, def.field_names[*i]),
            _ => col.name.clone(),
        }
    }

    /// The condition with one request's values.
    pub(super) fn bind(&self, table: &Table, binds: &Binds<'_>) -> QueryResult<Bound> {
        let col = &table.columns[self.column];
        let access = match &self.access {
            Access::Whole => BoundAccess::Whole,
            Access::Field(i) => BoundAccess::Field(*i),
            Access::Element(key) => self.bind_element(col, key, binds)?,
        };
        let name = self.receiver_name(table);
        let ty = self.operand_type(table);
        let canonical = |b: Vec<u8>| -> QueryResult<Vec<u8>> {
            // Sets and maps a client binds come in its order: compare them in the type's.
            if !ty.is_collection() {
                return Ok(b);
            }
            let mut out = Vec::new();
            canonicalize(ty, &b, &mut out).map_err(|e| invalid(format!("Invalid value for {name}: {e}")))?;
            Ok(out)
        };
        // `None` for an unset value, `Some(None)` for a null.
        let one = |t: &Term| -> QueryResult<Option<Option<Vec<u8>>>> {
            match evaluate(t, &Receiver { name: &name, ty }, binds)? {
                Evaluated::Bytes(b) => Ok(Some(Some(canonical(b)?))),
                Evaluated::Null => Ok(Some(None)),
                Evaluated::Unset => Ok(None),
            }
        };
        let values = match &self.values {
            ValueTerms::One(t) => vec![one(t)?.ok_or_else(unset)?],
            // Unset values in an IN list are left out, as Cassandra leaves them out.
            ValueTerms::List(terms) => terms
                .iter()
                .map(one)
                .filter_map(Result::transpose)
                .collect::<QueryResult<_>>()?,
            ValueTerms::Marker(m) => {
                let list = DataType::List {
                    element: Box::new(ty.clone()),
                    frozen: true,
                };
                match evaluate(
                    &Term::Marker(*m),
                    &Receiver {
                        name: &name,
                        ty: &list,
                    },
                    binds,
                )? {
                    Evaluated::Bytes(b) => split_list(&b)
                        .ok_or_else(|| invalid(format!("Invalid list value for {name}")))?
                        .into_iter()
                        .map(|v| canonical(v).map(Some))
                        .collect::<QueryResult<_>>()?,
                    Evaluated::Null => return Err(invalid("Invalid null list in IN condition")),
                    Evaluated::Unset => return Err(unset()),
                }
            }
        };
        Ok(Bound {
            column: self.column,
            access,
            op: self.op,
            values,
        })
    }

    /// `m[key]` or `l[index]` with the request's key or index.
    fn bind_element(
        &self,
        col: &crate::schema::Column,
        key: &Term,
        binds: &Binds<'_>,
    ) -> QueryResult<BoundAccess> {
        let (name, ty, what) = match &col.ty {
            DataType::Map { key, .. } => (format!("key({})", col.name), &**key, "map"),
            _ => (format!("idx({})", col.name), &DataType::Int, "list"),
        };
        match evaluate(key, &Receiver { name: &name, ty }, binds)? {
            Evaluated::Bytes(b) if what == "map" => Ok(BoundAccess::MapKey(b)),
            Evaluated::Bytes(b) => {
                let bytes: [u8; 4] = b
                    .as_slice()
                    .try_into()
                    .map_err(|_| invalid(format!("Invalid list index for {}", col.name)))?;
                let index = i32::from_be_bytes(bytes);
                let index = usize::try_from(index)
                    .map_err(|_| invalid(format!("Invalid negative list index {index}")))?;
                Ok(BoundAccess::ListIndex(index))
            }
            Evaluated::Null => Err(invalid(format!("Invalid null value for {what} element access"))),
            Evaluated::Unset => Err(unset()),
        }
    }
}

fn unset() -> QueryError {
    invalid("Invalid 'unset' value in condition")
}

/// A condition with one request's values.
#[derive(Clone, Debug)]
pub(super) struct Bound {
    column: usize,
    access: BoundAccess,
    op: Op,
    /// One value, or an IN's; `None` is null.
    values: Vec<Option<Vec<u8>>>,
}

#[derive(Clone, Debug)]
enum BoundAccess {
    Whole,
    MapKey(Vec<u8>),
    ListIndex(usize),
    Field(usize),
}

impl Bound {
    /// Judges the condition on `row` (visible at `now_s`; `None` when the row does not exist).
    pub(super) fn holds(&self, table: &Table, row: Option<&Row>, now_s: u32) -> QueryResult<bool> {
        let col = &table.columns[self.column];
        let cells: Vec<_> = row
            .map(|r| r.cells.iter().filter(|c| c.column == col.id).cloned().collect())
            .unwrap_or_default();
        if col.ty.is_multi_cell() && col.ty.is_collection() && matches!(self.access, BoundAccess::Whole) {
            let current = collection_value(&col.ty, &cells, now_s);
            return self.collection_holds(&col.ty, current.as_deref());
        }
        let current = self.current(&col.ty, &cells, now_s);
        let ty = match (&self.access, &col.ty) {
            (BoundAccess::MapKey(_), DataType::Map { value, .. }) => &**value,
            (BoundAccess::ListIndex(_), DataType::List { element, .. }) => &**element,
            (BoundAccess::Field(i), DataType::Udt { def, .. }) => &def.field_types[*i],
            (_, ty) => ty,
        };
        for value in &self.values {
            if compare_with(self.op, ty, value.as_deref(), current.as_deref())? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The value the condition compares: the column's, or its element's or field's, from the
    /// column's cells.
    fn current(&self, ty: &DataType, cells: &[hayate_storage::row::Cell], now_s: u32) -> Option<Vec<u8>> {
        let live = || {
            cells
                .iter()
                .filter_map(move |c| c.value_at(now_s).map(|v| (c.path.as_slice(), v)))
        };
        let whole = || -> Option<Vec<u8>> {
            if ty.is_multi_cell() {
                collection_value(ty, cells, now_s)
            } else {
                live().find(|(p, _)| p.is_empty()).map(|(_, v)| v.to_vec())
            }
        };
        match (&self.access, ty) {
            (BoundAccess::Whole, _) => whole(),
            (
                BoundAccess::MapKey(k),
                DataType::Map {
                    key, frozen: false, ..
                },
            ) => {
                let path = element_path(key, k);
                live()
                    .find(|(p, _)| *p == path.as_slice())
                    .map(|(_, v)| v.to_vec())
            }
            (BoundAccess::MapKey(k), DataType::Map { key, .. }) => split_map(&whole()?)?
                .into_iter()
                .find(|(ek, _)| compare(key, ek, k) == Ordering::Equal)
                .and_then(|(_, v)| v),
            (BoundAccess::ListIndex(i), DataType::List { frozen: false, .. }) => {
                live().nth(*i).map(|(_, v)| v.to_vec())
            }
            (BoundAccess::ListIndex(i), _) => split_list(&whole()?)?.into_iter().nth(*i),
            (BoundAccess::Field(i), DataType::Udt { frozen: false, .. }) => {
                let path = field_path(*i);
                live()
                    .find(|(p, _)| *p == path.as_slice())
                    .map(|(_, v)| v.to_vec())
            }
            (BoundAccess::Field(i), _) => {
                let value = whole()?;
                let fields = split_components(&value).ok()?;
                fields.get(*i).copied().flatten().map(<[u8]>::to_vec)
            }
            _ => None,
        }
    }

    /// A whole non-frozen collection (`current` is `None` when it has no elements): compared
    /// element by element, an absent collection being the empty one.
    fn collection_holds(&self, ty: &DataType, current: Option<&[u8]>) -> QueryResult<bool> {
        for value in &self.values {
            let Some(value) = value else {
                match self.op {
                    Op::Eq | Op::In if current.is_none() => return Ok(true),
                    Op::Eq | Op::In => continue,
                    Op::Neq => return Ok(current.is_some()),
                    op => return Err(null_comparison(op)),
                }
            };
            if matches!(self.op, Op::Contains | Op::ContainsKey) {
                if contains(ty, self.op, current, value) {
                    return Ok(true);
                }
                continue;
            }
            // An absent collection is null to an ordering (`l < [1]` does not hold), and empty
            // to `=` and `!=`, as Cassandra 5.0 judges it.
            if current.is_none() && self.op.is_slice() {
                continue;
            }
            // An empty collection: no elements.
            let empty = [0u8; 4];
            if self.op.accepts(compare(ty, current.unwrap_or(&empty), value)) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// True if `ty` is or holds a duration (which has no order).
fn has_duration(ty: &DataType) -> bool {
    match ty {
        DataType::Duration => true,
        DataType::List { element, .. } | DataType::Set { element, .. } => has_duration(element),
        DataType::Map { key, value, .. } => has_duration(key) || has_duration(value),
        DataType::Tuple(items) => items.iter().any(has_duration),
        DataType::Udt { def, .. } => def.field_types.iter().any(has_duration),
        _ => false,
    }
}

fn null_comparison(op: Op) -> QueryError {
    invalid(format!(
        "Invalid comparison with null for operator \"{}\"",
        op.symbol()
    ))
}

/// Cassandra's comparison of a condition's value with the current one: `current op value`.
fn compare_with(op: Op, ty: &DataType, value: Option<&[u8]>, current: Option<&[u8]>) -> QueryResult<bool> {
    let Some(value) = value else {
        return match op {
            Op::Eq | Op::In => Ok(current.is_none()),
            Op::Neq => Ok(current.is_some()),
            op => Err(null_comparison(op)),
        };
    };
    let Some(current) = current else {
        // The value is not null: only `!=` holds against a null.
        return Ok(op == Op::Neq);
    };
    if matches!(op, Op::Contains | Op::ContainsKey) {
        return Ok(contains(ty, op, Some(current), value));
    }
    Ok(op.accepts(compare(ty, current, value)))
}

/// `CONTAINS` (an element, or a map value) or `CONTAINS KEY` on a serialized collection.
fn contains(ty: &DataType, op: Op, current: Option<&[u8]>, value: &[u8]) -> bool {
    current.is_some_and(|current| {
        crate::query::restrictions::contains(ty, op == Op::ContainsKey, current, value)
    })
}

#[cfg(test)]
#[path = "condition_tests.rs"]
mod tests;
