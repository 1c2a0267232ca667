/work/wt-crate/target-before/debug/deps/zookeeper_derive-19ff2c4be400e694.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/zookeeper_derive-0.4.1/src/lib.rs

/work/wt-crate/target-before/debug/deps/libzookeeper_derive-19ff2c4be400e694.so: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/zookeeper_derive-0.4.1/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/zookeeper_derive-0.4.1/src/lib.rs:
