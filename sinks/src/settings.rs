//! What a sink table provides to a configuration: [`SinkSettings`], the
//! [`SettingsError`] its checks report and its [`SinkRole`] in a
//! `[[sink]]` set (feature `config`). Re-exported by `crate::config` (and
//! `SinkRole` by `crate::route::config`, which builds sets from them);
//! this module depends on neither.

use std::io;
use std::path::Path;

use dplog_core::Sink;
use serde::Deserialize;

/// Role of a sink in a `[[sink]]` set.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SinkRole {
    /// Receives every batch (fan-out). Default.
    #[default]
    Fanout,
    /// Secondary of the sink listed just before it.
    Failover,
}

/// The settings of one sink table: its role in a `[[sink]]` set, how it
/// describes itself, and how it opens its sink.
pub trait SinkSettings {
    /// Role in a `[[sink]]` set (`role` key; fan-out by default).
    fn role(&self) -> SinkRole;

    /// A short description, the same the built sink's
    /// [`Sink::describe`] gives (`file PATH`,
    /// `mmap DIR`, ...); opens nothing.
    fn describe(&self) -> String;

    /// Opens the sink. `header` is the format's file header (CSV's column
    /// names), for sinks that start files (file and mmap sinks write it
    /// once at the top of each file or segment); other sinks ignore it.
    /// The sink is a [`BoxSink`](crate::route::BoxSink).
    ///
    /// Errors: the sink's open error (`InvalidInput` for settings that do
    /// not describe a sink, e.g. an unparsable address).
    fn build(&self, header: Option<&[u8]>) -> io::Result<Box<dyn Sink>>;

    /// The regular file this sink appends to, if it writes one: a
    /// `[[sink]]` set refuses two sinks on one file, and removes the empty
    /// files it created when a later sink cannot open. Default `None`.
    fn output_file(&self) -> Option<&Path> {
        None
    }

    /// Checks these settings on their own and with the format they are
    /// to carry, `format` its TOML name (`"text"`, `"json"`, `"csv"`,
    /// `"rfc5424"`, `"rfc3164"`, `"ipfix"` or `"binary"`), without opening
    /// anything: a format whose framing the sink cannot carry, an address
    /// it would only refuse when it opens. Default: nothing to check.
    ///
    /// Errors: [`SettingsError`] naming the key the rule is about and why,
    /// with the combinations that work.
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        let _ = format;
        Ok(())
    }
}

/// A sink table whose settings do not go together (with each other or
/// with the format): the key to point at and why. The configuration
/// prefixes the table's name (`[sink]`, `[[sink]] #N`) and the key's line
/// and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError {
    /// The key of the sink table the error is about (`type`, `address`,
    /// `max_size_bytes`, ...).
    pub key: &'static str,
    /// Why, starting with the key and its value (`address = "x": ...`).
    pub why: String,
}

impl SettingsError {
    /// An error about `key`.
    pub fn new(key: &'static str, why: String) -> Self {
        Self { key, why }
    }
}

/// Refuses an empty path setting `key` (`path = ""` would otherwise fail
/// only when the sink opens, with the operating system's message and no
/// file name to show).
pub fn nonempty_path(key: &'static str, p: &std::path::Path) -> Result<(), SettingsError> {
    if p.as_os_str().is_empty() {
        return Err(SettingsError::new(
            key,
            format!(
                "`{key}` is empty: name the {}",
                if key == "path" { "file" } else { "directory" }
            ),
        ));
    }
    Ok(())
}

/// Refuses a `role = "failover"` sink of kind `kind` (`file`, `mmap`,
/// `archive`) for a stream that opens with a header its reader needs:
/// the binary format's `H` and schema frames, IPFIX's templates. They go
/// out in the stream's first batch, to the primary; a secondary gets the
/// batches from the moment it takes over, records without the frames
/// that describe them, which it could not store (the archive) or no
/// reader could decode (a file, mmap segments).
pub(crate) fn failover_stream(
    kind: &str,
    role: SinkRole,
    format: &str,
) -> Result<(), SettingsError> {
    if role != SinkRole::Failover || !matches!(format, "binary" | "ipfix") {
        return Ok(());
    }
    Err(SettingsError::new(
        "role",
        format!(
            "role = \"failover\" on a {kind} sink with [format] type = \"{format}\": the \
             stream's header (schema frames, IPFIX templates) goes out once, in the first \
             batch, to the primary; a secondary taking over mid-stream would hold records \
             nothing describes, and they could not be read; list it without `role` (fan-out: \
             both get every batch), or fail over in a line format"
        ),
    ))
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for SettingsError {}
