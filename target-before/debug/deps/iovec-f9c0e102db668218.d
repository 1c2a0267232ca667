/work/wt-crate/target-before/debug/deps/iovec-f9c0e102db668218.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/sys/mod.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/sys/unix.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/unix.rs

/work/wt-crate/target-before/debug/deps/libiovec-f9c0e102db668218.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/sys/mod.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/sys/unix.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/unix.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/sys/mod.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/sys/unix.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/iovec-0.1.4/src/unix.rs:
