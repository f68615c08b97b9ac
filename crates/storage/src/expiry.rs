//! The expiry pass ("nsup" in Aerospike): walks the index and drops what is gone for good.
//!
//! A row past its TTL is invisible the moment it expires (reads check the index's expiry); this
//! pass reclaims it later. A tombstone is kept for `tombstone_grace_s` after its deletion, so
//! every replica learns of it. Dropping an entry is safe only if no older version of the row can
//! reappear at cold start: if the row was ever overwritten (`has_older`), the entry is kept (an
//! expired row turns into a tombstone) until every block older than the entry's has been freed.
//! An expired row that carries deletions also turns into a tombstone, kept for the grace period.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::engine::Inner;
use crate::index::{Entry, FLAG_TOMBSTONE, PARTITIONS};

pub(crate) fn spawn(inner: Arc<Inner>) -> JoinHandle<()> {
    thread::Builder::new()
        .name("hayate-expiry".into())
        .spawn(move || loop {
            if inner.sleep(Duration::from_millis(inner.config.expiry_period_ms.max(10))) {
                return;
            }
            pass(&inner);
        })
        .expect("spawn expiry thread")
}

enum Action {
    Keep,
    Remove,
    Tombstone,
}

/// One pass over every table; returns the entries removed.
pub(crate) fn pass(inner: &Inner) -> usize {
    let now_s = inner.clock.now_s();
    let grace_s = inner.config.tombstone_grace_s;
    let oldest_in_use = inner.blocks.oldest_sequence_in_use();
    let decide = |e: &Entry| {
        // Bug fixed here: this compared with `>`, which can never hold, since the entry's own
        // block is in use; an overwritten row's tombstone (every delete of an existing row) was
        // never dropped, nor its space reclaimed. Older versions of the row sit in older blocks
        // or earlier in the entry's own block, which a cold start reads together with the entry's
        // record, so the newest still wins there; once no older block is in use, none can return.
        let older_gone = !e.has_older() || oldest_in_use >= inner.blocks.sequence(e.location.block());
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
    let tables: Vec<_> = inner
        .tables
        .read()
        .expect("tables lock poisoned")
        .values()
        .cloned()
        .collect();
    let mut removed = 0;
    for index in tables {
        for p in 0..PARTITIONS {
            if inner.stop.load(Ordering::Relaxed) {
                return removed;
            }
            for e in index.partition_select(p, |e| !matches!(decide(e), Action::Keep)) {
                match decide(&e) {
                    Action::Keep => {}
                    Action::Remove => {
                        if index.update_if(&e, |_| None) {
                            inner.blocks.sub_live(e.location.block(), e.location.len());
                            inner.stats.add_expired();
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
