//! Reading the server's watch listings: `wchp` (each watched path, followed by the sessions
//! watching it) and `wchs` (a summary ending in "Total watches:").
//!
//! A watch belongs to a root when its path is the root itself or lies below it: `/a/b` is
//! under `/a`, but `/ab` is not (a bare string prefix would count it).

/// Every (path, session) pair of a `wchp` reply, in the reply's order.
pub fn watches_in(wchp: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut path = None;
    wchp.lines().filter_map(move |line| {
        if line.starts_with('/') {
            path = Some(line);
            None
        } else {
            let session = line.trim();
            path.filter(|_| session.starts_with("0x"))
                .map(|p| (p, session))
        }
    })
}

/// Whether `path` is `root` itself or a node below it.
pub fn is_under(path: &str, root: &str) -> bool {
    match path.strip_prefix(root) {
        Some(rest) => rest.is_empty() || rest.starts_with('/') || root.ends_with('/'),
        None => false,
    }
}

/// The (path, session) pairs of a `wchp` reply whose path is `root` or below it.
pub fn watches_under(wchp: &str, root: &str) -> usize {
    watches_in(wchp).filter(|(p, _)| is_under(p, root)).count()
}

/// The "Total watches:" figure of a `wchs` reply (0 when absent).
pub fn total_watches(wchs: &str) -> usize {
    wchs.lines()
        .find_map(|l| l.trim().strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WCHP: &str = "/real-1-1/lock\n\t0x100000001\n\t0x100000002\n/real-1-10/lock\n\t0x100000003\n/real-1-1\n\t0x100000004\n";

    #[test]
    fn a_root_does_not_count_a_sibling_sharing_its_prefix() {
        assert_eq!(watches_under(WCHP, "/real-1-1"), 3);
        assert_eq!(watches_under(WCHP, "/real-1-10"), 1);
        assert_eq!(watches_under(WCHP, "/real-1"), 0);
    }

    #[test]
    fn lists_every_path_session_pair() {
        let pairs: Vec<_> = watches_in(WCHP).collect();
        assert_eq!(pairs.len(), 4);
        assert_eq!(pairs[2], ("/real-1-10/lock", "0x100000003"));
    }

    #[test]
    fn reads_the_total_of_wchs() {
        let wchs = "1 connections watching 2 paths\nTotal watches:5\n";
        assert_eq!(total_watches(wchs), 5);
        assert_eq!(total_watches("garbage"), 0);
    }
}
