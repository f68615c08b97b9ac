//! One request's values bound into a compiled [`Plan`]: the write's timestamp and TTL, the keys
//! of the rows it names, and each row's update ([`Mutation`]s, not yet applied).
//!
//! What is judged here depends on the values (a null key, a TTL out of range, which partitions
//! an IN names) or is reported in the order it was before plans were compiled (see
//! [`super::plan`]).

use std::ops::Bound;
use std::sync::Arc;

use hayate_cql::statement::{Term, Using};
use hayate_cql::value::{json, DataType};
use hayate_storage::row::{Deletion, Liveness, Row};

use super::assign::{remove, set_column};
use super::plan::{DeletePlan, InsertPlan, Plan, Shape, UpdatePlan, Write};
use super::{Mutation, ReadOp, Target, WriteTime};
use crate::error::{invalid, QueryResult};
use crate::query::bind::{evaluate, evaluate_integer, Binds, Evaluated, Integer, Receiver};
use crate::query::keys::ClusteringRange;
use crate::query::restrictions::{Restrictions, WherePlan};
use crate::query::{Context, TTL_MAX_S};
use crate::schema::{Column, ColumnKind, Keyspace, Table};

impl Plan {
    /// The row updates of one request: `keyspaces` are those of the plan's writes, as they are
    /// now, in order.
    pub fn bind(
        &self,
        ctx: &Context<'_>,
        keyspaces: &[Arc<Keyspace>],
        binds: &Binds<'_>,
        out: &mut Vec<Mutation>,
    ) -> QueryResult<()> {
        assert_eq!(keyspaces.len(), self.writes.len(), "one keyspace per write");
        let batch_ts = self.batch_timestamp(ctx, binds)?;
        for (write, ks) in self.writes.iter().zip(keyspaces) {
            bind_write(ctx, write, ks, binds, batch_ts, out)?;
        }
        Ok(())
    }

    /// The row updates of write `index` alone (a conditional statement binds each of its
    /// writes apart, to learn the row each names).
    pub(super) fn bind_write(
        &self,
        ctx: &Context<'_>,
        index: usize,
        keyspace: &Arc<Keyspace>,
        binds: &Binds<'_>,
        out: &mut Vec<Mutation>,
    ) -> QueryResult<()> {
        let batch_ts = self.batch_timestamp(ctx, binds)?;
        bind_write(ctx, &self.writes[index], keyspace, binds, batch_ts, out)
    }

    /// The BATCH's own timestamp, when the plan is a BATCH.
    fn batch_timestamp(&self, ctx: &Context<'_>, binds: &Binds<'_>) -> QueryResult<Option<i64>> {
        match &self.batch {
            Some(batch) => Ok(Some(timestamp(ctx, batch.timestamp.as_ref(), binds)?)),
            None => Ok(None),
        }
    }
}

fn bind_write(
    ctx: &Context<'_>,
    write: &Write,
    keyspace: &Arc<Keyspace>,
    binds: &Binds<'_>,
    batch_ts: Option<i64>,
    out: &mut Vec<Mutation>,
) -> QueryResult<()> {
    let rows = Rows {
        ctx,
        keyspace,
        write,
        binds,
        batch_ts,
    };
    match &write.shape {
        Shape::Insert(p) => rows.insert(p, out),
        Shape::Update(p) => rows.update(p, out),
        Shape::Delete(p) => rows.delete(p, out),
    }
}

/// One write of a plan, with what binding it needs.
struct Rows<'a> {
    ctx: &'a Context<'a>,
    keyspace: &'a Arc<Keyspace>,
    write: &'a Write,
    binds: &'a Binds<'a>,
    /// The BATCH's timestamp, when the write is in one.
    batch_ts: Option<i64>,
}

impl Rows<'_> {
    fn table(&self) -> &Arc<Table> {
        &self.write.table
    }

    fn mutation(&self, partition: Vec<u8>, target: Target) -> Mutation {
        Mutation {
            keyspace: self.keyspace.clone(),
            table: self.write.table.clone(),
            partition,
            target,
        }
    }

    /// True when the write has an IF condition on a regular column: it then names a row,
    /// whose update may be empty (only static columns set).
    fn conditions_on_rows(&self) -> bool {
        self.write
            .condition
            .as_ref()
            .is_some_and(super::condition::Conditions::on_regular_columns)
    }

    fn write_time(&self) -> QueryResult<WriteTime> {
        write_time(
            self.ctx,
            self.table(),
            &self.write.using,
            self.binds,
            self.batch_ts,
        )
    }

    fn insert(&self, p: &InsertPlan, out: &mut Vec<Mutation>) -> QueryResult<()> {
        let table = self.table();
        let (assigned, static_only) = match p {
            InsertPlan::Columns { values, static_only } => {
                let mut assigned = Vec::with_capacity(values.items.len());
                for (i, term) in &values.items {
                    let col = &table.columns[*i];
                    let to = Receiver {
                        name: &col.name,
                        ty: &col.ty,
                    };
                    assigned.push((*i, evaluate(term, &to, self.binds)?));
                }
                values.refused()?;
                (assigned, *static_only)
            }
            // Every key column is given (a missing one is a null key, refused below), so the
            // write is never to the static row alone.
            InsertPlan::Json { json, default_unset } => {
                (json_values(table, json, *default_unset, self.binds)?, false)
            }
        };
        let wt = self.write_time()?;
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
        for (i, v) in assigned {
            let col = &table.columns[i];
            match col.kind {
                ColumnKind::PartitionKey | ColumnKind::Clustering => key_values[i] = Some(key_value(col, v)?),
                ColumnKind::Static => set_column(col, v, wt, &mut statics)?,
                ColumnKind::Regular => set_column(col, v, wt, &mut update)?,
            }
        }
        let (partition, clustering) = if static_only {
            (partition_key_only(table, &key_values)?, Vec::new())
        } else {
            full_key(table, &key_values)?
        };
        if !static_only {
            update.normalize();
            out.push(self.mutation(
                partition.clone(),
                Target::Row {
                    clustering,
                    update,
                    reads: Vec::new(),
                },
            ));
        }
        if static_only || !statics.cells.is_empty() || !statics.column_deletions.is_empty() {
            statics.normalize();
            out.push(self.mutation(
                partition,
                Target::Row {
                    clustering: Vec::new(),
                    update: statics,
                    reads: Vec::new(),
                },
            ));
        }
        Ok(())
    }

    fn update(&self, p: &UpdatePlan, out: &mut Vec<Mutation>) -> QueryResult<()> {
        let table = self.table();
        let wt = self.write_time()?;
        let (partitions, r) = named_rows(self.ctx, table, &p.rows, self.binds)?;
        // A condition on a regular column names a row even when only static columns are set.
        let static_only = p.static_only && !self.conditions_on_rows();
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
        let mut rows = ColumnRows::default();
        for a in &p.assignments.items {
            let (update, reads) = rows.of(a.is_static);
            a.bind(table, self.binds, wt, update, reads)?;
        }
        p.assignments.refused()?;
        self.column_rows(&partitions, &r, static_only, p.any_static, rows, out);
        Ok(())
    }

    fn delete(&self, p: &DeletePlan, out: &mut Vec<Mutation>) -> QueryResult<()> {
        let table = self.table();
        let wt = self.write_time()?;
        let (partitions, r) = named_rows(self.ctx, table, &p.rows, self.binds)?;
        // Cassandra's first checks of a conditional DELETE that does not name a whole primary
        // key: what it deletes, then what its conditions read.
        if self.write.condition.is_some() && !r.clustering_complete {
            if p.columns.as_ref().is_none_or(|c| !c.static_only) {
                return Err(invalid(
                    "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns",
                ));
            }
            if self.conditions_on_rows() {
                return Err(invalid(
                    "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF condition on non static columns",
                ));
            }
        }
        let Some(columns) = &p.columns else {
            for partition in &partitions {
                for range in &r.clustering {
                    let target = if r.clustering_complete {
                        Target::Row {
                            clustering: row_key(range),
                            update: Row::deleted(wt.timestamp_us, wt.now_s),
                            reads: Vec::new(),
                        }
                    } else {
                        Target::Range {
                            range: without_statics(table, range),
                            deletion: Deletion {
                                timestamp_us: wt.timestamp_us,
                                deleted_at_s: wt.now_s,
                            },
                        }
                    };
                    out.push(self.mutation(partition.clone(), target));
                }
            }
            return Ok(());
        };
        let static_only = columns.static_only && !self.conditions_on_rows();
        if static_only && r.restricts_clustering() {
            return Err(invalid(
                "Invalid restrictions on clustering columns since the DELETE statement modifies only static columns",
            ));
        }
        if !r.clustering_complete && self.conditions_on_rows() {
            return Err(invalid(
                "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF condition on non static columns",
            ));
        }
        if !static_only && !r.clustering_complete {
            return Err(invalid("Range deletions are not supported for specific columns"));
        }
        let mut rows = ColumnRows::default();
        for removal in &columns.removals.items {
            let (update, reads) = rows.of(removal.is_static);
            remove(table, removal, self.binds, wt, update, reads)?;
        }
        columns.removals.refused()?;
        self.column_rows(&partitions, &r, static_only, columns.any_static, rows, out);
        Ok(())
    }

    /// The rows an UPDATE, or a DELETE of columns, writes: the regular columns' update to every
    /// row named (unless only static columns are written), and the static columns' to each
    /// partition's static row (if any is written).
    fn column_rows(
        &self,
        partitions: &[Vec<u8>],
        r: &Restrictions,
        static_only: bool,
        any_static: bool,
        rows: ColumnRows,
        out: &mut Vec<Mutation>,
    ) {
        let ColumnRows {
            mut regular,
            regular_reads,
            mut statics,
            static_reads,
        } = rows;
        if !static_only {
            regular.normalize();
            self.each_row(partitions, &r.clustering, regular, regular_reads, out);
        }
        if any_static {
            statics.normalize();
            let whole = [ClusteringRange::prefix(Vec::new())];
            self.each_row(partitions, &whole, statics, static_reads, out);
        }
    }

    /// The same update for every row a WHERE clause names: each partition, and in it each
    /// clustering key (a complete key is a one-row range starting at it).
    fn each_row(
        &self,
        partitions: &[Vec<u8>],
        ranges: &[ClusteringRange],
        mut update: Row,
        mut reads: Vec<ReadOp>,
        out: &mut Vec<Mutation>,
    ) {
        let rows = partitions.len() * ranges.len();
        let named = partitions.iter().flat_map(|p| ranges.iter().map(move |r| (p, r)));
        for (i, (partition, range)) in named.enumerate() {
            // The last row takes the update itself: a one-row write copies nothing.
            let (update, reads) = if i + 1 < rows {
                (update.clone(), reads.clone())
            } else {
                (std::mem::take(&mut update), std::mem::take(&mut reads))
            };
            out.push(self.mutation(
                partition.clone(),
                Target::Row {
                    clustering: row_key(range),
                    update,
                    reads,
                },
            ));
        }
    }
}

/// The cells an UPDATE or a DELETE of columns writes, apart: to the rows named, and to the
/// partitions' static rows; with the list reads each needs.
#[derive(Default)]
struct ColumnRows {
    regular: Row,
    regular_reads: Vec<ReadOp>,
    statics: Row,
    static_reads: Vec<ReadOp>,
}

impl ColumnRows {
    /// Where the cells of a static (or a regular) column go.
    fn of(&mut self, is_static: bool) -> (&mut Row, &mut Vec<ReadOp>) {
        if is_static {
            (&mut self.statics, &mut self.static_reads)
        } else {
            (&mut self.regular, &mut self.regular_reads)
        }
    }
}

/// The clustering key of the row a one-row range starts at (empty for an open start).
fn row_key(range: &ClusteringRange) -> Vec<u8> {
    match &range.start {
        Bound::Included(k) => k.clone(),
        _ => Vec::new(),
    }
}

/// A clustering range to delete, kept off the static row. A range open at its start (`c < 5`)
/// must not cover the static row, whose key is the empty one that sorts first: only a
/// partition delete (no clustering restriction, both ends open) removes statics, as in
/// Cassandra.
fn without_statics(table: &Table, range: &ClusteringRange) -> ClusteringRange {
    let mut range = range.clone();
    let whole_partition = matches!((&range.start, &range.end), (Bound::Unbounded, Bound::Unbounded));
    if table.has_statics() && !whole_partition && range.start == Bound::Unbounded {
        range.start = Bound::Excluded(Vec::new());
    }
    range
}

/// A batch's own USING TIMESTAMP, or the request's default, or now.
fn timestamp(ctx: &Context<'_>, term: Option<&Term>, binds: &Binds<'_>) -> QueryResult<i64> {
    if let Some(t) = term {
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
        None => timestamp(ctx, using.timestamp.as_ref(), binds)?,
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

/// The partitions and clustering ranges an UPDATE or DELETE names: the whole partition key,
/// and nothing but primary key columns.
fn named_rows(
    ctx: &Context<'_>,
    table: &Table,
    rows: &WherePlan,
    binds: &Binds<'_>,
) -> QueryResult<(Vec<Vec<u8>>, Restrictions)> {
    let mut r = rows.bind(table, binds, ctx.guard)?;
    let partitions = r
        .partitions
        .take()
        .ok_or_else(|| invalid("Some partition key parts are missing"))?;
    if !r.filters.is_empty() {
        return Err(invalid("Non PRIMARY KEY columns found in where clause"));
    }
    Ok((partitions, r))
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

/// The partition key alone, for a write of the static row.
fn partition_key_only(table: &Table, key_values: &[Option<Vec<u8>>]) -> QueryResult<Vec<u8>> {
    missing_parts(table, &table.partition_key, key_values, "partition key parts")?;
    crate::query::keys::partition_key(&key_parts(&table.partition_key, key_values))
}

/// The partition and clustering keys of one row. Missing parts are reported before a key
/// that cannot be serialized.
fn full_key(table: &Table, key_values: &[Option<Vec<u8>>]) -> QueryResult<(Vec<u8>, Vec<u8>)> {
    missing_parts(table, &table.partition_key, key_values, "partition key parts")?;
    missing_parts(table, &table.clustering, key_values, "clustering keys")?;
    Ok((
        crate::query::keys::partition_key(&key_parts(&table.partition_key, key_values))?,
        crate::query::keys::clustering_key(table, &key_parts(&table.clustering, key_values)),
    ))
}

/// Refuses a key whose columns `cols` (`what`: "partition key parts", "clustering keys") are
/// not all given.
fn missing_parts(
    table: &Table,
    cols: &[usize],
    key_values: &[Option<Vec<u8>>],
    what: &str,
) -> QueryResult<()> {
    let missing: Vec<&str> = cols
        .iter()
        .filter(|&&i| key_values[i].is_none())
        .map(|&i| table.columns[i].name.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "Some {what} are missing: {}",
        missing.join(", ")
    )))
}

fn key_parts<'k>(cols: &[usize], key_values: &'k [Option<Vec<u8>>]) -> Vec<&'k [u8]> {
    cols.iter()
        .map(|&i| key_values[i].as_deref().unwrap_or(&[]))
        .collect()
}
