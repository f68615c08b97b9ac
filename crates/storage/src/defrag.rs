//! Continuous defragmentation: blocks whose live bytes fall below the low-water mark have their
//! live records copied to the open write block, and are then freed. There is no compaction:
//! a record is copied as it is, not merged with anything, and the cost is bounded by the pause
//! after each block (`defrag_sleep_us`).

use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::blocks::{BlockState, Claim};
use crate::device::{read_in_pieces, AlignedBuf};
use crate::error::WriteError;
use crate::format::block::{walk_block, WalkEnd};
use crate::index::{IndexKey, Location};
use crate::namespace::{decode_found, Namespace};
use crate::token::clustering_prefix;

/// Blocks looked at per pass; the next pass takes the next emptiest.
const BLOCKS_PER_PASS_MAX: usize = 256;
/// How often the defragmenter looks for work when it found none.
const IDLE_PERIOD: Duration = Duration::from_millis(200);

pub(crate) fn spawn(inner: Arc<Namespace>) -> JoinHandle<()> {
    thread::Builder::new()
        .name("hayate-defrag".into())
        .spawn(move || loop {
            let freed = pass(&inner);
            if inner.sleep(if freed == 0 { IDLE_PERIOD } else { Duration::ZERO }) {
                return;
            }
        })
        .expect("spawn defrag thread")
}

/// Defragments the emptiest blocks below the low-water mark; returns how many were freed.
pub(crate) fn pass(inner: &Namespace) -> usize {
    let block_size = u64::from(inner.config().block_size_bytes);
    let lwm_bytes = block_size * u64::from(inner.config().defrag_lwm_pct) / 100;
    let mut freed = 0;
    for b in inner.blocks().defrag_candidates(lwm_bytes, BLOCKS_PER_PASS_MAX) {
        if inner.is_stopping() {
            break;
        }
        if !inner
            .blocks()
            .transition(b, BlockState::Sealed, BlockState::Defragging)
        {
            continue;
        }
        match defrag_block(inner, b) {
            Ok(true) => {
                inner.writer().free_when_durable(b);
                inner.stats().add_defrag_block();
                freed += 1;
            }
            // Left in the Defragging state, so it is neither retried nor freed (logged in
            // `move_live_records`), or Sealed again for a later pass (a drop running).
            Ok(false) => {}
            Err(e) => {
                if !matches!(e, WriteError::DeviceFull { .. }) {
                    tracing::warn!("defragmenting block {b}: {e}; will retry");
                }
                inner.blocks().set_state(b, BlockState::Sealed);
                break;
            }
        }
        if inner.config().defrag_sleep_us > 0 {
            thread::sleep(Duration::from_micros(inner.config().defrag_sleep_us));
        }
    }
    freed
}

/// Moves every live record out of block `b`. Ok(false) if some live data could not be reached.
fn defrag_block(inner: &Namespace, b: u32) -> Result<bool, WriteError> {
    let sequence = inner.blocks().sequence(b);
    if let Some(cached) = inner.cache().get(b, sequence) {
        return move_live_records(inner, b, sequence, &cached);
    }
    let (device, offset) = inner.devices().locate(b);
    // Read whole, so none of a spare's old bytes are left.
    let len = inner.config().block_size_bytes as usize;
    let mut read = inner
        .cache()
        .take_spare(len)
        .unwrap_or_else(|| AlignedBuf::zeroed(len));
    read_in_pieces(device, &mut read, offset).map_err(|source| WriteError::Io {
        device: device.name(),
        source,
    })?;
    let moved = move_live_records(inner, b, sequence, &read);
    inner.cache().give_spare(read);
    moved
}

/// Moves every live record out of block `b`, whose bytes at `sequence` are `buf`.
fn move_live_records(inner: &Namespace, b: u32, sequence: u64, buf: &[u8]) -> Result<bool, WriteError> {
    let mut failure = None;
    // Records of a table that is gone: a drop removes the table first and then its entries one
    // by one, taking their live bytes off as it goes, so they may still count here.
    let mut of_dropped_tables = 0usize;
    let end = walk_block(buf, sequence, |offset, view| {
        if failure.is_some() {
            return;
        }
        let Some(index) = inner.existing_table(view.meta.table) else {
            of_dropped_tables += 1;
            return;
        };
        let key = IndexKey {
            token: view.meta.token,
            clustering_prefix: clustering_prefix(view.clustering_key),
            digest: view.meta.digest,
        };
        let here = Location::new(b, offset as u32, view.record_bytes as u32);
        let table = view.meta.table;
        let _row = inner.row_lock(table, &key);
        let record = &buf[offset..offset + view.record_bytes];
        if view.meta.delta {
            // Live only as the row's current delta: moved as it is.
            if inner.deltas().location(table, &key) == Some(here) {
                failure = move_record(inner, b, here, record, |moved| {
                    inner.deltas().relocate(table, &key, here, moved)
                })
                .err();
            }
            return;
        }
        let Some(e) = index.get(&key).filter(|e| e.location == here) else {
            return; // an older version, or a row since rewritten or removed
        };
        if e.has_delta() {
            // The whole version is at hand and the delta in RAM: the row is written whole,
            // with no device read, and both records die.
            let folded = decode_found(view)
                .map_err(|detail| WriteError::Read(inner.corrupt(here, detail)))
                .and_then(|found| inner.fold_in_defrag(table, &index, &e, found));
            match folded {
                Ok(true) => {
                    inner.stats().add_defrag_bytes(u64::from(here.len()));
                    return;
                }
                Ok(false) => {}
                // Moved as it is below, its delta following it.
                Err(err) => tracing::warn!("defragmenting block {b}: a row with a delta not folded: {err}"),
            }
        }
        failure = move_record(inner, b, here, record, |moved| {
            let moved_it = index.relocate(&key, here, moved);
            if moved_it && e.has_delta() {
                inner.deltas().rebase(table, &key, here, moved);
            }
            moved_it
        })
        .err();
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let left = inner.blocks().live_bytes(b);
    if left > 0 && of_dropped_tables > 0 {
        // A drop still running: the next pass finds the block empty, or what it moved out of
        // it is dead anyway; what was copied out is already where the index points.
        tracing::debug!("block {b} keeps {left} live bytes of a table being dropped; looked at again later");
        inner.blocks().set_state(b, BlockState::Sealed);
        return Ok(false);
    }
    if left > 0 {
        let (device, offset) = inner.devices().locate(b);
        let why = match end {
            WalkEnd::Damaged { offset: at, detail } => {
                format!("a record at block offset {at} does not verify ({detail})")
            }
            WalkEnd::Clean => "the index points at records the walk did not find".to_string(),
        };
        tracing::error!(
            "block {b} on {} at offset {offset} keeps {left} live bytes: {why}; the block is left \
             in place and not reused",
            device.name()
        );
        return Ok(false);
    }
    Ok(true)
}

/// Copies a live record out of block `b` to the open block; `relocate` points its owner at the
/// copy, or says the record died meanwhile (then the copy is dead instead).
fn move_record(
    inner: &Namespace,
    b: u32,
    here: Location,
    record: &[u8],
    relocate: impl FnOnce(Location) -> bool,
) -> Result<(), WriteError> {
    let (moved, _) = inner.writer().append(record, Claim::Defrag)?;
    if relocate(moved) {
        inner.blocks().sub_live(b, here.len());
    } else {
        inner.blocks().sub_live(moved.block(), moved.len());
    }
    inner.stats().add_defrag_bytes(u64::from(here.len()));
    Ok(())
}
