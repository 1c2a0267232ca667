/work/wt-crate/target-before/debug/deps/env_filter-07ecf18c28a31781.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/directive.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/filter.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/filtered_log.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/op.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/parser.rs

/work/wt-crate/target-before/debug/deps/libenv_filter-07ecf18c28a31781.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/directive.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/filter.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/filtered_log.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/op.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/parser.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/directive.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/filter.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/filtered_log.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/op.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/env_filter-2.0.0/src/parser.rs:
