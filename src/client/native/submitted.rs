//! [`ZkClient::submit`](crate::ZkClient::submit) on the native client: the requests written
//! back to back on the connection of now, each reply decoded on the reader thread, and the
//! submission's completion called once the last one is in. Nothing waits for a reply.
//!
//! Rules this file protects:
//! - no connection ready now: every result is `ConnectionLoss` at once (no wait for one);
//! - a request that cannot be encoded (a bad path, an ACL refused) fails alone, unsent;
//! - a watched read registers its watch on the reader thread before the completion runs, and
//!   only when it succeeds (the connection's rule for every read);
//! - a reply that does not decode breaks the connection (the stream can no longer be
//!   trusted), as for a blocking call, and its result is `MarshallingError`.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::connection::{Completion, Connection, WatchRegistration};
use super::pipelined::decode_response;
use super::records::{decode_all, read_data, WireRequest};
use super::watches::WatchKind;
use super::NativeClient;
use crate::client::submit::SubmittedWatch;
use crate::client::{Request, Response, Submission, Submitted, ZkError, ZkResult};

/// The results of one submission as they come in.
struct Gather {
    results: Vec<Option<ZkResult<Response>>>,
    left: usize,
    done: Option<Submitted>,
}

impl Gather {
    /// Records result `i`; the completion runs (outside the lock) once all are in.
    fn put(gather: &Mutex<Gather>, i: usize, result: ZkResult<Response>) {
        let finished = {
            let mut g = gather.lock();
            if g.results[i].is_none() {
                g.results[i] = Some(result);
                g.left -= 1;
            }
            match g.left {
                0 => g.done.take().map(|done| {
                    let results = std::mem::take(&mut g.results);
                    (done, results)
                }),
                _ => None,
            }
        };
        if let Some((done, results)) = finished {
            done(
                results
                    .into_iter()
                    .map(|r| r.unwrap_or(Err(ZkError::ConnectionLoss)))
                    .collect(),
            );
        }
    }
}

impl NativeClient {
    /// See [`ZkClient::submit`](crate::ZkClient::submit).
    pub(super) fn submit_now(&self, submissions: Vec<Submission>, done: Submitted) {
        let n = submissions.len();
        let gather = Arc::new(Mutex::new(Gather {
            results: (0..n).map(|_| None).collect(),
            left: n,
            done: Some(done),
        }));
        if n == 0 {
            Gather::finish_empty(&gather);
            return;
        }
        let conn = self.core.connection_now();
        let mut wire = Vec::with_capacity(n);
        for (i, submission) in submissions.into_iter().enumerate() {
            let (request, watch) = submission.into_parts();
            let (encoded, conn) = match (self.wire_request(&request), conn.as_ref()) {
                (Ok(encoded), Some(conn)) => (encoded, conn),
                (Err(code), _) => {
                    Gather::put(&gather, i, Err(code));
                    continue;
                }
                (Ok(_), None) => {
                    Gather::put(&gather, i, Err(ZkError::ConnectionLoss));
                    continue;
                }
            };
            let (encoded, registration) = self.watched(encoded, watch);
            let completion = self.completion(&gather, i, request, Arc::downgrade(conn));
            wire.push((encoded, registration, completion));
        }
        if let (Some(conn), false) = (conn, wire.is_empty()) {
            conn.send_completed(wire);
        }
    }

    /// The wire record with its watch flag set, and the watch to register, for a watched read.
    fn watched(
        &self,
        encoded: WireRequest,
        watch: Option<SubmittedWatch>,
    ) -> (WireRequest, Option<WatchRegistration>) {
        let Some(watch) = watch else {
            return (encoded, None);
        };
        let (kind, path, decodes): (_, _, fn(&[u8]) -> bool) = match encoded {
            WireRequest::GetData { path, .. } => (WatchKind::Data, path, |body| {
                decode_all(body, read_data).is_ok()
            }),
            WireRequest::GetChildren { path, .. } => (WatchKind::Child, path, |body| {
                decode_all(body, |r| r.strings()).is_ok()
            }),
            // Not a read that sets a watch: the watcher is dropped unset.
            other => return (other, None),
        };
        let registration = WatchRegistration {
            kind,
            path: path.clone(),
            watcher: watch.watcher,
            decodes,
            inline: watch.wake_only,
            id: watch.id,
            in_flight: self.core.watches.in_flight(kind, &path),
        };
        let encoded = match kind {
            WatchKind::Child => WireRequest::GetChildren { path, watch: true },
            _ => WireRequest::GetData { path, watch: true },
        };
        (encoded, Some(registration))
    }

    /// What is done with the reply to request `i` of a submission: decoded, then gathered.
    fn completion(
        &self,
        gather: &Arc<Mutex<Gather>>,
        i: usize,
        request: Request,
        conn: Weak<Connection>,
    ) -> Completion {
        let gather = gather.clone();
        let chroot = self.chroot.clone();
        Box::new(move |reply| {
            let result = match reply {
                Ok(reply) => {
                    decode_response(chroot.as_deref(), &request, &reply.body).map_err(|e| {
                        log::warn!("undecodable reply ({e}); reconnecting");
                        if let Some(conn) = conn.upgrade() {
                            conn.close();
                        }
                        ZkError::MarshallingError
                    })
                }
                Err(ZkError::NoNode) if matches!(request, Request::Exists { .. }) => {
                    Ok(Response::Exists(None))
                }
                Err(e) => Err(e),
            };
            Gather::put(&gather, i, result);
        })
    }
}

impl Gather {
    /// A submission of no request: its completion gets no results.
    fn finish_empty(gather: &Mutex<Gather>) {
        let done = gather.lock().done.take();
        if let Some(done) = done {
            done(Vec::new());
        }
    }
}
