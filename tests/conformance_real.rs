//! The conformance suite against a real ZooKeeper 3.8 server, through the `zookeeper`-crate
//! backend: the same test bodies as the memory backend's, so the model stays faithful.

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::zookeeper::ZookeeperClient;
use zk_locks::testing::{shared_server, TestingServer};
use zk_locks::ZkClient;

struct RealFactory {
    server: &'static TestingServer,
}

impl conformance::ClientFactory for RealFactory {
    fn connect(&self) -> Arc<dyn ZkClient> {
        ZookeeperClient::connect(&self.server.connect_string(), Duration::from_secs(10))
            .expect("connect to the test server")
    }

    fn root(&self) -> String {
        conformance::unique_root("real")
    }
}

conformance_tests!(shared_server().map(|server| RealFactory { server }));
