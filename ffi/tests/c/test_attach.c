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
 *
 * The freed run attaches with dplog_attach_group (this process's group):
 * its ring file is mode 0640 with that group; the killed run's, from
 * dplog_attach, is 0600.
 *
 * Before attaching it registers a record type of its own, "verdict"
 * (which dplogd knows only from the ring file's schema description), and
 * after the NAT records logs 3 verdicts k = 0..2: count k,
 * observationTimeMilliseconds 1767225600000 + k, sourceIPv4Address
 * 192.0.2.1, sourceTransportPort 4000 + k, vlanId 7, protocolIdentifier
 * 17, action allow/deny/reject.
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <dirent.h>
#include <dplog.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

struct verdict {
  struct dplog_record_header header;
  uint64_t time_ns;
  uint32_t count;
  uint32_t src;
  uint16_t port;
  uint16_t vlan;
  uint8_t protocol;
  uint8_t action;
  uint8_t pad[2];
};
_Static_assert(sizeof(struct verdict) == 32, "32-byte record");

static const struct dplog_enum_name actions[] = {{0, "allow"}, {1, "deny"}, {2, "reject"}};
#define FN(m, name, k, ie) {name, offsetof(struct verdict, m), sizeof(((struct verdict *)0)->m), k, ie, NULL, 0}
static const struct dplog_field_desc verdict_fields[] = {
    FN(time_ns, "observationTimeMilliseconds", DPLOG_FIELD_NS_TIMESTAMP, 323),
    FN(count, "count", DPLOG_FIELD_U32, 0),
    FN(src, "sourceIPv4Address", DPLOG_FIELD_IPV4, 8),
    FN(port, "sourceTransportPort", DPLOG_FIELD_PORT, 7),
    FN(vlan, "vlanId", DPLOG_FIELD_U16, 58),
    FN(protocol, "protocolIdentifier", DPLOG_FIELD_PROTOCOL, 4),
    {"action", offsetof(struct verdict, action), 1, DPLOG_FIELD_ENUM, 0, actions, 3},
};

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

/* The mode bits and group of this process's ring file "c.<pid>.*.ring"
 * in dir (exactly one). */
static void ring_mode(const char *dir, unsigned *mode, gid_t *gid) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "c.%d.", (int)getpid());
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && len > 5 &&
        strcmp(e->d_name + len - 5, ".ring") == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      struct stat st;
      CHECK(stat(path, &st) == 0);
      *mode = (unsigned)(st.st_mode & 0777);
      *gid = st.st_gid;
      found++;
    }
  }
  closedir(d);
  CHECK(found == 1);
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
  /* No [sink]: dplogd writes the records; the handle creates no file
     (attach.sh runs this in an empty directory and checks it stays so). */
  EXPECT(dplog_open_str("[ring]\ncapacity = 64\n", &h), DPLOG_OK);
  EXPECT(dplog_register_nat_schemas(h), DPLOG_OK); /* logs NAT44 sessions */
  uint16_t verdict_id = 0;
  EXPECT(dplog_schema_register(h, "verdict", sizeof(struct verdict), verdict_fields,
                               sizeof verdict_fields / sizeof verdict_fields[0], &verdict_id),
         DPLOG_OK);
  dplog_producer *p = NULL;
  /* Bad arguments: clear errors, nothing created. */
  EXPECT(dplog_attach(h, 0, NULL, "c", &p), DPLOG_ERR_NULL);
  EXPECT(dplog_attach(h, 0, dir, NULL, &p), DPLOG_ERR_NULL);
  EXPECT(dplog_attach(h, 0, dir, "c", NULL), DPLOG_ERR_NULL);
  EXPECT(dplog_attach(h, 0, dir, "bad/name", &p), DPLOG_ERR_INVALID_ARG);
  EXPECT(dplog_attach(h, 0, "/nonexistent/dplog", "c", &p), DPLOG_ERR_IO);
  {
    /* The message names the directory, not only "sink I/O error". */
    char m[512];
    dplog_last_error(m, sizeof m, NULL);
    CHECK(strstr(m, "ring directory /nonexistent/dplog: No such file or directory") != NULL);
  }
  {
    /* A [format] that dplogd would ignore is refused, and no ring made. */
    struct dplog *hf;
    EXPECT(dplog_open_str("[ring]\ncapacity = 64\n[format]\ntype = \"json\"\n", &hf), DPLOG_OK);
    EXPECT(dplog_register_nat_schemas(hf), DPLOG_OK);
    dplog_producer *pf = NULL;
    EXPECT(dplog_attach(hf, 0, dir, "fmt", &pf), DPLOG_ERR_CONFIG);
    CHECK(pf == NULL);
    char m[512];
    dplog_last_error(m, sizeof m, NULL);
    CHECK(strstr(m, "has a [format] (type = \"json\") that a ring dplogd drains would ignore") != NULL);
    EXPECT(dplog_close(hf, NULL), DPLOG_OK);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) CHECK(strncmp(e->d_name, "fmt.", 4) != 0);
    closedir(d);
  }
  CHECK(p == NULL);
  EXPECT(dplog_attach_group(h, 0, NULL, "c", getegid(), &p), DPLOG_ERR_NULL);
  CHECK(p == NULL);
  if (kill_self)
    EXPECT(dplog_attach(h, 0, dir, "c", &p), DPLOG_OK);
  else
    EXPECT(dplog_attach_group(h, 0, dir, "c", getegid(), &p), DPLOG_OK);
  CHECK(p != NULL);
  unsigned mode = 0;
  gid_t gid = 0;
  ring_mode(dir, &mode, &gid);
  CHECK(mode == (kill_self ? 0600u : 0640u));
  CHECK(gid == getegid());
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
  for (uint32_t k = 0; k < 3; k++) {
    struct verdict v;
    memset(&v, 0, sizeof v);
    v.time_ns = 1767225600000000000ull + k * 1000000ull;
    v.count = k;
    v.src = 0xC0000201u;
    v.port = (uint16_t)(4000 + k);
    v.vlan = 7;
    v.protocol = 17;
    v.action = (uint8_t)k;
    EXPECT(dplog_log(p, verdict_id, &v, sizeof v), DPLOG_OK);
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
