//! Creating our lock node: Curator's protected names, the create and the listing sent in one
//! pipeline, the recovery look-up after a create with an unknown outcome (never a second
//! create), and missing parents created as containers.

use std::time::Instant;

use crate::client::{CreateMode, Request, Response, ZkError};
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::Retries;
use crate::session::SessionSnapshot;

use super::{delete_guaranteed, past, LockInternals, Resume, Wait};
use crate::locks::cleanup::{fate_unknown, retry_in_background, try_delete};

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
    pub(crate) fn create_protected(
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
            let mut code = match self.create_and_list(&path, data, mode) {
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
                    match self.create_parents() {
                        Ok(()) => continue,
                        // Parents are containers made idempotently (NodeExists is fine), so a
                        // failure with an unknown outcome is simply made again, under the
                        // retry policy and deadline, and does not count as an attempt.
                        Err((_, _, code)) if fate_unknown(code) => {
                            parent_creations -= 1;
                            match self.retry_when_connected(&mut retries) {
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
                ZkError::SessionExpired => match self.retry_when_connected(&mut retries) {
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
                },
                code => return Err(Error::zk("create", path, code)),
            }
            // The create may or may not have been applied. Look it up, and repeat the look-up,
            // never the create, while the outcome stays unknown (`SessionExpired` included: the
            // create may have run in a session the client had not reported yet, and the node
            // lives on there): a second node of ours would sit in the queue behind the first
            // and wait on it (CURATOR-45).
            loop {
                match self.retry_when_connected(&mut retries) {
                    Resume::Ready => {}
                    Resume::Deadline => {
                        self.delete_by_prefix_in_background(prefix);
                        return Ok(None);
                    }
                    Resume::Closed => return Err(Error::Closed),
                    Resume::Exhausted => {
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
                let found = self.find_ours(&prefix, at.session_id);
                // Answered past the deadline: no create again, and no listing; one delete of a
                // node found (a late copy of the create is looked for in the background).
                if found.is_ok() && past(deadline, Instant::now()) {
                    if let Ok(Found::Ours(path, _) | Found::Foreign(path)) = &found {
                        let wait = Wait::Until(deadline);
                        if let Err(e) = delete_guaranteed(&self.client, path, &*self.retry, wait) {
                            log::info!("deleting {path} after the deadline: {e}");
                        }
                    }
                    self.delete_by_prefix_in_background(prefix);
                    return Ok(None);
                }
                match found {
                    // Owned by the session `at` saw, so `at` is the snapshot "before" it.
                    Ok(Found::Ours(actual, czxid)) => {
                        return Ok(Some(Created {
                            path: actual,
                            before: at,
                            czxid: Some(czxid),
                            listing: None,
                            made_parents: parent_creations > 0,
                        }))
                    }
                    Ok(Found::None) => break, // not applied: create again (same prefix is safe)
                    Ok(Found::Foreign(stale)) => {
                        // Created by a session of ours that is gone: delete and start over.
                        if let Err(e) = delete_guaranteed(
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
    fn create_and_list(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> std::result::Result<CreatedReply, ZkError> {
        if !self.client.has_create2() {
            return Ok((self.client.create(path, data, mode)?, None, None));
        }
        let requests = [
            Request::Create {
                path: path.to_string(),
                data: data.to_vec(),
                mode,
            },
            Request::GetChildren {
                path: self.base_path.clone(),
            },
        ];
        let mut replies = self.client.pipeline(&requests).into_iter();
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
    fn create_parents(&self) -> std::result::Result<(), (&'static str, String, ZkError)> {
        let mut missing = Vec::new();
        let mut at = Some(self.base_path.as_str());
        while let Some(p) = at.filter(|p| *p != "/") {
            match self.client.exists(p) {
                Ok(Some(_)) => break,
                Ok(None) => missing.push(p.to_string()),
                Err(code) => return Err(("exists", p.to_string(), code)),
            }
            at = paths::parent(p);
        }
        for p in missing.into_iter().rev() {
            match self.client.create(&p, &[], CreateMode::Container) {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(code) => return Err(("create", p, code)),
            }
        }
        Ok(())
    }

    /// Looks for the child that a create with `prefix` may have made; it is ours when owned by
    /// `session` (the session we are in, as seen before the look-up).
    fn find_ours(&self, prefix: &str, session: Option<i64>) -> std::result::Result<Found, ZkError> {
        let children = match self.client.get_children(&self.base_path, None) {
            Ok(c) => c,
            Err(ZkError::NoNode) => return Ok(Found::None),
            Err(code) => return Err(code),
        };
        let Some(name) = children.into_iter().find(|c| c.starts_with(prefix)) else {
            return Ok(Found::None);
        };
        let path = paths::join(&self.base_path, &name);
        // A listing can still show the node of a session that just expired (CURATOR-498):
        // adopt it only when our current session owns it.
        match self.client.exists(&path)? {
            None => Ok(Found::None),
            Some(stat) if session.is_none_or(|id| id == stat.ephemeral_owner) => {
                Ok(Found::Ours(path, stat.czxid))
            }
            Some(_) => Ok(Found::Foreign(path)),
        }
    }

    /// After a create whose outcome stayed unknown: find the node by its prefix and delete it
    /// in the background, so it cannot block the queue (CURATOR-45).
    fn delete_by_prefix_in_background(&self, prefix: String) {
        let (base_path, driver, retry) = (
            self.base_path.clone(),
            self.driver.clone(),
            self.retry.clone(),
        );
        retry_in_background(&self.client, move |client| {
            let this = LockInternals::new(
                client.clone(),
                base_path.clone(),
                driver.clone(),
                retry.clone(),
            );
            match this.find_ours(&prefix, client.session().session_id()) {
                Ok(Found::None) => true,
                Ok(Found::Ours(p, _)) | Ok(Found::Foreign(p)) => {
                    !matches!(try_delete(client, &p), Ok(Some(_)))
                }
                Err(code) => !fate_unknown(code),
            }
        });
    }
}
