//! `dplog_attach`: a producer whose ring is a shared-memory file that a
//! separate `dplogd` process drains, so the records pushed survive a
//! crash of this process (`dplog::shm`). The producer is an ordinary
//! `dplog_producer`: `dplog_log`, `dplog_log_burst`, `dplog_reserve` /
//! `dplog_commit`, `dplog_producer_flush` and `dplog_producer_free` work
//! on it as on one of `dplog_producer_new`.

use std::cell::UnsafeCell;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;

use dplog::shm::{ShmLogProducer, ShmOptions};
use dplog::{RecordRules, Schema, Slot128, Slot32, Slot64};

use crate::handle::{dplog_t, logger};
use crate::producer::{dplog_producer_t, guard_producer, producer, ProducerState, Reservation};
use crate::result::{
    dplog_result, fail, guard, DPLOG_ERR_CONFIG, DPLOG_ERR_INVALID_ARG, DPLOG_ERR_IO,
    DPLOG_ERR_NULL, DPLOG_ERR_RING_IN_USE, DPLOG_OK,
};
use crate::sizes::SchemaSizes;
use crate::slots::AnyProducer;
use crate::tombstone::{lock, MAGIC_LIVE};
use crate::window::dplog_log_window;

fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, dplog_result> {
    if p.is_null() {
        return Err(fail(
            DPLOG_ERR_NULL,
            format!("dplog_attach: {what} is NULL"),
        ));
    }
    // SAFETY: non-NULL and NUL-terminated (caller contract).
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| {
        fail(
            DPLOG_ERR_INVALID_ARG,
            format!("dplog_attach: {what} is not UTF-8"),
        )
    })
}

/// Creates a producer whose ring is a new shared-memory file
/// `<dir>/<name>.<pid>.<nonce>.ring` (mode 0600), drained by `dplogd
/// --rings <dir>` instead of a consumer of this process. The ring has the
/// handle's `[ring] capacity`, `slot_bytes` and `backpressure` (`block`
/// waits while the daemon is away; `drop_newest` counts, and the daemon
/// reports the count when it comes back) and declares the handle's record
/// types: the ones registered with `dplog_schema_register` (register
/// them first) and, if asked for (`dplog_register_nat_schemas` or
/// `[schemas] nat = true`), the NAT types that fit the slot. `dir` is a tmpfs
/// (`/dev/shm/...`) or hugetlbfs directory that exists; `name` is 1 to 32
/// letters, digits, `_` or `-`. `ring_id` is the producer's id within
/// the handle, as for `dplog_producer_new`.
///
/// The handle is opened but not started: a handle that attaches rings
/// runs no consumer of its own (`DPLOG_ERR_STATE` after `dplog_start`),
/// and its config needs no `[sink]`: without one it creates no file
/// (dplogd's config chooses the format and the outputs).
/// Every record whose `dplog_log` returned `DPLOG_OK` is written by the
/// daemon once, even if this process is killed right after.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_INVALID_ARG` (name or a record
/// type that does not fit the ring), `DPLOG_ERR_STATE`,
/// `DPLOG_ERR_CLOSED`, `DPLOG_ERR_RING_IN_USE`, `DPLOG_ERR_CONFIG` (a
/// capacity above 2^24; a `[format]` in the handle's config, which the
/// ring would ignore: dplogd's config chooses the format), `DPLOG_ERR_IO`
/// (the directory, no space; `dplog_last_error` names the directory).
/// `*out` is written only on success.
///
/// Ownership: as `dplog_producer_new` (`dplog_producer_free` closes the
/// ring: the daemon drains it and removes the file). Thread-safety: any
/// thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `dir` and `name` are NULL or
/// NUL-terminated strings; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_attach(
    h: *mut dplog_t,
    ring_id: u32,
    dir: *const c_char,
    name: *const c_char,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    // SAFETY: the caller's contract, passed on unchanged.
    unsafe { attach(h, ring_id, dir, name, None, None, out) }
}

/// `dplog_attach` with the ring file given the group `gid` (mode 0640
/// instead of 0600), so a `dplogd` running as another user that is a
/// member of that group can serve it (it only reads the ring; it keeps
/// its position in a file of its own, `<ring>.consumer`, mode 0640 with
/// the same group, which this process must be able to read: be a member
/// of `gid` too). This process must be allowed to give its files that
/// group (a member of it, or privileged).
///
/// Errors: as `dplog_attach`; `DPLOG_ERR_IO` if the group cannot be set
/// (not a member: EPERM). `*out` is written only on success.
///
/// Ownership and thread-safety: as `dplog_attach`.
///
/// # Safety
/// As `dplog_attach`.
#[no_mangle]
pub unsafe extern "C" fn dplog_attach_group(
    h: *mut dplog_t,
    ring_id: u32,
    dir: *const c_char,
    name: *const c_char,
    gid: u32,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    // SAFETY: the caller's contract, passed on unchanged.
    unsafe { attach(h, ring_id, dir, name, Some(gid), None, out) }
}

/// `dplog_attach_group` for a `dplogd` running as the user `daemon_uid`
/// (neither this process's user nor root, e.g. the `dplog` user of a
/// systemd service): the ring uses the daemon's consumer file
/// (`<ring>.consumer`) only if its owner is this process's effective
/// uid, root or `daemon_uid`, and no group or other may write it; with
/// `dplog_attach` and `dplog_attach_group` only this user and root are
/// trusted. A refused file leaves the ring unserved (as while no daemon
/// runs: `block` waits, `drop_newest` counts), so that whoever may create
/// files in `dir` cannot move the daemon's position (records overwritten)
/// or stop the logging.
///
/// Errors: as `dplog_attach_group`. `*out` is written only on success.
///
/// Ownership and thread-safety: as `dplog_attach`.
///
/// # Safety
/// As `dplog_attach`.
#[no_mangle]
pub unsafe extern "C" fn dplog_attach_daemon(
    h: *mut dplog_t,
    ring_id: u32,
    dir: *const c_char,
    name: *const c_char,
    gid: u32,
    daemon_uid: u32,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    // SAFETY: the caller's contract, passed on unchanged.
    unsafe { attach(h, ring_id, dir, name, Some(gid), Some(daemon_uid), out) }
}

/// `dplog_attach`, `dplog_attach_group` and `dplog_attach_daemon`: the
/// ring of `group` (`None`: mode 0600), trusting consumer files of
/// `daemon_uid` besides this user's and root's.
///
/// # Safety
/// As `dplog_attach`.
unsafe fn attach(
    h: *mut dplog_t,
    ring_id: u32,
    dir: *const c_char,
    name: *const c_char,
    group: Option<u32>,
    daemon_uid: Option<u32>,
    out: *mut *mut dplog_producer_t,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_attach: out is NULL");
        }
        let dir = match c_str(dir, "dir") {
            Ok(d) => PathBuf::from(d),
            Err(e) => return e,
        };
        let name = match c_str(name, "name") {
            Ok(n) => n.to_string(),
            Err(e) => return e,
        };
        let mut st = lock(&l.state);
        let pending = match st.opened(
            "dplog_attach: the handle is started; attach before dplog_start (a handle \
             whose rings dplogd drains runs no consumer)",
        ) {
            Ok(p) => p,
            Err(e) => return e,
        };
        // dplogd's own config chooses the format: a `[format]` here would
        // be ignored, and ignored settings are refused as the config's
        // rules refuse them.
        if pending.config.format != dplog::config::FormatConfig::default() {
            return fail(
                DPLOG_ERR_CONFIG,
                format!(
                    "dplog_attach: the handle's config has a [format] (type = \"{}\") that a ring dplogd drains would ignore: dplogd's own config chooses the format and the outputs; remove [format] from this config (a handle that formats its records itself runs dplog_start instead)",
                    pending.config.format.kind.name()
                ),
            );
        }
        let slot_bytes = l.slot_bytes;
        // The ring declares what the handle serves, no more: dplogd
        // formats it with these.
        let all: Vec<&Schema> = crate::handle::served(&pending.schemas, pending.nat, slot_bytes);
        let mut cfg = pending.config.logger_config();
        cfg.schemas = match pending.config.schema_table(&all) {
            Ok(t) => t,
            Err(e) => return fail(DPLOG_ERR_CONFIG, e.to_string()),
        };
        let shown_dir = dir.display().to_string();
        let opts = ShmOptions {
            dir,
            name,
            capacity: cfg.ring_capacity,
            group,
            daemon_uid,
        };
        // The id first: a refused attach creates no ring file.
        if !lock(&l.shared.rings).insert(ring_id) {
            return fail(
                DPLOG_ERR_RING_IN_USE,
                format!("ring {ring_id} already has a producer"),
            );
        }
        let made = match slot_bytes {
            32 => ShmLogProducer::<Slot32>::create(&opts, &cfg, &all, RecordRules::own())
                .map(AnyProducer::M32),
            128 => ShmLogProducer::<Slot128>::create(&opts, &cfg, &all, RecordRules::own())
                .map(AnyProducer::M128),
            _ => ShmLogProducer::<Slot64>::create(&opts, &cfg, &all, RecordRules::own())
                .map(AnyProducer::M64),
        };
        let prod = match made {
            Ok(p) => p,
            Err(e) => {
                lock(&l.shared.rings).remove(&ring_id);
                return match e {
                    dplog::shm::ShmError::Io(e) => fail(
                        DPLOG_ERR_IO,
                        format!(
                            "dplog_attach: ring directory {shown_dir}: {e} (an existing directory on a tmpfs or hugetlbfs, mode 0700 or 0770, that dplogd serves with --rings)"
                        ),
                    ),
                    e => fail(DPLOG_ERR_INVALID_ARG, format!("dplog_attach: {e}")),
                };
            }
        };
        let policy = prod.policy();
        let fast_path = matches!(
            policy,
            dplog::Backpressure::Block | dplog::Backpressure::Drop
        );
        let obj = Box::new(dplog_producer_t {
            window: UnsafeCell::new(dplog_log_window::EMPTY),
            magic: AtomicU32::new(MAGIC_LIVE),
            #[cfg(debug_assertions)]
            user: core::sync::atomic::AtomicUsize::new(0),
            inner: UnsafeCell::new(Some(ProducerState {
                prod,
                ring_id,
                shared: l.shared.clone(),
                sizes: Arc::new(SchemaSizes::new(
                    all.iter().copied(),
                    pending.nat,
                    slot_bytes,
                )),
                drop_policy: policy != dplog::Backpressure::Block,
                fast_path,
                fast_path_policy: fast_path,
                staging: None,
                reservation: Reservation::None,
                reserved_schema: 0,
                reserved_size: 0,
                // No inline window: every record goes through the library.
                window_first: 0,
            })),
        });
        lock(&l.shared.windows).insert(ring_id, obj.window.get() as usize);
        // SAFETY: out is non-NULL (checked) and writable (caller contract).
        unsafe { out.write(Box::into_raw(obj)) };
        DPLOG_OK
    })
}

/// Bounds how long a `dplog_attach` producer under `backpressure =
/// "block"` waits while its ring is full and no slot is freed: after
/// `timeout_ms` milliseconds (from the end of the pause spins, up to 1 ms
/// more) the call (`dplog_log`, `dplog_log_burst`, `dplog_commit` of a
/// reservation) gives up and returns `DPLOG_ERR_TIMEOUT`, the records not
/// enqueued dropped and counted in `dropped_disconnected` (dplogd reports
/// them in-band once it serves the ring). While no slot is freed the calls
/// after it give up at once (after the pause spins); the first slot freed
/// starts the count again. `0` (the default) waits for as long as it takes,
/// as `block` always did: a ring no dplogd serves then blocks its producer
/// until one starts (after 1 s of it the library says so once on stderr,
/// naming the ring and its directory). A ring full under `"drop"` or
/// `"degrade"` never waits. The fast path (a ring with room) is not
/// changed: the clock is read only while a call waits.
///
/// Errors: `DPLOG_ERR_NULL`, `DPLOG_ERR_CLOSED`, `DPLOG_ERR_INVALID_ARG`
/// (not a producer of `dplog_attach`: an in-process ring's consumer
/// thread always runs; `DPLOG_ERR_CONSUMER_GONE` if it dies).
///
/// Thread-safety: one thread at a time per producer, like `dplog_log`.
///
/// # Safety
/// `p` is NULL or returned by `dplog_attach*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_set_block_timeout(
    p: *mut dplog_producer_t,
    timeout_ms: u32,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let t = (timeout_ms > 0).then(|| Duration::from_millis(u64::from(timeout_ms)));
        if st.prod.set_block_timeout(t) {
            DPLOG_OK
        } else {
            fail(
                DPLOG_ERR_INVALID_ARG,
                "dplog_producer_set_block_timeout: not a producer of dplog_attach (an in-process ring has no block timeout)",
            )
        }
    })
}

/// Stores in `*attached` whether a consumer serves the producer's ring:
/// for a producer of `dplog_attach`, 1 once a `dplogd` has attached to the
/// ring (its consumer file `<ring>.consumer` exists and is trusted, see
/// `dplog_attach_daemon`) and has not quarantined it, else 0 (no dplogd
/// runs with `--rings` on the ring's directory, or its consumer file is
/// refused: the block timeout's message says why). A dplogd that stopped
/// after it attached leaves the ring attached (the daemon's next start
/// takes the ring over where it stopped): a wait for it is bounded by
/// `dplog_producer_set_block_timeout`. For a producer of
/// `dplog_producer_new`, 1 while its logger's consumer thread runs.
/// Costs at most one `open` of the consumer file (at most once a
/// millisecond while none is attached); not for the per-record path.
///
/// Errors: `DPLOG_ERR_NULL` (`p` or `attached`), `DPLOG_ERR_CLOSED`.
///
/// Thread-safety: one thread at a time per producer, like `dplog_log`.
///
/// # Safety
/// `p` is NULL or returned by `dplog_producer_new` or `dplog_attach*`;
/// `attached` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_producer_consumer_attached(
    p: *mut dplog_producer_t,
    attached: *mut i32,
) -> dplog_result {
    guard_producer(p, || {
        // SAFETY: caller contract on p.
        let st = match unsafe { producer(p) } {
            Ok(s) => s,
            Err(e) => return e,
        };
        if attached.is_null() {
            return fail(
                DPLOG_ERR_NULL,
                "dplog_producer_consumer_attached: attached is NULL",
            );
        }
        let yes = match st.prod.consumer_state() {
            Some((on, _)) => on && !st.prod.is_stopped(),
            None => !st.prod.is_disconnected(),
        };
        // SAFETY: attached is non-NULL (checked) and writable (contract).
        unsafe { attached.write(i32::from(yes)) };
        DPLOG_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::dplog_open_str;
    use crate::producer::dplog_producer_free;

    /// Environment variable naming the ring directory of
    /// [`attach_only_child`]; set only by
    /// [`an_attach_only_handle_creates_no_file`].
    const CHILD_RINGS: &str = "DPLOG_TEST_ATTACH_ONLY_RINGS";

    /// A new empty directory under `base`, removed by the caller.
    fn fresh_dir(base: &std::path::Path, what: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let d = base.join(format!("dplog-ffi-{what}-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&d).unwrap();
        d
    }

    /// The child of [`an_attach_only_handle_creates_no_file`], run in its
    /// own process and working directory: a handle whose config has no
    /// `[sink]` attaches a ring, frees its producer and closes. Ignored
    /// in an ordinary test run (and without the ring directory it does
    /// nothing).
    #[test]
    #[ignore = "run by an_attach_only_handle_creates_no_file in its own process"]
    fn attach_only_child() {
        let Some(rings) = std::env::var_os(CHILD_RINGS) else {
            return;
        };
        let rings = std::ffi::CString::new(rings.into_encoded_bytes()).unwrap();
        let mut h: *mut dplog_t = core::ptr::null_mut();
        // SAFETY: the text is NUL-terminated; h is writable.
        let rc = unsafe { dplog_open_str(c"[ring]\ncapacity = 64\n".as_ptr(), &mut h) };
        assert_eq!(rc, DPLOG_OK);
        let mut p: *mut dplog_producer_t = core::ptr::null_mut();
        // SAFETY: h is live; the strings are NUL-terminated; p is writable.
        let rc = unsafe { dplog_attach(h, 0, rings.as_ptr(), c"attachonly".as_ptr(), &mut p) };
        assert_eq!(rc, DPLOG_OK);
        // SAFETY: p was returned by dplog_attach and is freed once.
        assert_eq!(unsafe { dplog_producer_free(p) }, DPLOG_OK);
        // SAFETY: h is live; no stats wanted.
        let rc = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(rc, DPLOG_OK);
    }

    /// A handle that only attaches rings (dplogd writes its records)
    /// creates nothing in its working directory: no default `dplog.log`.
    /// The C calls run in a child process (this test binary, running
    /// [`attach_only_child`] alone) whose working directory is a fresh
    /// one, so no other test's files meet it.
    #[test]
    fn an_attach_only_handle_creates_no_file() {
        let cwd = fresh_dir(&std::env::temp_dir(), "cwd");
        let shm = std::path::Path::new("/dev/shm");
        let rings = fresh_dir(
            if shm.is_dir() {
                shm
            } else {
                cwd.parent().unwrap()
            },
            "rings",
        );
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "shm::tests::attach_only_child",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_RINGS, &rings)
            .current_dir(&cwd)
            .output()
            .unwrap();
        let created: Vec<String> = std::fs::read_dir(&cwd)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let ring_files: Vec<String> = std::fs::read_dir(&rings)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("attachonly.") && n.ends_with(".ring"))
            .collect();
        let _ = std::fs::remove_dir_all(&cwd);
        let _ = std::fs::remove_dir_all(&rings);
        assert!(
            out.status.success(),
            "child failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The child did attach (its ring file is there, undrained) ...
        assert_eq!(ring_files.len(), 1, "ring files: {ring_files:?}");
        // ... and left its working directory as it found it.
        assert_eq!(
            created,
            Vec::<String>::new(),
            "created in the working directory"
        );
    }

    /// A handle that attached a ring (no dplogd drains it, so a full ring
    /// drops under `drop_newest`) reports at `dplog_close` what that ring's
    /// producer counted, and says the drops: `DPLOG_ERR_UNDELIVERED`, not
    /// `DPLOG_OK` with zeros. A user record type (a DNS query), not NAT.
    #[test]
    fn closing_a_handle_that_attached_reports_the_rings_counts() {
        use crate::result::{DPLOG_ERR_FULL, DPLOG_ERR_UNDELIVERED};
        use crate::testutil::{log_dns_query, open, register_dns_query};
        let shm = std::path::Path::new("/dev/shm");
        let rings = fresh_dir(
            if shm.is_dir() {
                shm
            } else {
                std::path::Path::new("/tmp")
            },
            "counts",
        );
        let dir = std::ffi::CString::new(rings.as_os_str().as_encoded_bytes()).unwrap();
        let h = open("[ring]\ncapacity = 64\nbackpressure = \"drop_newest\"\n");
        let id = register_dns_query(h);
        let mut p: *mut dplog_producer_t = core::ptr::null_mut();
        // SAFETY: h is live; the strings are NUL-terminated; p is writable.
        let rc = unsafe { dplog_attach(h, 0, dir.as_ptr(), c"dns".as_ptr(), &mut p) };
        assert_eq!(rc, DPLOG_OK);
        let (mut ok, mut full) = (0u64, 0u64);
        for q in 0..200 {
            match log_dns_query(p, id, q) {
                DPLOG_OK => ok += 1,
                DPLOG_ERR_FULL => full += 1,
                other => panic!("dplog_log: {other}"),
            }
        }
        assert_eq!((ok, full), (64, 136));
        // SAFETY: p was returned by dplog_attach and is freed once.
        assert_eq!(unsafe { dplog_producer_free(p) }, DPLOG_OK);
        let mut st = crate::dplog_stats::default();
        // SAFETY: h is live; st is writable.
        let rc = unsafe { crate::dplog_close(h, &mut st) };
        let _ = std::fs::remove_dir_all(&rings);
        assert_eq!(rc, DPLOG_ERR_UNDELIVERED);
        assert_eq!(
            (st.produced, st.enqueued, st.dropped_full, st.rings),
            (200, 64, 136, 1)
        );
        assert_eq!(st.written_records, 0, "dplogd counts what it writes");
    }
}
