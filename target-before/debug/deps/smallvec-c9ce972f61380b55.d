/work/wt-crate/target-before/debug/deps/smallvec-c9ce972f61380b55.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.5/src/lib.rs

/work/wt-crate/target-before/debug/deps/libsmallvec-c9ce972f61380b55.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.5/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.5/src/lib.rs:
