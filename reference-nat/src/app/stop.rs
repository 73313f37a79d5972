//! Stop requests: the flag a SIGINT/SIGTERM sets to end the input early
//! (every live session is still deleted and logged), and the watcher that
//! notes a SIGHUP no sink reopens on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dplog::config::SinkConfig;

#[cfg(doc)]
use super::run;

/// Set (by a SIGINT/SIGTERM handler, or by [`request_stop`]) to end the
/// input early: workers stop taking packets, every live session is deleted
/// and logged, the logger drains and the summary is printed as usual.
/// Relaxed is enough: it is a one-way flag polled per packet, and the
/// workers' thread joins order everything that follows.
static STOP: AtomicBool = AtomicBool::new(false);

/// When the first stop request was made (for the bounded waits after it).
static STOPPED_AT: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Asks a running [`run`] to stop taking input and finish cleanly.
pub fn request_stop() {
    STOPPED_AT.get_or_init(Instant::now);
    STOP.store(true, Ordering::Relaxed);
}

/// How long ago the stop was requested; `None` without a stop request.
pub fn stopped_for() -> Option<Duration> {
    STOPPED_AT.get().map(Instant::elapsed)
}

/// The flag [`request_stop`] sets, for a signal handler to set directly
/// (`signal_hook::flag::register` takes an `Arc<AtomicBool>`; use
/// [`stop_flag_watcher`] with it).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Copies `flag` into the stop flag every 50 ms on a small thread of its
/// own, so a signal handler that can only set an `Arc<AtomicBool>` stops
/// the run. The thread ends with the process.
pub fn stop_flag_watcher(flag: std::sync::Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("dplog-nat-signals".into())
        .spawn(move || loop {
            // Relaxed: a one-way flag, see `STOP`.
            if flag.load(Ordering::Relaxed) {
                request_stop();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        })
        .ok();
}

/// Whether a SIGHUP makes some sink of `sink` reopen its file: a file sink
/// (alone or in a `[[sink]]` set) with `reopen_on_sighup = true`.
pub fn reopens_on_sighup(sink: &SinkConfig) -> bool {
    match sink {
        SinkConfig::File(f) => f.reopen_on_sighup,
        SinkConfig::Set(v) => v.iter().any(reopens_on_sighup),
        _ => false,
    }
}

/// The line [`sighup_watcher`] writes to stderr for a SIGHUP that no sink
/// reopens on.
pub const SIGHUP_NOTE: &str = "dplog-nat: SIGHUP received; nothing reopened (no file sink sets reopen_on_sighup = true, as an external logrotate needs); carrying on";

/// Watches `flag` (set by a SIGHUP handler) every 50 ms on a small thread
/// of its own. When `reopens` (see [`reopens_on_sighup`]) the file sink
/// handles the signal and nothing is written; otherwise each SIGHUP gives
/// one [`SIGHUP_NOTE`] line on stderr (write errors ignored), and the run
/// carries on either way. The thread ends with the process.
pub fn sighup_watcher(flag: std::sync::Arc<AtomicBool>, reopens: bool) {
    std::thread::Builder::new()
        .name("dplog-nat-sighup".into())
        .spawn(move || loop {
            // Relaxed: a flag with no data behind it (as `STOP`).
            if flag.swap(false, Ordering::Relaxed) && !reopens {
                crate::diag!("{SIGHUP_NOTE}");
            }
            std::thread::sleep(Duration::from_millis(50));
        })
        .ok();
}
