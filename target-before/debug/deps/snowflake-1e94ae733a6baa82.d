/work/wt-crate/target-before/debug/deps/snowflake-1e94ae733a6baa82.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/snowflake-1.3.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/snowflake-1.3.0/src/process_unique_id.rs

/work/wt-crate/target-before/debug/deps/libsnowflake-1e94ae733a6baa82.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/snowflake-1.3.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/snowflake-1.3.0/src/process_unique_id.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/snowflake-1.3.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/snowflake-1.3.0/src/process_unique_id.rs:
