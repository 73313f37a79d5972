/* dplog through its C ABI (`include/dplog.h`, `libdplog.so`): N NAT44
 * session records logged with `dplog_log` from CPU 0, the consumer on CPU 1
 * formatting them (`text`: one line per record from the template below;
 * `binary`: dplog's binary format) into a file sink.
 *
 *   dplog_driver text|binary N FILE
 *   dplog_driver --template      prints the text template (check.py's
 *                                dplog-cat decodes the binary file with it)
 *
 * Timed per call: filling the 64-byte `struct dplog_nat44_session` from the
 * event's ten fields and `dplog_log` (the header's inline path). The ring
 * (2^20 slots, `block`) holds the whole run, as Quill's and binlog's queues
 * grow to hold it, so no timed call waits for the consumer. The run ends
 * when `dplog_stats` counts every record written and `dplog_flush` has
 * returned.
 */
#include "harness.h"

#include <dplog.h>

/* The text layout every text driver writes: the ten fields in
 * harness_event's order, addresses dotted, separated by one space. */
static const char TEMPLATE[] =
    "{observationTimeMilliseconds:unix_ns} {sourceIPv4Address} {sourceTransportPort} "
    "{destinationIPv4Address} {destinationTransportPort} {protocolIdentifier} "
    "{postNATSourceIPv4Address} {postNAPTSourceTransportPort} {natEvent:dec} {ingressVRFID}";

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
  if (argc == 2 && strcmp(argv[1], "--template") == 0) {
    puts(TEMPLATE);
    return 0;
  }
  if (argc != 4 || (strcmp(argv[1], "text") != 0 && strcmp(argv[1], "binary") != 0)) {
    fprintf(stderr, "usage: %s text|binary N OUTPUT_FILE\n", argv[0]);
    return 2;
  }
  int binary = strcmp(argv[1], "binary") == 0;
  uint64_t n;
  const char *path;
  harness_args(argc - 1, argv + 1, &n, &path);
  harness_lock_memory();

  struct harness_result res = {binary ? "dplog-binary" : "dplog-text", n, 0, 0, NULL, 0, 0, 0};
  res.rtt_ns = harness_rtt_ns(0, 1);
  res.tsc_per_ns = harness_tsc_per_ns();
  uint64_t overhead = harness_lat_overhead();
  res.lat = calloc(n, sizeof *res.lat);
  if (res.lat == NULL) harness_die("out of memory");

  char toml[2048];
  int len = snprintf(toml, sizeof toml,
                     "[ring]\ncapacity = 1048576\nbackpressure = \"block\"\n"
                     "[schemas]\nnat = true\n"
                     "[format]\ntype = \"%s\"\n%s%s%s"
                     "[sink]\ntype = \"file\"\npath = \"%s\"\n",
                     binary ? "binary" : "text", binary ? "" : "template = \"", binary ? "" : TEMPLATE,
                     binary ? "" : "\"\n", path);
  if (len < 0 || (size_t)len >= sizeof toml) harness_die("config too long");
  struct dplog *h;
  check(dplog_open_str(toml, &h), "dplog_open_str");
  uint32_t consumer_cpu = 1;
  check(dplog_start(h, &consumer_cpu, 1), "dplog_start");
  harness_pin(0);
  dplog_producer *p;
  check(dplog_producer_new(h, 0, &p), "dplog_producer_new");

  struct dplog_nat44_session r;
  memset(&r, 0, sizeof r);
  struct harness_event e;
  res.first_call_ns = harness_mono_ns();
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
