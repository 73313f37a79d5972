#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every test of every crate.
# .ci/run runs exactly this after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
