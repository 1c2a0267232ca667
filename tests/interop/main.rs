//! Interoperability with Apache Curator 5.4 (Debian's jars): Rust and JVM processes contend on
//! the same paths and must exclude each other, queue behind each other, revoke each other, and
//! list and sort each other's nodes identically; secured locks (digest credentials, ACLs, TLS)
//! are shared the same way.
//!
//! The JVM side is `tests/interop/Interop.java` (and `Leader.java` for the elections), compiled once per test process with `javac`.
//! Critical sections are recorded on both sides with CLOCK_MONOTONIC nanoseconds
//! (`clock_gettime` here, `System.nanoTime()` in OpenJDK on Linux, checked by the harness) and
//! merged; the checker then counts holders over time.
//!
//! Needs Java, javac, ZooKeeper and Curator: skipped when missing, a failure when
//! `ZK_LOCKS_REQUIRE_SERVER=1` (CI).
//!
//! - `harness`: the Curator process, the Rust clients, the records and the checker;
//! - `exclusion`: mutex, read/write lock and semaphore contended from both sides;
//! - `queues`: waiting behind each other, listing and sorting the same queue;
//! - `leader`: `LeaderLatch` and `LeaderSelector` of both runtimes in one election;
//! - `revocation`: revoking in both directions;
//! - `secured`: digest credentials with `CREATOR_ALL_ACL`, and a Curator peer over TLS.

mod exclusion;
mod harness;
mod leader;
mod queues;
mod revocation;
mod secured;
