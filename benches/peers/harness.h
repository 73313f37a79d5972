/* The peer harness's shared part, included by every driver (C and C++):
 * the NAT44 session event each library logs, CPU pinning, the TSC rate,
 * the placement round trip, per-call latency percentiles and the one
 * result line every driver prints.
 *
 * Event i (0-based) of a run is a pure function of i, so the checker
 * (check.py) regenerates it without reading anything the driver wrote;
 * check.py's `event()` is the same formula and must stay equal to
 * `harness_make_event` below.
 */
#ifndef DPLOG_PEERS_HARNESS_H
#define DPLOG_PEERS_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <x86intrin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The event: the ten fields of a NAT44 session create/delete. Addresses
 * are IPv4 in host byte order (10.0.0.1 is 0x0A000001). */
struct harness_event {
  uint64_t timestamp_ns; /* ns since the Unix epoch */
  uint32_t src_addr;
  uint16_t src_port;
  uint32_t dst_addr;
  uint16_t dst_port;
  uint8_t protocol;
  uint32_t post_nat_src_addr;
  uint16_t post_napt_src_port;
  uint8_t nat_event; /* 4 create, 5 delete (RFC 8158) */
  uint32_t ingress_vrf_id;
};

/* 2026-01-01T00:00:00Z; events are 1 us apart. */
#define HARNESS_T0_NS 1767225600000000000ull

static inline void harness_make_event(uint64_t i, struct harness_event *e) {
  e->timestamp_ns = HARNESS_T0_NS + i * 1000u;
  e->src_addr = 0x0A000000u + (uint32_t)((i * 7919u) % 16777216u);
  e->src_port = (uint16_t)(1024u + i % 64511u);
  e->dst_addr = 0xC6336400u + (uint32_t)(i % 256u);
  e->dst_port = (uint16_t)(1u + (i * 31u) % 65535u);
  e->protocol = (uint8_t)(i % 3u == 2u ? 17u : 6u);
  e->post_nat_src_addr = 0xCB007100u + (uint32_t)(i % 16u);
  e->post_napt_src_port = (uint16_t)(1024u + (i * 13u) % 64512u);
  e->nat_event = (uint8_t)(i % 2u ? 5u : 4u);
  e->ingress_vrf_id = (uint32_t)(i % 4u);
}

static inline void harness_die(const char *what) {
  fprintf(stderr, "harness: %s\n", what);
  exit(1);
}

/* Locks every page of the process, present and future, so that memory a
 * library allocates (its queue) is populated when allocated, untimed,
 * and no timed call takes a page fault on first touch. Every driver calls
 * it first; a failure is fatal (needs RLIMIT_MEMLOCK or root). */
static inline void harness_lock_memory(void) {
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
    fprintf(stderr, "harness: mlockall: %s (raise RLIMIT_MEMLOCK or run as root)\n", strerror(errno));
    exit(1);
  }
}

/* Pins the calling thread to `cpu`; a failure is fatal (the placement is
 * the point of the measurement). */
static inline void harness_pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) {
    fprintf(stderr, "harness: pinning to CPU %d: %s\n", cpu, strerror(rc));
    exit(1);
  }
}

static inline uint64_t harness_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* TSC ticks per ns, measured against CLOCK_MONOTONIC_RAW over 200 ms. */
static inline double harness_tsc_per_ns(void) {
  uint64_t n0 = harness_mono_ns(), t0 = __rdtsc();
  while (harness_mono_ns() - n0 < 200000000ull) {
  }
  uint64_t n1 = harness_mono_ns(), t1 = __rdtsc();
  return (double)(t1 - t0) / (double)(n1 - n0);
}

/* Placement round trip: one cache line bounced between the calling
 * thread (pinned to cpu_a) and a thread pinned to cpu_b, `rounds` times;
 * returns the median round trip in ns over 16 batches. The caller's CPU
 * mask is restored afterwards (a library may check it when it starts). */
struct harness_pingpong {
  volatile uint64_t line __attribute__((aligned(64)));
  uint64_t rounds;
  int cpu;
};

static inline void *harness_pong(void *arg) {
  struct harness_pingpong *pp = (struct harness_pingpong *)arg;
  harness_pin(pp->cpu);
  for (uint64_t r = 1; r <= pp->rounds; r++) {
    /* Acquire pairs with the ping's Release store of 2r-1 in harness_rtt_ns. */
    while (__atomic_load_n(&pp->line, __ATOMIC_ACQUIRE) != 2 * r - 1) {
    }
    /* Release pairs with the ping's Acquire load waiting for 2r. */
    __atomic_store_n(&pp->line, 2 * r, __ATOMIC_RELEASE);
  }
  return NULL;
}

static int harness_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static inline double harness_rtt_ns(int cpu_a, int cpu_b) {
  enum { BATCHES = 16, ROUNDS = 2000 };
  double per[BATCHES];
  static struct harness_pingpong pp;
  pp.rounds = (uint64_t)BATCHES * ROUNDS;
  pp.cpu = cpu_b;
  /* Relaxed: the pong thread is created after it (pthread_create orders it). */
  __atomic_store_n(&pp.line, 0, __ATOMIC_RELAXED);
  cpu_set_t before;
  if (pthread_getaffinity_np(pthread_self(), sizeof before, &before) != 0)
    harness_die("pthread_getaffinity_np");
  harness_pin(cpu_a);
  pthread_t t;
  if (pthread_create(&t, NULL, harness_pong, &pp) != 0) harness_die("pthread_create");
  uint64_t r = 0;
  for (int b = 0; b < BATCHES; b++) {
    uint64_t t0 = harness_mono_ns();
    for (int k = 0; k < ROUNDS; k++) {
      r++;
      /* Release pairs with harness_pong's Acquire load waiting for 2r-1;
       * the Acquire load pairs with its Release store of 2r. */
      __atomic_store_n(&pp.line, 2 * r - 1, __ATOMIC_RELEASE);
      while (__atomic_load_n(&pp.line, __ATOMIC_ACQUIRE) != 2 * r) {
      }
    }
    per[b] = (double)(harness_mono_ns() - t0) / ROUNDS;
  }
  pthread_join(t, NULL);
  if (pthread_setaffinity_np(pthread_self(), sizeof before, &before) != 0)
    harness_die("pthread_setaffinity_np");
  qsort(per, BATCHES, sizeof per[0], harness_cmp_double);
  return per[BATCHES / 2];
}

/* Per-call latency: `harness_lat_begin` before a call and
 * `harness_lat_end` after it; lfence keeps the call inside the pair. */
static inline uint64_t harness_lat_begin(void) {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
static inline uint64_t harness_lat_end(void) {
  unsigned aux;
  uint64_t t = __rdtscp(&aux);
  _mm_lfence();
  return t;
}

static int harness_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Median cost in ticks of an empty begin/end pair, subtracted from every
 * sample. */
static inline uint64_t harness_lat_overhead(void) {
  enum { K = 10001 };
  static uint64_t d[K];
  for (int i = 0; i < K; i++) {
    uint64_t a = harness_lat_begin();
    d[i] = harness_lat_end() - a;
  }
  qsort(d, K, sizeof d[0], harness_cmp_u64);
  return d[K / 2];
}

static int harness_cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* What a driver measured. `lat` holds one sample (ticks, overhead
 * subtracted, saturated at 2^32-1) per call. */
struct harness_result {
  const char *lib;
  uint64_t n;
  double rtt_ns;
  double tsc_per_ns;
  uint32_t *lat;
  uint64_t first_call_ns; /* CLOCK_MONOTONIC_RAW at the first call */
  uint64_t done_ns;       /* ... when the file held every record */
  uint64_t file_bytes;
};

static inline uint32_t harness_sample(uint64_t t0, uint64_t t1, uint64_t overhead) {
  uint64_t d = t1 - t0;
  d = d > overhead ? d - overhead : 0;
  return d > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)d;
}

static inline uint64_t harness_file_size(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "harness: stat %s: %s\n", path, strerror(errno));
    exit(1);
  }
  return (uint64_t)st.st_size;
}

/* A call above this many ns is counted in `slow_pct`: the share of
 * calls that took about a cross-core cache miss or more. */
#define HARNESS_SLOW_NS 100.0

/* Prints the result line run.sh collects (sorts `lat` in place):
 * lib=... n=... rtt_ns=... p50_ns=... p99_ns=... p999_ns=... max_ns=...
 * slow_pct=... rec_per_s=... bytes=... tsc_ghz=... */
static inline void harness_report(struct harness_result *r) {
  uint64_t slow = 0;
  double limit = HARNESS_SLOW_NS * r->tsc_per_ns;
  for (uint64_t i = 0; i < r->n; i++) slow += (double)r->lat[i] > limit;
  qsort(r->lat, r->n, sizeof r->lat[0], harness_cmp_u32);
#define HARNESS_PCT(q) ((double)r->lat[(uint64_t)((double)(r->n - 1) * (q))] / r->tsc_per_ns)
  double secs = (double)(r->done_ns - r->first_call_ns) / 1e9;
  printf("lib=%s n=%llu rtt_ns=%.1f p50_ns=%.1f p99_ns=%.1f p999_ns=%.1f max_ns=%.1f "
         "slow_pct=%.3f rec_per_s=%.0f bytes=%llu tsc_ghz=%.4f\n",
         r->lib, (unsigned long long)r->n, r->rtt_ns, HARNESS_PCT(0.50), HARNESS_PCT(0.99),
         HARNESS_PCT(0.999), (double)r->lat[r->n - 1] / r->tsc_per_ns,
         100.0 * (double)slow / (double)r->n, (double)r->n / secs,
         (unsigned long long)r->file_bytes, r->tsc_per_ns);
#undef HARNESS_PCT
  fflush(stdout);
}

/* argv: N OUTPUT_PATH (both required). */
static inline void harness_args(int argc, char **argv, uint64_t *n, const char **path) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s N OUTPUT_FILE\n", argv[0]);
    exit(2);
  }
  char *end;
  *n = strtoull(argv[1], &end, 10);
  if (*end != 0 || *n == 0) harness_die("N must be a positive integer");
  *path = argv[2];
}

#ifdef __cplusplus
}
#endif
#endif
