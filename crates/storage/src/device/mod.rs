//! Devices: where write blocks live. A device is a file or a raw block device opened with
//! `O_DIRECT`, or RAM for a namespace that keeps its data in memory without persistence.
//!
//! The engine reads and writes devices only through [`Device`], so tests can put a device in
//! front that tears writes, fails with an error or loses unsynced data, from a seed.

mod aligned;
mod file;
mod memory;
mod ring;

pub use aligned::AlignedBuf;
pub use file::FileDevice;
pub use memory::{MemDevice, NullDevice};
pub use ring::{ReadRing, RingRead};

use std::io;
use std::os::unix::io::RawFd;

/// Every device offset and length is a multiple of this (the largest common sector size, and
/// what `O_DIRECT` requires on the file systems we support).
pub const IO_ALIGN_BYTES: usize = 4096;

pub trait Device: Send + Sync {
    /// Usable size in bytes.
    fn size_bytes(&self) -> u64;
    /// Reads `buf.len()` bytes at `offset`. `buf`, its length and `offset` are aligned to
    /// [`IO_ALIGN_BYTES`].
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes `buf` at `offset`, with the same alignment rules as `read_at`. The data is on the
    /// device, but not necessarily durable, when this returns.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> io::Result<()>;
    /// A name for log lines: the path, or "memory".
    fn name(&self) -> String;
    /// The descriptor that [`ReadRing`] record reads may target, with the same alignment rules
    /// as `read_at` (through the page cache where the device reads records so); `None` (the
    /// default) keeps every read in `read_record_at`, as devices in RAM and the tests'
    /// fault-injecting devices need.
    fn record_fd(&self) -> Option<RawFd> {
        None
    }
    /// Reads one record's aligned span, as `read_at` does, but through the page cache where the
    /// device is set to read records so (`read_page_cache`): the bytes may then be a page the
    /// device has since overwritten, which the record checks catch ([`Device::forget_cached`]).
    fn read_record_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_at(buf, offset)
    }
    /// Drops the page cache's copy of a span after a record read through it failed its checks,
    /// so the next read of it sees the device; false when record reads never use the page cache,
    /// so there is nothing to read again.
    fn forget_cached(&self, _offset: u64, _len: usize) -> bool {
        false
    }
}

/// Defragmentation reads a block in pieces of at most this many bytes, one after another. A
/// virtual disk that serves its requests one at a time would otherwise keep every record read
/// that arrives during a 1 MiB read waiting for all of it: in 5-minute A/Bs on this project's
/// VMs, the read p99 while defragmentation ramps up fell from 1.9-2.1 to 1.5-1.8 ms. (The
/// flusher's block writes in pieces gained as much on reads but cost the load 11% of its
/// insert rate, so they go whole.)
pub const BACKGROUND_PIECE_BYTES: usize = 128 << 10;

/// [`Device::read_at`] in pieces of [`BACKGROUND_PIECE_BYTES`], for background reads.
pub(crate) fn read_in_pieces(device: &dyn Device, buf: &mut [u8], offset: u64) -> io::Result<()> {
    for (i, piece) in buf.chunks_mut(BACKGROUND_PIECE_BYTES).enumerate() {
        device.read_at(piece, offset + (i * BACKGROUND_PIECE_BYTES) as u64)?;
    }
    Ok(())
}

pub(crate) fn align_down(x: usize) -> usize {
    x / IO_ALIGN_BYTES * IO_ALIGN_BYTES
}

pub(crate) fn align_up(x: usize) -> usize {
    x.div_ceil(IO_ALIGN_BYTES) * IO_ALIGN_BYTES
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A device in RAM that remembers the length of each request.
    struct Recording {
        mem: MemDevice,
        lengths: Mutex<Vec<usize>>,
    }

    impl Device for Recording {
        fn size_bytes(&self) -> u64 {
            self.mem.size_bytes()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.lengths.lock().expect("lock").push(buf.len());
            self.mem.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.lengths.lock().expect("lock").push(buf.len());
            self.mem.write_at(buf, offset)
        }
        fn sync(&self) -> io::Result<()> {
            Ok(())
        }
        fn name(&self) -> String {
            "recording".into()
        }
    }

    /// A block is read in pieces no larger than the limit, and comes back whole and in place.
    #[test]
    fn a_background_read_goes_in_pieces_and_arrives_whole() {
        let device = Recording {
            mem: MemDevice::new(4 << 20),
            lengths: Mutex::new(Vec::new()),
        };
        let mut block = AlignedBuf::zeroed((1 << 20) + 3 * IO_ALIGN_BYTES);
        for (i, b) in block.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        device.mem.write_at(&block, 1 << 20).expect("write");
        let mut back = AlignedBuf::zeroed(block.len());
        read_in_pieces(&device, &mut back, 1 << 20).expect("read");
        assert!(back[..] == block[..], "read back what was written, in place");
        let lengths = device.lengths.lock().expect("lock").clone();
        assert_eq!(lengths.len(), 9, "eight whole pieces and a tail: {lengths:?}");
        assert!(lengths
            .iter()
            .all(|&l| l <= BACKGROUND_PIECE_BYTES && l % IO_ALIGN_BYTES == 0));
    }
}
