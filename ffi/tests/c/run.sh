#!/usr/bin/env bash
# C tests of libdplog (called by scripts/test.sh):
#  1. test_dplog.c built with -fsanitize=address,undefined against the
#     debug libdplog.so and run;
#  2. the same test built with -DDPLOG_NO_INLINE (no inline dplog_log),
#     and without sanitizers run once under valgrind
#     (memcheck, leak check, errors fail the run);
#  3. the library installed under a temporary prefix with ffi/install.sh,
#     and examples/c built with -std=c11 -Wall -Wextra -Werror through
#     pkg-config (shared and static) and run;
#  4. test_metrics.c (ASan+UBSan): [metrics] served from C on loopback,
#     dplog_ring_stats and the latency percentiles of dplog_stats;
#     test_user_records.c (ASan+UBSan): user record types of 32, 64 and
#     128 bytes in loggers of those slot sizes through every format, the
#     output compared with ffi/tests/c/expected/ (line formats whole;
#     binary decoded by dplog-cat to JSON; IPFIX byte for byte and decoded
#     by tshark);
#  5. test_attach.c (ASan+UBSan, ffi/tests/c/attach.sh): dplog_attach, a
#     C producer whose shared-memory ring a real dplogd drains, freed
#     and SIGKILLed: its records written exactly once;
#     test_attach_stall.c (ffi/tests/c/stall.sh): a ring no dplogd serves
#     under "block" with a block timeout (DPLOG_ERR_TIMEOUT, the stderr
#     warning, the drops reported by a later dplogd), and a ring dplogd
#     quarantines (the producer's error names the quarantine);
#  6. test_no_nat.c (ffi/tests/c/no_nat.sh): a dataplane that is no NAT,
#     a C-registered type through every format and a ring drained by
#     dplogd, with no NAT column, template, schema name or id anywhere
#     (IPFIX templates decoded by tshark, the binary log by dplog-cat);
#  7. test_lifecycle.c (ffi/tests/c/lifecycle.sh): a load balancer's
#     connection record registered from C with a lifecycle, event time
#     and priority (dplog_schema_set_*), logged into an archive and a
#     binary log; dplog-query --at answers from both; the setters' misuse
#     returns its error codes;
#  8. the DPDK example, when pkg-config finds libdpdk.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debug build (shares the artifacts of `cargo test`), installed under a
# temporary prefix: the tests link the installed libdplog.so.
bash ffi/install.sh "$work/prefix" --debug >/dev/null
lib="$work/prefix/lib"
cflags=(-std=c11 -Wall -Wextra -Werror -g -O1 -pthread -I"$work/prefix/include")
libs=(-L"$lib" -Wl,-rpath,"$lib" -ldplog)

echo "== dplog.h compiles cleanly as C99/C11 (-Wpedantic) and C++11/17 (-Wold-style-cast), inline or not"
# Each header twice (include guards), dplog.h first or its installed
# dplog_inline.h first (which includes dplog.h itself).
use='int f(dplog_producer *p, const void *r) { void *s; uint64_t t; dplog_reserve(p, 1, 1, &s);
  dplog_commit(p, 1, 0); dplog_now_ticks(&t); return dplog_log(p, 1, r, 64); }'
for def in "" -DDPLOG_NO_INLINE; do
  for first in dplog.h dplog_inline.h; do
    inc="#include <$first>\n#include <dplog.h>\n#include <dplog_inline.h>\n#include <$first>\n"
    for std in c99 c11; do
      printf "$inc%s\n" "$use" |
        gcc -std=$std -Wall -Wextra -Wpedantic -Werror $def -fsyntax-only -I"$work/prefix/include" -x c -
    done
    for std in c++11 c++17; do
      printf "$inc%s\n" "$use" |
        g++ -std=$std -Wall -Wextra -Wpedantic -Wold-style-cast -Werror $def -fsyntax-only \
          -I"$work/prefix/include" -x c++ -
    done
  done
done
# The inline path is on by default with GCC, off with DPLOG_NO_INLINE.
for def in "" -DDPLOG_NO_INLINE; do
  want=1; [ -n "$def" ] && want=0
  got=$(printf '#include <dplog.h>\n#ifdef DPLOG_H_INLINE\nint inline_on = 1;\n#else\nint inline_on = 0;\n#endif\n' |
    gcc -std=c11 $def -E -P -I"$work/prefix/include" -x c - | sed -n 's/^int inline_on = \([01]\);$/\1/p')
  [ "$got" = "$want" ] || { echo "DPLOG_H_INLINE is '$got' with '$def', want $want" >&2; exit 1; }
done

echo "== C tests under ASan+UBSan"
gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer ffi/tests/c/test_dplog.c -o "$work/test_asan" "${libs[@]}"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TMPDIR="$work" "$work/test_asan"

echo "== C tests with DPLOG_NO_INLINE (the exported dplog_log only)"
gcc "${cflags[@]}" -DDPLOG_NO_INLINE ffi/tests/c/test_dplog.c -o "$work/test_no_inline" "${libs[@]}"
TMPDIR="$work" "$work/test_no_inline"

if command -v valgrind >/dev/null; then
  echo "== C tests under valgrind"
  gcc "${cflags[@]}" ffi/tests/c/test_dplog.c -o "$work/test_plain" "${libs[@]}"
  TMPDIR="$work" valgrind -q --error-exitcode=99 --leak-check=full --show-possibly-lost=no \
    --errors-for-leak-kinds=definite "$work/test_plain"
else
  echo "valgrind not installed; run scripts/setup.sh" >&2
  exit 1
fi

echo "== [metrics] through the C ABI, per-ring counters (ASan+UBSan)"
gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer ffi/tests/c/test_metrics.c -o "$work/test_metrics" "${libs[@]}"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TMPDIR="$work" "$work/test_metrics"

echo "== user record types of every slot size through every format (ASan+UBSan)"
cargo build -q -p dplog-cat
gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer ffi/tests/c/test_user_records.c -o "$work/test_user_records" "${libs[@]}"
mkdir -p "$work/user"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$work/test_user_records" "$work/user"
exp=ffi/tests/c/expected
for t in verdict l2drop flow6; do
  for f in text json csv rfc5424 rfc3164 ipfix; do
    cmp "$exp/$t.$f" "$work/user/$t.$f" || { diff "$exp/$t.$f" "$work/user/$t.$f" >&2 || true; exit 1; }
  done
  "${CARGO_TARGET_DIR:-$root/target}/debug/dplog-cat" --format json "$work/user/$t.binary" > "$work/user/$t.binary.json"
  diff "$exp/$t.binary.json" "$work/user/$t.binary.json"
  # IPFIX decoded by tshark (UDP 4739 around each file): the data records.
  od -Ax -tx1 -v "$work/user/$t.ipfix" | text2pcap -q -u 4739,4739 - "$work/user/$t.pcap" 2>/dev/null
  tshark -r "$work/user/$t.pcap" -d udp.port==4739,cflow -V 2>/dev/null |
    sed -n '/^        Flow [0-9]/,/^    [^ ]/p' | grep -E "^        (Flow| {4})" > "$work/user/$t.ipfix.tshark"
  diff "$exp/$t.ipfix.tshark" "$work/user/$t.ipfix.tshark"
done

echo "== dplog_attach: a C producer drained by dplogd (ASan+UBSan)"
cargo build -q -p dplogd
bash ffi/tests/c/attach.sh "$work" "$work/prefix/include" "$lib" "${CARGO_TARGET_DIR:-$root/target}/debug/dplogd"

echo "== dplog_attach with no dplogd (block timeout) and a ring dplogd quarantines (ASan+UBSan)"
bash ffi/tests/c/stall.sh "$work" "$work/prefix/include" "$lib" "${CARGO_TARGET_DIR:-$root/target}/debug/dplogd"

echo "== no NAT for those who do not ask: a C-registered type through every format and dplogd (ASan+UBSan)"
bash ffi/tests/c/no_nat.sh "$work" "$work/prefix/include" "$lib" "${CARGO_TARGET_DIR:-$root/target}/debug/dplogd" \
  "${CARGO_TARGET_DIR:-$root/target}/debug/dplog-cat"

echo "== a lifecycle declared from C answers dplog-query --at (ASan+UBSan)"
cargo build -q -p dplog-query
bash ffi/tests/c/lifecycle.sh "$work" "$work/prefix/include" "$lib" "${CARGO_TARGET_DIR:-$root/target}/debug/dplog-query"

echo "== install + examples/c through pkg-config"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
make -s -C examples/c clean all CC=gcc BUILD="$work/ex"
"$work/ex/acl_drop" --records 3000 --output "$work/ex/acl_drop.log"
[ "$(wc -l < "$work/ex/acl_drop.log")" = 3000 ] || { echo "acl_drop: want 3000 lines" >&2; exit 1; }
grep -q -E '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z rateLimit rule=12 vlan=102 mac=02:00:5e:00:53:02 src=\[2001:db8::3\]:1026 dport=53 proto=17 port=2 len=62 drops=1$' \
  "$work/ex/acl_drop.log" || { echo "acl_drop: line 3 not as expected" >&2; head -3 "$work/ex/acl_drop.log" >&2; exit 1; }
printf '[ring]\nslot_bytes = 128\n[format]\ntype = "json"\n[sink]\ntype = "file"\npath = "%s"\n' \
  "$work/ex/acl_drop.json" > "$work/ex/acl_drop.toml"
"$work/ex/acl_drop" --config "$work/ex/acl_drop.toml" --records 100
grep -c '"reason":"deny"' "$work/ex/acl_drop.json" | grep -qx 34 || { echo "acl_drop --config: want 34 deny records" >&2; exit 1; }
"$work/ex/dataplane" --records 50000 --output "$work/ex/dataplane.log"
"$work/ex/dataplane-static" --records 10000 --output "$work/ex/dataplane-static.log"
if pkg-config --exists libdpdk; then
  echo "== DPDK example"
  make -s -C examples/c dpdk CC=gcc BUILD="$work/ex"
  "$work/ex/dpdk_dataplane" --no-huge --no-pci -m 256 --vdev net_null0 -l 0-1 --no-shconf \
    --log-level 'lib.*:error' -- "$work/ex/dpdk.log"
else
  echo "libdpdk not found by pkg-config; DPDK example skipped (scripts/setup.sh installs libdpdk-dev)" >&2
  exit 1
fi
echo "C tests: ok"
