//! The engine's secondary indexes (`crate::sindex`): defining them, building them, and the
//! lookup that pages through a token range by an index.

use std::sync::Arc;

use super::Engine;
use crate::error::ReadError;
use crate::keys::{RowKey, RowsFrom, RowsPage, ScanPosition, StoredRow, TableId};
use crate::namespace::Namespace;
use crate::sindex::{IndexSpec, RowRef, SecondaryIndex, TermRange};

/// Rows a build reads per page of its pass over the table, and candidates a lookup takes at
/// most at a time.
const PAGE_ROWS: usize = 1024;

/// An index's state, for the layer above and its metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexState {
    /// The build pass has ended: lookups are answered.
    pub ready: bool,
    /// Entries held (one per term and row, stale ones included until a lookup drops them).
    pub entries: u64,
    /// Rows lookups read since the node started.
    pub rows_read: u64,
    /// Stale entries lookups dropped since the node started.
    pub stale_dropped: u64,
}

/// Why an index lookup was not answered.
#[derive(Debug)]
pub enum IndexReadError {
    /// The index is not defined here (yet, or any more).
    Unknown,
    /// The index is being built.
    NotReady,
    Read(ReadError),
}

impl std::fmt::Display for IndexReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexReadError::Unknown => f.write_str("the index does not exist on this node"),
            IndexReadError::NotReady => f.write_str("the index is not yet available: it is being built"),
            IndexReadError::Read(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for IndexReadError {}

impl Engine {
    /// Makes `table`'s secondary indexes `specs` (all of them: an index missing from `specs` is
    /// dropped). A new index is built in the background by one pass over the table; it answers
    /// lookups once that pass ends. The caller calls this at every start, as the indexes are
    /// kept in RAM only.
    pub fn set_indexes(&self, table: TableId, specs: &[IndexSpec]) {
        for index in self.inner.sindexes.set(table, specs) {
            let inner = self.inner.clone();
            let name = format!("hayate-index-build-{table}-{}", index.spec.id);
            let spawned = std::thread::Builder::new()
                .name(name)
                .spawn(move || build(&inner, table, &index));
            match spawned {
                Ok(handle) => {
                    let mut threads = self.threads.lock().expect("threads lock poisoned");
                    // Builds that ended leave their handles. The first thread is the flusher,
                    // which shutdown stops last: it stays first.
                    let mut i = 1;
                    while i < threads.len() {
                        if threads[i].is_finished() {
                            drop(threads.remove(i));
                        } else {
                            i += 1;
                        }
                    }
                    threads.push(handle);
                }
                Err(e) => tracing::error!(table, error = %e, "could not start an index build thread"),
            }
        }
    }

    /// Makes every table's secondary indexes those `tables` gives ([`Engine::set_indexes`]); a
    /// table not in `tables` has none.
    pub fn set_all_indexes(&self, tables: &[(TableId, Vec<IndexSpec>)]) {
        for table in self.inner.sindexes.tables() {
            if !tables.iter().any(|(t, _)| *t == table) {
                self.set_indexes(table, &[]);
            }
        }
        for (table, specs) in tables {
            self.set_indexes(*table, specs);
        }
    }

    /// The state of index `id` of `table`, if it is defined.
    pub fn index_state(&self, table: TableId, id: u32) -> Option<IndexState> {
        let index = self.inner.sindexes.get(table, id)?;
        Some(IndexState {
            ready: index.is_ready(),
            entries: index.entries(),
            rows_read: index.rows_read.load(std::sync::atomic::Ordering::Relaxed),
            stale_dropped: index.stale_dropped.load(std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The rows of `table` whose index `id` holds a term in `terms`, from `from` up to
    /// `to_token` (inclusive), in scan order, as stored (deletions included, for replica
    /// merges), until `live_limit` of them match. A row the index names that no longer matches
    /// (overwritten, deleted, expired) comes along too, so that a coordinator merging replicas
    /// lets its newer version win; its entry is dropped. `more` is set when the read stopped at
    /// the limit.
    pub fn index_read(
        &self,
        table: TableId,
        id: u32,
        terms: &TermRange,
        from: RowsFrom<'_>,
        to_token: i64,
        live_limit: usize,
    ) -> Result<RowsPage, IndexReadError> {
        let index = self
            .inner
            .sindexes
            .get(table, id)
            .ok_or(IndexReadError::Unknown)?;
        if !index.is_ready() {
            return Err(IndexReadError::NotReady);
        }
        let mut page = RowsPage::default();
        let Some(table_index) = self.inner.existing_table(table) else {
            return Ok(page);
        };
        // The last candidate read: the next batch starts after it.
        let mut after: Option<RowRef> = None;
        let now_s = self.inner.now_s();
        let mut matched = 0;
        loop {
            let want = (live_limit - matched).clamp(1, PAGE_ROWS);
            let cursor = match &after {
                None => from,
                Some(r) => RowsFrom::After {
                    token: r.token,
                    partition: r.partition(),
                    clustering: Some(r.clustering()),
                },
            };
            let found = index.candidates(terms, cursor, to_token, want);
            let Some(last) = found.last() else {
                return Ok(page);
            };
            after = Some(last.row.clone());
            let mut i = 0;
            while i < found.len() {
                let row = &found[i].row;
                let n = found[i..].iter().take_while(|c| &c.row == row).count();
                if matched == live_limit {
                    page.more = true;
                    return Ok(page);
                }
                let key = row.row_key(table);
                index.rows_read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (stored, _) = self
                    .get_with_tombstones_in(&table_index, key)
                    .map_err(IndexReadError::Read)?;
                let matches = stored.as_ref().is_some_and(|r| {
                    let visible = r.visible(now_s);
                    visible.is_live(now_s) && SecondaryIndex::any_in(terms, &index.keys_of(&visible, now_s))
                });
                if matches {
                    matched += 1;
                } else {
                    for c in &found[i..i + n] {
                        index.remove_if_unchanged(&c.key, &c.row, c.seq);
                    }
                }
                if let Some(row) = stored {
                    page.rows.push(stored_row(key, row));
                }
                i += n;
            }
        }
    }
}

fn stored_row(key: RowKey<'_>, row: crate::row::Row) -> StoredRow {
    StoredRow {
        token: key.token,
        partition_key: key.partition.to_vec(),
        clustering_key: key.clustering.to_vec(),
        row,
        position: ScanPosition(key.index_key()),
    }
}

/// One pass over `table`, adding each live row's terms to `index`; then it answers lookups.
fn build(inner: &Namespace, table: TableId, index: &Arc<SecondaryIndex>) {
    let started = std::time::Instant::now();
    let mut rows = 0u64;
    let mut last: Option<StoredRow> = None;
    loop {
        if inner.is_stopping() || index.is_dropped() {
            return;
        }
        let Some(table_index) = inner.existing_table(table) else {
            break;
        };
        let from = match &last {
            None => RowsFrom::Token(i64::MIN),
            Some(r) => RowsFrom::After {
                token: r.token,
                partition: &r.partition_key,
                clustering: Some(&r.clustering_key),
            },
        };
        let page = match inner.scan_rows(&table_index, from, i64::MAX, PAGE_ROWS) {
            Ok(page) => page,
            Err(e) => {
                // The index would miss rows: it stays unavailable, and says why.
                tracing::error!(
                    table,
                    index = index.spec.id,
                    error = %e,
                    "an index build could not read its table; queries by the index fail until \
                     the node is restarted with the table readable"
                );
                return;
            }
        };
        let now_s = inner.now_s();
        for r in &page.rows {
            if r.row.is_live(now_s) {
                let key = RowKey {
                    table,
                    token: r.token,
                    partition: &r.partition_key,
                    clustering: &r.clustering_key,
                };
                inner.sindexes.add_built(index, key, &r.row.visible(now_s), now_s);
                rows += 1;
            }
        }
        if !page.more || page.rows.is_empty() {
            break;
        }
        last = page.rows.into_iter().last();
    }
    index.set_ready();
    tracing::info!(
        table,
        index = index.spec.id,
        rows,
        entries = index.entries(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "secondary index built"
    );
}
