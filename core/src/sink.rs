//! The [`Sink`] trait: where the consumer writes formatted batches, and the
//! result semantics every sink shares.
//!
//! A batch is a run of whole formatted records; every dplog formatter ends
//! each record with `\n`, so a sink that needs record boundaries (syslog,
//! Kafka) splits on newlines.
//!
//! Results:
//! - `Ok(Accepted::Delivered)`: every record of the batch is written (for a
//!   file: handed to the kernel; see each sink for its durability).
//! - `Ok(Accepted::Pending)`: the sink took the batch but delivery is
//!   asynchronous (Kafka), or it holds records to write later (the
//!   archive's partial blocks, written when a block fills, ages or is
//!   flushed); outcomes arrive later through [`Sink::poll`], and a record
//!   counts as written only then. [`Logger::flush`](crate::Logger::flush)
//!   books what its flush settled before it returns.
//! - `Err(SinkError::Retryable(_))`: nothing more of the batch can be
//!   written now (ENOSPC, EIO, a lost connection). The runtime backs off and
//!   calls `write_batch` again **with the same bytes**; a sink that wrote a
//!   prefix of the batch remembers how far it got and resumes there, so no
//!   record is lost or duplicated.
//! - `Err(SinkError::Permanent(_))`: the batch can never be written (closed
//!   sink, a record the receiver refuses); its records count as dropped.
//!
//! A refused batch the runtime gives up on (a permanent error, or a
//! retryable one past `sink_retry_timeout_ms` or the shutdown deadline)
//! counts as dropped except the whole records of it that a sink could not
//! take back and reports with [`Sink::kept_of_refused`] (a file sink on a
//! full disk keeps the whole records it wrote), which count as written.
//!
//! Every error is counted by the runtime
//! ([`Stats::sink_errors`](crate::Stats::sink_errors),
//! [`Stats::sink_retries`](crate::Stats::sink_retries)); none is swallowed.
//!
//! Records a sink refuses one by one (a syslog message larger than a
//! datagram may be) while it writes the rest of the batch: the sink
//! returns `Ok(Accepted::Pending)` for that batch and reports it through
//! [`Sink::poll`]: the records it wrote in
//! [`Progress::delivered_records`], the refused ones in
//! [`Progress::failed_records`] (booked as
//! [`Stats::dropped_sink`](crate::Stats::dropped_sink)), so
//! `written_records` counts only records written whole. A batch with no
//! refusal can still be `Delivered`.
//!
//! A sink's own counters (reconnects, refusals by reason, rotations, ...)
//! are exposed by name through [`Sink::named_counters`]; the logger keeps the
//! handle ([`Logger::sink_counters`](crate::Logger::sink_counters)) so a
//! program can print them with its summary.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// What a sink did with a batch it did not refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Every record of the batch is written.
    Delivered,
    /// The sink holds the batch; outcomes are reported by [`Sink::poll`].
    Pending,
}

/// A sink error, classified by what the runtime should do about it.
#[derive(Debug)]
pub enum SinkError {
    /// Transient (ENOSPC, EIO, connection lost, queue full): retry the same
    /// batch later, with backoff.
    Retryable(io::Error),
    /// The batch (or the sink) can never succeed; drop and count.
    Permanent(io::Error),
}

impl SinkError {
    /// Classifies an I/O error: out of space or quota, I/O errors, would
    /// block, interrupted, timeouts and every connection failure are
    /// retryable; anything else (bad descriptor, permission, invalid
    /// argument, too big) is permanent.
    pub fn classify(e: io::Error) -> Self {
        use io::ErrorKind as K;
        let retry_errno = matches!(
            e.raw_os_error(),
            Some(libc::ENOSPC | libc::EIO | libc::EDQUOT | libc::ENOBUFS)
        );
        let retry_kind = matches!(
            e.kind(),
            K::WouldBlock
                | K::Interrupted
                | K::TimedOut
                | K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::NotConnected
                | K::BrokenPipe
                | K::AddrNotAvailable
                | K::UnexpectedEof
        );
        if retry_errno || retry_kind {
            SinkError::Retryable(e)
        } else {
            SinkError::Permanent(e)
        }
    }

    /// True for [`SinkError::Retryable`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, SinkError::Retryable(_))
    }

    /// The underlying I/O error.
    pub fn io(&self) -> &io::Error {
        match self {
            SinkError::Retryable(e) | SinkError::Permanent(e) => e,
        }
    }

    /// Consumes the error, returning the underlying I/O error.
    pub fn into_io(self) -> io::Error {
        match self {
            SinkError::Retryable(e) | SinkError::Permanent(e) => e,
        }
    }

    /// The raw OS error number, if any (e.g. `ENOSPC` = 28 on Linux).
    pub fn raw_os_error(&self) -> Option<i32> {
        self.io().raw_os_error()
    }
}

impl From<io::Error> for SinkError {
    fn from(e: io::Error) -> Self {
        SinkError::classify(e)
    }
}

impl From<SinkError> for io::Error {
    fn from(e: SinkError) -> Self {
        e.into_io()
    }
}

impl core::fmt::Display for SinkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SinkError::Retryable(e) => write!(f, "retryable sink error: {e}"),
            SinkError::Permanent(e) => write!(f, "permanent sink error: {e}"),
        }
    }
}

impl std::error::Error for SinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.io())
    }
}

/// Outcomes of asynchronous deliveries since the last [`Sink::poll`], in
/// records (record lines; in-band drop-report lines excluded, see
/// [`Sink::write_batch_marked`]) and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Records the receiver acknowledged.
    pub delivered_records: u64,
    /// Bytes of those records.
    pub delivered_bytes: u64,
    /// Records that failed for good (counted in
    /// [`Stats::dropped_sink`](crate::Stats::dropped_sink)).
    pub failed_records: u64,
}

impl core::ops::AddAssign for Progress {
    fn add_assign(&mut self, o: Self) {
        self.delivered_records += o.delivered_records;
        self.delivered_bytes += o.delivered_bytes;
        self.failed_records += o.failed_records;
    }
}

/// A sink's own counters, read by name from any thread (typically at the
/// end of a run, after [`Logger::shutdown`](crate::Logger::shutdown)
/// joined the consumer: then they are exact).
pub trait SinkCounters: Send + Sync {
    /// Every counter as `(name, value)`, in a stable order; names are
    /// `kind.counter` in snake case (`syslog.too_large`,
    /// `file.rotations`), values are counts (or bytes where the name says
    /// `_bytes`).
    fn named(&self) -> Vec<(String, u64)>;
}

/// Of a refused batch, what stays in the destination: a prefix of the
/// batch made of whole records (see [`Sink::kept_of_refused`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// Bytes of the prefix (from the start of the batch, ending at a record
    /// boundary).
    pub bytes: usize,
    /// Records in it; in-band drop-report lines are not records.
    pub records: u64,
}

/// Where formatted batches go.
///
/// The consumer calls `write_batch` once per batch of whole records (never
/// a partial record), `tick` and `poll` periodically (every few
/// milliseconds, also while idle), `flush` on request, and at shutdown
/// `drain` (bounded by the shutdown deadline) then `close` once, last.
pub trait Sink: Send + 'static {
    /// Writes the whole batch, or reports how it failed (see the module
    /// docs for the retry contract).
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError>;

    /// [`write_batch`](Self::write_batch) with the byte ranges of the
    /// in-band drop-report lines ([`DropReport`](crate::report::DropReport))
    /// in `batch`: each range is `start..end` of whole lines (its final
    /// `\n` included), ascending and disjoint. The consumer calls it
    /// through [`write_batch_owned`](Self::write_batch_owned), never
    /// `write_batch` directly, and retries with the same bytes and ranges.
    ///
    /// Drop-report lines are not records: a sink that reports outcomes in
    /// lines through [`poll`](Self::poll) (Kafka, fan-out) must leave them
    /// out of [`Progress::delivered_records`] and
    /// [`Progress::failed_records`], or `written_records` is over-counted
    /// by the number of reports. Their bytes may count in
    /// `delivered_bytes` (as a synchronous sink's do in `written_bytes`).
    /// Default: `write_batch(batch)` (a synchronous sink, which the runtime
    /// books per batch, needs nothing else).
    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        let _ = reports;
        self.write_batch(batch)
    }

    /// [`write_batch_marked`](Self::write_batch_marked) from a caller that
    /// can give the batch's buffer away: on `Ok` the sink may swap `*buf`
    /// for a buffer of its own (any length and contents: the caller
    /// clears it before it formats the next batch into it), keeping the
    /// batch's bytes without copying them, to work on them on another
    /// thread (a sealed file sink hashes them there). On `Err`, `*buf`
    /// holds the batch as given, for the retry and
    /// [`kept_of_refused`](Self::kept_of_refused). The consumer calls this
    /// method, never `write_batch_marked` directly.
    ///
    /// A sink that swaps keeps a small fixed set of buffers and hands them
    /// back and forth, so the caller allocates only while a buffer it got
    /// grows to its batch size (once per buffer). Default:
    /// `write_batch_marked(buf, reports)`, the buffer left alone.
    fn write_batch_owned(
        &mut self,
        buf: &mut Vec<u8>,
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        self.write_batch_marked(buf, reports)
    }

    /// Pushes buffered bytes toward durable storage or the receiver.
    fn flush(&mut self) -> Result<(), SinkError>;

    /// Hands the kernel every byte of the records this sink has accepted
    /// (`write(2)`/`pwrite(2)` of what it still holds in memory, such as
    /// an archive's partial blocks), without waiting for them to reach
    /// the disk: no `fsync`, whatever the sink's fsync policy. After `Ok`
    /// the records survive a crash of this process (not a power loss or
    /// a kernel crash: [`flush`](Self::flush) is for that), and a reader
    /// of the destination (its length, its committed header) sees them.
    ///
    /// Delivery to a receiver (Kafka, syslog, IPFIX) is not part of it: it
    /// is reported by [`poll`](Self::poll) and waited for by
    /// [`drain`](Self::drain).
    ///
    /// Errors: the write error (retryable for ENOSPC, EIO); what could not
    /// be written stays held for the next call. Default:
    /// [`flush`](Self::flush) (a sink that does not override it may sync).
    fn write_out(&mut self) -> Result<(), SinkError> {
        self.flush()
    }

    /// Makes every record this sink has accepted durable, whatever its own
    /// fsync policy: [`write_out`](Self::write_out), then `fdatasync(2)`
    /// / `msync(MS_SYNC)` of what it wrote. A caller that promises
    /// durability (dplogd's `--fsync` checkpoints) calls this, not
    /// [`flush`](Self::flush), which follows the policy (a file sink with
    /// `fsync = "never"` does not sync on `flush`).
    ///
    /// Errors: the write or sync error; nothing is dropped (the caller
    /// retries). Default: [`flush`](Self::flush) (right for sinks whose
    /// flush always syncs, and for network sinks).
    fn sync_all(&mut self) -> Result<(), SinkError> {
        self.flush()
    }

    /// Periodic work: time-based rotation and fsync, reconnects, reopen
    /// requests (SIGHUP), serving delivery reports. `now` is the caller's
    /// clock reading. Default: nothing.
    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        let _ = now;
        Ok(())
    }

    /// Outcomes of [`Accepted::Pending`] batches since the last call.
    /// Default: none (a synchronous sink).
    fn poll(&mut self) -> Progress {
        Progress::default()
    }

    /// Waits until every pending record is delivered or failed, or
    /// `deadline` passes. Default: [`flush`](Self::flush).
    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let _ = deadline;
        self.flush()
    }

    /// Reopens the destination (e.g. the file at the configured path after
    /// an external logrotate moved it). Default: nothing to reopen.
    fn reopen(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Flushes and releases the sink. Later writes fail with a permanent
    /// error; a second `close` is `Ok`.
    fn close(&mut self) -> Result<(), SinkError>;

    /// The runtime gave up on the batch the last `write_batch` refused with
    /// a retryable error (shutdown deadline or `sink_retry_timeout_ms`) and
    /// counted all of its records as dropped. A sink that had already sent
    /// part of it (asynchronously) must not report those records through
    /// [`poll`](Self::poll) later, or they would be counted twice. Default:
    /// nothing.
    fn abandon(&mut self) {}

    /// The runtime gives up on the batch the last `write_batch` refused (a
    /// permanent error, or a retryable one past `sink_retry_timeout_ms` or
    /// the shutdown deadline; before [`abandon`](Self::abandon)), with the
    /// same bytes and drop-report ranges: returns the prefix of it that is
    /// in the destination whole and stays there, which the runtime counts
    /// as written (`written_records`, `written_bytes`) and the rest as
    /// dropped. Called once per refused batch; the sink forgets the batch
    /// (a later batch starts from its beginning). Default: nothing kept (a
    /// sink that writes a batch whole or not at all, or that reports what
    /// it sent through [`poll`](Self::poll)).
    fn kept_of_refused(&mut self, batch: &[u8], reports: &[Range<usize>]) -> Kept {
        let _ = (batch, reports);
        Kept::default()
    }

    /// A short human-readable name of the destination for diagnostics,
    /// e.g. `file /var/log/nat.log` or `kafka topic nat at 127.0.0.1:9092`.
    /// Default: the sink's Rust type name.
    fn describe(&self) -> String {
        std::any::type_name::<Self>().to_string()
    }

    /// A handle on the sink's own counters ([`SinkCounters`]), taken once
    /// when the logger starts. Default: none.
    fn named_counters(&self) -> Option<Arc<dyn SinkCounters>> {
        None
    }
}

impl<S: Sink + ?Sized> Sink for Box<S> {
    fn write_batch(&mut self, batch: &[u8]) -> Result<Accepted, SinkError> {
        (**self).write_batch(batch)
    }
    fn write_batch_marked(
        &mut self,
        batch: &[u8],
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        (**self).write_batch_marked(batch, reports)
    }
    fn write_batch_owned(
        &mut self,
        buf: &mut Vec<u8>,
        reports: &[Range<usize>],
    ) -> Result<Accepted, SinkError> {
        (**self).write_batch_owned(buf, reports)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        (**self).flush()
    }
    fn write_out(&mut self) -> Result<(), SinkError> {
        (**self).write_out()
    }
    fn sync_all(&mut self) -> Result<(), SinkError> {
        (**self).sync_all()
    }
    fn tick(&mut self, now: Instant) -> Result<(), SinkError> {
        (**self).tick(now)
    }
    fn poll(&mut self) -> Progress {
        (**self).poll()
    }
    fn drain(&mut self, deadline: Instant) -> Result<(), SinkError> {
        (**self).drain(deadline)
    }
    fn reopen(&mut self) -> Result<(), SinkError> {
        (**self).reopen()
    }
    fn close(&mut self) -> Result<(), SinkError> {
        (**self).close()
    }
    fn abandon(&mut self) {
        (**self).abandon()
    }
    fn kept_of_refused(&mut self, batch: &[u8], reports: &[Range<usize>]) -> Kept {
        (**self).kept_of_refused(batch, reports)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn named_counters(&self) -> Option<Arc<dyn SinkCounters>> {
        (**self).named_counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_errno_and_kind() {
        for errno in [libc::ENOSPC, libc::EIO, libc::EDQUOT, libc::ENOBUFS] {
            assert!(SinkError::classify(io::Error::from_raw_os_error(errno)).is_retryable());
        }
        assert!(
            SinkError::classify(io::Error::from(io::ErrorKind::ConnectionRefused)).is_retryable()
        );
        assert!(!SinkError::classify(io::Error::from_raw_os_error(libc::EBADF)).is_retryable());
        assert!(
            !SinkError::classify(io::Error::from(io::ErrorKind::PermissionDenied)).is_retryable()
        );
        let e = SinkError::from(io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(e.to_string().starts_with("retryable"));
    }
}
