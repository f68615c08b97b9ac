//! Rows read become result rows: visibility at the request's clock, filters, LIMIT, PER
//! PARTITION LIMIT, the page size, GROUP BY and SELECT JSON.

use std::borrow::Cow;

use hayate_cluster::replica::ReplicaRow;
use hayate_cql::value::{json, split_components, DataType};
use hayate_storage::row::Row;

use super::super::cells::{is_static_key, row_values, RowValues};
use super::super::functions::{self, Accumulator, Scalar};
use super::super::restrictions::Restrictions;
use super::super::Context;
use super::plan::{Grouping, Output, Projection};
use crate::schema::Table;

/// Rows a scan asks the engine for at once.
const SCAN_BATCH_ROWS: usize = 1000;

/// Collects output rows, enforcing LIMIT, PER PARTITION LIMIT and the page size. Under
/// GROUP BY each of these counts groups, as Cassandra counts them, so a group is never split
/// across pages.
pub(super) struct Sink<'p> {
    pub(super) projection: &'p Projection,
    pub(super) grouping: Grouping,
    /// Set for SELECT JSON.
    pub(super) json: Option<JsonRows>,
    pub(super) content: Vec<u8>,
    /// Result rows in `content`.
    pub(super) rows: usize,
    /// The group being aggregated, when grouping.
    pub(super) group: Option<Group>,
    pub(super) accumulators: Vec<Accumulator>,
    /// Result rows (or groups) returned so far, by this page and the ones before it.
    pub(super) returned: u64,
    pub(super) limit: Option<usize>,
    pub(super) per_partition: Option<usize>,
    pub(super) page: usize,
    /// Result rows (or groups) of the current partition.
    pub(super) partition_rows: u32,
}

/// A group of rows being aggregated: the values of its grouping columns, and the cells its
/// non-aggregate selectors show, which are those of its first row.
pub(super) struct Group {
    pub(super) key: Vec<Option<Vec<u8>>>,
    pub(super) first: Vec<Option<Vec<u8>>>,
}

/// What one output shows for one row; `None` for an aggregate, which shows its group. A
/// column's value is borrowed from the row; what an output computes is owned.
pub(super) fn cell<'v>(o: &Output, table: &Table, v: &'v RowValues, token: i64) -> Option<Cow<'v, [u8]>> {
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

/// SELECT JSON: each result row becomes one text value, a JSON object keyed by the names of
/// the selected columns (in double quotes when they are case-sensitive, as Cassandra writes
/// them), in a column named `[json]`.
pub struct JsonRows {
    /// Each output's key, written as a JSON string followed by `": "`.
    pub(super) keys: Vec<String>,
    pub(super) types: Vec<DataType>,
}

impl JsonRows {
    pub(super) fn new(table: &Table, projection: &Projection) -> JsonRows {
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

    pub(super) fn object(&self, cells: &[Option<impl AsRef<[u8]>>]) -> Vec<u8> {
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

pub(super) fn put_cell(content: &mut Vec<u8>, cell: Option<&[u8]>) {
    match cell {
        Some(b) => {
            content.extend_from_slice(&(b.len() as i32).to_be_bytes());
            content.extend_from_slice(b);
        }
        None => content.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

impl Sink<'_> {
    pub(super) fn done(&self) -> bool {
        self.limit_reached() || self.rows >= self.page
    }

    pub(super) fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.returned as usize >= l)
    }

    pub(super) fn partition_full(&self) -> bool {
        self.per_partition
            .is_some_and(|l| self.partition_rows as usize >= l)
    }

    /// Rows to ask the engine for at once: no more than the page holds or the LIMIT leaves,
    /// unless rows are grouped, when a page of groups may take any number of rows. Rows a
    /// filter drops do not count towards the LIMIT, so a `filtered` read asks for the page.
    ///
    /// Asking for more than the LIMIT leaves costs a read of each row too many: before
    /// 2026-12-02 a YCSB scan (`LIMIT ?` of 1 to 100 rows, unpaged) read 1,000 rows each time.
    pub(super) fn want(&self, filtered: bool) -> usize {
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
    pub(super) fn push(&mut self, table: &Table, v: &RowValues, token: i64) -> bool {
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

    pub(super) fn start_group(
        &mut self,
        table: &Table,
        v: &RowValues,
        token: i64,
        key: Vec<Option<Vec<u8>>>,
    ) {
        let first = self
            .projection
            .outputs
            .iter()
            .map(|o| cell(o, table, v, token).map(Cow::into_owned))
            .collect();
        self.group = Some(Group { key, first });
        self.accumulators = vec![Accumulator::default(); self.projection.outputs.len()];
    }

    pub(super) fn accumulate(&mut self, table: &Table, v: &RowValues) {
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
    pub(super) fn flush_group(&mut self) {
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

    pub(super) fn write_group(&mut self, first: &[Option<Vec<u8>>]) {
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
    pub(super) fn finish(&mut self) {
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

pub(super) fn passes(table: &Table, r: &Restrictions, v: &RowValues) -> bool {
    r.filters
        .iter()
        .all(|f| f.matches(&table.columns[f.column].ty, v.values[f.column].as_deref()))
}

/// Adds a row to the page if it is live at the request's clock and passes the filters; the
/// partition's static row (`statics`) lends it the static columns' values, and is not a row of
/// the result itself. Returns false when the sink refused it (see [`Sink::push`]). The row's
/// cells are taken (its key stays), so that the read's row is made visible without a copy.
pub(super) fn emit(
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
