//! Security in the model: [`MemoryOptions`] (a client's credentials and ACL provider), the
//! identities each client authenticated as, and the server's ACL rules — the ACL given to a
//! create made concrete (`fixupACL`), and the permission check (`checkACL`).
//!
//! Modelled as ZooKeeper 3.8 does it, for the schemes `world` (`anyone`), `auth` (every
//! identity of the creating client) and `digest` (`user:base64(sha1(user:password))`): create
//! needs `CREATE` on the parent, delete `DELETE` on the parent, set_data `WRITE`, get_data and
//! get_children `READ` on the node; `exists` is not checked. There is no super user. Other
//! schemes (`ip`, `x509`, `sasl`) cannot be evaluated here: an ACL naming one is refused with
//! `InvalidAcl`, never treated as open, and so are credentials of a scheme other than `digest`
//! (`AuthFailed`, as a server without that provider answers).

use super::tree::ServerState;
use crate::client::acl::{id_of_credentials, perms, Acl, AclProvider};
use crate::client::{ZkError, ZkResult};

/// A client's credentials and ACL provider, for
/// [`MemoryEnsemble::connect_with`](super::MemoryEnsemble::connect_with), as
/// [`NativeOptions`](crate::client::native::NativeOptions) has them for a real ensemble.
///
/// ```
/// use zk_locks::client::acl::AclProvider;
/// use zk_locks::client::memory::{MemoryEnsemble, MemoryOptions};
/// use zk_locks::{CreateMode, ZkClient, ZkError};
///
/// let ensemble = MemoryEnsemble::new();
/// let owner = ensemble.connect_with(
///     MemoryOptions::new()
///         .digest_auth("app", "secret")
///         .acl_provider(AclProvider::creator_all()),
/// )?;
/// owner.create("/locked", b"", CreateMode::Persistent)?;
/// let stranger = ensemble.connect();
/// assert_eq!(stranger.get_data("/locked", None), Err(ZkError::NoAuth));
/// # Ok::<(), zk_locks::ZkError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MemoryOptions {
    /// `(scheme, credentials)` pairs the client authenticates with.
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    /// The ACL of every node the client creates (default [`AclProvider::open`]).
    pub(crate) acl: AclProvider,
    /// The observer every lock recipe made on this client reports to (set with
    /// [`MemoryOptions::lock_observer()`]; default: none).
    pub(crate) lock_observer: crate::primitives::observer::ObserverSlot,
}

impl std::fmt::Debug for MemoryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryOptions")
            .field(
                "auth_schemes",
                &self.auth.iter().map(|a| &a.0).collect::<Vec<_>>(),
            )
            .field("acl", &self.acl)
            .field("lock_observer", &self.lock_observer)
            .finish()
    }
}

impl MemoryOptions {
    /// No credentials, the open ACL.
    pub fn new() -> MemoryOptions {
        MemoryOptions::default()
    }

    /// Adds `digest` credentials (`user:password`).
    pub fn digest_auth(mut self, user: &str, password: &str) -> MemoryOptions {
        self.auth
            .push(("digest".into(), format!("{user}:{password}").into_bytes()));
        self
    }

    /// Adds credentials of any scheme (only `digest` is accepted by the model).
    pub fn auth(mut self, scheme: &str, credentials: &[u8]) -> MemoryOptions {
        self.auth.push((scheme.into(), credentials.to_vec()));
        self
    }

    /// Sets the ACL provider applied to every node the client creates. An ACL that would not
    /// grant this client `READ`, `CREATE` and `DELETE` is refused with
    /// [`ZkError::InvalidAcl`] before the request reaches the model.
    pub fn acl_provider(mut self, provider: AclProvider) -> MemoryOptions {
        self.acl = provider;
        self
    }

    /// Sets the observer every lock recipe made on this client reports its events to (a
    /// recipe's own `with_observer` replaces it for that recipe).
    pub fn lock_observer(
        mut self,
        observer: std::sync::Arc<dyn crate::primitives::observer::LockObserver>,
    ) -> MemoryOptions {
        self.lock_observer = crate::primitives::observer::ObserverSlot(Some(observer));
        self
    }

    /// The identities the model's server grants for these credentials (`AuthFailed` for a
    /// scheme it has no provider for).
    pub(super) fn identities(&self) -> ZkResult<Vec<Identity>> {
        self.auth
            .iter()
            .map(|(scheme, credentials)| match scheme.as_str() {
                "digest" => Ok(Identity {
                    scheme: "digest".into(),
                    id: id_of_credentials(credentials),
                }),
                _ => Err(ZkError::AuthFailed),
            })
            .collect()
    }
}

/// One identity a client authenticated as (`scheme:id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Identity {
    pub(super) scheme: String,
    pub(super) id: String,
}

/// The ACL stored for a create (ZooKeeper's `fixupACL`): `auth` entries become one entry per
/// identity of the client; an empty list, `auth` without identities, a malformed `digest` id,
/// `world` with another id than `anyone`, or a scheme the model cannot evaluate is
/// `InvalidAcl`.
pub(super) fn fixup(acl: &[Acl], identities: &[Identity]) -> ZkResult<Vec<Acl>> {
    if acl.is_empty() {
        return Err(ZkError::InvalidAcl);
    }
    let mut out: Vec<Acl> = Vec::new();
    let mut push = |entry: Acl| {
        if !out.contains(&entry) {
            out.push(entry);
        }
    };
    for entry in acl {
        match entry.scheme.as_str() {
            "world" if entry.id == "anyone" => push(entry.clone()),
            "auth" if identities.is_empty() => return Err(ZkError::InvalidAcl),
            "auth" => {
                for identity in identities {
                    push(Acl::new(entry.perms, &identity.scheme, &identity.id));
                }
            }
            "digest" if entry.id.matches(':').count() == 1 => push(entry.clone()),
            _ => return Err(ZkError::InvalidAcl),
        }
    }
    Ok(out)
}

/// ZooKeeper's `checkACL`: `perm` is granted when an entry with that bit names `world:anyone`
/// or one of the client's identities.
pub(super) fn check(acl: &[Acl], identities: &[Identity], perm: i32) -> ZkResult<()> {
    let granted = acl.iter().any(|entry| {
        entry.perms & perm != 0
            && ((entry.scheme == "world" && entry.id == "anyone")
                || identities
                    .iter()
                    .any(|i| i.scheme == entry.scheme && i.id == entry.id))
    });
    if granted {
        Ok(())
    } else {
        Err(ZkError::NoAuth)
    }
}

/// `world:anyone:cdrwa`, the ACL of nodes created without one and of the initial tree.
pub(super) fn open() -> Vec<Acl> {
    vec![Acl::world(perms::ALL)]
}

impl ServerState {
    /// The identities of the client owning `session` (none for an unknown session).
    pub(super) fn identities(&self, session: i64) -> &[Identity] {
        self.sessions
            .get(&session)
            .and_then(|s| self.clients.get(&s.client))
            .map_or(&[], |c| c.identities.as_slice())
    }

    /// Checks `perm` on the node at `path` for the client owning `session`.
    pub(super) fn check_acl(&self, session: i64, path: &str, perm: i32) -> ZkResult<()> {
        match self.nodes.get(path) {
            Some(node) => check(&node.acl, self.identities(session), perm),
            None => Err(ZkError::NoNode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Vec<Identity> {
        MemoryOptions::new()
            .digest_auth("app", "secret")
            .identities()
            .unwrap()
    }

    #[test]
    fn auth_becomes_the_clients_identities_and_bad_acls_are_invalid() {
        let fixed = fixup(&[Acl::creator(perms::ALL)], &me()).unwrap();
        assert_eq!(fixed, vec![Acl::digest(perms::ALL, "app", "secret")]);
        assert_eq!(
            fixup(&[Acl::creator(perms::ALL)], &[]),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(fixup(&[], &me()), Err(ZkError::InvalidAcl));
        assert_eq!(
            fixup(&[Acl::new(perms::ALL, "ip", "10.0.0.1")], &me()),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            fixup(&[Acl::new(perms::ALL, "world", "someone")], &me()),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            fixup(&[Acl::new(perms::ALL, "digest", "no-colon")], &me()),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            MemoryOptions::new().auth("sasl", b"x").identities(),
            Err(ZkError::AuthFailed)
        );
    }

    #[test]
    fn a_permission_needs_its_bit_on_an_entry_naming_us_or_anyone() {
        let acl = vec![
            Acl::digest(perms::ALL, "app", "secret"),
            Acl::world(perms::READ),
        ];
        assert_eq!(check(&acl, &me(), perms::DELETE), Ok(()));
        assert_eq!(check(&acl, &[], perms::READ), Ok(()));
        assert_eq!(check(&acl, &[], perms::DELETE), Err(ZkError::NoAuth));
        let other = MemoryOptions::new()
            .digest_auth("app", "guessed")
            .identities()
            .unwrap();
        assert_eq!(check(&acl, &other, perms::WRITE), Err(ZkError::NoAuth));
    }
}
