//! A [`ZkClient::pipeline`]'s requests and responses, and the default pipeline's one step (a
//! request run through the plain trait methods).

use super::{CreateMode, Stat, ZkClient, ZkError, ZkResult};

/// One request of a [`ZkClient::pipeline`]: the watch-free operations, by value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// [`ZkClient::create2`].
    Create {
        /// Path (with the sequence prefix for sequential modes).
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Mode.
        mode: CreateMode,
    },
    /// [`ZkClient::delete`].
    Delete {
        /// Path.
        path: String,
        /// Expected version; `None` for any.
        version: Option<i32>,
    },
    /// [`ZkClient::exists`].
    Exists {
        /// Path.
        path: String,
    },
    /// [`ZkClient::get_data`] without a watch.
    GetData {
        /// Path.
        path: String,
    },
    /// [`ZkClient::get_children`] without a watch.
    GetChildren {
        /// Path.
        path: String,
    },
    /// [`ZkClient::set_data`].
    SetData {
        /// Path.
        path: String,
        /// Data.
        data: Vec<u8>,
        /// Expected version; `None` for any.
        version: Option<i32>,
    },
}

/// The result of one [`Request`] of a pipeline, same variant order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Response {
    /// The created node's actual path and its `Stat`.
    Create(String, Stat),
    /// Deleted.
    Delete,
    /// The node's `Stat`, or `None` when it does not exist.
    Exists(Option<Stat>),
    /// The node's data and `Stat`.
    GetData(Vec<u8>, Stat),
    /// The child names (unsorted).
    GetChildren(Vec<String>),
    /// The node's new `Stat`.
    SetData(Stat),
}

/// Runs each item in order with `run`, as a pipeline on one connection goes: once one fails
/// with an unknown outcome, a lost session or a closed client (its connection is gone), the
/// ones behind it get that failure unsent.
pub(super) fn one_by_one<T>(
    items: impl IntoIterator<Item = T>,
    mut run: impl FnMut(T) -> ZkResult<Response>,
) -> Vec<ZkResult<Response>> {
    let mut link_failure = None;
    items
        .into_iter()
        .map(|item| {
            if let Some(code) = link_failure {
                return Err(code);
            }
            let result = run(item);
            if let Err(code) = result {
                if code.is_retryable() || code.is_session_loss() || code == ZkError::Closed {
                    link_failure = Some(code);
                }
            }
            result
        })
        .collect()
}

/// Runs one pipeline request through the plain trait methods (the default pipeline).
pub(super) fn run_one<C: ZkClient + ?Sized>(client: &C, request: &Request) -> ZkResult<Response> {
    Ok(match request {
        Request::Create { path, data, mode } => {
            let (path, stat) = client.create2(path, data, *mode)?;
            Response::Create(path, stat)
        }
        Request::Delete { path, version } => {
            client.delete(path, *version)?;
            Response::Delete
        }
        Request::Exists { path } => Response::Exists(client.exists(path)?),
        Request::GetData { path } => {
            let (data, stat) = client.get_data(path, None)?;
            Response::GetData(data, stat)
        }
        Request::GetChildren { path } => Response::GetChildren(client.get_children(path, None)?),
        Request::SetData {
            path,
            data,
            version,
        } => Response::SetData(client.set_data(path, data, *version)?),
    })
}
