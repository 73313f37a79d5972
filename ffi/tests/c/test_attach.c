/*
 * dplog_attach: a C producer logging into a shared-memory ring that a
 * separate dplogd process drains (run by run.sh with dplogd serving the
 * same directory).
 *
 * Usage: test_attach RING_DIR N [kill]
 * Logs N NAT44 session-delete records, sequence i in initiator_octets and
 * 77 in responder_octets, through dplog_log and dplog_log_burst (and one
 * dplog_reserve/dplog_commit), then frees the producer (the daemon then
 * writes "closed its ring"). With "kill" it prints the committed count
 * and raises SIGKILL instead of freeing anything: the daemon writes the
 * records and "exited".
 */
#include <dplog.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static struct dplog_nat44_session rec(uint64_t i) {
  struct dplog_nat44_session s;
  memset(&s, 0, sizeof s);
  s.src_addr = 0x0A000001;
  s.post_nat_src_addr = 0xC6336401;
  s.dst_addr = 0xCB007101;
  s.src_port = 1024;
  s.post_napt_src_port = 2048;
  s.dst_port = 80;
  s.protocol = 6;
  s.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_DELETE;
  s.timestamp_ns = 1767225600000000000ull + i;
  s.initiator_octets = i;
  s.responder_octets = 77;
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_attach RING_DIR N [kill]\n");
    return 2;
  }
  const char *dir = argv[1];
  uint64_t n = strtoull(argv[2], NULL, 10);
  int kill_self = argc > 3 && strcmp(argv[3], "kill") == 0;
  struct dplog *h;
  EXPECT(dplog_open_str("[ring]\ncapacity = 64\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n", &h),
         DPLOG_OK);
  dplog_producer *p = NULL;
  /* Bad arguments: clear errors, nothing created. */
  EXPECT(dplog_attach(h, 0, NULL, "c", &p), DPLOG_ERR_NULL);
  EXPECT(dplog_attach(h, 0, dir, NULL, &p), DPLOG_ERR_NULL);
  EXPECT(dplog_attach(h, 0, dir, "c", NULL), DPLOG_ERR_NULL);
  EXPECT(dplog_attach(h, 0, dir, "bad/name", &p), DPLOG_ERR_INVALID_ARG);
  EXPECT(dplog_attach(h, 0, "/nonexistent/dplog", "c", &p), DPLOG_ERR_IO);
  CHECK(p == NULL);
  EXPECT(dplog_attach(h, 0, dir, "c", &p), DPLOG_OK);
  CHECK(p != NULL);
  dplog_producer *q = NULL;
  EXPECT(dplog_attach(h, 0, dir, "c", &q), DPLOG_ERR_RING_IN_USE);
  uint64_t i = 0;
  struct dplog_nat44_session burst[8];
  while (i < n) {
    if (i % 10 == 9 && i + 8 <= n) {
      for (int k = 0; k < 8; k++) burst[k] = rec(i + k);
      size_t done = 0;
      EXPECT(dplog_log_burst(p, DPLOG_SCHEMA_NAT44_SESSION, burst, sizeof burst[0], 8, &done),
             DPLOG_OK);
      CHECK(done == 8);
      i += 8;
    } else if (i == 5) {
      void *slot = NULL;
      EXPECT(dplog_reserve(p, DPLOG_SCHEMA_NAT44_SESSION, 1, &slot), DPLOG_OK);
      struct dplog_nat44_session r = rec(i);
      memcpy(slot, &r, sizeof r);
      EXPECT(dplog_commit(p, 1, NULL), DPLOG_OK);
      i++;
    } else {
      struct dplog_nat44_session r = rec(i);
      EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r), DPLOG_OK);
      i++;
    }
  }
  EXPECT(dplog_producer_flush(p), DPLOG_OK);
  if (kill_self) {
    printf("%llu\n", (unsigned long long)i);
    fflush(stdout);
    raise(SIGKILL);
  }
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
  printf("test_attach: %d checks passed, %llu records\n", checks, (unsigned long long)n);
  return 0;
}
