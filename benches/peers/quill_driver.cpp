// Quill (odygrd/quill v12.1.0, header-only): N NAT44 session events logged
// with LOG_INFO from CPU 0; Quill's backend thread, pinned to CPU 1 and
// spinning (sleep_duration 0), formats each one into the text line every
// text driver writes (the ten fields, addresses dotted, one space apart;
// pattern "%(message)", so no timestamp, level or location of Quill's own)
// and writes it to a FileSink.
//
//   quill_driver N FILE
//
// Timed per call: LOG_INFO with the ten fields (the three addresses are
// an `Ipv4` value type formatted on the backend: DeferredFormatCodec).
// The frontend queue starts at 256 MiB so that it holds the whole run
// without reallocating (Quill's default queue is unbounded and grows; a
// growth would put an allocation into a timed call). The run ends when
// `flush_log()` returns: the backend has written and flushed everything
// logged before it.
#include "harness.h"

#include "quill/Backend.h"
#include "quill/DeferredFormatCodec.h"
#include "quill/Frontend.h"
#include "quill/LogMacros.h"
#include "quill/Logger.h"
#include "quill/sinks/FileSink.h"

#include <chrono>
#include <cstdint>
#include <utility>

struct Ipv4 {
  uint32_t addr;
};

template <>
struct fmtquill::formatter<Ipv4> {
  constexpr auto parse(format_parse_context &ctx) { return ctx.begin(); }
  auto format(Ipv4 const &a, format_context &ctx) const {
    return fmtquill::format_to(ctx.out(), "{}.{}.{}.{}", a.addr >> 24, (a.addr >> 16) & 255u,
                               (a.addr >> 8) & 255u, a.addr & 255u);
  }
};

template <>
struct quill::Codec<Ipv4> : quill::DeferredFormatCodec<Ipv4> {};

struct HarnessFrontendOptions : quill::FrontendOptions {
  static constexpr size_t initial_queue_capacity = 256u * 1024u * 1024u;
};
using Frontend = quill::FrontendImpl<HarnessFrontendOptions>;
using Logger = quill::LoggerImpl<HarnessFrontendOptions>;

int main(int argc, char **argv) {
  uint64_t n;
  const char *path;
  harness_args(argc, argv, &n, &path);
  harness_lock_memory();
  harness_result res{"quill", n, 0, 0, nullptr, 0, 0, 0};
  res.rtt_ns = harness_rtt_ns(0, 1);
  res.tsc_per_ns = harness_tsc_per_ns();
  uint64_t overhead = harness_lat_overhead();
  res.lat = static_cast<uint32_t *>(calloc(n, sizeof *res.lat));
  if (res.lat == nullptr) harness_die("out of memory");

  quill::BackendOptions bo;
  bo.cpu_affinity = {1};
  bo.sleep_duration = std::chrono::nanoseconds{0};
  quill::Backend::start<HarnessFrontendOptions>(bo, quill::SignalHandlerOptions{});

  auto sink = Frontend::create_or_get_sink<quill::FileSink>(
      path,
      [] {
        quill::FileSinkConfig cfg;
        cfg.set_open_mode('w');
        return cfg;
      }(),
      quill::FileEventNotifier{});
  quill::PatternFormatterOptions pfo;
  pfo.format_pattern = "%(message)";
  Logger *logger = Frontend::create_or_get_logger("harness", std::move(sink), pfo);

  harness_pin(0);
  Frontend::preallocate();

  struct harness_event e;
  res.first_call_ns = harness_mono_ns();
  for (uint64_t i = 0; i < n; i++) {
    harness_make_event(i, &e);
    uint64_t t0 = harness_lat_begin();
    LOG_INFO(logger, "{} {} {} {} {} {} {} {} {} {}", e.timestamp_ns, Ipv4{e.src_addr}, e.src_port,
             Ipv4{e.dst_addr}, e.dst_port, e.protocol, Ipv4{e.post_nat_src_addr},
             e.post_napt_src_port, e.nat_event, e.ingress_vrf_id);
    uint64_t t1 = harness_lat_end();
    res.lat[i] = harness_sample(t0, t1, overhead);
  }
  logger->flush_log();
  res.done_ns = harness_mono_ns();
  res.file_bytes = harness_file_size(path);
  quill::Backend::stop();
  harness_report(&res);
  free(res.lat);
  return 0;
}
