#!/usr/bin/env bash
# The peer harness: dplog (text and binary, through its C ABI), Quill and
# MS binlog logging the same NAT44 session events, producer on CPU 0,
# backend on CPU 1, files on /dev/shm; 3 interleaved repetitions, every
# output decoded and checked against the events, one table at the end.
#
#   benches/peers/run.sh [--from DIR] [--n N] [--reps R] [--libs "L..."]
#
# --from DIR   fetch the peers from git mirrors (see fetch.sh) instead of GitHub
# --n N        records per run (default 1000000)
# --reps R     repetitions (default 3)
# --libs "L.." the runs of a repetition, from dplog-text dplog-binary
#              dplog-own-text dplog-own-binary quill binlog
#              (default "dplog-text dplog-binary quill binlog")
#
# Builds into $CARGO_TARGET_DIR (default target/)/peers; writes at most one
# output file at a time, /dev/shm/dplog-peers.<pid>.<lib>, deleted once
# checked (also on failure). See README.md beside this script.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=1000000
REPS=3
FETCH_ARGS=()
LIBS=(dplog-text dplog-binary quill binlog)
while [ $# -gt 0 ]; do
  case "$1" in
    --from) FETCH_ARGS=(--from "${2:?--from needs a directory}"); shift 2 ;;
    --n) N=${2:?}; shift 2 ;;
    --reps) REPS=${2:?}; shift 2 ;;
    --libs) read -r -a LIBS <<<"${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# The checker's own tests first: a checker that passes anything would make
# the table's check column meaningless.
python3 "$HERE/test_check.py" 2>&1 | tail -1 >&2

CACHE=${DPLOG_PEERS_CACHE:-$HOME/.cache/dplog-peers}
export DPLOG_PEERS_CACHE=$CACHE
"$HERE/fetch.sh" "${FETCH_ARGS[@]}"
QUILL_COMMIT=$(sed -n 's/^QUILL_COMMIT=//p' "$HERE/fetch.sh")
BINLOG_COMMIT=$(sed -n 's/^BINLOG_COMMIT=//p' "$HERE/fetch.sh")
QUILL_INC="$CACHE/quill-$QUILL_COMMIT/include"
BINLOG_INC="$CACHE/binlog-$BINLOG_COMMIT/include"
BINLOG_BUILD="$CACHE/binlog-build-$BINLOG_COMMIT"

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN="$TARGET/peers"
mkdir -p "$BIN"
# libdplog as a C user gets it: ffi/install.sh (release build, stripped)
# into a prefix, compiled against through pkg-config.
"$ROOT/ffi/install.sh" "$BIN/dplog" >/dev/null
(cd "$ROOT" && cargo build --release --locked -p dplog-cat)
DPLOG_CAT="$TARGET/release/dplog-cat"
CFLAGS=(-O2 -Wall -Wextra -Werror -I"$HERE" -pthread)
echo "building the drivers into $BIN" >&2
# shellcheck disable=SC2046 # pkg-config prints several words
cc -std=c11 "${CFLAGS[@]}" "$HERE/dplog_driver.c" \
  $(PKG_CONFIG_PATH="$BIN/dplog/lib/pkgconfig" pkg-config --cflags --libs dplog) \
  -Wl,-rpath,"$BIN/dplog/lib" -o "$BIN/dplog_driver"
g++ -std=c++17 "${CFLAGS[@]}" -I"$QUILL_INC" "$HERE/quill_driver.cpp" -o "$BIN/quill_driver"
g++ -std=c++17 "${CFLAGS[@]}" -I"$BINLOG_INC" "$HERE/binlog_driver.cpp" \
  "$BINLOG_BUILD/libbinlog.a" -o "$BIN/binlog_driver"

TEMPLATE=$("$BIN/dplog_driver" --template)
OWN_TEMPLATE=$("$BIN/dplog_driver" --template own)
OUT="/dev/shm/dplog-peers.$$"
RESULTS=$(mktemp /tmp/dplog-peers-results.XXXXXX)
trap 'rm -f "$OUT".* "$RESULTS"' EXIT

# run LIB REP: one driver run, its check, one result line (+ check=ok).
run() {
  local lib=$1 rep=$2 file="$OUT.$1" line template=$TEMPLATE
  rm -f "$file"
  case "$lib" in
    dplog-own-*) template=$OWN_TEMPLATE; line=$("$BIN/dplog_driver" "${lib#dplog-}" "$N" "$file") ;;
    dplog-*) line=$("$BIN/dplog_driver" "${lib#dplog-}" "$N" "$file") ;;
    quill) line=$("$BIN/quill_driver" "$N" "$file") ;;
    binlog) line=$("$BIN/binlog_driver" "$N" "$file") ;;
    *) echo "run.sh: unknown library $lib" >&2; exit 2 ;;
  esac
  local check=ok
  if ! python3 "$HERE/check.py" --lib "$lib" --bread "$BINLOG_BUILD/bread" \
      --dplog-cat "$DPLOG_CAT" --template "$template" "$file" "$N"; then
    check=FAILED
  fi
  rm -f "$file"
  echo "rep=$rep $line check=$check" | tee -a "$RESULTS" >&2
}

for rep in $(seq 1 "$REPS"); do
  # Rotate the order each repetition so no library always runs first.
  for k in "${!LIBS[@]}"; do
    run "${LIBS[$(( (k + rep - 1) % ${#LIBS[@]} ))]}" "$rep"
  done
done

python3 "$HERE/table.py" "$RESULTS"
! grep -q 'check=FAILED' "$RESULTS"
