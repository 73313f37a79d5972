/*
 * Logging your own record type from C: a software switch logs every
 * packet its ACL drops. The record (64 bytes: source MAC, VLAN, IPv6
 * source address, drop reason by name, TSC timestamp, rule id, ports) is
 * declared to dplog once with dplog_schema_register; then it is logged
 * like any built-in record and printed by the configured format with its
 * field names.
 *
 *   acl_drop [--config FILE] [--records N] [--output FILE]
 *
 * Without --config the embedded configuration below is used: text
 * lines from a template for the aclDrop type, written to --output
 * (default acl_drop.log). With --config, the file's [sink] and [format]
 * apply (e.g. type = "json"); --output is then ignored.
 *
 * Build: cc -std=c11 $(pkg-config --cflags dplog) acl_drop.c \
 *           $(pkg-config --libs dplog)
 */
#define _GNU_SOURCE
#include <dplog.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The record: the 8-byte header first (dplog fills it), then the fields
 * at any offsets the C compiler chooses; dplog learns them from the
 * descriptors below. 64 bytes: a 64-byte slot (the default), and
 * dplog_log of a 64-byte record is compiled inline into the caller. */
struct acl_drop {
  struct dplog_record_header header;
  uint64_t tsc;          /* when: dplog_now_ticks (TSC ticks, or ns without an invariant TSC) */
  uint8_t src_mac[6];
  uint16_t vlan;
  uint8_t src_addr[16];  /* IPv6, network order */
  uint32_t rule_id;
  uint16_t src_port;
  uint16_t dst_port;
  uint8_t reason;        /* enum acl_reason */
  uint8_t protocol;
  uint16_t in_port;      /* switch port the packet came in on */
  uint32_t packet_len;
  uint64_t rule_drops;   /* drops by this rule so far */
};
_Static_assert(sizeof(struct acl_drop) == 64, "one 64-byte slot");

enum acl_reason { ACL_DENY = 1, ACL_NO_MATCH = 2, ACL_RATE_LIMIT = 3 };

static const struct dplog_enum_name reason_names[] = {
    {ACL_DENY, "deny"}, {ACL_NO_MATCH, "defaultDeny"}, {ACL_RATE_LIMIT, "rateLimit"}};

/* The producer's clock: dplog_now_ticks, compiled inline to one rdtsc
 * where the TSC is invariant (else CLOCK_REALTIME ns); the consumer
 * converts it to UTC with its own calibration (docs/time-and-clocks.md). */
#define TIME_KIND DPLOG_FIELD_TSC_TIMESTAMP
static uint64_t now_ticks(void) {
  uint64_t t = 0;
  dplog_now_ticks(&t);
  return t;
}

#define FIELD(m, name, kind, ie) \
  {name, offsetof(struct acl_drop, m), sizeof(((struct acl_drop *)0)->m), kind, ie, NULL, 0}

static const struct dplog_field_desc acl_drop_fields[] = {
    FIELD(tsc, "time", TIME_KIND, 0),
    FIELD(src_mac, "sourceMacAddress", DPLOG_FIELD_MAC, 56),
    FIELD(vlan, "vlanId", DPLOG_FIELD_U16, 58),
    FIELD(src_addr, "sourceIPv6Address", DPLOG_FIELD_IPV6, 27),
    FIELD(rule_id, "ruleId", DPLOG_FIELD_U32, 0),
    FIELD(src_port, "sourceTransportPort", DPLOG_FIELD_PORT, 7),
    FIELD(dst_port, "destinationTransportPort", DPLOG_FIELD_PORT, 11),
    {"reason", offsetof(struct acl_drop, reason), 1, DPLOG_FIELD_ENUM, 0, reason_names,
     sizeof reason_names / sizeof reason_names[0]},
    FIELD(protocol, "protocolIdentifier", DPLOG_FIELD_PROTOCOL, 4),
    FIELD(in_port, "ingressPort", DPLOG_FIELD_U16, 0),
    FIELD(packet_len, "packetLength", DPLOG_FIELD_U32, 0),
    FIELD(rule_drops, "ruleDrops", DPLOG_FIELD_U64, 0),
};

/* The embedded configuration: a line per drop from a template for the
 * aclDrop type (compiled at dplog_start, once the type is registered). */
static const char embedded[] =
    "[ring]\n"
    "capacity = 4096\n"
    "[ring.priorities]\n"
    "aclDrop = 2\n"
    "[format]\n"
    "type = \"text\"\n"
    "[format.templates]\n"
    "aclDrop = \"{time:rfc3339} {reason:name} rule={ruleId} vlan={vlanId} "
    "mac={sourceMacAddress} src=[{sourceIPv6Address}]:{sourceTransportPort} "
    "dport={destinationTransportPort} proto={protocolIdentifier} port={ingressPort} "
    "len={packetLength} drops={ruleDrops}\"\n"
    "[sink]\n"
    "type = \"file\"\n"
    "path = \"%s\"\n";

static int fail(const char *what, dplog_result rc) {
  char msg[512];
  dplog_last_error(msg, sizeof msg, NULL);
  fprintf(stderr, "acl_drop: %s: %s: %s\n", what, dplog_strerror(rc), msg);
  return 1;
}

int main(int argc, char **argv) {
  const char *config = NULL, *output = "acl_drop.log";
  unsigned long records = 1000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) {
      config = argv[++i];
    } else if (!strcmp(argv[i], "--records") && i + 1 < argc) {
      records = strtoul(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--output") && i + 1 < argc) {
      output = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--config FILE] [--records N] [--output FILE]\n", argv[0]);
      return 2;
    }
  }

  struct dplog *log = NULL;
  dplog_result rc;
  if (config) {
    rc = dplog_open(config, &log);
  } else {
    char toml[2048];
    snprintf(toml, sizeof toml, embedded, output);
    rc = dplog_open_str(toml, &log);
  }
  if (rc != DPLOG_OK) return fail("dplog_open", rc);

  /* Declare the record type: its id is handed out by dplog. */
  uint16_t acl_drop_id = 0;
  rc = dplog_schema_register(log, "aclDrop", sizeof(struct acl_drop), acl_drop_fields,
                             sizeof acl_drop_fields / sizeof acl_drop_fields[0], &acl_drop_id);
  if (rc != DPLOG_OK) return fail("dplog_schema_register", rc);

  rc = dplog_start(log, NULL, 0);
  if (rc != DPLOG_OK) {
    fail("dplog_start", rc);
    dplog_close(log, NULL);
    return 1;
  }
  struct dplog_producer *p = NULL;
  rc = dplog_producer_new(log, 0, &p);
  if (rc != DPLOG_OK) return fail("dplog_producer_new", rc);

  /* The forwarding loop: a synthetic stream of dropped IPv6 packets. */
  struct acl_drop r;
  memset(&r, 0, sizeof r);
  const uint8_t mac[6] = {0x02, 0x00, 0x5e, 0x00, 0x53, 0x01};
  const uint8_t src[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  memcpy(r.src_mac, mac, sizeof mac);
  memcpy(r.src_addr, src, sizeof src);
  uint64_t drops[3] = {0, 0, 0};
  for (unsigned long i = 0; i < records; i++) {
    r.tsc = now_ticks();
    r.src_mac[5] = (uint8_t)(i % 16);
    r.vlan = (uint16_t)(100 + i % 4);
    r.src_addr[15] = (uint8_t)(1 + i % 200);
    r.rule_id = 10 + (uint32_t)(i % 3);
    r.src_port = (uint16_t)(1024 + i % 60000);
    r.dst_port = i % 3 == 2 ? 53 : 22;
    r.reason = (uint8_t)(1 + i % 3);
    r.protocol = i % 3 == 2 ? 17 : 6;
    r.in_port = (uint16_t)(i % 48);
    r.packet_len = 60 + (uint32_t)(i % 1400);
    r.rule_drops = ++drops[i % 3];
    rc = dplog_log(p, acl_drop_id, &r, sizeof r);
    if (rc != DPLOG_OK) return fail("dplog_log", rc);
  }

  dplog_producer_free(p);
  struct dplog_stats s;
  rc = dplog_close(log, &s);
  printf("aclDrop records: produced %llu written %llu dropped %llu\n",
         (unsigned long long)s.produced, (unsigned long long)s.written_records,
         (unsigned long long)(s.dropped_full + s.dropped_degraded + s.dropped_sink));
  if (rc != DPLOG_OK) return fail("dplog_close", rc);
  return s.written_records == records ? 0 : 1;
}
