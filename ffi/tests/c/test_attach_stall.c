/*
 * A dplog_attach producer under "block" whose ring no dplogd drains, and
 * one whose ring dplogd quarantines (run by ffi/tests/c/stall.sh).
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
 * Usage: test_attach_stall RING_DIR quarantine
 *   dplogd serves RING_DIR: with publish_every = 64, 10 records are
 *   written into the ring unpublished, this process overwrites the
 *   schema id of record 5 in the ring file (as a stray write would),
 *   then publishes them; dplogd quarantines the ring, and the producer's
 *   calls end in DPLOG_ERR_RING_STOPPED whose message names dplogd's
 *   quarantine, not a producer shared by two threads.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <dplog.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* The path of the one ring file named "<name>.*.ring" in `dir`. */
static void ring_path(const char *dir, const char *name, char *out, size_t cap) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  struct dirent *e;
  int found = 0;
  size_t nl = strlen(name);
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (strncmp(e->d_name, name, nl) == 0 && e->d_name[nl] == '.' && l > 5 &&
        strcmp(e->d_name + l - 5, ".ring") == 0) {
      snprintf(out, cap, "%s/%s", dir, e->d_name);
      found++;
    }
  }
  closedir(d);
  CHECK(found == 1);
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

static int quarantine(struct dplog *h, const char *dir) {
  dplog_producer *p = NULL;
  EXPECT(dplog_attach(h, 0, dir, "quar", &p), DPLOG_OK);
  EXPECT(dplog_producer_set_block_timeout(p, 30000), DPLOG_OK);
  /* dplogd attaches within its scan interval. */
  int attached = 0;
  for (int k = 0; k < 3000 && !attached; k++) {
    EXPECT(dplog_producer_consumer_attached(p, &attached), DPLOG_OK);
    if (!attached) nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  CHECK(attached == 1);
  for (uint64_t i = 0; i < 10; i++) {
    struct dplog_nat44_session r = rec(i);
    EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r), DPLOG_OK);
  }
  /* Record 5, unpublished yet, found in the ring file by its contents. */
  char path[4096];
  ring_path(dir, "quar", path, sizeof path);
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0);
  struct stat st;
  CHECK(fstat(fd, &st) == 0);
  unsigned char *buf = malloc((size_t)st.st_size);
  CHECK(buf != NULL);
  CHECK(pread(fd, buf, (size_t)st.st_size, 0) == st.st_size);
  uint64_t mark = 0x5eed000000000000ull + 5;
  off_t rec5 = -1;
  for (off_t o = 0; o + 8 <= st.st_size; o += 8) {
    if (memcmp(buf + o, &mark, 8) == 0) {
      rec5 = o - (off_t)offsetof(struct dplog_nat44_session, initiator_octets);
      break;
    }
  }
  free(buf);
  CHECK(rec5 > 0);
  uint16_t bad = 0xBEEF;
  CHECK(pwrite(fd, &bad, 2, rec5 + (off_t)offsetof(struct dplog_record_header, schema_id)) == 2);
  close(fd);
  EXPECT(dplog_producer_flush(p), DPLOG_OK);
  /* dplogd quarantines the ring and frees no slot: the calls end in
     DPLOG_ERR_RING_STOPPED once the ring is full. */
  dplog_result rc = DPLOG_OK;
  uint64_t i = 10;
  for (; i < 10000 && rc == DPLOG_OK; i++) {
    struct dplog_nat44_session r = rec(i);
    rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
  }
  EXPECT(rc, DPLOG_ERR_RING_STOPPED);
  char m[512];
  last_error(m, sizeof m);
  CHECK(strstr(m, "dplogd quarantined this ring") != NULL);
  CHECK(strstr(m, "two threads") == NULL);
  CHECK(strstr(m, path) != NULL);
  int attached_after = 1;
  EXPECT(dplog_producer_consumer_attached(p, &attached_after), DPLOG_OK);
  CHECK(attached_after == 0);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_attach_stall RING_DIR away|quarantine\n");
    return 2;
  }
  struct dplog *h;
  int q = strcmp(argv[2], "quarantine") == 0;
  EXPECT(dplog_open_str(q ? "[ring]\ncapacity = 64\npublish_every = 64\n" : "[ring]\ncapacity = 64\n",
                        &h),
         DPLOG_OK);
  EXPECT(dplog_register_nat_schemas(h), DPLOG_OK);
  /* An in-process producer has no block timeout. */
  if (!q) {
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
  int rc = q ? quarantine(h, argv[1]) : away(h, argv[1]);
  dplog_close(h, NULL);
  printf("test_attach_stall %s: %d checks passed\n", argv[2], checks);
  return rc;
}
