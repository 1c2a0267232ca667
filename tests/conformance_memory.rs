//! The conformance suite against the in-memory ensemble (a fresh ensemble per test).

mod conformance;

use std::sync::Arc;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::ZkClient;

struct MemoryFactory {
    ensemble: MemoryEnsemble,
}

impl conformance::ClientFactory for MemoryFactory {
    fn connect(&self) -> Arc<dyn ZkClient> {
        self.ensemble.connect()
    }

    fn root(&self) -> String {
        conformance::unique_root("memory")
    }
}

conformance_tests!(Some(MemoryFactory {
    ensemble: MemoryEnsemble::new(),
}));
