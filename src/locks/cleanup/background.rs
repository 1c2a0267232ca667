//! The background: deletes of our nodes (and look-ups for a node a create may have made)
//! whose outcome stayed unknown, retried on one worker thread per client until they are done.
//!
//! Rules:
//! - **One worker per client, not a thread per job.** An outage in which thousands of waits
//!   are cancelled or time out queues thousands of jobs on one thread. The worker starts with
//!   the first job queued and ends when its queue is empty, or its client is closed or
//!   dropped; the client's entry in the registry goes with it, so nothing outlives the work.
//! - **The worker never keeps its client alive.** It holds it weakly, and strongly only for
//!   the length of a pass, never while it waits; it drops that handle with no lock held (a
//!   client's drop may end requests whose outcomes queue jobs here). A job is queued from a
//!   weak handle, never upgraded on the queueing thread: [`super::delete_unawaited`]'s
//!   outcome comes on the client's own thread, which must not drop the last handle.
//! - **A job ends** when its attempt succeeds (the node is gone), when the client is closed or
//!   dropped, or once two more sessions were lost than when it was queued: a node made in the
//!   session of then, or in one the client had not reported yet, is gone with them.
//! - **Attempts only while connected**, after every session change and every
//!   [`RETRY_EVERY`] while jobs remain; a job just queued is tried at once (only the new
//!   jobs then: a stream of new jobs does not make the old ones retry faster).
//! - **No job starves the others.** A pass sends every due delete in one pipeline (chunks of
//!   [`CHUNK`], each bounded by the client's call timeout), so 5,000 deletes after an outage
//!   take one round of requests, not 5,000 round trips one after another. Look-ups (several
//!   requests each) run after the deletes, one after another; one that fails (the link is in
//!   trouble) ends the pass and goes to the back of the queue, so the next pass starts with
//!   the one behind it.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, LazyLock, Weak};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::client::{Request, SharedClient, ZkClient, ZkError};
use crate::session::{ConnectionState, SessionSnapshot};

use super::fate_unknown;

/// The name of every worker thread.
const THREAD_NAME: &str = "zk-locks-delete";

/// How often the jobs that remain are tried while no session change comes.
const RETRY_EVERY: Duration = Duration::from_millis(250);

/// The most deletes sent in one pipeline: a pass's deletes go in one round of requests, each
/// chunk bounded by one call timeout (a server busy with thousands of writes answers a
/// chunk well within it; measured on a local server: 5,000 deletes in about 0.25 s pipelined,
/// 1 s one after another).
const CHUNK: usize = 500;

/// A look-up's attempt: true when it is done (found nothing, deleted what it found, or met an
/// answer that says it can never be done); false to try again (the outcome is unknown).
pub(super) type Attempt = Box<dyn FnMut(&SharedClient) -> bool + Send>;

/// A job: its work, and what decides when it is tried and when it ends.
struct Job<W> {
    /// The client's count of lost sessions when the job was queued.
    losses: u64,
    /// Tried at least once: retried only by a full pass.
    tried: bool,
    work: W,
}

impl<W> Job<W> {
    fn new(losses: u64, work: W) -> Job<W> {
        Job {
            losses,
            tried: false,
            work,
        }
    }

    /// Whether the job may still find its node: fewer than two more sessions were lost.
    fn alive(&self, losses: u64) -> bool {
        losses < self.losses.saturating_add(2)
    }
}

/// A node to delete (any version); pipelined with the other deletes of a pass.
type Delete = Job<String>;

/// A look-up, run on its own after the deletes.
type LookUp = Job<Attempt>;

/// A job as queued.
enum Queued {
    Delete(Delete),
    LookUp(LookUp),
}

/// The worker's jobs.
#[derive(Default)]
struct Jobs {
    deletes: Vec<Delete>,
    /// In the order they are tried.
    look_ups: VecDeque<LookUp>,
}

impl Jobs {
    fn is_empty(&self) -> bool {
        self.deletes.is_empty() && self.look_ups.is_empty()
    }

    fn extend(&mut self, queued: impl IntoIterator<Item = Queued>) {
        for q in queued {
            match q {
                Queued::Delete(d) => self.deletes.push(d),
                Queued::LookUp(l) => self.look_ups.push_back(l),
            }
        }
    }
}

/// The worker of each client that has jobs, by the address of the client's allocation: a
/// worker holds a weak handle to it, which keeps the allocation (not the client), so no
/// other client can have that address while the entry lives. The entry is removed when its
/// worker ends.
static WORKERS: LazyLock<Mutex<HashMap<usize, Arc<Worker>>>> = LazyLock::new(Default::default);

struct Worker {
    client: Weak<dyn ZkClient>,
    inbox: Mutex<Inbox>,
    wake: Condvar,
}

#[derive(Default)]
struct Inbox {
    /// Jobs queued since the worker last looked.
    jobs: Vec<Queued>,
    /// A session transition came since the last full pass started.
    session_changed: bool,
}

/// Deletes `path` in the background (see the module docs), counting lost sessions from
/// `losses`.
pub(super) fn delete(client: Weak<dyn ZkClient>, losses: u64, path: String) {
    queue(client, Queued::Delete(Job::new(losses, path)));
}

/// Runs `attempt` in the background until it returns true (see the module docs), counting
/// lost sessions from `losses`.
pub(super) fn retry(client: Weak<dyn ZkClient>, losses: u64, attempt: Attempt) {
    queue(client, Queued::LookUp(Job::new(losses, attempt)));
}

fn key(client: &Weak<dyn ZkClient>) -> usize {
    Weak::as_ptr(client) as *const () as usize
}

/// Hands the job to the client's worker, starting one if it has none. Never upgrades
/// `client` (see the module docs).
fn queue(client: Weak<dyn ZkClient>, job: Queued) {
    if client.strong_count() == 0 {
        return; // dropped: its session, and every ephemeral node of it, ended with it
    }
    let key = key(&client);
    let mut workers = WORKERS.lock();
    if let Some(worker) = workers.get(&key) {
        worker.inbox.lock().jobs.push(job);
        worker.wake.notify_one();
        return;
    }
    let worker = Arc::new(Worker {
        client,
        inbox: Mutex::new(Inbox {
            jobs: vec![job],
            session_changed: false,
        }),
        wake: Condvar::new(),
    });
    let runs = worker.clone();
    match thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || run(runs))
    {
        Ok(_) => {
            workers.insert(key, worker);
        }
        Err(e) => log::error!("could not start the background deletes' thread: {e}"),
    }
}

/// The worker's thread: passes over its jobs until none is left, or its client is closed or
/// dropped.
fn run(worker: Arc<Worker>) {
    let listener = worker.client.upgrade().map(|client| {
        let w = Arc::downgrade(&worker);
        // Session listeners only record and notify (they run on a backend thread).
        client.session().subscribe(move |_: &SessionSnapshot| {
            if let Some(w) = w.upgrade() {
                w.inbox.lock().session_changed = true;
                w.wake.notify_one();
            }
        })
    });
    let mut jobs = Jobs::default();
    let mut next_full = Instant::now() + RETRY_EVERY;
    while let Some(full) = worker.next_pass(&mut jobs, &mut next_full) {
        let Some(client) = worker.client.upgrade() else {
            break; // dropped: its session ended with it
        };
        // A user's `ZkClient` wrapper may panic: the worker goes on (the jobs of the pass
        // that panicked may be lost), and its registry entry never outlives it.
        let open = catch_unwind(AssertUnwindSafe(|| pass(&client, &mut jobs, full)))
            .unwrap_or_else(|_| {
                log::error!("a background delete panicked; some may not be made");
                true
            });
        drop(client); // with no lock held (see the module docs)
        if !open {
            break;
        }
    }
    worker.leave_registry();
    if let (Some(id), Some(client)) = (listener, worker.client.upgrade()) {
        client.session().unsubscribe(id);
    }
}

impl Worker {
    /// Waits until a pass is due and moves the jobs queued meanwhile to `jobs`: `Some(true)`
    /// for a full pass (a session change, [`RETRY_EVERY`] since the last one, or new jobs
    /// only), `Some(false)` for the new jobs only. `None` when no job is left: the worker is
    /// then out of the registry, taken out under its lock with the inbox seen empty, so a job
    /// queued later starts a new worker.
    fn next_pass(&self, jobs: &mut Jobs, next_full: &mut Instant) -> Option<bool> {
        loop {
            {
                let mut inbox = self.inbox.lock();
                loop {
                    let now = Instant::now();
                    let full_due = inbox.session_changed || now >= *next_full;
                    let fresh = !inbox.jobs.is_empty();
                    if (full_due && !jobs.is_empty()) || (fresh && jobs.is_empty()) {
                        inbox.session_changed = false;
                        *next_full = now + RETRY_EVERY;
                        jobs.extend(inbox.jobs.drain(..));
                        return Some(true);
                    }
                    if fresh {
                        jobs.extend(inbox.jobs.drain(..));
                        return Some(false);
                    }
                    if jobs.is_empty() {
                        break;
                    }
                    let _ = self.wake.wait_until(&mut inbox, *next_full);
                }
            }
            let mut workers = WORKERS.lock();
            if self.inbox.lock().jobs.is_empty() {
                self.leave(&mut workers);
                return None;
            }
        }
    }

    fn leave_registry(&self) {
        self.leave(&mut WORKERS.lock());
    }

    /// Takes this worker out of the registry (a new worker of the same client may have taken
    /// its place already: that one stays).
    fn leave(&self, workers: &mut HashMap<usize, Arc<Worker>>) {
        let key = key(&self.client);
        if workers.get(&key).is_some_and(|w| std::ptr::eq(&**w, self)) {
            workers.remove(&key);
        }
    }
}

/// One pass over `jobs` (every job when `full`, else those never tried); false when the
/// client is closed: every job ends.
fn pass(client: &SharedClient, jobs: &mut Jobs, full: bool) -> bool {
    let s = client.session().snapshot();
    if s.state == ConnectionState::Closed {
        return false; // closing ended the client's session, and its ephemeral nodes
    }
    jobs.deletes.retain(|d| d.alive(s.losses));
    jobs.look_ups.retain(|l| l.alive(s.losses));
    if !s.state.is_connected() {
        return true;
    }
    let due = |tried: bool| full || !tried;
    let (mut now, later): (Vec<Delete>, Vec<Delete>) = std::mem::take(&mut jobs.deletes)
        .into_iter()
        .partition(|d| due(d.tried));
    jobs.deletes = later;
    now.iter_mut().for_each(|d| d.tried = true);
    if delete_all(client, now, &mut jobs.deletes) {
        return true; // the link is in trouble: no look-up now
    }
    look_up_each(client, &mut jobs.look_ups, due);
    true
}

/// Sends `deletes` in pipelines of [`CHUNK`]; those whose outcome stays unknown, and those not
/// sent once a chunk met the link's trouble, go to `kept`. True when the link is in trouble.
fn delete_all(client: &SharedClient, deletes: Vec<Delete>, kept: &mut Vec<Delete>) -> bool {
    let mut deletes = deletes.into_iter().peekable();
    while deletes.peek().is_some() {
        let chunk: Vec<Delete> = deletes.by_ref().take(CHUNK).collect();
        let requests: Vec<Request> = chunk
            .iter()
            .map(|d| Request::Delete {
                path: d.work.clone(),
                version: None,
            })
            .collect();
        let mut results = client.pipeline(&requests).into_iter();
        let mut link_trouble = false;
        for d in chunk {
            match results.next().map(|r| r.map(drop)) {
                Some(Ok(()) | Err(ZkError::NoNode | ZkError::Closed)) => {}
                Some(Err(code)) if fate_unknown(code) => {
                    link_trouble = true;
                    kept.push(d);
                }
                Some(Err(code)) => log::warn!("could not delete {}: {code}", d.work),
                None => kept.push(d), // a backend that answered fewer: try again
            }
        }
        if link_trouble {
            kept.extend(deletes);
            return true;
        }
    }
    false
}

/// Runs the due look-ups one after another while the client is connected. The first that
/// fails (the link is in trouble) ends the pass and goes to the back of the queue, so the
/// next pass starts with the one behind it.
fn look_up_each(
    client: &SharedClient,
    look_ups: &mut VecDeque<LookUp>,
    due: impl Fn(bool) -> bool,
) {
    let mut kept = VecDeque::with_capacity(look_ups.len());
    while let Some(mut l) = look_ups.pop_front() {
        if !due(l.tried) {
            kept.push_back(l);
            continue;
        }
        if !client.session().state().is_connected() {
            look_ups.push_front(l);
            break;
        }
        l.tried = true;
        if !(l.work)(client) {
            kept.extend(look_ups.drain(..));
            kept.push_back(l);
            break;
        }
    }
    kept.extend(look_ups.drain(..));
    *look_ups = kept;
}
