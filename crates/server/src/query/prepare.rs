//! What PREPARE answers: the name and type of every bind marker, which markers hold the
//! partition key (drivers route by it), and the columns a SELECT returns.

use hayate_cql::response::result::{ColumnSpec, ColumnType, PreparedMetadata, RowsMetadata, TableSpec};
use hayate_cql::statement::{
    Assignment, BatchStatement, Condition, DeleteTarget, InValues, InsertValues, Operation, Relation,
    RelationLhs, Statement, Term, Using,
};
use hayate_cql::value::DataType;

use super::{resolve_table, select, Context};
use crate::error::{invalid, QueryResult};
use crate::schema::Table;

/// A marker's receiver: its name as drivers show it, and its type.
type Spec = Option<(String, DataType, Option<usize>)>;

pub struct Prepared {
    pub metadata: PreparedMetadata,
    pub result: RowsMetadata,
    /// Each marker's receiver name, for matching named values.
    pub marker_names: Vec<String>,
}

pub fn prepare(
    ctx: &Context<'_>,
    stmt: &Statement,
    bind_markers: &[hayate_cql::statement::BindMarker],
) -> QueryResult<Prepared> {
    let markers = bind_markers.len();
    let mut specs: Vec<Spec> = vec![None; markers];
    let mut tables: Vec<Option<(String, String)>> = vec![None; markers];
    let mut pk_source: Option<(std::sync::Arc<Table>, Vec<Option<usize>>)> = None;
    let mut result = RowsMetadata::new(Vec::new());

    let mut visit_table = |table: &std::sync::Arc<Table>, f: &mut dyn FnMut(&Table, &mut Vec<Spec>)| {
        let before: Vec<bool> = specs.iter().map(Option::is_some).collect();
        f(table, &mut specs);
        for (i, was) in before.into_iter().enumerate() {
            if !was && specs[i].is_some() {
                tables[i] = Some((table.keyspace.clone(), table.name.clone()));
            }
        }
    };

    match stmt {
        Statement::Select(s) => {
            let (_, table) = resolve_table(ctx, &s.table)?;
            visit_table(&table, &mut |t, specs| {
                relations(t, &s.where_clause, specs);
                limit(&s.per_partition_limit, "[per_partition_limit]", specs);
                limit(&s.limit, "[limit]", specs);
            });
            let projection = select::projection(&table, s)?;
            result = RowsMetadata::new(select::result_specs(&table, s, &projection));
            pk_source = Some((table, vec![None; 0]));
        }
        Statement::Insert(s) => {
            let (_, table) = resolve_table(ctx, &s.table)?;
            visit_table(&table, &mut |t, specs| {
                match &s.values {
                    InsertValues::Columns { columns, values } => {
                        for (name, term) in columns.iter().zip(values) {
                            if let Some(c) = t.column(name) {
                                term_spec(term, &c.name, &c.ty, t.column_index(name), specs);
                            }
                        }
                    }
                    InsertValues::Json { json, .. } => {
                        term_spec(json, "[json]", &DataType::Text, None, specs)
                    }
                }
                using(&s.using, specs);
            });
            pk_source = Some((table, Vec::new()));
        }
        Statement::Update(s) => {
            let (_, table) = resolve_table(ctx, &s.table)?;
            visit_table(&table, &mut |t, specs| {
                using(&s.using, specs);
                for a in &s.assignments {
                    assignment(t, a, specs);
                }
                relations(t, &s.where_clause, specs);
                condition(t, &s.condition, specs);
            });
            pk_source = Some((table, Vec::new()));
        }
        Statement::Delete(s) => {
            let (_, table) = resolve_table(ctx, &s.table)?;
            visit_table(&table, &mut |t, specs| {
                for target in &s.targets {
                    if let DeleteTarget::Element { column, key } = target {
                        if let Some(c) = t.column(column) {
                            let kt = match &c.ty {
                                DataType::Map { key, .. } => (**key).clone(),
                                DataType::Set { element, .. } => (**element).clone(),
                                _ => DataType::Int,
                            };
                            term_spec(key, &format!("key({column})"), &kt, None, specs);
                        }
                    }
                }
                using(&s.using, specs);
                relations(t, &s.where_clause, specs);
                condition(t, &s.condition, specs);
            });
            pk_source = Some((table, Vec::new()));
        }
        Statement::Batch(b) => {
            for s in &b.statements {
                let table_name = s.table();
                let (_, table) = resolve_table(ctx, table_name)?;
                visit_table(&table, &mut |t, specs| match s {
                    BatchStatement::Insert(i) => {
                        if let InsertValues::Columns { columns, values } = &i.values {
                            for (name, term) in columns.iter().zip(values) {
                                if let Some(c) = t.column(name) {
                                    term_spec(term, &c.name, &c.ty, t.column_index(name), specs);
                                }
                            }
                        }
                        using(&i.using, specs);
                    }
                    BatchStatement::Update(u) => {
                        using(&u.using, specs);
                        for a in &u.assignments {
                            assignment(t, a, specs);
                        }
                        relations(t, &u.where_clause, specs);
                        condition(t, &u.condition, specs);
                    }
                    BatchStatement::Delete(d) => {
                        using(&d.using, specs);
                        relations(t, &d.where_clause, specs);
                        condition(t, &d.condition, specs);
                    }
                });
            }
            using(&b.using, &mut specs);
        }
        _ => {}
    }

    let mut columns = Vec::with_capacity(markers);
    let mut marker_names = Vec::with_capacity(markers);
    for (i, spec) in specs.iter().enumerate() {
        let Some((name, ty, _)) = spec else {
            return Err(invalid(format!(
                "hayate cannot tell the type of bind marker {} in this statement",
                i + 1
            )));
        };
        let (keyspace, table) = tables[i].clone().unwrap_or_default();
        // A named marker (`:key`) is known by its name, as drivers bind named values by it.
        let name = bind_markers[i].name.as_ref().unwrap_or(name);
        marker_names.push(name.clone());
        columns.push(ColumnSpec {
            table: TableSpec { keyspace, table },
            name: name.clone(),
            ty: if name == "partition key token" {
                ColumnType::Bigint
            } else {
                ty.to_column_type()
            },
        });
    }
    let pk_indexes = match pk_source {
        Some((table, _)) => table
            .partition_key
            .iter()
            .map(|&col| {
                specs
                    .iter()
                    .position(|s| s.as_ref().is_some_and(|(_, _, c)| *c == Some(col)))
                    .and_then(|p| u16::try_from(p).ok())
            })
            .collect::<Option<Vec<u16>>>()
            .unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(Prepared {
        metadata: PreparedMetadata { pk_indexes, columns },
        result,
        marker_names,
    })
}

fn set(specs: &mut [Spec], i: usize, name: &str, ty: &DataType, column: Option<usize>) {
    if let Some(slot) = specs.get_mut(i) {
        if slot.is_none() {
            *slot = Some((name.to_owned(), ty.clone(), column));
        }
    }
}

/// Records the receivers of the markers inside `term`, which is assigned to `name` of `ty`.
fn term_spec(term: &Term, name: &str, ty: &DataType, column: Option<usize>, specs: &mut [Spec]) {
    match term {
        Term::Marker(i) => set(specs, *i, name, ty, column),
        Term::List(items) | Term::Set(items) => {
            if let Some(e) = ty.element() {
                for t in items {
                    term_spec(t, &format!("value({name})"), e, None, specs);
                }
            }
        }
        Term::Map(pairs) => {
            if let Some((k, v)) = ty.key_value() {
                for (kt, vt) in pairs {
                    term_spec(kt, &format!("key({name})"), k, None, specs);
                    term_spec(vt, &format!("value({name})"), v, None, specs);
                }
            }
        }
        Term::Tuple(items) => {
            if let DataType::Tuple(types) = ty {
                for (t, ty) in items.iter().zip(types) {
                    term_spec(t, name, ty, None, specs);
                }
            }
        }
        Term::UserType(fields) => {
            if let DataType::Udt { def, .. } = ty {
                for (field, t) in fields {
                    if let Some(i) = def.field_index(field) {
                        term_spec(t, &format!("{name}.{field}"), &def.field_types[i], None, specs);
                    }
                }
            }
        }
        Term::Cast { term, .. } | Term::Negate(term) => term_spec(term, name, ty, column, specs),
        // fromJson(?) takes JSON text, whatever the type of what receives its result.
        Term::Function { name: f, args } if f.name.eq_ignore_ascii_case("fromjson") => {
            if let [arg] = args.as_slice() {
                term_spec(arg, "arg0(system.fromjson)", &DataType::Text, None, specs);
            }
        }
        _ => {}
    }
}

fn limit(term: &Option<Term>, name: &str, specs: &mut [Spec]) {
    if let Some(t) = term {
        term_spec(t, name, &DataType::Int, None, specs);
    }
}

fn using(u: &Using, specs: &mut [Spec]) {
    limit(&u.ttl, "[ttl]", specs);
    if let Some(t) = &u.timestamp {
        term_spec(t, "[timestamp]", &DataType::BigInt, None, specs);
    }
}

fn assignment(t: &Table, a: &Assignment, specs: &mut [Spec]) {
    let Some(c) = t.column(&a.column) else { return };
    match &a.operation {
        Operation::Set(term) | Operation::Add(term) | Operation::Prepend(term) => {
            term_spec(term, &c.name, &c.ty, None, specs)
        }
        Operation::Subtract(term) => {
            let ty = match &c.ty {
                DataType::Map { key, .. } => DataType::Set {
                    element: key.clone(),
                    frozen: true,
                },
                other => other.clone(),
            };
            term_spec(term, &c.name, &ty, None, specs);
        }
        Operation::SetElement { key, value } => match &c.ty {
            DataType::Map {
                key: kt, value: vt, ..
            } => {
                term_spec(key, &format!("key({})", c.name), kt, None, specs);
                term_spec(value, &format!("value({})", c.name), vt, None, specs);
            }
            DataType::List { element, .. } => {
                term_spec(key, &format!("idx({})", c.name), &DataType::Int, None, specs);
                term_spec(value, &format!("value({})", c.name), element, None, specs);
            }
            _ => {}
        },
        Operation::SetField { field, value } => {
            if let DataType::Udt { def, .. } = &c.ty {
                if let Some(i) = def.field_index(field) {
                    term_spec(
                        value,
                        &format!("{}.{field}", c.name),
                        &def.field_types[i],
                        None,
                        specs,
                    );
                }
            }
        }
    }
}

/// The markers of an IF clause, named as Cassandra names their receivers: `c`, `value(m)` for
/// `m[k]` (and `key(m)` or `idx(l)` for the element), `u.f`, and `in(...)` for `IN ?`.
fn condition(t: &Table, condition: &Condition, specs: &mut [Spec]) {
    let Condition::If(relations) = condition else {
        return;
    };
    for r in relations {
        let (lhs, op) = match r {
            Relation::Compare { lhs, op, .. } => (lhs, Some(*op)),
            Relation::In { lhs, .. } => (lhs, None),
            Relation::IsNotNull { .. } => continue,
        };
        let (column, name, ty) = match lhs {
            RelationLhs::Column(c) => match t.column(c) {
                Some(col) => (col, col.name.clone(), col.ty.clone()),
                None => continue,
            },
            RelationLhs::Element { column, key } => {
                let Some(col) = t.column(column) else { continue };
                let (key_name, key_ty, value_ty) = match &col.ty {
                    DataType::Map { key, value, .. } => {
                        (format!("key({column})"), (**key).clone(), (**value).clone())
                    }
                    DataType::List { element, .. } => {
                        (format!("idx({column})"), DataType::Int, (**element).clone())
                    }
                    _ => continue,
                };
                term_spec(key, &key_name, &key_ty, None, specs);
                (col, format!("value({column})"), value_ty)
            }
            RelationLhs::Field { column, field } => {
                let Some(col) = t.column(column) else { continue };
                let DataType::Udt { def, .. } = &col.ty else {
                    continue;
                };
                let Some(i) = def.field_index(field) else { continue };
                (col, format!("{column}.{field}"), def.field_types[i].clone())
            }
            RelationLhs::Tuple(_) | RelationLhs::Token(_) => continue,
        };
        let _ = column;
        let ty = match op {
            Some(op) => super::restrictions::operand_type(op, &ty).clone(),
            None => ty,
        };
        match r {
            Relation::Compare { rhs, .. } => term_spec(rhs, &name, &ty, None, specs),
            Relation::In {
                values: InValues::Terms(terms),
                ..
            } => {
                for term in terms {
                    term_spec(term, &name, &ty, None, specs);
                }
            }
            Relation::In {
                values: InValues::Marker(i),
                ..
            } => set(
                specs,
                *i,
                &format!("in({name})"),
                &DataType::List {
                    element: Box::new(ty),
                    frozen: false,
                },
                None,
            ),
            Relation::IsNotNull { .. } => {}
        }
    }
}

fn relations(t: &Table, relations: &[Relation], specs: &mut [Spec]) {
    for r in relations {
        match r {
            Relation::Compare {
                lhs: RelationLhs::Column(name),
                rhs,
                ..
            } => {
                if let Some(c) = t.column(name) {
                    term_spec(rhs, &c.name, &c.ty, t.column_index(name), specs);
                }
            }
            Relation::In {
                lhs: RelationLhs::Column(name),
                values,
            } => {
                if let Some(c) = t.column(name) {
                    match values {
                        InValues::Terms(terms) => {
                            for term in terms {
                                term_spec(term, &c.name, &c.ty, None, specs);
                            }
                        }
                        InValues::Marker(i) => set(
                            specs,
                            *i,
                            &format!("in({})", c.name),
                            &DataType::List {
                                element: Box::new(c.ty.clone()),
                                frozen: true,
                            },
                            None,
                        ),
                    }
                }
            }
            Relation::Compare {
                lhs: RelationLhs::Token(_),
                rhs,
                ..
            } => match rhs {
                Term::Function { args, .. } => {
                    for (term, c) in args.iter().zip(t.partition_columns()) {
                        term_spec(term, &c.name, &c.ty, None, specs);
                    }
                }
                other => term_spec(other, "partition key token", &DataType::BigInt, None, specs),
            },
            Relation::Compare {
                lhs: RelationLhs::Tuple(names),
                rhs,
                ..
            } => {
                let types: Vec<DataType> = names
                    .iter()
                    .filter_map(|n| t.column(n).map(|c| c.ty.clone()))
                    .collect();
                match rhs {
                    Term::Tuple(items) => {
                        for (term, name) in items.iter().zip(names) {
                            if let Some(c) = t.column(name) {
                                term_spec(term, &c.name, &c.ty, None, specs);
                            }
                        }
                    }
                    other => term_spec(
                        other,
                        &format!("({})", names.join(",")),
                        &DataType::Tuple(types),
                        None,
                        specs,
                    ),
                }
            }
            _ => {}
        }
    }
}
