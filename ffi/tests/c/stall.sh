#!/usr/bin/env bash
# A dplog_attach producer whose ring no dplogd serves, and one whose ring
# dplogd quarantines (called by run.sh; standalone:
#   bash ffi/tests/c/stall.sh WORK_DIR INCLUDE_DIR LIB_DIR DPLOGD):
# test_attach_stall.c (ASan+UBSan) under "block" with a block timeout
# gets DPLOG_ERR_TIMEOUT instead of waiting forever, and the library says
# once on stderr that no consumer is attached; a dplogd started afterwards
# writes the 64 records the ring held and reports the 5 dropped
# (disconnected). Then, with dplogd serving, a slot corrupted in the ring
# file makes dplogd quarantine the ring, and the producer's error names
# the quarantine.
set -euo pipefail
work=$1 inc=$2 lib=$3 dplogd=$4
a="$work/stall"
rm -rf "$a" && mkdir -p "$a/rings"
gcc -std=c11 -Wall -Wextra -Werror -g -O1 -pthread -fsanitize=address,undefined \
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I"$inc" \
  ffi/tests/c/test_attach_stall.c -o "$a/test_attach_stall" -L"$lib" -Wl,-rpath,"$lib" -ldplog
"$a/test_attach_stall" "$a/rings" away 2> "$a/away.err" || { cat "$a/away.err" >&2; exit 1; }
grep -q "full for [0-9]* ms and no consumer attached (no dplogd serves $a/rings); waiting under block until the block timeout" "$a/away.err" ||
  { echo "stall: no warning that no consumer is attached:" >&2; cat "$a/away.err" >&2; exit 1; }
[ "$(grep -c 'no consumer attached' "$a/away.err")" = 1 ] ||
  { echo "stall: the warning is not said once:" >&2; cat "$a/away.err" >&2; exit 1; }
printf '[format]\ntype = "json"\n[sink]\ntype = "file"\npath = "%s"\n' "$a/out.jsonl" > "$a/dplogd.toml"
"$dplogd" --config "$a/dplogd.toml" --rings "$a/rings" --checkpoint "$a/ckpt" --scan-ms 20 \
  2> "$a/dplogd.err" &
d=$!
trap 'kill -KILL $d 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do grep -q '"dplogd"' "$a/out.jsonl" 2>/dev/null && break; sleep 0.1; done
"$a/test_attach_stall" "$a/rings" quarantine
for _ in $(seq 1 600); do grep -q 'quarantin' "$a/dplogd.err" && break; sleep 0.1; done
grep -q 'quarantin' "$a/dplogd.err" || { echo "stall: dplogd did not quarantine:" >&2; cat "$a/dplogd.err" >&2; exit 1; }
kill -TERM $d
wait $d
trap - EXIT
python3 - "$a/out.jsonl" <<'PY'
import json, sys
seqs, drops, ends = [], [], []
for line in open(sys.argv[1]):
    v = json.loads(line)
    if "dplogd" in v:
        ends.append(v)
    elif "dplogEvent" in v:
        drops.append(v)
    elif v["initiatorOctets"] >> 48 == 0x5eed:
        seqs.append(v["initiatorOctets"] & 0xFFFFFFFFFFFF)
away = [e for e in ends if e["ring"].startswith("away.")]
assert len(away) == 1 and away[0]["records"] == 64, ends
assert seqs[:64] == list(range(64)), seqs[:70]
assert [(d["dropped"], d["reason"]) for d in drops] == [(5, "disconnected")], drops
print("stall: a block timeout instead of a wait forever, the 64 held and 5 counted records through dplogd; a quarantine named")
PY
