//! ACLs for the nodes a client creates, and the per-client [`AclProvider`] that picks them.
//!
//! A client applies its provider to every node it creates — lock directories (containers),
//! lock nodes, a chroot — so the recipes need no change, as with Curator's
//! `CuratorFrameworkFactory.builder().aclProvider(...)`.
//!
//! ZooKeeper checks a delete against the **parent's** ACL and a create against the parent's
//! `CREATE` permission: a lock is only protected when its directory is too. A provider
//! therefore gives the directories the same ACL as the nodes (the built-in ones do), and
//! waiters of the same identity keep `READ` on the directory to list the queue. A directory
//! that already exists keeps its own ACL: with any provider but [`AclProvider::open`] the
//! recipes check it, and the nodes above it that govern its creation and deletion, once per
//! lock object ([`AclProvider::guards_directories`], [`AclProvider::open_to_others`]).
//!
//! ```
//! use zk_locks::client::acl::{perms, Acl, AclProvider};
//! let creator_all = AclProvider::creator_all();
//! assert_eq!(creator_all.acl_for_path("/locks/a"), vec![Acl::creator(perms::ALL)]);
//! let custom = AclProvider::per_path(|path: &str| {
//!     if path.starts_with("/public") {
//!         vec![Acl::world(perms::ALL)]
//!     } else {
//!         vec![Acl::creator(perms::ALL), Acl::world(perms::READ)]
//!     }
//! });
//! assert_eq!(custom.acl_for_path("/public/x"), vec![Acl::world(perms::ALL)]);
//! // A named digest identity, as ZooKeeper derives it (`digest` module).
//! let billing = Acl::digest(perms::ALL, "billing", "s3cret");
//! assert_eq!(billing.id, zk_locks::client::acl::digest_id("billing", "s3cret"));
//! ```

mod digest;

use std::fmt;
use std::sync::Arc;

use crate::client::ZkError;

pub use digest::digest_id;
pub(crate) use digest::id_of_credentials;

/// ZooKeeper's permission bits (`ZooDefs.Perms`).
pub mod perms {
    /// getData, getChildren, exists.
    pub const READ: i32 = 1;
    /// setData.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// setACL.
    pub const ADMIN: i32 = 16;
    /// Every permission.
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// One ACL entry: permissions granted to an identity (`scheme:id`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// Bitwise or of [`perms`].
    pub perms: i32,
    /// `world`, `auth`, `digest`, `ip`, `x509`, `sasl`, ...
    pub scheme: String,
    /// The identity within the scheme (`anyone` for `world`, `user:base64(sha1)` for digest).
    pub id: String,
}

impl Acl {
    /// An entry of any scheme.
    pub fn new(perms: i32, scheme: impl Into<String>, id: impl Into<String>) -> Acl {
        Acl {
            perms,
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    /// `world:anyone`: everybody, authenticated or not.
    pub fn world(perms: i32) -> Acl {
        Acl::new(perms, "world", "anyone")
    }

    /// `auth:`: every identity the creating session authenticated with (Curator's
    /// `CREATOR_ALL_ACL` is this with [`perms::ALL`]). A session without credentials cannot
    /// create a node with it (`InvalidAcl`).
    pub fn creator(perms: i32) -> Acl {
        Acl::new(perms, "auth", "")
    }

    /// `digest:user:base64(sha1(user:password))`: whoever authenticates with these digest
    /// credentials (ZooKeeper's `DigestAuthenticationProvider.generateDigest`; see
    /// [`digest_id`]).
    pub fn digest(perms: i32, user: &str, password: &str) -> Acl {
        Acl::new(perms, "digest", digest_id(user, password))
    }
}

/// The permissions a client needs on every node it creates: `READ` to list and read the
/// queue, `CREATE` to queue in a directory, `DELETE` to release from it.
pub const SELF_REQUIRED: i32 = perms::READ | perms::CREATE | perms::DELETE;

type AclFn = dyn Fn(&str) -> Vec<Acl> + Send + Sync;

/// Chooses the ACL of each node a client creates (by the node's client path, before any
/// sequence suffix). Cheap to clone.
#[derive(Clone)]
pub struct AclProvider {
    name: &'static str,
    acl_for: Arc<AclFn>,
    /// False once [`AclProvider::accept_unprotected_directories`] was called.
    guard_directories: bool,
}

impl AclProvider {
    /// Everybody may do everything (`world:anyone:cdrwa`, ZooKeeper's `OPEN_ACL_UNSAFE`): the
    /// default, compatible with peers that use no credentials.
    pub fn open() -> AclProvider {
        AclProvider {
            name: "open",
            acl_for: Arc::new(|_| vec![Acl::world(perms::ALL)]),
            guard_directories: true,
        }
    }

    /// Only the creator's identities may do anything (Curator's `CREATOR_ALL_ACL`). Needs
    /// credentials; peers sharing the lock must authenticate as the same user.
    ///
    /// The server grants *every* identity of the creating connection (ZooKeeper's `auth`
    /// scheme): over TLS with a client certificate, that certificate's identity too
    /// (`x509:CN=…`, its subject), so whoever holds the same certificate may delete the
    /// nodes as well.
    pub fn creator_all() -> AclProvider {
        AclProvider {
            name: "creator_all",
            acl_for: Arc::new(|_| vec![Acl::creator(perms::ALL)]),
            guard_directories: true,
        }
    }

    /// The creator may do everything, everybody else may only read (list the queue, read
    /// holders' data): strangers can watch but neither queue, delete nor overwrite.
    pub fn read_only_for_world() -> AclProvider {
        AclProvider {
            name: "read_only_for_world",
            acl_for: Arc::new(|_| vec![Acl::creator(perms::ALL), Acl::world(perms::READ)]),
            guard_directories: true,
        }
    }

    /// A custom list per path.
    pub fn per_path(acl_for: impl Fn(&str) -> Vec<Acl> + Send + Sync + 'static) -> AclProvider {
        AclProvider {
            name: "custom",
            acl_for: Arc::new(acl_for),
            guard_directories: true,
        }
    }

    /// Lets the recipes lock in a directory that already exists with an ACL letting others
    /// create or delete there (see [`AclProvider::guards_directories`]): the nodes this client
    /// creates still get the provider's ACL, but anyone the directory lets in may delete the
    /// holder's node and take the lock. For those who accept that (a directory shared with
    /// peers that use no ACL); the default refuses it with [`crate::Error::UnprotectedLock`].
    ///
    /// On the provider rather than on each recipe: the provider is what promises the
    /// protection, it travels with the client to every recipe (and to `zklock`), and one
    /// choice per deployment is what the opt-out is about.
    pub fn accept_unprotected_directories(mut self) -> AclProvider {
        self.guard_directories = false;
        self
    }

    /// Whether the recipes check, once per lock object before its first node is created, that
    /// the lock directory and every node above it that governs who may create or delete it
    /// grant no one else `CREATE` or `DELETE` ([`AclProvider::open_to_others`]): true for
    /// every provider but [`AclProvider::open`], unless
    /// [`AclProvider::accept_unprotected_directories`] was called.
    pub fn guards_directories(&self) -> bool {
        !self.is_open() && self.guard_directories
    }

    /// The entries of `acl` (the ACL the server holds for the node at `path`) that let an
    /// identity other than this client's create or delete children there: `world:anyone`, a
    /// `digest` other than the client's own (`own_digest_ids`, see [`digest_id`]), `ip`. An
    /// entry this provider itself gives a node at `path` (same scheme and id, at least those
    /// permissions) is intended and passes. Entries of schemes the client cannot evaluate
    /// (`x509`, `sasl`, ...) pass: they may be the client's own identity (`auth` ACLs created
    /// over TLS with a client certificate name that certificate, `x509:CN=…`).
    pub fn open_to_others<'a>(
        &self,
        path: &str,
        acl: &'a [Acl],
        own_digest_ids: &[String],
    ) -> Vec<&'a Acl> {
        const GUARDED: i32 = perms::CREATE | perms::DELETE;
        let intended = self.acl_for_path(path);
        acl.iter()
            .filter(|entry| {
                let risky = entry.perms & GUARDED;
                if risky == 0 {
                    return false;
                }
                let others = match entry.scheme.as_str() {
                    "world" | "ip" => true,
                    "digest" => !own_digest_ids.contains(&entry.id),
                    _ => false,
                };
                others
                    && !intended.iter().any(|i| {
                        i.scheme == entry.scheme && i.id == entry.id && i.perms & risky == risky
                    })
            })
            .collect()
    }

    /// The ACL for a node about to be created at `path`.
    pub fn acl_for_path(&self, path: &str) -> Vec<Acl> {
        (self.acl_for)(path)
    }

    /// True for [`AclProvider::open`].
    pub fn is_open(&self) -> bool {
        self.name == "open"
    }

    /// The ACL for a node that a client with credentials `auth` creates at `path`
    /// (`world:anyone:cdrwa` when open), refused with `InvalidAcl` when it would lock that
    /// client out ([`check_self_access`]).
    pub(crate) fn checked_acl_for(
        &self,
        path: &str,
        auth: &[(String, Vec<u8>)],
    ) -> Result<Vec<Acl>, ZkError> {
        if self.is_open() {
            return Ok(vec![Acl::world(perms::ALL)]);
        }
        let acl = self.acl_for_path(path);
        check_self_access(&acl, auth)?;
        Ok(acl)
    }
}

impl Default for AclProvider {
    fn default() -> AclProvider {
        AclProvider::open()
    }
}

impl fmt::Debug for AclProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.guard_directories {
            true => write!(f, "AclProvider({})", self.name),
            false => write!(
                f,
                "AclProvider({}, unprotected directories accepted)",
                self.name
            ),
        }
    }
}

/// `scheme:id:perms`, as ZooKeeper's CLI prints an entry (`world:anyone:cdrwa`).
impl fmt::Display for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letters: String = [
            (perms::CREATE, 'c'),
            (perms::DELETE, 'd'),
            (perms::READ, 'r'),
            (perms::WRITE, 'w'),
            (perms::ADMIN, 'a'),
        ]
        .iter()
        .filter(|(bit, _)| self.perms & bit != 0)
        .map(|(_, c)| *c)
        .collect();
        write!(f, "{}:{}:{letters}", self.scheme, self.id)
    }
}

impl PartialEq for AclProvider {
    fn eq(&self, other: &AclProvider) -> bool {
        self.name == other.name
            && self.guard_directories == other.guard_directories
            && (self.name != "custom" || Arc::ptr_eq(&self.acl_for, &other.acl_for))
    }
}

impl Eq for AclProvider {}

/// The `digest` ids of a client's `(scheme, credentials)` list.
pub(crate) fn own_digest_ids(auth: &[(String, Vec<u8>)]) -> Vec<String> {
    auth.iter()
        .filter(|(scheme, _)| scheme == "digest")
        .map(|(_, credentials)| digest::id_of_credentials(credentials))
        .collect()
}

/// Refuses, before anything is sent, an ACL that would lock its creator out: one that is empty,
/// uses `auth` without credentials, or grants none of this client's identities
/// [`SELF_REQUIRED`]. `auth` is the client's `(scheme, credentials)` list.
///
/// `world`, `auth` and `digest` entries are evaluated here (a `digest` id is compared with the
/// ids of our digest credentials, [`digest_id`]): a digest of another user or another password
/// grants us nothing. Entries of schemes the client cannot evaluate (`ip`, `x509`, `sasl`) are
/// left to the server: the check only refuses what it knows to be a lock-out.
pub fn check_self_access(acl: &[Acl], auth: &[(String, Vec<u8>)]) -> Result<(), ZkError> {
    check_self_access_of(acl, !auth.is_empty(), &own_digest_ids(auth))
}

/// [`check_self_access`] for a client that has credentials or not (`has_credentials`) and
/// whose digest ids are `own_digest_ids`.
pub(crate) fn check_self_access_of(
    acl: &[Acl],
    has_credentials: bool,
    own_digest_ids: &[String],
) -> Result<(), ZkError> {
    let mut granted = 0;
    let mut undecidable = false;
    for entry in acl {
        match (entry.scheme.as_str(), entry.id.as_str()) {
            ("world", "anyone") => granted |= entry.perms,
            ("auth", _) if !has_credentials => return Err(ZkError::InvalidAcl),
            ("auth", _) => granted |= entry.perms,
            ("digest", id) if own_digest_ids.iter().any(|ours| ours == id) => {
                granted |= entry.perms
            }
            ("digest", _) => {}
            _ => undecidable = true,
        }
    }
    if acl.is_empty() || (granted & SELF_REQUIRED != SELF_REQUIRED && !undecidable) {
        return Err(ZkError::InvalidAcl);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(user: &str) -> Vec<(String, Vec<u8>)> {
        vec![("digest".into(), format!("{user}:pw").into_bytes())]
    }

    #[test]
    fn lock_outs_are_refused_and_workable_acls_pass() {
        let none: Vec<(String, Vec<u8>)> = Vec::new();
        assert_eq!(
            check_self_access(&[], &digest("a")),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            check_self_access(&[Acl::creator(perms::ALL)], &none),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            check_self_access(&[Acl::world(perms::READ)], &none),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            check_self_access(&[Acl::creator(perms::READ | perms::WRITE)], &digest("a")),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            check_self_access(&[Acl::new(perms::ALL, "digest", "b:xyz=")], &digest("a")),
            Err(ZkError::InvalidAcl),
            "another user's digest"
        );
        assert_eq!(
            check_self_access(&[Acl::digest(perms::ALL, "a", "other-pw")], &digest("a")),
            Err(ZkError::InvalidAcl),
            "our user with another password is another identity"
        );
        assert_eq!(
            check_self_access(&[Acl::digest(perms::READ, "a", "pw")], &digest("a")),
            Err(ZkError::InvalidAcl)
        );
        assert_eq!(
            check_self_access(&[Acl::digest(perms::ALL, "a", "pw")], &digest("a")),
            Ok(())
        );
        assert_eq!(
            check_self_access(
                &[
                    Acl::digest(perms::READ | perms::CREATE, "a", "pw"),
                    Acl::digest(perms::DELETE, "b", "pw"),
                ],
                &[digest("a"), digest("b")].concat()
            ),
            Ok(()),
            "permissions add up over every identity of ours"
        );
        assert_eq!(
            check_self_access(&[Acl::new(perms::ALL, "ip", "10.0.0.1")], &digest("a")),
            Ok(()),
            "schemes the client cannot evaluate are left to the server"
        );
        assert_eq!(check_self_access(&[Acl::world(perms::ALL)], &none), Ok(()));
        for provider in [
            AclProvider::creator_all(),
            AclProvider::read_only_for_world(),
        ] {
            assert_eq!(
                check_self_access(&provider.acl_for_path("/x"), &digest("a")),
                Ok(())
            );
        }
    }

    #[test]
    fn entries_open_to_others_are_found_and_ours_or_intended_ones_pass() {
        let ours = vec![digest_id("app", "pw")];
        let creator_all = AclProvider::creator_all();
        let open = [Acl::world(perms::ALL)];
        assert_eq!(
            creator_all.open_to_others("/l", &open, &ours),
            vec![&open[0]]
        );
        assert_eq!(open[0].to_string(), "world:anyone:cdrwa");
        let mine = [
            Acl::digest(perms::ALL, "app", "pw"),
            Acl::world(perms::READ),
        ];
        assert!(creator_all.open_to_others("/l", &mine, &ours).is_empty());
        let foreign = [Acl::digest(perms::DELETE, "other", "pw")];
        assert_eq!(creator_all.open_to_others("/l", &foreign, &ours).len(), 1);
        let cert = [Acl::new(perms::ALL, "x509", "CN=client")];
        assert!(creator_all.open_to_others("/l", &cert, &ours).is_empty());
        let shared = AclProvider::per_path(|_| {
            vec![
                Acl::creator(perms::ALL),
                Acl::new(perms::ALL, "ip", "10.0.0.1"),
            ]
        });
        let intended = [Acl::new(perms::CREATE, "ip", "10.0.0.1")];
        assert!(shared.open_to_others("/l", &intended, &ours).is_empty());
        assert!(AclProvider::creator_all().guards_directories());
        assert!(!AclProvider::open().guards_directories());
        assert!(!AclProvider::creator_all()
            .accept_unprotected_directories()
            .guards_directories());
    }

    #[test]
    fn providers_compare_by_kind_and_custom_by_identity() {
        assert_eq!(AclProvider::default(), AclProvider::open());
        assert_ne!(AclProvider::open(), AclProvider::creator_all());
        let custom = AclProvider::per_path(|_| vec![Acl::world(perms::ALL)]);
        assert_eq!(custom, custom.clone());
        assert_ne!(
            custom,
            AclProvider::per_path(|_| vec![Acl::world(perms::ALL)])
        );
    }
}
