//! The post-write cache: the most recently written blocks, kept in RAM so that a read of a fresh
//! record costs no device read. Blocks enter when the writer seals them and leave, oldest
//! first, when the cache is over its size; a block leaves only after it is on the device. A
//! data-in-memory namespace never evicts, so every read is served from RAM.
//!
//! A block that leaves is not given back to the allocator if nothing else holds it: a few such
//! buffers are kept as spares for the writer's next blocks ([`PostWriteCache::take_spare`]). A
//! fresh block-sized allocation costs a page fault for every page as records fill it, and
//! releasing one makes the allocator hand its pages back to the kernel later, with a TLB
//! shootdown on every core; with defragmentation writing as much as the clients, that churn
//! doubles.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use crate::device::AlignedBuf;

/// Spare block buffers kept at most: enough for the blocks sealed between two evictions.
const SPARES_MAX: usize = 4;

struct Cached {
    buf: Arc<AlignedBuf>,
    sequence: u64,
    on_device: bool,
}

struct Inner {
    blocks: HashMap<u32, Cached>,
    /// Insertion order, for eviction.
    order: VecDeque<u32>,
    bytes: u64,
}

pub struct PostWriteCache {
    inner: RwLock<Inner>,
    capacity_bytes: u64,
    evict: bool,
    /// Buffers of evicted blocks, their bytes as the block left them.
    spares: Mutex<Vec<AlignedBuf>>,
}

impl PostWriteCache {
    pub fn new(capacity_bytes: u64, evict: bool) -> PostWriteCache {
        PostWriteCache {
            inner: RwLock::new(Inner {
                blocks: HashMap::new(),
                order: VecDeque::new(),
                bytes: 0,
            }),
            capacity_bytes,
            evict,
            spares: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().expect("cache lock poisoned")
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().expect("cache lock poisoned")
    }

    /// Adds a sealed block (not yet on the device).
    pub fn insert(&self, block: u32, sequence: u64, buf: Arc<AlignedBuf>, on_device: bool) {
        let mut left = Vec::new();
        {
            let mut inner = self.lock();
            inner.bytes += buf.len() as u64;
            if let Some(old) = inner.blocks.insert(
                block,
                Cached {
                    buf,
                    sequence,
                    on_device,
                },
            ) {
                inner.bytes -= old.buf.len() as u64;
                left.push(old.buf);
            } else {
                inner.order.push_back(block);
            }
            self.evict_locked(&mut inner, &mut left);
        }
        self.keep_spares(left);
    }

    /// Records that `block` (at `sequence`) is now on the device, so it may be evicted.
    pub fn mark_on_device(&self, block: u32, sequence: u64) {
        let mut left = Vec::new();
        {
            let mut inner = self.lock();
            if let Some(c) = inner.blocks.get_mut(&block) {
                if c.sequence == sequence {
                    c.on_device = true;
                }
            }
            self.evict_locked(&mut inner, &mut left);
        }
        self.keep_spares(left);
    }

    /// Evicts the oldest blocks on the device until the cache is within its size; their
    /// buffers go to `left`, to be released after the lock (the release may reach the kernel).
    fn evict_locked(&self, inner: &mut Inner, left: &mut Vec<Arc<AlignedBuf>>) {
        if !self.evict {
            return;
        }
        while inner.bytes > self.capacity_bytes {
            let Some(&oldest) = inner.order.front() else { break };
            match inner.blocks.get(&oldest) {
                Some(c) if !c.on_device => break,
                Some(_) => {
                    let c = inner.blocks.remove(&oldest).expect("present");
                    inner.bytes -= c.buf.len() as u64;
                    inner.order.pop_front();
                    left.push(c.buf);
                }
                None => {
                    inner.order.pop_front();
                }
            }
        }
    }

    /// The cached copy of `block` if it holds `sequence`.
    pub fn get(&self, block: u32, sequence: u64) -> Option<Arc<AlignedBuf>> {
        let inner = self.read();
        inner
            .blocks
            .get(&block)
            .filter(|c| c.sequence == sequence)
            .map(|c| Arc::clone(&c.buf))
    }

    /// True if the cache holds the block at this sequence.
    pub fn contains(&self, block: u32, sequence: u64) -> bool {
        self.read()
            .blocks
            .get(&block)
            .is_some_and(|c| c.sequence == sequence)
    }

    /// Drops a block that is being freed.
    pub fn remove(&self, block: u32) {
        let removed = {
            let mut inner = self.lock();
            let removed = inner.blocks.remove(&block);
            if let Some(c) = &removed {
                inner.bytes -= c.buf.len() as u64;
                inner.order.retain(|&b| b != block);
            }
            removed
        };
        self.keep_spares(removed.map(|c| c.buf));
    }

    /// Keeps the buffers that nothing else holds as spares, up to [`SPARES_MAX`] of them.
    fn keep_spares(&self, left: impl IntoIterator<Item = Arc<AlignedBuf>>) {
        for buf in left {
            if let Ok(buf) = Arc::try_unwrap(buf) {
                self.give_spare(buf);
            }
        }
    }

    /// Keeps a block-sized buffer that its user is done with (defragmentation's read of a
    /// block) as a spare, if there is room.
    pub fn give_spare(&self, buf: AlignedBuf) {
        let mut spares = self.spares.lock().expect("spares lock poisoned");
        if spares.len() < SPARES_MAX {
            spares.push(buf);
        }
    }

    /// A buffer of exactly `len` bytes that a block left behind, if there is one. Its bytes are
    /// whatever that block held: the caller overwrites what it uses and zeroes the rest.
    pub fn take_spare(&self, len: usize) -> Option<AlignedBuf> {
        let mut spares = self.spares.lock().expect("spares lock poisoned");
        let i = spares.iter().position(|b| b.len() == len)?;
        Some(spares.swap_remove(i))
    }

    pub fn bytes(&self) -> u64 {
        self.read().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: usize = 128 << 10;

    fn block(fill: u8) -> Arc<AlignedBuf> {
        let mut b = AlignedBuf::zeroed(BLOCK);
        b.fill(fill);
        Arc::new(b)
    }

    /// A block evicted while nothing else holds it becomes a spare, with its bytes as they were;
    /// one still held by a reader is left to that reader.
    #[test]
    fn evicted_blocks_become_spares_unless_held() {
        let cache = PostWriteCache::new(2 * BLOCK as u64, true);
        cache.insert(1, 10, block(1), true);
        cache.insert(2, 11, block(2), true);
        let held = cache.get(2, 11).expect("cached");
        cache.insert(3, 12, block(3), true);
        cache.insert(4, 13, block(4), true);
        assert!(
            cache.get(1, 10).is_none() && cache.get(2, 11).is_none(),
            "the oldest left"
        );
        let spare = cache.take_spare(BLOCK).expect("block 1's buffer is a spare");
        assert!(spare.iter().all(|&b| b == 1), "a spare keeps its old bytes");
        assert!(
            cache.take_spare(BLOCK).is_none(),
            "block 2's buffer is still held"
        );
        drop(held);
        assert!(
            cache.take_spare(2 * BLOCK).is_none(),
            "only a buffer of the asked size"
        );
    }

    /// A block not yet on the device never leaves, and at most `SPARES_MAX` spares are kept.
    #[test]
    fn spares_are_bounded_and_unwritten_blocks_stay() {
        let cache = PostWriteCache::new(BLOCK as u64, true);
        cache.insert(1, 10, block(1), false);
        cache.insert(2, 11, block(2), true);
        assert!(
            cache.get(1, 10).is_some(),
            "not on the device: kept over the size"
        );
        assert!(cache.take_spare(BLOCK).is_none());
        for i in 0..2 * SPARES_MAX as u32 {
            cache.give_spare(AlignedBuf::zeroed(BLOCK));
            cache.remove(100 + i);
        }
        let mut n = 0;
        while cache.take_spare(BLOCK).is_some() {
            n += 1;
        }
        assert_eq!(n, SPARES_MAX);
    }
}
