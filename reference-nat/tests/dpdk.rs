//! DPDK (feature `dpdk`): replaying a capture through Debian's DPDK 22.11
//! net_pcap vdev (`--no-huge --no-pci`) gives the same sessions and the
//! same log records as reading the capture file, and the translated
//! packets come out of the vdev. Each run is its own process (the EAL
//! initialises once per process).
#![cfg(feature = "dpdk")]

mod dpdk_common;
mod pcap_out;
use dpdk_common::{capture, json_run_args, json_summary, pcap_run, sorted_lines};
use pcap_out::write_pcap;

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

fn eal(prefix: &str, vdev: &str) -> Vec<String> {
    [
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "-m",
        "128",
        "-l",
        "0",
        "--log-level=error",
        "--file-prefix",
        prefix,
        "--vdev",
        vdev,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn replay_equals_file(name: &str, inside: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let cap = capture(name);
    let file_log = dir.path().join("file.jsonl");
    let dpdk_log = dir.path().join("dpdk.jsonl");
    let tx = dir.path().join("tx.pcap");
    let common = |log: &Path| json_run_args(inside, log, extra);
    let a = pcap_run(&cap, common(&file_log));
    let vdev = format!(
        "net_pcap0,rx_pcap={},tx_pcap={}",
        cap.display(),
        tx.display()
    );
    let prefix = format!("dplogtest{}", std::process::id());
    let b = json_summary(
        &bin()
            .args(common(&dpdk_log))
            .args(["--dpdk", "--dpdk-idle-ms", "300", "--"])
            .args(eal(&prefix, &vdev))
            .output()
            .unwrap(),
    );
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
    ] {
        assert_eq!(a[k], b[k], "{name}: {k}");
    }
    assert!(a["sessions_created"].as_u64().unwrap() > 0);
    let (la, lb) = (sorted_lines(&file_log), sorted_lines(&dpdk_log));
    if extra.is_empty() {
        assert_eq!(la.len() as u64, 2 * a["sessions_created"].as_u64().unwrap());
    } else {
        assert_eq!(la.len() as u64, a["records_logged"].as_u64().unwrap());
        assert_eq!(a["port_blocks"], b["port_blocks"]);
        assert!(a["port_blocks"][0].as_u64().unwrap() > 0);
        assert!(la
            .iter()
            .all(|l| l.contains("\"natEvent\":16") || l.contains("\"natEvent\":17")));
    }
    assert_eq!(la, lb, "{name}: same records, field for field");
    // The translated packets were transmitted into tx.pcap: count them.
    let bytes = std::fs::read(&tx).unwrap();
    let mut n = 0u64;
    let mut off = 24usize;
    while off + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + caplen;
        n += 1;
    }
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
    assert_eq!(n, translated, "{name}: translated packets sent");
}

#[test]
fn net_pcap_replay_matches_the_pcap_file_example() {
    replay_equals_file("example.pcap", "10.0.0.0/8", &[]);
}

/// Port block allocation through DPDK: the same natEvent 16/17 records
/// (subscriber, address, port range, time) as from the pcap file.
#[test]
fn net_pcap_replay_matches_the_pcap_file_with_port_blocks() {
    replay_equals_file(
        "example.pcap",
        "10.0.0.0/8",
        &["--port-allocation", "pba", "--port-block-size", "128"],
    );
}

#[test]
fn net_null_runs_to_a_packet_limit() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("dplognull{}", std::process::id());
    let out = bin()
        .args(["--summary", "json", "-o"])
        .arg(dir.path().join("null.log"))
        .args(["--dpdk", "--dpdk-packets", "100000", "--"])
        .args(eal(&prefix, "net_null0"))
        .output()
        .unwrap();
    let s = json_summary(&out);
    // net_null's frames are zero-filled: not IPv4, each counted.
    assert!(s["packets"].as_u64().unwrap() >= 100_000);
    assert_eq!(s["sessions_created"], 0);
}

mod shapes;

/// Every bad-input shape through the DPDK net_pcap path: the
/// same counted verdicts as through the pcap path (tests/bad_shapes.rs),
/// no crash, and only the translated packets are transmitted.
#[test]
fn bad_shapes_through_net_pcap_are_counted_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let frames = shapes::bad_frames();
    let rx = dir.path().join("bad.pcap");
    std::fs::write(&rx, shapes::pcap(&frames)).unwrap();
    let tx = dir.path().join("tx.pcap");
    let vdev = format!(
        "net_pcap0,rx_pcap={},tx_pcap={}",
        rx.display(),
        tx.display()
    );
    let prefix = format!("dplogbad{}", std::process::id());
    let s = json_summary(
        &bin()
            .args([
                "--inside",
                "10.0.0.0/8",
                "--format",
                "json",
                "--summary",
                "json",
                "-o",
            ])
            .arg(dir.path().join("bad.jsonl"))
            .args(["--dpdk", "--dpdk-idle-ms", "300", "--"])
            .args(eal(&prefix, &vdev))
            .output()
            .unwrap(),
    );
    assert_eq!(s["packets"], frames.len() as u64);
    let verdict = |name: &str| {
        s["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e[0] == name)
            .map_or(0, |e| e[1].as_u64().unwrap())
    };
    for (name, n) in shapes::expected_verdicts() {
        assert_eq!(verdict(name), n, "{name}: {}", s["verdicts"]);
    }
    assert_eq!(s["sessions_created"], 2);
    assert_eq!(s["records"]["written"], s["records"]["produced"]);
    let bytes = std::fs::read(&tx).unwrap();
    let mut sent = 0u64;
    let mut off = 24usize;
    while off + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + caplen;
        sent += 1;
    }
    // Translated: the first fragment, the packet with options and the two
    // matched later fragments.
    assert_eq!(sent, 4);
}

/// The two runs the two-queue tests compare, and where they wrote.
struct TwoQueues {
    /// JSON summary of `--pcap` with two workers.
    pcap: serde_json::Value,
    /// JSON summary of `--dpdk` on one net_pcap port with two queues.
    dpdk: serde_json::Value,
    pcap_log: std::path::PathBuf,
    dpdk_log: std::path::PathBuf,
    /// The frames each queue sent (`tx_pcap` of queue q).
    tx: Vec<std::path::PathBuf>,
}

/// Runs dplog-nat with two workers on the same packets twice: `all` as one
/// capture through `--pcap`, and `shards[q]` as the Rx capture of queue q
/// of one net_pcap port through `--dpdk` (with `dpdk_args`), both logging
/// JSON into `dir`.
fn two_queues(
    dir: &Path,
    all: &[(u64, Vec<u8>)],
    shards: &[Vec<(u64, Vec<u8>)>],
    prefix: &str,
    dpdk_args: &[&str],
) -> TwoQueues {
    let cap = dir.join("all.pcap");
    write_pcap(&cap, all.iter().map(|(t, f)| (*t, f)));
    let rx: Vec<_> = (0..2).map(|q| dir.join(format!("q{q}.pcap"))).collect();
    let tx: Vec<_> = (0..2).map(|q| dir.join(format!("tx{q}.pcap"))).collect();
    for q in 0..2 {
        write_pcap(&rx[q], shards[q].iter().map(|(t, f)| (*t, f)));
    }
    let (pcap_log, dpdk_log) = (dir.join("file.jsonl"), dir.join("dpdk.jsonl"));
    let common = |log: &Path| json_run_args("10.0.0.0/8", log, &["--workers", "2"]);
    let pcap = pcap_run(&cap, common(&pcap_log));
    let vdev = format!(
        "net_pcap0,rx_pcap={},rx_pcap={},tx_pcap={},tx_pcap={}",
        rx[0].display(),
        rx[1].display(),
        tx[0].display(),
        tx[1].display()
    );
    let prefix = format!("{prefix}{}", std::process::id());
    let dpdk = json_summary(
        &bin()
            .args(common(&dpdk_log))
            .arg("--dpdk")
            .args(dpdk_args)
            .arg("--")
            .args(eal(&prefix, &vdev))
            .output()
            .unwrap(),
    );
    TwoQueues {
        pcap,
        dpdk,
        pcap_log,
        dpdk_log,
        tx,
    }
}

/// Two workers on two Rx/Tx queue pairs of one net_pcap port, each queue
/// replaying the packets the shard function gives its worker (what a
/// symmetric RSS would do), log exactly what two workers log from the
/// capture file: same sessions, same external ports (each worker's port
/// slice), same times.
#[test]
fn two_workers_on_two_queues_match_the_pcap_file_with_two_workers() {
    let dir = tempfile::tempdir().unwrap();
    // The synthetic mix (300 subscribers) as a capture, whole and split by
    // the shard function.
    let inside: ipnet::Ipv4Net = "10.0.0.0/8".parse().unwrap();
    let sharder = dplog_nat::workers::Sharder::new(&[inside], 2);
    let mut all = Vec::new();
    let mut shards: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(), Vec::new()];
    let mix = dplog_nat::SyntheticConfig {
        subscribers: 300,
        destinations: 50,
        new_session_share: 0.2,
        packets: 20_000,
        seed: 7,
        ..Default::default()
    };
    dplog_nat::generate(&mix, |ts, lt, f| {
        let w = sharder.worker_of(lt, f);
        shards[w].push((ts / 1000, f.to_vec()));
        all.push((ts / 1000, f.to_vec()));
    })
    .unwrap();
    assert!(
        shards.iter().all(|s| s.len() > 100),
        "both queues get traffic"
    );
    let TwoQueues {
        pcap: a,
        dpdk: b,
        pcap_log: file_log,
        dpdk_log,
        ..
    } = two_queues(
        dir.path(),
        &all,
        &shards,
        "dplogq",
        &["--dpdk-idle-ms", "300"],
    );
    assert_eq!(b["workers"], 2);
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    for w in 0..2 {
        assert_eq!(
            a["per_worker"][w]["packets"], b["per_worker"][w]["packets"],
            "worker {w}"
        );
        assert_eq!(
            b["per_worker"][w]["packets"].as_u64().unwrap(),
            shards[w].len() as u64
        );
        assert!(b["per_worker"][w]["sessions_created"].as_u64().unwrap() > 0);
    }
    let (la, lb) = (sorted_lines(&file_log), sorted_lines(&dpdk_log));
    assert_eq!(la.len() as u64, 2 * a["sessions_created"].as_u64().unwrap());
    assert_eq!(la, lb, "same records, field for field");
}

/// A CPU from the config file that this process may not run on is refused
/// before the EAL starts, naming the key.
#[test]
fn dpdk_mode_refuses_a_cpu_that_is_not_available() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cpu.toml"),
        "[dataplane]\nworkers = 2\nworker_cpus = [0, 1000]\n",
    )
    .unwrap();
    let prefix = format!("dplogcpu{}", std::process::id());
    let out = bin()
        .args(["--config", "cpu.toml", "-o", "cpu.log", "--dpdk", "--"])
        .args(eal(&prefix, "net_null0"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker_cpus: CPU 1000 is not available; this process may run on CPUs"),
        "{err}"
    );
}

#[test]
fn dpdk_net_ring_option_is_checked_before_the_eal_starts() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, want) in [
        (
            "[dataplane]\nworkers = 2\n[dataplane.dpdk_net_ring]\nrx = \"a\"\ntx = \"b\"\n",
            "[dataplane.dpdk_net_ring] gives one Rx/Tx queue pair: workers must be 1, got 2",
        ),
        (
            "[dataplane.dpdk_net_ring]\nsize = 1000\n",
            "[dataplane.dpdk_net_ring] size must be a power of two of at least 2, got 1000",
        ),
    ] {
        std::fs::write(dir.path().join("nr.toml"), toml).unwrap();
        let prefix = format!("dplognrc{}", std::process::id());
        let out = bin()
            .args(["--config", "nr.toml", "-o", "nr.log", "--dpdk", "--"])
            .args(eal(&prefix, "net_null0"))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
        assert!(!err.contains("EAL:"), "no EAL start: {err}");
    }
}

/// Two net_ring ports wired to each other in this process (port B's Tx
/// ring is port A's Rx ring and back, `rte_eth_from_rings`): frames sent on
/// B arrive on A, the NAT translates them in their mbufs and sends them on
/// A, and they arrive on B byte for byte as the same NAT translates them
/// in memory. DPDK multi-process (two dplog-nat processes on one net_ring)
/// needs shared hugepage memory; see the README.
#[test]
fn nat_between_two_wired_net_ring_ports() {
    use dpdk_sys as d;
    use dplog_nat::{AllRecords, Nat44, NatConfig, Verdict, LINKTYPE_ETHERNET};
    let prefix = format!("dplogring{}", std::process::id());
    let args = [
        "dplog-nat-test",
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "-m",
        "64",
        "--log-level=error",
        "--file-prefix",
        &prefix,
    ];
    d::eal_init(&args).unwrap();
    // The pool, rings and ports below are made here, after the EAL
    // initialisation, and used by this thread only; each mbuf is owned by
    // exactly one party at a time (allocated, handed to tx_burst, received
    // from rx_burst, freed).
    // SAFETY: EAL initialised above; the name is a NUL-terminated literal.
    let pool = unsafe {
        d::dplog_rte_pktmbuf_pool_create(c"ringpool".as_ptr(), 4095, 256, d::SOCKET_ID_ANY)
    };
    assert!(!pool.is_null());
    // SAFETY: EAL initialised above; `name` is NUL-terminated; an element
    // size of 8 and a power-of-two count are what rte_ring_create_elem needs.
    let ring = |name: &std::ffi::CStr| unsafe {
        let r = d::dplog_rte_ring_create_elem(
            name.as_ptr(),
            8,
            1024,
            d::SOCKET_ID_ANY,
            d::RING_F_SP_ENQ | d::RING_F_SC_DEQ,
        );
        assert!(!r.is_null());
        r
    };
    let (b_to_a, a_to_b) = (ring(c"b_to_a"), ring(c"a_to_b"));
    // SAFETY: `name` is NUL-terminated; `&rx` and `&tx` each point to one
    // live ring (the count passed); `pool` is the live pool made above.
    let port = |name: &std::ffi::CStr, rx: *mut d::rte_ring, tx: *mut d::rte_ring| unsafe {
        let p = d::rte_eth_from_rings(name.as_ptr(), &rx, 1, &tx, 1, 0);
        assert!(
            p >= 0,
            "rte_eth_from_rings: {}",
            d::strerror(d::dplog_rte_errno())
        );
        assert_eq!(d::dplog_port_init(p as u16, 1, 1, 512, pool), 0);
        p as u16
    };
    let pa = port(c"net_ring_a", b_to_a, a_to_b);
    let pb = port(c"net_ring_b", a_to_b, b_to_a);
    assert_ne!(pa, pb);

    let mix = dplog_nat::SyntheticConfig {
        packets: 3000,
        ..Default::default()
    };
    let mut frames = Vec::new();
    dplog_nat::generate(&mix, |ts, _, f| frames.push((ts, f.to_vec()))).unwrap();
    let new_nat = || {
        Nat44::new(NatConfig::new(
            vec!["10.0.0.0/8".parse().unwrap()],
            "198.51.100.0/28".parse().unwrap(),
        ))
        .unwrap()
    };
    let (mut wire_nat, mut mem_nat) = (new_nat(), new_nat());
    let mut sink = AllRecords(|_| {});
    let mut received = 0usize;
    for burst in frames.chunks(32) {
        let mut out: Vec<*mut d::rte_mbuf> = burst
            .iter()
            // SAFETY: `pool` is live; the mbuf is checked non-null before
            // the append, and the append's `f.len()` bytes before the copy.
            .map(|(_, f)| unsafe {
                let m = d::dplog_rte_pktmbuf_alloc(pool);
                assert!(!m.is_null());
                let dst = d::dplog_rte_pktmbuf_append(m, f.len() as u16) as *mut u8;
                assert!(!dst.is_null());
                std::ptr::copy_nonoverlapping(f.as_ptr(), dst, f.len());
                m
            })
            .collect();
        // SAFETY: `out` holds `out.len()` mbufs this thread owns; the driver
        // takes those it sends (all of them, asserted below).
        let sent = unsafe { d::dplog_rte_eth_tx_burst(pb, 0, out.as_mut_ptr(), out.len() as u16) };
        assert_eq!(usize::from(sent), burst.len(), "B -> A");
        let mut rx = [std::ptr::null_mut(); 32];
        // SAFETY: `rx` has room for the 32 mbuf pointers asked for.
        let n = usize::from(unsafe { d::dplog_rte_eth_rx_burst(pa, 0, rx.as_mut_ptr(), 32) });
        assert_eq!(n, burst.len(), "arrived on A");
        for (&m, (ts, _)) in rx[..n].iter().zip(burst) {
            // SAFETY: `m` is a received mbuf this thread owns; its first
            // segment holds `data_len` bytes at `mtod`, borrowed only until
            // the mbuf is sent below.
            let frame = unsafe {
                let len = usize::from(d::dplog_rte_pktmbuf_data_len(m));
                std::slice::from_raw_parts_mut(d::dplog_rte_pktmbuf_mtod(m) as *mut u8, len)
            };
            let v = wire_nat.process(*ts, LINKTYPE_ETHERNET, frame, &mut sink);
            assert!(v.is_translated(), "{v:?}");
        }
        // SAFETY: `rx[..n]` are the mbufs received above, owned by this
        // thread and no longer borrowed.
        let sent = unsafe { d::dplog_rte_eth_tx_burst(pa, 0, rx.as_mut_ptr(), n as u16) };
        assert_eq!(usize::from(sent), n, "A -> B");
        let mut back = [std::ptr::null_mut(); 32];
        // SAFETY: `back` has room for the 32 mbuf pointers asked for.
        let k = usize::from(unsafe { d::dplog_rte_eth_rx_burst(pb, 0, back.as_mut_ptr(), 32) });
        assert_eq!(k, n, "arrived back on B");
        for (&m, (ts, f)) in back[..k].iter().zip(burst) {
            // SAFETY: `m` is a received mbuf this thread owns; its first
            // segment holds `data_len` bytes at `mtod`, copied out here.
            let got = unsafe {
                let len = usize::from(d::dplog_rte_pktmbuf_data_len(m));
                std::slice::from_raw_parts(d::dplog_rte_pktmbuf_mtod(m) as *const u8, len).to_vec()
            };
            let mut want = f.clone();
            assert!(mem_nat
                .process(*ts, LINKTYPE_ETHERNET, &mut want, &mut sink)
                .is_translated());
            assert_eq!(got, want, "translated on the wire as in memory");
            // SAFETY: `m` is owned by this thread and not used again.
            unsafe { d::dplog_rte_pktmbuf_free(m) };
        }
        received += k;
    }
    assert_eq!(received, 3000);
    let (w, m) = (wire_nat.stats(), mem_nat.stats());
    assert_eq!(w.sessions_created, m.sessions_created);
    assert_eq!(w.sessions_created, 300, "10 % of 3000 packets");
    assert_eq!(
        w.count(Verdict::TranslatedOut) + w.count(Verdict::TranslatedIn),
        3000
    );
}

/// Ethernet + IPv4 + UDP `sport → dport` with valid checksums.
fn udp_frame(src: u32, dst: u32, sport: u16, dport: u16) -> Vec<u8> {
    use dplog_nat::checksum::{internet_checksum, transport_checksum};
    let mut u = sport.to_be_bytes().to_vec();
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&12u16.to_be_bytes());
    u.extend_from_slice(&[0, 0, 1, 2, 3, 4]);
    let c = transport_checksum(src, dst, 17, &u);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 32, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip.extend_from_slice(&src.to_be_bytes());
    ip.extend_from_slice(&dst.to_be_bytes());
    let c = internet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&u);
    f
}

/// Frames of a legacy µs pcap written by net_pcap.
fn pcap_frames(p: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(p).unwrap();
    let mut out = Vec::new();
    let mut off = 24usize;
    while off + 16 <= b.len() {
        let caplen = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        out.push(b[off + 16..off + 16 + caplen].to_vec());
        off += 16 + caplen;
    }
    out
}

/// Hairpinning between two inside hosts on different queues: the sender's
/// worker translates the source, hands the frame to the worker owning the
/// destination pool port, which translates the destination and sends it
/// on its own Tx queue. Same sessions, records and handoff counts as the
/// capture file with two workers; the delivered frames come out of the
/// owner's queue with both ends translated and checksums right.
#[test]
fn hairpin_between_queues_is_handed_to_the_owner_and_sent_there() {
    use dplog_nat::checksum::{internet_checksum, transport_checksum};
    use dplog_nat::workers::worker_of_inside;
    const REMOTE: u32 = 0xCB00_7109;
    let dir = tempfile::tempdir().unwrap();
    let h1 = 0x0A00_0001u32;
    let h2 = (0x0A00_0002u32..)
        .find(|&h| worker_of_inside(h, 2) != worker_of_inside(h1, 2))
        .unwrap();
    let (w1, w2) = (worker_of_inside(h1, 2), worker_of_inside(h2, 2));
    // Predict the external endpoints with the run's engines.
    let mut cfg = dplog_nat::app::AppConfig::default();
    cfg.nat.inside = vec!["10.0.0.0/8".parse().unwrap()];
    cfg.input.pcap = Some(dir.path().join("x"));
    let base = cfg.nat_config();
    let mut engines = dplog_nat::app::worker_engines(&base, 2).unwrap();
    let mut sink = dplog_nat::AllRecords(|_| {});
    let mut ext = |w: usize, h: u32, port: u16| {
        let mut f = udp_frame(h, REMOTE, port, 53);
        engines[w].process(1, dplog_nat::LINKTYPE_ETHERNET, &mut f, &mut sink);
        let p = dplog_nat::packet::parse(dplog_nat::LINKTYPE_ETHERNET, &f).unwrap();
        (p.ip.src, u16::from_be_bytes([f[34], f[35]]))
    };
    let (e1, e2) = (ext(w1, h1, 6000), ext(w2, h2, 5000));
    let frames = [
        udp_frame(h1, REMOTE, 6000, 53),
        udp_frame(h2, REMOTE, 5000, 53),
        udp_frame(h1, e2.0, 6000, e2.1),
        udp_frame(h2, e1.0, 5000, e1.1),
        udp_frame(h1, e2.0, 6000, e2.1),
        udp_frame(h2, e1.0, 5000, e1.1),
    ];
    let sharder = dplog_nat::workers::Sharder::new(&["10.0.0.0/8".parse().unwrap()], 2);
    let mut all = Vec::new();
    let mut shards: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(), Vec::new()];
    for (i, f) in frames.iter().enumerate() {
        let us = 1_700_000_000_000_000 + i as u64 * 1_000_000;
        shards[sharder.worker_of(1, f)].push((us, f.clone()));
        all.push((us, f.clone()));
    }
    assert_eq!(
        shards[w1].len(),
        3,
        "H1's packets, hairpins too, on H1's queue"
    );
    // The DPDK run ends once the two queues have given all 6 packets (then
    // the workers hand over and deliver what is left); the 2 s idle limit
    // is only a fallback (with 300 ms alone, a worker started late on a
    // loaded machine once saw 3 of 6).
    let TwoQueues {
        pcap: a,
        dpdk: b,
        pcap_log: file_log,
        dpdk_log,
        tx,
    } = two_queues(
        dir.path(),
        &all,
        &shards,
        "dploghp",
        &["--dpdk-packets", "6", "--dpdk-idle-ms", "2000"],
    );
    for k in [
        "packets",
        "sessions_created",
        "sessions_deleted",
        "verdicts",
        "hairpin_in",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    assert_eq!(b["hairpin_in"], serde_json::json!([4, 4, 0]));
    assert_eq!(sorted_lines(&file_log), sorted_lines(&dpdk_log));
    // Each queue sent its host's outside packet and the two hairpins
    // delivered to its host, both ends translated, checksums right.
    for (q, host, port, from) in [(w1, h1, 6000u16, e2), (w2, h2, 5000, e1)] {
        let sent = pcap_frames(&tx[q]);
        assert_eq!(sent.len(), 3, "queue {q}");
        let delivered: Vec<_> = sent
            .iter()
            .filter(|f| u32::from_be_bytes(f[30..34].try_into().unwrap()) == host)
            .collect();
        assert_eq!(delivered.len(), 2, "queue {q}");
        for f in delivered {
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), port);
            assert_eq!(u32::from_be_bytes(f[26..30].try_into().unwrap()), from.0);
            assert_eq!(u16::from_be_bytes([f[34], f[35]]), from.1);
            assert_eq!(internet_checksum(&f[14..34]), 0);
            assert_eq!(transport_checksum(from.0, host, 17, &f[34..]), 0);
        }
    }
}
