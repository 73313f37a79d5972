//! `[[sink]]` sets: the role of each sink table, and building a set into
//! fan-out and failover groups (feature `config`).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::{BoxSink, Failover, FanOut};
pub use crate::settings::SinkRole;
use crate::settings::SinkSettings;

/// How often a failover set retries its primary while on the secondary.
pub const FAILOVER_PROBE: Duration = Duration::from_millis(1000);

/// Opens the sinks of a `[[sink]]` set, in order, and groups them: every
/// batch goes to each group (a [`FanOut`] when there are several), and a
/// sink with [`SinkRole::Failover`] is the secondary of the sink (or
/// group) before it ([`Failover`], probing the primary every
/// [`FAILOVER_PROBE`]). `header` goes to every sink's
/// [`SinkSettings::build`].
///
/// Two sinks on one file would write every line twice and are refused
/// before anything is opened. If a sink cannot open, the files that did
/// not exist before and that the earlier sinks of the set created (and
/// left empty) are removed, so a refused set leaves nothing behind.
///
/// Errors: `InvalidInput` for an empty set, two sinks on one file, or a
/// first sink with `role = "failover"` (`[[sink]] #1: role = "failover"
/// needs a sink before it`), before anything is opened; else the first
/// open error, of its kind, its message prefixed with the sink's place and
/// description (`[[sink]] #3 (file nodir/c.log): nodir/c.log: No such
/// file or directory`).
pub fn build_set<S: SinkSettings>(items: &[S], header: Option<&[u8]>) -> io::Result<BoxSink> {
    if items.first().map(SinkSettings::role) == Some(SinkRole::Failover) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "[[sink]] #1: role = \"failover\" needs a sink before it",
        ));
    }
    let mut files = Vec::new();
    for f in items.iter().filter_map(SinkSettings::output_file) {
        let p = std::path::absolute(f).unwrap_or_else(|_| f.to_path_buf());
        let p = p.components().collect::<PathBuf>();
        if files.contains(&p) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "two [[sink]] file tables write {}: every record would be written twice",
                    f.display()
                ),
            ));
        }
        files.push(p);
    }
    let new_files: Vec<PathBuf> = items
        .iter()
        .filter_map(SinkSettings::output_file)
        .filter(|p| !p.exists())
        .map(|p| p.to_path_buf())
        .collect();
    let built = group(items, header);
    if built.is_err() {
        for p in &new_files {
            if std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0) {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    built
}

/// The sinks of a set, opened and grouped into fan-out and failover.
fn group<S: SinkSettings>(items: &[S], header: Option<&[u8]>) -> io::Result<BoxSink> {
    let mut groups: Vec<BoxSink> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let sink = item.build(header).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("[[sink]] #{} ({}): {e}", i + 1, item.describe()),
            )
        })?;
        match (item.role(), groups.pop()) {
            (SinkRole::Failover, Some(primary)) => {
                groups.push(Box::new(Failover::new(primary, sink, FAILOVER_PROBE)))
            }
            // A first sink is never a failover: `build_set` refuses it.
            (_, prev) => {
                groups.extend(prev);
                groups.push(sink);
            }
        }
    }
    match groups.len() {
        0 => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no sink configured",
        )),
        1 => Ok(groups.pop().expect("one group")),
        _ => Ok(Box::new(FanOut::new(groups)?)),
    }
}
