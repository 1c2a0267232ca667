/work/wt-crate/target-before/debug/deps/lazycell-17d687e8a14e4d40.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lazycell-1.3.0/src/lib.rs

/work/wt-crate/target-before/debug/deps/liblazycell-17d687e8a14e4d40.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lazycell-1.3.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lazycell-1.3.0/src/lib.rs:
