//! Shared by the ffi_log benches: the C API loaded from the built
//! `libdplog.so`, and the C loops of `benches/c/log_loop.c` compiled with
//! the system C compiler against `include/dplog.h`.

use std::ffi::{c_char, c_void, CString};

use dplog::nat::{Nat44SessionRecord, NatEvent};
use dplog::RecordHeader;
use std::path::{Path, PathBuf};
use std::process::Command;

pub type OpenStr = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> i32;
pub type Start = unsafe extern "C" fn(*mut c_void, *const u32, usize) -> i32;
pub type ProducerNew = unsafe extern "C" fn(*mut c_void, u32, *mut *mut c_void) -> i32;
pub type Log = unsafe extern "C" fn(*mut c_void, u16, *const c_void, usize) -> i32;
pub type Stats = unsafe extern "C" fn(*mut c_void, *mut u64) -> i32;
pub type ProducerFree = unsafe extern "C" fn(*mut c_void) -> i32;
pub type Close = unsafe extern "C" fn(*mut c_void, *mut u64) -> i32;
/// `int f(dplog_producer *p, uint64_t n, uint64_t ts0)` of log_loop.c.
pub type CLoop = unsafe extern "C" fn(*mut c_void, u64, u64) -> i32;

/// The configuration of both sides: a 16384-slot ring, `block`, text to
/// /dev/null, the consumer on CPU 1, the NAT schemas served (the C
/// handle logs NAT44 sessions; the Rust side is a NAT logger by name).
pub const TOML: &str = "[ring]\ncapacity = 16384\nbackpressure = \"block\"\nconsumer_cpu = 1\n\
                        [schemas]\nnat = true\n\
                        [format]\ntype = \"text\"\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n";

/// The record both sides log: constant fields (the C loops' are the same),
/// `timestamp_ns` set per record.
pub fn record() -> Nat44SessionRecord {
    Nat44SessionRecord {
        header: RecordHeader::of::<Nat44SessionRecord>(),
        src_addr: 0x0A00_0001,
        post_nat_src_addr: 0xC633_6401,
        dst_addr: 0xCB00_7101,
        src_port: 40000,
        post_napt_src_port: 1024,
        dst_port: 443,
        protocol: 6,
        nat_event: NatEvent::Nat44SessionCreate as u8,
        ..Default::default()
    }
}

/// The C ABI of target/<profile>/libdplog.so and the C loops.
pub struct CApi {
    pub open_str: OpenStr,
    pub start: Start,
    pub producer_new: ProducerNew,
    pub log: Log,
    pub stats: Stats,
    pub producer_free: ProducerFree,
    pub close: Close,
    /// `dplog_log` from C: the header's inline path.
    pub loop_inline: CLoop,
    /// `(dplog_log)` from C: the exported function.
    pub loop_call: CLoop,
    /// `dplog_log` of a record zeroed and filled field by field per call.
    pub loop_fields: CLoop,
    /// `dplog_reserve` + fill in the slot + `dplog_commit`.
    pub loop_reserve: CLoop,
    /// `dplog_log` (inline path), each call timed with the TSC into
    /// `ticks[i]` (x86-64 only; the latency bench).
    pub loop_latency: Option<CLatencyLoop>,
    /// As `loop_latency`, the record's time read inside each timed call
    /// with `dplog_now_ns` (clock 0) or the inline `dplog_now_ticks` (1).
    pub loop_latency_clock: Option<CClockLatencyLoop>,
}

/// `int f(dplog_producer *p, uint64_t n, uint32_t clock, uint32_t *ticks)`
/// of log_loop.c.
pub type CClockLatencyLoop = unsafe extern "C" fn(*mut c_void, u64, u32, *mut u32) -> i32;

/// `int f(dplog_producer *p, uint64_t n, uint64_t ts0, uint32_t *ticks)`
/// of log_loop.c.
pub type CLatencyLoop = unsafe extern "C" fn(*mut c_void, u64, u64, *mut u32) -> i32;

/// Resolves `name` in the dlopen handle `h` as a function pointer `F`.
///
/// # Safety
/// `F` must be the C signature of `name`.
unsafe fn sym<F: Copy>(h: *mut c_void, name: &str) -> F {
    let n = CString::new(name).expect("no NUL");
    // SAFETY: h is a live dlopen handle; n is NUL-terminated.
    let p = unsafe { libc::dlsym(h, n.as_ptr()) };
    assert!(!p.is_null(), "missing symbol {name}");
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: a function pointer of the signature the caller vouches for.
    unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn dlopen(path: &Path, flags: i32) -> *mut c_void {
    let c = CString::new(path.to_str().expect("UTF-8 path")).expect("no NUL");
    // SAFETY: a NUL-terminated path; the library is never dlclosed.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    assert!(!h.is_null(), "cannot dlopen {}", path.display());
    h
}

/// Compiles benches/c/log_loop.c with `cc -O2` into the target directory
/// (its `dplog_log_refill` resolves against the already loaded
/// libdplog.so) and returns the path.
fn build_c_loops(target: &Path) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = manifest.join("benches/c/log_loop.c");
    let include = manifest.join("../include");
    let out = target.join("libdplog_bench_c_loops.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args([
            "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
        ])
        .arg("-I")
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(status.success(), "{cc} failed on {}", src.display());
    out
}

/// Loads target/<profile>/libdplog.so (global, so the C loops link to it)
/// and the C loops.
pub fn load() -> CApi {
    // target/<profile>/deps/<bench>-<hash> -> target/<profile>/libdplog.so
    let exe = std::env::current_exe().expect("bench path");
    let target = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .to_path_buf();
    let lib = dlopen(
        &target.join("libdplog.so"),
        libc::RTLD_NOW | libc::RTLD_GLOBAL,
    );
    let loops = dlopen(&build_c_loops(&target), libc::RTLD_NOW | libc::RTLD_LOCAL);
    // SAFETY: each type is the symbol's signature in include/dplog.h or
    // benches/c/log_loop.c.
    unsafe {
        CApi {
            open_str: sym(lib, "dplog_open_str"),
            start: sym(lib, "dplog_start"),
            producer_new: sym(lib, "dplog_producer_new"),
            log: sym(lib, "dplog_log"),
            stats: sym(lib, "dplog_stats"),
            producer_free: sym(lib, "dplog_producer_free"),
            close: sym(lib, "dplog_close"),
            loop_inline: sym(loops, "dplog_bench_log_inline"),
            loop_call: sym(loops, "dplog_bench_log_call"),
            loop_fields: sym(loops, "dplog_bench_log_fields"),
            loop_reserve: sym(loops, "dplog_bench_reserve_fields"),
            loop_latency: cfg!(target_arch = "x86_64")
                .then(|| sym(loops, "dplog_bench_log_latency")),
            loop_latency_clock: cfg!(target_arch = "x86_64")
                .then(|| sym(loops, "dplog_bench_log_latency_clock")),
        }
    }
}
