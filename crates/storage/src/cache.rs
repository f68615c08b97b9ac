//! The post-write cache: the most recently written blocks, kept in RAM so that a read of a fresh
//! record costs no device read. Blocks enter when the writer seals them and leave, oldest
//! first, when the cache is over its size; a block leaves only after it is on the device. A
//! data-in-memory namespace never evicts, so every read is served from RAM.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};

use crate::device::AlignedBuf;

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
        } else {
            inner.order.push_back(block);
        }
        self.evict_locked(&mut inner);
    }

    /// Records that `block` (at `sequence`) is now on the device, so it may be evicted.
    pub fn mark_on_device(&self, block: u32, sequence: u64) {
        let mut inner = self.lock();
        if let Some(c) = inner.blocks.get_mut(&block) {
            if c.sequence == sequence {
                c.on_device = true;
            }
        }
        self.evict_locked(&mut inner);
    }

    fn evict_locked(&self, inner: &mut Inner) {
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
        let mut inner = self.lock();
        if let Some(c) = inner.blocks.remove(&block) {
            inner.bytes -= c.buf.len() as u64;
            inner.order.retain(|&b| b != block);
        }
    }

    pub fn bytes(&self) -> u64 {
        self.read().bytes
    }
}
