//! [`NativeClient`]'s [`ZkClient`] implementation: each call as its wire record, sent and
//! waited for (`NativeClient::call`), its reply decoded, paths turned back to the client's
//! (chroot removed).

use super::*;

impl ZkClient for NativeClient {
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<String> {
        self.create2(path, data, mode).map(|(path, _)| path)
    }

    fn create2(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        crate::paths::validate_create_path(path, mode.is_sequential())
            .map_err(|_| ZkError::BadArguments)?;
        let request = WireRequest::Create {
            acl: self.acl_for(path)?,
            path: self.server_path(path),
            data: data.to_vec(),
            mode,
        };
        let (created, stat) = self.call(request, None, read_create2)?;
        Ok((self.client_path(&created), stat))
    }

    fn delete(&self, path: &str, v: Option<i32>) -> ZkResult<()> {
        check_path(path)?;
        let request = WireRequest::Delete {
            path: self.server_path(path),
            version: version(v),
        };
        self.call(request, None, |_| Ok(()))
    }

    fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        check_path(path)?;
        let request = WireRequest::Exists {
            path: self.server_path(path),
            watch: false,
        };
        match self.call(request, None, read_stat) {
            Ok(stat) => Ok(Some(stat)),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn get_data(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<(Vec<u8>, Stat)> {
        check_path(path)?;
        let server_path = self.server_path(path);
        let watch = watcher.map(|watcher| WatchRegistration {
            kind: WatchKind::Data,
            path: server_path.clone(),
            watcher,
            decodes: |body| decode_all(body, read_data).is_ok(),
            inline: watches::wake_only_requested(),
            id: crate::client::watcher_id::registering(),
            in_flight: self.core.watches.in_flight(WatchKind::Data, &server_path),
        });
        let request = WireRequest::GetData {
            path: server_path,
            watch: watch.is_some(),
        };
        self.call(request, watch, read_data)
    }

    /// Removes the callback; when nothing else of this client needs the server's watch, sends
    /// removeWatches unawaited on the connection of now (none now: a new connection's
    /// SetWatches leaves the watch out). See `watches.rs` for when it may be sent.
    fn remove_watcher(&self, path: &str, id: crate::client::WatcherId) -> bool {
        let removed = self.core.watches.remove(&self.server_path(path), id);
        if removed {
            self.core.send_owed_removals();
        }
        removed
    }

    fn get_acl(&self, path: &str) -> ZkResult<(Vec<Acl>, Stat)> {
        check_path(path)?;
        let request = WireRequest::GetAcl {
            path: self.server_path(path),
        };
        self.call(request, None, read_acl)
    }

    fn acl_provider(&self) -> AclProvider {
        self.acl.clone()
    }

    fn own_digest_ids(&self) -> Vec<String> {
        crate::client::acl::own_digest_ids(&self.auth)
    }

    fn lock_observer(&self) -> Option<Arc<dyn crate::primitives::observer::LockObserver>> {
        self.lock_observer.clone()
    }

    fn get_children(&self, path: &str, watcher: Option<Watcher>) -> ZkResult<Vec<String>> {
        check_path(path)?;
        let server_path = self.server_path(path);
        let watch = watcher.map(|watcher| WatchRegistration {
            kind: WatchKind::Child,
            path: server_path.clone(),
            watcher,
            decodes: |body| decode_all(body, |r| r.strings()).is_ok(),
            inline: watches::wake_only_requested(),
            id: crate::client::watcher_id::registering(),
            in_flight: self.core.watches.in_flight(WatchKind::Child, &server_path),
        });
        let request = WireRequest::GetChildren {
            path: server_path,
            watch: watch.is_some(),
        };
        self.call(request, watch, |r| r.strings())
    }

    fn set_data(&self, path: &str, data: &[u8], v: Option<i32>) -> ZkResult<Stat> {
        check_path(path)?;
        let request = WireRequest::SetData {
            path: self.server_path(path),
            data: data.to_vec(),
            version: version(v),
        };
        self.call(request, None, read_stat)
    }

    /// One write for all requests, then one wait per reply: a single round trip.
    fn submit(&self, submissions: Vec<crate::client::Submission>, done: crate::client::Submitted) {
        self.submit_now(submissions, done)
    }

    fn pipeline(&self, requests: &[Request]) -> Vec<ZkResult<Response>> {
        let deadline = deadline_after(self.call_timeout);
        let mut results: Vec<Option<ZkResult<Response>>> = vec![None; requests.len()];
        let mut wire = Vec::new();
        let mut sent = Vec::new();
        for (i, request) in requests.iter().enumerate() {
            match self.wire_request(request) {
                Ok(w) => {
                    wire.push((w, None));
                    sent.push(i);
                }
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        if !wire.is_empty() {
            match self.core.connection(deadline) {
                Err(e) => {
                    for &i in &sent {
                        results[i] = Some(Err(e));
                    }
                }
                Ok(conn) => {
                    let slots = conn.send(wire);
                    for (&i, slot) in sent.iter().zip(slots) {
                        let request = &requests[i];
                        results[i] = Some(match slot.wait(deadline) {
                            Ok(reply) => self.decode_response(request, &reply.body).map_err(|e| {
                                log::warn!("undecodable reply ({e}); reconnecting");
                                conn.close();
                                ZkError::MarshallingError
                            }),
                            Err(ZkError::NoNode) if matches!(request, Request::Exists { .. }) => {
                                Ok(Response::Exists(None))
                            }
                            Err(e) => Err(e),
                        });
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(ZkError::ConnectionLoss)))
            .collect()
    }

    /// One request; paths are client paths, as everywhere else. A path or ACL refused
    /// client-side fails the call before anything is sent.
    fn multi(&self, ops: &[MultiOp]) -> ZkResult<Vec<MultiResult>> {
        let mut server_ops = Vec::with_capacity(ops.len());
        let mut create_acls = Vec::new();
        for op in ops {
            server_ops.push(match op {
                MultiOp::Create { path, data, mode } => {
                    crate::paths::validate_create_path(path, mode.is_sequential())
                        .map_err(|_| ZkError::BadArguments)?;
                    create_acls.push(self.acl_for(path)?);
                    MultiOp::Create {
                        path: self.server_path(path),
                        data: data.clone(),
                        mode: *mode,
                    }
                }
                MultiOp::Delete { path, version } => {
                    check_path(path)?;
                    MultiOp::Delete {
                        path: self.server_path(path),
                        version: *version,
                    }
                }
                MultiOp::SetData {
                    path,
                    data,
                    version,
                } => {
                    check_path(path)?;
                    MultiOp::SetData {
                        path: self.server_path(path),
                        data: data.clone(),
                        version: *version,
                    }
                }
                MultiOp::Check { path, version } => {
                    check_path(path)?;
                    MultiOp::Check {
                        path: self.server_path(path),
                        version: *version,
                    }
                }
            });
        }
        let results = self.call(
            WireRequest::Multi {
                ops: server_ops,
                create_acls,
            },
            None,
            records::read_multi,
        )?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                MultiResult::Create(path, stat) => {
                    MultiResult::Create(self.client_path(&path), stat)
                }
                other => other,
            })
            .collect())
    }

    /// Queued and written like any request, on the connection of now; no connection now is
    /// `ConnectionLoss` at once (the caller does not wait for one).
    fn delete_unawaited(&self, path: &str, done: DeleteDone) {
        if let Err(e) = check_path(path) {
            return done(Err(e));
        }
        let request = WireRequest::Delete {
            path: self.server_path(path),
            version: -1,
        };
        match self.core.connection(Instant::now()) {
            Ok(conn) => conn.send_unawaited(request, Box::new(move |reply| done(reply.map(drop)))),
            Err(e) => done(Err(e)),
        }
    }

    /// `multi` is one request.
    fn has_multi(&self) -> bool {
        true
    }

    /// Create2 is one request.
    fn call_timeout(&self) -> Option<std::time::Duration> {
        Some(self.call_timeout)
    }

    fn ready_to_send(&self) -> bool {
        self.core.connection_now().is_some()
    }

    fn has_create2(&self) -> bool {
        true
    }

    /// SetWatches re-registers every outstanding watch on a reconnect of the same session.
    fn restores_watches(&self) -> bool {
        true
    }

    /// The connect string's hosts (sorted) and its chroot.
    fn server_root(&self) -> Option<crate::client::ServerRoot> {
        let (hosts, chroot) = parse_connect_string(&self.connect_string).ok()?;
        let ensemble = crate::client::server_root::ensemble_of_hosts(&hosts);
        Some(crate::client::ServerRoot::new(ensemble, chroot.as_deref()))
    }

    fn session(&self) -> &Session {
        &self.core.session
    }

    /// Sends closeSession (waiting at most the call timeout for the answer on a frozen link),
    /// then stops every thread of this client. closeSession is skipped when it cannot be
    /// written within that time (a caller's write blocked on a full socket holds the link):
    /// the server then expires the session.
    fn close(&self) {
        let Some(conn) = self.core.mark_closed() else {
            self.core.shut_down();
            return;
        };
        let deadline = deadline_after(self.call_timeout);
        match conn.send_if_free(WireRequest::CloseSession, deadline) {
            Some(slot) => drop(slot.wait(deadline)),
            None => log::warn!(
                "zk-locks native: closeSession could not be sent within the call timeout; \
                 the server will expire the session"
            ),
        }
        self.core.shut_down();
    }
}
