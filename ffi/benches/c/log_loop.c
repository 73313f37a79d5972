/*
 * The C side of the ffi_log benches: batches of dplog_log calls made from
 * C, compiled by the bench with the system C compiler (`cc -O2`) against
 * include/dplog.h, as a dataplane compiles them. Each record is built in
 * the loop as a forwarding core builds it: constant fields and a running
 * timestamp.
 */
#include <dplog.h>

#include <string.h>

static inline struct dplog_nat44_session bench_record(uint64_t ts) {
  struct dplog_nat44_session r;
  memset(&r, 0, sizeof r);
  r.timestamp_ns = ts;
  r.src_addr = 0x0A000001;          /* 10.0.0.1 */
  r.post_nat_src_addr = 0xC6336401; /* 198.51.100.1 */
  r.dst_addr = 0xCB007101;          /* 203.0.113.1 */
  r.src_port = 40000;
  r.post_napt_src_port = 1024;
  r.dst_port = 443;
  r.protocol = 6;
  r.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_CREATE;
  return r;
}

/* n records through dplog_log as C code calls it (the header's inline
 * path). Returns DPLOG_OK or the first error. */
int dplog_bench_log_inline(dplog_producer *p, uint64_t n, uint64_t ts0) {
  struct dplog_nat44_session r = bench_record(0);
  for (uint64_t i = 0; i < n; i++) {
    r.timestamp_ns = ts0 + i;
    dplog_result rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
    if (rc != DPLOG_OK) return rc;
  }
  return DPLOG_OK;
}

/* The same through the exported function (what DPLOG_NO_INLINE and other
 * languages get). */
int dplog_bench_log_call(dplog_producer *p, uint64_t n, uint64_t ts0) {
  struct dplog_nat44_session r = bench_record(0);
  for (uint64_t i = 0; i < n; i++) {
    r.timestamp_ns = ts0 + i;
    dplog_result rc = (dplog_log)(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
    if (rc != DPLOG_OK) return rc;
  }
  return DPLOG_OK;
}

/* Field by field: the record zeroed and filled anew for every call, as a
 * dataplane often writes it, then dplog_log (inline path). */
int dplog_bench_log_fields(dplog_producer *p, uint64_t n, uint64_t ts0) {
  for (uint64_t i = 0; i < n; i++) {
    struct dplog_nat44_session r;
    memset(&r, 0, sizeof r);
    r.timestamp_ns = ts0 + i;
    r.src_addr = 0x0A000001;
    r.post_nat_src_addr = 0xC6336401;
    r.dst_addr = 0xCB007101;
    r.src_port = 40000;
    r.post_napt_src_port = 1024;
    r.dst_port = 443;
    r.protocol = 6;
    r.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_CREATE;
    dplog_result rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
    if (rc != DPLOG_OK) return rc;
  }
  return DPLOG_OK;
}

/* Field by field straight into the ring slot: dplog_reserve one record,
 * fill it in place, dplog_commit (zero-copy, two calls). */
int dplog_bench_reserve_fields(dplog_producer *p, uint64_t n, uint64_t ts0) {
  for (uint64_t i = 0; i < n; i++) {
    void *slot;
    dplog_result rc = dplog_reserve(p, DPLOG_SCHEMA_NAT44_SESSION, 1, &slot);
    if (rc != DPLOG_OK) return rc;
    struct dplog_nat44_session *r = (struct dplog_nat44_session *)slot;
    r->timestamp_ns = ts0 + i;
    r->src_addr = 0x0A000001;
    r->post_nat_src_addr = 0xC6336401;
    r->dst_addr = 0xCB007101;
    r->src_port = 40000;
    r->post_napt_src_port = 1024;
    r->dst_port = 443;
    r->protocol = 6;
    r->nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_CREATE;
    rc = dplog_commit(p, 1, NULL);
    if (rc != DPLOG_OK) return rc;
  }
  return DPLOG_OK;
}

#if defined(__x86_64__)
/* The time-stamp counter. The "memory" clobber keeps the compiler from
 * moving the record's stores or the call across the read. */
static inline uint64_t bench_tsc(void) {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
  return ((uint64_t)hi << 32) | lo;
}

/* n records through dplog_log (inline path), each call timed on its own
 * with the TSC: ticks[i] is the raw count around call i (the caller
 * subtracts the timer's own cost). Returns DPLOG_OK or the first error. */
int dplog_bench_log_latency(dplog_producer *p, uint64_t n, uint64_t ts0, uint32_t *ticks) {
  struct dplog_nat44_session r = bench_record(0);
  for (uint64_t i = 0; i < n; i++) {
    r.timestamp_ns = ts0 + i;
    uint64_t t0 = bench_tsc();
    dplog_result rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
    uint64_t t1 = bench_tsc();
    ticks[i] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
    if (rc != DPLOG_OK) return rc;
  }
  return DPLOG_OK;
}

/* As dplog_bench_log_latency, with the record's time read inside the
 * timed call: clock 0 dplog_now_ns (CLOCK_REALTIME), 1 dplog_now_ticks
 * (the header's inline rdtsc). The NAT record's time field takes
 * nanoseconds, so the ticks of clock 1 print as a wrong time: this
 * measures the cost only (a record of your own declares the field
 * DPLOG_FIELD_TSC_TIMESTAMP). Returns DPLOG_OK or the first error. */
int dplog_bench_log_latency_clock(dplog_producer *p, uint64_t n, uint32_t clock, uint32_t *ticks) {
  struct dplog_nat44_session r = bench_record(0);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t t0 = bench_tsc();
    if (clock == 0) {
      dplog_now_ns(&r.timestamp_ns);
    } else {
      dplog_now_ticks(&r.timestamp_ns);
    }
    dplog_result rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
    uint64_t t1 = bench_tsc();
    ticks[i] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
    if (rc != DPLOG_OK) return rc;
  }
  return DPLOG_OK;
}
#endif
