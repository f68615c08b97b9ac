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

pub(crate) fn align_down(x: usize) -> usize {
    x / IO_ALIGN_BYTES * IO_ALIGN_BYTES
}

pub(crate) fn align_up(x: usize) -> usize {
    x.div_ceil(IO_ALIGN_BYTES) * IO_ALIGN_BYTES
}
