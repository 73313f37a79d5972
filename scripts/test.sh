#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test of every crate.
# .ci/run runs exactly this after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
# The SDK's crates have no module dependency circles.
for d in src core/src formatters/src sinks/src ffi/src; do python3 scripts/module_cycles.py "$d"; done
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# Public docs build without a warning (broken or private links). The C ABI
# crate's library is also called `dplog`, so it is documented on its own.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --exclude dplog-ffi --locked
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p dplog-ffi --locked
# C ABI: header up to date (part of cargo test above), C tests
# under ASan+UBSan and valgrind, examples/c and the DPDK example built
# through pkg-config against the installed library, and run.
bash ffi/tests/c/run.sh
# Builds without the `kafka` feature (no rdkafka, no librdkafka): the
# library, the C ABI and dplog-nat compile, and a `type = "kafka"` sink is
# refused naming the feature.
cargo test -p dplog --no-default-features --features config --locked --lib
cargo check -p dplog-ffi -p dplog-nat --no-default-features --locked
cargo clippy -p dplog-sinks --no-default-features --features config --lib --tests --locked -- -D warnings
# reference-nat's `dpdk` feature: lint, then the net_pcap / net_null / net_ring tests
# (dpdk_multiprocess reserves hugepages as root, else skips saying why).
cargo clippy -p dplog-nat --features dpdk --all-targets --locked -- -D warnings
cargo test -p dplog-nat --features dpdk --locked --test dpdk --test dpdk_multiprocess
# Rings: loom models of the SPSC/MPSC index protocols, in their
# own target directory so `--cfg loom` does not invalidate the main build
# (a few seconds once compiled).
RUSTFLAGS="--cfg loom" cargo test -p dplog-core --release --locked --test loom --target-dir target/loom
# Rings: the benches' dpdk feature (rte_ring peers) builds and lints.
cargo clippy -p dplog-benches --features dpdk --all-targets --locked -- -D warnings
# Rings: the Prometheus listener (dplog-core feature `metrics`).
cargo clippy -p dplog-core --features metrics --all-targets --locked -- -D warnings
cargo test -p dplog-core --features metrics --locked --lib --test metrics
