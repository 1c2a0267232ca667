//! [`ZkClient::submit`]: requests sent without anybody blocking on them, their results handed
//! to a completion. What a future waits on: the completion records the results and wakes it.
//!
//! Rules this file protects:
//! - a submission's results come in one call of its completion, one result per request, in
//!   order, exactly once (also when nothing could be sent: each then carries the failure);
//! - a watched read sets its watch only when it succeeds, as the blocking reads do, and
//!   under the name and delivery its submission asked for;
//! - the default runs the requests on the calling thread through the blocking methods (a
//!   backend that cannot send without waiting); after a request fails with a connection
//!   loss, a lost session or a closed client, the later ones get that failure unsent, as a
//!   pipeline does.

use super::pipeline::run_one;
use super::{Request, Response, Watcher, WatcherId, ZkClient, ZkResult};

/// What [`ZkClient::submit`] does with the results: one per request, in order. Runs on a
/// backend thread (the native client's reader thread) or the calling thread: it must only
/// record and wake, never call the client.
pub type Submitted = Box<dyn FnOnce(Vec<ZkResult<Response>>) + Send>;

/// One request of a [`ZkClient::submit`]: a pipeline [`Request`] and, for a read, the watch it
/// sets when it succeeds.
pub struct Submission {
    request: Request,
    watch: Option<SubmittedWatch>,
}

/// The watch a submitted read sets, with how it is named and delivered.
pub(crate) struct SubmittedWatch {
    pub(crate) watcher: Watcher,
    /// Its name, to remove it unfired ([`ZkClient::remove_watcher`]).
    pub(crate) id: Option<WatcherId>,
    /// A lock waiter's wake-up: run where the notification is read, not behind the session's
    /// other callbacks (the native client's reader thread).
    pub(crate) wake_only: bool,
}

impl Submission {
    /// A request that sets no watch.
    pub fn new(request: Request) -> Submission {
        Submission {
            request,
            watch: None,
        }
    }

    /// A read (`GetData`, `GetChildren`) that sets `watcher` when it succeeds. On another
    /// request the watcher is never set.
    pub fn watched(request: Request, watcher: Watcher) -> Submission {
        Submission {
            request,
            watch: Some(SubmittedWatch {
                watcher,
                id: None,
                wake_only: false,
            }),
        }
    }

    /// Names the watch `id` (see [`super::registering_as`]).
    pub fn named(mut self, id: WatcherId) -> Submission {
        if let Some(w) = self.watch.as_mut() {
            w.id = Some(id);
        }
        self
    }

    /// Delivers the watch where the notification is read (the native client's reader thread),
    /// not behind the session's other callbacks: for a watcher that only records and wakes (a
    /// future's waker), which must then never call the client or block.
    pub fn wake_only(mut self) -> Submission {
        if let Some(w) = self.watch.as_mut() {
            w.wake_only = true;
        }
        self
    }

    /// The request.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The request and its watch, taken apart (backends).
    pub(crate) fn into_parts(self) -> (Request, Option<SubmittedWatch>) {
        (self.request, self.watch)
    }

    /// The same submission with its watcher (if any) replaced by `wrap(watcher)`, its name and
    /// delivery kept: what a wrapping client (counting) does to the watches it passes on.
    #[cfg(feature = "testing")]
    pub(crate) fn map_watcher(mut self, wrap: impl FnOnce(Watcher) -> Watcher) -> Submission {
        if let Some(w) = self.watch.take() {
            self.watch = Some(SubmittedWatch {
                watcher: wrap(w.watcher),
                ..w
            });
        }
        self
    }
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission")
            .field("request", &self.request)
            .field("watched", &self.watch.is_some())
            .finish()
    }
}

/// The default [`ZkClient::submit`]: each request through the blocking methods, in order, on
/// the calling thread.
pub(super) fn run_blocking<C: ZkClient + ?Sized>(
    client: &C,
    submissions: Vec<Submission>,
) -> Vec<ZkResult<Response>> {
    super::pipeline::one_by_one(submissions, |s| run_submission(client, s))
}

fn run_submission<C: ZkClient + ?Sized>(client: &C, submission: Submission) -> ZkResult<Response> {
    let (request, watch) = submission.into_parts();
    let Some(watch) = watch else {
        return run_one(client, &request);
    };
    let SubmittedWatch {
        watcher,
        id,
        wake_only,
    } = watch;
    let read = move || match &request {
        Request::GetData { path } => client
            .get_data(path, Some(watcher))
            .map(|(data, stat)| Response::GetData(data, stat)),
        Request::GetChildren { path } => client
            .get_children(path, Some(watcher))
            .map(Response::GetChildren),
        // Not a read: no watch to set.
        other => run_one(client, other),
    };
    let named = move || match id {
        Some(id) => super::registering_as(id, read),
        None => read(),
    };
    match wake_only {
        true => super::native::watches::wake_only(named),
        false => named(),
    }
}
