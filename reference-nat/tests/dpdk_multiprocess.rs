//! DPDK multi-process (feature `dpdk`): two real processes wired by a
//! net_ring port. A primary process (this test binary re-run as the
//! ignored helper test below) creates two `rte_ring`s in hugepage memory
//! and a net_ring port over them (`rte_eth_from_rings`, port 0: Rx reads
//! `to_nat`, Tx writes `from_nat`), then feeds a capture's frames into
//! `to_nat` as mbufs carrying the capture time as their Rx timestamp and
//! collects what comes out of `from_nat`. `dplog-nat --dpdk` runs as the
//! secondary process (`--proc-type=secondary`, same `--file-prefix`): DPDK
//! hands it the primary's port 0 (net_ring's secondary probe,
//! `rte_eth_dev_attach_secondary`), it translates and logs. The records
//! equal those of `dplog-nat --pcap` on the same capture, and the frames
//! that come back are the translated ones.
//!
//! DPDK multi-process needs shared hugepage memory (`--no-huge` has no
//! shared memory). The test reserves 2 MiB hugepages itself when it runs
//! as root (and mounts hugetlbfs on /dev/hugepages if nothing is mounted
//! there), restores `nr_hugepages` and unmounts at the end, and otherwise
//! skips with a message saying why.
#![cfg(feature = "dpdk")]

mod dpdk_common;
mod pcap_out;
use dpdk_common::{capture, json_run_args, json_summary, pcap_run, sorted_lines};

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Environment of the helper test: set only when the main test runs it.
const ROLE: &str = "DPLOG_NETRING_PRIMARY";
/// Environment of the peer helper (dplog-nat is the primary).
const PEER_ROLE: &str = "DPLOG_NETRING_PEER";

/// The tests here reserve and restore hugepages: one at a time.
static HUGEPAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// 2 MiB pages the test needs free (the two mempools and rings take ~40 MiB).
const PAGES: u64 = 64;
const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
const HUGE_DIR: &str = "/dev/hugepages";

/// Frames of a legacy little-endian pcap (µs or ns magic): (time in µs,
/// bytes).
fn read_pcap(p: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(p).unwrap();
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let per_us = match magic {
        0xA1B2_C3D4 => 1,
        0xA1B2_3C4D => 1000,
        m => panic!("{}: not a little-endian legacy pcap ({m:#x})", p.display()),
    };
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= b.len() {
        let w = |i: usize| {
            u64::from(u32::from_le_bytes(
                b[off + i..off + i + 4].try_into().unwrap(),
            ))
        };
        let (sec, frac, caplen) = (w(0), w(4), w(8) as usize);
        let data = b[off + 16..off + 16 + caplen].to_vec();
        out.push((sec * 1_000_000 + frac / per_us, data));
        off += 16 + caplen;
    }
    out
}

/// Hugepages reserved (and hugetlbfs mounted) for the test; restores what
/// it changed when dropped.
struct Hugepages {
    previous: Option<u64>,
    mounted: bool,
    made_dir: bool,
}

impl Hugepages {
    /// Err(why) when this machine cannot give the test shared hugepages.
    fn reserve() -> Result<Hugepages, String> {
        let read = |p: &str| -> Result<u64, String> {
            let s = std::fs::read_to_string(p).map_err(|e| format!("cannot read {p}: {e}"))?;
            s.trim().parse().map_err(|e| format!("{p}: {s:?}: {e}"))
        };
        let free = || read("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
        let mut hp = Hugepages {
            previous: None,
            mounted: false,
            made_dir: false,
        };
        let before = read(NR_HUGEPAGES)?;
        let have = free()?;
        if have < PAGES {
            let want = before + (PAGES - have);
            std::fs::write(NR_HUGEPAGES, format!("{want}\n")).map_err(|e| {
                format!("cannot reserve {PAGES} 2 MiB hugepages (write {want} to {NR_HUGEPAGES}: {e}; needs root)")
            })?;
            hp.previous = Some(before);
            let got = free()?;
            if got < PAGES {
                return Err(format!(
                    "the kernel gave only {got} free 2 MiB hugepages of the {PAGES} asked for"
                ));
            }
        }
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let mounted = mounts
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"));
        if !mounted {
            if !Path::new(HUGE_DIR).exists() {
                std::fs::create_dir(HUGE_DIR)
                    .map_err(|e| format!("cannot create {HUGE_DIR}: {e}"))?;
                hp.made_dir = true;
            }
            let out = Command::new("mount")
                .args(["-t", "hugetlbfs", "nodev", HUGE_DIR])
                .output()
                .map_err(|e| format!("cannot run mount: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "mount -t hugetlbfs nodev {HUGE_DIR} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            hp.mounted = true;
        }
        Ok(hp)
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(HUGE_DIR).status();
        }
        if self.made_dir {
            let _ = std::fs::remove_dir(HUGE_DIR);
        }
        if let Some(n) = self.previous {
            let _ = std::fs::write(NR_HUGEPAGES, format!("{n}\n"));
        }
    }
}

/// The primary process and its files: killed and removed when dropped, on
/// every path (its hugepage files are `<prefix>map_*` under every hugetlbfs
/// mount, its runtime directory `/var/run/dpdk/<prefix>`).
struct Primary {
    child: Child,
    prefix: String,
}

impl Drop for Primary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_prefix_files(&self.prefix);
    }
}

/// Feeds up to a burst (32) of `frames` into `to_nat` as mbufs from
/// `pool`, each with its Rx timestamp; returns how many were enqueued
/// (fewer when the pool or the ring is short: the rest stay to feed).
///
/// # Safety
/// EAL is initialised, `pool` and `to_nat` are valid, and this thread is
/// `to_nat`'s only producer; enqueued mbufs belong to the other end.
unsafe fn feed_burst(
    pool: *mut dpdk_sys::rte_mempool,
    to_nat: *mut dpdk_sys::rte_ring,
    frames: &[(u64, Vec<u8>)],
) -> usize {
    use dpdk_sys as d;
    let mut buf = [std::ptr::null_mut::<d::rte_mbuf>(); 32];
    let mut n = 0;
    for (ts, f) in frames.iter().take(32) {
        // SAFETY: pool is a valid mempool; a NULL result is handled.
        let m = unsafe { d::dplog_rte_pktmbuf_alloc(pool) };
        if m.is_null() {
            break; // all in flight: drain first
        }
        // SAFETY: m is ours (just allocated); append gives f.len() writable
        // bytes or NULL (asserted).
        unsafe {
            let dst = d::dplog_rte_pktmbuf_append(m, f.len() as u16) as *mut u8;
            assert!(!dst.is_null(), "frame of {} bytes", f.len());
            std::ptr::copy_nonoverlapping(f.as_ptr(), dst, f.len());
            assert_eq!(d::dplog_rte_mbuf_set_rx_timestamp(m, *ts), 0);
        }
        buf[n] = m;
        n += 1;
    }
    // SAFETY: buf[..n] are owned mbufs; those enqueued are the other end's.
    let sent = unsafe {
        d::dplog_rte_ring_sp_enqueue_burst_elem(
            to_nat,
            buf.as_ptr().cast(),
            8,
            n as u32,
            std::ptr::null_mut(),
        )
    } as usize;
    for &m in &buf[sent..n] {
        // SAFETY: not enqueued: still ours.
        unsafe { d::dplog_rte_pktmbuf_free(m) };
    }
    sent
}

/// Takes up to a burst (32) of translated frames off `from_nat` into
/// `got` (Rx timestamp, bytes) and frees their mbufs; returns how many.
///
/// # Safety
/// EAL is initialised, `from_nat` is valid, and this thread is its only
/// consumer.
unsafe fn drain_burst(from_nat: *mut dpdk_sys::rte_ring, got: &mut Vec<(u64, Vec<u8>)>) -> usize {
    use dpdk_sys as d;
    let mut buf = [std::ptr::null_mut::<d::rte_mbuf>(); 32];
    // SAFETY: this thread is from_nat's only consumer; buf has room for 32.
    let k = unsafe {
        d::dplog_rte_ring_sc_dequeue_burst_elem(
            from_nat,
            buf.as_mut_ptr().cast(),
            8,
            32,
            std::ptr::null_mut(),
        )
    } as usize;
    for &m in &buf[..k] {
        // SAFETY: m was dequeued: ours; its first segment holds data_len
        // bytes at mtod.
        unsafe {
            let len = usize::from(d::dplog_rte_pktmbuf_data_len(m));
            let data = std::slice::from_raw_parts(d::dplog_rte_pktmbuf_mtod(m) as *const u8, len);
            let mut ts = 0;
            assert_eq!(d::dplog_rte_mbuf_rx_timestamp(m, &mut ts), 1);
            got.push((ts, data.to_vec()));
            d::dplog_rte_pktmbuf_free(m);
        }
    }
    k
}

fn remove_prefix_files(prefix: &str) {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for dir in mounts
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"))
        .filter_map(|l| l.split_whitespace().nth(1))
    {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(Path::new("/var/run/dpdk").join(prefix));
}

/// Runs `cmd` with its output in files under `dir`, killing it after
/// `limit` (a hung process fails the test instead of hanging it).
fn output_within(cmd: &mut Command, dir: &Path, limit: Duration) -> std::process::Output {
    let (o, e) = (dir.join("cmd.stdout"), dir.join("cmd.stderr"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {limit:?}: {}",
                std::fs::read_to_string(&e).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: std::fs::read(&o).unwrap(),
        stderr: std::fs::read(&e).unwrap(),
    }
}

#[test]
fn nat_in_a_secondary_process_on_a_net_ring_port_of_the_primary() {
    let _one = HUGEPAGES.lock().unwrap_or_else(|e| e.into_inner());
    let _huge = match Hugepages::reserve() {
        Ok(h) => h,
        Err(why) => {
            eprintln!(
                "SKIP nat_in_a_secondary_process_on_a_net_ring_port_of_the_primary: \
                 DPDK multi-process needs shared hugepage memory and {why}"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let cap = capture("example.pcap");
    let frames = read_pcap(&cap);
    let prefix = format!("dplogmp{}", std::process::id());
    let back = dir.path().join("back.pcap");
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "net_ring_primary_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, &prefix)
        .env("DPLOG_NETRING_CAPTURE", &cap)
        .env("DPLOG_NETRING_BACK", &back)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut primary = Primary { child, prefix };
    // Wait for the primary's port (it prints DPLOG_NETRING_READY once set up); its
    // stdout is read by a thread so that a hung primary fails the test.
    let stdout = primary.child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap_or_default();
            if line.contains("DPLOG_NETRING_READY") {
                let _ = tx.send(());
            }
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(30)).is_ok(),
        "the primary did not come up: {:?}",
        primary.child.try_wait()
    );

    let (file_log, mp_log) = (dir.path().join("file.jsonl"), dir.path().join("mp.jsonl"));
    let a = pcap_run(&cap, json_run_args("10.0.0.0/8", &file_log, &[]));
    let b = json_summary(&output_within(
        Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
            .args(json_run_args("10.0.0.0/8", &mp_log, &[]))
            .args(["--dpdk", "--dpdk-packets"])
            .arg(frames.len().to_string())
            .args(["--dpdk-idle-ms", "3000", "--"])
            .args([
                "--proc-type=secondary",
                "--file-prefix",
                &primary.prefix,
                "--no-pci",
                "-l",
                "1",
                "--log-level=error",
            ]),
        dir.path(),
        Duration::from_secs(30),
    ));
    // Tell the primary the secondary is gone: it drains, writes what came
    // back and exits.
    drop(primary.child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        if let Some(st) = primary.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "the primary did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let rest = reader.join().unwrap();
    assert!(st.success(), "primary: {st:?} {rest}");

    assert_eq!(b["packets"], frames.len() as u64);
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    assert!(a["sessions_created"].as_u64().unwrap() > 0);
    let (la, lb) = (sorted_lines(&file_log), sorted_lines(&mp_log));
    assert_eq!(la.len() as u64, 2 * a["sessions_created"].as_u64().unwrap());
    assert_eq!(la, lb, "same records, field for field");
    // What came back through the primary's Tx ring: the translated frames.
    let translated: u64 = ["translated_out", "translated_in", "fragment_matched"]
        .iter()
        .map(|v| {
            a["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e[0] == *v)
                .map_or(0, |e| e[1].as_u64().unwrap())
        })
        .sum();
    let came_back = read_pcap(&back);
    eprintln!(
        "two processes: {} frames fed by the primary, {} records from the secondary, \
         {} translated frames came back",
        frames.len(),
        lb.len(),
        came_back.len()
    );
    assert_eq!(came_back.len() as u64, translated);
    assert!(translated > 0);
    // Byte for byte what the same NAT (dplog-nat's defaults: the
    // 198.51.100.0/28 pool) makes of the capture in memory, in order.
    let mut nat = dplog_nat::Nat44::new(dplog_nat::NatConfig::new(
        vec!["10.0.0.0/8".parse().unwrap()],
        "198.51.100.0/28".parse().unwrap(),
    ))
    .unwrap();
    let mut sink = dplog_nat::AllRecords(|_| {});
    let mut want = Vec::new();
    for (us, f) in &frames {
        let mut f = f.clone();
        if nat
            .process(us * 1000, dplog_nat::LINKTYPE_ETHERNET, &mut f, &mut sink)
            .is_translated()
        {
            want.push((*us, f));
        }
    }
    assert_frames_as_in_memory(&want, &came_back);
}

/// A helper process's `--file-prefix` (the value of `role`), the capture
/// to feed and where to write what came back; `None` when `role` is unset
/// (the helper then does nothing).
fn helper_env(role: &str) -> Option<(String, PathBuf, PathBuf)> {
    let prefix = std::env::var_os(role)?.to_string_lossy().into_owned();
    let cap = PathBuf::from(std::env::var_os("DPLOG_NETRING_CAPTURE").unwrap());
    let back = PathBuf::from(std::env::var_os("DPLOG_NETRING_BACK").unwrap());
    Some((prefix, cap, back))
}

/// Every translated frame that came back equals the in-memory translation
/// of the same packet, in order.
fn assert_frames_as_in_memory(want: &[(u64, Vec<u8>)], came_back: &[(u64, Vec<u8>)]) {
    assert_eq!(came_back.len(), want.len());
    for (k, (w, g)) in want.iter().zip(came_back).enumerate() {
        assert_eq!(w, g, "translated frame {k}: as in memory");
    }
}

/// The primary process of the test above (run by it with `DPLOG_NETRING_PRIMARY`
/// set to the `--file-prefix`; does nothing otherwise).
#[test]
#[ignore = "helper process of nat_in_a_secondary_process_on_a_net_ring_port_of_the_primary"]
fn net_ring_primary_helper() {
    let Some((prefix, cap, back)) = helper_env(ROLE) else {
        return;
    };
    primary(&prefix, &cap, &back);
}

fn primary(prefix: &str, cap: &Path, back: &Path) {
    use dpdk_sys as d;
    let frames = read_pcap(cap);
    d::eal_init(&[
        "dplog-netring-primary",
        "--proc-type=primary",
        "--file-prefix",
        prefix,
        "--no-pci",
        "-l",
        "0",
        "--log-level=error",
    ])
    .unwrap();
    // Ownership for every unsafe block below: EAL initialised above; the pool, rings
    // and port live in shared hugepage memory, made here; this thread is
    // the only producer of `to_nat` and the only consumer of `from_nat`
    // (the secondary's worker is the other end of each); an mbuf belongs
    // to whoever holds it (enqueued = the secondary's, dequeued = ours).
    // SAFETY: EAL initialised; the name is a NUL-terminated literal.
    let pool = unsafe {
        d::dplog_rte_pktmbuf_pool_create(c"netring_feed".as_ptr(), 4095, 256, d::SOCKET_ID_ANY)
    };
    assert!(
        !pool.is_null(),
        "pool: {}",
        // SAFETY: a plain read of this thread's rte_errno.
        d::strerror(unsafe { d::dplog_rte_errno() })
    );
    // `from_nat` holds a whole capture: the secondary's tx_burst never
    // finds it full (a full Tx ring would drop translated frames however
    // slowly this process drains it, and the count below would race).
    // SAFETY: EAL initialised; the name is a NUL-terminated literal.
    let ring = |name: &std::ffi::CStr, count: u32| unsafe {
        let r = d::dplog_rte_ring_create_elem(
            name.as_ptr(),
            8,
            count,
            d::SOCKET_ID_ANY,
            d::RING_F_SP_ENQ | d::RING_F_SC_DEQ,
        );
        assert!(!r.is_null(), "ring: {}", d::strerror(d::dplog_rte_errno()));
        r
    };
    let slots = (frames.len() as u32 + 1).next_power_of_two();
    let (to_nat, from_nat) = (
        ring(c"netring_to_nat", 1024),
        ring(c"netring_from_nat", slots),
    );
    let port =
        // SAFETY: the rings are valid, the arrays hold 1 pointer each.
        unsafe { d::rte_eth_from_rings(c"net_ring_nat".as_ptr(), &to_nat, 1, &from_nat, 1, 0) };
    assert_eq!(
        port,
        0,
        "rte_eth_from_rings: {}",
        // SAFETY: a plain read of this thread's rte_errno.
        d::strerror(unsafe { d::dplog_rte_errno() })
    );
    // The test closes our stdin once the secondary has exited.
    static DONE: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        // Release: pairs with the Acquire load in the loop below.
        DONE.store(true, Ordering::Release);
    });
    println!("DPLOG_NETRING_READY");
    std::io::stdout().flush().unwrap();
    let mut got: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut next = 0usize;
    let mut done_at: Option<Instant> = None;
    loop {
        // Feed up to a burst.
        if next < frames.len() {
            // SAFETY: see the ownership note above.
            next += unsafe { feed_burst(pool, to_nat, &frames[next..]) };
        }
        // Drain what the NAT sent. SAFETY: see the ownership note above.
        let k = unsafe { drain_burst(from_nat, &mut got) };
        // Acquire: pairs with the Release store of the stdin thread.
        if DONE.load(Ordering::Acquire) {
            // One more quiet pass after the secondary is gone.
            match done_at {
                None => done_at = Some(Instant::now()),
                Some(t) if k == 0 && t.elapsed() > Duration::from_millis(100) => break,
                _ => {}
            }
        } else if k == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    // The pcap of what came back (legacy µs).
    pcap_out::write_pcap(back, got);
    // SAFETY: the secondary has exited; nothing uses the port, rings or
    // pool any more.
    unsafe {
        let _ = d::rte_eth_dev_close(0);
        d::dplog_rte_ring_free(to_nat);
        d::dplog_rte_ring_free(from_nat);
        d::rte_mempool_free(pool);
        let _ = d::rte_eal_cleanup();
    }
}

/// What the in-memory NAT (dplog-nat's defaults: the 198.51.100.0/28 pool)
/// makes of `frames` (µs, bytes), in order: the translated frames.
fn translated_in_memory(frames: &[(u64, Vec<u8>)]) -> Vec<(u64, Vec<u8>)> {
    let mut nat = dplog_nat::Nat44::new(dplog_nat::NatConfig::new(
        vec!["10.0.0.0/8".parse().unwrap()],
        "198.51.100.0/28".parse().unwrap(),
    ))
    .unwrap();
    let mut sink = dplog_nat::AllRecords(|_| {});
    let mut want = Vec::new();
    for (us, f) in frames {
        let mut f = f.clone();
        if nat
            .process(us * 1000, dplog_nat::LINKTYPE_ETHERNET, &mut f, &mut sink)
            .is_translated()
        {
            want.push((*us, f));
        }
    }
    want
}

#[test]
fn dplog_nat_is_the_primary_of_its_own_net_ring_port() {
    // dplog-nat --dpdk with [dataplane.dpdk_net_ring] makes the rings and
    // the net_ring port itself (no helper primary); a peer process (this
    // test binary, as a secondary) looks the rings up by name, feeds the
    // capture and takes the translated frames back.
    let _one = HUGEPAGES.lock().unwrap_or_else(|e| e.into_inner());
    let _huge = match Hugepages::reserve() {
        Ok(h) => h,
        Err(why) => {
            eprintln!(
                "SKIP dplog_nat_is_the_primary_of_its_own_net_ring_port: \
                 DPDK multi-process needs shared hugepage memory and {why}"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let cap = capture("example.pcap");
    let frames = read_pcap(&cap);
    let want = translated_in_memory(&frames);
    let prefix = format!("dplognr{}", std::process::id());
    let cfg = dir.path().join("nr.toml");
    // The Tx ring holds a whole capture: dplog-nat's tx_burst never finds
    // it full, however late the peer drains it on a loaded machine (a full
    // Tx ring drops translated frames, as on a real port).
    let slots = (frames.len() as u32 + 1).next_power_of_two();
    std::fs::write(
        &cfg,
        format!("[dataplane.dpdk_net_ring]\nrx = \"dn_rx\"\ntx = \"dn_tx\"\nsize = {slots}\n"),
    )
    .unwrap();
    let (file_log, nr_log) = (dir.path().join("file.jsonl"), dir.path().join("nr.jsonl"));
    let a = pcap_run(&cap, json_run_args("10.0.0.0/8", &file_log, &[]));
    // dplog-nat, primary: ends 8 s after the last packet (or after it
    // started, if the peer is slow to start on a loaded machine).
    let child = Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
        .arg("--config")
        .arg(&cfg)
        .args(json_run_args("10.0.0.0/8", &nr_log, &[]))
        .args(["--dpdk", "--dpdk-idle-ms", "8000", "--"])
        .args([
            "--proc-type=primary",
            "--file-prefix",
            &prefix,
            "--no-pci",
            "-l",
            "0",
            "--log-level=error",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut nat = Primary { child, prefix };
    let stderr = nat.child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if line.contains("net_ring port") {
                let _ = tx.send(line.clone());
            }
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    });
    let ready = rx.recv_timeout(Duration::from_secs(30));
    assert!(
        ready.is_ok(),
        "dplog-nat did not make its port: {:?}",
        nat.child.try_wait()
    );
    assert!(
        ready.unwrap().contains(&format!(
            r#"Rx ring "dn_rx", Tx ring "dn_tx", {slots} slots"#
        )),
        "the ready line names the rings"
    );
    // The peer: a secondary process of dplog-nat's EAL.
    let back = dir.path().join("back.pcap");
    let peer = output_within(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "net_ring_peer_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(PEER_ROLE, &nat.prefix)
            .env("DPLOG_NETRING_CAPTURE", &cap)
            .env("DPLOG_NETRING_BACK", &back)
            .env("DPLOG_NETRING_EXPECT", want.len().to_string()),
        dir.path(),
        Duration::from_secs(60),
    );
    assert!(
        peer.status.success(),
        "peer: {}",
        String::from_utf8_lossy(&peer.stderr)
    );
    // dplog-nat ends on its idle limit.
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        if let Some(st) = nat.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "dplog-nat did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = Vec::new();
    nat.child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut out)
        .unwrap();
    let rest = reader.join().unwrap();
    assert!(st.success(), "dplog-nat: {st:?} {rest}");
    let b: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(b["packets"], frames.len() as u64);
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    let (la, lb) = (sorted_lines(&file_log), sorted_lines(&nr_log));
    assert!(!la.is_empty());
    assert_eq!(la, lb, "same records, field for field");
    let came_back = read_pcap(&back);
    eprintln!(
        "dplog-nat as primary: {} frames fed by the peer, {} records, {} translated frames came back",
        frames.len(),
        lb.len(),
        came_back.len()
    );
    assert_eq!(
        (b["tx_dropped"].as_u64(), came_back.len()),
        (Some(0), want.len()),
        "(frames dplog-nat's Tx ring refused, frames back) vs the {} translated in memory; peer: {}",
        want.len(),
        String::from_utf8_lossy(&peer.stderr)
    );
    assert!(!want.is_empty());
    assert_frames_as_in_memory(&want, &came_back);
}

/// The peer process of the test above (run by it with `DPLOG_NETRING_PEER`
/// set to dplog-nat's `--file-prefix`; does nothing otherwise).
#[test]
#[ignore = "helper process of dplog_nat_is_the_primary_of_its_own_net_ring_port"]
fn net_ring_peer_helper() {
    let Some((prefix, cap, back)) = helper_env(PEER_ROLE) else {
        return;
    };
    let expect: usize = std::env::var("DPLOG_NETRING_EXPECT")
        .unwrap()
        .parse()
        .unwrap();
    peer(&prefix, &cap, &back, expect);
}

fn peer(prefix: &str, cap: &Path, back: &Path, expect: usize) {
    use dpdk_sys as d;
    let frames = read_pcap(cap);
    d::eal_init(&[
        "dplog-netring-peer",
        "--proc-type=secondary",
        "--file-prefix",
        prefix,
        "--no-pci",
        "-l",
        "1",
        "--log-level=error",
    ])
    .unwrap();
    // Ownership for every unsafe block below: EAL initialised above (a
    // secondary of dplog-nat); the rings are dplog-nat's, in shared
    // hugepage memory, and this thread is the only producer of `dn_rx`
    // and the only consumer of `dn_tx` (dplog-nat's worker is the other
    // end of each); the pool is made here; an mbuf belongs to whoever
    // holds it (enqueued = dplog-nat's, dequeued = ours).
    // SAFETY: EAL initialised; the names are NUL-terminated literals.
    let (to_nat, from_nat) = unsafe {
        (
            d::rte_ring_lookup(c"dn_rx".as_ptr()),
            d::rte_ring_lookup(c"dn_tx".as_ptr()),
        )
    };
    assert!(
        !to_nat.is_null() && !from_nat.is_null(),
        "dplog-nat's rings"
    );
    // SAFETY: EAL initialised; the name is a NUL-terminated literal.
    let pool = unsafe {
        d::dplog_rte_pktmbuf_pool_create(c"peer_feed".as_ptr(), 4095, 256, d::SOCKET_ID_ANY)
    };
    assert!(
        !pool.is_null(),
        "pool: {}",
        // SAFETY: a plain read of this thread's rte_errno.
        d::strerror(unsafe { d::dplog_rte_errno() })
    );
    let mut got: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut next = 0usize;
    // Gives up only after 30 s without any progress either way (a loaded
    // machine slows the run, it does not stall it); the test then compares
    // what came back with what dplog-nat says it dropped.
    let mut progress = Instant::now();
    while (next < frames.len() || got.len() < expect)
        && progress.elapsed() < Duration::from_secs(30)
    {
        let mut fed = 0;
        if next < frames.len() {
            // SAFETY: see the ownership note above.
            fed = unsafe { feed_burst(pool, to_nat, &frames[next..]) };
            next += fed;
        }
        // SAFETY: see the ownership note above.
        let k = unsafe { drain_burst(from_nat, &mut got) };
        if k + fed > 0 {
            progress = Instant::now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    eprintln!(
        "peer: fed {next} of {}, got {} of {expect} back",
        frames.len(),
        got.len()
    );
    pcap_out::write_pcap(back, got);
    // Every mbuf of the pool is back (all translated frames were taken,
    // the rest freed by dplog-nat). The rings stay: they are dplog-nat's.
    // SAFETY: no mbuf of the pool is in use; nothing follows.
    unsafe {
        d::rte_mempool_free(pool);
        let _ = d::rte_eal_cleanup();
    }
}
