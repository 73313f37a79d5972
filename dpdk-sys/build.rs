//! Finds Debian's DPDK 22.11 through pkg-config (`libdpdk`), compiles the C
//! shim that exports DPDK's inline functions, and links the DPDK libraries.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=build.rs");
    let lib = match pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
    {
        Ok(l) => l,
        Err(e) => panic!(
            "dpdk-sys: DPDK 22.11 not found through pkg-config ({e}); \
             install libdpdk-dev (scripts/setup.sh does)"
        ),
    };
    // pkg-config's cflags carry `-include rte_config.h` and `-march=...`,
    // which the Library struct drops; pass them through as they are.
    let cflags = Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
        .expect("pkg-config runs");
    let cflags = String::from_utf8_lossy(&cflags.stdout).to_string();
    let mut build = cc::Build::new();
    build.file("src/shim.c").warnings(true).opt_level(3);
    for p in &lib.include_paths {
        build.include(p);
    }
    let mut it = cflags.split_whitespace();
    while let Some(f) = it.next() {
        if f == "-include" {
            if let Some(h) = it.next() {
                build.flag("-include").flag(h);
            }
        } else if f.starts_with("-march") || f.starts_with("-m") && !f.starts_with("-I") {
            build.flag(f);
        }
    }
    build.compile("dplog_dpdk_shim");
    // The net_ring PMD's own API (`rte_eth_from_rings`): Debian installs
    // PMDs as EAL plugins, outside `pkg-config --libs libdpdk`.
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");
}
