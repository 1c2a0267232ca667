//! `zklock holders`: prints a lock's participants in queue order, as the library lists them
//! (the recipe recognised by [`LockLayout`], the holders flagged by the recipe's own rule),
//! as text or (`--json`) one JSON object per line, written here by hand: the library has no
//! JSON dependency and zklock needs none for a flat object of strings, numbers and booleans.

use zk_locks::locks::{
    InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch, LockLayout, Participant,
    ParticipantKind,
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
        // Looked at only: the latch is never started.
        LockLayout::Latch => LeaderLatch::new(client, path, "")?.participants(),
        // A layout of a later version (the enum may grow) is listed as the mutex lists.
        _ => InterProcessMutex::new(client, path)?.participants(),
    }
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
