//! The lock directory's listing: read (submitted), sorted as every Curator client sorts it,
//! and cleared of late copies of our own node.

use std::time::Instant;

use crate::client::{Request, Response, ZkError};
use crate::error::{Error, Result};
use crate::paths;

use super::{is_protected, LockInternals, PROTECTED_PREFIX_LEN};
use crate::locks::cleanup;
use crate::locks::driver::sort_children;

impl LockInternals {
    /// Deletes every child other than `our_name` that carries our protection prefix: a copy made
    /// by a create whose reply we never got and that the server applied after our look-up
    /// (a client-side call timeout leaves the request queued). It would sit in the queue ahead
    /// of or behind us until our session ends. True when there was one. A delete that cannot
    /// complete by `deadline` goes on in the background, and so do the deletes after it (no
    /// more requests once the link is in trouble); the first failure is returned.
    pub(crate) fn delete_copies(
        &self,
        children: &[String],
        our_name: &str,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        if !is_protected(our_name) {
            return Ok(false);
        }
        let prefix = &our_name[..PROTECTED_PREFIX_LEN];
        let copies = children
            .iter()
            .filter(|c| c.starts_with(prefix) && *c != our_name)
            .map(|copy| paths::join(&self.base_path, copy))
            .collect::<Vec<_>>();
        let mark = cleanup::BackgroundMark::now();
        let failures = cleanup::give_back(&copies, deadline, mark, |path, wait| {
            log::info!("deleting {path}, a late copy of our node");
            cleanup::delete_now_or_unawaited(&self.client, path, &*self.retry, wait)
        });
        match failures.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(!copies.is_empty()),
        }
    }

    /// The children of the lock directory, sorted as every Curator client sorts them.
    /// A missing directory is an empty list (CURATOR-436: a reaped container).
    pub fn sorted_children(&self) -> std::result::Result<Vec<String>, ZkError> {
        self.sorted(self.client.get_children(&self.base_path, None))
    }

    /// The children of the lock directory (unsorted), submitted and awaited.
    pub(super) async fn list(&self) -> std::result::Result<Vec<String>, ZkError> {
        let listing = Request::GetChildren {
            path: self.base_path.clone(),
        };
        match self.one(listing).await? {
            Response::GetChildren(children) => Ok(children),
            _ => Err(ZkError::MarshallingError),
        }
    }

    /// A listing of the lock directory, sorted (missing: empty).
    pub(super) fn sorted(
        &self,
        listed: std::result::Result<Vec<String>, ZkError>,
    ) -> std::result::Result<Vec<String>, ZkError> {
        let mut children = match listed {
            Ok(c) => c,
            Err(ZkError::NoNode) => Vec::new(),
            Err(code) => return Err(code),
        };
        sort_children(self.driver.as_ref(), &mut children);
        Ok(children)
    }

    /// The sorted children as full paths (Curator's `getParticipantNodes`).
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        let children = self
            .sorted_children()
            .map_err(|code| Error::zk("get_children", self.base_path.clone(), code))?;
        Ok(children
            .iter()
            .map(|c| paths::join(&self.base_path, c))
            .collect())
    }
}
