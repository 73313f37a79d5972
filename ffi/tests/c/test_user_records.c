/*
 * C tests of user record types in loggers of every slot size: a 32-, a
 * 64- and a 128-byte record (IPv4/IPv6/MAC/enum/bool/bytes fields), each
 * in a logger of its slot size ([ring] slot_bytes), logged through every
 * format to a file sink. Usage: test_user_records OUTDIR. The files
 * OUTDIR/<type>.<format> are compared by ffi/tests/c/run.sh with the
 * expected files in ffi/tests/c/expected/ (line formats: whole files;
 * binary: decoded by dplog-cat to JSON; ipfix: byte for byte, and decoded
 * by tshark). This program checks the errors itself: a record larger
 * than the slot refused at registration, an invalid slot_bytes refused
 * at open, templates for user types, a template or priority for an
 * unknown type refused at dplog_start, NAT schemas in a 32-byte-slot
 * logger, and a TSC timestamp field printed as the time it was taken.
 */
#define _GNU_SOURCE
#include <dplog.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *outdir;

static void last_error(char *buf, size_t n) {
  CHECK(dplog_last_error(buf, n, NULL) == DPLOG_OK);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = 0;
  fclose(f);
  return buf;
}

/* ---- the three record types ------------------------------------------ */

/* 32 bytes: a firewall verdict. */
struct verdict {
  struct dplog_record_header header;
  uint64_t time_ns;   /* ns since the epoch; printed in ms (observationTimeMilliseconds) */
  uint32_t count;
  uint32_t src;       /* IPv4, host order */
  uint16_t port;
  uint16_t vlan;
  uint8_t protocol;
  uint8_t action;     /* enum */
  uint8_t pad[2];
};

/* 64 bytes: an L2/IPv6 drop. */
struct l2drop {
  struct dplog_record_header header;
  uint64_t time_ns;
  uint8_t src_mac[6];
  uint8_t dst_mac[6];
  uint16_t vlan;
  uint8_t pad0[2];
  uint8_t src6[16];
  uint16_t sport;
  uint16_t dport;
  uint16_t reason;    /* enum, 2 bytes */
  uint8_t mirrored;   /* bool */
  uint8_t protocol;
  uint64_t rule;
};

/* 128 bytes: an IPv6 flow summary. */
struct flow6 {
  struct dplog_record_header header;
  uint64_t time_ns;
  uint8_t src6[16];
  uint8_t dst6[16];
  uint8_t mac[6];
  uint16_t vlan;
  uint32_t rule;
  uint32_t state;     /* enum, 4 bytes */
  uint64_t octets;
  uint64_t packets;
  char label[16];     /* bytes */
  uint16_t sport;
  uint16_t dport;
  uint8_t protocol;
  uint8_t pad[3];
  uint64_t flow_id;
  uint8_t tag[16];    /* bytes */
};

_Static_assert(sizeof(struct verdict) == 32, "32-byte record");
_Static_assert(sizeof(struct l2drop) == 64, "64-byte record");
_Static_assert(sizeof(struct flow6) == 128, "128-byte record");

static const struct dplog_enum_name actions[] = {{0, "allow"}, {1, "deny"}, {2, "reject"}};
static const struct dplog_enum_name reasons[] = {{1, "aclDeny"}, {2, "noRoute"}, {300, "ttlExpired"}};
static const struct dplog_enum_name states[] = {{1, "active"}, {2, "idleTimeout"}, {65536, "evicted"}};

#define F(s, m, k, ie) {#m, offsetof(struct s, m), sizeof(((struct s *)0)->m), k, ie, NULL, 0}
#define FN(s, m, name, k, ie) {name, offsetof(struct s, m), sizeof(((struct s *)0)->m), k, ie, NULL, 0}
#define FE(s, m, names) \
  {#m, offsetof(struct s, m), sizeof(((struct s *)0)->m), DPLOG_FIELD_ENUM, 0, names, sizeof names / sizeof names[0]}

static const struct dplog_field_desc verdict_fields[] = {
    FN(verdict, time_ns, "observationTimeMilliseconds", DPLOG_FIELD_NS_TIMESTAMP, 323),
    F(verdict, count, DPLOG_FIELD_U32, 0),
    FN(verdict, src, "sourceIPv4Address", DPLOG_FIELD_IPV4, 8),
    FN(verdict, port, "sourceTransportPort", DPLOG_FIELD_PORT, 7),
    FN(verdict, vlan, "vlanId", DPLOG_FIELD_U16, 58),
    FN(verdict, protocol, "protocolIdentifier", DPLOG_FIELD_PROTOCOL, 4),
    FE(verdict, action, actions),
};

static const struct dplog_field_desc l2drop_fields[] = {
    FN(l2drop, time_ns, "observationTimeMilliseconds", DPLOG_FIELD_NS_TIMESTAMP, 323),
    FN(l2drop, src_mac, "sourceMacAddress", DPLOG_FIELD_MAC, 56),
    FN(l2drop, dst_mac, "destinationMacAddress", DPLOG_FIELD_MAC, 80),
    FN(l2drop, vlan, "vlanId", DPLOG_FIELD_U16, 58),
    FN(l2drop, src6, "sourceIPv6Address", DPLOG_FIELD_IPV6, 27),
    FN(l2drop, sport, "sourceTransportPort", DPLOG_FIELD_PORT, 7),
    FN(l2drop, dport, "destinationTransportPort", DPLOG_FIELD_PORT, 11),
    FE(l2drop, reason, reasons),
    F(l2drop, mirrored, DPLOG_FIELD_BOOL, 0),
    FN(l2drop, protocol, "protocolIdentifier", DPLOG_FIELD_PROTOCOL, 4),
    F(l2drop, rule, DPLOG_FIELD_U64, 0),
};

static const struct dplog_field_desc flow6_fields[] = {
    FN(flow6, time_ns, "observationTimeMilliseconds", DPLOG_FIELD_NS_TIMESTAMP, 323),
    FN(flow6, src6, "sourceIPv6Address", DPLOG_FIELD_IPV6, 27),
    FN(flow6, dst6, "destinationIPv6Address", DPLOG_FIELD_IPV6, 28),
    FN(flow6, mac, "sourceMacAddress", DPLOG_FIELD_MAC, 56),
    FN(flow6, vlan, "vlanId", DPLOG_FIELD_U16, 58),
    F(flow6, rule, DPLOG_FIELD_U32, 0),
    FE(flow6, state, states),
    FN(flow6, octets, "octetDeltaCount", DPLOG_FIELD_U64, 1),
    FN(flow6, packets, "packetDeltaCount", DPLOG_FIELD_U64, 2),
    F(flow6, label, DPLOG_FIELD_BYTES, 0),
    FN(flow6, sport, "sourceTransportPort", DPLOG_FIELD_PORT, 7),
    FN(flow6, dport, "destinationTransportPort", DPLOG_FIELD_PORT, 11),
    FN(flow6, protocol, "protocolIdentifier", DPLOG_FIELD_PROTOCOL, 4),
    F(flow6, flow_id, DPLOG_FIELD_U64, 0),
    F(flow6, tag, DPLOG_FIELD_BYTES, 0),
};

#define N_FIELDS(a) (sizeof a / sizeof a[0])

/* 2026-01-01T00:00:00.123456789Z, then one second and a bit later. */
#define T0 1767225600123456789ull

static struct verdict verdict_rec(int i) {
  struct verdict r;
  memset(&r, 0, sizeof r);
  r.time_ns = T0 + (uint64_t)i * 1000000001ull;
  r.count = 7u + (uint32_t)i;
  r.src = 0xC0000201u + (uint32_t)i; /* 192.0.2.1 */
  r.port = (uint16_t)(40000 + i);
  r.vlan = 100;
  r.protocol = 17;
  r.action = (uint8_t)(i == 0 ? 1 : 2);
  return r;
}

static const uint8_t v6a[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
static const uint8_t v6b[16] = {0x20, 0x01, 0x0d, 0xb8, 0x00, 0x0a, 0, 0, 0, 0, 0, 0, 0xfe, 0xdc, 0xba, 0x98};

static struct l2drop l2drop_rec(int i) {
  struct l2drop r;
  memset(&r, 0, sizeof r);
  r.time_ns = T0 + (uint64_t)i * 1000000001ull;
  const uint8_t smac[6] = {0x02, 0x00, 0x5e, 0x10, 0x00, (uint8_t)(0x01 + i)};
  const uint8_t dmac[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  memcpy(r.src_mac, smac, 6);
  memcpy(r.dst_mac, dmac, 6);
  r.vlan = (uint16_t)(10 + i);
  memcpy(r.src6, i == 0 ? v6a : v6b, 16);
  r.sport = 546;
  r.dport = 547;
  r.reason = (uint16_t)(i == 0 ? 1 : 300);
  r.mirrored = (uint8_t)i;
  r.protocol = 17;
  r.rule = 9000000000ull + (uint64_t)i;
  return r;
}

static struct flow6 flow6_rec(int i) {
  struct flow6 r;
  memset(&r, 0, sizeof r);
  r.time_ns = T0 + (uint64_t)i * 1000000001ull;
  memcpy(r.src6, v6a, 16);
  memcpy(r.dst6, v6b, 16);
  const uint8_t mac[6] = {0x02, 0x42, 0xac, 0x11, 0x00, (uint8_t)(0x02 + i)};
  memcpy(r.mac, mac, 6);
  r.vlan = 4094;
  r.rule = 42u + (uint32_t)i;
  r.state = i == 0 ? 1u : 65536u;
  r.octets = 1500000000000ull + (uint64_t)i;
  r.packets = 1000000u + (uint64_t)i;
  strcpy(r.label, i == 0 ? "tenant-a" : "tenant-b");
  r.sport = 443;
  r.dport = (uint16_t)(50000 + i);
  r.protocol = 6;
  r.flow_id = 0x0123456789abcdefull + (uint64_t)i;
  memcpy(r.tag, "0123456789abcdef", 16);
  return r;
}

struct type {
  const char *name;
  size_t size;
  const struct dplog_field_desc *fields;
  size_t n_fields;
};

static const struct type types[3] = {
    {"verdict", sizeof(struct verdict), verdict_fields, N_FIELDS(verdict_fields)},
    {"l2drop", sizeof(struct l2drop), l2drop_fields, N_FIELDS(l2drop_fields)},
    {"flow6", sizeof(struct flow6), flow6_fields, N_FIELDS(flow6_fields)},
};

static void record_of(int t, int i, void *out) {
  if (t == 0) {
    struct verdict r = verdict_rec(i);
    memcpy(out, &r, sizeof r);
  } else if (t == 1) {
    struct l2drop r = l2drop_rec(i);
    memcpy(out, &r, sizeof r);
  } else {
    struct flow6 r = flow6_rec(i);
    memcpy(out, &r, sizeof r);
  }
}

/* The file sink appends: each test starts from no file. */
static void fresh(const char *path) {
  CHECK(remove(path) == 0 || errno == ENOENT);
}

static struct dplog *open_cfg(const char *toml) {
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  CHECK(h != NULL);
  return h;
}

static const char *formats[] = {"text", "json", "csv", "rfc5424", "rfc3164", "ipfix", "binary"};

/* Type t (its own slot size) through format f: OUTDIR/<type>.<format>.
 * publish_every = 4 holds the two records back until dplog_producer_free
 * publishes them together, so the consumer formats them in one batch
 * however the threads are scheduled: IPFIX starts a message (and takes
 * its export time from the record) per batch, and the expected files are
 * one batch's. */
static void log_type_in_format(int t, const char *format) {
  size_t slot = t == 0 ? 32 : t == 1 ? 64 : 128;
  char path[512], toml[2048];
  snprintf(path, sizeof path, "%s/%s.%s", outdir, types[t].name, format);
  fresh(path);
  snprintf(toml, sizeof toml,
           "[ring]\nslot_bytes = %zu\ncapacity = 1024\npublish_every = 4\n"
           "[format]\ntype = \"%s\"\n"
           "[format.syslog]\nhostname = \"sw1\"\napp_name = \"fw\"\nprocid = \"7\"\n"
           "[format.ipfix]\nexport_clock = \"record\"\nobservation_domain_id = 5\n"
           "[sink]\ntype = \"file\"\npath = \"%s\"\n",
           slot, format, path);
  struct dplog *h = open_cfg(toml);
  size_t got = 0;
  EXPECT(dplog_slot_bytes(h, &got), DPLOG_OK);
  CHECK(got == slot);
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, types[t].name, types[t].size, types[t].fields,
                               types[t].n_fields, &id),
         DPLOG_OK);
  CHECK(id == DPLOG_SCHEMA_USER_FIRST);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  uint8_t rec[DPLOG_RECORD_MAX_SIZE];
  /* Record 0 through dplog_log (inline for 64 bytes), record 1 through
   * dplog_reserve/dplog_commit (slot_bytes apart). */
  record_of(t, 0, rec);
  EXPECT(dplog_log(p, id, rec, types[t].size), DPLOG_OK);
  void *slots = NULL;
  EXPECT(dplog_reserve(p, id, 2, &slots), DPLOG_OK);
  record_of(t, 1, slots);
  /* The second reserved slot is cancelled by committing one. */
  memset((char *)slots + slot, 0xee, slot);
  EXPECT(dplog_commit(p, 1, NULL), DPLOG_OK);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  struct dplog_stats s;
  EXPECT(dplog_close(h, &s), DPLOG_OK);
  CHECK(s.written_records == 2 && s.produced == 2);
}

static void test_every_type_in_every_format(void) {
  for (int t = 0; t < 3; t++) {
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
      log_type_in_format(t, formats[f]);
    }
  }
}

/* A record larger than the logger's slot is refused at registration
 * with both sizes and the key to set; smaller ones are taken. */
static void test_too_large_for_the_slot(void) {
  struct dplog *h = open_cfg("[ring]\nslot_bytes = 32\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, "l2drop", sizeof(struct l2drop), l2drop_fields,
                               N_FIELDS(l2drop_fields), &id),
         DPLOG_ERR_BAD_LENGTH);
  char msg[512];
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "64") && strstr(msg, "32-byte") && strstr(msg, "slot_bytes = 64"));
  CHECK(id == 0);
  EXPECT(dplog_schema_register(h, "verdict", sizeof(struct verdict), verdict_fields,
                               N_FIELDS(verdict_fields), &id),
         DPLOG_OK);
  EXPECT(dplog_register_nat_schemas(h), DPLOG_OK);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  /* NAT schemas larger than 32 bytes are not in a 32-byte-slot logger;
   * those that fit are (the handle asked for them). */
  struct dplog_nat44_session n44;
  memset(&n44, 0, sizeof n44);
  EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &n44, sizeof n44), DPLOG_ERR_UNKNOWN_SCHEMA);
  struct dplog_nat_port_block pb;
  memset(&pb, 0, sizeof pb);
  EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT_PORT_BLOCK, &pb, sizeof pb), DPLOG_ERR_UNKNOWN_SCHEMA);
  struct dplog_nat_quota_exceeded q;
  memset(&q, 0, sizeof q);
  EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED, &q, sizeof q), DPLOG_OK);
  struct verdict v = verdict_rec(0);
  EXPECT(dplog_log(p, id, &v, sizeof v), DPLOG_OK);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  struct dplog_stats s;
  EXPECT(dplog_close(h, &s), DPLOG_OK);
  CHECK(s.written_records == 2);

  /* Nothing is larger than DPLOG_RECORD_MAX_SIZE. */
  h = open_cfg("[ring]\nslot_bytes = 128\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
  EXPECT(dplog_schema_register(h, "huge", DPLOG_RECORD_MAX_SIZE + 1, verdict_fields,
                               N_FIELDS(verdict_fields), &id),
         DPLOG_ERR_BAD_LENGTH);
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "129") && strstr(msg, "largest slot is 128"));
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
}

static void test_bad_slot_bytes(void) {
  struct dplog *h = NULL;
  EXPECT(dplog_open_str("[ring]\nslot_bytes = 48\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n", &h),
         DPLOG_ERR_CONFIG);
  CHECK(h == NULL);
  char msg[512];
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "slot_bytes = 48") && strstr(msg, "32, 64 or 128"));
}

/* [format] template applies to the first registered type,
 * [format.templates] names user types (accepted at open, before they are
 * registered); one for no registered type is refused at dplog_start. */
static void test_templates_for_user_types(void) {
  char path[512], toml[2048];
  snprintf(path, sizeof path, "%s/templates.log", outdir);
  fresh(path);
  snprintf(toml, sizeof toml,
           "[ring]\nslot_bytes = 128\n"
           "[schemas]\nnat = true\n"
           "[format]\ntype = \"text\"\n"
           "template = \"V {action:name} {sourceIPv4Address}:{sourceTransportPort}\"\n"
           "[format.templates]\n"
           "flow6 = \"F {sourceIPv6Address} > {destinationIPv6Address} {state:name} {label}\"\n"
           "natQuotaExceeded = \"Q {natQuotaExceededEvent}\"\n"
           "[sink]\ntype = \"file\"\npath = \"%s\"\n",
           path);
  struct dplog *h = open_cfg(toml);
  uint16_t vid = 0, fid = 0;
  EXPECT(dplog_schema_register(h, "verdict", sizeof(struct verdict), verdict_fields,
                               N_FIELDS(verdict_fields), &vid),
         DPLOG_OK);
  EXPECT(dplog_schema_register(h, "flow6", sizeof(struct flow6), flow6_fields,
                               N_FIELDS(flow6_fields), &fid),
         DPLOG_OK);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 3, &p), DPLOG_OK);
  struct verdict v = verdict_rec(0);
  struct flow6 f = flow6_rec(1);
  EXPECT(dplog_log(p, vid, &v, sizeof v), DPLOG_OK);
  EXPECT(dplog_log(p, fid, &f, sizeof f), DPLOG_OK);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
  char *text = read_file(path);
  CHECK(text != NULL);
  CHECK(strcmp(text,
               "V deny 192.0.2.1:40000\n"
               "F 2001:db8::1 > 2001:db8:a::fedc:ba98 evicted tenant-b\n") == 0);
  free(text);

  /* A template for a type nobody registers: refused at dplog_start,
   * which starts nothing (the handle closes as never started). */
  h = open_cfg("[format]\ntype = \"text\"\n[format.templates]\nnoSuchType = \"{x}\"\n"
               "[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
  EXPECT(dplog_start(h, NULL, 0), DPLOG_ERR_CONFIG);
  char msg[512];
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "noSuchType") != NULL);
  struct dplog_producer *none = NULL;
  EXPECT(dplog_producer_new(h, 0, &none), DPLOG_ERR_STATE);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);

  /* A bad template for a registered type: the message names the type. */
  h = open_cfg("[format]\ntype = \"text\"\ntemplate = \"{nope}\"\n"
               "[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
  EXPECT(dplog_schema_register(h, "verdict", sizeof(struct verdict), verdict_fields,
                               N_FIELDS(verdict_fields), &vid),
         DPLOG_OK);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_ERR_CONFIG);
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "verdict") && strstr(msg, "nope"));
  EXPECT(dplog_close(h, NULL), DPLOG_OK);

  /* A bad template of a NAT schema asked for in the config is refused at
   * open. */
  EXPECT(dplog_open_str("[schemas]\nnat = true\n"
                        "[format]\ntype = \"text\"\n[format.templates]\nnatPortBlock = \"{nope}\"\n"
                        "[sink]\ntype = \"file\"\npath = \"/dev/null\"\n",
                        &h),
         DPLOG_ERR_CONFIG);
  /* A template of a NAT schema on a handle that does not serve them:
   * refused at dplog_start, saying how to ask. */
  h = open_cfg("[format]\ntype = \"text\"\n[format.templates]\nnatPortBlock = \"{portRangeStart}\"\n"
               "[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
  EXPECT(dplog_start(h, NULL, 0), DPLOG_ERR_CONFIG);
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "natPortBlock") && strstr(msg, "dplog_register_nat_schemas"));
  EXPECT(dplog_close(h, NULL), DPLOG_OK);

  /* [ring.priorities] for an unknown type: refused at dplog_start. */
  h = open_cfg("[ring.priorities]\nnoSuchType = 2\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
  EXPECT(dplog_start(h, NULL, 0), DPLOG_ERR_CONFIG);
  last_error(msg, sizeof msg);
  CHECK(strstr(msg, "ring.priorities") && strstr(msg, "noSuchType"));
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
}

/* A TSC timestamp field is the record's event time, printed (JSON
 * "timestamp") as the time it was taken with the consumer's calibration;
 * the field itself prints the same time in milliseconds since the epoch.
 * dplog_now_ticks reads the clock the library converts. */
static void test_tsc_field(void) {
  struct tsc_rec {
    struct dplog_record_header header;
    uint64_t tsc;
    uint32_t n;
    uint32_t pad;
  };
  const struct dplog_field_desc fields[] = {
      {"at", offsetof(struct tsc_rec, tsc), 8, DPLOG_FIELD_TSC_TIMESTAMP, 0, NULL, 0},
      {"n", offsetof(struct tsc_rec, n), 4, DPLOG_FIELD_U32, 0, NULL, 0},
  };
  char path[512], toml[1024];
  snprintf(path, sizeof path, "%s/tsc.json", outdir);
  fresh(path);
  snprintf(toml, sizeof toml,
           "[ring]\nslot_bytes = 32\n[format]\ntype = \"json\"\n[sink]\ntype = \"file\"\npath = \"%s\"\n",
           path);
  struct dplog *h = open_cfg(toml);
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, "tick", sizeof(struct tsc_rec), fields, 2, &id), DPLOG_OK);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  struct tsc_rec r;
  memset(&r, 0, sizeof r);
  r.n = 5;
  EXPECT(dplog_now_ticks(NULL), DPLOG_ERR_NULL);
  EXPECT(dplog_now_ticks(&r.tsc), DPLOG_OK);
  /* The inline dplog_now_ticks (its first call above asked the library
   * for its clock) reads what the exported one reads: its value lies
   * between two calls of the exported one around it. */
  uint32_t source = dplog_clock_source();
  CHECK(source == DPLOG_CLOCK_TSC || source == DPLOG_CLOCK_REALTIME);
  uint64_t t0 = 0, t1 = 0, t2 = 0;
  EXPECT((dplog_now_ticks)(&t0), DPLOG_OK);
  EXPECT(dplog_now_ticks(&t1), DPLOG_OK);
  EXPECT((dplog_now_ticks)(&t2), DPLOG_OK);
  CHECK(t0 <= t1 && t1 <= t2);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  EXPECT(dplog_log(p, id, &r, sizeof r), DPLOG_OK);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
  char *text = read_file(path);
  CHECK(text != NULL);
  /* "timestamp":"YYYY-MM-DDTHH:MM:SS.ffffffZ": the same second as now,
   * give or take two (the calibration's error is far below that). */
  const char *at = strstr(text, "{\"timestamp\":\"");
  CHECK(at != NULL);
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  CHECK(sscanf(at + 14, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec) == 6);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  long long secs = (long long)timegm(&tm);
  CHECK(secs >= (long long)now.tv_sec - 2 && secs <= (long long)now.tv_sec + 2);
  /* "at": the same instant in ms: the timestamp's second and its first
   * three fraction digits. */
  unsigned frac_us = 0;
  CHECK(sscanf(at + 14 + 20, "%6u", &frac_us) == 1);
  char ms[64];
  snprintf(ms, sizeof ms, "\"at\":%lld%03u,\"n\":5}\n", secs, frac_us / 1000);
  CHECK(strstr(text, ms) != NULL);
  free(text);
}

/* ---- inline reservations into a full ring of 32-byte slots ---------- */

struct fifo_reader {
  int fd;
  char *buf;
  size_t len, cap;
  int overflow;
};

/* Reads the FIFO to its end (the sink's close) into a bounded buffer. */
static void *read_fifo(void *arg) {
  struct fifo_reader *r = arg;
  for (;;) {
    char chunk[65536];
    ssize_t n = read(r->fd, chunk, sizeof chunk);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r->len + (size_t)n > r->cap) {
      r->overflow = 1;
      continue;
    }
    memcpy(r->buf + r->len, chunk, (size_t)n);
    r->len += (size_t)n;
  }
  return NULL;
}

/* The inline dplog_reserve zeroes 64 bytes for every slot size; in a
 * ring of 32-byte slots that is its slot and the next, which must still
 * be the producer's. The sink writes to a FIFO nobody reads, so the
 * consumer stops and the ring fills; the producer reserves until the
 * ring is full, then the FIFO is read to the end. Every record accepted
 * comes out once, in order and intact: the ring's oldest unread record,
 * right after the last free slot, was not zeroed. */
static void test_reserve_into_a_full_ring_of_32_byte_slots(void) {
  char path[512], toml[1024];
  snprintf(path, sizeof path, "%s/full32.fifo", outdir);
  unlink(path);
  CHECK(mkfifo(path, 0600) == 0);
  struct fifo_reader r = {0};
  r.fd = open(path, O_RDONLY | O_NONBLOCK);
  CHECK(r.fd >= 0);
  snprintf(toml, sizeof toml,
           "[ring]\nslot_bytes = 32\ncapacity = 256\nbackpressure = \"drop\"\n"
           "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"%s\"\n",
           path);
  struct dplog *h = open_cfg(toml);
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, "verdict", sizeof(struct verdict), verdict_fields,
                               N_FIELDS(verdict_fields), &id),
         DPLOG_OK);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  /* Under "drop" a reservation in a full ring is a staging slot, and its
   * commit drops it (DPLOG_ERR_FULL). Until 100000 commits in a row found
   * the ring full (the consumer is then long blocked on the FIFO), at
   * most 2 million tries. */
  enum { MAX_TRIES = 2000000, MAX_ACCEPTED = 200000 };
  uint32_t accepted = 0, full_in_a_row = 0;
  uint64_t tries = 0;
  while (full_in_a_row < 100000 && tries < MAX_TRIES) {
    tries++;
    void *slot = NULL;
    EXPECT(dplog_reserve(p, id, 1, &slot), DPLOG_OK);
    struct verdict *v = slot;
    v->time_ns = 1767225600000000000ull;
    v->count = accepted + 1;
    v->src = 0x0A000001;
    v->port = 53;
    v->protocol = 17;
    dplog_result rc = dplog_commit(p, 1, NULL);
    if (rc == DPLOG_ERR_FULL) {
      full_in_a_row++;
      continue;
    }
    EXPECT(rc, DPLOG_OK);
    CHECK(++accepted < MAX_ACCEPTED);
    full_in_a_row = 0;
  }
  CHECK(full_in_a_row == 100000);
  /* Read the FIFO to its end, blocking, while the logger drains and
   * closes the sink. */
  CHECK(fcntl(r.fd, F_SETFL, 0) == 0);
  r.cap = 64u << 20;
  r.buf = malloc(r.cap);
  CHECK(r.buf != NULL);
  pthread_t reader;
  CHECK(pthread_create(&reader, NULL, read_fifo, &r) == 0);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  /* The records dropped in the full ring make the close say so. */
  struct dplog_stats s;
  EXPECT(dplog_close(h, &s), DPLOG_ERR_UNDELIVERED);
  CHECK(pthread_join(reader, NULL) == 0);
  close(r.fd);
  unlink(path);
  CHECK(!r.overflow);
  CHECK(s.written_records == accepted);
  CHECK(s.produced == tries);
  CHECK(s.enqueued == accepted && s.dropped_full == tries - accepted);
  /* The CSV header, then a line per record: verdicts (count in the
   * fourth column: recordType, timestamp, observationTimeMilliseconds,
   * count) 1, 2, ... accepted, and the in-band drop reports. */
  char *line = memchr(r.buf, '\n', r.len);
  CHECK(line != NULL);
  uint32_t want = 1, reports = 0;
  for (char *at = line + 1; at < r.buf + r.len;) {
    char *end = memchr(at, '\n', (size_t)(r.buf + r.len - at));
    CHECK(end != NULL);
    if (strncmp(at, "verdict,", 8) != 0) {
      reports++;
      at = end + 1;
      continue;
    }
    const char *col = at;
    for (int c = 0; c < 3; c++) {
      col = memchr(col, ',', (size_t)(end - col));
      CHECK(col != NULL);
      col++;
    }
    CHECK(strtoul(col, NULL, 10) == want);
    want++;
    at = end + 1;
  }
  CHECK(reports >= 1);
  CHECK(want - 1 == accepted);
  free(r.buf);
}

/* The inline dplog_reserve zeroes the record's bytes, not the whole slot:
 * in a 128-byte-slot ring of 64 slots (reused every 64 records) three
 * types take turns, each reserved slot is filled past its record with
 * 0xa5 after the record's bytes were checked zero, then the record is
 * written. The output is byte-identical to the same records logged
 * through the exported dplog_log into a second logger: no byte past a
 * record, nor of an earlier record in the slot, reaches a formatter. */
static void test_inline_reserve_zeroes_each_record(void) {
  char path_a[512], path_b[512], toml[1024];
  char *paths[2] = {path_a, path_b};
  snprintf(path_a, sizeof path_a, "%s/zero_reserve.csv", outdir);
  snprintf(path_b, sizeof path_b, "%s/zero_log.csv", outdir);
  for (int k = 0; k < 2; k++) {
    fresh(paths[k]);
    snprintf(toml, sizeof toml,
             "[ring]\nslot_bytes = 128\ncapacity = 64\n"
             "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"%s\"\n",
             paths[k]);
    struct dplog *h = open_cfg(toml);
    uint16_t ids[3];
    for (int t = 0; t < 3; t++) {
      EXPECT(dplog_schema_register(h, types[t].name, types[t].size, types[t].fields,
                                   types[t].n_fields, &ids[t]),
             DPLOG_OK);
    }
    EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
    struct dplog_producer *p = NULL;
    EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
    static const uint8_t zero[128];
    uint32_t inline_reservations = 0;
    for (int i = 0; i < 3000; i++) {
      /* Mostly flow6 (the window's own schema once it opened one), every
       * third record another type. */
      int t = i % 3 == 0 ? (i / 3) % 2 : 2;
      uint8_t rec[128];
      record_of(t, i, rec);
      if (k == 1) {
        EXPECT((dplog_log)(p, ids[t], rec, types[t].size), DPLOG_OK);
        continue;
      }
      void *slot = NULL;
      EXPECT(dplog_reserve(p, ids[t], 1, &slot), DPLOG_OK);
      const struct dplog_log_window *w = (const struct dplog_log_window *)(const void *)p;
      inline_reservations += w->reservation != 0 && (uint8_t *)slot == w->cursor;
      CHECK(memcmp(slot, zero, types[t].size) == 0);
      memset(slot, 0xa5, 128);
      memcpy(slot, rec, types[t].size);
      EXPECT(dplog_commit(p, 1, NULL), DPLOG_OK);
    }
    /* Most reservations were the header's inline ones. */
    CHECK(k == 1 || inline_reservations > 2000);
    EXPECT(dplog_producer_free(p), DPLOG_OK);
    struct dplog_stats s;
    EXPECT(dplog_close(h, &s), DPLOG_OK);
    CHECK(s.written_records == 3000 && s.produced == 3000);
  }
  char *a = read_file(path_a), *b = read_file(path_b);
  CHECK(strlen(a) > 3000 * 20 && strcmp(a, b) == 0);
  free(a);
  free(b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  outdir = argv[1];
  test_bad_slot_bytes();
  test_too_large_for_the_slot();
  test_templates_for_user_types();
  test_tsc_field();
  test_every_type_in_every_format();
  test_reserve_into_a_full_ring_of_32_byte_slots();
  test_inline_reserve_zeroes_each_record();
  printf("test_user_records: %d checks passed\n", checks);
  return 0;
}
