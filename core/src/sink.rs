//! The [`Sink`] trait: where the consumer writes formatted batches.

use std::io;

/// Where formatted batches go.
///
/// The consumer calls `write_batch` once per batch of whole records (never
/// a partial record), `flush` on request and at shutdown, and `close` once,
/// last. Errors are counted by the runtime and never swallowed: see
/// [`Stats::sink_errors`](crate::Stats::sink_errors) and
/// [`Stats::dropped_sink`](crate::Stats::dropped_sink).
pub trait Sink: Send + 'static {
    /// Writes the whole batch or fails. On `Err` the batch's records count
    /// as dropped for reason "sink".
    fn write_batch(&mut self, batch: &[u8]) -> io::Result<()>;
    /// Pushes buffered bytes toward durable storage.
    fn flush(&mut self) -> io::Result<()>;
    /// Flushes and releases the sink (a file sink also fsyncs).
    fn close(&mut self) -> io::Result<()>;
}

impl<S: Sink + ?Sized> Sink for Box<S> {
    fn write_batch(&mut self, batch: &[u8]) -> io::Result<()> {
        (**self).write_batch(batch)
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
    fn close(&mut self) -> io::Result<()> {
        (**self).close()
    }
}
