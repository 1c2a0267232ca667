//! Credentials and ACLs on the crate: the crate sends `addAuth` only when asked and forgets it
//! on every reconnect (the server keeps credentials per connection), so this module sends a
//! client's credentials again before the first request on a handle whose link changed since
//! they were last sent, and turns the client's ACL provider into the crate's `Acl`s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ::zookeeper as zk;

use super::handle::Conn;
use crate::client::acl::{perms, Acl, AclProvider};
use crate::client::ZkResult;

/// A client's credentials and ACL provider.
#[derive(Clone, Default)]
pub(super) struct Security {
    pub(super) auth: Arc<Vec<(String, Vec<u8>)>>,
    pub(super) acl: AclProvider,
}

/// No credentials were sent on a handle yet.
pub(super) const NEVER: u64 = u64::MAX;

impl Security {
    /// Sends the credentials on `conn` unless they were sent since its last disconnect. Runs
    /// on a pool job right before the job's request, so on the same connection the server
    /// applies them first. (A link that drops and comes back between this check and the
    /// request still sends that one request without credentials: it is refused with `NoAuth`,
    /// which [`Self::unless_refused_by_a_new_link`] reports as the connection loss it is; the
    /// next request or the supervisor's probe authenticates again.)
    pub(super) fn authenticate(&self, conn: &Conn, authed_at: &AtomicU64) -> zk::ZkResult<()> {
        if self.auth.is_empty() {
            return Ok(());
        }
        let link = conn.signals.disconnects.load(Ordering::SeqCst);
        if authed_at.load(Ordering::SeqCst) == link {
            return Ok(());
        }
        for (scheme, credentials) in self.auth.iter() {
            conn.zk.add_auth(scheme, credentials.clone())?;
        }
        authed_at.store(link, Ordering::SeqCst);
        Ok(())
    }

    /// `result` of a request sent on `conn` right after [`Self::authenticate`], with a `NoAuth`
    /// that a link change explains turned into a connection loss (see [`refused_by_a_new_link`]).
    pub(super) fn unless_refused_by_a_new_link<T>(
        &self,
        conn: &Conn,
        result: zk::ZkResult<T>,
    ) -> zk::ZkResult<T> {
        let changed = || {
            conn.authed_at.load(Ordering::SeqCst) != conn.signals.disconnects.load(Ordering::SeqCst)
        };
        refused_by_a_new_link(!self.auth.is_empty(), changed, result)
    }

    /// The crate's ACL for a node created at the client path `path` (see
    /// [`AclProvider::checked_acl_for`]).
    pub(super) fn acl_for(&self, path: &str) -> ZkResult<Vec<zk::Acl>> {
        Ok(self
            .acl
            .checked_acl_for(path, &self.auth)?
            .iter()
            .map(to_crate)
            .collect())
    }
}

/// A request of a client with credentials answered `NoAuth` after its link changed since the
/// credentials were last sent (`link_changed`) went out on a new connection before they were
/// sent there again: the server refused it (nothing was applied) for want of credentials it
/// will have at the next try. That says nothing about the client's rights, so it is reported
/// as the connection loss it comes from, which callers retry (authenticated again first).
fn refused_by_a_new_link<T>(
    has_credentials: bool,
    link_changed: impl FnOnce() -> bool,
    result: zk::ZkResult<T>,
) -> zk::ZkResult<T> {
    match result {
        Err(zk::ZkError::NoAuth) if has_credentials && link_changed() => {
            Err(zk::ZkError::ConnectionLoss)
        }
        other => other,
    }
}

/// Our permission bits and the crate's, one for one.
const PERMISSIONS: [(i32, zk::Permission); 5] = [
    (perms::READ, zk::Permission::READ),
    (perms::WRITE, zk::Permission::WRITE),
    (perms::CREATE, zk::Permission::CREATE),
    (perms::DELETE, zk::Permission::DELETE),
    (perms::ADMIN, zk::Permission::ADMIN),
];

/// An entry the crate read (getACL) as this library's.
pub(super) fn from_crate(acl: &zk::Acl) -> Acl {
    let perms = PERMISSIONS
        .iter()
        .filter(|(_, p)| acl.perms.can(*p))
        .fold(0, |all, (bit, _)| all | bit);
    Acl::new(perms, acl.scheme.clone(), acl.id.clone())
}

fn to_crate(acl: &Acl) -> zk::Acl {
    let permission = PERMISSIONS
        .iter()
        .filter(|(bit, _)| acl.perms & bit != 0)
        .fold(zk::Permission::NONE, |all, (_, p)| all | *p);
    zk::Acl::new(permission, acl.scheme.clone(), acl.id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_auth_after_a_link_change_is_a_connection_loss_only_for_a_client_with_credentials() {
        let refused = || Err::<(), _>(zk::ZkError::NoAuth);
        assert_eq!(
            refused_by_a_new_link(true, || true, refused()),
            Err(zk::ZkError::ConnectionLoss)
        );
        // The same link the credentials went on: the server means it.
        assert_eq!(
            refused_by_a_new_link(true, || false, refused()),
            Err(zk::ZkError::NoAuth)
        );
        // No credentials: nothing a new link would change.
        assert_eq!(
            refused_by_a_new_link(false, || true, refused()),
            Err(zk::ZkError::NoAuth)
        );
        assert_eq!(refused_by_a_new_link(true, || true, Ok(7)), Ok(7));
    }

    #[test]
    fn permissions_and_ids_carry_over() {
        let acl = to_crate(&Acl::new(perms::READ | perms::DELETE, "digest", "a:b="));
        assert_eq!(acl.perms, zk::Permission::READ | zk::Permission::DELETE);
        assert_eq!((acl.scheme.as_str(), acl.id.as_str()), ("digest", "a:b="));
        assert_eq!(to_crate(&Acl::world(perms::ALL)).perms, zk::Permission::ALL);
    }
}
