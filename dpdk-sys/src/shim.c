/*
 * dplog dpdk-sys shim: DPDK 22.11 functions that are `static inline` (or
 * macros, or per-lcore variables) in the headers and so have no symbol to
 * link against, exported under a dplog_ prefix. Each one is a direct call
 * of the DPDK API named in its comment; nothing else happens here except
 * in dplog_port_init, which bundles the ethdev set-up sequence so Rust
 * need not mirror struct rte_eth_conf.
 */
#include <string.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

/* ---- errno ------------------------------------------------------------ */

/* rte_errno (a per-lcore variable). */
int dplog_rte_errno(void) { return rte_errno; }

/* ---- ethdev bursts ---------------------------------------------------- */

/* rte_eth_rx_burst */
uint16_t dplog_rte_eth_rx_burst(uint16_t port, uint16_t queue,
                                struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_rx_burst(port, queue, pkts, n);
}

/* rte_eth_tx_burst */
uint16_t dplog_rte_eth_tx_burst(uint16_t port, uint16_t queue,
                                struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_tx_burst(port, queue, pkts, n);
}

/* ---- mbuf accessors --------------------------------------------------- */

/* rte_pktmbuf_mtod(m, void *) */
void *dplog_rte_pktmbuf_mtod(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }

/* m->data_len: bytes in this segment. */
uint16_t dplog_rte_pktmbuf_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }

/* m->pkt_len: bytes in the whole chain. */
uint32_t dplog_rte_pktmbuf_pkt_len(const struct rte_mbuf *m) { return rte_pktmbuf_pkt_len(m); }

/* m->nb_segs */
uint16_t dplog_rte_pktmbuf_nb_segs(const struct rte_mbuf *m) { return m->nb_segs; }

/* rte_pktmbuf_free */
void dplog_rte_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

/* rte_pktmbuf_alloc */
struct rte_mbuf *dplog_rte_pktmbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }

/* rte_pktmbuf_append */
char *dplog_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_append(m, len); }

/* rte_pktmbuf_pool_create with the default data room (2048 + headroom). */
struct rte_mempool *dplog_rte_pktmbuf_pool_create(const char *name, unsigned n,
                                                  unsigned cache, int socket)
{
    return rte_pktmbuf_pool_create(name, n, cache, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
}

/*
 * The Rx timestamp a driver put in the mbuf (dynamic field
 * "rte_dynfield_timestamp", flag "rte_dynflag_rx_timestamp"; net_pcap fills
 * it with the capture time). Returns 1 and stores it in *ts when present,
 * else 0. The field and flag are looked up once per process.
 */
int dplog_rte_mbuf_rx_timestamp(const struct rte_mbuf *m, uint64_t *ts)
{
    static int off = -2;
    static uint64_t flag;
    if (off == -2) {
        int f = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, NULL);
        int o = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, NULL);
        if (f < 0 || o < 0) {
            off = -1;
        } else {
            flag = 1ULL << f;
            off = o;
        }
    }
    if (off < 0 || !(m->ol_flags & flag))
        return 0;
    *ts = *RTE_MBUF_DYNFIELD(m, off, rte_mbuf_timestamp_t *);
    return 1;
}

/* ---- port set-up ------------------------------------------------------ */

/*
 * rte_eth_dev_info_get + rte_eth_dev_configure (RSS over IP/TCP/UDP when
 * nb_rxq > 1 and the port supports it) + rte_eth_rx_queue_setup and
 * rte_eth_tx_queue_setup per queue + rte_eth_dev_start +
 * rte_eth_promiscuous_enable (its failure is ignored: vdevs may refuse).
 * Returns 0 or a negative errno from the first step that failed.
 */
int dplog_port_init(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq,
                    uint16_t nb_desc, struct rte_mempool *mp)
{
    struct rte_eth_conf conf;
    struct rte_eth_dev_info info;
    int rc;
    uint16_t q;
    memset(&conf, 0, sizeof(conf));
    rc = rte_eth_dev_info_get(port, &info);
    if (rc != 0)
        return rc;
    if (nb_rxq > 1) {
        uint64_t hf = info.flow_type_rss_offloads &
                      (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
        if (hf != 0) {
            conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_hf = hf;
        }
    }
    rc = rte_eth_dev_configure(port, nb_rxq, nb_txq, &conf);
    if (rc != 0)
        return rc;
    int socket = rte_eth_dev_socket_id(port);
    if (socket < 0)
        socket = (int)rte_socket_id();
    for (q = 0; q < nb_rxq; q++) {
        rc = rte_eth_rx_queue_setup(port, q, nb_desc, (unsigned)socket, NULL, mp);
        if (rc < 0)
            return rc;
    }
    for (q = 0; q < nb_txq; q++) {
        rc = rte_eth_tx_queue_setup(port, q, nb_desc, (unsigned)socket, NULL);
        if (rc < 0)
            return rc;
    }
    rc = rte_eth_dev_start(port);
    if (rc < 0)
        return rc;
    (void)rte_eth_promiscuous_enable(port);
    return 0;
}

/*
 * rte_eth_stats_get: out[0..6] = ipackets, opackets, ibytes, obytes,
 * imissed, ierrors. Returns 0 or a negative errno.
 */
int dplog_port_stats(uint16_t port, uint64_t out[6])
{
    struct rte_eth_stats s;
    int rc = rte_eth_stats_get(port, &s);
    if (rc != 0)
        return rc;
    out[0] = s.ipackets;
    out[1] = s.opackets;
    out[2] = s.ibytes;
    out[3] = s.obytes;
    out[4] = s.imissed;
    out[5] = s.ierrors;
    return 0;
}

/* ======================================================================
 * rte_ring_elem wrappers (for the ring benchmark's DPDK peer). Separate
 * from the NAT's needs above.
 * ==================================================================== */

/* rte_ring_create_elem (exported already; wrapped for one naming scheme). */
struct rte_ring *dplog_rte_ring_create_elem(const char *name, unsigned esize,
                                            unsigned count, int socket, unsigned flags)
{
    return rte_ring_create_elem(name, esize, count, socket, flags);
}

/* rte_ring_sp_enqueue_burst_elem */
unsigned dplog_rte_ring_sp_enqueue_burst_elem(struct rte_ring *r, const void *objs,
                                              unsigned esize, unsigned n, unsigned *free_space)
{
    return rte_ring_sp_enqueue_burst_elem(r, objs, esize, n, free_space);
}

/* rte_ring_mp_enqueue_burst_elem */
unsigned dplog_rte_ring_mp_enqueue_burst_elem(struct rte_ring *r, const void *objs,
                                              unsigned esize, unsigned n, unsigned *free_space)
{
    return rte_ring_mp_enqueue_burst_elem(r, objs, esize, n, free_space);
}

/* rte_ring_sc_dequeue_burst_elem */
unsigned dplog_rte_ring_sc_dequeue_burst_elem(struct rte_ring *r, void *objs,
                                              unsigned esize, unsigned n, unsigned *available)
{
    return rte_ring_sc_dequeue_burst_elem(r, objs, esize, n, available);
}

/* rte_ring_count */
unsigned dplog_rte_ring_count(const struct rte_ring *r) { return rte_ring_count(r); }

/* rte_ring_free */
void dplog_rte_ring_free(struct rte_ring *r) { rte_ring_free(r); }

/* ---- multi-process feeding (net_ring between two processes) ----------- */

/*
 * Sets the Rx timestamp of m as a driver would: registers the dynamic
 * field "rte_dynfield_timestamp" and flag "rte_dynflag_rx_timestamp" once
 * per process (rte_mbuf_dyn_rx_timestamp_register; the registration lives
 * in shared memory, so a secondary process finds it with
 * rte_mbuf_dynfield_lookup), stores ts and sets the flag. Returns 0, or a
 * negative rte_errno when the registration fails.
 */
int dplog_rte_mbuf_set_rx_timestamp(struct rte_mbuf *m, uint64_t ts)
{
    static int off = -1;
    static uint64_t flag;
    if (off < 0) {
        int o;
        if (rte_mbuf_dyn_rx_timestamp_register(&o, &flag) != 0)
            return -rte_errno;
        off = o;
    }
    *RTE_MBUF_DYNFIELD(m, off, rte_mbuf_timestamp_t *) = ts;
    m->ol_flags |= flag;
    return 0;
}

/*
 * Registers the Rx timestamp dynamic field and flag
 * (rte_mbuf_dyn_rx_timestamp_register) without an mbuf: a primary that
 * reads timestamps set by a peer process (dplog_rte_mbuf_rx_timestamp
 * looks the field up once per process) registers it before the peer
 * starts. Returns 0, or a negative rte_errno.
 */
int dplog_rte_mbuf_rx_timestamp_register(void)
{
    int off;
    uint64_t flag;
    if (rte_mbuf_dyn_rx_timestamp_register(&off, &flag) != 0)
        return -rte_errno;
    return 0;
}
