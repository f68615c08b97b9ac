//! Device reads through io_uring: started without a system call each, submitted in batches,
//! and completed without a thread waiting on any of them.
//!
//! A blocking `pread` costs its thread a sleep and a wake-up per read, and the device a doorbell
//! per read; on a virtual machine the doorbell is a trap to the hypervisor. Reads started here
//! are queued in the ring's submission queue; whoever drives the ring (the server's runtime)
//! submits everything queued in one `io_uring_enter`, which the block layer turns into one
//! doorbell for the batch, and reaps completions when the ring's descriptor is readable,
//! waking each read's task. The storage engine stays free of any async runtime: [`RingRead`]
//! is a plain `Future`, and the driver needs only [`ReadRing::submit`], [`ReadRing::reap`] and
//! the descriptor to poll.

use std::future::Future;
use std::io;
use std::os::unix::io::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, types, IoUring};

use super::AlignedBuf;

/// Reads the ring holds at once; more wait for a slot (see [`ReadRing::start`]).
const RING_ENTRIES: u32 = 256;

pub struct ReadRing {
    /// Outside the lock: [`ReadRing::submit`] makes its system call without holding it, so a
    /// thread starting or finishing a read never sleeps while another's submission rings the
    /// device's doorbell (on a virtual machine, an exit to the hypervisor).
    ring: IoUring,
    /// The slots, and the sole right to touch the submission and completion queues.
    state: Mutex<State>,
    fd: RawFd,
    /// Called when a read is queued into an empty batch: the driver should submit soon.
    on_queued: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// A driver is attached ([`ReadRing::on_queued`]); until then no read may start, since
    /// nothing would submit it or reap it.
    driven: AtomicBool,
}

struct State {
    /// One slot per read in the ring, by `user_data`.
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Reads queued since the last submit.
    queued: usize,
}

#[derive(Default)]
enum Slot {
    #[default]
    Free,
    /// In the ring: the kernel writes into `buf` until the completion comes.
    Reading {
        buf: AlignedBuf,
        waker: Option<Waker>,
    },
    Done {
        buf: AlignedBuf,
        result: io::Result<()>,
    },
    /// Its future was dropped before the completion: the buffer is kept until then.
    Abandoned {
        _buf: AlignedBuf,
    },
}

impl ReadRing {
    /// A ring, or the reason there is none (io_uring disabled or refused by a seccomp filter):
    /// the engine then reads with `pread`.
    pub fn new() -> io::Result<ReadRing> {
        let ring = IoUring::new(RING_ENTRIES)?;
        let fd = ring.as_raw_fd();
        Ok(ReadRing {
            ring,
            state: Mutex::new(State {
                slots: (0..RING_ENTRIES).map(|_| Slot::Free).collect(),
                free: (0..RING_ENTRIES).rev().collect(),
                queued: 0,
            }),
            fd,
            on_queued: Mutex::new(None),
            driven: AtomicBool::new(false),
        })
    }

    /// The descriptor to poll: readable when completions are waiting to be reaped.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Attaches a driver: `f` is called when a read is queued into an empty batch, and the
    /// driver then calls [`ReadRing::submit`]; it calls [`ReadRing::reap`] whenever
    /// [`ReadRing::fd`] is readable.
    pub fn on_queued(&self, f: impl Fn() + Send + Sync + 'static) {
        *self.on_queued.lock().expect("ring lock poisoned") = Some(Box::new(f));
        self.driven.store(true, Ordering::Release);
    }

    /// True once a driver is attached.
    pub fn is_driven(&self) -> bool {
        self.driven.load(Ordering::Acquire)
    }

    /// Starts a read of `len` bytes at `offset` of `fd` (both aligned for `O_DIRECT`), or
    /// `None` when every slot is taken: the caller then reads the way it would without a ring.
    pub fn start(self: &Arc<Self>, fd: RawFd, offset: u64, len: usize) -> Option<RingRead> {
        let mut buf = AlignedBuf::zeroed(len);
        let first_in_batch;
        let id = {
            let mut state = self.state.lock().expect("ring lock poisoned");
            let id = state.free.pop()?;
            let entry = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), len as u32)
                .offset(offset)
                .build()
                .user_data(u64::from(id));
            // SAFETY: the buffer is kept in its slot until the completion for `id` is reaped,
            // whatever happens to the future, and the descriptor outlives the engine's reads.
            // The submission queue is only touched under the state lock, which this holds.
            let pushed = unsafe { self.ring.submission_shared().push(&entry) };
            if pushed.is_err() {
                // The submission queue is full of queued reads: send them, then queue this one.
                if self.ring.submit().is_err()
                    || unsafe { self.ring.submission_shared().push(&entry) }.is_err()
                {
                    state.free.push(id);
                    return None;
                }
                state.queued = 0;
            }
            state.slots[id as usize] = Slot::Reading { buf, waker: None };
            first_in_batch = state.queued == 0;
            state.queued += 1;
            id
        };
        if first_in_batch {
            if let Some(f) = &*self.on_queued.lock().expect("ring lock poisoned") {
                f();
            }
        }
        Some(RingRead {
            ring: self.clone(),
            id,
            finished: false,
        })
    }

    /// Submits every queued read in one system call, made without the lock: the kernel takes
    /// what the queue's tail, published at each push, shows at that moment, including reads
    /// queued meanwhile.
    pub fn submit(&self) -> io::Result<usize> {
        {
            let mut state = self.state.lock().expect("ring lock poisoned");
            if state.queued == 0 {
                return Ok(0);
            }
            state.queued = 0;
        }
        self.ring.submit()
    }

    /// Takes every completion there is and wakes the reads' tasks; returns how many.
    pub fn reap(&self) -> usize {
        let mut wake = Vec::new();
        let mut n = 0;
        {
            let mut state = self.state.lock().expect("ring lock poisoned");
            let State { slots, free, .. } = &mut *state;
            // SAFETY: the completion queue is only touched under the state lock, held here.
            for cqe in unsafe { self.ring.completion_shared() } {
                let (id, rc) = (cqe.user_data(), cqe.result());
                n += 1;
                let slot = &mut slots[id as usize];
                match std::mem::take(slot) {
                    Slot::Reading { buf, waker } => {
                        let result = match rc {
                            rc if rc < 0 => Err(io::Error::from_raw_os_error(-rc)),
                            rc if rc as usize != buf.len() => Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                format!("short read: {rc} of {} bytes", buf.len()),
                            )),
                            _ => Ok(()),
                        };
                        *slot = Slot::Done { buf, result };
                        wake.extend(waker);
                    }
                    Slot::Abandoned { .. } => free.push(id as u32),
                    other => *slot = other,
                }
            }
        }
        for w in wake {
            w.wake();
        }
        n
    }
}

/// One read in the ring; resolves to the bytes read.
pub struct RingRead {
    ring: Arc<ReadRing>,
    id: u32,
    finished: bool,
}

impl Future for RingRead {
    type Output = io::Result<AlignedBuf>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.ring.state.lock().expect("ring lock poisoned");
        let id = self.id as usize;
        match &mut state.slots[id] {
            Slot::Reading { waker, .. } => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Slot::Done { .. } => {
                let Slot::Done { buf, result } = std::mem::take(&mut state.slots[id]) else {
                    unreachable!("just matched");
                };
                state.free.push(self.id);
                drop(state);
                self.finished = true;
                Poll::Ready(result.map(|()| buf))
            }
            Slot::Free | Slot::Abandoned { .. } => unreachable!("a read's slot is its own until it finishes"),
        }
    }
}

impl Drop for RingRead {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut state = self.ring.state.lock().expect("ring lock poisoned");
        let id = self.id as usize;
        match std::mem::take(&mut state.slots[id]) {
            Slot::Reading { buf, .. } => state.slots[id] = Slot::Abandoned { _buf: buf },
            Slot::Done { .. } => state.free.push(self.id),
            other => state.slots[id] = other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Polls `f` to the end, submitting and reaping the ring by hand as a driver would.
    fn run(ring: &ReadRing, mut f: RingRead) -> io::Result<AlignedBuf> {
        let flag = Arc::new(Flag(Default::default()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(r) = Pin::new(&mut f).poll(&mut cx) {
                return r;
            }
            ring.submit().expect("submit");
            while ring.reap() == 0 {
                std::thread::yield_now();
            }
            assert!(
                flag.0.load(std::sync::atomic::Ordering::SeqCst),
                "a completion wakes its read"
            );
        }
    }

    #[test]
    fn reads_what_the_file_holds_and_reports_a_short_read() {
        let Ok(ring) = ReadRing::new().map(Arc::new) else {
            eprintln!("io_uring is not available here; nothing to test");
            return;
        };
        let mut file = tempfile::tempfile().expect("temp file");
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).expect("write");
        let fd = file.as_raw_fd();
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let q = queued.clone();
        ring.on_queued(move || {
            q.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        // Two reads queued together are one batch.
        let a = ring.start(fd, 4096, 8192).expect("a free slot");
        let b = ring.start(fd, 0, 4096).expect("a free slot");
        assert_eq!(queued.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(&run(&ring, a).expect("read")[..], &data[4096..]);
        assert_eq!(&run(&ring, b).expect("read")[..], &data[..4096]);
        // Past the end of the file: an error, not stale bytes.
        let past = ring.start(fd, 8192, 8192).expect("a free slot");
        assert!(run(&ring, past).is_err());
        // A read dropped before it completes keeps its buffer until the completion, and its
        // slot comes back after.
        for _ in 0..3 * RING_ENTRIES {
            drop(ring.start(fd, 0, 4096));
            ring.submit().expect("submit");
            ring.reap();
        }
        while ring.state.lock().expect("lock").free.len() < RING_ENTRIES as usize {
            ring.reap();
        }
    }
}
