//! The expiry pass ("nsup" in Aerospike): walks the index and drops what is gone for good.
//!
//! A row past its TTL is invisible the moment it expires (reads check the index's expiry); this
//! pass reclaims it later. A tombstone is kept for its table's grace period (`gc_grace_seconds`,
//! else the namespace's `tombstone_grace_s`) after its deletion, so
//! every replica learns of it. Dropping an entry is safe only if no older version of the row can
//! reappear at cold start: if the row was ever overwritten (`has_older`), the entry is kept (an
//! expired row turns into a tombstone) until every block older than the entry's has been freed.
//! An expired row that carries deletions also turns into a tombstone, kept for the grace period.
//!
//! A partition's range and partition tombstones (`range_tombstones.rs`) past their grace period
//! are first folded into the rows they cover: each such row is rewritten with the covering
//! deletion, which the row merge purges at once together with the data it shadowed. Only then
//! is the tombstones record dropped, so no shadowed row outlives the tombstone that hid it.

use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use std::ops::Bound;

use crate::index::{Entry, IndexKey, TableIndex, FLAG_TOMBSTONE, PARTITIONS};
use crate::keys::{RowKey, TableId};
use crate::namespace::Namespace;
use crate::row::Row;

pub(crate) fn spawn(inner: Arc<Namespace>) -> JoinHandle<()> {
    thread::Builder::new()
        .name("hayate-expiry".into())
        .spawn(move || loop {
            if inner.sleep(Duration::from_millis(inner.config().expiry_period_ms.max(10))) {
                return;
            }
            pass(&inner);
        })
        .expect("spawn expiry thread")
}

/// Index entries the fold of a partition's tombstones takes from the index at once.
const FOLD_BATCH_ENTRIES: usize = 1024;

enum Action {
    Keep,
    Remove,
    Tombstone,
}

/// One pass over every table; returns the entries removed.
pub(crate) fn pass(inner: &Namespace) -> usize {
    let now_s = inner.now_s();
    let oldest_in_use = inner.blocks().oldest_sequence_in_use();
    let decide = |e: &Entry, grace_s: u32| {
        // Bug fixed here: this compared with `>`, which can never hold, since the entry's own
        // block is in use; an overwritten row's tombstone (every delete of an existing row) was
        // never dropped, nor its space reclaimed. Older versions of the row sit in older blocks
        // or earlier in the entry's own block, which a cold start reads together with the entry's
        // record, so the newest still wins there; once no older block is in use, none can return.
        let older_gone = !e.has_older() || oldest_in_use >= inner.blocks().sequence(e.location.block());
        if e.is_tombstone() {
            if now_s >= e.expiry_s.saturating_add(grace_s) && older_gone {
                Action::Remove
            } else {
                Action::Keep
            }
        } else if e.expiry_s != 0 && e.expiry_s <= now_s {
            // Deletions inside the row must outlive it by the grace period, as a tombstone's do.
            if older_gone && !e.has_deletions() {
                Action::Remove
            } else {
                Action::Tombstone
            }
        } else {
            Action::Keep
        }
    };
    let tables = inner.tables();
    let mut removed = 0;
    for (table, index) in tables {
        let grace_s = inner.tombstone_grace_s(&index);
        let decide = |e: &Entry| decide(e, grace_s);
        for p in 0..PARTITIONS {
            if inner.is_stopping() {
                return removed;
            }
            for e in index.partition_select(p, |e| !matches!(decide(e), Action::Keep)) {
                match decide(&e) {
                    Action::Keep => {}
                    Action::Remove => {
                        // A partition's range tombstones go only once the rows they shadow no
                        // longer need them: the deletions are written into those rows first.
                        if e.is_range_tombstones() && !fold_tombstones(inner, table, &index, &e) {
                            continue;
                        }
                        if inner.remove_entry(table, &index, &e) {
                            inner.stats().add_expired();
                            removed += 1;
                        }
                    }
                    Action::Tombstone => {
                        index.update_if(&e, |mut e| {
                            e.flags |= FLAG_TOMBSTONE;
                            Some(e)
                        });
                    }
                }
            }
        }
    }
    removed
}

/// Writes each deletion of the tombstones record `e` into the rows of its partition that it
/// still shadows (the row merge purges both, the grace period being over); returns true when
/// every such row was rewritten and the record may go.
fn fold_tombstones(inner: &Namespace, table: TableId, index: &TableIndex, e: &Entry) -> bool {
    let (partition, tombstones) = match inner.read_tombstones_entry(index, e) {
        Ok(Some(found)) => found,
        // The record moved or went while we looked: the next pass sees it again.
        Ok(None) => return false,
        Err(err) => {
            tracing::warn!("could not read a partition's range tombstones to purge them: {err}");
            return false;
        }
    };
    let now_s = inner.now_s();
    let token = e.key.token;
    let mut cursor = Bound::Included(IndexKey {
        token,
        ..IndexKey::MIN
    });
    let end = Bound::Included(IndexKey {
        token,
        ..IndexKey::MAX
    });
    loop {
        let entries = index.range(cursor, end, FOLD_BATCH_ENTRIES);
        for row_entry in &entries {
            if row_entry.is_range_tombstones() || row_entry.is_tombstone() {
                continue;
            }
            let found = match inner.read_entry(index, row_entry) {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                Err(_) => return false, // logged by the read
            };
            if found.partition_key != partition {
                continue;
            }
            let Some(d) = tombstones.covering(&found.clustering_key) else {
                continue;
            };
            let mut shadowed = found.row.clone();
            shadowed.merge(Row::deleted(d.timestamp_us, d.deleted_at_s), now_s, 0);
            if shadowed == found.row {
                continue; // nothing in the row is older than the deletion
            }
            let key = RowKey {
                table,
                token,
                partition: &partition,
                clustering: &found.clustering_key,
            };
            if let Err(err) = inner.write_row(key, Row::deleted(d.timestamp_us, d.deleted_at_s)) {
                tracing::warn!("could not fold a range tombstone into a row it shadows: {err}");
                return false;
            }
        }
        match entries.last() {
            Some(last) if entries.len() == FOLD_BATCH_ENTRIES => cursor = Bound::Excluded(last.key),
            _ => return true,
        }
    }
}
