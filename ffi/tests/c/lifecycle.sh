#!/usr/bin/env bash
# A stateful record declared from C (called by run.sh; standalone:
#   bash ffi/tests/c/lifecycle.sh WORK_DIR INCLUDE_DIR LIB_DIR DPLOG_QUERY):
# test_lifecycle.c (ASan+UBSan) registers a load balancer's connection
# record, declares its lifecycle, event time and priority, and logs nine
# connection events into an archive sink and a binary log; here
# dplog-query --at answers what was live when from the archive, and from
# the binary log imported into a second archive: the lifecycle travelled
# with the logs (dplog-query knows no schema).
set -euo pipefail
work=$1 inc=$2 lib=$3 query=$4
n="$work/lifecycle"
rm -rf "$n" && mkdir -p "$n/archive" "$n/imported"
cflags=(-std=c11 -Wall -Wextra -Werror -g -O1 -pthread -I"$inc")
libs=(-L"$lib" -Wl,-rpath,"$lib" -ldplog)
gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer ffi/tests/c/test_lifecycle.c -o "$n/test_lifecycle" "${libs[@]}"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$n/test_lifecycle" "$n"

fail() { echo "lifecycle: $*" >&2; exit 1; }
"$query" import --archive "$n/imported" "$n/conn.binary" 2>/dev/null
t0=1767225600000 # 2026-01-01T00:00:00Z, ms
# The live connections at T0 + $2 ms in archive $1: "clientPort/backend"
# of each answer, sorted.
live() {
  "$query" --archive "$1" --at "$(( t0 + $2 ))ms" --format json "${@:3}" |
    python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
print(" ".join(sorted("%s/%s/%s" % (r["clientPort"], r["backendAddr"], r["connEvent"]) for r in rows)))'
}
for arch in "$n/archive" "$n/imported"; do
  check() {
    local got
    got=$(live "$arch" "$1" "${@:3}")
    [ "$got" = "$2" ] || fail "$arch at T0+$1 ms ${*:3}: got '$got', want '$2'"
  }
  check 2500 "40000/10.0.0.5/OPEN 40001/10.0.0.5/OPEN 40003/10.0.0.5/OPEN"
  check 3000 "40000/10.0.0.5/OPEN 40001/10.0.0.5/OPEN 40003/10.0.0.5/OPEN"
  check 4000 "40000/10.0.0.5/OPEN 40001/10.0.0.5/OPEN"
  check 6000 "40000/10.0.0.6/OPEN 40001/10.0.0.5/OPEN"
  check 6000 "40000/10.0.0.6/OPEN" --where clientPort=40000
  # Nothing live before the first open: exit status 1, no answer.
  rc=0
  "$query" --archive "$arch" --at "$(( t0 + 100 ))ms" --format json > "$n/none.json" || rc=$?
  [ $rc = 1 ] && [ ! -s "$n/none.json" ] || fail "$arch at T0+100 ms: status $rc, want 1 and no answer"
done
# The layout declared from C, printed by dplog-cat from the binary log
# alone: record 4 is the first close (T0 + 1.5 s, client port 40002).
cat_bin="$(dirname "$query")/dplog-cat"
line=$("$cat_bin" --format rfc5424 "$n/conn.binary" | sed -n 4p)
python3 - "$line" <<'PY' || fail "rfc5424 from the binary log: $line"
import sys
p = sys.argv[1].split(" ", 7)
assert p[3] == "lb" and p[5] == "CONN_CLOSE", p
assert p[6] == "[lb@32473", p
assert p[7].startswith('vip="192.0.2.10" client="198.51.100.7" v="1"]'), p
PY
# Byte counters on the closes only (JSON leaves the keys out elsewhere).
"$cat_bin" --format json "$n/conn.binary" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 9, len(rows)
for r in rows:
    assert ("bytesIn" in r) == (r["connEvent"] == "CLOSE"), r
assert rows[3]["bytesIn"] == 41002, rows[3]
' || fail "JSON from the binary log: bytesIn not on the closes only"
echo "lifecycle: a lifecycle declared from C answers dplog-query --at from an archive and a binary log"
