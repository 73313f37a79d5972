/*
 * A dataplane that is no NAT, as its user sees dplog: a 128-byte DNS query
 * record registered from C (the handle never asks for the NAT schemas),
 * logged through text, JSON, CSV, IPFIX and binary file sinks, and into a
 * shared-memory ring for dplogd. No NAT column, template, schema name or
 * schema id may appear anywhere.
 *
 * Usage: test_no_nat OUTDIR         writes OUTDIR/dns.<format>, checks the
 *                                   line formats itself (exact CSV header);
 *        test_no_nat attach RINGDIR logs into a ring of RINGDIR (dplogd).
 * ffi/tests/c/run.sh decodes the rest: the IPFIX templates with tshark
 * (exactly template 256, the user's fields), the binary log and the
 * dplogd output with dplog-cat and tshark.
 *
 * Also checked here: the inline dplog_log serves loggers of 32-, 64- and
 * 128-byte slots (a window opens, of the logger's slot size), and a NAT
 * record is DPLOG_ERR_UNKNOWN_SCHEMA with a message that says how to ask.
 */
#define _GNU_SOURCE
#include <dplog.h>

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

struct dns_query {
  struct dplog_record_header header;
  uint64_t time_ns;     /* ns since the epoch */
  uint32_t client;      /* IPv4, host order */
  uint32_t server;      /* IPv4, host order */
  uint16_t client_port;
  uint16_t qtype;
  uint8_t rcode;        /* enum */
  uint8_t protocol;
  uint8_t pad[2];
  uint32_t latency_us;
  uint8_t pad2[4];
  char qname[88];       /* bytes, NUL-padded */
};
_Static_assert(sizeof(struct dns_query) == 128, "128-byte record");

static const struct dplog_enum_name rcodes[] = {{0, "noError"}, {2, "servFail"}, {3, "nxDomain"}};

#define FN(m, name, k, ie) {name, offsetof(struct dns_query, m), sizeof(((struct dns_query *)0)->m), k, ie, NULL, 0}

static const struct dplog_field_desc dns_fields[] = {
    FN(time_ns, "observationTimeMilliseconds", DPLOG_FIELD_NS_TIMESTAMP, 323),
    FN(client, "sourceIPv4Address", DPLOG_FIELD_IPV4, 8),
    FN(server, "destinationIPv4Address", DPLOG_FIELD_IPV4, 12),
    FN(client_port, "sourceTransportPort", DPLOG_FIELD_PORT, 7),
    FN(qtype, "queryType", DPLOG_FIELD_U16, 0),
    {"responseCode", offsetof(struct dns_query, rcode), 1, DPLOG_FIELD_ENUM, 0, rcodes, 3},
    FN(protocol, "protocolIdentifier", DPLOG_FIELD_PROTOCOL, 4),
    /* Its IPFIX enterprise element id declared (the others derive theirs
     * from name and type). */
    FN(latency_us, "latencyMicroseconds", DPLOG_FIELD_U32, DPLOG_IE_ENTERPRISE | 4001),
    FN(qname, "queryName", DPLOG_FIELD_BYTES, 0),
};
#define N_DNS_FIELDS (sizeof dns_fields / sizeof dns_fields[0])

/* The whole CSV header of a logger serving dnsQuery only: its columns,
 * then the drop report's (CRLF, RFC 4180). */
static const char CSV_HEADER[] =
    "recordType,timestamp,observationTimeMilliseconds,sourceIPv4Address,destinationIPv4Address,"
    "sourceTransportPort,queryType,responseCode,protocolIdentifier,latencyMicroseconds,queryName,"
    "dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock\r\n";

static struct dns_query query(int i) {
  struct dns_query q;
  memset(&q, 0, sizeof q);
  q.time_ns = 1767225600000000000ull + (uint64_t)i * 1000000ull; /* 2026-01-01 + i ms */
  q.client = 0xC0000201u + (uint32_t)i;                          /* 192.0.2.1 + i */
  q.server = 0xC6336435u;                                        /* 198.51.100.53 */
  q.client_port = (uint16_t)(40000 + i);
  q.qtype = 28; /* AAAA */
  q.rcode = i == 2 ? 3 : 0;
  q.protocol = 17;
  q.latency_us = (uint32_t)(100 + i);
  snprintf(q.qname, sizeof q.qname, "host%d.example.org", i);
  return q;
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

/* A NAT name in `text`: a schema or field name starting "nat" and a
 * capital or digit (natEvent, nat44Session, natPortBlock, natPoolId, ...),
 * "NAT" or "NAPT" (postNATSourceIPv4Address, postNAPTSourceTransportPort,
 * the NAT syslog app name), a port block's "portRange". */
static int mentions_nat(const char *text) {
  for (const char *c = text; *c; c++) {
    if (strncmp(c, "nat", 3) == 0 && (isupper((unsigned char)c[3]) || isdigit((unsigned char)c[3]))) return 1;
    if (strncmp(c, "NAT", 3) == 0 || strncmp(c, "NAPT", 4) == 0 || strncmp(c, "portRange", 9) == 0) return 1;
  }
  return 0;
}

/* A NAT record on this handle: refused, the message says how to ask. */
static void nat_refused(struct dplog_producer *p) {
  struct dplog_nat44_session s;
  memset(&s, 0, sizeof s);
  EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &s, sizeof s), DPLOG_ERR_UNKNOWN_SCHEMA);
  char msg[512];
  CHECK(dplog_last_error(msg, sizeof msg, NULL) == DPLOG_OK);
  CHECK(strstr(msg, "dplog_register_nat_schemas") != NULL);
  struct dplog_nat_quota_exceeded q;
  memset(&q, 0, sizeof q);
  EXPECT((dplog_log)(p, DPLOG_SCHEMA_NAT_QUOTA_EXCEEDED, &q, sizeof q), DPLOG_ERR_UNKNOWN_SCHEMA);
}

static uint16_t register_dns(struct dplog *h) {
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, "dnsQuery", sizeof(struct dns_query), dns_fields, N_DNS_FIELDS, &id),
         DPLOG_OK);
  CHECK(id == DPLOG_SCHEMA_USER_FIRST);
  return id;
}

/* Three queries through `format` into OUTDIR/dns.<format>. */
static void log_in_format(const char *outdir, const char *format) {
  char path[512], toml[1024];
  snprintf(path, sizeof path, "%s/dns.%s", outdir, format);
  remove(path);
  snprintf(toml, sizeof toml,
           "[ring]\nslot_bytes = 128\ncapacity = 256\n[format]\ntype = \"%s\"\n"
           "[format.ipfix]\nexport_clock = \"record\"\n[sink]\ntype = \"file\"\npath = \"%s\"\n",
           format, path);
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  uint16_t id = register_dns(h);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  for (int i = 0; i < 3; i++) {
    struct dns_query q = query(i);
    EXPECT(dplog_log(p, id, &q, sizeof q), DPLOG_OK);
  }
  nat_refused(p);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  struct dplog_stats s;
  EXPECT(dplog_close(h, &s), DPLOG_OK);
  CHECK(s.produced == 3 && s.written_records == 3);
}

static void check_line_formats(const char *outdir) {
  char path[512];
  const char *formats[] = {"text", "json", "csv"};
  for (size_t f = 0; f < 3; f++) {
    snprintf(path, sizeof path, "%s/dns.%s", outdir, formats[f]);
    char *text = read_file(path);
    CHECK(text != NULL);
    CHECK(!mentions_nat(text));
    CHECK(strstr(text, "host2.example.org") != NULL && strstr(text, "nxDomain") != NULL);
    if (f == 2) {
      CHECK(strncmp(text, CSV_HEADER, strlen(CSV_HEADER)) == 0);
      /* The header once, then one row per record of the same columns. */
      size_t lines = 0;
      for (const char *c = text; *c; c++) lines += *c == '\n';
      CHECK(lines == 4);
      CHECK(strncmp(text + strlen(CSV_HEADER), "dnsQuery,", 9) == 0);
    } else if (f == 1) {
      CHECK(strstr(text, "\"queryName\":\"host0.example.org\"") != NULL);
    }
    free(text);
  }
}

/* The inline dplog_log of loggers of every slot size: a record of the
 * slot's size opens a window of slots of that size. */
static void inline_in_every_slot_size(const char *outdir) {
  for (size_t slot = 32; slot <= 128; slot *= 2) {
    char path[512], toml[1024];
    snprintf(path, sizeof path, "%s/probe%zu.log", outdir, slot);
    remove(path);
    snprintf(toml, sizeof toml,
             "[ring]\nslot_bytes = %zu\ncapacity = 64\n[sink]\ntype = \"file\"\npath = \"%s\"\n", slot,
             path);
    struct dplog *h = NULL;
    EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
    /* A record of the slot's size: the header, then 64-bit counters. */
    struct dplog_field_desc f[15];
    char names[15][24];
    size_t n = (slot - 8) / 8;
    for (size_t i = 0; i < n; i++) {
      snprintf(names[i], sizeof names[i], "c%zu", i);
      f[i] = (struct dplog_field_desc){names[i], 8 + 8 * i, 8, DPLOG_FIELD_U64, 0, NULL, 0};
    }
    uint16_t id = 0;
    EXPECT(dplog_schema_register(h, "probe", slot, f, n, &id), DPLOG_OK);
    EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
    struct dplog_producer *p = NULL;
    EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
    uint64_t rec[16];
    for (int k = 0; k < 10; k++) {
      for (size_t i = 0; i < 16; i++) rec[i] = (uint64_t)k * 100 + i;
      EXPECT(dplog_log(p, id, rec, slot), DPLOG_OK);
#ifdef DPLOG_H_INLINE
      if (k >= 1) {
        /* Ring index 0 is latency-sampled (the library's push); from the
         * second record on the window is open: the records are inline. */
        const struct dplog_log_window *w = (const struct dplog_log_window *)(const void *)p;
        CHECK(w->cursor != NULL && w->slot_bytes == slot);
        CHECK(w->n_sizes == (uint32_t)id + 1 && w->sizes[id] == slot);
        CHECK(w->sizes[DPLOG_SCHEMA_NAT44_SESSION] == 0);
        CHECK(w->last == ((uint32_t)id << 16 | (uint32_t)slot));
      }
#endif
    }
    EXPECT(dplog_producer_free(p), DPLOG_OK);
    struct dplog_stats s;
    EXPECT(dplog_close(h, &s), DPLOG_OK);
    CHECK(s.written_records == 10);
    char *text = read_file(path);
    CHECK(text != NULL);
    char want[64];
    snprintf(want, sizeof want, "c%zu=%zu\n", n - 1, 900 + n); /* last record's last field */
    CHECK(strstr(text, want) != NULL);
    free(text);
  }
}

/* A record whose size is no multiple of 8 (44 bytes in 64-byte slots):
 * the inline path copies its tail bytes exactly. */
static void inline_odd_size(const char *outdir) {
  char path[512], toml[1024];
  snprintf(path, sizeof path, "%s/odd.log", outdir);
  remove(path);
  snprintf(toml, sizeof toml, "[ring]\ncapacity = 64\n[sink]\ntype = \"file\"\npath = \"%s\"\n", path);
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  struct dplog_field_desc f[5] = {
      {"a", 8, 8, DPLOG_FIELD_U64, 0, NULL, 0},  {"b", 16, 8, DPLOG_FIELD_U64, 0, NULL, 0},
      {"c", 24, 8, DPLOG_FIELD_U64, 0, NULL, 0}, {"d", 32, 8, DPLOG_FIELD_U64, 0, NULL, 0},
      {"e", 40, 4, DPLOG_FIELD_U32, 0, NULL, 0},
  };
  uint16_t id = 0;
  EXPECT(dplog_schema_register(h, "odd", 44, f, 5, &id), DPLOG_OK);
  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_producer_new(h, 0, &p), DPLOG_OK);
  for (uint32_t k = 0; k < 4; k++) {
    uint8_t rec[44];
    memset(rec, 0, sizeof rec);
    uint64_t d = 1000 + k;
    uint32_t e = 4000000000u + k;
    memcpy(rec + 32, &d, 8);
    memcpy(rec + 40, &e, 4);
    EXPECT(dplog_log(p, id, rec, sizeof rec), DPLOG_OK);
  }
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
  char *text = read_file(path);
  CHECK(text != NULL);
  CHECK(strstr(text, "a=0 b=0 c=0 d=1003 e=4000000003\n") != NULL);
  CHECK(strstr(text, "a=0 b=0 c=0 d=1000 e=4000000000\n") != NULL);
  free(text);
}

/* Three queries into a shared-memory ring of RINGDIR, for dplogd. */
static void log_attached(const char *ringdir) {
  struct dplog *h = NULL;
  EXPECT(dplog_open_str("[ring]\nslot_bytes = 128\ncapacity = 64\n", &h), DPLOG_OK);
  uint16_t id = register_dns(h);
  struct dplog_producer *p = NULL;
  EXPECT(dplog_attach(h, 0, ringdir, "dns", &p), DPLOG_OK);
  for (int i = 0; i < 3; i++) {
    struct dns_query q = query(i);
    EXPECT(dplog_log(p, id, &q, sizeof q), DPLOG_OK);
  }
  nat_refused(p);
  EXPECT(dplog_producer_free(p), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "attach") == 0) {
    log_attached(argv[2]);
  } else if (argc == 2) {
    const char *formats[] = {"text", "json", "csv", "ipfix", "binary"};
    for (size_t f = 0; f < 5; f++) log_in_format(argv[1], formats[f]);
    check_line_formats(argv[1]);
    inline_in_every_slot_size(argv[1]);
    inline_odd_size(argv[1]);
  } else {
    fprintf(stderr, "usage: test_no_nat OUTDIR | test_no_nat attach RINGDIR\n");
    return 2;
  }
  printf("test_no_nat: %d checks passed\n", checks);
  return 0;
}
