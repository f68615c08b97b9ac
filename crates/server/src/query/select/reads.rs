//! A SELECT's reads: of stored rows through the coordinator, by partition or by token-range
//! scan, and of the built-in tables.

use std::borrow::Cow;
use std::ops::Bound;

use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{Coordinator, ReadRequest, SpeculativeRetry};
use hayate_cluster::replica::{PartitionRead, RangeRead, RangeStart, ReadCommand, RowPosition};
use hayate_storage::row::Row;

use super::super::cells::{is_static_key, row_values, RowValues};
use super::super::keys::ClusteringRange;
use super::super::restrictions::Restrictions;
use super::super::{Context, VirtualTables};
use super::paging::{paging_head, partition_state, put_bytes, scan_state, Resume, KIND_BUILT_IN, KIND_SCAN};
use super::sink::{emit, passes, Sink};
use crate::error::{consistency_level, invalid, QueryResult};
use crate::schema::{Keyspace, Table};

/// One SELECT's reads of stored rows.
pub(super) struct Reads<'a> {
    pub(super) ctx: &'a Context<'a>,
    pub(super) coordinator: &'a Coordinator,
    pub(super) keyspace: &'a Keyspace,
    pub(super) table: &'a Table,
    pub(super) restrictions: &'a Restrictions,
    pub(super) distinct: bool,
    /// The table's `speculative_retry`, as the plan resolved it.
    pub(super) speculative_retry: SpeculativeRetry,
}

impl Reads<'_> {
    pub(super) async fn read(
        &self,
        command: ReadCommand,
    ) -> QueryResult<hayate_cluster::coordinator::ReadResult> {
        let consistency = consistency_level(self.ctx.consistency);
        if let (ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial, ReadCommand::Partition(read)) =
            (consistency, &command)
        {
            // A read at SERIAL first finishes any lightweight transaction in progress on the
            // partition; an IN list reads each of its partitions so. A token-range read at
            // SERIAL is read at the quorum the level counts, without finishing what is in
            // progress in the range (Cassandra's Paxos v2 finishes it first).
            return Ok(self
                .coordinator
                .read_serial(self.keyspace.strategy(), consistency, read.clone())
                .await?);
        }
        Ok(self
            .coordinator
            .read(ReadRequest {
                replication: self.keyspace.strategy(),
                consistency,
                command,
                speculative_retry: self.speculative_retry,
            })
            .await?)
    }

    /// True when the rest of the current partition is not wanted.
    pub(super) fn partition_done(&self, sink: &Sink<'_>) -> bool {
        sink.partition_full() || (self.distinct && sink.partition_rows > 0)
    }

    /// Partitions named by the WHERE clause, in key order, each read in clustering order.
    pub(super) async fn by_partition(
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
        // Cassandra 5.0 returns IN partitions in the order of their keys' values (component by
        // component, each by its type), not in token order.
        let mut keyed: Vec<(Vec<Vec<u8>>, &Vec<u8>)> = partitions
            .iter()
            .map(|p| (super::super::keys::split_partition_key(table, p), p))
            .collect();
        let types: Vec<&hayate_cql::value::DataType> = table
            .partition_key
            .iter()
            .map(|&i| &table.columns[i].ty)
            .collect();
        keyed.sort_by(|(a, _), (b, _)| {
            a.iter()
                .zip(b)
                .zip(&types)
                .map(|((a, b), ty)| hayate_cql::value::compare(ty, a, b))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        keyed.dedup_by(|a, b| a.1 == b.1);
        let ordered: Vec<(i64, &Vec<u8>)> = keyed
            .into_iter()
            .map(|(_, p)| (hayate_storage::token::token(p), p))
            .collect();
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
    pub(super) async fn scan(
        &self,
        sink: &mut Sink<'_>,
        resume: Option<Resume>,
    ) -> QueryResult<Option<Vec<u8>>> {
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
                    index: r.index.clone(),
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
                    if r.index.is_some() {
                        // An index read returns the rows it names, not the static row.
                        statics = self.static_row(row.token, &row.partition).await?;
                    }
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
    pub(super) async fn static_row(&self, token: i64, partition: &[u8]) -> QueryResult<Option<Row>> {
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

    pub(super) fn visible_statics(&self, row: &Row) -> Option<Row> {
        let now = self.ctx.clock.now_s();
        let visible = row.visible(now);
        visible.is_live(now).then_some(visible)
    }

    /// Adds the row a partition shows when it has live static cells but no row the query
    /// returned, as Cassandra does when the query asks for whole partitions: the partition
    /// key, the static values, and nulls elsewhere.
    pub(super) fn statics_alone(
        &self,
        sink: &mut Sink<'_>,
        token: i64,
        partition: &[u8],
        statics: Option<&Row>,
    ) {
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
    pub(super) fn end_scanned_partition(
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

pub(super) fn built_in(
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
