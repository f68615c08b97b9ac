//! The device under test: a raw block device or a file, opened with `O_DIRECT` so that every
//! read and write reaches the device rather than the page cache.
//!
//! The test talks to it through [`Device`], so that the load generator can be run against a
//! slow or failing device in tests.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Direct I/O needs buffers, offsets and sizes aligned to the logical block size; 4096 covers
/// every device we know of.
pub const IO_ALIGN_BYTES: usize = 4096;
/// ACT probes the smallest direct read a device accepts, from 512 to 4096 bytes.
const MIN_OP_BYTES_PROBE: [u32; 4] = [512, 1024, 2048, 4096];
/// Files are filled in chunks of this size when they are created.
const FILL_CHUNK_BYTES: usize = 1024 * 1024;

pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    fn size_bytes(&self) -> u64;
    /// The smallest direct I/O the device accepts; offsets and sizes are multiples of it.
    fn min_op_bytes(&self) -> u32;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()>;
}

#[derive(Debug)]
#[non_exhaustive]
pub enum DeviceError {
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    /// EINVAL on open with O_DIRECT: the file system (tmpfs, some FUSE and overlay mounts)
    /// cannot do direct I/O.
    DirectIoUnsupported {
        path: PathBuf,
    },
    Empty {
        path: PathBuf,
    },
    TooSmall {
        path: PathBuf,
        size_bytes: u64,
    },
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::Open { path, source } => write!(
                f,
                "cannot open device {}: {source}; check the path in device-names and that \
                 you may read and write it (raw devices usually need root)",
                path.display()
            ),
            DeviceError::DirectIoUnsupported { path } => write!(
                f,
                "cannot open {} with O_DIRECT (EINVAL): its file system does not support direct \
                 I/O (tmpfs does not, and /tmp often is tmpfs); put the file on a disk file \
                 system such as ext4 or xfs, or name a raw device",
                path.display()
            ),
            DeviceError::Empty { path } => write!(
                f,
                "device {} has size 0; for a plain file, set file-size-mbytes",
                path.display()
            ),
            DeviceError::TooSmall { path, size_bytes } => write!(
                f,
                "device {} ({size_bytes} bytes) is smaller than one large block",
                path.display()
            ),
            DeviceError::Io { path, what, source } => {
                write!(f, "{what} on {} failed: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeviceError::Open { source, .. } | DeviceError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A heap buffer whose usable part starts on a 4096-byte boundary, as O_DIRECT requires.
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        let storage = vec![0u8; len + IO_ALIGN_BYTES];
        let start = storage.as_ptr().align_offset(IO_ALIGN_BYTES);
        assert!(start < IO_ALIGN_BYTES, "a u8 pointer can always be aligned");
        AlignedBuf { storage, start, len }
    }

    pub fn as_slice(&self, len: usize) -> &[u8] {
        assert!(len <= self.len);
        &self.storage[self.start..self.start + len]
    }

    pub fn as_mut_slice(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len);
        &mut self.storage[self.start..self.start + len]
    }
}

/// A device or file opened for direct I/O.
pub struct FileDevice {
    name: String,
    file: File,
    size_bytes: u64,
    min_op_bytes: u32,
}

/// How the device should be opened, from the config.
#[derive(Debug, Clone, Copy)]
pub struct OpenSpec {
    /// Non-zero: a file, created and filled to this size if it is smaller.
    pub file_size_bytes: u64,
    /// O_DSYNC on every write, unless `disable-odsync`.
    pub dsync: bool,
    /// The device must hold at least one of these.
    pub large_block_bytes: u64,
}

impl FileDevice {
    /// Opens (and for a file, creates and fills) the device. `progress` hears about a fill,
    /// which takes a while for a large file.
    pub fn open(
        path: &Path,
        spec: OpenSpec,
        progress: &mut dyn FnMut(&str),
    ) -> Result<FileDevice, DeviceError> {
        if spec.file_size_bytes != 0 {
            prepare_file(path, spec.file_size_bytes, progress)?;
        }
        let mut flags = libc::O_DIRECT;
        if spec.dsync {
            flags |= libc::O_DSYNC;
        }
        let mut file = open_direct(path, flags, false)?;
        let size_bytes = if spec.file_size_bytes != 0 {
            spec.file_size_bytes
        } else {
            // Works for block devices as well as files, without an ioctl.
            file.seek(SeekFrom::End(0)).map_err(|source| DeviceError::Io {
                path: path.to_path_buf(),
                what: "finding the size",
                source,
            })?
        };
        if size_bytes == 0 {
            return Err(DeviceError::Empty {
                path: path.to_path_buf(),
            });
        }
        if size_bytes < spec.large_block_bytes {
            return Err(DeviceError::TooSmall {
                path: path.to_path_buf(),
                size_bytes,
            });
        }
        let min_op_bytes = discover_min_op_bytes(&file, path)?;
        Ok(FileDevice {
            name: path.display().to_string(),
            file,
            size_bytes,
            min_op_bytes,
        })
    }
}

impl Device for FileDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn min_op_bytes(&self) -> u32 {
        self.min_op_bytes
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
}

fn open_direct(path: &Path, flags: i32, create: bool) -> Result<File, DeviceError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .custom_flags(flags)
        .open(path)
        .map_err(|source| {
            if source.raw_os_error() == Some(libc::EINVAL) {
                DeviceError::DirectIoUnsupported {
                    path: path.to_path_buf(),
                }
            } else {
                DeviceError::Open {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })
}

/// Creates the file if needed and writes every byte up to `size_bytes`. ACT only truncates the
/// file to size, but reads of a sparse file (or of preallocated, unwritten extents) are
/// answered by the file system without touching the disk, which would flatter the device.
fn prepare_file(path: &Path, size_bytes: u64, progress: &mut dyn FnMut(&str)) -> Result<(), DeviceError> {
    let io = |what: &'static str| {
        let path = path.to_path_buf();
        move |source| DeviceError::Io { path, what, source }
    };
    // The file is the tool's to make, and so is its folder (bench/act/act-file.conf names one
    // under target/ that a fresh checkout does not have).
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(io("creating the file's folder"))?;
    }
    let file = open_direct(path, libc::O_DIRECT, true)?;
    let existing_bytes = file.metadata().map_err(io("reading metadata"))?.len();
    if existing_bytes >= size_bytes {
        progress(&format!(
            "{}: using the existing {} MiB of the file",
            path.display(),
            size_bytes >> 20
        ));
        return Ok(());
    }
    // Start at the last whole chunk so that every write stays aligned.
    let start = existing_bytes / FILL_CHUNK_BYTES as u64 * FILL_CHUNK_BYTES as u64;
    progress(&format!(
        "{}: filling the file from {} to {} MiB so that reads reach the disk",
        path.display(),
        start >> 20,
        size_bytes >> 20
    ));
    let mut buf = AlignedBuf::new(FILL_CHUNK_BYTES);
    let mut salt = 0x9e37_79b9_7f4a_7c15_u64;
    let mut offset = start;
    while offset < size_bytes {
        let len = (size_bytes - offset).min(FILL_CHUNK_BYTES as u64) as usize;
        // Aligned lengths only: file-size-mbytes is whole MiB, so only the last chunk is short.
        let len = len.div_ceil(IO_ALIGN_BYTES) * IO_ALIGN_BYTES;
        let chunk = buf.as_mut_slice(len);
        for word in chunk.chunks_exact_mut(8) {
            // xorshift: incompressible, so a compressing device cannot shortcut the fill.
            salt ^= salt << 13;
            salt ^= salt >> 7;
            salt ^= salt << 17;
            word.copy_from_slice(&salt.to_le_bytes());
        }
        file.write_all_at(buf.as_slice(len), offset)
            .map_err(io("filling the file"))?;
        offset += len as u64;
    }
    file.sync_all().map_err(io("syncing the filled file"))?;
    Ok(())
}

fn discover_min_op_bytes(file: &File, path: &Path) -> Result<u32, DeviceError> {
    let mut buf = AlignedBuf::new(IO_ALIGN_BYTES);
    let mut last_error = None;
    for size in MIN_OP_BYTES_PROBE {
        match file.read_exact_at(buf.as_mut_slice(size as usize), 0) {
            Ok(()) => return Ok(size),
            Err(error) => last_error = Some(error),
        }
    }
    Err(DeviceError::Io {
        path: path.to_path_buf(),
        what: "a direct read of 512 to 4096 bytes",
        source: last_error.unwrap_or_else(|| std::io::Error::other("no read size worked")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_start_on_a_page_boundary() {
        for len in [1, 512, 4096, 128 * 1024] {
            let mut buf = AlignedBuf::new(len);
            let slice = buf.as_mut_slice(len);
            assert_eq!(slice.as_ptr() as usize % IO_ALIGN_BYTES, 0);
            assert_eq!(slice.len(), len);
        }
    }
}
