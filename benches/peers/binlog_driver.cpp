// MS binlog (morganstanley/binlog, pinned in fetch.sh): N NAT44 session
// events logged with BINLOG_INFO_W from CPU 0 into a SessionWriter's queue;
// a consumer thread pinned to CPU 1 spins on `Session::consume`, which
// copies the binary events to the file. binlog formats nothing while
// logging: `bread` turns the file into text afterwards (check.py's input).
//
//   binlog_driver N FILE
//
// Timed per call: BINLOG_INFO_W with the ten fields (addresses as their
// 32-bit integers; binlog serializes the arguments and a clock value).
// The writer's queue is 256 MiB so that it holds the whole run (when a
// queue is full, binlog allocates a new one instead of waiting). The run
// ends when the consumer, told that the producer is done, has consumed an
// empty queue and flushed the file.
#include "harness.h"

#include <binlog/Session.hpp>
#include <binlog/SessionWriter.hpp>
#include <binlog/advanced_log_macros.hpp>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <thread>

int main(int argc, char **argv) {
  uint64_t n;
  const char *path;
  harness_args(argc, argv, &n, &path);
  harness_lock_memory();
  harness_result res{"binlog", n, 0, 0, nullptr, 0, 0, 0};
  res.rtt_ns = harness_rtt_ns(0, 1);
  res.tsc_per_ns = harness_tsc_per_ns();
  uint64_t overhead = harness_lat_overhead();
  res.lat = static_cast<uint32_t *>(calloc(n, sizeof *res.lat));
  if (res.lat == nullptr) harness_die("out of memory");

  binlog::Session session;
  binlog::SessionWriter writer(session, std::size_t{256} << 20);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) harness_die("cannot open the output file");

  // Producer done: the release store after the last event; the consumer's
  // acquire load pairs with it, so the consume that follows sees every event.
  std::atomic<bool> producer_done{false};
  // Consumer done: release store after the flush, acquired by main.
  std::atomic<uint64_t> consumer_done_ns{0};
  std::thread consumer([&] {
    harness_pin(1);
    for (;;) {
      bool done = producer_done.load(std::memory_order_acquire);
      binlog::Session::ConsumeResult r = session.consume(out);
      if (done && r.bytesConsumed == 0) break;
    }
    out.flush();
    consumer_done_ns.store(harness_mono_ns(), std::memory_order_release);
  });

  harness_pin(0);
  struct harness_event e;
  res.first_call_ns = harness_mono_ns();
  for (uint64_t i = 0; i < n; i++) {
    harness_make_event(i, &e);
    uint64_t t0 = harness_lat_begin();
    BINLOG_INFO_W(writer, "{} {} {} {} {} {} {} {} {} {}", e.timestamp_ns, e.src_addr, e.src_port,
                  e.dst_addr, e.dst_port, e.protocol, e.post_nat_src_addr, e.post_napt_src_port,
                  e.nat_event, e.ingress_vrf_id);
    uint64_t t1 = harness_lat_end();
    res.lat[i] = harness_sample(t0, t1, overhead);
  }
  producer_done.store(true, std::memory_order_release);
  consumer.join();
  res.done_ns = consumer_done_ns.load(std::memory_order_acquire);
  if (!out) harness_die("writing the output file failed");
  out.close();
  res.file_bytes = harness_file_size(path);
  harness_report(&res);
  free(res.lat);
  return 0;
}
