//! dplog sinks. Each implements [`dplog_core::Sink`].
//!
//! - [`FileSink`]: appends batches to a file (`O_APPEND`, mode 0640,
//!   fsync on close).
#![warn(missing_docs)]

pub mod file;

pub use file::{FileSink, FILE_MODE};
