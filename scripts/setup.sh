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

# C ABI (issue 6): compiler, make, valgrind and Debian's DPDK 22.11 for the
# C tests and examples of ffi/tests/c/run.sh.
ffi_apt=()
for pkg in gcc make pkg-config valgrind libdpdk-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || ffi_apt+=("$pkg")
done
if [ ${#ffi_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${ffi_apt[@]}" >/dev/null
fi

# reference-nat / dpdk-sys (issue 7): Debian's DPDK 22.11 and libpcap for
# the `dpdk` feature and its net_pcap tests. Idempotent.
need_dpdk=()
for pkg in libdpdk-dev libpcap-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_dpdk+=("$pkg")
done
if [ ${#need_dpdk[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_dpdk[@]}" >/dev/null
fi

# Formatter tests (issue 4): tshark decodes the IPFIX messages.
need_fmt=()
for pkg in tshark; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_fmt+=("$pkg")
done
if [ ${#need_fmt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_fmt[@]}" >/dev/null
fi

# Sinks (issue 5): rsyslogd for the syslog sink tests (started by the tests
# on 127.0.0.1 with their own config; the system service is not used) and
# Debian's librdkafka for the Kafka sink (rdkafka, dynamic-linking).
sinks_apt=()
for pkg in rsyslog librdkafka-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || sinks_apt+=("$pkg")
done
if [ ${#sinks_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${sinks_apt[@]}" >/dev/null
fi

# Formatter tests (issue 4): nfdump's collector nfcapd and nfdump decode the
# IPFIX messages (formatters/tests/nfcapd.rs starts its own nfcapd on
# 127.0.0.1; the packaged service is not used). Idempotent.
need_nfdump=()
for pkg in nfdump; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_nfdump+=("$pkg")
done
if [ ${#need_nfdump[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_nfdump[@]}" >/dev/null
fi
