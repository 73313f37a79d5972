/* DPDK + dplog in one page: every lcore polls its own RX queue of a port
 * (net_null0 here; a NIC in production), and logs one NAT44 session record
 * per packet through its own dplog producer, then the main lcore closes
 * the logger and checks that every record was written.
 *   dpdk_dataplane --no-huge --no-pci -m 256 --vdev net_null0 -l 0-1 -- out.log */
#include <dplog.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BURST 32
#define ROUNDS 4000
static struct dplog *logger;
static uint64_t logged[RTE_MAX_LCORE];
static int failed[RTE_MAX_LCORE];

static int lcore_main(__rte_unused void *arg) {
  unsigned lcore = rte_lcore_id();
  uint16_t queue = (uint16_t)rte_lcore_index((int)lcore);
  struct dplog_producer *p = NULL;
  if (dplog_producer_new(logger, lcore, &p) != DPLOG_OK) return failed[lcore] = -1; /* ring/lcore */
  struct rte_mbuf *pkts[BURST];
  struct dplog_nat44_session recs[BURST];
  memset(recs, 0, sizeof recs);
  for (uint32_t round = 0; round < ROUNDS; round++) {
    uint16_t n = rte_eth_rx_burst(0, queue, pkts, BURST);
    uint64_t now = 0;
    dplog_now_ns(&now); /* one clock read per burst */
    for (uint16_t i = 0; i < n; i++) { /* ... translate pkts[i], then log it: */
      struct dplog_nat44_session *r = &recs[i];
      r->timestamp_ns = now;
      r->src_addr = 0x0A000000u | (lcore << 16) | (round & 0xffff);
      r->post_nat_src_addr = 0xC6336401u;
      r->dst_addr = 0xCB007101u;
      r->src_port = (uint16_t)(1024 + i);
      r->post_napt_src_port = (uint16_t)(2048 + (round & 0x3fff));
      r->dst_port = 53;
      r->protocol = 17;
      r->nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_CREATE;
      rte_pktmbuf_free(pkts[i]);
    }
    size_t done = 0;
    if (dplog_log_burst(p, DPLOG_SCHEMA_NAT44_SESSION, recs, sizeof recs[0], n, &done) != DPLOG_OK)
      failed[lcore] = -1;
    logged[lcore] += done;
  }
  if (dplog_producer_free(p) != DPLOG_OK) failed[lcore] = -1;
  return failed[lcore];
}

int main(int argc, char **argv) {
  int used = rte_eal_init(argc, argv);
  if (used < 0) rte_exit(EXIT_FAILURE, "cannot init EAL\n");
  const char *out = argc - used > 1 ? argv[used + 1] : "dpdk_dataplane.log";
  char toml[512];
  snprintf(toml, sizeof toml, "[ring]\ncapacity = 4096\n[sink]\ntype = \"file\"\npath = \"%s\"\n", out);
  /* A NAT: the handle asks for the built-in NAT schemas before it starts. */
  if (dplog_open_str(toml, &logger) != DPLOG_OK || dplog_register_nat_schemas(logger) != DPLOG_OK ||
      dplog_start(logger, NULL, 0) != DPLOG_OK) {
    char why[256];
    dplog_last_error(why, sizeof why, NULL);
    rte_exit(EXIT_FAILURE, "dplog: %s\n", why);
  }

  uint16_t nq = (uint16_t)rte_lcore_count();
  struct rte_mempool *mp = rte_pktmbuf_pool_create("mbufs", 8191, 256, 0,
                                                   RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
  struct rte_eth_conf conf;
  memset(&conf, 0, sizeof conf);
  if (mp == NULL || rte_eth_dev_count_avail() == 0 || rte_eth_dev_configure(0, nq, 1, &conf) < 0)
    rte_exit(EXIT_FAILURE, "cannot configure port 0\n");
  for (uint16_t q = 0; q < nq; q++)
    if (rte_eth_rx_queue_setup(0, q, 512, (unsigned)rte_eth_dev_socket_id(0), NULL, mp) < 0)
      rte_exit(EXIT_FAILURE, "cannot set up rx queue %u\n", q);
  if (rte_eth_tx_queue_setup(0, 0, 512, (unsigned)rte_eth_dev_socket_id(0), NULL) < 0 ||
      rte_eth_dev_start(0) < 0)
    rte_exit(EXIT_FAILURE, "cannot start port 0\n");

  rte_eal_mp_remote_launch(lcore_main, NULL, CALL_MAIN);
  rte_eal_mp_wait_lcore();
  uint64_t total = 0;
  int bad = 0;
  for (unsigned l = 0; l < RTE_MAX_LCORE; l++) total += logged[l], bad |= failed[l];

  struct dplog_stats s;
  dplog_result rc = dplog_close(logger, &s);
  printf("lcores %u: logged %llu, written %llu in %llu batches, latency p50 %llu ns p99 %llu ns: %s\n",
         nq, (unsigned long long)total, (unsigned long long)s.written_records,
         (unsigned long long)s.batches, (unsigned long long)s.latency_p50_ns,
         (unsigned long long)s.latency_p99_ns, dplog_strerror(rc));
  rte_eth_dev_stop(0);
  rte_eth_dev_close(0);
  rte_eal_cleanup();
  return bad || rc != DPLOG_OK || total == 0 || s.written_records != total;
}
