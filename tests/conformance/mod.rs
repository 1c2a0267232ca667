//! The `ZkClient` conformance suite: one set of test bodies, run against every backend of
//! the harness (the in-memory ensemble, a real ZooKeeper 3.8 server through each real
//! client), so the model stays faithful to the server.
//!
//! Use from a test file:
//! ```ignore
//! mod conformance;
//! conformance_tests!(zk_locks::testing::harness::Real::native());
//! ```
//! The backend expression is evaluated once per test. Bodies use only the `ZkClient` trait
//! and assert only what a real 3.8 server does (for instance: deletes do not bump the parent's
//! cversion; container deletion is asynchronous, so it is not tested here). Watch events are
//! awaited on channels with a generous timeout; "no event" is asserted after a barrier: a
//! watch on the same session fired later, since events arrive in commit order.
//!
//! - `support`: a test's world ([`support::Ctx`]) and collected watch events;
//! - `nodes`: node operations, stats and errors;
//! - `watches`: watches and closing;
//! - `multi`: transactions (a backend without them must answer `Unimplemented`).

mod multi;
mod nodes;
mod support;
mod watches;

pub use multi::*;
pub use nodes::*;
pub use watches::*;

/// Expands to one `#[test]` per behaviour, each evaluating `$backend`
/// (an `Option` of a `Backend`: `None` skips, as `Real::new()` does without a server).
#[macro_export]
macro_rules! conformance_tests {
    ($backend:expr) => {
        $crate::conformance_tests!(@each $backend;
            connect_knows_session,
            create_modes_return_paths,
            sequence_numbers_follow_parent_cversion,
            create_errors,
            delete_errors_and_versions,
            set_data_versions_and_stat,
            exists_returns_stat_or_none,
            stat_fields,
            get_children_lists_names,
            data_watch_fires_on_change,
            data_watch_fires_on_delete,
            child_watch_fires_on_create_and_delete,
            child_watch_fires_on_parent_delete,
            watches_are_one_shot,
            no_watch_on_no_node,
            several_watchers_each_fire_once,
            close_removes_ephemerals_and_notifies_others,
            closed_client_drops_its_watches,
            multi_failed_applies_nothing_in_the_servers_shape,
            multi_codes_in_the_servers_order,
            multi_committed_shares_one_zxid,
            multi_fires_watches_only_when_it_commits,
        );
    };
    (@each $backend:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                // `None`: no server here (a skip, or a failure under ZK_LOCKS_REQUIRE_SERVER=1).
                let Some(backend) = $backend else { return };
                $crate::conformance::$name(&backend);
            }
        )*
    };
}
