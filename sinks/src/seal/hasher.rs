//! The seal's hasher thread: BLAKE3 of each written batch, off the
//! consumer thread.
//!
//! The consumer hands over the buffer it just wrote (with the pieces of
//! it that went to the file, at their file offsets) and takes a spare
//! one back to format the next batch into; the thread hashes the pieces
//! and returns the buffer with their hashes. A fixed set of [`BUFFERS`]
//! jobs circulates over two `crossbeam-channel`s, one message per batch
//! each way: no copy of the batch and, once every buffer has grown to the
//! batch size, no allocation. Jobs come back in the order they were
//! handed over (one thread, FIFO channels), so the chain links in file
//! order.

use std::io;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

/// Buffers in circulation besides the one the consumer fills: at most
/// this many batches are written but not yet hashed.
pub const BUFFERS: usize = 3;

/// Hash function of the thread (BLAKE3; a test gives one that fails).
pub(crate) type HashFn = fn(&[u8]) -> [u8; 32];

/// A piece of a batch written to the file: `len` bytes from `start` of
/// the buffer, at byte `off` of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub off: u64,
    pub start: usize,
    pub len: usize,
}

/// One batch's buffer, its pieces and (back from the thread) their hashes.
#[derive(Debug, Default)]
pub(crate) struct Job {
    pub buf: Vec<u8>,
    pub pieces: Vec<Piece>,
    pub hashes: Vec<[u8; 32]>,
}

/// The hasher thread of one sealed sink and its buffers.
#[derive(Debug)]
pub(crate) struct HashThread {
    to: Option<Sender<Job>>,
    from: Receiver<Job>,
    spare: Vec<Job>,
    in_flight: usize,
    handle: Option<JoinHandle<()>>,
}

/// What a sink says when its hasher thread died.
pub const DIED: &str = "the seal's hasher thread died; the writes it held were sealed from the \
                        file and the sink hashes on its own thread from now on";

/// The error of a hasher that is gone.
pub(crate) fn died() -> io::Error {
    io::Error::other(DIED)
}

impl HashThread {
    /// Starts the thread (`dplog-seal-hash`), pinned to `cpu` when given.
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn spawn(cpu: Option<usize>, hash: HashFn) -> io::Result<Self> {
        let (to, jobs) = crossbeam_channel::bounded::<Job>(BUFFERS);
        let (done, from) = crossbeam_channel::bounded::<Job>(BUFFERS);
        let handle = std::thread::Builder::new()
            .name("dplog-seal-hash".into())
            .spawn(move || {
                if let Some(c) = cpu {
                    // Not pinned is not fatal: the hashes are the same.
                    let _ = dplog_core::affinity::pin_current_thread(c);
                }
                for mut job in jobs {
                    job.hashes.clear();
                    for p in &job.pieces {
                        job.hashes.push(hash(&job.buf[p.start..p.start + p.len]));
                    }
                    if done.send(job).is_err() {
                        return;
                    }
                }
            })?;
        let spare = (0..BUFFERS)
            .map(|_| Job {
                buf: Vec::new(),
                pieces: Vec::with_capacity(4),
                hashes: Vec::with_capacity(4),
            })
            .collect();
        Ok(Self {
            to: Some(to),
            from,
            spare,
            in_flight: 0,
            handle: Some(handle),
        })
    }

    /// Batches handed over and not yet collected.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Hands `buf` (whose `pieces` were written) to the thread and puts a
    /// spare buffer, cleared and with at least `buf`'s capacity, in its
    /// place. A spare is there only when fewer than [`BUFFERS`] batches
    /// are in flight: the caller collects one first
    /// ([`next_done`](Self::next_done)) otherwise.
    ///
    /// # Errors
    /// The thread is gone ([`died`]); `buf` and `pieces` are left as given.
    pub fn hand_over(&mut self, buf: &mut Vec<u8>, pieces: &[Piece]) -> io::Result<()> {
        let Some(mut job) = self.spare.pop() else {
            return Err(io::Error::other("no spare seal buffer (collect one first)"));
        };
        let Some(to) = self.to.as_ref() else {
            self.spare.push(job);
            return Err(died());
        };
        job.pieces.clear();
        job.pieces.extend_from_slice(pieces);
        job.buf.clear();
        if job.buf.capacity() < buf.capacity() {
            // Once per buffer: it grows to the consumer's batch size.
            job.buf.reserve(buf.capacity());
        }
        std::mem::swap(&mut job.buf, buf);
        match to.send(job) {
            Ok(()) => {
                self.in_flight += 1;
                Ok(())
            }
            Err(e) => {
                let mut job = e.into_inner();
                std::mem::swap(&mut job.buf, buf);
                self.spare.push(job);
                Err(died())
            }
        }
    }

    /// Whether a spare buffer is at hand.
    pub fn has_spare(&self) -> bool {
        !self.spare.is_empty()
    }

    /// The oldest job in flight once hashed: `wait` blocks for it, else
    /// `None` when it is not done yet (or none is in flight). The caller
    /// links its hashes, then gives it back with [`recycle`](Self::recycle).
    ///
    /// # Errors
    /// The thread is gone ([`died`]): the jobs in flight are lost (their
    /// bytes are in the file, to be sealed from there).
    pub fn next_done(&mut self, wait: bool) -> io::Result<Option<Job>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        let r = if wait {
            self.from.recv().map_err(|_| ())
        } else {
            match self.from.try_recv() {
                Ok(j) => Ok(j),
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => Err(()),
            }
        };
        match r {
            Ok(j) => {
                self.in_flight -= 1;
                Ok(Some(j))
            }
            Err(()) => {
                self.in_flight = 0;
                self.to = None;
                Err(died())
            }
        }
    }

    /// Returns a collected job's buffer to the spares.
    pub fn recycle(&mut self, job: Job) {
        self.spare.push(job);
    }

    /// Stops the thread (after the jobs in flight) and waits for it.
    pub fn stop(&mut self) {
        self.to = None;
        while self.from.recv().is_ok() {}
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for HashThread {
    fn drop(&mut self) {
        // Closing the channel ends the thread; it is not waited for.
        self.to = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blake(b: &[u8]) -> [u8; 32] {
        *blake3::hash(b).as_bytes()
    }

    #[test]
    fn buffers_go_round_and_come_back_hashed_in_order_without_copies() {
        let mut t = HashThread::spawn(None, blake).unwrap();
        let mut buf = Vec::with_capacity(1024);
        let mut seen = Vec::new();
        for i in 0..10u8 {
            buf.clear();
            buf.extend_from_slice(&[i; 100]);
            let ptr = buf.as_ptr();
            if !t.has_spare() {
                let j = t.next_done(true).unwrap().unwrap();
                seen.push((j.buf[0], j.hashes.clone(), j.buf.as_ptr()));
                t.recycle(j);
            }
            let pieces = [Piece {
                off: u64::from(i) * 100,
                start: 10,
                len: 90,
            }];
            t.hand_over(&mut buf, &pieces).unwrap();
            // The spare given back is empty and as large.
            assert!(buf.is_empty() && buf.capacity() >= 1024);
            assert_ne!(buf.as_ptr(), ptr);
        }
        while let Some(j) = t.next_done(true).unwrap() {
            seen.push((j.buf[0], j.hashes.clone(), j.buf.as_ptr()));
            t.recycle(j);
        }
        assert_eq!(seen.len(), 10);
        for (i, (first, hashes, _)) in seen.iter().enumerate() {
            assert_eq!(*first as usize, i, "out of order");
            assert_eq!(hashes, &vec![blake(&[i as u8; 90])]);
        }
        // Only BUFFERS + 1 distinct buffers ever held the batches.
        let mut ptrs: Vec<_> = seen.iter().map(|s| s.2).collect();
        ptrs.sort();
        ptrs.dedup();
        assert!(ptrs.len() <= BUFFERS + 1, "{} buffers", ptrs.len());
        t.stop();
    }

    #[test]
    fn a_thread_that_dies_is_an_error_not_a_hang() {
        fn boom(b: &[u8]) -> [u8; 32] {
            assert!(b[0] != 7, "hasher fails on purpose");
            *blake3::hash(b).as_bytes()
        }
        let mut t = HashThread::spawn(None, boom).unwrap();
        let mut buf = vec![1u8; 10];
        let p = [Piece {
            off: 0,
            start: 0,
            len: 10,
        }];
        t.hand_over(&mut buf, &p).unwrap();
        let j = t.next_done(true).unwrap().unwrap();
        t.recycle(j);
        let mut buf = vec![7u8; 10];
        t.hand_over(&mut buf, &p).unwrap();
        let e = t.next_done(true).unwrap_err();
        assert!(e.to_string().contains("hasher thread died"), "{e}");
        assert_eq!(t.in_flight(), 0);
        // Later hand-overs fail at once and leave the buffer as given.
        let mut buf = vec![3u8; 10];
        let e = t.hand_over(&mut buf, &p).unwrap_err();
        assert!(e.to_string().contains("died"), "{e}");
        assert_eq!(buf, vec![3u8; 10]);
    }
}
