#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine with a Rust toolchain (rustup):
# system packages the build and the tests need, then every crate fetched.
# Idempotent: re-running it only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
cargo fetch --locked 2>/dev/null || cargo fetch
echo "setup: done"
