/work/wt-crate/target-before/debug/deps/uuid-7a45cc0bc1d28869.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/macros.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/builder.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/non_nil.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/parser.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/fmt.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/timestamp.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/v4.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/rng.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/external.rs

/work/wt-crate/target-before/debug/deps/libuuid-7a45cc0bc1d28869.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/macros.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/builder.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/non_nil.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/parser.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/fmt.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/timestamp.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/v4.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/rng.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/external.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/macros.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/builder.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/error.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/non_nil.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/parser.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/fmt.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/timestamp.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/v4.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/rng.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/uuid-1.29.1/src/external.rs:
