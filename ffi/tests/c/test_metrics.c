/*
 * [metrics] through the C ABI: dplog_open binds the Prometheus listener
 * (loopback only unless allowed), it serves empty counters until
 * dplog_start and then every ring's, on its own thread ("dplog-metrics");
 * dplog_ring_stats returns per-ring counters, dplog_stats the latency
 * percentiles; dplog_close stops the listener. Everything on 127.0.0.1.
 * Usage: test_metrics (files in $TMPDIR).
 */
#define _GNU_SOURCE
#include <dplog.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* GET `path` from 127.0.0.1:port; returns the whole response (malloc'd),
 * or NULL if the connection is refused or reset before any byte of a
 * response (a listener being closed: its socket may still take a
 * connection for a moment, then resets it). */
static char *http_get(uint16_t port, const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    CHECK(errno == ECONNREFUSED);
    close(fd);
    return NULL;
  }
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
  if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
    CHECK(errno == ECONNRESET || errno == EPIPE);
    close(fd);
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  CHECK(buf != NULL);
  for (;;) {
    if (len + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      CHECK(buf != NULL);
    }
    ssize_t got = read(fd, buf + len, cap - 1 - len);
    if (got < 0 && errno == ECONNRESET && len == 0) {
      free(buf);
      close(fd);
      return NULL;
    }
    CHECK(got >= 0);
    if (got == 0) break;
    len += (size_t)got;
  }
  buf[len] = 0;
  close(fd);
  return buf;
}

/* True if a thread of this process is named `name`. */
static int thread_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  CHECK(d != NULL);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && !found) {
    if (e->d_name[0] == '.') continue;
    char p[300], comm[64] = {0};
    snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) {
      comm[strcspn(comm, "\n")] = 0;
      found = strcmp(comm, name) == 0;
    }
    fclose(f);
  }
  closedir(d);
  return found;
}

static void log_n(struct dplog_producer *p, uint64_t n) {
  struct dplog_nat44_session r;
  memset(&r, 0, sizeof r);
  r.nat_event = DPLOG_NAT_EVENT_NAT44_SESSION_CREATE;
  r.protocol = 6;
  for (uint64_t i = 0; i < n; i++) {
    EXPECT(dplog_now_ns(&r.timestamp_ns), DPLOG_OK);
    r.src_addr = 0x0A000000u + (uint32_t)i;
    EXPECT(dplog_log(p, DPLOG_SCHEMA_NAT44_SESSION, &r, sizeof r), DPLOG_OK);
  }
}

static void test_refused_and_absent(void) {
  struct dplog *h = NULL;
  /* Not loopback, not allowed: refused at open, nothing created. */
  EXPECT(dplog_open_str("[metrics]\nprometheus_listen = \"0.0.0.0:0\"\n", &h), DPLOG_ERR_CONFIG);
  CHECK(h == NULL);
  char msg[512];
  dplog_last_error(msg, sizeof msg, NULL);
  CHECK(strstr(msg, "allow_non_loopback") != NULL);
  /* No [metrics]: no port to ask for. */
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char toml[512];
  snprintf(toml, sizeof toml, "[sink]\ntype = \"file\"\npath = \"%s/metrics-none.log\"\n", dir);
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  uint16_t port = 0;
  EXPECT(dplog_metrics_port(h, &port), DPLOG_ERR_STATE);
  EXPECT(dplog_metrics_port(h, NULL), DPLOG_ERR_NULL);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
}

static void test_served_while_running(void) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char toml[512];
  snprintf(toml, sizeof toml,
           "[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n"
           "[sink]\ntype = \"file\"\npath = \"%s/metrics.log\"\n",
           dir);
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  EXPECT(dplog_register_nat_schemas(h), DPLOG_OK); /* logs NAT44 sessions */
  uint16_t port = 0;
  EXPECT(dplog_metrics_port(h, &port), DPLOG_OK);
  CHECK(port != 0);
  /* Before dplog_start: served, no ring yet; by a thread of its own
   * (named once it answered). */
  char *body = http_get(port, "/metrics");
  CHECK(body != NULL);
  CHECK(thread_named("dplog-metrics"));
  CHECK(strncmp(body, "HTTP/1.", 7) == 0 && strstr(body, " 200 ") != NULL);
  CHECK(strstr(body, "# EOF") != NULL);
  CHECK(strstr(body, "dplog_ring_produced_total{") == NULL);
  free(body);
  size_t n = 99;
  EXPECT(dplog_ring_stats(h, NULL, 0, &n), DPLOG_OK);
  CHECK(n == 0);

  EXPECT(dplog_start(h, NULL, 0), DPLOG_OK);
  struct dplog_producer *p3 = NULL, *p7 = NULL;
  EXPECT(dplog_producer_new(h, 3, &p3), DPLOG_OK);
  EXPECT(dplog_producer_new(h, 7, &p7), DPLOG_OK);
  log_n(p3, 1000);
  log_n(p7, 500);
  /* Wait (bounded) until the consumer has written all 1500. */
  struct dplog_stats s;
  for (int i = 0; i < 500; i++) {
    EXPECT(dplog_flush(h), DPLOG_OK);
    EXPECT(dplog_stats(h, &s), DPLOG_OK);
    if (s.written_records == 1500) break;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(s.written_records == 1500);
  CHECK(s.produced == 1500 && s.rings == 2);
  /* Latency percentiles of the sampled records, ordered. */
  CHECK(s.latency_samples > 0);
  CHECK(s.latency_p50_ns > 0 && s.latency_p50_ns <= s.latency_p99_ns);
  CHECK(s.latency_p99_ns <= s.latency_p999_ns && s.latency_p999_ns <= s.latency_max_ns);

  /* Per-ring counters, by C ring id, in id order. */
  EXPECT(dplog_ring_stats(h, NULL, 0, NULL), DPLOG_ERR_NULL);
  EXPECT(dplog_ring_stats(h, NULL, 1, &n), DPLOG_ERR_NULL);
  struct dplog_ring_stats rs[4];
  memset(rs, 0xff, sizeof rs);
  EXPECT(dplog_ring_stats(h, rs, 1, &n), DPLOG_OK);
  CHECK(n == 2);
  CHECK(rs[0].ring_id == 3 && rs[1].ring_id == UINT32_MAX); /* only cap written */
  EXPECT(dplog_ring_stats(h, rs, 4, &n), DPLOG_OK);
  CHECK(n == 2);
  CHECK(rs[0].ring_id == 3 && rs[0].produced == 1000 && rs[0].enqueued == 1000);
  CHECK(rs[0].dequeued == 1000 && rs[0].fill == 0 && rs[0].stopped == 0);
  CHECK(rs[0].dropped_full == 0 && rs[0].capacity == 16384 && rs[0].high_water >= 1);
  CHECK(rs[1].ring_id == 7 && rs[1].produced == 500 && rs[1].dequeued == 500);

  /* The same over HTTP, by C ring id. */
  body = http_get(port, "/metrics");
  CHECK(body != NULL);
  CHECK(strstr(body, "application/openmetrics-text") != NULL);
  CHECK(strstr(body, "dplog_ring_produced_total{ring=\"3\"} 1000\n") != NULL);
  CHECK(strstr(body, "dplog_ring_produced_total{ring=\"7\"} 500\n") != NULL);
  CHECK(strstr(body, "dplog_ring_dequeued_total{ring=\"7\"} 500\n") != NULL);
  CHECK(strstr(body, "dplog_consumer_written_total 1500\n") != NULL);
  CHECK(strstr(body, "dplog_enqueue_to_write_seconds{quantile=\"0.99\"}") != NULL);
  free(body);
  body = http_get(port, "/other");
  CHECK(body != NULL && strstr(body, " 404 ") != NULL);
  free(body);

  EXPECT(dplog_producer_free(p3), DPLOG_OK);
  EXPECT(dplog_producer_free(p7), DPLOG_OK);
  EXPECT(dplog_close(h, &s), DPLOG_OK);
  CHECK(s.written_records == 1500);
  /* Closed: the listener is gone (refused, or reset while its socket
   * closes). */
  CHECK(http_get(port, "/metrics") == NULL);
  CHECK(!thread_named("dplog-metrics"));
}

/* Two consumers (ring r drained by consumer r % 2): one exposition, one
 * list of rings, by C ring id; totals added up. */
static void test_two_consumers(void) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char toml[512];
  snprintf(toml, sizeof toml,
           "[metrics]\nprometheus_listen = \"127.0.0.1:0\"\n"
           "[sink]\ntype = \"file\"\npath = \"%s/metrics2.log\"\n",
           dir);
  struct dplog *h = NULL;
  EXPECT(dplog_open_str(toml, &h), DPLOG_OK);
  EXPECT(dplog_register_nat_schemas(h), DPLOG_OK); /* logs NAT44 sessions */
  uint32_t cpus[2] = {0, 0};
  EXPECT(dplog_start(h, cpus, 2), DPLOG_OK);
  struct dplog_producer *p4 = NULL, *p5 = NULL;
  EXPECT(dplog_producer_new(h, 4, &p4), DPLOG_OK);
  EXPECT(dplog_producer_new(h, 5, &p5), DPLOG_OK);
  log_n(p4, 100);
  log_n(p5, 200);
  struct dplog_stats s;
  for (int i = 0; i < 500; i++) {
    EXPECT(dplog_flush(h), DPLOG_OK);
    EXPECT(dplog_stats(h, &s), DPLOG_OK);
    if (s.written_records == 300) break;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(s.written_records == 300);
  struct dplog_ring_stats rs[2];
  size_t n = 0;
  EXPECT(dplog_ring_stats(h, rs, 2, &n), DPLOG_OK);
  CHECK(n == 2);
  CHECK(rs[0].ring_id == 4 && rs[0].produced == 100 && rs[0].dequeued == 100);
  CHECK(rs[1].ring_id == 5 && rs[1].produced == 200 && rs[1].dequeued == 200);
  uint16_t port = 0;
  EXPECT(dplog_metrics_port(h, &port), DPLOG_OK);
  char *body = http_get(port, "/metrics");
  CHECK(body != NULL);
  CHECK(strstr(body, "dplog_ring_produced_total{ring=\"4\"} 100\n") != NULL);
  CHECK(strstr(body, "dplog_ring_produced_total{ring=\"5\"} 200\n") != NULL);
  CHECK(strstr(body, "dplog_consumer_written_total 300\n") != NULL);
  free(body);
  EXPECT(dplog_producer_free(p4), DPLOG_OK);
  EXPECT(dplog_producer_free(p5), DPLOG_OK);
  EXPECT(dplog_close(h, NULL), DPLOG_OK);
}

int main(void) {
  test_refused_and_absent();
  test_served_while_running();
  test_two_consumers();
  printf("test_metrics: %d checks passed\n", checks);
  return 0;
}
