//! The logger handle (`struct dplog`): its state machine (opened, started,
//! closed), the state its producers share, the handle lookup every logger
//! call starts with, and `dplog_open`/`dplog_open_str`.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, CStr};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex, Weak};

use dplog::config::{LogConfig, SinkConfig};
use dplog::metrics::MetricsServer;
use dplog::sinks::BoxSink;
use dplog::{Schema, Snapshot};

use crate::prometheus::{combined, AnySource, Metrics};
use crate::result::{
    config_error, dplog_result, fail, guard, DPLOG_ERR_CLOSED, DPLOG_ERR_INVALID_ARG, DPLOG_ERR_IO,
    DPLOG_ERR_NULL, DPLOG_ERR_STATE, DPLOG_OK,
};
use crate::sizes::SchemaSizes;
use crate::slots::{slot_bytes_of, AnyLogger, AttachedCounts};
use crate::tombstone::{check_magic, lock, MAGIC_LIVE};

/// State shared by a logger and its producers.
pub(crate) struct Shared {
    /// Ring ids with a live producer.
    pub(crate) rings: Mutex<HashSet<u32>>,
    /// Set by `dplog_close`; producers check it before every record.
    pub(crate) closed: AtomicBool,
    /// Address of the `end` field of each live producer's inline window,
    /// by ring id: `dplog_close` empties every window (see
    /// [`dplog_log_window`](crate::dplog_log_window)). Producers are never
    /// deallocated, so the addresses stay valid; a producer removes its
    /// entry when freed.
    pub(crate) windows: Mutex<HashMap<u32, usize>>,
    /// The C ring id of each ring ever created, by (consumer index, ring
    /// id within that consumer's logger): `dplog_close` names stopped
    /// rings by their C id.
    pub(crate) ring_names: Mutex<HashMap<(usize, u32), u32>>,
    /// The `[metrics]` listener, from `dplog_open` to `dplog_close`.
    pub(crate) metrics: Mutex<Option<Metrics>>,
    /// The counts of the attached rings (`dplog_attach`) whose producers
    /// were freed: `dplog_close` of a handle that attaches reports them.
    pub(crate) attached: Mutex<AttachedCounts>,
}

/// Opaque logger handle: one configuration, one sink, one consumer thread,
/// any number of producers. Created by `dplog_open`/`dplog_open_str`,
/// destroyed by `dplog_close`.
pub struct dplog_t {
    pub(crate) magic: AtomicU32,
    /// `[ring] slot_bytes`: 32, 64 or 128.
    pub(crate) slot_bytes: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) state: Mutex<State>,
}

impl core::fmt::Debug for dplog_t {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Relaxed: a diagnostic snapshot (partner: none needed).
        f.debug_struct("dplog_t")
            .field(
                "magic",
                &self.magic.load(core::sync::atomic::Ordering::Relaxed),
            )
            .field("slot_bytes", &self.slot_bytes)
            .finish_non_exhaustive()
    }
}

pub(crate) enum State {
    Opened(Box<Pending>),
    Started(Box<Running>),
    Closed,
}

impl State {
    /// The configuration of a handle not yet started; `Err` (recorded with
    /// [`fail`]) with `DPLOG_ERR_STATE` and `started` (what the caller
    /// should have done) once it is started, `DPLOG_ERR_CLOSED` once closed.
    pub(crate) fn opened(
        &mut self,
        started: impl Into<String>,
    ) -> Result<&mut Pending, dplog_result> {
        match self {
            State::Opened(p) => Ok(p),
            State::Started(_) => Err(fail(DPLOG_ERR_STATE, started)),
            State::Closed => Err(fail(DPLOG_ERR_CLOSED, "dplog handle is closed")),
        }
    }
}

pub(crate) struct Pending {
    pub(crate) config: LogConfig,
    /// The sink the config names, opened at `dplog_open` time (fail
    /// fast); `None` for the default sink (opened by `dplog_start`) and
    /// once a start took it.
    pub(crate) sink: Option<BoxSink>,
    /// Record types registered with `dplog_schema_register`.
    pub(crate) schemas: Vec<Schema>,
    /// The NAT schemas were asked for (`dplog_register_nat_schemas` or
    /// `[schemas] nat = true`).
    pub(crate) nat: bool,
}

/// The record types a handle serves, in the order the format takes them:
/// its `registered` ones, then the NAT schemas that fit a
/// `slot_bytes`-byte slot if it asked for them (`nat`); nothing else.
pub(crate) fn served(registered: &[Schema], nat: bool, slot_bytes: usize) -> Vec<&Schema> {
    let nat = if nat {
        nat_schemas(slot_bytes)
    } else {
        Vec::new()
    };
    registered.iter().chain(nat).collect()
}

pub(crate) struct Running {
    /// One logger (consumer thread + sink) per consumer core; ring `r`
    /// is drained by `loggers[r % loggers.len()]`.
    pub(crate) loggers: Vec<AnyLogger>,
    pub(crate) sizes: Arc<SchemaSizes>,
}

/// # Safety
/// `h` is NULL or a pointer returned by `dplog_open*` (live or closed).
pub(crate) unsafe fn logger<'a>(h: *const dplog_t) -> Result<&'a dplog_t, dplog_result> {
    if h.is_null() {
        return Err(fail(DPLOG_ERR_NULL, "dplog handle is NULL"));
    }
    // SAFETY: non-NULL and, by the caller's contract, returned by
    // dplog_open*; handles are never deallocated (see TOMBSTONES).
    let l = unsafe { &*h };
    check_magic(&l.magic, "dplog handle")?;
    Ok(l)
}

/// Binds `addr` and starts serving the counters of `shared`'s logger
/// (empty until [`Metrics::attach`]).
///
/// Errors: the address (non-loopback without `allow`) or the bind.
fn serve_metrics(addr: SocketAddr, allow: bool, shared: Weak<Shared>) -> std::io::Result<Metrics> {
    let sources: Arc<Mutex<Vec<AnySource>>> = Arc::default();
    let s = sources.clone();
    let server = MetricsServer::serve_snapshots(addr, allow, move || {
        let sources = lock(&s).clone();
        match shared.upgrade() {
            Some(sh) => combined(&sources, &lock(&sh.ring_names)),
            None => Snapshot::default(),
        }
    })?;
    Ok(Metrics { server, sources })
}

fn open_config(config: LogConfig, out: *mut *mut dplog_t) -> dplog_result {
    // `[metrics]`: loopback only unless allowed (see `crate::metrics`).
    if let Err(e) = config.metrics.check() {
        return config_error(e);
    }
    // Fail fast: the slot size, the format's settings and the sink are
    // checked now, not at start.
    if let Some(b) = config.ring.slot_bytes {
        if let Err(e) = dplog::config::check_slots(Some(b), b, &[]) {
            return config_error(e);
        }
    }
    // Every `[ring]` setting (capacity, burst, batch_bytes, ...) before
    // the sink below creates its file.
    if let Err(e) = config.check_ring(slot_bytes_of(&config)) {
        return config_error(e);
    }
    if let Err(e) = check_format_early(&config) {
        return config_error(e);
    }
    let shared = Arc::new(Shared {
        rings: Mutex::new(HashSet::new()),
        closed: AtomicBool::new(false),
        windows: Mutex::new(HashMap::new()),
        ring_names: Mutex::new(HashMap::new()),
        metrics: Mutex::new(None),
        attached: Mutex::new(AttachedCounts::default()),
    });
    // Bound before the sink opens: a port in use creates no log file.
    if let Some(addr) = config.metrics.prometheus_listen {
        match serve_metrics(
            addr,
            config.metrics.allow_non_loopback,
            Arc::downgrade(&shared),
        ) {
            Ok(m) => *lock(&shared.metrics) = Some(m),
            Err(e) => {
                return fail(
                    DPLOG_ERR_IO,
                    format!("cannot serve metrics on {addr} (metrics.prometheus_listen): {e}"),
                )
            }
        }
    }
    // A sink the config names opens now (fail fast). Without one, the
    // default file (`dplog.log` in the working directory) waits for
    // `dplog_start`: a handle that only attaches rings for dplogd never
    // starts, and must leave no file behind.
    let sink = if config.sink == SinkConfig::default() {
        None
    } else {
        match config.sink.build() {
            Ok(s) => Some(s),
            Err(e) => return fail(DPLOG_ERR_IO, format!("cannot open sink: {e}")),
        }
    };
    let h = Box::new(dplog_t {
        magic: AtomicU32::new(MAGIC_LIVE),
        slot_bytes: slot_bytes_of(&config),
        shared,
        state: Mutex::new(State::Opened(Box::new(Pending {
            nat: config.schemas.nat,
            config,
            sink,
            schemas: Vec::new(),
        }))),
    });
    // SAFETY: out is non-NULL (checked by the callers) and writable.
    unsafe { out.write(Box::into_raw(h)) };
    DPLOG_OK
}

/// The NAT schemas a logger of `slot_bytes`-byte slots carries: those
/// whose records fit its slot.
pub(crate) fn nat_schemas(slot_bytes: usize) -> Vec<&'static Schema> {
    dplog::nat::all()
        .into_iter()
        .filter(|s| s.size() <= slot_bytes)
        .collect()
}

/// What of `[format]` can be checked before any user schema is
/// registered: the format's own settings (syslog, IPFIX, `template` with
/// a format other than text) and, with `[schemas] nat = true`, the
/// templates of the NAT schemas in `[format.templates]`. A plain
/// `template`, templates naming other types and `[format.bytes_fields]`
/// are checked at `dplog_start`, over the served schemas.
fn check_format_early(config: &LogConfig) -> Result<(), dplog::config::ConfigError> {
    let nat = if config.schemas.nat {
        nat_schemas(slot_bytes_of(config))
    } else {
        Vec::new()
    };
    let mut format = config.format.clone();
    // BYTES renderings by field name may name a type registered later.
    format.bytes_fields.clear();
    if format.kind == dplog::formatters::Format::Text {
        format.template = None;
        format
            .templates
            .retain(|name, _| nat.iter().any(|s| s.name() == name));
    }
    format.formatter(&nat).map(|_| ())
}

/// Reads the TOML configuration file at `config_path` (keys: see the README
/// and `dplog::config`; every key optional), opens the sink it names (a
/// file sink's file is created now, mode 0640) and returns a new logger
/// handle in `*out`. No thread is started until `dplog_start`. A config
/// without `[sink]` (or with just the default written out) gets the file
/// sink `dplog.log` in the working directory, which `dplog_start` opens:
/// a handle that only attaches rings (`dplog_attach`, drained by dplogd)
/// creates no file.
///
/// `[ring] slot_bytes` (32, 64 or 128; default 64) is the size of every
/// ring slot of this logger and the largest record it takes: user types
/// up to that size (`dplog_schema_register`). The handle serves only the
/// types registered on it: the built-in NAT schemas (those that fit the
/// slot) only after `dplog_register_nat_schemas` or with `[schemas] nat =
/// true` in the config. The format is compiled at `dplog_start`, when
/// every type is registered (so `[format] template` and
/// `[format.templates]` may name them); what can be checked before —
/// the format's settings, templates of NAT schemas asked for in the
/// config — is checked here. So is every `[ring]` setting: a `capacity`
/// that is not a power of two from 1 to 16777216 (0, 3, 2^25), a `burst`
/// of 0, a `batch_bytes` outside 64 KiB..256 MiB, ... is refused with
/// `DPLOG_ERR_CONFIG` naming the key, before the sink's file is created.
///
/// Errors: `DPLOG_ERR_NULL` (a NULL argument), `DPLOG_ERR_INVALID_ARG` (path
/// not UTF-8), `DPLOG_ERR_CONFIG` (file unreadable, bad TOML, unknown key,
/// wrong value such as `slot_bytes = 48`; `dplog_last_error` names key and
/// line), `DPLOG_ERR_IO` (sink cannot be opened). `*out` is written only
/// on success.
///
/// Ownership: the caller owns the handle and must release it with
/// `dplog_close`. Thread-safety: any thread.
///
/// # Safety
/// `config_path` is NULL or a NUL-terminated string; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_open(
    config_path: *const c_char,
    out: *mut *mut dplog_t,
) -> dplog_result {
    guard(|| {
        if config_path.is_null() || out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_open: NULL argument");
        }
        // SAFETY: non-NULL, NUL-terminated (caller contract).
        let path = match unsafe { CStr::from_ptr(config_path) }.to_str() {
            Ok(p) => p,
            Err(_) => return fail(DPLOG_ERR_INVALID_ARG, "config path is not UTF-8"),
        };
        match dplog::config::read_toml::<LogConfig>(std::path::Path::new(path)) {
            Ok(c) => open_config(c, out),
            Err(e) => config_error(e),
        }
    })
}

/// Like `dplog_open`, with the TOML document itself in `toml`
/// (NUL-terminated, UTF-8; an empty string gives every default).
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_INVALID_ARG` (not UTF-8),
/// `DPLOG_ERR_CONFIG`, `DPLOG_ERR_IO`; `*out` is written only on success.
/// Ownership and thread-safety as `dplog_open`.
///
/// # Safety
/// `toml` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_open_str(
    toml: *const c_char,
    out: *mut *mut dplog_t,
) -> dplog_result {
    guard(|| {
        if toml.is_null() || out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_open_str: NULL argument");
        }
        // SAFETY: non-NULL, NUL-terminated (caller contract).
        let text = match unsafe { CStr::from_ptr(toml) }.to_str() {
            Ok(t) => t,
            Err(_) => return fail(DPLOG_ERR_INVALID_ARG, "config text is not UTF-8"),
        };
        match LogConfig::from_toml_str(text) {
            Ok(c) => open_config(c, out),
            Err(e) => config_error(e),
        }
    })
}

/// Stores in `*out` the ring slot size of the logger in bytes (`[ring]
/// slot_bytes`: 32, 64 or 128; 64 by default): the largest record it
/// takes, and the distance between the slots `dplog_reserve` hands out.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`. Thread-safety: any
/// thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_slot_bytes(h: *const dplog_t, out: *mut usize) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_slot_bytes: out is NULL");
        }
        // SAFETY: non-NULL (checked), writable (caller contract).
        unsafe { out.write(l.slot_bytes) };
        DPLOG_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{dplog_last_error, DPLOG_ERR_CONFIG};

    /// A ring size no ring can have is refused by `dplog_open` and
    /// `dplog_open_str` themselves, naming the key, and the file sink's
    /// file is never created.
    #[test]
    fn a_bad_ring_capacity_is_refused_at_open_and_creates_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("fw-drops.log");
        for (ring, want) in [
            ("capacity = 3", "[ring] capacity = 3 must be a power of two"),
            ("capacity = 0", "[ring] capacity = 0 must be a power of two"),
            (
                "capacity = 33554432",
                "[ring] capacity = 33554432 is above the limit of 16777216",
            ),
            ("burst = 0", "[ring] burst"),
        ] {
            let toml = format!(
                "[ring]\n{ring}\n[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
                log.display()
            );
            let cfg = dir.path().join("fw.toml");
            std::fs::write(&cfg, &toml).unwrap();
            let text = std::ffi::CString::new(toml).unwrap();
            let path = std::ffi::CString::new(cfg.to_str().unwrap()).unwrap();
            for by_path in [false, true] {
                let mut h: *mut dplog_t = core::ptr::null_mut();
                // SAFETY: both strings are NUL-terminated, h is writable.
                let r = unsafe {
                    if by_path {
                        dplog_open(path.as_ptr(), &mut h)
                    } else {
                        dplog_open_str(text.as_ptr(), &mut h)
                    }
                };
                assert_eq!(r, DPLOG_ERR_CONFIG, "{ring} (by path: {by_path})");
                assert!(h.is_null(), "*out written only on success");
                let msg = crate::testutil::last_error();
                assert!(msg.contains(want), "{ring}: {msg}");
                assert!(
                    !log.exists(),
                    "{ring}: refused, yet {} exists",
                    log.display()
                );
            }
        }
        // The bounds themselves open (and create the file).
        let toml = format!(
            "[ring]\ncapacity = 16777216\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            log.display()
        );
        let h = crate::testutil::open(&toml);
        assert!(log.exists());
        // SAFETY: h is live (not started); no stats wanted.
        let rc = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(rc, DPLOG_OK);
    }

    #[test]
    fn a_non_loopback_metrics_listener_is_refused_unless_allowed() {
        let text = c"[metrics]\nprometheus_listen = \"0.0.0.0:9464\"\n";
        let mut h: *mut dplog_t = core::ptr::null_mut();
        // SAFETY: text is NUL-terminated, h is writable.
        let r = unsafe { dplog_open_str(text.as_ptr(), &mut h) };
        assert_eq!(r, DPLOG_ERR_CONFIG);
        assert!(h.is_null(), "*out written only on success");
        let mut buf = [0 as c_char; 256];
        let mut len = 0usize;
        // SAFETY: buf is 256 bytes, len is writable.
        unsafe { dplog_last_error(buf.as_mut_ptr(), buf.len(), &mut len) };
        // SAFETY: dplog_last_error NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(
            msg.contains("prometheus_listen") && msg.contains("allow_non_loopback"),
            "{msg}"
        );
    }
    /// A `[format.bytes_fields]` entry names a field of a type the program
    /// registers after `dplog_open`: checked at `dplog_start`, over the
    /// registered types.
    #[test]
    fn bytes_fields_may_name_a_field_registered_after_open() {
        let register_qname = |h: *mut dplog_t| {
            crate::testutil::register_one_field(
                h,
                c"dnsName",
                16,
                c"qname",
                8,
                crate::types::DPLOG_FIELD_BYTES,
            )
        };
        let cfg = |field: &str| {
            format!(
                "[format]\ntype = \"json\"\n[format.bytes_fields]\n{field} = \"hex\"\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n"
            )
        };
        // A field the registered type has: opened, registered, started.
        let h = crate::testutil::open(&cfg("qname"));
        register_qname(h);
        // SAFETY: h is live.
        let r = unsafe { crate::dplog_start(h, core::ptr::null(), 0) };
        assert_eq!(r, DPLOG_OK);
        // SAFETY: h is live; no stats wanted.
        let r = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(r, DPLOG_OK);
        // A field no registered type has: refused at dplog_start, naming it.
        let h = crate::testutil::open(&cfg("qnmae"));
        register_qname(h);
        // SAFETY: h is live.
        let r = unsafe { crate::dplog_start(h, core::ptr::null(), 0) };
        assert_eq!(r, DPLOG_ERR_CONFIG);
        let mut buf = [0 as c_char; 512];
        let mut len = 0usize;
        // SAFETY: buf is 512 bytes, len is writable.
        unsafe { dplog_last_error(buf.as_mut_ptr(), buf.len(), &mut len) };
        // SAFETY: dplog_last_error NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("\"qnmae\"") && msg.contains("qname"), "{msg}");
        // SAFETY: h is live (not started); no stats wanted.
        unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
    }
}
