//! What every sink's settings provide to a configuration (feature
//! `config`): each sink folder has a `config` module with its
//! `type = "<sink>"` table (a serde struct with defaults and validation)
//! implementing [`SinkSettings`]; `dplog::config` dispatches a `[sink]` /
//! `[[sink]]` table on its `type` to one of them and builds sets with
//! [`build_set`].

use std::io;
use std::path::Path;

use crate::route::BoxSink;

pub use crate::route::config::{build_set, SinkRole, FAILOVER_PROBE};

/// The settings of one sink table: its role in a `[[sink]]` set, how it
/// describes itself, and how it opens its sink.
pub trait SinkSettings {
    /// Role in a `[[sink]]` set (`role` key; fan-out by default).
    fn role(&self) -> SinkRole;

    /// A short description, the same the built sink's
    /// [`Sink::describe`](dplog_core::Sink::describe) gives (`file PATH`,
    /// `mmap DIR`, ...); opens nothing.
    fn describe(&self) -> String;

    /// Opens the sink. `header` is the format's file header (CSV's column
    /// names), for sinks that start files (file and mmap sinks write it
    /// once at the top of each file or segment); other sinks ignore it.
    ///
    /// Errors: the sink's open error (`InvalidInput` for settings that do
    /// not describe a sink, e.g. an unparsable address).
    fn build(&self, header: Option<&[u8]>) -> io::Result<BoxSink>;

    /// The regular file this sink appends to, if it writes one: a
    /// `[[sink]]` set refuses two sinks on one file, and removes the empty
    /// files it created when a later sink cannot open. Default `None`.
    fn output_file(&self) -> Option<&Path> {
        None
    }
}
