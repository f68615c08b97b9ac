//! A conditional INSERT, UPDATE, DELETE or BATCH (a lightweight transaction), run through the
//! coordinator's Paxos ([`Coordinator::cas`]).
//!
//! Before Paxos, each write is bound once with the request's values: that names its partition
//! (one for the whole request) and its row, binds its conditions, and raises every error the
//! values can cause. The rows the conditions need (and the static row, when a static column is
//! in a condition or is written) become one [`PartitionRead`]. Inside Paxos the conditions are
//! judged on those rows as the replicas agree they are, at the request's clock, and, when they
//! hold, the writes are bound again with the ballot's timestamp and handed back as mutations.
//!
//! The answer is Cassandra's: one `[applied]` column, `true` alone when the writes were made;
//! otherwise `false` and the current values of the rows the conditions looked at (every column
//! for IF EXISTS and IF NOT EXISTS, the conditions' columns otherwise, and in a BATCH the
//! primary key columns first), or `false` alone when there is no such row.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use hayate_cluster::coordinator::{CasError, CasRequest, Coordinator, ReadResult};
use hayate_cluster::replica::{self, PartitionRead};
use hayate_cql::response::result::{ColumnSpec, ColumnType, ResultBody, Rows, RowsMetadata, TableSpec};
use hayate_storage::row::Row;

use super::condition::{Bound as BoundCondition, Conditions};
use super::plan::{Plan, Shape, Write};
use super::{Mutation, Target};
use crate::error::{consistency_level, invalid, QueryError, QueryResult};
use crate::query::bind::Binds;
use crate::query::cells::{is_static_key, row_values};
use crate::query::Context;
use crate::schema::{ColumnKind, Keyspace, Table};

/// One conditional statement of a request: its plan, the keyspace of each of its writes and
/// its values. A BATCH sent as a protocol message is one of these per statement.
pub struct CasStatement<'a> {
    pub plan: Arc<Plan>,
    pub keyspaces: Vec<Arc<Keyspace>>,
    pub binds: &'a Binds<'a>,
}

/// One write of a request, and what it binds with.
struct WriteRef<'a> {
    plan: &'a Plan,
    index: usize,
    keyspace: &'a Arc<Keyspace>,
    binds: &'a Binds<'a>,
}

impl WriteRef<'_> {
    fn write(&self) -> &Write {
        &self.plan.writes[self.index]
    }

    fn bind(&self, ctx: &Context<'_>, out: &mut Vec<Mutation>) -> QueryResult<()> {
        self.plan
            .bind_write(ctx, self.index, self.keyspace, self.binds, out)
    }
}

/// What one row must be for the writes to be made.
enum Check {
    Exists,
    NotExists,
    Columns(Vec<BoundCondition>),
}

/// The request, bound: its partition, the checks on its rows, and what to read.
struct Request {
    table: Arc<Table>,
    keyspace: Arc<Keyspace>,
    partition: Vec<u8>,
    /// Each check with the clustering key of the row it is on (the empty key for the static
    /// row, in a table with clustering columns).
    checks: Vec<(Vec<u8>, Check)>,
    /// Rows read besides the checked ones: those whose list operations need the current list.
    also_read: BTreeSet<Vec<u8>>,
    /// The static row is read (a static column is in a condition or is written).
    statics: bool,
    /// Some write names regular rows (not only static ones): the rows read have their regular
    /// columns, as Cassandra reads them only then.
    regulars: bool,
    /// The columns the answer shows when the conditions fail (after `[applied]`).
    columns: Vec<usize>,
}

/// Runs `statements` (one, or a BATCH's) as one lightweight transaction.
pub async fn run(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    statements: &[CasStatement<'_>],
    is_batch: bool,
) -> QueryResult<ResultBody> {
    let writes: Vec<WriteRef> = statements
        .iter()
        .flat_map(|s| {
            (0..s.plan.writes.len()).map(move |index| WriteRef {
                plan: &s.plan,
                index,
                keyspace: &s.keyspaces[index],
                binds: s.binds,
            })
        })
        .collect();
    let request = bind(ctx, &writes, is_batch)?;
    let table = &request.table;
    let read = request.read(table);
    let decide = |current: &ReadResult, timestamp_us: i64| -> QueryResult<Option<Vec<replica::Mutation>>> {
        let now_s = ctx.clock.now_s();
        let view = View::of(table, current, now_s);
        for (key, check) in &request.checks {
            let row = view.row(table, key);
            let holds = match check {
                Check::Exists => row.is_some(),
                Check::NotExists => row.is_none(),
                Check::Columns(conditions) => {
                    let mut all = true;
                    for c in conditions {
                        if !c.holds(table, row, now_s)? {
                            all = false;
                            break;
                        }
                    }
                    all
                }
            };
            if !holds {
                return Ok(None);
            }
        }
        let at_ballot = Context {
            default_timestamp_us: Some(timestamp_us),
            ..ctx.clone()
        };
        let mut planned = Vec::new();
        for w in &writes {
            w.bind(&at_ballot, &mut planned)?;
        }
        // Every write of a transaction is to its one partition.
        let token = hayate_storage::token::token(&request.partition);
        let mutations = planned
            .into_iter()
            .filter(|m| !is_empty_row_update(m))
            .map(|m| {
                let current = match &m.target {
                    Target::Row { clustering, .. } => view.any_row(clustering),
                    Target::Range { .. } => None,
                };
                super::apply::replica_mutation(m, token, current, now_s)
            })
            .collect::<QueryResult<_>>()?;
        Ok(Some(mutations))
    };
    let outcome = coordinator
        .cas(
            CasRequest {
                replication: request.keyspace.strategy(),
                serial: consistency_level(ctx.serial_consistency),
                commit: consistency_level(ctx.consistency),
                read,
            },
            decide,
        )
        .await
        .map_err(|e| match e {
            CasError::Coordinator(e) => QueryError::from(e),
            CasError::Decide(e) => e,
        })?;
    Ok(ResultBody::Rows(request.answer(
        outcome.applied,
        &outcome.current,
        ctx.clock.now_s(),
    )))
}

/// Binds each write once with the request's own values and clock: its partition, its row, its
/// conditions, refused where Cassandra refuses them.
fn bind(ctx: &Context<'_>, writes: &[WriteRef<'_>], is_batch: bool) -> QueryResult<Request> {
    let first = writes.first().expect("a statement has at least one write");
    let table = first.write().table.clone();
    if writes.iter().any(|w| !Arc::ptr_eq(&w.write().table, &table)) {
        return Err(invalid("Batch with conditions cannot span multiple tables"));
    }
    let mut partition: Option<Vec<u8>> = None;
    let mut checks: Vec<(Vec<u8>, Check)> = Vec::new();
    let mut also_read = BTreeSet::new();
    let mut statics = false;
    let mut regulars = false;
    let mut wildcard = false;
    let mut columns: Vec<usize> = Vec::new();
    if is_batch {
        columns.extend(table.partition_key.iter().chain(&table.clustering));
    }
    for w in writes {
        let write = w.write();
        let verb = match write.shape {
            Shape::Delete(_) => "deletions",
            _ => "updates",
        };
        let mut planned = Vec::new();
        w.bind(ctx, &mut planned)?;
        let Some(p) = planned.first().map(|m| m.partition.clone()) else {
            // An empty IN names no row: the statement writes nothing.
            continue;
        };
        if planned.iter().any(|m| m.partition != p) {
            return Err(invalid(if is_batch {
                "Batch with conditions cannot span multiple partitions (you cannot use IN on the partition key)".to_owned()
            } else {
                format!("IN on the partition key is not supported with conditional {verb}")
            }));
        }
        match &partition {
            None => partition = Some(p),
            Some(q) if *q != p => {
                return Err(invalid("Batch with conditions cannot span multiple partitions"))
            }
            Some(_) => {}
        }
        let mut rows: Vec<&[u8]> = Vec::new();
        let mut range = false;
        for m in &planned {
            match &m.target {
                Target::Row {
                    clustering, reads, ..
                } => {
                    if is_static_key(&table, clustering) {
                        statics |= write.condition.is_some() || !reads.is_empty();
                    } else if !rows.contains(&clustering.as_slice()) {
                        rows.push(clustering);
                    }
                    if !reads.is_empty() && !is_static_key(&table, clustering) {
                        also_read.insert(clustering.clone());
                    }
                }
                Target::Range { .. } => range = true,
            }
        }
        regulars |= !rows.is_empty() || range;
        if rows.len() > 1 {
            return Err(invalid(format!(
                "IN on the clustering key columns is not supported with conditional {verb}"
            )));
        }
        let Some(condition) = &write.condition else {
            continue;
        };
        if range {
            // A DELETE of a clustering range or a whole partition deletes regular columns:
            // Cassandra refuses it with any condition, static ones included.
            return Err(invalid(
                "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns",
            ));
        }
        // The row the statement names, or its partition's static row when it names none.
        let key = rows.first().map_or_else(Vec::new, |k| k.to_vec());
        assert!(
            !(key.is_empty() && !table.clustering.is_empty() && condition.on_regular_columns()),
            "binding refuses a condition on a regular column without a full clustering key"
        );
        match condition {
            Conditions::Exists => {
                add_check(&mut checks, key, Check::Exists)?;
                wildcard = true;
            }
            Conditions::NotExists => {
                add_check(&mut checks, key, Check::NotExists)?;
                wildcard = true;
            }
            Conditions::Columns(conditions) => {
                let mut regular = Vec::new();
                let mut statics_bound = Vec::new();
                // Cassandra shows a statement's regular columns before its static ones, and the
                // statements of a batch in their order.
                let mut static_columns = Vec::new();
                for c in conditions {
                    let bound = c.bind(&table, w.binds)?;
                    let shown = if c.is_static {
                        &mut static_columns
                    } else {
                        &mut columns
                    };
                    if !shown.contains(&c.column) {
                        shown.push(c.column);
                    }
                    if c.is_static {
                        statics_bound.push(bound);
                    } else {
                        regular.push(bound);
                    }
                }
                if !regular.is_empty() {
                    add_check(&mut checks, key, Check::Columns(regular))?;
                }
                if !statics_bound.is_empty() {
                    statics = true;
                    add_check(&mut checks, Vec::new(), Check::Columns(statics_bound))?;
                }
                for c in static_columns {
                    if !columns.contains(&c) {
                        columns.push(c);
                    }
                }
            }
        }
    }
    let partition = partition.ok_or_else(|| invalid("Some partition key parts are missing"))?;
    if wildcard {
        columns = table.select_star_order();
    }
    Ok(Request {
        keyspace: first.keyspace.clone(),
        table,
        partition,
        checks,
        also_read,
        statics,
        regulars,
        columns,
    })
}

/// Adds the check of one row, refusing the mixes Cassandra refuses on one row.
fn add_check(checks: &mut Vec<(Vec<u8>, Check)>, key: Vec<u8>, check: Check) -> QueryResult<()> {
    let Some((_, previous)) = checks.iter_mut().find(|(k, _)| *k == key) else {
        checks.push((key, check));
        return Ok(());
    };
    match (previous, check) {
        (Check::Exists, Check::Exists) | (Check::NotExists, Check::NotExists) => Ok(()),
        (Check::Columns(p), Check::Columns(c)) => {
            p.extend(c);
            Ok(())
        }
        (Check::Exists, Check::NotExists) | (Check::NotExists, Check::Exists) => Err(invalid(
            "Cannot mix IF EXISTS and IF NOT EXISTS conditions for the same row",
        )),
        (Check::Columns(_), Check::NotExists) | (Check::NotExists, Check::Columns(_)) => Err(invalid(
            "Cannot mix IF conditions and IF NOT EXISTS for the same row",
        )),
        (Check::Columns(_), Check::Exists) | (Check::Exists, Check::Columns(_)) => {
            Err(invalid("Cannot mix IF conditions and IF EXISTS for the same row"))
        }
    }
}

impl Request {
    /// True when every check is on the static row: Cassandra then reads the partition's first
    /// row too (to tell a partition with rows but no static values from a missing one), and
    /// shows it when the conditions fail.
    fn static_checks_only(&self, table: &Table) -> bool {
        self.checks.iter().all(|(k, _)| is_static_key(table, k))
    }

    /// The rows to read: from the first checked (or listed) row to the last, the static row
    /// first when it is wanted. Rows between them come too and are passed over. When only the
    /// static row is checked, the read goes on to the partition's first live row.
    fn read(&self, table: &Table) -> PartitionRead {
        let mut keys: BTreeSet<&[u8]> = self
            .checks
            .iter()
            .map(|(k, _)| k.as_slice())
            .chain(self.also_read.iter().map(Vec::as_slice))
            .collect();
        if self.statics && !table.clustering.is_empty() {
            keys.insert(&[]);
        }
        let first = keys.first().map_or_else(Vec::new, |k| k.to_vec());
        let last = keys.last().map_or_else(Vec::new, |k| k.to_vec());
        let (end, limit) = if self.static_checks_only(table) && self.also_read.is_empty() {
            // The static row and the first live row after it (if the static row counts).
            (Bound::Unbounded, 2)
        } else {
            // The range is bounded by the request's own keys.
            (Bound::Included(last), usize::MAX)
        };
        PartitionRead {
            table: table.storage_id,
            token: hayate_storage::token::token(&self.partition),
            partition: self.partition.clone(),
            start: Bound::Included(first),
            end,
            reverse: false,
            limit,
        }
    }

    /// The `[applied]` result set.
    fn answer(&self, applied: bool, current: &ReadResult, now_s: u32) -> Rows {
        let table = &*self.table;
        let spec = |name: &str, ty: ColumnType| ColumnSpec {
            table: TableSpec {
                keyspace: table.keyspace.clone(),
                table: table.name.clone(),
            },
            name: name.to_owned(),
            ty,
        };
        let applied_spec = spec("[applied]", ColumnType::Boolean);
        let flag: &[u8] = if applied { &[1] } else { &[0] };
        let view = View::of(table, current, now_s);
        // The rows the conditions were judged on, as they are, in clustering order.
        let checked: BTreeSet<&[u8]> = self
            .checks
            .iter()
            .map(|(k, _)| k.as_slice())
            .filter(|k| !is_static_key(table, k))
            .collect();
        let statics = view.statics.as_ref().filter(|_| self.statics);
        let first_row = self.static_checks_only(table);
        let mut shown: Vec<(&[u8], Option<&Row>)> = view
            .rows
            .iter()
            .filter(|(k, _)| first_row || checked.contains(k.as_slice()))
            .take(if first_row { 1 } else { usize::MAX })
            .map(|(k, r)| (k.as_slice(), Some(r)))
            .collect();
        if shown.is_empty() && statics.is_some() {
            shown.push((&[], None));
        }
        if applied || shown.is_empty() {
            let mut rows = Rows::new(RowsMetadata::new(vec![applied_spec]));
            rows.push_row(&[Some(flag)]);
            return rows;
        }
        let mut specs = vec![applied_spec];
        specs.extend(self.columns.iter().map(|&i| {
            let c = &table.columns[i];
            spec(&c.name, c.ty.to_column_type())
        }));
        let mut rows = Rows::new(RowsMetadata::new(specs));
        let empty = Row::default();
        for (key, row) in shown {
            let values = row_values(table, &self.partition, key, row.unwrap_or(&empty), statics, now_s);
            let mut cells: Vec<Option<&[u8]>> = vec![Some(flag)];
            cells.extend(self.columns.iter().map(|&i| {
                // Regular columns were not read when every write names static rows only.
                let read = self.regulars || table.columns[i].kind != ColumnKind::Regular;
                values.values[i].as_deref().filter(|_| read)
            }));
            rows.push_row(&cells);
        }
        rows
    }
}

/// The rows Paxos read, as a read at `now_s` shows them: the live rows by clustering key, and
/// the static row when it has live cells.
struct View {
    rows: Vec<(Vec<u8>, Row)>,
    statics: Option<Row>,
}

impl View {
    fn of(table: &Table, current: &ReadResult, now_s: u32) -> View {
        let mut view = View {
            rows: Vec::new(),
            statics: None,
        };
        for r in &current.rows {
            let row = r.row.visible(now_s);
            if is_static_key(table, &r.clustering) {
                if row.cells.iter().any(|c| c.value_at(now_s).is_some()) {
                    view.statics = Some(row);
                }
            } else if row.is_live(now_s) {
                view.rows.push((r.clustering.clone(), row));
            }
        }
        view
    }

    /// The row at `key` (the static row for the empty key of a table with clustering columns).
    fn row(&self, table: &Table, key: &[u8]) -> Option<&Row> {
        if is_static_key(table, key) {
            return self.statics.as_ref();
        }
        self.rows
            .iter()
            .find(|(k, _)| k.as_slice() == key)
            .map(|(_, r)| r)
    }

    /// The row at `key`, with the static row standing for the empty key.
    fn any_row(&self, key: &[u8]) -> Option<&Row> {
        if key.is_empty() {
            if let Some(s) = &self.statics {
                return Some(s);
            }
        }
        self.rows
            .iter()
            .find(|(k, _)| k.as_slice() == key)
            .map(|(_, r)| r)
    }
}

/// True for the empty update of the row a statement names only for its conditions (it sets
/// static columns alone): there is nothing to write to that row.
fn is_empty_row_update(m: &Mutation) -> bool {
    matches!(&m.target, Target::Row { update, reads, .. } if *update == Row::default() && reads.is_empty())
}

#[cfg(test)]
#[path = "cas_tests.rs"]
mod tests;
