//! A file or raw block device, opened with `O_DIRECT` so that neither reads nor writes go
//! through the page cache: the engine's own caches are the only ones, and a benchmark measures
//! the SSD, not the kernel's memory.
//!
//! With `read_page_cache` (Aerospike's setting of the same name), record reads go through a
//! second descriptor opened without `O_DIRECT`, so memory the process does not use holds
//! recently read pages; the kernel gives that memory back under pressure. Writes, block reads
//! (defragmentation, cold start) and anything that must see the device itself stay direct. A
//! direct write drops the pages it overwrites from the page cache; should a page survive that
//! (a buffered read racing the write), the engine's record checks find it stale and the engine
//! reads again directly ([`Device::forget_cached`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::{Device, IO_ALIGN_BYTES};

pub struct FileDevice {
    file: File,
    /// The same file without `O_DIRECT`, for record reads, when reads use the page cache.
    cached: Option<File>,
    path: PathBuf,
    size_bytes: u64,
}

impl FileDevice {
    /// Opens `path`, creating a file of `size_bytes` if it does not exist. A plain file is
    /// allocated in full up front (`posix_fallocate`), so the file system cannot run out of
    /// space under a running engine: a full disk shows at open, with a clear error. An existing
    /// file smaller than `size_bytes` is grown the same way; a larger one keeps its size.
    /// `direct` is false only where the file system refuses `O_DIRECT` (tmpfs); without it
    /// every read goes through the page cache already and `read_page_cache` changes nothing.
    pub fn open(path: &Path, size_bytes: u64, direct: bool, read_page_cache: bool) -> io::Result<FileDevice> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let is_block_device = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
        if !is_block_device {
            options.create(true);
        }
        let file = options.open(path)?;
        let size_bytes = if is_block_device {
            block_device_size(&file)?
        } else {
            let current = file.metadata()?.len();
            if current < size_bytes {
                allocate(&file, size_bytes)?;
                size_bytes
            } else {
                current
            }
        };
        let cached = if direct && read_page_cache {
            let cached = File::open(path)?;
            // Records are read at random: read-ahead would fill the cache with their neighbours.
            // SAFETY: a valid open descriptor; the advice covers the whole file.
            let rc = unsafe { libc::posix_fadvise(cached.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Some(cached)
        } else {
            None
        };
        Ok(FileDevice {
            file,
            cached,
            path: path.to_path_buf(),
            size_bytes: size_bytes / IO_ALIGN_BYTES as u64 * IO_ALIGN_BYTES as u64,
        })
    }

    /// Where record reads go: the page-cache descriptor when there is one, else the direct one.
    fn record_file(&self) -> &File {
        self.cached.as_ref().unwrap_or(&self.file)
    }
}

fn allocate(file: &File, size_bytes: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(size_bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "device size too large"))?;
    // SAFETY: a valid open descriptor and a non-negative length.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(()),
        // Some file systems cannot preallocate; fall back to a sparse file.
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(size_bytes),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

fn block_device_size(file: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::End(0))
}

impl Device for FileDevice {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        debug_assert_eq!(buf.as_ptr() as usize % IO_ALIGN_BYTES, 0);
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        debug_assert_eq!(buf.as_ptr() as usize % IO_ALIGN_BYTES, 0);
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }

    fn record_fd(&self) -> Option<std::os::unix::io::RawFd> {
        Some(self.record_file().as_raw_fd())
    }

    fn read_record_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.record_file().read_exact_at(buf, offset)
    }

    fn forget_cached(&self, offset: u64, len: usize) -> bool {
        let Some(cached) = &self.cached else {
            return false;
        };
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return true;
        };
        // SAFETY: a valid open descriptor. Failure leaves the pages cached, which the caller's
        // direct read does not depend on.
        unsafe { libc::posix_fadvise(cached.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED) };
        true
    }
}
