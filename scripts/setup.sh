#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine with a Rust toolchain (rustup):
# the system packages the build and the tests need, the Kafka broker of the
# Kafka tests, then every crate fetched. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

# Package                 needed by
#   pkg-config, gcc, g++, make   C ABI tests (g++: the header as C++), examples, dpdk-sys,
#                           rdkafka (builds its bundled librdkafka with configure + make)
#   valgrind                C ABI: one run of the C tests under memcheck
#   libdpdk-dev             DPDK 22.11: dpdk-sys, `dpdk` features, examples/c DPDK example
#   libpcap-dev             DPDK's net_pcap vdev in the reference-nat tests
#   zlib1g-dev, libssl-dev  the Kafka sink: zlib and OpenSSL for the bundled librdkafka (linked statically)
#   rsyslog                 syslog sink tests and dplog-verify's anchor and RFC 5848 tests (each starts its own rsyslogd on 127.0.0.1)
#   rsyslog-relp            rsyslog's imrelp, the receiver of the syslog sink's RELP tests
#   nfdump                  IPFIX checked by nfcapd/nfdump (the test starts its own nfcapd)
#   tshark                  IPFIX checked by Wireshark's dissector
#   strace                  dplogd tests count its syncs and inject a failing fdatasync
#   curl                    benches/peers/fetch.sh: Quill's and binlog's sources from GitHub
#                           (g++ builds the peer harness's drivers and binlog's bread)
#   clickhouse-server, clickhouse-client  ClickHouse sink tests (sinks/tests/clickhouse.rs,
#                           tests/clickhouse.rs): each starts its own 18.16 server on 127.0.0.1
#   openssl                 dplog-verify's test that seal keys made by `openssl genpkey` are taken
#   python3-cryptography    the syslog verifier's test that RFC 5848's own example blocks (DSA)
#                           verify over the bytes it takes as signed (sinks/src/verify_syslog.rs)
packages=(pkg-config gcc g++ make valgrind libdpdk-dev libpcap-dev zlib1g-dev libssl-dev rsyslog rsyslog-relp nfdump strace curl clickhouse-server clickhouse-client openssl python3-cryptography)
recommended=(tshark)

missing=()
for pkg in "${packages[@]}" "${recommended[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # tshark asks whether non-root users may capture; they may not.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${recommended[@]}" >/dev/null
fi

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done

# The Kafka tests' real broker: tansu, a Kafka-protocol broker from
# crates.io, run by the tests on 127.0.0.1 with its in-memory storage
# (dynostore). About 20 minutes to build on 2 cores, once per machine.
tansu_version=0.6.0
if [ "$(tansu --version 2>/dev/null)" != "tansu $tansu_version" ] &&
   [ "$("${CARGO_HOME:-$HOME/.cargo}/bin/tansu" --version 2>/dev/null)" != "tansu $tansu_version" ]; then
  echo "setup: installing tansu $tansu_version (the Kafka tests' broker; about 20 minutes)"
  cargo install tansu --version "$tansu_version" --features dynostore --locked
fi

# chdb: ClickHouse's current engine in-process (Python), for
# tools/dplog-query/tests/clickhouse.rs: the current server's DDL
# (DateTime64, IPv4, codecs, TTL), the sink's RowBinary bytes and the
# --at lookup SQL run on it (Debian's clickhouse-server is 18.16).
# A Debian python3 refuses pip outside a venv (PEP 668): then with
# --break-system-packages, as for duckdb below.
if ! python3 -c 'import chdb' 2>/dev/null; then
  python3 -m pip install -q chdb 2>/dev/null ||
    python3 -m pip install -q --break-system-packages chdb
fi

# DuckDB's Python module: benches/archive_lookup.py compares dplog-query
# lookups and the archive's size with DuckDB on Parquet (no test needs it).
if ! python3 -c "import duckdb" 2>/dev/null; then
  echo "setup: installing the duckdb Python module (benches/archive_lookup.py)"
  python3 -m pip install -q duckdb 2>/dev/null ||
    python3 -m pip install -q --break-system-packages duckdb
fi

cargo fetch --locked
echo "setup: done"
