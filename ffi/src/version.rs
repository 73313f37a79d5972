//! Version of the library and of the header (`DPLOG_VERSION_*`, checked
//! against Cargo.toml at compile time) and `dplog_version`.

use crate::result::{dplog_result, fail, guard, DPLOG_ERR_NULL, DPLOG_OK};

/// Major version of the library this header belongs to (Cargo.toml `version`).
pub const DPLOG_VERSION_MAJOR: u32 = 0;
/// Minor version of the library this header belongs to.
pub const DPLOG_VERSION_MINOR: u32 = 1;
/// Patch version of the library this header belongs to.
pub const DPLOG_VERSION_PATCH: u32 = 0;
/// `MAJOR * 10000 + MINOR * 100 + PATCH`, for `#if DPLOG_VERSION_NUMBER >= ...`.
pub const DPLOG_VERSION_NUMBER: u32 = 100;

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        assert!(b[i].is_ascii_digit());
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

// The header's macros must match Cargo.toml: a version bump that forgets
// them does not compile.
const _: () = assert!(DPLOG_VERSION_MAJOR == parse_u32(env!("CARGO_PKG_VERSION_MAJOR")));
const _: () = assert!(DPLOG_VERSION_MINOR == parse_u32(env!("CARGO_PKG_VERSION_MINOR")));
const _: () = assert!(DPLOG_VERSION_PATCH == parse_u32(env!("CARGO_PKG_VERSION_PATCH")));
const _: () = assert!(
    DPLOG_VERSION_NUMBER
        == DPLOG_VERSION_MAJOR * 10000 + DPLOG_VERSION_MINOR * 100 + DPLOG_VERSION_PATCH
);

/// Stores the library's own version (from its Cargo.toml) in the three
/// out-params, to compare with the header's `DPLOG_VERSION_*` macros.
///
/// Errors: `DPLOG_ERR_NULL` if any pointer is NULL (nothing written).
/// Thread-safety: any thread.
///
/// # Safety
/// The pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_version(
    major: *mut u32,
    minor: *mut u32,
    patch: *mut u32,
) -> dplog_result {
    guard(|| {
        if major.is_null() || minor.is_null() || patch.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_version: NULL out-param");
        }
        let p = |s: &str| s.parse::<u32>().unwrap_or(u32::MAX);
        // SAFETY: non-NULL and writable (caller contract).
        unsafe {
            major.write(p(env!("CARGO_PKG_VERSION_MAJOR")));
            minor.write(p(env!("CARGO_PKG_VERSION_MINOR")));
            patch.write(p(env!("CARGO_PKG_VERSION_PATCH")));
        }
        DPLOG_OK
    })
}
