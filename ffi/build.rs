//! Gives libdplog.so the soname `libdplog.so.<major>` so that programs
//! linked against it keep working across compatible (same major) updates.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdplog.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
