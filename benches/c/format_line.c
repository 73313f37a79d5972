/*
 * C snprintf peer of benches/benches/format_template.rs: the NAT44 create
 * line of the compiled-template bench, printed with one snprintf per record.
 * As in the Rust write! baseline, the "YYYY-MM-DDTHH:MM:SS" prefix is
 * computed (gmtime_r + strftime) once per second and cached; everything
 * else goes through snprintf's format string.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Per-second cache of the date prefix. */
struct dplog_bench_c_cache {
    int64_t sec;
    char prefix[32];
};

static const char *const EVENT_NAMES[18] = {
    [1] = "NAT_CREATE",           [2] = "NAT_DELETE",
    [3] = "ADDRESSES_EXHAUSTED",  [4] = "NAT44_SESSION_CREATE",
    [5] = "NAT44_SESSION_DELETE", [12] = "PORTS_EXHAUSTED",
    [13] = "QUOTA_EXCEEDED",      [16] = "PORT_BLOCK_ALLOCATION",
    [17] = "PORT_BLOCK_DEALLOCATION",
};

void dplog_bench_c_cache_init(struct dplog_bench_c_cache *c) {
    c->sec = -1;
    c->prefix[0] = 0;
}

size_t dplog_bench_c_cache_size(void) { return sizeof(struct dplog_bench_c_cache); }

/*
 * Writes the line (with '\n', without NUL in the returned length) into
 * buf[0..cap) and returns its length, or 0 if it did not fit.
 */
size_t dplog_bench_c_format(struct dplog_bench_c_cache *c, char *buf, size_t cap,
                            uint64_t ts_ns, uint8_t event, uint8_t proto,
                            uint32_t src, uint16_t sport, uint32_t post,
                            uint16_t pport, uint32_t dst, uint16_t dport) {
    int64_t sec = (int64_t)(ts_ns / 1000000000u);
    if (sec != c->sec) {
        time_t t = (time_t)sec;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(c->prefix, sizeof c->prefix, "%Y-%m-%dT%H:%M:%S", &tm);
        c->sec = sec;
    }
    unsigned ms = (unsigned)((ts_ns / 1000000u) % 1000u);
    const char *name = event < 18 && EVENT_NAMES[event] ? EVENT_NAMES[event] : "?";
    int n = snprintf(buf, cap,
                     "%s.%03uZ NAT44 %s %u.%u.%u.%u:%u -> %u.%u.%u.%u:%u proto=%u dst=%u.%u.%u.%u:%u\n",
                     c->prefix, ms, name,
                     src >> 24, (src >> 16) & 255, (src >> 8) & 255, src & 255, sport,
                     post >> 24, (post >> 16) & 255, (post >> 8) & 255, post & 255, pport,
                     proto,
                     dst >> 24, (dst >> 16) & 255, (dst >> 8) & 255, dst & 255, dport);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}
