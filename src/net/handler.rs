//! What the server does with each request hyper reads: route it, admit
//! it into the model (or refuse it at once), answer when the model is
//! done, and, as a tier, call inward before answering.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::backlog::Worker;
use super::endpoint::text as plain;
use super::model_actor::{Reply, ToModel};
use super::tier::Caller;
use crate::model::deadline::{GRPC_TIMEOUT_HEADER, decode_grpc_timeout};
use crate::model::outcome::{AMZ_RETRY_AFTER_HEADER, PUSHBACK_HEADER};
use crate::model::server::{OnDisconnect, ServerConfig};
use crate::model::service::Refusal;
use crate::model::tier::TierAnswer;
use crate::policy::format_retry_after;

/// The path that runs through the latency model.
pub const API_PATH: &str = "/api";

/// State shared by all request handlers.
pub(super) struct Handler {
    to_model: mpsc::UnboundedSender<ToModel>,
    next_id: AtomicU64,
    cancel_on_disconnect: bool,
    /// Status, `Retry-After` and `x-amz-retry-after` (the same wait in
    /// milliseconds, the hint botocore 1.44 reads) of a shed request.
    shed: Option<(StatusCode, header::HeaderValue, header::HeaderValue)>,
    /// gRPC's pushback header value, sent with every refusal but a
    /// failing backend's failures.
    pushback: Option<header::HeaderValue>,
    /// As a tier: its calls inward, made once its own work is done.
    tier: Option<Arc<Caller>>,
    /// The status of a failing backend's failures.
    fail_status: StatusCode,
}

impl Handler {
    /// The handlers of a server of `config`, sending work to the model on
    /// `to_model`, and, as a tier, calling inward with `tier`.
    pub(super) fn new(
        config: &ServerConfig,
        to_model: mpsc::UnboundedSender<ToModel>,
        tier: Option<Arc<Caller>>,
    ) -> Handler {
        Handler {
            to_model,
            next_id: AtomicU64::new(0),
            cancel_on_disconnect: config.on_disconnect == OnDisconnect::Cancel,
            tier,
            pushback: config.pushback_ms.map(header::HeaderValue::from),
            fail_status: config.fail.map_or(StatusCode::INTERNAL_SERVER_ERROR, |f| {
                StatusCode::from_u16(f.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }),
            shed: config.shed.map(|s| {
                let (retry_after, amz_retry_after) = retry_after_values(s.retry_after);
                (
                    StatusCode::from_u16(s.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                    retry_after,
                    amz_retry_after,
                )
            }),
        }
    }
}

impl Handler {
    /// hyper's service call. The request is admitted here, synchronously,
    /// because hyper may drop the returned future without ever polling it
    /// when it finds the client already gone (a request read from the
    /// backlog after a pause, say): the request must count all the same.
    pub(super) fn call(
        &self,
        req: Request<Incoming>,
        worker: Option<Worker>,
    ) -> impl Future<Output = Result<Response<Full<Bytes>>, Infallible>> + use<> {
        let tier = self.tier.clone();
        let deadline = tier
            .as_ref()
            .filter(|t| t.reads_deadlines())
            .and_then(|_| req.headers().get(GRPC_TIMEOUT_HEADER))
            .and_then(|v| decode_grpc_timeout(v.to_str().ok()?).ok())
            .map(|left| Instant::now() + left);
        // Work whose caller's deadline has passed is not started.
        let admission = match &tier {
            Some(t) if t.expired(deadline) => {
                Admission::Answer(plain(StatusCode::GATEWAY_TIMEOUT, "deadline exceeded\n"))
            }
            _ => self.admit(&req, worker),
        };
        let shed = self.shed.clone();
        let pushback = self.pushback.clone();
        let fail_status = self.fail_status;
        async move {
            let (done, guard) = match admission {
                Admission::Answer(response) => return Ok(response),
                Admission::Wait { done, guard } => (done, guard),
            };
            let reply = done.await;
            // Answered (or shut down): nothing left to cancel.
            if let Some(mut guard) = guard {
                guard.armed = false;
            }
            // A failure is an error, not a push-back: no pushback, no
            // Retry-After.
            let refused = matches!(reply, Ok(Reply::Refused(why)) if why != Refusal::Failed);
            Ok(match (reply, &shed) {
                (Ok(Reply::Done), _) => match tier {
                    None => plain(StatusCode::OK, "OK"),
                    Some(tier) => answer(tier.call(deadline).await),
                },
                (Ok(Reply::Refused(Refusal::Failed)), _) => {
                    plain(fail_status, refusal_body(Refusal::Failed))
                }
                (
                    Ok(Reply::Refused(Refusal::Shed)),
                    Some((status, retry_after, amz_retry_after)),
                ) => {
                    let mut resp = plain(*status, "overloaded, retry later\n");
                    resp.headers_mut()
                        .insert(header::RETRY_AFTER, retry_after.clone());
                    resp.headers_mut()
                        .insert(AMZ_RETRY_AFTER_HEADER, amz_retry_after.clone());
                    resp
                }
                (Ok(Reply::Refused(why)), _) => {
                    plain(StatusCode::SERVICE_UNAVAILABLE, refusal_body(why))
                }
                (Err(_), _) => plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
            })
            .map(|mut resp| {
                if let (Some(pushback), true) = (&pushback, refused) {
                    resp.headers_mut().insert(PUSHBACK_HEADER, pushback.clone());
                }
                resp
            })
        }
    }

    /// Routes a request: answered at once, or admitted into the model
    /// (with its connection's worker, for a pool waiting in the backlog).
    fn admit(&self, req: &Request<Incoming>, worker: Option<Worker>) -> Admission {
        if req.uri().path() != API_PATH {
            return Admission::Answer(plain(StatusCode::NOT_FOUND, "not found\n"));
        }
        if req.method() != Method::GET {
            let mut resp = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            resp.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            return Admission::Answer(resp);
        }
        let stamp = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, done) = oneshot::channel();
        if self
            .to_model
            .send(ToModel::Admit {
                id,
                stamp,
                reply,
                worker,
            })
            .is_err()
        {
            return Admission::Answer(plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"));
        }
        let guard = self.cancel_on_disconnect.then(|| CancelOnDrop {
            id,
            to_model: self.to_model.clone(),
            armed: true,
        });
        Admission::Wait { done, guard }
    }
}

/// What the synchronous part of a service call decided.
enum Admission {
    /// Answer at once (unknown path, wrong method, shutting down).
    Answer(Response<Full<Bytes>>),
    /// Admitted into the model: wait on `done`; `guard` cancels the work if
    /// dropped first (in `cancel` mode).
    Wait {
        done: oneshot::Receiver<Reply>,
        guard: Option<CancelOnDrop>,
    },
}

/// Tells the model that a request's client has gone, when dropped (hyper
/// drops the handler's future when it notices the client has gone).
struct CancelOnDrop {
    id: u64,
    to_model: mpsc::UnboundedSender<ToModel>,
    /// Cleared once the request is answered.
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.to_model.send(ToModel::Cancel { id: self.id });
        }
    }
}

/// The body of a refusal that says which defence turned the request away
/// (or that a failing backend failed it).
fn refusal_body(why: Refusal) -> &'static str {
    match why {
        Refusal::Failed => "failed (--fail-rate)\n",
        Refusal::Shed => "overloaded, retry later\n",
        Refusal::Full => "overloaded: queue full\n",
        Refusal::Limited => "overloaded: concurrency limit\n",
        Refusal::Rejected => "overloaded: denied by admission control\n",
        Refusal::Expired => "overloaded: timed out in the queue\n",
        // Not sent: a pool waiting in the backlog accepts a connection only
        // when a worker is free.
        Refusal::Unaccepted => "overloaded: backlog full\n",
    }
}

/// A tier's answer once its call inward has ended.
fn answer(answer: TierAnswer) -> Response<Full<Bytes>> {
    match answer {
        TierAnswer::Ok => plain(StatusCode::OK, "OK"),
        TierAnswer::Unavailable => {
            plain(StatusCode::SERVICE_UNAVAILABLE, "the call inward failed\n")
        }
        TierAnswer::GatewayTimeout => {
            plain(StatusCode::GATEWAY_TIMEOUT, "the call inward timed out\n")
        }
    }
}

/// The values of `Retry-After` and of `x-amz-retry-after` (the same wait
/// in whole milliseconds, the hint botocore 1.44 reads) for `wait`.
pub(super) fn retry_after_values(wait: Duration) -> (header::HeaderValue, header::HeaderValue) {
    let value = format_retry_after(wait);
    (
        header::HeaderValue::from_str(&value).expect("digits are a valid header value"),
        header::HeaderValue::from(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
    )
}
