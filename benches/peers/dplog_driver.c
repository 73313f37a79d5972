/* dplog through its C ABI (`include/dplog.h`, `libdplog.so`): N NAT44
 * session events logged with `dplog_log` from CPU 0, the consumer on CPU 1
 * formatting them (`text`: one line per record from a template; `binary`:
 * dplog's binary format) into a file sink.
 *
 *   dplog_driver text|binary|own-text|own-binary N FILE
 *   dplog_driver --template [own]   prints the text template (check.py's
 *                                   dplog-cat decodes a binary file with it)
 *
 * `text` and `binary` log the NAT schema package's 64-byte
 * `struct dplog_nat44_session`; `own-text` and `own-binary` log the same
 * ten fields as a record type of the driver's own (`struct harness_rec`,
 * 40 bytes, declared with `dplog_schema_register`), as any other user of
 * the SDK would.
 *
 * Timed per call: storing the event's ten fields into the record and
 * `dplog_log` (the header's inline path). The ring
 * (2^20 slots, `block`) holds the whole run, as Quill's and binlog's queues
 * grow to hold it, so no timed call waits for the consumer. The run ends
 * when `dplog_stats` counts every record written and `dplog_flush` has
 * returned.
 */
#include "harness.h"

#include <stddef.h>

#include <dplog.h>

/* The text layout every text driver writes: the ten fields in
 * harness_event's order, addresses dotted, separated by one space. */
static const char TEMPLATE[] =
    "{observationTimeMilliseconds:unix_ns} {sourceIPv4Address} {sourceTransportPort} "
    "{destinationIPv4Address} {destinationTransportPort} {protocolIdentifier} "
    "{postNATSourceIPv4Address} {postNAPTSourceTransportPort} {natEvent:dec} {ingressVRFID}";

/* The same line from the driver's own record type (its field names). */
static const char OWN_TEMPLATE[] =
    "{time:unix_ns} {srcAddr} {srcPort} {dstAddr} {dstPort} {proto} {xlatAddr} {xlatPort} "
    "{event} {vrf}";

/* The driver's own record type: the ten fields after dplog's header. */
struct harness_rec {
  struct dplog_record_header header; /* filled by dplog */
  uint64_t time;                     /* ns since the Unix epoch */
  uint32_t src_addr, dst_addr, xlat_addr, vrf;
  uint16_t src_port, dst_port, xlat_port;
  uint8_t proto, event;
};

#define F(m, name, kind) {name, offsetof(struct harness_rec, m), sizeof(((struct harness_rec *)0)->m), kind, 0, NULL, 0}
static const struct dplog_field_desc OWN_FIELDS[] = {
    F(time, "time", DPLOG_FIELD_NS_TIMESTAMP),  F(src_addr, "srcAddr", DPLOG_FIELD_IPV4),
    F(src_port, "srcPort", DPLOG_FIELD_PORT),     F(dst_addr, "dstAddr", DPLOG_FIELD_IPV4),
    F(dst_port, "dstPort", DPLOG_FIELD_PORT),     F(proto, "proto", DPLOG_FIELD_PROTOCOL),
    F(xlat_addr, "xlatAddr", DPLOG_FIELD_IPV4),   F(xlat_port, "xlatPort", DPLOG_FIELD_PORT),
    F(event, "event", DPLOG_FIELD_U8),            F(vrf, "vrf", DPLOG_FIELD_U32),
};
#undef F

static void check(dplog_result rc, const char *what) {
  if (rc != DPLOG_OK) {
    char msg[512];
    size_t len = 0;
    dplog_last_error(msg, sizeof msg, &len);
    fprintf(stderr, "dplog_driver: %s: %s (%s)\n", what, dplog_strerror(rc), msg);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if ((argc == 2 || argc == 3) && strcmp(argv[1], "--template") == 0) {
    puts(argc == 3 && strcmp(argv[2], "own") == 0 ? OWN_TEMPLATE : TEMPLATE);
    return 0;
  }
  static const char *const MODES[] = {"text", "binary", "own-text", "own-binary"};
  static const char *const LIBS[] = {"dplog-text", "dplog-binary", "dplog-own-text",
                                     "dplog-own-binary"};
  int mode = -1;
  for (int k = 0; argc == 4 && k < 4; k++)
    if (strcmp(argv[1], MODES[k]) == 0) mode = k;
  if (mode < 0) {
    fprintf(stderr, "usage: %s text|binary|own-text|own-binary N OUTPUT_FILE\n", argv[0]);
    return 2;
  }
  int binary = mode % 2 == 1, own = mode >= 2;
  const char *template = own ? OWN_TEMPLATE : TEMPLATE;
  uint64_t n;
  const char *path;
  harness_args(argc - 1, argv + 1, &n, &path);
  harness_lock_memory();

  struct harness_result res = {LIBS[mode], n, 0, 0, NULL, 0, 0, 0};
  res.rtt_ns = harness_rtt_ns(0, 1);
  res.tsc_per_ns = harness_tsc_per_ns();
  uint64_t overhead = harness_lat_overhead();
  res.lat = calloc(n, sizeof *res.lat);
  if (res.lat == NULL) harness_die("out of memory");

  char toml[2048];
  int len = snprintf(toml, sizeof toml,
                     "[ring]\ncapacity = 1048576\nbackpressure = \"block\"\n"
                     "[schemas]\nnat = %s\n"
                     "[format]\ntype = \"%s\"\n%s%s%s"
                     "[sink]\ntype = \"file\"\npath = \"%s\"\n",
                     own ? "false" : "true", binary ? "binary" : "text",
                     binary ? "" : "template = \"", binary ? "" : template, binary ? "" : "\"\n",
                     path);
  if (len < 0 || (size_t)len >= sizeof toml) harness_die("config too long");
  struct dplog *h;
  check(dplog_open_str(toml, &h), "dplog_open_str");
  uint16_t own_id = 0;
  if (own)
    check(dplog_schema_register(h, "harnessSession", sizeof(struct harness_rec), OWN_FIELDS,
                                sizeof OWN_FIELDS / sizeof OWN_FIELDS[0], &own_id),
          "dplog_schema_register");
  uint32_t consumer_cpu = 1;
  check(dplog_start(h, &consumer_cpu, 1), "dplog_start");
  harness_pin(0);
  dplog_producer *p;
  check(dplog_producer_new(h, 0, &p), "dplog_producer_new");

  struct dplog_nat44_session r;
  struct harness_rec o;
  memset(&r, 0, sizeof r);
  memset(&o, 0, sizeof o);
  struct harness_event e;
  res.first_call_ns = harness_mono_ns();
  if (!own) {
    for (uint64_t i = 0; i < n; i++) {
      harness_make_event(i, &e);
      uint64_t t0 = harness_lat_begin();
      r.timestamp_ns = e.timestamp_ns;
      r.src_addr = e.src_addr;
      r.src_port = e.src_port;
      r.dst_addr = e.dst_addr;
      r.dst_port = e.dst_port;
      r.protocol = e.protocol;
      r.post_nat_src_addr = e.post_nat_src_addr;
      r.post_napt_src_port = e.post_napt_src_port;
      r.nat_event = e.nat_event;
      r.ingress_vrf_id = e.ingress_vrf_id;
      dplog_result rc = dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r);
      uint64_t t1 = harness_lat_end();
      if (rc != DPLOG_OK) check(rc, "dplog_log");
      res.lat[i] = harness_sample(t0, t1, overhead);
    }
  } else {
    for (uint64_t i = 0; i < n; i++) {
      harness_make_event(i, &e);
      uint64_t t0 = harness_lat_begin();
      o.time = e.timestamp_ns;
      o.src_addr = e.src_addr;
      o.src_port = e.src_port;
      o.dst_addr = e.dst_addr;
      o.dst_port = e.dst_port;
      o.proto = e.protocol;
      o.xlat_addr = e.post_nat_src_addr;
      o.xlat_port = e.post_napt_src_port;
      o.event = e.nat_event;
      o.vrf = e.ingress_vrf_id;
      dplog_result rc = dplog_log(p, own_id, &o, sizeof o);
      uint64_t t1 = harness_lat_end();
      if (rc != DPLOG_OK) check(rc, "dplog_log");
      res.lat[i] = harness_sample(t0, t1, overhead);
    }
  }
  check(dplog_producer_flush(p), "dplog_producer_flush");
  struct dplog_stats s;
  do {
    check(dplog_stats(h, &s), "dplog_stats");
  } while (s.written_records < n);
  check(dplog_flush(h), "dplog_flush");
  res.done_ns = harness_mono_ns();

  check(dplog_producer_free(p), "dplog_producer_free");
  check(dplog_close(h, &s), "dplog_close");
  if (s.written_records != n || s.produced != n) {
    fprintf(stderr, "dplog_driver: produced %llu, written %llu of %llu\n",
            (unsigned long long)s.produced, (unsigned long long)s.written_records,
            (unsigned long long)n);
    return 1;
  }
  res.file_bytes = harness_file_size(path);
  harness_report(&res);
  free(res.lat);
  return 0;
}
