#!/usr/bin/env bash
# Fetches the peer libraries of the harness at pinned commits into a cache
# outside the repository, checks each tree against the SHA-256 written
# here, and builds binlog's reader `bread`.
#
#   benches/peers/fetch.sh                  # from GitHub (codeload tarballs, curl)
#   benches/peers/fetch.sh --from DIR       # from git mirrors DIR/<owner>+<name>/repo
#
# Tarballs are fetched from $DPLOG_PEERS_TARBALLS/<owner>/<name>/tar.gz/<commit>,
# default https://codeload.github.com (any curl URL: a proxy, file://).
# Cache: $DPLOG_PEERS_CACHE, default ~/.cache/dplog-peers. Nothing is
# written into the repository. A tree already in the cache is checked again
# and reused.
#
# Only the paths named below are kept: the headers and sources the
# harness builds (a partial mirror may lack large files elsewhere, e.g.
# quill's docs). The pin is a commit; the check is a SHA-256 over the
# extracted tree (the sorted `sha256sum` list of every kept file, hashed
# again), which is the same whether the tree came from GitHub's tarball or
# from `git archive` of a mirror, so one pinned digest serves both routes.
# `--print-digest` prints the digests of the trees instead of checking
# them (to pin a new commit).
set -euo pipefail

QUILL_TAG=v12.1.0
QUILL_COMMIT=0148a6517b3b29de86849e1dedab0bb1bfe3344a
QUILL_TREE_SHA256=03ebb6abb52f32f1009e8b761f815e0dcabb746ae2f4319783ba7aa3c63eadba
QUILL_PATHS="LICENSE include"          # header-only: the headers are all we use
# binlog has no release since 2021; pinned to master of 2026-03-03.
BINLOG_COMMIT=fd20f5a7592f040141ccbdcc737386235bc8b0cf
BINLOG_TREE_SHA256=a19e46cd68b4b0520a3caee28f2e5be04f431b9ebcb147f51dd60bfa42dd7238
BINLOG_PATHS="LICENSE CMakeLists.txt bin cmake include"   # the library and bread

CACHE=${DPLOG_PEERS_CACHE:-$HOME/.cache/dplog-peers}
FROM=
while [ $# -gt 0 ]; do
  case "$1" in
    --from) FROM=${2:?--from needs a directory}; shift 2 ;;
    --print-digest) PRINT_DIGEST=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "fetch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$CACHE"

tree_digest() { # DIR -> sha256 of the sorted per-file sha256 list
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# get NAME OWNER/REPO COMMIT DIGEST PATHS: $CACHE/NAME-COMMIT holds the
# checked tree of PATHS.
get() {
  local name=$1 repo=$2 commit=$3 want=$4 paths=$5 dest="$CACHE/$1-$3" tree
  if [ -d "$dest" ]; then
    tree=$dest
  else
    tree="$dest.tmp.$$"
    rm -rf "$tree"; mkdir -p "$tree"
    if [ -n "$FROM" ]; then
      local git="$FROM/${repo/\//+}/repo"
      [ -d "$git" ] || { echo "fetch.sh: no mirror $git" >&2; exit 1; }
      # shellcheck disable=SC2086 # PATHS is a word list
      git --git-dir="$git" archive --format=tar "$commit" -- $paths 2>/dev/null | tar -x -C "$tree"
    else
      local full="$tree/full"
      mkdir -p "$full"
      curl -fsSL "${DPLOG_PEERS_TARBALLS:-https://codeload.github.com}/$repo/tar.gz/$commit" | tar -xz -C "$full" --strip-components=1
      # shellcheck disable=SC2086
      (cd "$full" && cp -a $paths "$tree/")
      rm -rf "$full"
    fi
  fi
  local got; got=$(tree_digest "$tree")
  if [ -n "${PRINT_DIGEST:-}" ]; then
    echo "$name $got"
  elif [ "$got" != "$want" ]; then
    echo "fetch.sh: $name at $commit: tree SHA-256 $got, expected $want" >&2
    # A fresh download is discarded; a cached tree is left for inspection.
    if [ "$tree" != "$dest" ]; then rm -rf "$tree"; else echo "fetch.sh: remove $dest to fetch it again" >&2; fi
    exit 1
  fi
  [ "$tree" = "$dest" ] || mv "$tree" "$dest"
  [ -n "${PRINT_DIGEST:-}" ] || echo "$name $commit: tree SHA-256 ok ($dest)" >&2
}

get quill odygrd/quill "$QUILL_COMMIT" "$QUILL_TREE_SHA256" "$QUILL_PATHS"
get binlog morganstanley/binlog "$BINLOG_COMMIT" "$BINLOG_TREE_SHA256" "$BINLOG_PATHS"
[ -n "${PRINT_DIGEST:-}" ] && exit 0

# binlog's library and its reader `bread`, release, with g++ from the
# sources binlog's CMakeLists.txt lists for them (its configure step also
# wants the tests and examples, which are not fetched).
B="$CACHE/binlog-build-$BINLOG_COMMIT"
S="$CACHE/binlog-$BINLOG_COMMIT"
if [ ! -x "$B/bread" ] || [ ! -f "$B/libbinlog.a" ]; then
  mkdir -p "$B/obj"
  for f in EventStream Time ToStringVisitor PrettyPrinter EntryStream TextOutputStream detail/OstreamBuffer; do
    g++ -std=c++17 -O2 -I"$S/include" -c "$S/include/binlog/$f.cpp" -o "$B/obj/${f//\//_}.o"
  done
  rm -f "$B/libbinlog.a"
  ar rcs "$B/libbinlog.a" "$B"/obj/*.o
  g++ -std=c++17 -O2 -I"$S/include" "$S/bin/bread.cpp" "$S/bin/printers.cpp" "$B/libbinlog.a" -o "$B/bread"
fi
echo "bread: $B/bread" >&2
