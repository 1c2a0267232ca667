/work/wt-crate/target-before/debug/deps/cfg_if-255bdecf960932d5.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-0.1.10/src/lib.rs

/work/wt-crate/target-before/debug/deps/libcfg_if-255bdecf960932d5.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-0.1.10/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-0.1.10/src/lib.rs:
