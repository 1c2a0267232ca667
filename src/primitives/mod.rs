//! What both the client layer (`client/`, `session.rs`) and the locks (`locks/`) need, beneath
//! both: neither side's types appear here, so the client layer imports nothing from `locks/`
//! (the rule is in ARCHITECTURE.md and checked by `.ci/run`).
//!
//! - `boot_clock`: [`BootInstant`](boot_clock::BootInstant), the clock that counts host
//!   suspension, for every deadline that stands for the server's clock.
//! - `cancel`: the [`CancelToken`](cancel::CancelToken) and the calling thread's current
//!   token, read by the session's waits and the retry pauses as "every deadline has passed".
//! - `observer`: the [`LockObserver`](observer::LockObserver) a client's options carry, its
//!   event and the kind of node it names.
//! - `timer`: time for futures without an async runtime (one thread per process);
//!   `wakers`: the wakers of the futures waiting on one thing.

pub(crate) mod block_on;
pub(crate) mod boot_clock;
pub(crate) mod cancel;
pub(crate) mod observer;
pub(crate) mod timer;
pub(crate) mod wakers;
