/work/wt-crate/target-before/debug/deps/colorchoice-2824d5c119aaf9b1.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/colorchoice-1.0.5/src/lib.rs

/work/wt-crate/target-before/debug/deps/libcolorchoice-2824d5c119aaf9b1.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/colorchoice-1.0.5/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/colorchoice-1.0.5/src/lib.rs:
