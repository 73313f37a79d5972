//! `dplog-query`'s optimized binary is linked without debug sections
//! (its symbols stay: profiles and backtraces name functions).
//!
//! Why: `dplog-query` is started once per question, often with its
//! binary out of the page cache. A page fault in a file mapping reads
//! the pages around it (up to the disk's `read_ahead_kb`, 8 MiB on some
//! virtual disks), debug sections included when they follow the code:
//! with the release profile's `debug = 1` the file is 47 MB, of which
//! 2.7 MB is code and data, and a cold start read 17.5 MB of it. Without
//! them it reads what it runs. Unoptimized builds keep their debug
//! information. (The workspace's release profile keeps `debug = 1` for
//! the other programs and the benches, which are profiled; a package
//! cannot set `strip` for itself, so the link argument is given here.)

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("OPT_LEVEL").is_ok_and(|o| o != "0") {
        println!("cargo:rustc-link-arg-bins=-Wl,--strip-debug");
    }
}
