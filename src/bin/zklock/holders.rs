//! `zklock holders`: prints a lock's participants in queue order, as the library lists them
//! (the recipe recognised by [`LockLayout`], the holders flagged by the recipe's own rule).

use zk_locks::locks::{
    InterProcessReadWriteLock, InterProcessSemaphoreV2, LockLayout, Participant,
};
use zk_locks::{Error, InterProcessMutex, SharedClient};

use crate::cli::HoldersArgs;
use crate::connecting::{connect, not_allowed};
use crate::exit;

pub(crate) fn holders(args: &HoldersArgs) -> i32 {
    let client: SharedClient = match connect(&args.connect, args.session_timeout, &args.security) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zklock: {e}");
            return exit::UNAVAILABLE;
        }
    };
    let code = match participants(&client, &args.path, args.semaphore) {
        Ok(participants) => {
            for p in participants {
                let state = if p.is_holder { "holder" } else { "waiting" };
                let data = String::from_utf8_lossy(&p.data);
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
    client.close();
    code
}

/// The participants of the lock at `path`. With `--semaphore N` it is a semaphore of N
/// leases; a semaphore of unknown maximum lists every lease as a holder.
fn participants(
    client: &SharedClient,
    path: &str,
    semaphore: Option<usize>,
) -> Result<Vec<Participant>, Error> {
    let layout = match semaphore {
        Some(_) => LockLayout::Semaphore,
        None => LockLayout::of_path(client.as_ref(), path)?,
    };
    let client = client.clone();
    match layout {
        LockLayout::Semaphore => {
            let max = semaphore.unwrap_or(usize::MAX);
            InterProcessSemaphoreV2::new(client, path, max)?.participants()
        }
        LockLayout::ReadWrite => InterProcessReadWriteLock::new(client, path)?.participants(),
        // A layout of a later version (the enum may grow) is listed as the mutex lists.
        _ => InterProcessMutex::new(client, path)?.participants(),
    }
}
