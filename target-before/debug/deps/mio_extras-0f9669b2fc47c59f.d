/work/wt-crate/target-before/debug/deps/mio_extras-0f9669b2fc47c59f.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/channel.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/timer.rs

/work/wt-crate/target-before/debug/deps/libmio_extras-0f9669b2fc47c59f.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/channel.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/timer.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/channel.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/mio-extras-2.0.6/src/timer.rs:
