//! `zklock holders`: lists a lock's participants in queue order, recognising the recipe
//! (mutex, read/write lock, semaphore) from Curator's node layout.

use zk_locks::locks::{standard_sort_key, READ_LOCK_NAME, WRITE_LOCK_NAME};
use zk_locks::{Error, ZkError};

use crate::cli::HoldersArgs;
use crate::connecting::{connect, not_allowed};
use crate::exit;

/// One participant as `holders` prints it.
struct Participant {
    name: String,
    kind: &'static str,
    holder: bool,
}

pub(crate) fn holders(args: &HoldersArgs) -> i32 {
    let client = match connect(&args.connect, args.session_timeout, &args.security) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zklock: {e}");
            return exit::UNAVAILABLE;
        }
    };
    let code = match list_participants(client.as_ref(), &args.path, args.semaphore) {
        Ok((dir, participants)) => {
            for p in participants {
                let data = match zk_locks::ZkClient::get_data(
                    client.as_ref(),
                    &format!("{dir}/{}", p.name),
                    None,
                ) {
                    Ok((data, _)) => String::from_utf8_lossy(&data).into_owned(),
                    // Gone since the listing: it is no longer a participant.
                    Err(ZkError::NoNode) => continue,
                    Err(code) => format!("(unreadable: {code})"),
                };
                let state = if p.holder { "holder" } else { "waiting" };
                println!("{state:<8} {:<9} {}  {}", p.kind, p.name, data.trim_end());
            }
            0
        }
        Err(e) if not_allowed(&e) => {
            eprintln!("zklock: not allowed to look at {}: {e}", args.path);
            exit::UNAVAILABLE
        }
        Err(e) => {
            eprintln!("zklock: cannot list {}: {e}", args.path);
            exit::LOCK_ERROR
        }
    };
    zk_locks::ZkClient::close(client.as_ref());
    code
}

fn children(client: &dyn zk_locks::ZkClient, path: &str) -> Result<Vec<String>, Error> {
    match client.get_children(path, None) {
        Ok(c) => Ok(c),
        Err(ZkError::NoNode) => Ok(Vec::new()),
        Err(code) => Err(Error::zk("get_children", path, code)),
    }
}

/// The participants of the lock at `path` in queue order, and the directory holding them.
/// The recipe is recognised from the node names (Curator's layout): a semaphore has `leases`
/// (and `locks`), a read/write lock `__READ__`/`__WRIT__` nodes, a mutex `lock-` nodes.
fn list_participants(
    client: &dyn zk_locks::ZkClient,
    path: &str,
    semaphore: Option<usize>,
) -> Result<(String, Vec<Participant>), Error> {
    let mut names = children(client, path)?;
    if semaphore.is_some() || names.iter().any(|n| n == "leases") {
        let dir = format!("{path}/leases");
        let mut leases = children(client, &dir)?;
        leases.sort_by(|a, b| standard_sort_key(a, "lease-").cmp(standard_sort_key(b, "lease-")));
        // Without the maximum every lease node counts as held; with it, a node past the maximum
        // is the one lease waiting for room.
        let max = semaphore.unwrap_or(usize::MAX);
        let participants = leases
            .into_iter()
            .enumerate()
            .map(|(i, name)| Participant {
                name,
                kind: "lease",
                holder: i < max,
            })
            .collect();
        return Ok((dir, participants));
    }
    let rw = names
        .iter()
        .any(|n| n.contains(READ_LOCK_NAME) || n.contains(WRITE_LOCK_NAME));
    if rw {
        let key = |n: &str| -> String {
            standard_sort_key(standard_sort_key(n, READ_LOCK_NAME), WRITE_LOCK_NAME).to_string()
        };
        names.sort_by_key(|n| key(n));
        // A writer holds at the head; a reader when no writer is ahead of it. A downgrading
        // writer's read node shares the write node's sequence: both hold, in either order.
        let head_key = names.first().map(|n| key(n));
        let mut first_writer_key: Option<String> = None;
        let participants = names
            .into_iter()
            .map(|name| {
                let writer = name.contains(WRITE_LOCK_NAME);
                let k = key(&name);
                let holder = if writer {
                    head_key.as_deref() == Some(k.as_str())
                } else {
                    first_writer_key.as_deref().is_none_or(|w| k.as_str() <= w)
                };
                if writer && first_writer_key.is_none() {
                    first_writer_key = Some(k);
                }
                Participant {
                    kind: if writer { "write" } else { "read" },
                    name,
                    holder,
                }
            })
            .collect();
        return Ok((path.to_string(), participants));
    }
    names.sort_by(|a, b| standard_sort_key(a, "lock-").cmp(standard_sort_key(b, "lock-")));
    let participants = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| Participant {
            name,
            kind: "mutex",
            holder: i == 0,
        })
        .collect();
    Ok((path.to_string(), participants))
}
