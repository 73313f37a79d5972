/*
 * A stateful record declared from C: a load balancer's connection record
 * (lbConn, 64 bytes, registered with dplog_schema_register) whose
 * lifecycle, event time and priority are declared with
 * dplog_schema_set_lifecycle / _event_time / _priority, its syslog layout
 * and close-only counters with dplog_schema_set_syslog /
 * _fields_only_when, logged into an
 * archive sink (binary frames) and into a binary log file. The metadata
 * travels with both logs: ffi/tests/c/lifecycle.sh asks dplog-query --at
 * what was live when, from the archive and from the binary log imported.
 *
 * Usage: test_lifecycle OUTDIR   writes OUTDIR/archive/ and OUTDIR/conn.binary,
 *                                and checks the misuse of the setters.
 *
 * The connections (client 198.51.100.7 to 192.0.2.10:443), T0 =
 * 2026-01-01T00:00:00Z, at T0 + ms:
 *    500 40002 OPEN   1000 40000 OPEN   1000 40003 OPEN   1500 40002 CLOSE
 *   2000 40001 OPEN   2500 40000 REJECT 3000 40003 CLOSE  5000 40000 CLOSE
 *   5500 40000 OPEN (backend 10.0.0.6; the others 10.0.0.5)
 * Live at T0+2.5 s: 40000, 40001, 40003; at T0+3 s the same (a close at T
 * is live at T); at T0+4 s: 40000, 40001; at T0+6 s: 40001, 40000 (the
 * second, backend .6).
 */
#define _GNU_SOURCE
#include <dplog.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"

struct lb_conn {
  struct dplog_record_header header;
  uint64_t conn_time_ns; /* ns since the epoch */
  uint32_t vip;          /* IPv4, host order */
  uint32_t client;       /* IPv4, host order */
  uint16_t vport;
  uint16_t cport;
  uint8_t event; /* OPEN, CLOSE, REJECT */
  uint8_t pad[3];
  uint32_t backend; /* IPv4, host order */
  uint8_t pad2[4];
  uint64_t bytes_in;  /* a close only */
  uint64_t bytes_out; /* a close only */
  uint64_t seen_ns;   /* when the dataplane saw it (not the event time) */
};
_Static_assert(sizeof(struct lb_conn) == 64, "64-byte record");

enum { OPEN = 1, CLOSE = 2, REJECT = 3 };
#define T0 1767225600000000000ull

static const struct dplog_enum_name events[] = {{OPEN, "OPEN"}, {CLOSE, "CLOSE"}, {REJECT, "REJECT"}};

#define FN(m, name, k) {name, offsetof(struct lb_conn, m), sizeof(((struct lb_conn *)0)->m), k, 0, NULL, 0}

static const struct dplog_field_desc conn_fields[] = {
    FN(seen_ns, "seenTime", DPLOG_FIELD_NS_TIMESTAMP),
    FN(conn_time_ns, "connTime", DPLOG_FIELD_NS_TIMESTAMP),
    FN(vip, "vip", DPLOG_FIELD_IPV4),
    FN(client, "clientAddr", DPLOG_FIELD_IPV4),
    FN(vport, "vport", DPLOG_FIELD_PORT),
    FN(cport, "clientPort", DPLOG_FIELD_PORT),
    {"connEvent", offsetof(struct lb_conn, event), 1, DPLOG_FIELD_ENUM, 0, events, 3},
    FN(backend, "backendAddr", DPLOG_FIELD_IPV4),
    FN(bytes_in, "bytesIn", DPLOG_FIELD_U64),
    FN(bytes_out, "bytesOut", DPLOG_FIELD_U64),
};
#define N_CONN_FIELDS (sizeof conn_fields / sizeof conn_fields[0])

static const uint64_t opens[] = {OPEN};
static const uint64_t closes[] = {CLOSE};
static const char *const keys[] = {"vip", "vport", "clientAddr", "clientPort"};
static const char *const close_only[] = {"bytesIn", "bytesOut"};

static struct lb_conn conn(uint64_t ms, uint16_t cport, uint8_t event, uint8_t backend) {
  struct lb_conn c;
  memset(&c, 0, sizeof c);
  c.conn_time_ns = T0 + ms * 1000000ull;
  /* seenTime runs backwards: a query by it would pair the wrong records. */
  c.seen_ns = T0 + (10000 - ms) * 1000000ull;
  c.vip = 0xC000020Au;    /* 192.0.2.10 */
  c.client = 0xC6336407u; /* 198.51.100.7 */
  c.vport = 443;
  c.cport = cport;
  c.event = event;
  c.backend = 0x0A000000u | backend;
  if (event == CLOSE) {
    c.bytes_in = 1000u + cport;
    c.bytes_out = 2000;
  }
  return c;
}

static uint16_t register_conn(struct dplog *h) {
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, "lbConn", sizeof(struct lb_conn), conn_fields, N_CONN_FIELDS, &id),
         DPLOG_OK);
  return id;
}

static const uint64_t msgid_values[] = {OPEN, CLOSE};
static const uint16_t ies_ok[] = {1, 2};
static const char *const msgids[] = {"CONN_OPEN", "CONN_CLOSE"};
static const char *const sd_names[] = {"vip", "client", "v"};
static const char *const sd_sources[] = {"vip", "clientAddr", "=1"};

static void declare(struct dplog *h, uint16_t id) {
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, keys, 4, close_only, 2),
         DPLOG_OK);
  EXPECT(dplog_schema_set_event_time(h, id, "connTime"), DPLOG_OK);
  EXPECT(dplog_schema_set_priority(h, id, 3), DPLOG_OK);
  /* How it prints: APP-NAME lb, MSGID by connEvent, one SD-ELEMENT, and
   * the byte counters only on a close (lifecycle.sh reads them back
   * through dplog-cat, which knows no schema). */
  EXPECT(dplog_schema_set_syslog(h, id, "lb", "connEvent", msgid_values, msgids, 2, "lb@32473", sd_names,
                                 sd_sources, 3),
         DPLOG_OK);
  EXPECT(dplog_schema_set_fields_only_when(h, id, "connEvent", CLOSE, close_only, 2), DPLOG_OK);
}

/* The connections through a logger of `sink` (TOML of its [sink] table). */
static void log_conns(const char *sink) {
  char toml[1024];
  snprintf(toml, sizeof toml, "[ring]\ncapacity = 256\n[format]\ntype = \"binary\"\n%s", sink);
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  uint16_t id = register_conn(h);
  declare(h, id);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  /* Declared before dplog_start only. */
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_STATE);
  EXPECT(dplog_schema_set_event_time(h, id, "connTime"), DPLOG_ERR_STATE);
  EXPECT(dplog_schema_set_priority(h, id, 2), DPLOG_ERR_STATE);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  const struct lb_conn recs[] = {
      conn(500, 40002, OPEN, 5),    conn(1000, 40000, OPEN, 5),  conn(1000, 40003, OPEN, 5),
      conn(1500, 40002, CLOSE, 5),  conn(2000, 40001, OPEN, 5),  conn(2500, 40000, REJECT, 5),
      conn(3000, 40003, CLOSE, 5),  conn(5000, 40000, CLOSE, 5), conn(5500, 40000, OPEN, 6),
  };
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
    EXPECT(dplog_log(p, id, &recs[i], sizeof recs[i]), DPLOG_OK);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  struct dplog_stats s;
  EXPECT(dplog_close(h, &s), DPLOG_OK);
  CHECK(s.produced == 9 && s.written_records == 9);
}

static void expect_message(const char *part) {
  char msg[512];
  CHECK(dplog_last_error(msg, sizeof msg, NULL) == DPLOG_OK);
  if (strstr(msg, part) == NULL) {
    fprintf(stderr, "last error '%s' does not say '%s'\n", msg, part);
    CHECK(0);
  }
}

/* Every misuse: the code and a message naming what is wrong; the schema
 * keeps its lifecycle (a later good call still succeeds). */
static void misuse(const char *outdir) {
  char toml[1024];
  snprintf(toml, sizeof toml, "[sink]\ntype = \"file\"\npath = \"%s/misuse.log\"\n", outdir);
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  uint16_t id = register_conn(h);
  const char *const bad_keys[] = {"vip", "nosuchField"};
  const char *const null_key[] = {"vip", NULL};
  const char *const dup_keys[] = {"vip", "connEvent"};
  const uint64_t both[] = {OPEN, CLOSE};
  const uint64_t too_big[] = {256};

  EXPECT(dplog_schema_set_lifecycle(NULL, id, "connEvent", opens, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_lifecycle(h, id, NULL, opens, 1, closes, 1, keys, 4, NULL, 0), DPLOG_ERR_NULL);
  expect_message("event_field");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", NULL, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_NULL);
  expect_message("opens");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, NULL, 4, NULL, 0),
         DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, null_key, 2, NULL, 0),
         DPLOG_ERR_NULL);
  expect_message("keys[1]");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, keys, 4, NULL, 2),
         DPLOG_ERR_NULL);
  expect_message("close_only");
  EXPECT(dplog_schema_set_lifecycle(h, (uint16_t)(id + 1), "connEvent", opens, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_UNKNOWN_SCHEMA);
  EXPECT(dplog_schema_set_lifecycle(h, DPLOG_SCHEMA_NAT44_SESSION, "natEvent", opens, 1, closes, 1, keys, 1,
                                    NULL, 0),
         DPLOG_ERR_UNKNOWN_SCHEMA);
  EXPECT(dplog_schema_set_lifecycle(h, id, "noSuchEvent", opens, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("noSuchEvent");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, bad_keys, 2, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("nosuchField");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, dup_keys, 2, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("listed twice");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", both, 2, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("both opens and closes");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", too_big, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("does not fit");
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 0, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, NULL, 0, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("no key");

  EXPECT(dplog_schema_set_event_time(NULL, id, "connTime"), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_event_time(h, id, "vip"), DPLOG_ERR_INVALID_ARG);
  expect_message("vip");
  EXPECT(dplog_schema_set_event_time(h, id, "noSuchTime"), DPLOG_ERR_INVALID_ARG);
  EXPECT(dplog_schema_set_event_time(h, (uint16_t)(id + 1), "connTime"), DPLOG_ERR_UNKNOWN_SCHEMA);
  EXPECT(dplog_schema_set_event_time(h, id, NULL), DPLOG_OK); /* no event time */
  EXPECT(dplog_schema_set_priority(NULL, id, 2), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_priority(h, (uint16_t)(id + 1), 2), DPLOG_ERR_UNKNOWN_SCHEMA);
  /* The presentation setters. */
  EXPECT(dplog_schema_set_syslog(NULL, id, "lb", NULL, NULL, NULL, 0, NULL, NULL, NULL, 0), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_syslog(h, id, "lb", NULL, msgid_values, msgids, 2, NULL, NULL, NULL, 0),
         DPLOG_ERR_NULL);
  expect_message("msgid_field is NULL with 2 MSGIDs");
  EXPECT(dplog_schema_set_syslog(h, id, "lb", NULL, NULL, NULL, 0, NULL, sd_names, sd_sources, 3), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_syslog(h, id, "lb", "vipp", msgid_values, msgids, 2, NULL, NULL, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("no field \"vipp\"");
  EXPECT(dplog_schema_set_syslog(h, id, "lb", "connEvent", msgid_values, NULL, 2, NULL, NULL, NULL, 0),
         DPLOG_ERR_NULL);
  /* A MSGID value connEvent (1 byte) cannot hold, and one listed twice. */
  static const uint64_t wide_values[] = {OPEN, 256};
  EXPECT(dplog_schema_set_syslog(h, id, "lb", "connEvent", wide_values, msgids, 2, NULL, NULL, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("value 256 does not fit its 1 byte(s)");
  static const uint64_t twice_values[] = {CLOSE, CLOSE};
  EXPECT(dplog_schema_set_syslog(h, id, "lb", "connEvent", twice_values, msgids, 2, NULL, NULL, NULL, 0),
         DPLOG_ERR_INVALID_ARG);
  expect_message("listed twice");
  static const uint32_t twice_sel[] = {OPEN, OPEN};
  EXPECT(dplog_schema_set_ipfix_ie_by(h, id, "bytesIn", "connEvent", twice_sel, ies_ok, 2), DPLOG_ERR_INVALID_ARG);
  expect_message("listed twice");
  EXPECT(dplog_schema_set_fields_only_when(h, id, NULL, CLOSE, close_only, 2), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_fields_only_when(h, id, "connEvent", CLOSE, NULL, 2), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_fields_only_when(h, id, "bytesIm", CLOSE, close_only, 2), DPLOG_ERR_INVALID_ARG);
  static const uint32_t sel[] = {OPEN, CLOSE};
  static const uint16_t ies[] = {1, 2};
  static const uint16_t bad_ies[] = {1, 40000};
  EXPECT(dplog_schema_set_ipfix_ie_by(h, id, "bytesIn", "connEvent", sel, bad_ies, 2), DPLOG_ERR_INVALID_ARG);
  expect_message("40000");
  EXPECT(dplog_schema_set_ipfix_ie_by(h, id, "bytesIn", "connEvent", sel, NULL, 2), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_ipfix_ie_by(h, id, "bytesIn", "connEvent", sel, ies, 2), DPLOG_OK);
  EXPECT(dplog_schema_set_ipfix_ie_by(h, id, "bytesIn", "connEvent", NULL, NULL, 0), DPLOG_OK);
  static const char *const bad_names[] = {"in", "not a name"};
  EXPECT(dplog_schema_set_name_by(h, id, "bytesIn", "connEvent", sel, bad_names, 2), DPLOG_ERR_INVALID_ARG);
  EXPECT(dplog_schema_set_name_by(h, id, "bytesIn", NULL, sel, bad_names, 2), DPLOG_ERR_NULL);
  EXPECT(dplog_schema_set_enum_numbers(h, (uint16_t)(id + 1), 1), DPLOG_ERR_UNKNOWN_SCHEMA);
  EXPECT(dplog_schema_set_enum_numbers(NULL, id, 1), DPLOG_ERR_NULL);

  /* After the errors, the good declaration. */
  declare(h, id);
  /* An attached ring has declared its schemas to dplogd: too late. */
  char ringdir[600];
  snprintf(ringdir, sizeof ringdir, "%s/rings", outdir);
  CHECK(mkdir(ringdir, 0700) == 0 || errno == EEXIST);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_attach(h, 0, ringdir, "conn", &p), DPLOG_OK);
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_STATE);
  expect_message("dplog_attach");
  EXPECT(dplog_schema_set_priority(h, id, 2), DPLOG_ERR_STATE);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
  /* A closed handle. */
  EXPECT(dplog_schema_set_priority(h, id, 2), DPLOG_ERR_CLOSED);
  EXPECT(dplog_schema_set_lifecycle(h, id, "connEvent", opens, 1, closes, 1, keys, 4, NULL, 0),
         DPLOG_ERR_CLOSED);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_lifecycle OUTDIR\n");
    return 2;
  }
  char sink[1024];
  snprintf(sink, sizeof sink, "[sink]\ntype = \"archive\"\ndir = \"%s/archive\"\nblock_rows = 2\n", argv[1]);
  log_conns(sink);
  snprintf(sink, sizeof sink, "[sink]\ntype = \"file\"\npath = \"%s/conn.binary\"\n", argv[1]);
  log_conns(sink);
  misuse(argv[1]);
  printf("test_lifecycle: %d checks ok\n", checks);
  return 0;
}
