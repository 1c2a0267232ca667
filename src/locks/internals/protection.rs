//! The ACL guard of a lock directory: with an ACL provider that restricts access, a lock is
//! only protected when nobody else may create or delete in its directory, nor delete the
//! directory to make it again with an open ACL.
//!
//! ZooKeeper checks a create and a delete against the *parent's* ACL. The nodes that decide
//! who may take or break a lock at `D` are therefore `D` itself (who may queue in it, who may
//! delete a holder's node) and the node above it (who may delete `D` once empty and create
//! it again). A container is reaped once empty and can then be created again by whoever may
//! create in its parent, so the guard goes on upwards while the node it just read is a
//! container (or missing: it will be created by us, as a container), up to and including the
//! first node that is not one (the root last). Each of those must grant no identity but the
//! client's own `CREATE` or `DELETE`, except as the provider itself would grant it
//! ([`AclProvider::open_to_others`]).
//!
//! Checked once per lock object, before its first node is created; a failure (or an
//! unknown answer) is checked again at the next attempt, so fixing the ACL needs no restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::client::acl::{check_self_access_of, Acl, AclProvider};
use crate::client::ZkError;
use crate::error::{Error, Result};
use crate::paths;
use crate::retry::Retries;

use super::{LockInternals, Resume};

/// `ephemeralOwner` of a container node (ZooKeeper's `EphemeralType.CONTAINER_EPHEMERAL_OWNER`).
const CONTAINER_OWNER: i64 = i64::MIN;

/// Whether a lock object's directory was found protected (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct Protection {
    checked: AtomicBool,
}

impl LockInternals {
    /// Checks, once per lock object, that the lock directory and the nodes above it that govern
    /// who may create or delete it let nobody else in (see the module docs). Nothing to do
    /// with an open provider, or one that accepts unprotected directories. `Ok(false)`: the
    /// deadline passed while the answer was unknown.
    pub(crate) fn check_protection(
        &self,
        deadline: Option<Instant>,
        start: Instant,
    ) -> Result<bool> {
        if self.protection.checked.load(Ordering::SeqCst) {
            return Ok(true);
        }
        let provider = self.client.acl_provider();
        if !provider.guards_directories() {
            self.protection.checked.store(true, Ordering::SeqCst);
            return Ok(true);
        }
        let own = self.client.own_digest_ids();
        // An ACL that would lock us out is refused by the create itself (`InvalidAcl`, before
        // anything is sent): that error, about our own settings, comes first. (Credentials of
        // schemes other than digest are not seen here: such a client is checked as one
        // without credentials, which only changes which error comes first.)
        let ours = provider.acl_for_path(&self.base_path);
        if check_self_access_of(&ours, !own.is_empty(), &own).is_err() {
            return Ok(true);
        }
        let mut retries = Retries::new(self.retry.as_ref(), start, deadline);
        let mut at = Some(self.base_path.as_str());
        let mut first = true;
        while let Some(path) = at {
            let container = match self.client.get_acl(path) {
                Ok((acl, stat)) => {
                    refuse_if_open(&provider, &self.base_path, path, &acl, &own)?;
                    stat.ephemeral_owner == CONTAINER_OWNER
                }
                // Missing: we create it (a container), so the node above governs it.
                Err(ZkError::NoNode) => true,
                Err(code) if code.is_retryable() && code != ZkError::Unimplemented => {
                    match self.retry_when_connected(&mut retries) {
                        Resume::Ready => continue,
                        Resume::Deadline => return Ok(false),
                        Resume::Closed => return Err(Error::Closed),
                        Resume::Exhausted => return Err(Error::zk("get_acl", path, code)),
                    }
                }
                Err(code) => return Err(Error::zk("get_acl", path, code)),
            };
            // The directory's parent always counts (it governs the directory's deletion);
            // above it, only while the node below can vanish on its own.
            if !std::mem::take(&mut first) && !container {
                break;
            }
            at = paths::parent(path);
        }
        self.protection.checked.store(true, Ordering::SeqCst);
        Ok(true)
    }
}

fn refuse_if_open(
    provider: &AclProvider,
    lock: &str,
    path: &str,
    acl: &[Acl],
    own: &[String],
) -> Result<()> {
    if provider.open_to_others(path, acl, own).is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = acl.iter().map(Acl::to_string).collect();
    Err(Error::UnprotectedLock {
        lock: lock.to_string(),
        path: path.to_string(),
        acl: listed.join(", "),
    })
}
