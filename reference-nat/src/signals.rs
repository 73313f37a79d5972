//! SIGINT and SIGTERM: the first stops the input and lets the run finish
//! cleanly; the second ends the process at once, after one line on stderr
//! saying what it loses.
//!
//! The signal handler does only async-signal-safe work: an atomic add, a
//! one-byte `write(2)` to a socket (signal-hook's self-pipe), and on a
//! third signal `_exit(2)`. A watcher thread, started with the handlers
//! and blocked reading that socket, does the rest: on the first byte it
//! sets the stop flag ([`crate::app::request_stop`]) and writes
//! [`FIRST_SIGNAL_NOTE`] to stderr; on the second it
//! reads the logger's counters and the workers' session tallies (atomics,
//! see [`watch`]), writes [`loss_line`] to stderr and calls `_exit(130)`.
//! The third signal exits in the handler itself, should the watcher be
//! unable to (e.g. stderr is a pipe nobody reads).

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dplog::nat::NatRecord;
use dplog::{SnapshotSource, Stats};

/// Exit status of a process ended by a second SIGINT/SIGTERM.
pub const SECOND_SIGNAL_EXIT: i32 = 130;

/// The line the first SIGINT/SIGTERM writes to stderr once the stop flag
/// is set.
pub const FIRST_SIGNAL_NOTE: &str = "dplog-nat: stop signal received: input stopped, finishing the run \
     (live sessions deleted and logged); a second SIGINT/SIGTERM exits at once and loses what is not yet written";

/// One worker's count of session creates and deletes it handed to its
/// dplog ring (enqueued), stored by the worker's [`RingLog`] at each
/// publication of its ring index and before it waits on a full ring;
/// read by the second-signal watcher.
///
/// [`RingLog`]: crate::RingLog
#[derive(Debug, Default)]
pub struct SessionTally {
    creates: AtomicU64,
    deletes: AtomicU64,
}

impl SessionTally {
    /// Stores the worker's totals (called by the worker only).
    pub fn store(&self, creates: u64, deletes: u64) {
        // Relaxed: single-writer statistic; the partner is the Relaxed
        // load in `open_sessions`, which may see a slightly older value.
        self.creates.store(creates, Ordering::Relaxed);
        self.deletes.store(deletes, Ordering::Relaxed);
    }

    /// Session creates handed to the ring without their delete: sessions
    /// still open in the NAT, or deleted with the delete record not yet
    /// handed over.
    pub fn open_sessions(&self) -> u64 {
        // Relaxed: see `store`.
        let d = self.deletes.load(Ordering::Relaxed);
        let c = self.creates.load(Ordering::Relaxed);
        c.saturating_sub(d)
    }
}

/// What the second-signal watcher reads: the running logger's counters
/// and each worker's session tally.
#[derive(Debug)]
pub struct LossView {
    /// The logger's counters.
    pub stats: SnapshotSource<NatRecord>,
    /// One tally per worker.
    pub sessions: Arc<Vec<SessionTally>>,
}

/// The view of the running logger, set by the run while its logger is up
/// ([`watch`]) and cleared when the logger has shut down ([`unwatch`]).
static VIEW: Mutex<Option<LossView>> = Mutex::new(None);

/// Signals received (SIGINT and SIGTERM together), counted in the handler.
static RECEIVED: AtomicUsize = AtomicUsize::new(0);

/// Lets the second-signal watcher read `view` until [`unwatch`].
pub fn watch(view: LossView) {
    *VIEW.lock().unwrap_or_else(|e| e.into_inner()) = Some(view);
}

/// The logger has shut down: a second signal now loses nothing logged.
pub fn unwatch() {
    *VIEW.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// The line a second signal writes before the process ends: what the
/// logger (`stats`, `None` when none is running: not started yet, logging
/// off, or already shut down) still holds and will never write, and how
/// many session creates were handed to the logger without their delete
/// (`open_sessions`, from the workers' [`SessionTally`]s; left out when
/// `None`: the workers keep no tally).
///
/// The records lost are those in rings (`enqueued - dequeued`), read by
/// the consumer but not yet written (in its batch buffer or reorder
/// window, or in the write the sink is blocked in: part of that batch may
/// have reached the output), and accepted by an asynchronous sink without
/// an acknowledgement (`sink_pending`). With `produced` and `written`,
/// `produced = written + lost + every drop counted so far`.
pub fn loss_line(stats: Option<&Stats>, open_sessions: Option<u64>) -> String {
    let Some(s) = stats else {
        return format!(
            "dplog-nat: second signal, exiting at once (status {SECOND_SIGNAL_EXIT}): no logger running, no log record lost"
        );
    };
    let in_rings = s.enqueued.saturating_sub(s.dequeued);
    let settled =
        s.written_records + s.dropped_format + s.dropped_sink + s.dropped_shutdown + s.sink_pending;
    let in_consumer = s.dequeued.saturating_sub(settled);
    let lost = in_rings + in_consumer + s.sink_pending;
    let dropped = s.dropped() + s.dropped_format + s.dropped_sink + s.dropped_shutdown;
    let mut line = format!(
        "dplog-nat: second signal, exiting at once (status {SECOND_SIGNAL_EXIT}): {lost} log records lost \
         ({in_rings} in rings, {in_consumer} read by the consumer but not written, {} awaiting the sink's \
         acknowledgement) of {} produced, {} written, {dropped} dropped before",
        s.sink_pending, s.produced, s.written_records
    );
    if let Some(open) = open_sessions {
        line.push_str(&format!(
            "; {open} sessions created have no delete record handed to the logger"
        ));
    }
    line
}

/// Installs the SIGINT and SIGTERM handlers and starts their watcher
/// thread (see the module docs). Call once, before anything that a
/// signal must be able to stop.
///
/// Errors: the socket pair, a handler or the thread could not be created.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let (mut rx, tx) = UnixStream::pair()?;
    for sig in [SIGINT, SIGTERM] {
        // Registered first, so it runs before the wake-up write.
        // SAFETY: the action is async-signal-safe: one atomic add and, on
        // the third signal, `_exit(2)` (signal_hook::low_level::exit); it
        // takes no lock and allocates nothing.
        #[allow(unsafe_code)]
        unsafe {
            signal_hook::low_level::register(sig, || {
                // SeqCst: the only access; no other memory depends on it.
                if RECEIVED.fetch_add(1, Ordering::SeqCst) + 1 >= 3 {
                    signal_hook::low_level::exit(SECOND_SIGNAL_EXIT);
                }
            })?;
        }
        // One byte per signal on the socket, written with a non-blocking
        // send(2) from the handler.
        signal_hook::low_level::pipe::register(sig, tx.try_clone()?)?;
    }
    std::thread::Builder::new()
        .name("dplog-nat-signals".into())
        .spawn(move || {
            let mut seen = 0u32;
            let mut byte = [0u8; 1];
            loop {
                match rx.read(&mut byte) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                }
                seen += 1;
                if seen == 1 {
                    crate::app::request_stop();
                    crate::diag!("{FIRST_SIGNAL_NOTE}");
                } else {
                    second_signal();
                }
            }
        })?;
    Ok(())
}

/// Writes [`loss_line`] from the current counters and ends the process
/// with [`SECOND_SIGNAL_EXIT`], without unwinding or flushing anything
/// else (`_exit(2)`).
fn second_signal() -> ! {
    // try_lock: the view is locked only to be set or cleared, briefly; a
    // line without counters beats no exit.
    let line = match VIEW.try_lock().as_deref() {
        Ok(Some(v)) => {
            let open = (!v.sessions.is_empty())
                .then(|| v.sessions.iter().map(SessionTally::open_sessions).sum());
            loss_line(Some(&v.stats.stats()), open)
        }
        _ => loss_line(None, None),
    };
    crate::diag!("{line}");
    signal_hook::low_level::exit(SECOND_SIGNAL_EXIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_line_counts_each_place_a_record_waits() {
        let s = Stats {
            produced: 5000,
            enqueued: 4990,
            dropped_full: 10,
            dequeued: 3000,
            written_records: 2000,
            sink_pending: 300,
            dropped_sink: 100,
            ..Default::default()
        };
        // In rings 1990; the consumer read 3000: 2000 written, 100 refused,
        // 300 pending, so 600 in its batch; lost 1990 + 600 + 300.
        assert_eq!(
            loss_line(Some(&s), Some(42)),
            "dplog-nat: second signal, exiting at once (status 130): 2890 log records lost (1990 in rings, \
             600 read by the consumer but not written, 300 awaiting the sink's acknowledgement) of 5000 \
             produced, 2000 written, 110 dropped before; 42 sessions created have no delete record handed \
             to the logger"
        );
        assert_eq!(2890 + 2000 + 110, s.produced);
        assert!(loss_line(None, None).ends_with("no logger running, no log record lost"));
        assert!(loss_line(Some(&s), None).ends_with("2000 written, 110 dropped before"));
        let t = SessionTally::default();
        t.store(10, 4);
        assert_eq!(t.open_sessions(), 6);
    }
}
