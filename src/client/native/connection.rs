//! One TCP connection of a session: callers write requests themselves (under a lock) and wait
//! on their own slot; one reader thread matches replies to slots by xid, hands notifications
//! to the watch registry, and fails every pending slot when the link breaks.
//!
//! Rules this file protects:
//! - a request is queued as pending *before* its bytes are written, under the same lock that
//!   orders the writes, so the pending queue is in wire order;
//! - the server answers one session's requests in order, so a reply must match the oldest
//!   pending xid; anything else (an unknown xid, a frame over the limit, a negative length, a
//!   truncated header) breaks the connection, never panics, never allocates past the limit;
//! - a watch is registered by the reader thread when its reply arrives, before the reader
//!   reads the next frame, so no notification can overtake its registration; it is
//!   registered only if its caller gets the read's success: the registration and the result
//!   go into the slot under one lock, and a caller that gives up (its deadline passed) takes
//!   the watch out of the slot under that lock first;
//! - a ping never waits: it is written only when no caller is writing and the socket has
//!   room now (the session's dead-link clock must keep running whatever callers' writes do);
//!   closeSession waits for the write lock only until the close's deadline;
//! - once broken, a connection stays broken: every pending and later slot gets ConnectionLoss;
//! - xids come from one counter per client, shared by all its connections (see [`XidCounter`]);
//! - locks are taken in one order: the write lock, the pending queue, a slot, the watch
//!   registry; code holding a later one never waits for an earlier one.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::frames::{read_reply_frame, Frame};
use super::jute::Reader;
use super::records::{self, ReplyHeader, WireRequest};
use super::silence::AnswerTimes;
use super::transport::Transport;
use super::watches::{InFlight, WatchKind, Watches};
pub use super::xids::XidCounter;
use crate::client::{Watcher, ZkError, ZkResult};

/// A successful reply: the body bytes after the header (error replies are returned as `Err`).
#[derive(Debug)]
pub struct Reply {
    /// The body, to be decoded by the caller.
    pub body: Vec<u8>,
}

/// A watch to register when the request that sets it succeeds.
pub struct WatchRegistration {
    /// Data, exist or child watch.
    pub kind: WatchKind,
    /// Server path.
    pub path: String,
    /// The callback.
    pub watcher: Watcher,
    /// Whether a successful reply's body decodes as the caller will decode it: a reply that
    /// does not is a `MarshallingError` for the caller, so it must not register the watch.
    pub decodes: fn(&[u8]) -> bool,
    /// A lock waiter's wake-up, run on the reader thread when it fires (`watches::wake_only`).
    pub inline: bool,
    /// The watcher's name, to remove it unfired (`client::registering_as`).
    pub id: Option<crate::client::WatcherId>,
    /// Counts the request in flight for its watch's table and path until the watch is
    /// registered or given up: no removeWatches may overtake it (`watches.rs`).
    pub in_flight: InFlight,
}

/// What is done with the reply of a request nobody waits for. Runs on the reader thread (or
/// the thread that breaks the connection): it must not call the client.
pub type Completion = Box<dyn FnOnce(ZkResult<Reply>) + Send>;

/// What a slot holds: the result once it arrived, and the watch while it may still be set.
/// One lock for both: the reader registers the watch and stores the result in one step, and
/// a caller that gives up takes the watch out in one step, so a watch is registered exactly
/// when its caller gets the success.
struct SlotState {
    result: Option<ZkResult<Reply>>,
    watch: Option<WatchRegistration>,
}

/// Where one request's reply lands.
pub struct Slot {
    state: Mutex<SlotState>,
    ready: Condvar,
    /// Set for a request nobody waits for: the reply goes to it instead of `result`.
    completion: Mutex<Option<Completion>>,
}

impl Slot {
    fn new(watch: Option<WatchRegistration>) -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::new(SlotState {
                result: None,
                watch,
            }),
            ready: Condvar::new(),
            completion: Mutex::new(None),
        })
    }

    /// Fails the slot (no watch is registered).
    fn fill(&self, result: ZkResult<Reply>) {
        self.answer(result, None);
    }

    /// Hands the reply over; with `watches`, registers the slot's watch first if the reply
    /// sets one and the caller is still waiting.
    fn answer(&self, result: ZkResult<Reply>, watches: Option<&Watches>) {
        let completion = self.completion.lock().take();
        let mut state = self.state.lock();
        let watch = state.watch.take();
        if let (Some(w), Some(watches)) = (watch, watches) {
            // An exists watch is set on a missing node too; data and child watches only
            // when the read succeeded (and its reply decodes).
            let set = match &result {
                Ok(reply) => (w.decodes)(&reply.body),
                Err(e) => w.kind == WatchKind::Exist && *e == ZkError::NoNode,
            };
            let in_flight = w.in_flight;
            if set {
                watches.add(w.kind, w.path, w.watcher, w.inline, w.id);
            }
            // Uncounted only once its callback is registered: a removal between the two
            // sees the one or the other, never neither.
            drop(in_flight);
        }
        if let Some(done) = completion {
            // Nobody waits on this slot: the reply goes to its completion, its watch (above)
            // registered first, as for a caller.
            drop(state);
            done(result);
            return;
        }
        if state.result.is_none() {
            state.result = Some(result);
            self.ready.notify_all();
        }
    }

    /// Blocks until the reply arrives or the deadline passes ([`ZkError::OperationTimeout`];
    /// the outcome is then unknown, and a watch the request carried will not be set by a
    /// reply arriving later).
    pub fn wait(&self, deadline: Instant) -> ZkResult<Reply> {
        let mut state = self.state.lock();
        loop {
            if let Some(result) = state.result.take() {
                return result;
            }
            if self.ready.wait_until(&mut state, deadline).timed_out() && state.result.is_none() {
                let abandoned = state.watch.take();
                drop(state);
                // The caller's callback is dropped outside the lock.
                drop(abandoned);
                return Err(ZkError::OperationTimeout);
            }
        }
    }
}

struct Pending {
    /// xid, slot, and when the request was queued to be sent (ns since `base`).
    queue: VecDeque<(i32, Arc<Slot>, u64)>,
    broken: bool,
}

struct Outgoing {
    stream: Transport,
}

/// What the reader thread reports to the session.
pub trait LinkObserver: Send + Sync {
    /// The connection broke (read error, protocol violation, or [`Connection::close`]).
    fn broken(&self);
}

/// One connection. Shared by the callers, the reader thread and the session supervisor.
pub struct Connection {
    control: Transport,
    reader_stopped: Mutex<bool>,
    reader_stopped_cv: Condvar,
    out: Mutex<Outgoing>,
    xids: Arc<XidCounter>,
    pending: Mutex<Pending>,
    base: Instant,
    last_recv: AtomicU64,
    last_send: AtomicU64,
    packet_limit: usize,
    /// How long this connection's latest requests took to be answered (`silence.rs`).
    answers: Mutex<AnswerTimes>,
}

impl Connection {
    /// Wraps a connected, handshaken socket (no reader yet: see [`Connection::start_reader`]);
    /// its requests take their xids from the client's `xids`.
    pub fn new(
        stream: Transport,
        packet_limit: usize,
        xids: Arc<XidCounter>,
    ) -> std::io::Result<Arc<Connection>> {
        let control = stream.try_clone()?;
        let base = Instant::now();
        Ok(Arc::new(Connection {
            control,
            reader_stopped: Mutex::new(false),
            reader_stopped_cv: Condvar::new(),
            out: Mutex::new(Outgoing { stream }),
            xids,
            pending: Mutex::new(Pending {
                queue: VecDeque::new(),
                broken: false,
            }),
            base,
            last_recv: AtomicU64::new(0),
            last_send: AtomicU64::new(0),
            packet_limit,
            answers: Mutex::new(AnswerTimes::default()),
        }))
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Time since the last frame was received.
    pub fn since_recv(&self) -> Duration {
        Duration::from_nanos(
            self.now()
                .saturating_sub(self.last_recv.load(Ordering::SeqCst)),
        )
    }

    /// How long the oldest request still unanswered has waited (`None` when every request was
    /// answered).
    pub fn oldest_unanswered(&self) -> Option<Duration> {
        let sent = self.pending.lock().queue.front().map(|p| p.2)?;
        Some(Duration::from_nanos(self.now().saturating_sub(sent)))
    }

    /// The slowest of this connection's latest answers (`None` before the first).
    pub fn slowest_answer(&self) -> Option<Duration> {
        self.answers.lock().slowest()
    }

    /// Time since the last frame was sent.
    pub fn since_send(&self) -> Duration {
        Duration::from_nanos(
            self.now()
                .saturating_sub(self.last_send.load(Ordering::SeqCst)),
        )
    }

    /// True once the link broke.
    pub fn is_broken(&self) -> bool {
        self.pending.lock().broken
    }

    /// Starts the reader thread.
    pub fn start_reader(
        self: &Arc<Self>,
        watches: Arc<Watches>,
        last_zxid: Arc<AtomicI64>,
        observer: Arc<dyn LinkObserver>,
    ) -> std::io::Result<()> {
        let conn = self.clone();
        let stream = self.control.try_clone()?;
        std::thread::Builder::new()
            .name("zk-locks-native-reader".into())
            .spawn(move || {
                let why = conn.read_loop(stream, &watches, &last_zxid);
                log::debug!("connection closed: {why}");
                conn.close();
                *conn.reader_stopped.lock() = true;
                conn.reader_stopped_cv.notify_all();
                observer.broken();
            })?;
        Ok(())
    }

    /// Writes `requests` back to back (one write) and returns their slots, in order. A request
    /// over the packet limit gets [`ZkError::BadArguments`] and is not sent.
    pub fn send(&self, requests: Vec<(WireRequest, Option<WatchRegistration>)>) -> Vec<Arc<Slot>> {
        let requests = requests
            .into_iter()
            .map(|(request, watch)| (request, Slot::new(watch)))
            .collect();
        self.send_slots(requests)
    }

    /// Sends `request` without a waiter: its outcome (reply, or the connection's loss) goes to
    /// `done`. It is queued and written like any other request, so the server applies it
    /// before anything this session sends later on this connection.
    pub fn send_unawaited(&self, request: WireRequest, done: Completion) {
        let slot = Slot::new(None);
        *slot.completion.lock() = Some(done);
        self.send_slots(vec![(request, slot)]);
    }

    /// Sends `requests` back to back (one write) without a waiter: each outcome goes to its
    /// completion, a read's watch registered first when it succeeds. Blocks only while another
    /// caller writes (the write lock), as [`Self::send`] does.
    pub fn send_completed(
        &self,
        requests: Vec<(WireRequest, Option<WatchRegistration>, Completion)>,
    ) {
        let requests = requests
            .into_iter()
            .map(|(request, watch, done)| {
                let slot = Slot::new(watch);
                *slot.completion.lock() = Some(done);
                (request, slot)
            })
            .collect();
        self.send_slots(requests);
    }

    /// Sends `request` without a waiter (as [`Self::send_unawaited`]) only if that cannot
    /// block: the write lock is free and the socket has room now. Returns whether it was
    /// sent; when it was not, `done` is dropped uncalled.
    pub fn try_send_unawaited(&self, request: WireRequest, done: Completion) -> bool {
        let now = Instant::now();
        let Some(out) = self.out.try_lock_until(now) else {
            return false;
        };
        if !out.stream.writable_by(now) {
            return false;
        }
        let slot = Slot::new(None);
        *slot.completion.lock() = Some(done);
        self.send_locked(out, vec![(request, slot)]);
        true
    }

    /// Sends a ping if that cannot block: no caller is writing (the write lock is free) and
    /// the socket has room now. Returns whether it was sent; when it was not, the session's
    /// clocks judge the link as they would without it.
    pub fn try_ping(&self) -> bool {
        self.send_if_free(WireRequest::Ping, Instant::now())
            .is_some()
    }

    /// Sends `request` only if that cannot block past `deadline`: the write lock is free by
    /// then (a caller's write may be blocked on a full socket) and the socket has room by
    /// then. `None` when it was not sent.
    pub fn send_if_free(&self, request: WireRequest, deadline: Instant) -> Option<Arc<Slot>> {
        let out = self.out.try_lock_until(deadline)?;
        if !out.stream.writable_by(deadline) {
            return None;
        }
        self.send_locked(out, vec![(request, Slot::new(None))])
            .pop()
    }

    fn send_slots(&self, requests: Vec<(WireRequest, Arc<Slot>)>) -> Vec<Arc<Slot>> {
        self.send_locked(self.out.lock(), requests)
    }

    fn send_locked(
        &self,
        out: MutexGuard<'_, Outgoing>,
        requests: Vec<(WireRequest, Arc<Slot>)>,
    ) -> Vec<Arc<Slot>> {
        let mut bytes = Vec::new();
        let mut slots = Vec::with_capacity(requests.len());
        // Filled after the locks are released: a completion runs no code under them.
        let mut refused = Vec::new();
        {
            let mut pending = self.pending.lock();
            for (request, slot) in requests {
                if pending.broken {
                    refused.push((slot.clone(), ZkError::ConnectionLoss));
                    slots.push(slot);
                    continue;
                }
                let xid = request.reserved_xid().unwrap_or_else(|| self.xids.next());
                let frame = request.encode(xid);
                if frame.len() - 4 >= self.packet_limit {
                    refused.push((slot.clone(), ZkError::BadArguments));
                    slots.push(slot);
                    continue;
                }
                pending.queue.push_back((xid, slot.clone(), self.now()));
                bytes.extend_from_slice(&frame);
                slots.push(slot);
            }
        }
        self.write_frames(out, bytes);
        for (slot, code) in refused {
            slot.fill(Err(code));
        }
        slots
    }

    /// Sends the requests `build` returns, unawaited (their replies, errors included, are
    /// dropped), if that cannot block past `deadline`: the write lock is free and the socket
    /// has room by then. `build` runs under the write lock and the pending queue's lock, and
    /// only while the connection is unbroken, so every request written before its requests
    /// is pending already and none is written between its call and theirs (watch removals:
    /// `Watches::take_owed`). Returns whether `build` ran.
    pub fn send_built_unawaited(
        &self,
        deadline: Instant,
        build: impl FnOnce() -> Vec<WireRequest>,
    ) -> bool {
        let Some(out) = self.out.try_lock_until(deadline) else {
            return false;
        };
        if !out.stream.writable_by(deadline) {
            return false;
        }
        let mut bytes = Vec::new();
        {
            let mut pending = self.pending.lock();
            if pending.broken {
                return false;
            }
            for request in build() {
                let xid = request.reserved_xid().unwrap_or_else(|| self.xids.next());
                let frame = request.encode(xid);
                if frame.len() - 4 >= self.packet_limit {
                    continue;
                }
                let slot = Slot::new(None);
                *slot.completion.lock() = Some(Box::new(|_: ZkResult<Reply>| {}));
                pending.queue.push_back((xid, slot, self.now()));
                bytes.extend_from_slice(&frame);
            }
        }
        self.write_frames(out, bytes);
        true
    }

    /// Writes `bytes` (frames queued as pending under `out`) and releases the write lock; a
    /// failed write breaks the connection.
    fn write_frames(&self, mut out: MutexGuard<'_, Outgoing>, bytes: Vec<u8>) {
        let written = match bytes.is_empty() {
            true => Ok(false),
            false => out.stream.write_all(&bytes).map(|()| true),
        };
        drop(out);
        match written {
            Ok(true) => self.last_send.store(self.now(), Ordering::SeqCst),
            Ok(false) => {}
            Err(e) => {
                log::debug!("write failed: {e}");
                self.close();
            }
        }
    }

    /// Waits (at most `timeout`) until the reader thread has handled its last frame, so that
    /// nothing from this connection (a watch registration, a notification) happens after.
    pub fn wait_reader_stopped(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut stopped = self.reader_stopped.lock();
        while !*stopped {
            if self
                .reader_stopped_cv
                .wait_until(&mut stopped, deadline)
                .timed_out()
            {
                log::warn!("the reader thread did not stop in {timeout:?}");
                return;
            }
        }
    }

    /// Breaks the connection: every pending slot gets ConnectionLoss and the reader stops.
    pub fn close(&self) {
        let drained = {
            let mut pending = self.pending.lock();
            pending.broken = true;
            std::mem::take(&mut pending.queue)
        };
        for (_, slot, _) in drained {
            slot.fill(Err(ZkError::ConnectionLoss));
        }
        self.control.shutdown();
    }

    /// Fails the request an oversized reply (`len` bytes, discarded) answered, by the xid in
    /// its `header`: [`ZkError::ReplyTooLarge`]. A notification that large, or a reply that
    /// matches no request, breaks the connection (`Err`, why).
    fn refuse_reply(&self, header: &[u8], len: usize) -> Result<(), String> {
        let header = ReplyHeader::decode(&mut Reader::new(header))
            .map_err(|e| format!("bad header of a {len}-byte reply: {e}"))?;
        if header.xid == records::xid::NOTIFICATION {
            return Err(format!(
                "a notification of {len} bytes, over the packet limit"
            ));
        }
        let slot = {
            let mut pending = self.pending.lock();
            match pending.queue.front() {
                Some((xid, _, _)) if *xid == header.xid => pending.queue.pop_front(),
                _ => None,
            }
        };
        let Some((_, slot, _)) = slot else {
            return Err(format!("a {len}-byte reply to no pending request"));
        };
        log::warn!(
            "a reply of {len} bytes is over the packet limit of {} bytes: discarded, its \
             request fails (a directory with too many children?)",
            self.packet_limit
        );
        slot.answer(Err(ZkError::ReplyTooLarge), None);
        Ok(())
    }

    fn read_loop(&self, mut stream: Transport, watches: &Watches, last_zxid: &AtomicI64) -> String {
        loop {
            let mut noting = Noting {
                conn: self,
                stream: &mut stream,
            };
            let frame = match read_reply_frame(&mut noting, self.packet_limit) {
                Ok(Frame::Whole(frame)) => frame,
                Ok(Frame::TooLong { header, len }) => match self.refuse_reply(&header, len) {
                    Ok(()) => continue,
                    Err(e) => return e,
                },
                Err(e) => return e,
            };
            self.last_recv.store(self.now(), Ordering::SeqCst);
            let mut r = Reader::new(&frame);
            let header = match ReplyHeader::decode(&mut r) {
                Ok(h) => h,
                Err(e) => return format!("bad reply header: {e}"),
            };
            let body = frame[frame.len() - r.remaining()..].to_vec();
            if header.xid == records::xid::NOTIFICATION {
                match records::decode_all(&body, records::read_watcher_event) {
                    Ok(Some((event_type, path))) => watches.trigger(event_type, &path),
                    Ok(None) => {}
                    Err(e) => return format!("bad notification: {e}"),
                }
                continue;
            }
            let slot = {
                let mut pending = self.pending.lock();
                match pending.queue.front() {
                    Some((xid, _, _)) if *xid == header.xid => pending.queue.pop_front(),
                    other => {
                        return format!(
                            "reply xid {} does not match the oldest request ({:?})",
                            header.xid,
                            other.map(|p| p.0)
                        )
                    }
                }
            };
            let Some((_, slot, sent)) = slot else {
                return "no pending request".into();
            };
            let took = Duration::from_nanos(self.now().saturating_sub(sent));
            self.answers.lock().record(took);
            if header.zxid > 0 {
                last_zxid.fetch_max(header.zxid, Ordering::SeqCst);
            }
            let result = if header.err == 0 {
                Ok(Reply { body })
            } else {
                Err(records::error_from_code(header.err))
            };
            slot.answer(result, Some(watches));
        }
    }
}

/// The socket as the reader reads it, noting the arrival of every byte: a large reply that
/// arrives slowly comes from a member that speaks, not a silent one (`silence.rs`).
struct Noting<'a> {
    conn: &'a Connection,
    stream: &'a mut Transport,
}

impl Read for Noting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buf)?;
        if n > 0 {
            self.conn.last_recv.store(self.conn.now(), Ordering::SeqCst);
        }
        Ok(n)
    }
}
