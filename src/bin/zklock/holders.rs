//! `zklock holders`: prints a lock's participants in queue order, as the library lists them
//! (each node's recipe recognised by [`LockLayout::of_child`], each recipe's queue flagged by
//! its own rule),
//! as text or (`--json`) one JSON object per line, written here by hand: the library has no
//! JSON dependency and zklock needs none for a flat object of strings, numbers and booleans.

use zk_locks::locks::{
    InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch, LockLayout, Participant,
    ParticipantKind,
};
use zk_locks::{Error, InterProcessMutex, SharedClient, ZkError};

use crate::cli::HoldersArgs;
use crate::connecting::{connect, not_allowed};
use crate::exit;

pub(crate) fn holders(args: &HoldersArgs) -> i32 {
    let connected = connect(
        &args.connect,
        args.session_timeout,
        args.tick_time,
        args.connect_timeout,
        &args.security,
    );
    let client: SharedClient = match connected {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zklock: {e}");
            return exit::UNAVAILABLE;
        }
    };
    let code = match participants(&client, &args.path, args.semaphore) {
        Ok(participants) if participants.is_empty() => nobody(&client, &args.path),
        Ok(participants) => {
            for (position, p) in participants.iter().enumerate() {
                if args.json {
                    println!("{}", json_line(position, p));
                    continue;
                }
                let state = match (p.is_holder, p.kind) {
                    (true, ParticipantKind::Latch) => "leader",
                    (true, _) => "holder",
                    (false, _) => "waiting",
                };
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

/// Says on stderr that the lock at `path` has no participants, and whether its node exists
/// (one more request; a failure of it only leaves that detail out: a lock directory is a
/// container the server removes once empty, so a free lock often has none); the status a
/// script tests.
fn nobody(client: &SharedClient, path: &str) -> i32 {
    let why = match client.exists(path) {
        Ok(Some(_)) => ": the lock is free",
        Ok(None) => ": the lock is free (no node at that path)",
        Err(_) => "",
    };
    eprintln!("zklock: no participants in {path}{why}");
    exit::NO_PARTICIPANTS
}

/// The participants of the lock at `path`, each node listed by its own recipe (a directory
/// holding several kinds lists each kind's queue: mutex, read/write, semaphore). With
/// `--semaphore N` the semaphore has N leases; a semaphore of unknown maximum lists every
/// lease as a holder.
fn participants(
    client: &SharedClient,
    path: &str,
    semaphore: Option<usize>,
) -> Result<Vec<Participant>, Error> {
    zk_locks::paths::validate_path(path)?;
    let children = match client.get_children(path, None) {
        Ok(children) => children,
        Err(ZkError::NoNode) => Vec::new(),
        Err(code) => return Err(Error::zk("get_children", path, code)),
    };
    let mut kinds = LockLayout::all_of_children(&children);
    if semaphore.is_some() && !kinds.contains(&LockLayout::Semaphore) {
        kinds.push(LockLayout::Semaphore);
    }
    if kinds.is_empty() {
        kinds.push(LockLayout::Mutex);
    }
    let mut all = Vec::new();
    for kind in kinds {
        let client = client.clone();
        all.extend(match kind {
            LockLayout::Semaphore => {
                let max = semaphore.unwrap_or(usize::MAX);
                InterProcessSemaphoreV2::new(client, path, max)?.participants()?
            }
            LockLayout::ReadWrite => {
                InterProcessReadWriteLock::new(client, path)?.participants()?
            }
            // Looked at only: the latch is never started.
            LockLayout::Latch => LeaderLatch::new(client, path, "")?.participants()?,
            // A layout of a later version (the enum may grow) is listed as the mutex lists.
            _ => InterProcessMutex::new(client, path)?.participants()?,
        });
    }
    Ok(all)
}

/// One participant as a JSON object (see `--help`): the data as text when it is UTF-8, else
/// as lower-case hex, `data_encoding` saying which.
fn json_line(position: usize, p: &Participant) -> String {
    let (data, encoding) = match std::str::from_utf8(&p.data) {
        Ok(text) => (text.to_string(), "utf-8"),
        Err(_) => (p.data.iter().map(|b| format!("{b:02x}")).collect(), "hex"),
    };
    format!(
        "{{\"position\":{position},\"node\":{},\"path\":{},\"kind\":{},\"is_holder\":{},\
         \"session_id\":{},\"data\":{},\"data_encoding\":{}}}",
        json_string(&p.name),
        json_string(&p.path),
        json_string(p.kind.as_str()),
        p.is_holder,
        json_string(&format!("0x{:x}", p.session_id)),
        json_string(&data),
        json_string(encoding),
    )
}

/// `text` as a JSON string: quotes, backslashes and every control character escaped (RFC
/// 8259 §7); everything else as it is (the output is UTF-8).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(json_string("plain"), r#""plain""#);
        assert_eq!(json_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(json_string("l1\nl2\t\r"), r#""l1\nl2\t\r""#);
        assert_eq!(json_string("\u{1}\u{1f}\u{7f}"), r#""\u0001\u001f\u007f""#);
        assert_eq!(json_string("héllo ☃"), "\"héllo ☃\"");
    }
}
