//! Build script of dplog-benches (`build = "c/build.rs"`: a `build.rs` in
//! `benches/` would also be auto-discovered as a bench of the root package).
//! Compiles the C peer of the `format_template` bench (`c/format_line.c`,
//! one `snprintf` per line) with the system C compiler at `-O2`.

fn main() {
    println!("cargo:rerun-if-changed=c/format_line.c");
    println!("cargo:rerun-if-changed=c/build.rs");
    cc::Build::new()
        .file("c/format_line.c")
        .opt_level(2)
        .warnings(true)
        .compile("dplog_bench_c");
}
