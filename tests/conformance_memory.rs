//! The conformance suite against the in-memory ensemble (a fresh ensemble per test).

mod conformance;

conformance_tests!(Some(zk_locks::testing::harness::Memory::new()));
