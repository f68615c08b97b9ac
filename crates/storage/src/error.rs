//! Errors, one type per operation, each saying what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::format::DecodeError;

#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    Config(String),
    Device {
        path: PathBuf,
        source: io::Error,
    },
    /// Another process has the device open.
    DeviceInUse {
        path: PathBuf,
    },
    /// The write buffer could not be replayed or created; the message says what to do.
    WriteBuffer(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Config(msg) => write!(f, "invalid namespace configuration: {msg}"),
            OpenError::Device { path, source } => write!(
                f,
                "cannot open device {}: {source} (check the path, its permissions and the free space of its file system)",
                path.display()
            ),
            OpenError::DeviceInUse { path } => write!(
                f,
                "device {} is in use by another process (is another hayate running on the same data?)",
                path.display()
            ),
            OpenError::WriteBuffer(msg) => write!(f, "write buffer: {msg}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Device { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// Fewer free blocks than the stop-writes reserve: nothing was written.
    DeviceFull {
        free_blocks: u64,
        total_blocks: u64,
    },
    KeyTooLarge {
        bytes: usize,
        max_bytes: usize,
    },
    RecordTooLarge {
        bytes: usize,
        max_bytes: usize,
    },
    /// The device failed; the write may or may not be durable.
    Io {
        device: String,
        source: io::Error,
    },
    /// The partition holds as many distinct range tombstones as it may.
    TooManyRangeTombstones {
        ranges: usize,
        max: usize,
    },
    /// The previous version of the row could not be read, so it was not merged.
    Read(ReadError),
    /// The engine is shutting down.
    Closed,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::DeviceFull {
                free_blocks,
                total_blocks,
            } => write!(
                f,
                "device full: {free_blocks} of {total_blocks} write blocks free, below the stop-writes reserve; \
                 reads still work; delete data, lower TTLs, or add a device"
            ),
            WriteError::KeyTooLarge { bytes, max_bytes } => {
                write!(f, "key of {bytes} bytes is larger than the {max_bytes}-byte limit")
            }
            WriteError::RecordTooLarge { bytes, max_bytes } => write!(
                f,
                "row of {bytes} bytes does not fit in a write block ({max_bytes} bytes usable); \
                 store less per row or raise block_size_bytes"
            ),
            WriteError::Io { device, source } => write!(
                f,
                "write to device {device} failed: {source}; the write may not be durable, check the device"
            ),
            WriteError::Read(e) => write!(f, "cannot read the current version of the row: {e}"),
            WriteError::TooManyRangeTombstones { ranges, max } => write!(
                f,
                "the partition would hold {ranges} range tombstones, more than the {max} allowed; \
                 delete the whole partition or wider ranges instead"
            ),
            WriteError::Closed => write!(f, "the storage engine is shutting down"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Io { source, .. } => Some(source),
            WriteError::Read(e) => Some(e),
            _ => None,
        }
    }
}

#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    Io {
        device: String,
        source: io::Error,
    },
    /// The record the index points to does not decode: the device returned damaged data.
    Corrupt {
        device: String,
        block: u32,
        offset: u32,
        detail: DecodeError,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { device, source } => write!(f, "read from device {device} failed: {source}"),
            ReadError::Corrupt {
                device,
                block,
                offset,
                detail,
            } => write!(
                f,
                "corrupt record on device {device}, block {block}, offset {offset}: {detail}; \
                 the row is unreadable on this node (repair it from a replica)"
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Corrupt { detail, .. } => Some(detail),
        }
    }
}
