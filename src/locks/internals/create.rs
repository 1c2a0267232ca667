//! Creating our lock node: Curator's protected names, the create and the listing sent in one
//! pipeline, the recovery look-up after a create with an unknown outcome (never a second
//! create), and missing parents created as containers.

use std::sync::Arc;
use std::time::Instant;

use crate::client::{CreateMode, Request, Response, SharedClient, Submission, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::{Retries, RetryPolicy};
use crate::session::SessionSnapshot;

use super::awaits::{self, Abandoned};
use super::{past, LockInternals, Resume, Wait};
use crate::locks::cleanup::{
    delete_in_background_from, delete_now_or_unawaited, fate_unknown, retry_in_background,
    retry_in_background_from, try_delete,
};
use crate::locks::driver::LockDriver;

/// Length of Curator's protection prefix `_c_<36-char uuid>-`.
pub const PROTECTED_PREFIX_LEN: usize = 40;

/// A fresh Curator protection prefix: `_c_<uuid v4, lowercase, hyphenated>-`.
pub fn protected_prefix() -> String {
    let mut uuid = uuid::Uuid::encode_buffer();
    let uuid = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut uuid);
    let mut prefix = String::with_capacity(PROTECTED_PREFIX_LEN);
    prefix.push_str("_c_");
    prefix.push_str(uuid);
    prefix.push('-');
    prefix
}

/// True for a name made by a protected create (Curator's `isProtectedZNode`).
pub fn is_protected(name: &str) -> bool {
    name.len() > PROTECTED_PREFIX_LEN
        && name.starts_with("_c_")
        && name.as_bytes()[39] == b'-'
        && uuid::Uuid::try_parse(&name[3..39]).is_ok()
}

/// How the lock node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// EPHEMERAL_SEQUENTIAL: the server appends the next sequence number (every recipe).
    Sequential,
    /// EPHEMERAL with this sequence written by us: the read node of a write→read downgrade
    /// takes its write node's sequence, so a writer queued behind stays behind (CURATOR-621).
    WithSequence(i32),
}

/// Our freshly created node, as [`LockInternals::create_protected`] returns it.
#[derive(Debug)]
pub(crate) struct Created {
    /// The node's actual path.
    pub(crate) path: String,
    /// The session as it was just before the create that made the node.
    pub(crate) before: SessionSnapshot,
    /// The node's `czxid` (the fencing token), from the create's own reply or the look-up;
    /// `None` on a backend without create2 (it is then read when asked for).
    pub(crate) czxid: Option<i64>,
    /// The lock directory's children (unsorted) as listed right behind the create, in the same
    /// session: ZooKeeper serves one session's requests in order, so the listing includes our
    /// node. `None` when no listing was sent (a backend without create2, or the node was found
    /// by the recovery look-up); an error when it failed, to be handled as any failed listing
    /// (it may have outlived the deadline).
    pub(crate) listing: Option<std::result::Result<Vec<String>, ZkError>>,
    /// True when the lock directory (or a node above it) was missing and made by this call.
    pub(crate) made_parents: bool,
}

/// A create's reply as [`LockInternals::create_and_list`] returns it: the node's path, its
/// `czxid` when the backend has create2, and the listing sent behind it.
type CreatedReply = (
    String,
    Option<i64>,
    Option<std::result::Result<Vec<String>, ZkError>>,
);

enum Found {
    None,
    /// Our node and its `czxid`.
    Ours(String, i64),
    Foreign(String),
}

impl LockInternals {
    /// Creates our node under a fresh protection prefix, with the listing of the lock directory
    /// sent right behind it ([`crate::client::ZkClient::pipeline`]: one round trip on a
    /// pipelining backend); handles a missing parent and a connection loss with an unknown
    /// outcome. Returns the node, the session as it was just before the create that made it (a
    /// later session loss means the node may not be ours any more) and the listing when it
    /// succeeded; `Ok(None)` when the deadline passed.
    pub(crate) async fn create_protected(
        &self,
        data: &[u8],
        kind: NodeKind,
        deadline: Option<Instant>,
        start: Instant,
    ) -> Result<Option<Created>> {
        // With a restricting ACL provider, never a node in a directory others may enter.
        if !self.check_protection(deadline, start)? {
            return Ok(None);
        }
        let mut retries = Retries::new(self.retry.as_ref(), start, deadline);
        let mut prefix = protected_prefix();
        // A container parent can be reaped between our creates: recreate it a few times.
        let mut parent_creations = 0;
        loop {
            // Cancelled (`locks::cancel`): no create. Nothing of ours exists at this point.
            if crate::locks::cancel::requested() {
                return Ok(None);
            }
            let (path, mode) = self.node_path(&prefix, kind);
            let before = self.client.session().snapshot();
            // A future dropped while the create is out leaves its answer to `abandoned_create`.
            let mut code = match self.create_and_list(&path, data, mode, &prefix).await {
                Ok((actual, czxid, listing)) => {
                    return Ok(Some(Created {
                        path: actual,
                        before,
                        czxid,
                        listing,
                        made_parents: parent_creations > 0,
                    }))
                }
                Err(code) => code,
            };
            match code {
                // Parents are created only when missing, as Curator does (one create when the
                // directory exists, which is the common case).
                ZkError::NoNode if parent_creations < 3 => {
                    parent_creations += 1;
                    match self.create_parents().await {
                        Ok(()) => continue,
                        // Parents are containers made idempotently (NodeExists is fine), so a
                        // failure with an unknown outcome is simply made again, under the
                        // retry policy and deadline, and does not count as an attempt.
                        Err((_, _, code)) if fate_unknown(code) => {
                            parent_creations -= 1;
                            match self.retry_when_connected_async(&mut retries).await {
                                Resume::Ready => continue,
                                Resume::Deadline => return Ok(None),
                                Resume::Closed => return Err(Error::Closed),
                                Resume::Exhausted => {
                                    return Err(Error::RetriesExhausted {
                                        path: self.base_path.clone(),
                                        attempts: retries.attempts() + 1,
                                        elapsed: retries.elapsed(),
                                        last: code,
                                    })
                                }
                            }
                        }
                        Err((op, path, code)) => return Err(Error::zk(op, path, code)),
                    }
                }
                code if code.is_retryable() => {}
                // The session ended before the create was applied in it: nothing of ours
                // can exist. Create again on the next session (under the retry policy).
                ZkError::SessionExpired => {
                    match self.retry_when_connected_async(&mut retries).await {
                        Resume::Ready => {
                            prefix = protected_prefix();
                            continue;
                        }
                        Resume::Deadline => return Ok(None),
                        Resume::Closed => return Err(Error::Closed),
                        Resume::Exhausted => {
                            return Err(Error::SessionLost {
                                path: self.base_path.clone(),
                            })
                        }
                    }
                }
                code => return Err(Error::zk("create", path, code)),
            }
            // The create may or may not have been applied. Look it up, and repeat the look-up,
            // never the create, while the outcome stays unknown (`SessionExpired` included: the
            // create may have run in a session the client had not reported yet, and the node
            // lives on there): a second node of ours would sit in the queue behind the first
            // and wait on it (CURATOR-45). Until settled, an operation that goes away (a
            // dropped future) leaves the look-up to the background.
            let mut unsettled = Unsettled::new(self, &prefix, before.losses);
            loop {
                match self.retry_when_connected_async(&mut retries).await {
                    Resume::Ready => {}
                    Resume::Deadline => {
                        unsettled.settle();
                        self.delete_by_prefix_in_background(prefix);
                        return Ok(None);
                    }
                    Resume::Closed => return Err(Error::Closed),
                    Resume::Exhausted => {
                        unsettled.settle();
                        self.delete_by_prefix_in_background(prefix);
                        return Err(Error::RetriesExhausted {
                            path,
                            attempts: retries.attempts() + 1,
                            elapsed: retries.elapsed(),
                            last: code,
                        });
                    }
                }
                let at = self.client.session().snapshot();
                let found = self.find_ours(&prefix, at.session_id).await;
                // Answered past the deadline: no create again, and no listing; one delete of a
                // node found (a late copy of the create is looked for in the background).
                if found.is_ok() && past(deadline, Instant::now()) {
                    unsettled.settle();
                    if let Ok(Found::Ours(path, _) | Found::Foreign(path)) = &found {
                        let wait = Wait::Until(deadline);
                        let retry = &*self.retry;
                        if let Err(e) = delete_now_or_unawaited(&self.client, path, retry, wait) {
                            log::info!("deleting {path} after the deadline: {e}");
                        }
                    }
                    self.delete_by_prefix_in_background(prefix);
                    return Ok(None);
                }
                match found {
                    // Owned by the session `at` saw, so `at` is the snapshot "before" it.
                    Ok(Found::Ours(actual, czxid)) => {
                        unsettled.settle();
                        return Ok(Some(Created {
                            path: actual,
                            before: at,
                            czxid: Some(czxid),
                            listing: None,
                            made_parents: parent_creations > 0,
                        }));
                    }
                    Ok(Found::None) => {
                        unsettled.settle();
                        break; // not applied: create again (same prefix is safe)
                    }
                    Ok(Found::Foreign(stale)) => {
                        unsettled.settle();
                        // Created by a session of ours that is gone: delete and start over.
                        if let Err(e) = delete_now_or_unawaited(
                            &self.client,
                            &stale,
                            &*self.retry,
                            Wait::Until(deadline),
                        ) {
                            log::warn!("deleting {stale}, left by a lost session: {e}");
                        }
                        if past(deadline, Instant::now()) {
                            return Ok(None); // no create past the deadline
                        }
                        prefix = protected_prefix();
                        break;
                    }
                    Err(again) if fate_unknown(again) => code = again, // still unknown
                    Err(other) => {
                        unsettled.settle();
                        self.delete_by_prefix_in_background(prefix);
                        return Err(Error::zk("get_children", self.base_path.clone(), other));
                    }
                }
            }
        }
    }

    /// The create (with its `Stat`) and, behind it in the same pipeline, the listing of the
    /// lock directory. The create's error is the result; the listing's is the wait loop's to
    /// handle (a reply of the wrong shape is `None`: it lists again). A backend without
    /// create2 gets the plain create alone.
    async fn create_and_list(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        prefix: &str,
    ) -> std::result::Result<CreatedReply, ZkError> {
        if !self.client.has_create2() {
            return Ok((self.client.create(path, data, mode)?, None, None));
        }
        let requests = vec![
            Submission::new(Request::Create {
                path: path.to_string(),
                data: data.to_vec(),
                mode,
            }),
            Submission::new(Request::GetChildren {
                path: self.base_path.clone(),
            }),
        ];
        let abandoned = Some(self.abandoned_create(prefix));
        let answers = awaits::submit_abandoning(&self.client, requests, abandoned).await;
        let mut replies = answers.into_iter();
        // A backend that answers with the wrong shape is treated as an undecodable reply:
        // outcome unknown, so the create goes through the look-up, never a blind retry.
        let (actual, stat) = match replies.next() {
            Some(Ok(Response::Create(actual, stat))) => (actual, stat),
            Some(Err(code)) => return Err(code),
            _ => return Err(ZkError::MarshallingError),
        };
        let listing = match replies.next() {
            Some(Ok(Response::GetChildren(children))) => Some(Ok(children)),
            Some(Err(code)) => Some(Err(code)),
            _ => None,
        };
        Ok((actual, Some(stat.czxid), listing))
    }

    /// What becomes of a create whose answer nobody takes (its future dropped, or its wait
    /// past the deadline): the node it made is deleted; when its outcome is unknown, it is
    /// looked for by its prefix; both in the background, from the thread the answer comes on.
    fn abandoned_create(&self, prefix: &str) -> Abandoned {
        let client = Arc::downgrade(&self.client);
        let losses = self.client.session().snapshot().losses;
        let look_up = self.prefix_look_up(prefix.to_string());
        Box::new(move |answers| match answers.into_iter().next() {
            Some(Ok(Response::Create(path, _))) => {
                log::info!("deleting {path}: its acquire went away before the create's answer");
                delete_in_background_from(client, losses, path);
            }
            Some(Err(code)) if !fate_unknown(code) => {} // refused: nothing made
            _ => retry_in_background_from(client, losses, look_up),
        })
    }

    fn node_path(&self, prefix: &str, kind: NodeKind) -> (String, CreateMode) {
        let lock_name = self.driver.lock_name();
        // `<base>/<prefix><lock name>[<sequence>]`, built in one allocation (once per attempt).
        let mut path =
            String::with_capacity(self.base_path.len() + 1 + prefix.len() + lock_name.len() + 11);
        path.push_str(&self.base_path);
        if !self.base_path.ends_with('/') {
            path.push('/');
        }
        path.push_str(prefix);
        path.push_str(lock_name);
        match kind {
            NodeKind::Sequential => (path, CreateMode::EphemeralSequential),
            NodeKind::WithSequence(seq) => {
                path.push_str(&paths::format_sequence(seq));
                (path, CreateMode::Ephemeral)
            }
        }
    }

    /// Creates every missing ancestor of the lock node (`base_path` included) as a container,
    /// with empty data, ignoring NodeExists (another contender may create them concurrently).
    /// A failure names its request and path.
    async fn create_parents(&self) -> std::result::Result<(), (&'static str, String, ZkError)> {
        let mut missing = Vec::new();
        let mut at = Some(self.base_path.as_str());
        while let Some(p) = at.filter(|p| *p != "/") {
            let exists = Request::Exists {
                path: p.to_string(),
            };
            match self.one(exists).await {
                Ok(Response::Exists(Some(_))) => break,
                Ok(Response::Exists(None)) => missing.push(p.to_string()),
                Ok(_) => return Err(("exists", p.to_string(), ZkError::MarshallingError)),
                Err(code) => return Err(("exists", p.to_string(), code)),
            }
            at = paths::parent(p);
        }
        for p in missing.into_iter().rev() {
            let create = Request::Create {
                path: p.clone(),
                data: Vec::new(),
                mode: CreateMode::Container,
            };
            match self.one(create).await {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(code) => return Err(("create", p, code)),
            }
        }
        Ok(())
    }

    /// One request, submitted, its answer awaited (as long as a blocking call waits).
    pub(super) async fn one(&self, request: Request) -> std::result::Result<Response, ZkError> {
        let answers = awaits::submit(&self.client, vec![Submission::new(request)]).await;
        answers
            .into_iter()
            .next()
            .unwrap_or(Err(ZkError::MarshallingError))
    }

    /// Looks for the child that a create with `prefix` may have made; it is ours when owned by
    /// `session` (the session we are in, as seen before the look-up).
    async fn find_ours(
        &self,
        prefix: &str,
        session: Option<i64>,
    ) -> std::result::Result<Found, ZkError> {
        let listing = Request::GetChildren {
            path: self.base_path.clone(),
        };
        let children = match self.one(listing).await {
            Ok(Response::GetChildren(c)) => c,
            Ok(_) => return Err(ZkError::MarshallingError),
            Err(ZkError::NoNode) => return Ok(Found::None),
            Err(code) => return Err(code),
        };
        let Some(name) = children.into_iter().find(|c| c.starts_with(prefix)) else {
            return Ok(Found::None);
        };
        let path = paths::join(&self.base_path, &name);
        // A listing can still show the node of a session that just expired (CURATOR-498):
        // adopt it only when our current session owns it.
        let exists = Request::Exists { path: path.clone() };
        match self.one(exists).await? {
            Response::Exists(None) => Ok(Found::None),
            Response::Exists(Some(stat)) if session.is_none_or(|id| id == stat.ephemeral_owner) => {
                Ok(Found::Ours(path, stat.czxid))
            }
            Response::Exists(Some(_)) => Ok(Found::Foreign(path)),
            _ => Err(ZkError::MarshallingError),
        }
    }

    /// After a create whose outcome stayed unknown: find the node by its prefix and delete it
    /// in the background, so it cannot block the queue (CURATOR-45).
    fn delete_by_prefix_in_background(&self, prefix: String) {
        retry_in_background(&self.client, self.prefix_look_up(prefix));
    }

    /// One try of the background look-up for the node of a create with `prefix`: true when
    /// done (none found, or deleted).
    fn prefix_look_up(&self, prefix: String) -> impl FnMut(&SharedClient) -> bool + Send + 'static {
        let (base_path, driver, retry): (String, Arc<dyn LockDriver>, Arc<dyn RetryPolicy>) = (
            self.base_path.clone(),
            self.driver.clone(),
            self.retry.clone(),
        );
        move |client| {
            let this = LockInternals::new(
                client.clone(),
                base_path.clone(),
                driver.clone(),
                retry.clone(),
            );
            let session = client.session().session_id();
            let found = crate::primitives::block_on::block_on(this.find_ours(&prefix, session));
            match found {
                Ok(Found::None) => true,
                Ok(Found::Ours(p, _)) | Ok(Found::Foreign(p)) => {
                    !matches!(try_delete(client, &p), Ok(Some(_)))
                }
                Err(code) => !fate_unknown(code),
            }
        }
    }
}

/// A create whose node may exist though nobody holds it yet: from the create until the node
/// is handed on (or known not made). Dropped unsettled (its operation went away: a future
/// dropped, a panic), the node is looked for by its prefix and deleted in the background.
struct Unsettled<'a> {
    internals: &'a LockInternals,
    prefix: Option<String>,
    losses: u64,
}

impl<'a> Unsettled<'a> {
    fn new(internals: &'a LockInternals, prefix: &str, losses: u64) -> Unsettled<'a> {
        Unsettled {
            internals,
            prefix: Some(prefix.to_string()),
            losses,
        }
    }

    /// The node is handed on, or known not made, or its look-up left to the background.
    fn settle(&mut self) {
        self.prefix = None;
    }
}

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if let Some(prefix) = self.prefix.take() {
            let client = Arc::downgrade(self.internals.client());
            let look_up = self.internals.prefix_look_up(prefix);
            retry_in_background_from(client, self.losses, look_up);
        }
    }
}
