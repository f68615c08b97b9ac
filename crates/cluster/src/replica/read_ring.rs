//! Drives the storage engine's read ring on the node's runtime, so that replica calls can read
//! ahead ([`super::read_ahead`]) instead of blocking a service thread on each device read.

use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use hayate_storage::device::ReadRing;
use hayate_storage::Engine;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

/// Starts the two tasks that drive the engine's ring, if it has one: one submits what was
/// queued, once per turn of the runtime, and one reaps completions. Call on the runtime that
/// serves requests; without this, the engine reads nothing ahead.
pub fn drive_read_ring(engine: &Engine) {
    let Some(ring) = engine.read_ring().cloned() else {
        return;
    };
    // SAFETY: the descriptor is the ring's, and the ring lives as long as the `RingFd` that
    // holds it, so it stays open and the same for the `AsyncFd`'s whole life.
    let registered = unsafe { AsyncFd::register_with_interest(RingFd(ring.clone()), Interest::READABLE) };
    let fd = match registered {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!("device reads block their thread: cannot poll the io_uring ring ({e})");
            return;
        }
    };
    let queued = Arc::new(Notify::new());
    tokio::spawn(submit(ring.clone(), queued.clone()));
    tokio::spawn(reap(fd));
    ring.on_queued(move || queued.notify_one());
}

async fn submit(ring: Arc<ReadRing>, queued: Arc<Notify>) {
    loop {
        queued.notified().await;
        // Requests that are ready to run go first and queue their reads too, so that one
        // system call (and one doorbell of the device) takes the whole batch.
        tokio::task::yield_now().await;
        while let Err(e) = ring.submit() {
            // Reads are waiting on this: try again rather than strand them.
            tracing::warn!("submitting device reads failed ({e}); retrying");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

async fn reap(fd: AsyncFd<RingFd>) {
    loop {
        let Ok(mut ready) = fd.readable().await else {
            tracing::error!("polling the io_uring ring failed; reads ahead can no longer finish");
            return;
        };
        // Cleared before reaping: a completion that lands after the reap makes it readable again.
        ready.clear_ready();
        fd.get_ref().0.reap();
    }
}

/// The ring, polled by its descriptor (which it owns and closes when the last holder goes).
struct RingFd(Arc<ReadRing>);

impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.fd()
    }
}
