//! Diagnostics and the summary written so that a closed pipe is no panic.
//!
//! `eprintln!` and `print!` panic when the write fails, e.g. with EPIPE
//! when stdout or stderr is a pipe whose reader has gone (`dplog-nat 2>&1 |
//! head -c 100`; Rust ignores SIGPIPE, so the write returns the error). A
//! diagnostic nobody can read is not worth a crash: [`diag!`](crate::diag)
//! and [`print_out`] ignore write errors and the run keeps its exit code.

use std::io::Write;

/// Writes `args` and a newline to stderr in one locked write, ignoring any
/// write error (a closed or broken stderr).
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.write_all(b"\n"));
}

/// Writes `text` to stdout and flushes it, ignoring any write error (a
/// closed stdout). Returns whether all of it was written.
pub fn print_out(text: &str) -> bool {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .is_ok()
}

/// `eprintln!` that ignores write errors: one line on stderr, or nothing
/// if stderr is closed (see [`stderr_line`]).
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::stdio::stderr_line(format_args!($($arg)*))
    };
}
