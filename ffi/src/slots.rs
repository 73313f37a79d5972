//! The ring slot size a logger runs with (`[ring] slot_bytes`: 32, 64 or
//! 128 bytes): the loggers and producers of one handle are all of one
//! slot type, held in an enum ([`AnyLogger`], [`AnyProducer`]) so the rest
//! of the crate is written once. The fast path of `dplog_log` matches the
//! variant once and then works on the concrete slot type.

use dplog::formatters::SchemaFormatter;
use dplog::shm::ShmLogProducer;
use dplog::sinks::BoxSink;
use dplog::{
    Backpressure, DropReport, Formatter, LogProducer, Logger, LoggerConfig, LoggerError, Slot,
    Slot128, Slot32, Slot64, Snapshot, Stats,
};

use crate::types::DPLOG_RECORD_MAX_SIZE;

/// What the freed producers of attached rings counted (dplogd, not this
/// handle, writes their records).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AttachedCounts {
    /// Records pushed into the rings.
    pub(crate) enqueued: u64,
    /// Records dropped, by reason.
    pub(crate) dropped_full: u64,
    pub(crate) dropped_degraded: u64,
    pub(crate) dropped_disconnected: u64,
    pub(crate) dropped_stopped: u64,
    /// Rings attached and freed.
    pub(crate) rings: u64,
}

/// Slot size in bytes of `[ring] slot_bytes` (unset: 64). The value is
/// checked at `dplog_open` (32, 64 or 128).
pub(crate) fn slot_bytes_of(cfg: &dplog::config::LogConfig) -> usize {
    cfg.ring
        .slot_bytes
        .unwrap_or(crate::types::DPLOG_SLOT_BYTES_DEFAULT)
}

/// One consumer (thread, formatter, sink) of a handle.
pub(crate) enum AnyLogger {
    S32(Logger<Slot32>),
    S64(Logger<Slot64>),
    S128(Logger<Slot128>),
}

/// One producer's ring, of its logger's slot type.
pub(crate) enum AnyProducer {
    S32(LogProducer<Slot32>),
    S64(LogProducer<Slot64>),
    S128(LogProducer<Slot128>),
    /// A shared-memory ring that another process (dplogd) drains
    /// (`dplog_attach`): no inline window, no zero-copy reservation (the
    /// staging path serves `dplog_reserve`).
    M32(ShmLogProducer<Slot32>),
    M64(ShmLogProducer<Slot64>),
    M128(ShmLogProducer<Slot128>),
}

/// `match` over every producer variant with the same expression (the
/// in-process and shared-memory producers share these method names).
macro_rules! each_producer {
    ($v:expr, $x:ident => $e:expr) => {
        match $v {
            AnyProducer::S32($x) => $e,
            AnyProducer::S64($x) => $e,
            AnyProducer::S128($x) => $e,
            AnyProducer::M32($x) => $e,
            AnyProducer::M64($x) => $e,
            AnyProducer::M128($x) => $e,
        }
    };
}

/// The burst call both producer kinds have.
trait LogBurst<S> {
    fn log_burst_of(&mut self, recs: &[S]) -> usize;
}

impl<S: Slot> LogBurst<S> for LogProducer<S> {
    fn log_burst_of(&mut self, recs: &[S]) -> usize {
        self.log_burst(recs)
    }
}

impl<S: Slot> LogBurst<S> for ShmLogProducer<S> {
    fn log_burst_of(&mut self, recs: &[S]) -> usize {
        self.log_burst(recs)
    }
}

macro_rules! each {
    ($ty:ident, $v:expr, $x:ident => $e:expr) => {
        match $v {
            $ty::S32($x) => $e,
            $ty::S64($x) => $e,
            $ty::S128($x) => $e,
        }
    };
}

/// Test hook (`DPLOG_FAULT_CONSUMER_PANIC_AFTER=N` at `dplog_start`): the
/// consumer thread panics after formatting `N` records, so C tests can
/// reach `DPLOG_ERR_CONSUMER_GONE`, which no sound input provokes.
struct PanicAfter {
    inner: SchemaFormatter,
    left: u64,
}

impl<S: Slot> Formatter<S> for PanicAfter {
    fn format(&mut self, rec: &S, out: &mut Vec<u8>) {
        if self.left == 0 {
            panic!("DPLOG_FAULT_CONSUMER_PANIC_AFTER: injected consumer panic");
        }
        self.left -= 1;
        Formatter::<S>::format(&mut self.inner, rec, out);
    }
    fn format_drop_report(&mut self, r: &DropReport, out: &mut Vec<u8>) {
        Formatter::<S>::format_drop_report(&mut self.inner, r, out);
    }
    fn tsc_calibration(&mut self, cal: &dplog::tsc::Calibration) {
        Formatter::<S>::tsc_calibration(&mut self.inner, cal);
    }
    fn take_skipped(&mut self) -> u64 {
        Formatter::<S>::take_skipped(&mut self.inner)
    }
}

fn start_typed<S: Slot>(
    lc: LoggerConfig,
    formatter: SchemaFormatter,
    panic_after: Option<u64>,
    sink: BoxSink,
) -> Result<Logger<S>, LoggerError> {
    match panic_after {
        Some(left) => Logger::start(
            lc,
            PanicAfter {
                inner: formatter,
                left,
            },
            sink,
        ),
        None => Logger::start(lc, formatter, sink),
    }
}

impl AnyLogger {
    /// Starts a consumer of `slot_bytes`-byte slots (32, 64 or 128).
    pub(crate) fn start(
        slot_bytes: usize,
        lc: LoggerConfig,
        formatter: SchemaFormatter,
        panic_after: Option<u64>,
        sink: BoxSink,
    ) -> Result<Self, LoggerError> {
        Ok(match slot_bytes {
            32 => Self::S32(start_typed(lc, formatter, panic_after, sink)?),
            128 => Self::S128(start_typed(lc, formatter, panic_after, sink)?),
            _ => Self::S64(start_typed(lc, formatter, panic_after, sink)?),
        })
    }

    pub(crate) fn producer(&self) -> Result<AnyProducer, LoggerError> {
        Ok(match self {
            Self::S32(l) => AnyProducer::S32(l.producer()?),
            Self::S64(l) => AnyProducer::S64(l.producer()?),
            Self::S128(l) => AnyProducer::S128(l.producer()?),
        })
    }

    pub(crate) fn flush(&self) -> Result<(), LoggerError> {
        each!(Self, self, l => l.flush())
    }

    pub(crate) fn reopen(&self) -> Result<(), LoggerError> {
        each!(Self, self, l => l.reopen())
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        each!(Self, self, l => l.snapshot())
    }

    /// The per-type table the consumer and its producers judge records by.
    #[cfg(test)]
    pub(crate) fn schemas(&self) -> &dplog::SchemaTable {
        each!(Self, self, l => &l.config().schemas)
    }

    /// Shuts the consumer down (drain, write, close the sink) and returns
    /// its result with a snapshot taken after the drain (so the latency
    /// percentiles include the records the drain wrote).
    #[allow(clippy::type_complexity)]
    pub(crate) fn shutdown(self) -> (Result<Stats, (Stats, LoggerError)>, Snapshot) {
        each!(Self, self, l => {
            let source = l.snapshot_source();
            let res = l.shutdown();
            (res, source.snapshot())
        })
    }
}

/// Copies `len` bytes at `rec` into a slot with a fresh header (`len`,
/// `schema_id`, zero flags); the slot's bytes past `len` are zero.
///
/// # Safety
/// `rec` is valid for `len` bytes, `8 <= len <= S::BYTES`.
#[inline(always)]
pub(crate) unsafe fn slot_from_c<S: Slot>(rec: *const u8, len: usize, schema_id: u16) -> S {
    let mut buf = [0u8; DPLOG_RECORD_MAX_SIZE];
    let len = len.min(S::BYTES);
    // SAFETY: rec is valid for len bytes (contract), buf holds 128 >= len;
    // distinct allocations, so no overlap.
    unsafe { core::ptr::copy_nonoverlapping(rec, buf.as_mut_ptr(), len) };
    buf[0..2].copy_from_slice(&(len as u16).to_ne_bytes());
    buf[2..4].copy_from_slice(&schema_id.to_ne_bytes());
    buf[4..8].fill(0);
    // The header now says `len`, which is what from_record_bytes checks.
    S::from_record_bytes(&buf[..len]).unwrap_or_else(|| unreachable!("header matches length"))
}

/// Pushes `n` records of `size` bytes, `stride` bytes apart from `base`,
/// in chunks of 32; returns how many were enqueued.
///
/// # Safety
/// `base` is valid for `n` records `stride` bytes apart, `8 <= size <=
/// min(stride, S::BYTES)`.
unsafe fn push_chunked_typed<S: Slot + Copy>(
    prod: &mut impl LogBurst<S>,
    base: *const u8,
    stride: usize,
    size: usize,
    n: usize,
    id: u16,
) -> usize {
    const CHUNK: usize = 32;
    let empty = S::from_record_bytes(&[8, 0, 0, 0, 0, 0, 0, 0])
        .unwrap_or_else(|| unreachable!("an 8-byte header-only record"));
    let mut chunk = [empty; CHUNK];
    let mut done = 0usize;
    let mut i = 0usize;
    while i < n {
        let k = (n - i).min(CHUNK);
        for (j, slot) in chunk[..k].iter_mut().enumerate() {
            // SAFETY: (i + j) < n, so the record lies inside the caller's
            // n * stride bytes (contract); size fits the slot.
            *slot = unsafe { slot_from_c::<S>(base.add((i + j) * stride), size, id) };
        }
        done += prod.log_burst_of(&chunk[..k]);
        i += k;
    }
    done
}

impl AnyProducer {
    /// Slot size in bytes: the stride of `dplog_reserve`'s slots.
    #[inline(always)]
    pub(crate) fn slot_bytes(&self) -> usize {
        match self {
            Self::S32(_) | Self::M32(_) => 32,
            Self::S64(_) | Self::M64(_) => 64,
            Self::S128(_) | Self::M128(_) => 128,
        }
    }

    pub(crate) fn policy(&self) -> Backpressure {
        each_producer!(self, p => p.policy())
    }

    /// A shared-memory ring's own counts (`None` for an in-process ring,
    /// which its logger counts).
    pub(crate) fn attached_counts(&self) -> Option<AttachedCounts> {
        fn of<S: dplog::Slot>(p: &ShmLogProducer<S>) -> AttachedCounts {
            use dplog::DropReason as R;
            AttachedCounts {
                enqueued: p.enqueued(),
                dropped_full: p.dropped_for(R::Full),
                dropped_degraded: p.dropped_for(R::Degraded),
                dropped_disconnected: p.dropped_for(R::Disconnected),
                dropped_stopped: p.dropped_for(R::Stopped),
                rings: 1,
            }
        }
        match self {
            Self::S32(_) | Self::S64(_) | Self::S128(_) => None,
            Self::M32(p) => Some(of(p)),
            Self::M64(p) => Some(of(p)),
            Self::M128(p) => Some(of(p)),
        }
    }

    /// The ring's id within its logger; 0 for a shared-memory ring, which
    /// belongs to no logger of this process.
    pub(crate) fn ring_id(&self) -> u32 {
        match self {
            Self::S32(p) => p.ring_id(),
            Self::S64(p) => p.ring_id(),
            Self::S128(p) => p.ring_id(),
            Self::M32(_) | Self::M64(_) | Self::M128(_) => 0,
        }
    }

    /// Stopped by the consumer after a protocol violation (for a
    /// shared-memory ring: quarantined by the daemon).
    pub(crate) fn is_stopped(&self) -> bool {
        match self {
            Self::S32(p) => p.is_stopped(),
            Self::S64(p) => p.is_stopped(),
            Self::S128(p) => p.is_stopped(),
            Self::M32(p) => p.is_quarantined(),
            Self::M64(p) => p.is_quarantined(),
            Self::M128(p) => p.is_quarantined(),
        }
    }

    /// Counts `n` records dropped because the ring is stopped (a call
    /// refused before its records reached the policy, such as a
    /// reservation).
    pub(crate) fn count_stopped(&mut self, n: u64) {
        let now = dplog::tsc::now_ticks();
        each_producer!(self, p => p.count_dropped(dplog::DropReason::Stopped, n, now))
    }

    /// A shared-memory ring: whether its last refused push gave up on the
    /// block timeout (cleared); false for an in-process ring.
    pub(crate) fn take_timed_out(&self) -> bool {
        match self {
            Self::S32(_) | Self::S64(_) | Self::S128(_) => false,
            Self::M32(p) => p.take_timed_out(),
            Self::M64(p) => p.take_timed_out(),
            Self::M128(p) => p.take_timed_out(),
        }
    }

    /// A shared-memory ring: sets its block timeout (see
    /// `ShmProducer::set_block_timeout`); `false` for an in-process ring,
    /// which has none.
    pub(crate) fn set_block_timeout(&mut self, t: Option<std::time::Duration>) -> bool {
        match self {
            Self::S32(_) | Self::S64(_) | Self::S128(_) => return false,
            Self::M32(p) => p.set_block_timeout(t),
            Self::M64(p) => p.set_block_timeout(t),
            Self::M128(p) => p.set_block_timeout(t),
        }
        true
    }

    /// Who serves the ring: `None` for an in-process ring (its logger's
    /// consumer thread); for a shared-memory ring, whether a consumer file
    /// is mapped, and why one found was refused.
    pub(crate) fn consumer_state(&self) -> Option<(bool, Option<String>)> {
        fn of<S: dplog::Slot>(p: &ShmLogProducer<S>) -> (bool, Option<String>) {
            let refusal = p.consumer_refusal();
            (p.consumer_attached(), refusal)
        }
        match self {
            Self::S32(_) | Self::S64(_) | Self::S128(_) => None,
            Self::M32(p) => Some(of(p)),
            Self::M64(p) => Some(of(p)),
            Self::M128(p) => Some(of(p)),
        }
    }

    /// The ring file's path, for a shared-memory ring.
    pub(crate) fn ring_path(&self) -> Option<&std::path::Path> {
        match self {
            Self::S32(_) | Self::S64(_) | Self::S128(_) => None,
            Self::M32(p) => Some(p.path()),
            Self::M64(p) => Some(p.path()),
            Self::M128(p) => Some(p.path()),
        }
    }

    /// The consumer is gone; never for a shared-memory ring (a daemon
    /// that is away may come back).
    pub(crate) fn is_disconnected(&self) -> bool {
        match self {
            Self::S32(p) => p.is_disconnected(),
            Self::S64(p) => p.is_disconnected(),
            Self::S128(p) => p.is_disconnected(),
            Self::M32(_) | Self::M64(_) | Self::M128(_) => false,
        }
    }

    pub(crate) fn flush(&mut self) {
        each_producer!(self, p => p.flush())
    }

    /// Slots a zero-copy reservation can take at the write position; 0
    /// for a shared-memory ring (its reservations are staged).
    pub(crate) fn contiguous_slots(&self) -> usize {
        match self {
            Self::S32(p) => p.contiguous_slots(),
            Self::S64(p) => p.contiguous_slots(),
            Self::S128(p) => p.contiguous_slots(),
            Self::M32(_) | Self::M64(_) | Self::M128(_) => 0,
        }
    }

    /// `Producer::reserve_raw` as bytes: `n` slots of
    /// [`slot_bytes`](Self::slot_bytes) each.
    pub(crate) fn reserve_raw(&mut self, n: usize) -> Option<*mut u8> {
        match self {
            Self::S32(p) => p.reserve_raw(n).map(|s| s.as_ptr().cast::<u8>()),
            Self::S64(p) => p.reserve_raw(n).map(|s| s.as_ptr().cast::<u8>()),
            Self::S128(p) => p.reserve_raw(n).map(|s| s.as_ptr().cast::<u8>()),
            Self::M32(_) | Self::M64(_) | Self::M128(_) => None,
        }
    }

    /// `Producer::commit_raw`.
    ///
    /// # Safety
    /// As `Producer::commit_raw`.
    pub(crate) unsafe fn commit_raw(&mut self, n: usize) {
        match self {
            // SAFETY: caller contract.
            Self::S32(p) => unsafe { p.commit_raw(n) },
            // SAFETY: caller contract.
            Self::S64(p) => unsafe { p.commit_raw(n) },
            // SAFETY: caller contract.
            Self::S128(p) => unsafe { p.commit_raw(n) },
            // reserve_raw never succeeds on a shared-memory ring.
            Self::M32(_) | Self::M64(_) | Self::M128(_) => {}
        }
    }

    /// `Producer::close_window`.
    ///
    /// # Safety
    /// As `Producer::close_window`.
    pub(crate) unsafe fn close_window(&mut self, written: usize) {
        match self {
            // SAFETY: caller contract.
            Self::S32(p) => unsafe { p.close_window(written) },
            // SAFETY: caller contract.
            Self::S64(p) => unsafe { p.close_window(written) },
            // SAFETY: caller contract.
            Self::S128(p) => unsafe { p.close_window(written) },
            // A shared-memory ring never opens an inline window.
            Self::M32(_) | Self::M64(_) | Self::M128(_) => {}
        }
    }

    /// Logs the record of `len` bytes at `rec` under the policy.
    ///
    /// # Safety
    /// `rec` is valid for `len` bytes, `8 <= len <= slot_bytes()`.
    #[inline]
    pub(crate) unsafe fn log_bytes(&mut self, rec: *const u8, len: usize, id: u16) -> bool {
        // SAFETY: caller contract.
        each_producer!(self, p => p.log(unsafe { slot_from_c(rec, len, id) }))
    }

    /// Pushes `n` records of `size` bytes, `stride` bytes apart from
    /// `base`, in chunks of 32; returns how many were enqueued.
    ///
    /// # Safety
    /// `base` is valid for `n` records `stride` bytes apart, `8 <= size <=
    /// min(stride, slot_bytes())`.
    pub(crate) unsafe fn push_chunked(
        &mut self,
        base: *const u8,
        stride: usize,
        size: usize,
        n: usize,
        id: u16,
    ) -> usize {
        // SAFETY: caller contract.
        each_producer!(self, p => unsafe { push_chunked_typed(p, base, stride, size, n, id) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_copied_into_a_slot_of_each_size_with_a_fresh_header() {
        let mut raw = [0u8; 128];
        for (i, b) in raw.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        // SAFETY: raw holds 24 readable bytes.
        let s32: Slot32 = unsafe { slot_from_c(raw.as_ptr(), 24, 3) };
        assert_eq!(s32.as_bytes().len(), 24);
        assert_eq!(s32.header().schema_id, 3);
        assert_eq!(s32.header().flags, 0);
        assert_eq!(&s32.as_bytes()[8..], &raw[8..24]);
        // SAFETY: raw holds 128 readable bytes.
        let s128: Slot128 = unsafe { slot_from_c(raw.as_ptr(), 128, 300) };
        assert_eq!(s128.as_bytes().len(), 128);
        assert_eq!(s128.header().schema_id, 300);
        assert_eq!(&s128.as_bytes()[8..], &raw[8..]);
    }
}
