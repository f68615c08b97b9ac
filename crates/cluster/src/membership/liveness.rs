//! Which hosts are up, readable by every request thread at once without a lock.
//!
//! Every request asks about each of its replicas, from many threads, while the answer changes a
//! few times a day. A lock (even a read lock, whose counter every reader writes) would make those
//! threads fight over one cache line; so the table is a fixed array of atomics, open-addressed by
//! host id, written by the gossip thread alone and only when a host appears or changes state.
//! A reader does a few relaxed loads on lines that stay shared in every core's cache.
//!
//! Hosts are never removed: a dead node stays in the ring until an operator removes it, and so
//! it stays here as down. The table therefore fills up only with [`HOSTS_MAX`] distinct hosts.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::node::HostId;

/// The most hosts a node keeps track of, dead ones included. A cluster of Cassandra's largest
/// known sizes (about a thousand nodes) fits; gossip's own limit (every node's digest in one
/// 64 KiB datagram) comes about there too.
pub const HOSTS_MAX: usize = 1024;

/// Twice as many slots as hosts keeps linear probes short (at most half full).
const SLOTS: usize = 2 * HOSTS_MAX;

const SLOT_EMPTY: u8 = 0;
const SLOT_DOWN: u8 = 1;
const SLOT_UP: u8 = 2;

struct Slot {
    /// The host id's first and last eight bytes. Written once, before `state` leaves
    /// `SLOT_EMPTY`, and never again.
    high: AtomicU64,
    low: AtomicU64,
    state: AtomicU8,
}

/// The table is full: [`HOSTS_MAX`] hosts are already known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableFull;

pub(crate) struct LivenessTable {
    slots: Box<[Slot]>,
    /// Hosts inserted so far; also serializes writers (the gossip thread is the only one, but
    /// the table's correctness must not rest on that).
    hosts: Mutex<usize>,
}

fn halves(host: HostId) -> (u64, u64) {
    let mut high = [0u8; 8];
    let mut low = [0u8; 8];
    high.copy_from_slice(&host.0[..8]);
    low.copy_from_slice(&host.0[8..]);
    (u64::from_be_bytes(high), u64::from_be_bytes(low))
}

fn first_slot(high: u64, low: u64) -> usize {
    // Host ids are random UUIDs, but mixing both halves through a multiply keeps a
    // hand-made id (all zeros but one byte, as tests like) from clustering.
    let mixed = (high ^ low.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> 32) as usize % SLOTS
}

impl LivenessTable {
    pub(crate) fn new() -> LivenessTable {
        let slots = (0..SLOTS)
            .map(|_| Slot {
                high: AtomicU64::new(0),
                low: AtomicU64::new(0),
                state: AtomicU8::new(SLOT_EMPTY),
            })
            .collect();
        LivenessTable {
            slots,
            hosts: Mutex::new(0),
        }
    }

    /// The host's slot, or the empty slot where it would go.
    fn find(&self, host: HostId) -> (&Slot, u8) {
        let (high, low) = halves(host);
        let mut index = first_slot(high, low);
        loop {
            let slot = &self.slots[index];
            // Acquire pairs with the Release in `set`: a reader that sees the slot taken sees
            // the id written before it.
            let state = slot.state.load(Ordering::Acquire);
            if state == SLOT_EMPTY
                || (slot.high.load(Ordering::Relaxed) == high && slot.low.load(Ordering::Relaxed) == low)
            {
                return (slot, state);
            }
            // The table is never more than half full, so an empty slot ends every probe.
            index = (index + 1) % SLOTS;
        }
    }

    /// True if the host is known and up.
    pub(crate) fn is_up(&self, host: HostId) -> bool {
        self.find(host).1 == SLOT_UP
    }

    /// Records the host's state, adding the host if it is new.
    pub(crate) fn set(&self, host: HostId, up: bool) -> Result<(), TableFull> {
        let state = if up { SLOT_UP } else { SLOT_DOWN };
        let mut hosts = self
            .hosts
            .lock()
            .expect("the liveness table's writer lock is never poisoned");
        let (slot, current) = self.find(host);
        if current == SLOT_EMPTY {
            if *hosts == HOSTS_MAX {
                return Err(TableFull);
            }
            let (high, low) = halves(host);
            slot.high.store(high, Ordering::Relaxed);
            slot.low.store(low, Ordering::Relaxed);
            *hosts += 1;
        }
        slot.state.store(state, Ordering::Release);
        Ok(())
    }

    /// Every host that is up.
    pub(crate) fn up_hosts(&self) -> Vec<HostId> {
        let mut up = Vec::new();
        for slot in self.slots.iter() {
            if slot.state.load(Ordering::Acquire) == SLOT_UP {
                let high = slot.high.load(Ordering::Relaxed).to_be_bytes();
                let low = slot.low.load(Ordering::Relaxed).to_be_bytes();
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&high);
                id[8..].copy_from_slice(&low);
                up.push(HostId(id));
            }
        }
        up.sort();
        up
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u32) -> HostId {
        let mut id = [0u8; 16];
        id[12..].copy_from_slice(&n.to_be_bytes());
        HostId(id)
    }

    #[test]
    fn hosts_go_up_and_down_and_unknown_hosts_are_down() {
        let table = LivenessTable::new();
        assert!(!table.is_up(host(1)));
        table.set(host(1), true).expect("room");
        table.set(host(2), false).expect("room");
        assert!(table.is_up(host(1)));
        assert!(!table.is_up(host(2)));
        assert!(!table.is_up(host(3)));
        table.set(host(1), false).expect("room");
        table.set(host(2), true).expect("room");
        assert_eq!(table.up_hosts(), vec![host(2)]);
    }

    #[test]
    fn the_table_holds_hosts_max_hosts_and_refuses_one_more() {
        let table = LivenessTable::new();
        for n in 0..HOSTS_MAX as u32 {
            table.set(host(n), n % 2 == 0).expect("room");
        }
        assert_eq!(table.set(host(HOSTS_MAX as u32), true), Err(TableFull));
        // A known host can still change state when the table is full.
        table.set(host(1), true).expect("a known host");
        for n in 0..HOSTS_MAX as u32 {
            assert_eq!(table.is_up(host(n)), n % 2 == 0 || n == 1, "host {n}");
        }
        assert!(!table.is_up(host(HOSTS_MAX as u32)));
        assert_eq!(table.up_hosts().len(), HOSTS_MAX / 2 + 1);
    }
}
