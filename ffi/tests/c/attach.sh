#!/usr/bin/env bash
# dplog_attach from C with a real dplogd (called by run.sh; standalone:
#   bash ffi/tests/c/attach.sh WORK_DIR INCLUDE_DIR LIB_DIR DPLOGD):
# test_attach.c (ASan+UBSan) logs 5000 records into a shared-memory ring
# and frees its producer, then 3000 more into a new ring and SIGKILLs
# itself; dplogd writes exactly those records, in order, each ring ended
# by its "closed" / "exited" line. Each run also logs 3 records of a type
# registered from C ("verdict"), written with their exact values. The
# handle's config has no [sink], and both runs leave their working
# directory empty.
set -euo pipefail
work=$1 inc=$2 lib=$3 dplogd=$4
a="$work/attach"
rm -rf "$a" && mkdir -p "$a/rings"
gcc -std=c11 -Wall -Wextra -Werror -g -O1 -pthread -fsanitize=address,undefined \
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I"$inc" \
  ffi/tests/c/test_attach.c -o "$a/test_attach" -L"$lib" -Wl,-rpath,"$lib" -ldplog
printf '[format]\ntype = "json"\n[sink]\ntype = "file"\npath = "%s"\n' "$a/out.jsonl" > "$a/dplogd.toml"
"$dplogd" --config "$a/dplogd.toml" --rings "$a/rings" --checkpoint "$a/ckpt" --scan-ms 20 \
  2> "$a/dplogd.err" &
d=$!
trap 'kill -KILL $d 2>/dev/null || true' EXIT
ends() { grep -c '"dplogd"' "$a/out.jsonl" 2>/dev/null || true; }
wait_ends() {
  for _ in $(seq 1 600); do [ "$(ends)" -ge "$1" ] && return 0; sleep 0.1; done
  echo "attach: timed out waiting for $1 end lines" >&2; cat "$a/dplogd.err" >&2; exit 1
}
# Run in an empty directory: a handle that only attaches rings creates no
# file (no default dplog.log).
mkdir "$a/cwd"
(cd "$a/cwd" && "$a/test_attach" "$a/rings" 5000)
wait_ends 1
committed=$(cd "$a/cwd" && "$a/test_attach" "$a/rings" 3000 kill || true)
[ "$committed" = 3000 ] || { echo "attach: the killed run reported '$committed'" >&2; exit 1; }
wait_ends 2
left=$(ls -A "$a/cwd")
[ -z "$left" ] || { echo "attach: the attach-only runs created files: $left" >&2; exit 1; }
kill -TERM $d
wait $d
trap - EXIT
python3 - "$a/out.jsonl" <<'PY'
import json, sys
seqs, ends, verdicts = [], [], []
for line in open(sys.argv[1]):
    v = json.loads(line)
    if "dplogd" in v:
        ends.append((v["dplogd"], v["records"]))
    elif "action" in v:
        verdicts.append(v)
    else:
        assert v["responderOctets"] == 77, v
        seqs.append(v["initiatorOctets"])
want = list(range(5000)) + list(range(3000))
assert seqs == want, f"{len(seqs)} records, first difference at {next((i for i, (a, b) in enumerate(zip(seqs, want)) if a != b), min(len(seqs), len(want)))}"
assert ends == [("producer_closed", 5003), ("producer_exited", 3003)], ends
want_v = [
    {
        "timestamp": f"2026-01-01T00:00:00.00{k}000Z",
        "observationTimeMilliseconds": 1767225600000 + k,
        "count": k,
        "sourceIPv4Address": "192.0.2.1",
        "sourceTransportPort": 4000 + k,
        "vlanId": 7,
        "protocolIdentifier": 17,
        "action": ["allow", "deny", "reject"][k],
    }
    for k in range(3)
] * 2
assert verdicts == want_v, verdicts
print("attach: 8000 NAT records and 6 of a C-registered type from C through dplogd, exactly once, both ring ends")
PY
