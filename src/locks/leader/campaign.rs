//! The latch's own thread: queue a node through the lock engine, lead while the node is
//! `Held`, stop leading when it is not, give the node back, queue again — until the latch is
//! closed or its client is.
//!
//! Rules kept here:
//! - **Leading follows the node's state.** A spell starts only when the node reads `Held`
//!   and ends (its token cancelled, `not_leader` told) as soon as a wait on the node sees
//!   `Suspect` or `Lost` — the rules every lock holder has, so a leader stops before its
//!   session can have expired on the server. `Held` again on the same node is a new spell
//!   with the same term (Curator: RECONNECTED with our node still first).
//! - **A leader stops before its node goes.** The spell ends, the listeners are told and the
//!   node is marked given up (every `Leadership` of it reads `Lost`) before the node is
//!   deleted: no other participant can lead while this one still thinks it does.
//! - **Every wait ends on close.** The waits run under the latch's stop token
//!   (`cancel::within`): closing is a deadline that passed for this thread. The node's
//!   delete runs outside it, so a clean close deletes in the foreground (the next leader is
//!   told within a round trip).
//! - **Close reports what it leaves behind.** A node whose delete failed with the session
//!   alive (a leader's, or a queued node's withdrawal sent to the background because the
//!   link was down) is recorded for close to return; a node that went with its session is
//!   nothing left of ours.
//! - **A lost node is replaced.** A node lost with its session (or deleted by someone) is
//!   given back and a new one queues, as Curator's `reset()` does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::client::ZkError;
use crate::error::Error;
use crate::session::ConnectionState;

use super::super::cancel;
use super::super::cleanup::BackgroundMark;
use super::super::held::{HeldNode, LockState};
use super::super::internals::{NodeKind, Wait};
use super::super::watching::wait_on;
use super::latch::Shared;
use super::leadership::Leadership;

/// The pause before queueing again after an attempt that failed (the retry policy gave up).
const PAUSE_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// The latch's thread, until it is closed (or its client is).
pub(super) fn run(shared: Arc<Shared>) {
    let client = shared.internals.client().clone();
    let data = shared.id.as_bytes().to_vec();
    while !shared.stop.is_cancelled() {
        let mark = BackgroundMark::now();
        let attempt = cancel::within(&shared.stop, &client, || {
            shared.internals.attempt(None, &data, NodeKind::Sequential)
        });
        // Closed while queued, with the link in trouble: the node's withdrawal went to the
        // background and the node may still stand in the queue. Close says so, as it does
        // for a leader's node whose delete failed (Curator's `close()` throws).
        if shared.stop.is_cancelled() && !matches!(attempt, Ok(Some(_))) && mark.passed() {
            shared.record_release(Err(Error::zk(
                "delete",
                shared.path.to_string(),
                ZkError::ConnectionLoss,
            )));
        }
        match attempt {
            Ok(Some(node)) => lead(&shared, Arc::new(node)),
            Ok(None) if shared.stop.is_cancelled() => break,
            // An untimed attempt ends without a node only when the client is closed.
            Ok(None) | Err(Error::Closed) => break,
            Err(e) if client.session().state() == ConnectionState::Closed => {
                log::debug!("leader latch {}: client closed ({e})", shared.path);
                break;
            }
            Err(e) => {
                log::warn!(
                    "leader latch {}: queueing failed ({e}); again in {PAUSE_AFTER_FAILURE:?}",
                    shared.path
                );
                cancel::within(&shared.stop, &client, || cancel::sleep(PAUSE_AFTER_FAILURE));
            }
        }
    }
    shared.thread_ended();
}

/// Leads through `node` while it is `Held` (spell by spell), until it is lost or the latch
/// closes; then gives the node back (after the last spell ended).
fn lead(shared: &Shared, node: Arc<HeldNode>) {
    let term = match node.fencing_token() {
        Ok(term) => Some(term),
        Err(e) => {
            log::warn!(
                "leader latch {}: no term for {}: {e}",
                shared.path,
                node.path()
            );
            None
        }
    };
    let given_up = Arc::new(AtomicBool::new(false));
    if let Some(term) = term {
        lead_spells(shared, &node, &given_up, term);
    }
    shared.stop_leading();
    // Every copy of every spell reads `Lost` before the delete can let a successor lead.
    given_up.store(true, Ordering::SeqCst);
    let released = super::super::cleanup::release_held(
        &node,
        shared.internals.retry_policy().as_ref(),
        Wait::Until(None),
    );
    // Whoever still holds this leadership sees it over, watch or not; a leadership kept by
    // the user no longer keeps the session proving to the quorum.
    node.mark_lost();
    node.end_interest();
    if let Err(e) = &released {
        log::warn!(
            "leader latch {}: giving back {}: {e}",
            shared.path,
            node.path()
        );
    }
    shared.record_release(released);
}

/// The spells of `node`: one each time it reads `Held`, until it is lost or the latch closes.
fn lead_spells(shared: &Shared, node: &Arc<HeldNode>, given_up: &Arc<AtomicBool>, term: i64) {
    let client = node.client().clone();
    while !shared.stop.is_cancelled() {
        match node.state() {
            LockState::Held => {
                let spell = Leadership::new(
                    node.clone(),
                    given_up.clone(),
                    term,
                    shared.id.clone(),
                    shared.path.clone(),
                );
                shared.start_leading(spell);
                cancel::within(&shared.stop, &client, || {
                    wait_on(&[node], None, |s| s == LockState::Held)
                });
                shared.stop_leading();
            }
            LockState::Suspect => {
                cancel::within(&shared.stop, &client, || {
                    wait_on(&[node], None, |s| s == LockState::Suspect)
                });
            }
            // `Lost`, and any state a later version adds: not leading.
            _ => break,
        }
    }
}
