//! The block table: every write block of the namespace, across its devices, with its sequence
//! number, its live bytes and its state; and the free list.
//!
//! A block moves Free -> Open (the writer fills it) -> Sealed (full, queued or written) ->
//! Defragging (its live records are being moved) -> PendingFree (empty, waiting until what
//! replaced its records is durable and its header is wiped) -> Free.
//!
//! A table snapshot (`snapshots/`) pins the blocks its rows are in: a pinned block that would
//! be freed is Held instead (its header and records stay on the device, and a cold start reads
//! them as it reads any block, the newest version of each row winning), and goes back to
//! Sealed, with nothing live, once no snapshot pins it, for defragmentation to free.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crate::device::{AlignedBuf, Device, IO_ALIGN_BYTES};
use crate::format::block::{BlockHeader, HeaderError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockState {
    Free = 0,
    Open = 1,
    Sealed = 2,
    Defragging = 3,
    PendingFree = 4,
    /// Holds a chunk of a row larger than a block: never defragmented, freed with its row.
    Chunk = 5,
    /// Freed by the data, kept for a snapshot that pins it.
    Held = 6,
}

impl BlockState {
    fn from_u8(v: u8) -> BlockState {
        match v {
            0 => BlockState::Free,
            1 => BlockState::Open,
            2 => BlockState::Sealed,
            3 => BlockState::Defragging,
            4 => BlockState::PendingFree,
            5 => BlockState::Chunk,
            _ => BlockState::Held,
        }
    }
}

struct BlockMeta {
    sequence: AtomicU64,
    live_bytes: AtomicU64,
    state: AtomicU8,
    /// The snapshots that hold records in this block.
    pins: AtomicU32,
}

/// The devices of a namespace seen as one array of blocks.
pub struct DeviceSet {
    devices: Vec<Arc<dyn Device>>,
    /// The first global block index of each device.
    first_block: Vec<u32>,
    block_size_bytes: u32,
    blocks: u32,
}

impl DeviceSet {
    pub fn new(devices: Vec<Arc<dyn Device>>, block_size_bytes: u32) -> DeviceSet {
        let mut first_block = Vec::with_capacity(devices.len());
        let mut blocks: u64 = 0;
        for d in &devices {
            first_block.push(blocks as u32);
            blocks += d.size_bytes() / u64::from(block_size_bytes);
        }
        let blocks = blocks.min(crate::index::BLOCKS_MAX - 1) as u32;
        DeviceSet {
            devices,
            first_block,
            block_size_bytes,
            blocks,
        }
    }

    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    pub fn block_size_bytes(&self) -> u32 {
        self.block_size_bytes
    }

    /// The device holding `block`, and the block's byte offset on it.
    pub fn locate(&self, block: u32) -> (&dyn Device, u64) {
        assert!(block < self.blocks, "block {block} of {}", self.blocks);
        let d = self.first_block.partition_point(|&first| first <= block) - 1;
        let offset = u64::from(block - self.first_block[d]) * u64::from(self.block_size_bytes);
        (self.devices[d].as_ref(), offset)
    }

    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }
}

/// Who takes a free block, and so how much of the stop-writes reserve it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// A client write that leaves live data: stops at the reserve.
    Write,
    /// A client write that leaves its row without live data (a delete): may use the smaller
    /// half of the reserve, so that users can still empty a full namespace.
    Delete,
    /// Defragmentation, which frees space: may use all of it.
    Defrag,
}

/// See [`BlockTable::defrag_backlog`].
#[derive(Clone, Copy, Debug, Default)]
pub struct DefragBacklog {
    pub pending_blocks: u64,
    pub pending_live_bytes: u64,
    pub defragging_blocks: u64,
}

pub struct BlockTable {
    meta: Box<[BlockMeta]>,
    free: Mutex<VecDeque<u32>>,
    free_count: AtomicU64,
    /// Client writes may not take the last `reserve_blocks` free blocks.
    reserve_blocks: u64,
    /// Snapshots being taken: while one is, no block is freed (each is Held), since the
    /// snapshot may have copied an index entry that points into it and not yet pinned it.
    taking: AtomicU32,
}

impl BlockTable {
    pub fn new(blocks: u32, stop_writes_free_pct: u32) -> BlockTable {
        BlockTable {
            meta: (0..blocks)
                .map(|_| BlockMeta {
                    sequence: AtomicU64::new(0),
                    live_bytes: AtomicU64::new(0),
                    state: AtomicU8::new(BlockState::Free as u8),
                    pins: AtomicU32::new(0),
                })
                .collect(),
            free: Mutex::new(VecDeque::new()),
            free_count: AtomicU64::new(0),
            reserve_blocks: (u64::from(blocks) * u64::from(stop_writes_free_pct)).div_ceil(100),
            taking: AtomicU32::new(0),
        }
    }

    pub fn len(&self) -> u32 {
        self.meta.len() as u32
    }

    pub fn free_blocks(&self) -> u64 {
        self.free_count.load(Ordering::Relaxed)
    }

    /// Takes a free block for the writer. Client writes leave the reserve to defragmentation,
    /// which frees space and so must never be starved of it.
    ///
    /// Bug fixed here: deletes used to stop at the reserve like every client write (a tombstone
    /// is a write), so once a namespace was full nothing could be deleted and its space never
    /// came back. A delete may now take blocks from the reserve while at least half of it (rounded
    /// up) is left for defragmentation.
    pub fn take_free(&self, claim: Claim) -> Option<u32> {
        let mut free = self.free.lock().expect("free list lock poisoned");
        let keep = match claim {
            Claim::Write => self.reserve_blocks,
            Claim::Delete => self.reserve_blocks.div_ceil(2),
            Claim::Defrag => 0,
        };
        if (free.len() as u64) <= keep {
            return None;
        }
        let block = free.pop_front()?;
        self.free_count.store(free.len() as u64, Ordering::Relaxed);
        Some(block)
    }

    /// Puts a block on the free list (at open time, or once it is wiped); a pinned block is
    /// Held instead, with nothing live.
    pub fn release(&self, block: u32) {
        let m = &self.meta[block as usize];
        if self.is_pinned(block) {
            m.live_bytes.store(0, Ordering::Relaxed);
            m.state.store(BlockState::Held as u8, Ordering::Release);
            return;
        }
        m.state.store(BlockState::Free as u8, Ordering::Release);
        m.live_bytes.store(0, Ordering::Relaxed);
        let mut free = self.free.lock().expect("free list lock poisoned");
        free.push_back(block);
        self.free_count.store(free.len() as u64, Ordering::Relaxed);
    }

    pub fn state(&self, block: u32) -> BlockState {
        BlockState::from_u8(self.meta[block as usize].state.load(Ordering::Acquire))
    }

    /// Marks a block found holding data at open time: its live bytes are counted afresh.
    pub fn mark_holding(&self, block: u32, sequence: u64) {
        let m = &self.meta[block as usize];
        m.sequence.store(sequence, Ordering::Release);
        m.live_bytes.store(0, Ordering::Relaxed);
        m.state.store(BlockState::Sealed as u8, Ordering::Release);
    }

    pub fn set_state(&self, block: u32, state: BlockState) {
        self.meta[block as usize]
            .state
            .store(state as u8, Ordering::Release);
    }

    /// Moves a block from one state to another if it is in the first; false if it was not.
    pub fn transition(&self, block: u32, from: BlockState, to: BlockState) -> bool {
        self.meta[block as usize]
            .state
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub fn sequence(&self, block: u32) -> u64 {
        self.meta[block as usize].sequence.load(Ordering::Acquire)
    }

    pub fn set_sequence(&self, block: u32, sequence: u64) {
        self.meta[block as usize]
            .sequence
            .store(sequence, Ordering::Release);
    }

    pub fn live_bytes(&self, block: u32) -> u64 {
        self.meta[block as usize].live_bytes.load(Ordering::Relaxed)
    }

    pub fn add_live(&self, block: u32, bytes: u32) {
        self.meta[block as usize]
            .live_bytes
            .fetch_add(u64::from(bytes), Ordering::Relaxed);
    }

    pub fn sub_live(&self, block: u32, bytes: u32) {
        let prev = self.meta[block as usize]
            .live_bytes
            .fetch_sub(u64::from(bytes), Ordering::Relaxed);
        assert!(
            prev >= u64::from(bytes),
            "block {block}: live bytes would go negative"
        );
    }

    /// Sealed blocks with fewer than `lwm_bytes` live, emptiest first, at most `max`. A pinned
    /// block is left alone: moving its records out would free nothing.
    pub fn defrag_candidates(&self, lwm_bytes: u64, max: usize) -> Vec<u32> {
        let mut c: Vec<(u64, u32)> = (0..self.len())
            .filter(|&b| self.state(b) == BlockState::Sealed && !self.is_pinned(b))
            .map(|b| (self.live_bytes(b), b))
            .filter(|&(live, _)| live < lwm_bytes)
            .collect();
        c.sort_unstable();
        c.truncate(max);
        c.into_iter().map(|(_, b)| b).collect()
    }

    /// The blocks defragmentation has before it: sealed blocks below `lwm_bytes` live, their
    /// live bytes, and the blocks being defragmented. A walk of the block table, for operators.
    pub fn defrag_backlog(&self, lwm_bytes: u64) -> DefragBacklog {
        let mut backlog = DefragBacklog::default();
        for b in 0..self.len() {
            match self.state(b) {
                BlockState::Sealed if self.live_bytes(b) < lwm_bytes => {
                    backlog.pending_blocks += 1;
                    backlog.pending_live_bytes += self.live_bytes(b);
                }
                BlockState::Defragging => backlog.defragging_blocks += 1,
                _ => {}
            }
        }
        backlog
    }

    /// The lowest sequence number of any block whose records are still on the device. Every
    /// version of a record in an older block is gone for good. Chunk blocks hold no records.
    pub fn oldest_sequence_in_use(&self) -> u64 {
        (0..self.len())
            .filter(|&b| !matches!(self.state(b), BlockState::Free | BlockState::Chunk))
            .map(|b| self.sequence(b))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// True while a snapshot pins `block`, or one is being taken.
    pub fn is_pinned(&self, block: u32) -> bool {
        self.taking.load(Ordering::Acquire) > 0 || self.meta[block as usize].pins.load(Ordering::Acquire) > 0
    }

    /// True if a snapshot pins `block` (not counting one being taken).
    pub fn pinned_by_a_snapshot(&self, block: u32) -> bool {
        self.meta[block as usize].pins.load(Ordering::Acquire) > 0
    }

    /// A snapshot starts copying the index: from now until [`BlockTable::end_taking`], no block
    /// is freed.
    pub fn begin_taking(&self) {
        self.taking.fetch_add(1, Ordering::AcqRel);
    }

    /// The snapshot being taken has pinned what it copied: blocks Held meanwhile that no
    /// snapshot pins go back to Sealed, for defragmentation to free.
    pub fn end_taking(&self) {
        self.taking.fetch_sub(1, Ordering::AcqRel);
        self.unhold();
    }

    pub fn pin(&self, block: u32) {
        self.meta[block as usize].pins.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes a snapshot's pin off each of `blocks`; those left Held and unpinned go back to
    /// Sealed, with nothing live, for defragmentation to free.
    pub fn unpin(&self, blocks: impl IntoIterator<Item = u32>) {
        for b in blocks {
            let pins = &self.meta[b as usize].pins;
            // Never below zero, whatever a damaged file says.
            let _ = pins.fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| p.checked_sub(1));
        }
        self.unhold();
    }

    fn unhold(&self) {
        for b in 0..self.len() {
            if !self.is_pinned(b) {
                self.transition(b, BlockState::Held, BlockState::Sealed);
            }
        }
    }

    /// Blocks pinned by snapshots, and the bytes in them that hold no live data: what only the
    /// snapshots keep from reuse now (a Held block whole; a pinned block that still holds some
    /// live rows, its dead part, which defragmentation would otherwise have reclaimed; nothing
    /// of the open block, which writes still fill).
    pub fn pinned_and_held(&self, block_bytes: u64) -> (u64, u64) {
        let mut pinned = 0;
        let mut held = 0;
        for b in 0..self.len() {
            if self.pinned_by_a_snapshot(b) {
                pinned += 1;
                // The open block's unfilled part is not dead: writes still go there.
                if self.state(b) != BlockState::Open {
                    held += block_bytes.saturating_sub(self.live_bytes(b));
                }
            }
        }
        (pinned, held)
    }

    /// Free blocks beyond the stop-writes reserve: what client writes may still fill.
    pub fn free_beyond_reserve(&self) -> u64 {
        self.free_blocks().saturating_sub(self.reserve_blocks)
    }

    pub fn total_live_bytes(&self) -> u64 {
        (0..self.len()).map(|b| self.live_bytes(b)).sum()
    }
}

/// Reads block `b`'s header; `None` if it is unreadable, damaged or was never used. A free
/// block's header comes back with `free` set.
pub(crate) fn read_header(devices: &DeviceSet, b: u32) -> Option<BlockHeader> {
    let (device, offset) = devices.locate(b);
    let mut buf = AlignedBuf::zeroed(IO_ALIGN_BYTES);
    if let Err(e) = device.read_at(&mut buf, offset) {
        tracing::error!(
            "block {b} on {} at offset {offset}: header unreadable ({e}); the block is skipped",
            device.name()
        );
        return None;
    }
    match BlockHeader::decode(&buf) {
        Ok(h) if h.block_index == b && h.block_size_bytes == devices.block_size_bytes() => Some(h),
        Ok(h) => {
            tracing::warn!(
                "block {b} on {} at offset {offset}: header belongs to block {} of {} bytes; \
                 the block is skipped (were device files reordered or resized?)",
                device.name(),
                h.block_index,
                h.block_size_bytes
            );
            None
        }
        Err(HeaderError::Free) => None,
        Err(e) => {
            tracing::warn!(
                "block {b} on {} at offset {offset}: damaged header ({e:?}); the block is skipped \
                 and its records are lost on this node (repair restores them from replicas)",
                device.name()
            );
            None
        }
    }
}
