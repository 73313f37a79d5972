#!/usr/bin/env bash
# Installs libdplog under a prefix (the documented equivalent of
# `cargo cinstall`):
#   PREFIX/include/dplog.h, dplog_inline.h (its inline fast path, which it includes)
#   PREFIX/lib/libdplog.so.X.Y.Z, libdplog.so.X -> it, libdplog.so -> it
#   PREFIX/lib/libdplog.a
#   PREFIX/lib/pkgconfig/dplog.pc
# Usage: ffi/install.sh [--debug] PREFIX   (options in any position)
# Builds the library first (release profile unless --debug; a release
# install is stripped of debug information). Honors
# CARGO_TARGET_DIR and DESTDIR. A relative PREFIX is taken from the
# current directory. Bad arguments exit 2 with the usage, before any
# build.
set -euo pipefail
usage="usage: ffi/install.sh [--debug] PREFIX  (--debug: install the debug build; \
DESTDIR and CARGO_TARGET_DIR are honored)"
bad() {
  echo "ffi/install.sh: $1" >&2
  echo "$usage" >&2
  exit 2
}
profile=release
prefix=
options=1
for arg in "$@"; do
  case "$options:$arg" in
    1:--) options=0 ;;
    1:--debug) profile=debug ;;
    1:-h | 1:--help)
      echo "$usage"
      exit 0
      ;;
    1:-*) bad "unknown option $arg" ;;
    *)
      [ -z "$prefix" ] || bad "one PREFIX only (got $prefix and $arg)"
      [ -n "$arg" ] || bad "empty PREFIX"
      prefix=$arg
      ;;
  esac
done
[ -n "$prefix" ] || bad "no PREFIX given"
case "$prefix" in
  /*) ;;
  *) prefix="$PWD/$prefix" ;;
esac
cd "$(dirname "$0")/.."
if [ "$profile" = release ]; then
  cargo build --release --locked -p dplog-ffi
else
  cargo build --locked -p dplog-ffi
fi
target="${CARGO_TARGET_DIR:-target}/$profile"
version=$(sed -n 's/^#define DPLOG_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/dplog.h | paste -sd.)
major=${version%%.*}
dest="${DESTDIR:-}$prefix"
install -d "$dest/include" "$dest/lib/pkgconfig"
install -m 0644 include/dplog.h include/dplog_inline.h "$dest/include/"
install -m 0755 "$target/libdplog.so" "$dest/lib/libdplog.so.$version"
ln -sf "libdplog.so.$version" "$dest/lib/libdplog.so.$major"
ln -sf "libdplog.so.$major" "$dest/lib/libdplog.so"
install -m 0644 "$target/libdplog.a" "$dest/lib/libdplog.a"
# A release install is stripped of debug information (the shared library
# also of its local symbols; its dynamic symbols, the ABI, stay), as a
# distribution package would be: the release profile keeps line tables for
# profiling the workspace itself. --debug installs keep everything, for
# sanitizer and debugger reports.
if [ "$profile" = release ]; then
  strip --strip-unneeded "$dest/lib/libdplog.so.$version"
  strip --strip-debug "$dest/lib/libdplog.a"
fi
# Libs.private: the system libraries libdplog.a needs (zlib and OpenSSL for
# the librdkafka linked into it, libc, ...), as rustc reports them for this
# build; the fallback is what this build needs on Debian 12.
flag=(); [ "$profile" = release ] && flag=(--release)
private=$(cargo rustc --locked -p dplog-ffi --lib "${flag[@]}" --crate-type staticlib \
  -- --print native-static-libs 2>&1 | sed -n 's/.*native-static-libs: //p' | tail -1)
[ -n "$private" ] || private="-lz -lssl -lcrypto -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" \
    -e "s|@LIBS_PRIVATE@|$private|" \
    ffi/dplog.pc.in > "$dest/lib/pkgconfig/dplog.pc"
echo "dplog $version installed under $dest"
