//! The conformance suite against a real ZooKeeper 3.8 server, through our own client
//! (`client::native`): the same test bodies as the memory and crate backends'.

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use zk_locks::client::native::NativeClient;
use zk_locks::testing::{shared_server, TestingServer};
use zk_locks::ZkClient;

struct NativeFactory {
    server: &'static TestingServer,
}

impl conformance::ClientFactory for NativeFactory {
    fn connect(&self) -> Arc<dyn ZkClient> {
        NativeClient::connect(&self.server.connect_string(), Duration::from_secs(10))
            .expect("connect to the test server")
    }

    fn root(&self) -> String {
        conformance::unique_root("native")
    }
}

conformance_tests!(shared_server().map(|server| NativeFactory { server }));
