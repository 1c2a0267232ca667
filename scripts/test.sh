#!/usr/bin/env bash
# Runs every test. Installs Java (with javac), ZooKeeper 3.8 and Curator 5.4 (Debian packages)
# when missing, so the tests against a real server and the Curator interoperability tests run;
# the tests start their own servers on 127.0.0.1 (the member-partition tests: in network
# namespaces of their own, which needs root and iproute2).
#
# Since everything is installed here, a missing server, Java or Curator is a test failure, not
# a skip (ZK_LOCKS_REQUIRE_SERVER=1), unless the caller sets ZK_LOCKS_REQUIRE_SERVER=0.
set -euo pipefail
cd "$(dirname "$0")/.."

have_everything() {
    command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 \
        && [ -f /usr/share/java/zookeeper.jar ] \
        && [ -f /usr/share/java/curator-recipes.jar ] \
        && [ -f /usr/share/java/slf4j-nop.jar ] \
        && [ -f /usr/share/java/netty-codec.jar ] \
        && [ -f /usr/share/java/netty-resolver.jar ] \
        && command -v openssl >/dev/null 2>&1 \
        && { command -v ip || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ]; } >/dev/null 2>&1
}

if ! have_everything; then
    echo "scripts/test.sh: installing Java (JDK), ZooKeeper and Curator (Debian packages)" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update
    # default-jdk-headless brings javac (the interop tests compile Java at test time);
    # libslf4j-java (slf4j-nop) comes with Curator, named here because the tests need it;
    # the TLS tests need libnetty-java (two jars zookeeper.jar's manifest omits) and openssl
    # (certificates are made at test time); the member-partition tests need iproute2 (`ip`,
    # network namespaces; they also need root).
    "${SUDO[@]}" apt-get install -y --no-install-recommends \
        default-jdk-headless zookeeper libcurator-recipes-java libslf4j-java \
        libnetty-java openssl iproute2
fi

export ZK_LOCKS_REQUIRE_SERVER="${ZK_LOCKS_REQUIRE_SERVER:-1}"
cargo test --workspace --all-features "$@"
