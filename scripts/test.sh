#!/usr/bin/env bash
# Runs every test. Installs Java, ZooKeeper 3.8 and Curator (Debian packages) when missing, so
# the tests against a real server run; the tests start their own servers on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

have_zookeeper() {
    command -v java >/dev/null 2>&1 && [ -f /usr/share/java/zookeeper.jar ] \
        && [ -f /usr/share/java/curator-recipes.jar ]
}

if ! have_zookeeper; then
    echo "scripts/test.sh: installing Java, ZooKeeper and Curator (Debian packages)" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update
    "${SUDO[@]}" apt-get install -y --no-install-recommends \
        default-jre-headless zookeeper libcurator-recipes-java
fi

cargo test --all-features "$@"
