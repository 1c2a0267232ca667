//! The pipeline's translation: a [`Request`] (client paths, no watch) into its wire record
//! (server paths, ACLs, checked paths), and a reply's body back into its [`Response`].

use super::jute::DecodeResult;
use super::records::{decode_all, read_create2, read_data, read_stat, WireRequest};
use super::watches::from_server;
use super::{check_path, version, NativeClient};
use crate::client::{Request, Response, ZkError, ZkResult};

impl NativeClient {
    /// The wire record of a pipelined request (checked, with its ACL, on server paths).
    pub(super) fn wire_request(&self, request: &Request) -> ZkResult<WireRequest> {
        Ok(match request {
            Request::Create { path, data, mode } => {
                crate::paths::validate_create_path(path, mode.is_sequential())
                    .map_err(|_| ZkError::BadArguments)?;
                WireRequest::Create {
                    acl: self.acl_for(path)?,
                    path: self.server_path(path),
                    data: data.clone(),
                    mode: *mode,
                }
            }
            Request::Delete { path, version: v } => {
                check_path(path)?;
                WireRequest::Delete {
                    path: self.server_path(path),
                    version: version(*v),
                }
            }
            Request::Exists { path } => {
                check_path(path)?;
                WireRequest::Exists {
                    path: self.server_path(path),
                    watch: false,
                }
            }
            Request::GetData { path } => {
                check_path(path)?;
                WireRequest::GetData {
                    path: self.server_path(path),
                    watch: false,
                }
            }
            Request::GetChildren { path } => {
                check_path(path)?;
                WireRequest::GetChildren {
                    path: self.server_path(path),
                    watch: false,
                }
            }
            Request::SetData {
                path,
                data,
                version: v,
            } => {
                check_path(path)?;
                WireRequest::SetData {
                    path: self.server_path(path),
                    data: data.clone(),
                    version: version(*v),
                }
            }
        })
    }

    /// The pipelined request's reply body as its [`Response`] (client paths).
    pub(super) fn decode_response(&self, request: &Request, body: &[u8]) -> DecodeResult<Response> {
        decode_response(self.chroot.as_deref(), request, body)
    }
}

/// A pipelined request's reply body as its [`Response`], with paths under `chroot` made client
/// paths.
pub(super) fn decode_response(
    chroot: Option<&str>,
    request: &Request,
    body: &[u8],
) -> DecodeResult<Response> {
    Ok(match request {
        Request::Create { .. } => {
            let (path, stat) = decode_all(body, read_create2)?;
            Response::Create(from_server(chroot, &path), stat)
        }
        Request::Delete { .. } => Response::Delete,
        Request::Exists { .. } => Response::Exists(Some(decode_all(body, read_stat)?)),
        Request::GetData { .. } => {
            let (data, stat) = decode_all(body, read_data)?;
            Response::GetData(data, stat)
        }
        Request::GetChildren { .. } => Response::GetChildren(decode_all(body, |r| r.strings())?),
        Request::SetData { .. } => Response::SetData(decode_all(body, read_stat)?),
    })
}
