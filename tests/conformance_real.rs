//! The conformance suite against a real ZooKeeper 3.8 server, through the `zookeeper`-crate
//! backend: the same test bodies as the memory backend's, so the model stays faithful.

mod conformance;

conformance_tests!(zk_locks::testing::harness::Real::new());
