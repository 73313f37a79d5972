//! Minimal raw bindings to Debian's DPDK 22.11 (`libdpdk-dev`, found with
//! pkg-config), written for the dplog reference NAT and the ring
//! benchmark's DPDK peer. (The `dpdk-sys` crate on crates.io binds DPDK
//! 18.05 for musl only.)
//!
//! * Exported DPDK functions are declared directly (`rte_eal_init`,
//!   `rte_eth_dev_count_avail`, ...).
//! * DPDK's `static inline` functions, macros and per-lcore variables have
//!   no symbol; `src/shim.c` wraps each in a `dplog_`-prefixed function
//!   (`dplog_rte_eth_rx_burst` is `rte_eth_rx_burst`, and so on).
//! * [`dplog_port_init`] bundles the ethdev set-up sequence so that Rust
//!   need not mirror `struct rte_eth_conf`.
//!
//! Everything here is `unsafe` FFI with DPDK's own rules: the EAL must be
//! initialised once per process ([`eal_init`]) before any other call, an
//! mbuf belongs to whoever holds it until it is freed or handed to
//! `tx_burst`, and queue functions are not thread safe per queue.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::marker::{PhantomData, PhantomPinned};

macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident),*) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(Debug)]
        pub struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque!(
    /// `struct rte_mbuf` (opaque; use the accessors).
    rte_mbuf,
    /// `struct rte_mempool`.
    rte_mempool,
    /// `struct rte_ring`.
    rte_ring
);

/// `SOCKET_ID_ANY`.
pub const SOCKET_ID_ANY: c_int = -1;
/// `RING_F_SP_ENQ`: single-producer enqueue by default.
pub const RING_F_SP_ENQ: c_uint = 0x0001;
/// `RING_F_SC_DEQ`: single-consumer dequeue by default.
pub const RING_F_SC_DEQ: c_uint = 0x0002;
/// `RING_F_EXACT_SZ`: the ring holds exactly `count` elements.
pub const RING_F_EXACT_SZ: c_uint = 0x0004;

extern "C" {
    // ---- exported DPDK functions --------------------------------------
    /// `rte_eal_init`: returns the number of parsed arguments or -1
    /// (`rte_errno` set).
    pub fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    /// `rte_eal_cleanup`.
    pub fn rte_eal_cleanup() -> c_int;
    /// `rte_eth_dev_count_avail`.
    pub fn rte_eth_dev_count_avail() -> u16;
    /// `rte_eth_dev_stop`.
    pub fn rte_eth_dev_stop(port: u16) -> c_int;
    /// `rte_eth_dev_close`.
    pub fn rte_eth_dev_close(port: u16) -> c_int;
    /// `rte_eth_dev_get_port_by_name`.
    pub fn rte_eth_dev_get_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    /// `rte_socket_id`.
    pub fn rte_socket_id() -> c_uint;
    /// `rte_strerror`.
    pub fn rte_strerror(errnum: c_int) -> *const c_char;
    /// `rte_mempool_free`.
    pub fn rte_mempool_free(mp: *mut rte_mempool);

    // ---- shim: inline functions ----------------------------------------
    /// `rte_errno`.
    pub fn dplog_rte_errno() -> c_int;
    /// `rte_eth_rx_burst`.
    pub fn dplog_rte_eth_rx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
    /// `rte_eth_tx_burst`: the mbufs sent belong to the driver; the caller
    /// frees the rest.
    pub fn dplog_rte_eth_tx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
    /// `rte_pktmbuf_mtod(m, void *)`.
    pub fn dplog_rte_pktmbuf_mtod(m: *mut rte_mbuf) -> *mut c_void;
    /// `rte_pktmbuf_data_len`: bytes in the first segment.
    pub fn dplog_rte_pktmbuf_data_len(m: *const rte_mbuf) -> u16;
    /// `rte_pktmbuf_pkt_len`: bytes in the chain.
    pub fn dplog_rte_pktmbuf_pkt_len(m: *const rte_mbuf) -> u32;
    /// `m->nb_segs`.
    pub fn dplog_rte_pktmbuf_nb_segs(m: *const rte_mbuf) -> u16;
    /// `rte_pktmbuf_free`.
    pub fn dplog_rte_pktmbuf_free(m: *mut rte_mbuf);
    /// `rte_pktmbuf_alloc`.
    pub fn dplog_rte_pktmbuf_alloc(mp: *mut rte_mempool) -> *mut rte_mbuf;
    /// `rte_pktmbuf_append`.
    pub fn dplog_rte_pktmbuf_append(m: *mut rte_mbuf, len: u16) -> *mut c_char;
    /// `rte_pktmbuf_pool_create` with `RTE_MBUF_DEFAULT_BUF_SIZE`.
    pub fn dplog_rte_pktmbuf_pool_create(
        name: *const c_char,
        n: c_uint,
        cache: c_uint,
        socket: c_int,
    ) -> *mut rte_mempool;
    /// The driver's Rx timestamp (dynfield `rte_dynfield_timestamp`);
    /// returns 1 and sets `*ts` when present.
    pub fn dplog_rte_mbuf_rx_timestamp(m: *const rte_mbuf, ts: *mut u64) -> c_int;
    /// Configure (RSS when `nb_rxq > 1`), set up queues, start and enable
    /// promiscuous mode. 0 or a negative errno.
    pub fn dplog_port_init(
        port: u16,
        nb_rxq: u16,
        nb_txq: u16,
        nb_desc: u16,
        mp: *mut rte_mempool,
    ) -> c_int;
    /// `rte_eth_stats_get`: ipackets, opackets, ibytes, obytes, imissed,
    /// ierrors.
    pub fn dplog_port_stats(port: u16, out: *mut u64) -> c_int;

    /// Sets `m`'s Rx timestamp as a driver would (dynamic field
    /// `rte_dynfield_timestamp` and flag `rte_dynflag_rx_timestamp`,
    /// registered once per process with `rte_mbuf_dyn_rx_timestamp_register`;
    /// the registration is in shared memory, so a secondary process reads
    /// it back with [`dplog_rte_mbuf_rx_timestamp`]). The unit is the
    /// caller's (net_pcap's is microseconds). 0, or a negative `rte_errno`
    /// when the registration fails.
    pub fn dplog_rte_mbuf_set_rx_timestamp(m: *mut rte_mbuf, ts: u64) -> c_int;

    // ---- shim: rte_ring_elem (ring benchmark peer) ----------------------
    /// `rte_ring_create_elem`.
    pub fn dplog_rte_ring_create_elem(
        name: *const c_char,
        esize: c_uint,
        count: c_uint,
        socket: c_int,
        flags: c_uint,
    ) -> *mut rte_ring;
    /// `rte_ring_sp_enqueue_burst_elem`.
    pub fn dplog_rte_ring_sp_enqueue_burst_elem(
        r: *mut rte_ring,
        objs: *const c_void,
        esize: c_uint,
        n: c_uint,
        free_space: *mut c_uint,
    ) -> c_uint;
    /// `rte_ring_mp_enqueue_burst_elem`.
    pub fn dplog_rte_ring_mp_enqueue_burst_elem(
        r: *mut rte_ring,
        objs: *const c_void,
        esize: c_uint,
        n: c_uint,
        free_space: *mut c_uint,
    ) -> c_uint;
    /// `rte_ring_sc_dequeue_burst_elem`.
    pub fn dplog_rte_ring_sc_dequeue_burst_elem(
        r: *mut rte_ring,
        objs: *mut c_void,
        esize: c_uint,
        n: c_uint,
        available: *mut c_uint,
    ) -> c_uint;
    /// `rte_ring_count`.
    pub fn dplog_rte_ring_count(r: *const rte_ring) -> c_uint;
    /// `rte_ring_free`.
    pub fn dplog_rte_ring_free(r: *mut rte_ring);

    /// Registers the Rx timestamp dynamic field and flag
    /// (`rte_mbuf_dyn_rx_timestamp_register`) without an mbuf, so that
    /// [`dplog_rte_mbuf_rx_timestamp`] finds timestamps a peer process
    /// sets later. 0, or a negative `rte_errno`.
    pub fn dplog_rte_mbuf_rx_timestamp_register() -> c_int;
    /// `rte_ring_lookup`: the ring named `name` in this process's EAL
    /// (shared memory: a secondary finds the primary's rings), or NULL
    /// with rte_errno = ENOENT.
    pub fn rte_ring_lookup(name: *const c_char) -> *mut rte_ring;

    // ---- net_ring PMD (librte_net_ring) ---------------------------------
    /// `rte_eth_from_rings`: a port named `name` whose Rx queue `i` reads
    /// `rx_queues[i]` and Tx queue `i` writes `tx_queues[i]` (rings of mbuf
    /// pointers, element size 8). Returns the port id, or -1 with
    /// rte_errno set. Two ports with each other's rings swapped are a wire.
    pub fn rte_eth_from_rings(
        name: *const c_char,
        rx_queues: *const *mut rte_ring,
        nb_rx_queues: c_uint,
        tx_queues: *const *mut rte_ring,
        nb_tx_queues: c_uint,
        numa_node: c_uint,
    ) -> c_int;
}

/// DPDK's message for `errnum` (`rte_strerror`).
pub fn strerror(errnum: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local
    // NUL-terminated string for any errnum.
    unsafe { CStr::from_ptr(rte_strerror(errnum.abs())) }
        .to_string_lossy()
        .into_owned()
}

/// Initialises the EAL with `args` (`args[0]` is the program name, as in
/// `argv`). Returns the number of arguments the EAL consumed.
///
/// Errors: an argument containing NUL, or `rte_eal_init` failing (the
/// message is `rte_strerror(rte_errno)`). Call at most once per process:
/// DPDK refuses a second initialisation (`EALREADY`).
pub fn eal_init<S: AsRef<str>>(args: &[S]) -> Result<usize, String> {
    let owned: Vec<CString> = args
        .iter()
        .map(|a| {
            CString::new(a.as_ref()).map_err(|_| format!("NUL in EAL argument {:?}", a.as_ref()))
        })
        .collect::<Result<_, _>>()?;
    // DPDK may permute argv; give it pointers it can own for the process's
    // life (the strings are leaked on purpose: EAL keeps references).
    let mut argv: Vec<*mut c_char> = owned.into_iter().map(|c| c.into_raw()).collect();
    let argc = c_int::try_from(argv.len()).map_err(|_| "too many EAL arguments".to_string())?;
    argv.push(std::ptr::null_mut());
    let argv = Box::leak(argv.into_boxed_slice());
    // SAFETY: argv holds argc valid NUL-terminated strings plus a NULL, all
    // leaked so they outlive the EAL.
    let rc = unsafe { rte_eal_init(argc, argv.as_mut_ptr()) };
    if rc < 0 {
        // SAFETY: plain read of the calling thread's rte_errno.
        let e = unsafe { dplog_rte_errno() };
        return Err(format!("rte_eal_init failed: {}", strerror(e)));
    }
    Ok(rc as usize)
}
