//! The API a user meets first: every recipe and the types named with it at the crate root and
//! in the prelude, `?` from a `ZkClient` call into `zk_locks::Result`, `try_lock()` as the one
//! non-blocking attempt, and guards whose `Debug` shows what a user reads. Memory backend.

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::{
    Acquire, CancelToken, Error, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease,
    LockEvent, LockObserver, LockState, Participant, ParticipantKind, ReadLock, Revoker,
    SharedClient, SharedCount, WriteLock, ZkError,
};

/// Every recipe is at the root, as the mutex is (a use of each name, so the import is real).
#[test]
fn every_recipe_is_at_the_crate_root() {
    let e = MemoryEnsemble::new();
    let client: SharedClient = e.connect();
    let rw = InterProcessReadWriteLock::new(client.clone(), "/surface/rw").unwrap();
    let _: (&ReadLock, &WriteLock) = (rw.read_lock(), rw.write_lock());
    let semaphore = InterProcessSemaphoreV2::new(client.clone(), "/surface/sem", 2).unwrap();
    let lease: Lease = semaphore.acquire().unwrap();
    let node = lease.node_path().to_string();
    drop(lease);
    let _ = Revoker::attempt_revoke(&client, &node);
    let _count: SharedCount = SharedCount::new(client.clone(), "/surface/count", 1).unwrap();
    let one = InterProcessSemaphoreMutex::new(client.clone(), "/surface/one").unwrap();
    let multi = InterProcessMultiLock::new(vec![Box::new(one)]).unwrap();
    drop(multi.lock().unwrap());
    let mutex = InterProcessMutex::new(client, "/surface/mutex").unwrap();
    let _g = mutex.try_lock_with(&Acquire::new().cancel(&CancelToken::new()));
    let who: Vec<Participant> = mutex.participants().unwrap();
    assert!(who
        .iter()
        .all(|p| p.kind == ParticipantKind::Mutex || p.is_holder));
    fn observer_types(_: Option<&dyn LockObserver>, _: Option<&LockEvent>, _: LockState) {}
    observer_types(None, None, LockState::Held);
}

/// The prelude brings the trait and the recipes.
#[test]
fn the_prelude_brings_the_recipes_and_the_trait() {
    use zk_locks::prelude::*;
    let e = MemoryEnsemble::new();
    let rw = InterProcessReadWriteLock::new(e.connect(), "/surface/prelude").unwrap();
    drop(rw.write_lock().lock().unwrap());
    let _ = InterProcessSemaphoreV2::new(e.connect(), "/surface/prelude-sem", 1).unwrap();
}

/// `?` works from a `ZkClient` call: its `ZkError` converts into the crate's `Error`, keeping
/// the code.
#[test]
fn a_zk_error_converts_with_question_mark() {
    use zk_locks::ZkClient as _;
    fn read(client: &SharedClient) -> zk_locks::Result<Vec<u8>> {
        Ok(client.get_data("/does/not/exist", None)?.0)
    }
    let e = MemoryEnsemble::new();
    let client: SharedClient = e.connect();
    let err = read(&client).unwrap_err();
    assert_eq!(err.zk_code(), Some(ZkError::NoNode), "{err:?}");
    assert!(matches!(Error::from(ZkError::Closed), Error::Closed));
}
