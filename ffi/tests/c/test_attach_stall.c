/*
 * A dplog_attach producer under "block" whose ring no dplogd drains (run
 * by ffi/tests/c/stall.sh).
 *
 * Usage: test_attach_stall RING_DIR away
 *   No dplogd runs: 64 records fill the ring (capacity 64); the next
 *   dplog_log waits the block timeout (dplog_producer_set_block_timeout,
 *   1200 ms: long enough for the library's one stderr warning after 1 s)
 *   and returns DPLOG_ERR_TIMEOUT naming the missing consumer; the one
 *   after it returns DPLOG_ERR_TIMEOUT too (no slot freed since), as does
 *   a burst of 3. dplog_producer_consumer_attached says 0. The producer
 *   is freed: dplogd, started afterwards by stall.sh, writes the 64 and
 *   reports the 5 dropped.
 */
#define _POSIX_C_SOURCE 200809L
#include <dplog.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static struct dplog_nat44_session rec(uint64_t i) {
  struct dplog_nat44_session r;
  memset(&r, 0, sizeof r);
  r.timestamp_ns = 1767225600000000000ull + i;
  r.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_DELETE;
  r.protocol = 6;
  r.initiator_octets = 0x5eed000000000000ull + i;
  r.responder_octets = 77;
  return r;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void last_error(char *m, size_t cap) { dplog_last_error(m, cap, NULL); }

static int away(struct dplog *h, const char *dir) {
  dplog_producer *p = NULL;
  EXPECT(dplog_attach(h, 0, dir, "away", &p), DPLOG_OK);
  int attached = -1;
  EXPECT(dplog_producer_consumer_attached(p, &attached), DPLOG_OK);
  CHECK(attached == 0);
  EXPECT(dplog_producer_consumer_attached(p, NULL), DPLOG_ERR_NULL);
  EXPECT(dplog_producer_set_block_timeout(NULL, 10), DPLOG_ERR_NULL);
  EXPECT(dplog_producer_set_block_timeout(p, 1200), DPLOG_OK);
  for (uint64_t i = 0; i < 64; i++) {
    struct dplog_nat44_session r = rec(i);
    EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r), DPLOG_OK);
  }
  struct dplog_nat44_session r = rec(64);
  double t0 = now_s();
  EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r), DPLOG_ERR_TIMEOUT);
  /* It waited the timeout, not less. */
  CHECK(now_s() - t0 >= 1.2);
  char m[512];
  last_error(m, sizeof m);
  CHECK(strstr(m, "full for the block timeout") != NULL);
  CHECK(strstr(m, "no consumer attached") != NULL);
  CHECK(strstr(m, "1 record(s) dropped") != NULL);
  /* No slot freed since: the next call gives up too. */
  EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r), DPLOG_ERR_TIMEOUT);
  struct dplog_nat44_session burst[3] = {rec(65), rec(66), rec(67)};
  size_t done = 99;
  EXPECT(dplog_log_burst(p, DPLOG_SCHEMA_NAT44_SESSION, burst, sizeof burst[0], 3, &done),
         DPLOG_ERR_TIMEOUT);
  CHECK(done == 0);
  last_error(m, sizeof m);
  CHECK(strstr(m, "3 record(s) dropped") != NULL);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_attach_stall RING_DIR away\n");
    return 2;
  }
  struct dplog *h;
  EXPECT(dplog_open_str("[ring]\ncapacity = 64\n", &h), DPLOG_OK);
  EXPECT(dplog_register_nat_schemas(h), DPLOG_OK);
  /* An in-process producer has no block timeout. */
  {
    struct dplog *h2;
    EXPECT(dplog_open_str("[sink]\ntype = \"file\"\npath = \"/dev/null\"\n", &h2), DPLOG_OK);
    EXPECT(dplog_register_nat_schemas(h2), DPLOG_OK);
    EXPECT(dplog_start(h2, NULL, 0), DPLOG_OK);
    dplog_producer *ip = NULL;
    EXPECT(dplog_producer_new(h2, 0, &ip), DPLOG_OK);
    EXPECT(dplog_producer_set_block_timeout(ip, 10), DPLOG_ERR_INVALID_ARG);
    int attached = 0;
    EXPECT(dplog_producer_consumer_attached(ip, &attached), DPLOG_OK);
    CHECK(attached == 1);
    EXPECT(dplog_producer_free(ip), DPLOG_OK);
    EXPECT(dplog_close(h2, NULL), DPLOG_OK);
  }
  int rc = away(h, argv[1]);
  dplog_close(h, NULL);
  printf("test_attach_stall %s: %d checks passed\n", argv[2], checks);
  return rc;
}
