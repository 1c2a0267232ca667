//! [`CountingClient`]: a [`ZkClient`] wrapper that counts what goes through it.

use std::fmt;
use std::sync::Arc;

use super::{AtomicCounters, Counters, Op};
use crate::client::{
    CreateMode, DeleteDone, MultiOp, MultiResult, Request, Response, Stat, Submission, Submitted,
    WatchedEvent, Watcher, ZkClient, ZkResult,
};
use crate::session::Session;

/// Wraps any [`ZkClient`] and counts its requests by operation, and the watch callbacks it
/// delivers. Every call is counted, failed ones included.
pub struct CountingClient<C: ZkClient> {
    inner: C,
    counters: Arc<AtomicCounters>,
}

impl<C: ZkClient> CountingClient<C> {
    /// Wraps `inner`, with all counters at zero.
    pub fn new(inner: C) -> CountingClient<C> {
        CountingClient {
            inner,
            counters: Arc::default(),
        }
    }

    /// The wrapped client.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Unwraps the client.
    pub fn into_inner(self) -> C {
        self.inner
    }

    /// The counts so far.
    pub fn counters(&self) -> Counters {
        self.counters.snapshot()
    }

    /// Sets every counter back to zero.
    pub fn reset_counters(&self) {
        self.counters.reset();
    }

    fn count_watch(&self, watcher: Option<Watcher>) -> Option<Watcher> {
        watcher.map(|w| self.counted(w))
    }

    /// `w`, its events counted.
    fn counted(&self, w: Watcher) -> Watcher {
        let counters = self.counters.clone();
        Box::new(move |event: WatchedEvent| {
            counters.watch_event();
            w(event)
        })
    }
}

impl<C: ZkClient> fmt::Debug for CountingClient<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingClient")
            .field("counters", &self.counters())
            .field("session", self.inner.session())
            .finish()
    }
}

impl<C: ZkClient> ZkClient for CountingClient<C> {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        self.counters.request(Op::Create);
        self.inner.create(path, data, mode)
    }

    fn delete(&self, path: &str, version: Option<i32>) -> ZkResult<()> {
        self.counters.request(Op::Delete);
        self.inner.delete(path, version)
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        self.counters.request(Op::Exists);
        self.inner.exists(path)
    }

    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        self.counters.request(Op::GetData);
        self.inner.get_data(path, self.count_watch(watcher))
    }

    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        self.counters.request(Op::GetChildren);
        self.inner.get_children(path, self.count_watch(watcher))
    }

    fn remove_watcher(&self, path: &str, id: crate::client::WatcherId) -> bool {
        self.inner.remove_watcher(path, id)
    }

    fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> ZkResult<Stat> {
        self.counters.request(Op::SetData);
        self.inner.set_data(path, data, version)
    }

    fn create2(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        self.counters.request(Op::Create);
        self.inner.create2(path, data, mode)
    }

    /// Counts every pipelined request as the operation it is, and one round trip.
    fn pipeline(&self, requests: &[Request]) -> Vec<ZkResult<Response>> {
        self.counters.pipelined(requests.iter().map(op_of));
        self.inner.pipeline(requests)
    }

    /// Counted as a pipeline: one round trip for them all (nobody waits, but a future that
    /// awaits the completion does).
    fn submit(&self, submissions: Vec<Submission>, done: Submitted) {
        self.counters
            .pipelined(submissions.iter().map(|s| op_of(s.request())));
        let counted = submissions
            .into_iter()
            .map(|s| s.map_watcher(|w| self.counted(w)))
            .collect();
        self.inner.submit(counted, done)
    }

    /// Counts the delete; the caller does not wait, so no round trip (a backend that deletes
    /// synchronously counts none either here).
    fn delete_unawaited(&self, path: &str, done: DeleteDone) {
        self.counters.unawaited(Op::Delete);
        self.inner.delete_unawaited(path, done)
    }

    /// One request, whatever the transaction holds.
    fn multi(&self, ops: &[MultiOp]) -> ZkResult<Vec<MultiResult>> {
        self.counters.request(Op::Multi);
        self.inner.multi(ops)
    }

    fn has_multi(&self) -> bool {
        self.inner.has_multi()
    }

    fn call_timeout(&self) -> Option<std::time::Duration> {
        self.inner.call_timeout()
    }

    fn ready_to_send(&self) -> bool {
        self.inner.ready_to_send()
    }

    fn has_create2(&self) -> bool {
        self.inner.has_create2()
    }

    fn restores_watches(&self) -> bool {
        self.inner.restores_watches()
    }

    /// Not counted: read once per lock object, and only with a restricting ACL provider.
    fn get_acl(&self, path: &str) -> ZkResult<(Vec<crate::client::acl::Acl>, Stat)> {
        self.inner.get_acl(path)
    }

    fn acl_provider(&self) -> crate::client::acl::AclProvider {
        self.inner.acl_provider()
    }

    fn own_digest_ids(&self) -> Vec<String> {
        self.inner.own_digest_ids()
    }

    fn lock_observer(
        &self,
    ) -> Option<std::sync::Arc<dyn crate::primitives::observer::LockObserver>> {
        self.inner.lock_observer()
    }

    fn server_root(&self) -> Option<crate::client::ServerRoot> {
        self.inner.server_root()
    }

    fn session(&self) -> &Session {
        self.inner.session()
    }

    fn close(&self) {
        self.inner.close()
    }
}

/// The operation a pipeline request counts as.
fn op_of(request: &Request) -> Op {
    match request {
        Request::Create { .. } => Op::Create,
        Request::Delete { .. } => Op::Delete,
        Request::Exists { .. } => Op::Exists,
        Request::GetData { .. } => Op::GetData,
        Request::GetChildren { .. } => Op::GetChildren,
        Request::SetData { .. } => Op::SetData,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::memory::MemoryEnsemble;

    #[test]
    fn a_pipeline_counts_every_request_and_one_round_trip() {
        let client = CountingClient::new(MemoryEnsemble::new().connect());
        client.create("/a", b"", CreateMode::Persistent).unwrap();
        let results = client.pipeline(&[
            Request::Create {
                path: "/a/b".into(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
            Request::GetChildren { path: "/a".into() },
        ]);
        assert_eq!(results[1], Ok(Response::GetChildren(vec!["b".into()])));
        let c = client.counters();
        assert_eq!((c.create, c.get_children, c.requests()), (2, 1, 3));
        assert_eq!(c.round_trips, 2);
    }

    #[test]
    fn a_multi_is_one_request_and_one_round_trip() {
        let client = CountingClient::new(MemoryEnsemble::new().connect());
        let results = client
            .multi(&[
                MultiOp::Create {
                    path: "/a".into(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                },
                MultiOp::Check {
                    path: "/a".into(),
                    version: -1,
                },
            ])
            .unwrap();
        assert!(results.iter().all(MultiResult::is_ok), "{results:?}");
        let c = client.counters();
        assert_eq!(
            (c.multi, c.create, c.requests(), c.round_trips),
            (1, 0, 1, 1)
        );
        assert_eq!(c.get(Op::Multi), 1);
    }
}
