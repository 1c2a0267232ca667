#!/usr/bin/env bash
# Runs every test. Installs Java, ZooKeeper 3.8 and Curator (Debian packages) when missing, so
# the tests against a real server run; the tests start their own servers on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --all-features "$@"
