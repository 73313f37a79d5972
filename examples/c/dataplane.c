/*
 * A small C dataplane on libdplog: W forwarding workers, each pinned to a
 * core, translate a synthetic flow mix and log a NAT44 session create and
 * delete per flow through their own producer, at full speed. The main
 * thread then closes the logger and checks the final stats: every record
 * written, none dropped.
 *
 *   dataplane [--workers W] [--records N] [--output FILE]
 *
 * N records per worker (default 100000, about 35 MB of text per worker).
 *
 * Build: cc -std=c11 $(pkg-config --cflags dplog) dataplane.c \
 *           $(pkg-config --libs dplog) -pthread
 */
#define _GNU_SOURCE
#include <dplog.h>

#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct worker {
  struct dplog *log;
  unsigned id;
  unsigned long records;
  double ns_per_record;
  dplog_result rc;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(w->id % (unsigned)(ncpu > 0 ? ncpu : 1), &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    fprintf(stderr, "worker %u: not pinned\n", w->id);

  struct dplog_producer *p = NULL;
  w->rc = dplog_producer_new(w->log, w->id, &p); /* one ring per core */
  if (w->rc != DPLOG_OK) return NULL;

  struct dplog_nat44_session r;
  memset(&r, 0, sizeof r);
  uint64_t ts = 0;
  double t0 = now_s();
  for (unsigned long i = 0; i < w->records && w->rc == DPLOG_OK; i++) {
    if ((i & 31) == 0) dplog_now_ns(&ts); /* one clock read per burst */
    uint32_t flow = (uint32_t)(i / 2);
    r.timestamp_ns = ts;
    r.src_addr = 0x0A000000u | (w->id << 16) | (flow & 0xffff); /* 10.w.x.y */
    r.post_nat_src_addr = 0xC6336400u | (flow & 0x0f);           /* 198.51.100.0/28 */
    r.dst_addr = 0xCB007100u | (flow & 0xff);                    /* 203.0.113.0/24 */
    r.src_port = (uint16_t)(1024 + flow % 60000);
    r.post_napt_src_port = (uint16_t)(1024 + (flow * 7) % 60000);
    r.dst_port = 443;
    r.protocol = 6;
    r.ingress_vrf_id = w->id;
    if (i & 1) {
      r.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_DELETE;
      r.initiator_packets = 10;
      r.responder_packets = 8;
      r.initiator_octets = 1500;
      r.responder_octets = 9000;
    } else {
      r.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_CREATE;
      r.initiator_packets = r.responder_packets = 0;
      r.initiator_octets = r.responder_octets = 0;
    }
    w->rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
  }
  w->ns_per_record = (now_s() - t0) * 1e9 / (double)(w->records ? w->records : 1);
  dplog_producer_free(p);
  return NULL;
}

static int fail(const char *what, dplog_result rc) {
  char msg[512];
  dplog_last_error(msg, sizeof msg, NULL);
  fprintf(stderr, "%s: %s (%s)\n", what, dplog_strerror(rc), msg);
  return 1;
}

/* Parses a whole decimal number in 1..max; rejects signs, junk and overflow. */
static int parse_count(const char *s, unsigned long max, unsigned long *out) {
  if (*s < '0' || *s > '9') return 0;
  char *end = NULL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || *end != '\0' || v == 0 || v > max) return 0;
  *out = v;
  return 1;
}

int main(int argc, char **argv) {
  unsigned workers = 2;
  unsigned long records = 100000, records_or_workers = 0;
  const char *output = "dataplane.log";
  static const char usage[] = "usage: dataplane [--workers W] [--records N] [--output FILE]\n";
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "option %s needs a value\n%s", argv[i], usage);
      return 2;
    }
    if (!strcmp(argv[i], "--workers")) {
      if (!parse_count(argv[i + 1], 64, &records_or_workers)) {
        fprintf(stderr, "--workers must be 1..64, got %s\n", argv[i + 1]);
        return 2;
      }
      workers = (unsigned)records_or_workers;
    } else if (!strcmp(argv[i], "--records")) {
      if (!parse_count(argv[i + 1], 1000000000UL, &records)) {
        fprintf(stderr, "--records must be 1..1000000000, got %s\n", argv[i + 1]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--output")) {
      output = argv[i + 1];
    } else {
      fprintf(stderr, "unknown option %s\n%s", argv[i], usage);
      return 2;
    }
  }

  char toml[1024];
  snprintf(toml, sizeof toml,
           "[ring]\ncapacity = 4096\nbackpressure = \"block\"\n"
           "[format]\ntype = \"text\"\n[sink]\ntype = \"file\"\npath = \"%s\"\n", output);
  struct dplog *log = NULL;
  dplog_result rc = dplog_open_str(toml, &log);
  if (rc != DPLOG_OK) return fail("dplog_open_str", rc);
  /* A NAT: ask for the built-in NAT schemas (a handle serves only what it
   * is asked for). */
  rc = dplog_register_nat_schemas(log);
  if (rc != DPLOG_OK) return fail("dplog_register_nat_schemas", rc);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t consumer_core = (uint32_t)(ncpu > 1 ? ncpu - 1 : 0);
  rc = dplog_start(log, &consumer_core, 1);
  if (rc != DPLOG_OK) return fail("dplog_start", rc);

  struct worker w[64];
  pthread_t t[64];
  for (unsigned i = 0; i < workers; i++) {
    w[i] = (struct worker){.log = log, .id = i, .records = records};
    if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0) return 1;
  }
  int bad = 0;
  for (unsigned i = 0; i < workers; i++) {
    pthread_join(t[i], NULL);
    if (w[i].rc != DPLOG_OK) bad |= fail("worker", w[i].rc);
    printf("worker %u: %lu records, %.1f ns/record\n", i, records, w[i].ns_per_record);
  }

  struct dplog_stats s;
  rc = dplog_close(log, &s);
  printf("produced %llu written %llu bytes %llu batches %llu dropped %llu "
         "high-water %llu latency p50 %llu ns p99 %llu ns max %llu ns\n",
         (unsigned long long)s.produced, (unsigned long long)s.written_records,
         (unsigned long long)s.written_bytes, (unsigned long long)s.batches,
         (unsigned long long)(s.dropped_full + s.dropped_sink), (unsigned long long)s.high_water,
         (unsigned long long)s.latency_p50_ns, (unsigned long long)s.latency_p99_ns,
         (unsigned long long)s.latency_max_ns);
  if (rc != DPLOG_OK) return fail("dplog_close", rc);
  unsigned long long want = (unsigned long long)workers * records;
  if (bad || s.produced != want || s.written_records != want) {
    fprintf(stderr, "expected %llu records written\n", want);
    return 1;
  }
  return 0;
}
