//! Bad input to the recipes, row by row: every row gets a typed `zk_locks::Error` whose
//! message names the input, nothing panics, and no node is left behind. Rows run on the memory
//! backend. Bad connect strings and timeouts are rows of `real_backends/connecting.rs`, run
//! on both real backends (where connect strings are parsed).

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use zk_locks::client::memory::MemoryEnsemble;
use zk_locks::locks::{
    InterProcessMultiLock, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, LockState, Revoker, SharedCount,
};
use zk_locks::{Error, InterProcessLock, InterProcessMutex, SharedClient};

/// Every node of the ensemble, as full paths.
fn tree(e: &MemoryEnsemble) -> Vec<String> {
    let mut all = Vec::new();
    let mut todo = vec!["/".to_string()];
    while let Some(p) = todo.pop() {
        for c in e.children(&p).unwrap_or_default() {
            let child = if p == "/" {
                format!("/{c}")
            } else {
                format!("{p}/{c}")
            };
            all.push(child.clone());
            todo.push(child);
        }
    }
    all.sort();
    all
}

/// Runs one row: it must fail with an error accepted by `expected` whose message contains
/// `names`, and leave the tree as it was.
fn row<T: std::fmt::Debug>(
    e: &MemoryEnsemble,
    what: &str,
    names: &str,
    expected: impl Fn(&Error) -> bool,
    f: impl FnOnce() -> zk_locks::Result<T>,
) {
    let before = tree(e);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let result = result.unwrap_or_else(|_| panic!("{what}: panicked"));
    let err = match result {
        Ok(v) => panic!("{what}: accepted ({v:?})"),
        Err(err) => err,
    };
    assert!(expected(&err), "{what}: unexpected error {err:?}");
    let message = err.to_string();
    assert!(
        message.contains(names),
        "{what}: message {message:?} does not name {names:?}"
    );
    assert_eq!(tree(e), before, "{what}: left nodes behind");
}

fn is_invalid_path(input: &str) -> impl Fn(&Error) -> bool + '_ {
    move |e| matches!(e, Error::InvalidPath { path, .. } if path == input)
}

const BAD_PATHS: [&str; 12] = [
    "",
    "relative",
    "relative/lock",
    "/trailing/",
    "//",
    "/a//b",
    "/.",
    "/..",
    "/a/./b",
    "/a/../b",
    "/a\0b",
    "/a\u{1}b",
];

#[test]
fn invalid_paths_are_typed_errors_on_every_recipe() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    for bad in BAD_PATHS {
        // `{:?}` of the path is what the messages show (a NUL is `\0`).
        let shown = format!("{bad:?}");
        let ctx = |recipe: &str| format!("{recipe} at {shown}");
        row(&e, &ctx("mutex"), &shown, is_invalid_path(bad), || {
            InterProcessMutex::new(c.clone(), bad)
        });
        row(&e, &ctx("rw"), &shown, is_invalid_path(bad), || {
            InterProcessReadWriteLock::new(c.clone(), bad)
        });
        row(&e, &ctx("semaphore"), &shown, is_invalid_path(bad), || {
            InterProcessSemaphoreV2::new(c.clone(), bad, 2)
        });
        row(
            &e,
            &ctx("semaphore mutex"),
            &shown,
            is_invalid_path(bad),
            || InterProcessSemaphoreMutex::new(c.clone(), bad),
        );
        row(
            &e,
            &ctx("shared count"),
            &shown,
            is_invalid_path(bad),
            || SharedCount::new(c.clone(), bad, 1).map(|_| ()),
        );
        row(&e, &ctx("multi-lock"), &shown, is_invalid_path(bad), || {
            InterProcessMultiLock::from_paths(c.clone(), &["/fine", bad]).map(|_| ())
        });
        row(&e, &ctx("revoke"), &shown, is_invalid_path(bad), || {
            Revoker::attempt_revoke(&c, bad)
        });
    }
    // The root is a valid path but not a lock directory.
    row(&e, "mutex at /", "\"/\"", is_invalid_path("/"), || {
        InterProcessMutex::new(c.clone(), "/")
    });
    row(&e, "rw at /", "\"/\"", is_invalid_path("/"), || {
        InterProcessReadWriteLock::new(c.clone(), "/")
    });
    row(&e, "semaphore at /", "\"/\"", is_invalid_path("/"), || {
        InterProcessSemaphoreV2::new(c.clone(), "/", 2)
    });
    row(
        &e,
        "semaphore mutex at /",
        "\"/\"",
        is_invalid_path("/"),
        || InterProcessSemaphoreMutex::new(c.clone(), "/"),
    );
}

/// Two locks of one multi-lock on one path, however the multi-lock is built: the second would
/// wait for the first forever.
#[test]
fn a_multi_lock_with_two_locks_on_one_path_is_a_typed_error() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    let twice = |e: &Error| matches!(e, Error::InvalidArgument { name: "locks", .. });
    let mutex = |p: &str| -> Box<dyn InterProcessLock> {
        Box::new(InterProcessMutex::new(c.clone(), p).unwrap())
    };
    row(&e, "from_paths", "\"/dup\"", twice, || {
        InterProcessMultiLock::from_paths(c.clone(), &["/dup", "/other", "/dup"])
    });
    row(&e, "new: two mutexes", "\"/dup\"", twice, || {
        InterProcessMultiLock::new(vec![mutex("/dup"), mutex("/other"), mutex("/dup")])
    });
    row(&e, "with_names: two mutexes", "\"/dup\"", twice, || {
        InterProcessMultiLock::with_names(vec![
            ("a".to_string(), mutex("/dup")),
            ("b".to_string(), mutex("/dup")),
        ])
    });
    row(
        &e,
        "new: a mutex and a semaphore mutex",
        "\"/dup\"",
        twice,
        || {
            InterProcessMultiLock::new(vec![
                mutex("/dup"),
                Box::new(InterProcessSemaphoreMutex::new(c.clone(), "/dup").unwrap()),
            ])
        },
    );
    row(
        &e,
        "new: both sides of a read/write lock",
        "\"/rw\"",
        twice,
        || {
            let rw = Arc::new(InterProcessReadWriteLock::new(c.clone(), "/rw").unwrap());
            InterProcessMultiLock::new(vec![
                Box::new(WriteSide(rw.clone())),
                Box::new(ReadSide(rw)),
            ])
        },
    );
    row(
        &e,
        "new: the path inside a nested multi-lock",
        "\"/dup\"",
        twice,
        || {
            let inner = InterProcessMultiLock::from_paths(c.clone(), &["/x", "/dup"]).unwrap();
            InterProcessMultiLock::new(vec![mutex("/dup"), Box::new(inner)])
        },
    );
}

/// A side of a shared read/write lock as a boxed lock (the sides are borrowed from it).
struct WriteSide(Arc<InterProcessReadWriteLock>);
struct ReadSide(Arc<InterProcessReadWriteLock>);

macro_rules! side {
    ($t:ident, $side:ident) => {
        impl InterProcessLock for $t {
            fn acquire(&self) -> zk_locks::Result<()> {
                self.0.$side().acquire()
            }
            fn acquire_timeout(&self, t: Duration) -> zk_locks::Result<bool> {
                self.0.$side().acquire_timeout(t)
            }
            fn release(&self) -> zk_locks::Result<()> {
                self.0.$side().release()
            }
            fn is_acquired_in_this_process(&self) -> bool {
                self.0.$side().is_acquired_in_this_process()
            }
            fn held_nodes(&self) -> Vec<Arc<zk_locks::locks::HeldNode>> {
                self.0.$side().held_nodes()
            }
            fn lock_paths(&self) -> Vec<String> {
                self.0.$side().lock_paths()
            }
        }
    };
}
side!(WriteSide, write_lock);
side!(ReadSide, read_lock);

#[test]
fn releasing_what_is_not_held_is_a_typed_error() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    let not_owner =
        |p: &'static str| move |e: &Error| matches!(e, Error::NotOwner { path } if path == p);
    let not_acquired =
        |p: &'static str| move |e: &Error| matches!(e, Error::NotAcquired { path } if path == p);

    let m = InterProcessMutex::new(c.clone(), "/r/mutex").unwrap();
    row(
        &e,
        "mutex: release without acquire",
        "/r/mutex",
        not_owner("/r/mutex"),
        || m.release(),
    );
    let rw = InterProcessReadWriteLock::new(c.clone(), "/r/rw").unwrap();
    row(
        &e,
        "read lock: release without acquire",
        "/r/rw",
        not_owner("/r/rw"),
        || rw.read_lock().release(),
    );
    row(
        &e,
        "write lock: release without acquire",
        "/r/rw",
        not_owner("/r/rw"),
        || rw.write_lock().release(),
    );
    let sm = InterProcessSemaphoreMutex::new(c.clone(), "/r/sm").unwrap();
    row(
        &e,
        "semaphore mutex: release without acquire",
        "/r/sm",
        not_acquired("/r/sm"),
        || sm.release(),
    );
    let multi = InterProcessMultiLock::from_paths(c.clone(), &["/r/m1", "/r/m2"]).unwrap();
    row(
        &e,
        "multi-lock: release without acquire",
        "/r/m1",
        |e| matches!(e, Error::Multiple(v) if v.len() == 2),
        || multi.release(),
    );

    // Twice: the second release is the typed error, the first one worked.
    m.acquire().unwrap();
    m.release().unwrap();
    row(
        &e,
        "mutex: release twice",
        "/r/mutex",
        not_owner("/r/mutex"),
        || m.release(),
    );
    sm.acquire().unwrap();
    sm.release().unwrap();
    row(
        &e,
        "semaphore mutex: release twice",
        "/r/sm",
        not_acquired("/r/sm"),
        || sm.release(),
    );
    rw.write_lock().acquire().unwrap();
    rw.write_lock().release().unwrap();
    row(
        &e,
        "write lock: release twice",
        "/r/rw",
        not_owner("/r/rw"),
        || rw.write_lock().release(),
    );
    assert!(e.children("/r/mutex").unwrap_or_default().is_empty());
}

#[test]
fn release_from_a_foreign_thread() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    let m = Arc::new(InterProcessMutex::new(c.clone(), "/f/mutex").unwrap());
    m.acquire().unwrap();
    let other = m.clone();
    let from_other = thread::spawn(move || other.release())
        .join()
        .expect("no panic");
    assert!(
        matches!(&from_other, Err(Error::NotOwner { path }) if path == "/f/mutex"),
        "{from_other:?}"
    );
    assert!(from_other.unwrap_err().to_string().contains("/f/mutex"));
    // The owner still holds it and can release it.
    assert_eq!(e.children("/f/mutex").unwrap().len(), 1);
    m.release().unwrap();
    assert!(e.children("/f/mutex").unwrap().is_empty());

    // The write lock is owned by its thread too.
    let rw = Arc::new(InterProcessReadWriteLock::new(c.clone(), "/f/rw").unwrap());
    rw.write_lock().acquire().unwrap();
    let other = rw.clone();
    let from_other = thread::spawn(move || other.write_lock().release())
        .join()
        .expect("no panic");
    assert!(
        matches!(from_other, Err(Error::NotOwner { .. })),
        "{from_other:?}"
    );
    rw.write_lock().release().unwrap();

    // A semaphore mutex may be released from any thread (Curator's semantics): not an error.
    let sm = Arc::new(InterProcessSemaphoreMutex::new(c.clone(), "/f/sm").unwrap());
    sm.acquire().unwrap();
    let other = sm.clone();
    thread::spawn(move || other.release())
        .join()
        .expect("no panic")
        .expect("any thread may release a semaphore mutex");
    assert!(e.children("/f/sm/leases").unwrap().is_empty());
}

/// A `lock-` (or `__READ__`, `lease-`) in the lock's *path* is fine, as for Curator: the sort
/// key is taken from the child names under the directory, never from the directory's path, so
/// a reserved name there changes nothing. Rejecting it would refuse paths that Curator
/// processes use, and break compatibility.
#[test]
fn reserved_lock_names_in_a_path_work() {
    let e = MemoryEnsemble::new();
    let (a, b): (SharedClient, SharedClient) = (e.connect(), e.connect());
    for path in [
        "/reserved/lock-",
        "/reserved/_c_00000000-0000-0000-0000-000000000000-lock-0000000001",
        "/reserved/lock-0000000009/lock-",
    ] {
        let ma = InterProcessMutex::new(a.clone(), path).unwrap();
        let mb = InterProcessMutex::new(b.clone(), path).unwrap();
        let g = ma.lock().unwrap();
        assert!(g.is_valid(), "{path}");
        assert!(
            mb.try_lock_for(Duration::ZERO).unwrap().is_none(),
            "{path}: excluded"
        );
        drop(g);
        let g = mb.try_lock_for(Duration::from_secs(5)).unwrap();
        assert!(g.is_some(), "{path}: handed over");
        drop(g);
        assert!(e.children(path).unwrap().is_empty(), "{path}");
    }
    let rw = InterProcessReadWriteLock::new(a.clone(), "/reserved/__READ__/__WRIT__").unwrap();
    let w = rw.write_lock().lock().unwrap();
    let other = InterProcessReadWriteLock::new(b.clone(), "/reserved/__READ__/__WRIT__").unwrap();
    assert!(other
        .read_lock()
        .try_lock_for(Duration::ZERO)
        .unwrap()
        .is_none());
    drop(w);
    let s = InterProcessSemaphoreV2::new(a.clone(), "/reserved/lease-", 1).unwrap();
    s.acquire().unwrap().close().unwrap();
}

#[test]
fn zero_quantities_are_typed_errors() {
    let e = MemoryEnsemble::new();
    let c: SharedClient = e.connect();
    let invalid = |name: &'static str| move |e: &Error| matches!(e, Error::InvalidArgument { name: n, .. } if *n == name);
    row(
        &e,
        "semaphore with max 0",
        "max_leases",
        invalid("max_leases"),
        || InterProcessSemaphoreV2::new(c.clone(), "/q/sem", 0),
    );
    let s = InterProcessSemaphoreV2::new(c.clone(), "/q/sem", 2).unwrap();
    row(&e, "acquire 0 leases", "qty", invalid("qty"), || {
        s.acquire_many(0)
    });
    row(&e, "acquire 0 leases, timed", "qty", invalid("qty"), || {
        s.acquire_many_timeout(0, Duration::from_secs(1))
    });
    row(&e, "acquire more than max", "3", invalid("qty"), || {
        s.acquire_many_timeout(3, Duration::from_secs(1))
    });
}

/// `Duration::ZERO` tries once; `Duration::MAX` waits without limit (no `Instant` overflow).
#[test]
fn zero_and_maximal_timeouts() {
    let e = MemoryEnsemble::new();
    let (a, b) = (e.connect(), e.connect());
    let (ca, cb): (SharedClient, SharedClient) = (a.clone(), b.clone());
    // (first contender, second contender, the directory their nodes go to)
    type Row = (
        Box<dyn InterProcessLock>,
        Box<dyn InterProcessLock>,
        &'static str,
    );
    let locks: Vec<Row> = vec![
        (
            Box::new(InterProcessMutex::new(ca.clone(), "/t/mutex").unwrap()),
            Box::new(InterProcessMutex::new(cb.clone(), "/t/mutex").unwrap()),
            "/t/mutex",
        ),
        (
            Box::new(InterProcessSemaphoreMutex::new(ca.clone(), "/t/sm").unwrap()),
            Box::new(InterProcessSemaphoreMutex::new(cb.clone(), "/t/sm").unwrap()),
            "/t/sm/leases",
        ),
        (
            Box::new(InterProcessMultiLock::from_paths(ca.clone(), &["/t/m1", "/t/m2"]).unwrap()),
            Box::new(InterProcessMultiLock::from_paths(cb.clone(), &["/t/m1", "/t/m2"]).unwrap()),
            "/t/m1",
        ),
    ];
    for (first, second, dir) in &locks {
        // Free: both timeouts acquire at once.
        assert!(first.acquire_timeout(Duration::ZERO).unwrap(), "{dir}");
        first.release().unwrap();
        assert!(first.acquire_timeout(Duration::MAX).unwrap(), "{dir}");
        // Held: zero gives up at once and leaves nothing behind.
        assert!(!second.acquire_timeout(Duration::ZERO).unwrap(), "{dir}");
        assert_eq!(e.children(dir).unwrap().len(), 1, "{dir}");
        // Held: MAX waits until the holder lets go.
        thread::scope(|s| {
            // A mutex is released by the thread that took it.
            let waiter = s.spawn(|| {
                let got = second.acquire_timeout(Duration::MAX);
                if matches!(got, Ok(true)) {
                    second.release().unwrap();
                }
                got
            });
            common::eventually(Duration::from_secs(10), dir, || {
                e.children(dir).unwrap().len() == 2
            });
            first.release().unwrap();
            assert!(waiter.join().unwrap().unwrap(), "{dir}");
        });
        assert!(e.children(dir).unwrap().is_empty(), "{dir}");
    }
    // The semaphore's own API, and a guard's wait with MAX.
    let sem = InterProcessSemaphoreV2::new(ca.clone(), "/t/sem", 1).unwrap();
    let lease = sem.acquire_timeout(Duration::MAX).unwrap().unwrap();
    assert!(sem.acquire_timeout(Duration::ZERO).unwrap().is_none());
    drop(lease);
    let m = InterProcessMutex::new(ca, "/t/wait").unwrap();
    let g = m.lock().unwrap();
    thread::scope(|s| {
        let expirer = s.spawn(|| a.expire());
        assert_eq!(g.wait_while_held(Some(Duration::MAX)), LockState::Lost);
        expirer.join().unwrap();
    });
    drop(g);
    assert!(e.children("/t/wait").unwrap_or_default().is_empty());
}

/// A connect string that is not `host:port[,host:port...][/chroot]` (a URL, a stray comma, a
/// bad port or chroot) is refused before any connection, with a message that names the
/// expected form, whatever rule it breaks.
#[test]
fn a_bad_connect_string_names_the_expected_form() {
    use zk_locks::client::native::NativeClient;
    const FORM: &str = "host:port[,host:port...][/chroot]";
    for bad in [
        "http://127.0.0.1:2181",
        "zk://zk1:2181/app",
        "",
        "127.0.0.1:2181,,127.0.0.2:2181",
        "127.0.0.1:notaport",
        "127.0.0.1:2181/app/",
    ] {
        let err = NativeClient::connect(bad, Duration::from_secs(10))
            .map(drop)
            .expect_err(bad);
        assert!(
            matches!(err, Error::Connect { .. } | Error::InvalidArgument { .. }),
            "{bad:?}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(FORM), "{bad:?}: {message:?}");
    }
    let url = NativeClient::connect("http://127.0.0.1:2181", Duration::from_secs(10))
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(url.contains("http://"), "names the scheme: {url:?}");
    assert!(
        !url.contains("chroot \""),
        "not a chroot complaint: {url:?}"
    );
}
