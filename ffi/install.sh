#!/usr/bin/env bash
# Installs libdplog under a prefix (the documented equivalent of
# `cargo cinstall`):
#   PREFIX/include/dplog.h, dplog_inline.h (its inline fast path, which it includes)
#   PREFIX/lib/libdplog.so.X.Y.Z, libdplog.so.X -> it, libdplog.so -> it
#   PREFIX/lib/libdplog.a
#   PREFIX/lib/pkgconfig/dplog.pc
# Usage: ffi/install.sh PREFIX [--debug]
# Builds the library first (release profile unless --debug). Honors
# CARGO_TARGET_DIR and DESTDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:?usage: ffi/install.sh PREFIX [--debug]}"
profile=release
[ "${2:-}" = "--debug" ] && profile=debug
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
