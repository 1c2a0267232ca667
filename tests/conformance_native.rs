//! The conformance suite against a real ZooKeeper 3.8 server, through our own client
//! (`client::native`): the same test bodies as the memory and crate backends'.

mod conformance;

conformance_tests!(zk_locks::testing::harness::Real::native());
