//! What the process costs, as Linux counts it: bytes written to storage (`/proc/self/io`) and
//! resident memory (`/proc/self/status`). Both engines are measured the same way.
//!
//! `write_bytes` counts what the process sent towards the block layer: direct I/O when it is
//! submitted, buffered writes when the page is dirtied. It covers every thread of the process, so
//! RocksDB's flush and compaction threads and hayate's flusher and defragmenter are included.
//! `cancelled_write_bytes` is dirty page cache discarded before writeback (a WAL file deleted
//! before the kernel wrote it out); it is reported beside, not subtracted.

use std::io;

#[derive(Clone, Copy, Debug, Default)]
pub struct ProcIo {
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

impl ProcIo {
    pub fn now() -> io::Result<ProcIo> {
        let text = std::fs::read_to_string("/proc/self/io")?;
        let mut out = ProcIo::default();
        for line in text.lines() {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value: u64 = value.trim().parse().map_err(io::Error::other)?;
            match name {
                "write_bytes" => out.write_bytes = value,
                "cancelled_write_bytes" => out.cancelled_write_bytes = value,
                _ => {}
            }
        }
        Ok(out)
    }

    pub fn since(self, earlier: ProcIo) -> ProcIo {
        ProcIo {
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(earlier.cancelled_write_bytes),
        }
    }
}

/// The process's resident set (`VmRSS`), in bytes.
pub fn rss_bytes() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/self/status")?;
    let line = text
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| io::Error::other("no VmRSS line in /proc/self/status"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .map_err(io::Error::other)?;
    Ok(kib * 1024)
}

/// Hands freed heap back to the kernel, so that one engine's freed memory is not counted as
/// resident, nor reused unseen, by the next engine's RAM figure.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

pub const MIB: f64 = (1u64 << 20) as f64;
pub const GIB: f64 = (1u64 << 30) as f64;
