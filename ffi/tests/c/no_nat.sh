#!/usr/bin/env bash
# A dataplane that is no NAT (called by run.sh; standalone:
#   bash ffi/tests/c/no_nat.sh WORK_DIR INCLUDE_DIR LIB_DIR DPLOGD DPLOG_CAT):
# test_no_nat.c (ASan+UBSan, and with DPLOG_NO_INLINE) logs a 128-byte DNS
# query type registered from C through text, JSON, CSV, IPFIX and binary,
# and into shared-memory rings drained by a real dplogd (CSV and IPFIX).
# Nothing may carry a NAT column, template, schema name or schema id:
# test_no_nat.c checks the line formats (the exact CSV header); here the
# IPFIX templates are decoded by tshark (exactly template 256 with the
# user's nine fields), the binary log by dplog-cat (its CSV header is the
# same exact header, its IPFIX the same template), and dplogd's output of
# the ring (CSV rows of exactly the user's columns, IPFIX template 256).
set -euo pipefail
work=$1 inc=$2 lib=$3 dplogd=$4 cat=$5
n="$work/no_nat"
rm -rf "$n" && mkdir -p "$n/out" "$n/rings"
cflags=(-std=c11 -Wall -Wextra -Werror -g -O1 -pthread -I"$inc")
libs=(-L"$lib" -Wl,-rpath,"$lib" -ldplog)
gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer ffi/tests/c/test_no_nat.c -o "$n/test_no_nat" "${libs[@]}"
gcc "${cflags[@]}" -DDPLOG_NO_INLINE ffi/tests/c/test_no_nat.c -o "$n/test_no_nat_call" "${libs[@]}"
"$n/test_no_nat_call" "$n/out" >/dev/null
"$n/test_no_nat" "$n/out"

fail() { echo "no_nat: $*" >&2; exit 1; }
header='recordType,timestamp,observationTimeMilliseconds,sourceIPv4Address,destinationIPv4Address,sourceTransportPort,queryType,responseCode,protocolIdentifier,latencyMicroseconds,queryName,dplogDropped,dplogDropRing,dplogDropReason,dplogFirstDropWallClock,dplogLastDropWallClock'
# The template set: id, IANA elements, enterprise elements (tab-separated):
# queryType, responseCode and queryName derive theirs from name and class
# (responseCode, an enum, with the class enum),
# latencyMicroseconds declares 4001 (DPLOG_IE_ENTERPRISE | 4001).
templates=$'256\t323,8,12,7,4\t4702,23071,4001,22874'
# Template id, IANA and enterprise element ids of every template set in an
# IPFIX file (UDP 4739 around it), one line per template.
ipfix_templates() {
  od -Ax -tx1 -v "$1" | text2pcap -q -u 4739,4739 - "$1.pcap" 2>/dev/null
  tshark -r "$1.pcap" -d udp.port==4739,cflow -T fields -e cflow.template_id \
    -e cflow.template_ipfix_field_type -e cflow.template_ipfix_field_type_enterprise 2>/dev/null |
    grep -v '^\s*$' || true
}
# IPFIX data records decoded (one line per record: source address).
ipfix_records() {
  od -Ax -tx1 -v "$1" | text2pcap -q -u 4739,4739 - "$1.pcap" 2>/dev/null
  tshark -r "$1.pcap" -d udp.port==4739,cflow -T fields -e cflow.srcaddr 2>/dev/null |
    tr ',' '\n' | grep -c . || true
}
# A NAT name: natEvent, nat44Session, natPortBlock, natPoolId, ...,
# postNATSourceIPv4Address, postNAPTSourceTransportPort, portRange*.
nat_names='nat[A-Z0-9]|NAT|NAPT|portRange'

got=$(ipfix_templates "$n/out/dns.ipfix")
[ "$got" = "$templates" ] || fail "IPFIX templates: got '$got', want '$templates'"
[ "$(ipfix_records "$n/out/dns.ipfix")" = 3 ] || fail "IPFIX: want 3 data records"

"$cat" --format csv "$n/out/dns.binary" > "$n/binary.csv"
[ "$(head -1 "$n/binary.csv" | tr -d '\r')" = "$header" ] || fail "binary log: its schemas are not dnsQuery alone: $(head -1 "$n/binary.csv")"
[ "$(wc -l < "$n/binary.csv")" = 4 ] || fail "binary log: want 3 records"
"$cat" --format ipfix "$n/out/dns.binary" > "$n/binary.ipfix"
got=$(ipfix_templates "$n/binary.ipfix")
[ "$got" = "$templates" ] || fail "binary log as IPFIX: got '$got', want '$templates'"
"$cat" --format json "$n/out/dns.binary" > "$n/binary.json"
! grep -E -q "$nat_names" "$n/binary.json" "$n/binary.csv" || fail "binary log: a NAT name"
! grep -a -E -q "$nat_names" "$n/out/dns.binary" || fail "binary log file: a NAT name"

# dplogd drains a ring attached from C, in `format`, to OUT; waits (bounded)
# until `ready WRITTEN` holds (WRITTEN: the file written, OUT unless given),
# then stops it.
through_dplogd() {
  local format=$1 out=$2 ready=$3 written=${4:-$2}
  printf '[format]\ntype = "%s"\n[format.ipfix]\nexport_clock = "record"\n[sink]\ntype = "file"\npath = "%s"\n' \
    "$format" "$out" > "$n/dplogd-$format.toml"
  "$dplogd" --config "$n/dplogd-$format.toml" --rings "$n/rings" --checkpoint "$n/ckpt-$format" \
    --scan-ms 20 2> "$n/dplogd-$format.err" &
  local d=$!
  "$n/test_no_nat" attach "$n/rings" >/dev/null
  local ok=0
  for _ in $(seq 1 600); do
    if [ -s "$written" ] && "$ready" "$written"; then ok=1; break; fi
    sleep 0.1
  done
  kill -TERM $d
  wait $d || true
  [ $ok = 1 ] || { cat "$n/dplogd-$format.err" >&2; fail "dplogd ($format): timed out"; }
}
csv_ready() { [ "$(grep -c '^dnsQuery,' "$1")" -ge 3 ]; }
ipfix_ready() { [ "$(ipfix_records "$1")" -ge 3 ]; }

# CSV: dplogd writes one file per record type, dplogd.<type>.csv.
through_dplogd csv "$n/dplogd.csv" csv_ready "$n/dplogd.dnsQuery.csv"
# dnsQuery's own header (no NAT column: dplogd serves no NAT schemas),
# rows of exactly the user's 16 columns.
csv="$n/dplogd.dnsQuery.csv"
[ "$(head -1 "$csv" | tr -d '\r')" = "$header" ] || fail "dplogd CSV header: $(head -1 "$csv")"
rows=$(grep -c '^dnsQuery,' "$csv")
[ "$rows" = 3 ] || fail "dplogd CSV: $rows rows, want 3"
awk -F, '/^dnsQuery,/ { if (NF != 16) { print "dplogd CSV: " NF " columns, want 16: " $0; bad = 1 } } END { exit bad }' \
  "$csv" >&2 || exit 1
! grep -E -q "$nat_names" "$csv" || fail "dplogd CSV: a NAT name: $(grep -E "$nat_names" "$csv" | head -1)"

through_dplogd ipfix "$n/dplogd.ipfix" ipfix_ready
got=$(ipfix_templates "$n/dplogd.ipfix" | sort -u)
[ "$got" = "$templates" ] || fail "dplogd IPFIX templates: got '$got', want '$templates'"
echo "no_nat: a C-registered type through text, JSON, CSV, IPFIX, binary and dplogd: no NAT anywhere"
