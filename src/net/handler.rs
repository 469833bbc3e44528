//! What the server does with each request hyper reads: route it, admit
//! it into the model (or refuse it at once), answer when the model is
//! done, and, as a tier, call inward before answering.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::backlog::Worker;
use super::endpoint::text as plain;
use super::grpc_answer::{self, AnswerBody, Grpc};
use super::model_actor::{Reply, ToModel};
use super::tier::Caller;
use crate::model::deadline::{GRPC_TIMEOUT_HEADER, decode_grpc_timeout};
use crate::model::grpc_status::Fate;
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
    /// How gRPC calls are answered.
    grpc: Grpc,
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
            grpc: Grpc {
                overload: config.grpc_overload,
                fail_status: config.fail.map_or(500, |f| f.status),
                pushback: config.pushback_ms.map(header::HeaderValue::from),
            },
        }
    }
}

impl Handler {
    /// hyper's service call. A plain request is admitted here,
    /// synchronously, because hyper may drop the returned future without
    /// ever polling it when it finds the client already gone (a request
    /// read from the backlog after a pause, say): the request must count
    /// all the same. A gRPC call is admitted once its message is whole
    /// ([`Grpc::answer`]).
    pub(super) fn call(
        self: &Arc<Self>,
        req: Request<Incoming>,
        worker: Option<Worker>,
    ) -> impl Future<Output = Result<Response<AnswerBody>, Infallible>> + use<> {
        let deadline = self
            .tier
            .as_ref()
            .filter(|t| t.reads_deadlines())
            .and_then(|_| req.headers().get(GRPC_TIMEOUT_HEADER))
            .and_then(|v| decode_grpc_timeout(v.to_str().ok()?).ok())
            .map(|left| Instant::now() + left);
        let route = if grpc_answer::is_grpc(&req) {
            Route::Grpc(req, worker)
        } else {
            self.route(&req, worker, deadline)
        };
        let handler = self.clone();
        async move {
            Ok(match route {
                Route::Grpc(req, worker) => {
                    let serve = || handler.serve(worker, deadline);
                    handler.grpc.answer(req, serve).await
                }
                Route::Answer(resp) => resp.map(Either::Left),
                Route::Entered(entered) => {
                    let fate = handler.settle(entered, deadline).await;
                    handler.http_answer(fate).map(Either::Left)
                }
            })
        }
    }

    /// Routes a plain request: answered at once, or into the model (with
    /// its connection's worker, for a pool waiting in the backlog).
    fn route(
        &self,
        req: &Request<Incoming>,
        worker: Option<Worker>,
        deadline: Option<Instant>,
    ) -> Route {
        if req.uri().path() != API_PATH {
            return Route::Answer(plain(StatusCode::NOT_FOUND, "not found\n"));
        }
        if req.method() != Method::GET {
            let mut resp = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            resp.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            return Route::Answer(resp);
        }
        Route::Entered(self.enter(worker, deadline))
    }

    /// Admits a request into the model and waits for its fate there (and,
    /// as a tier, for its call inward's).
    async fn serve(&self, worker: Option<Worker>, deadline: Option<Instant>) -> Fate {
        self.settle(self.enter(worker, deadline), deadline).await
    }

    /// Sends a request into the model, or says at once why not: as a
    /// tier, work whose caller's deadline has passed is not started.
    fn enter(&self, worker: Option<Worker>, deadline: Option<Instant>) -> Result<Waiting, Fate> {
        if self.tier.as_ref().is_some_and(|t| t.expired(deadline)) {
            return Err(Fate::DeadlinePassed);
        }
        let stamp = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, done) = oneshot::channel();
        let admit = ToModel::Admit {
            id,
            stamp,
            reply,
            worker,
        };
        if self.to_model.send(admit).is_err() {
            return Err(Fate::ShuttingDown);
        }
        let guard = self.cancel_on_disconnect.then(|| CancelOnDrop {
            id,
            to_model: self.to_model.clone(),
            armed: true,
        });
        Ok(Waiting { done, guard })
    }

    /// Waits for the model's answer to a request `entered`, then, as a
    /// tier, makes its call inward.
    async fn settle(&self, entered: Result<Waiting, Fate>, deadline: Option<Instant>) -> Fate {
        let Waiting { done, guard } = match entered {
            Ok(waiting) => waiting,
            Err(fate) => return fate,
        };
        let reply = done.await;
        // Answered (or shut down): nothing left to cancel.
        if let Some(mut guard) = guard {
            guard.armed = false;
        }
        match reply {
            Ok(Reply::Done) => match &self.tier {
                None => Fate::Served,
                Some(tier) => match tier.call(deadline).await {
                    TierAnswer::Ok => Fate::Served,
                    inward => Fate::Inward(inward),
                },
            },
            Ok(Reply::Refused(why)) => Fate::Refused(why),
            Err(_) => Fate::ShuttingDown,
        }
    }

    /// The HTTP answer to a request that met `fate`. A failure is an
    /// error, not a push-back: no pushback, no Retry-After.
    fn http_answer(&self, fate: Fate) -> Response<Full<Bytes>> {
        let mut resp = match (fate, &self.shed) {
            (Fate::Served, _) => plain(StatusCode::OK, "OK"),
            (Fate::Refused(Refusal::Failed), _) => {
                plain(self.fail_status, refusal_body(Refusal::Failed))
            }
            (Fate::Refused(Refusal::Shed), Some((status, retry_after, amz_retry_after))) => {
                let mut resp = plain(*status, "overloaded, retry later\n");
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, retry_after.clone());
                resp.headers_mut()
                    .insert(AMZ_RETRY_AFTER_HEADER, amz_retry_after.clone());
                resp
            }
            (Fate::Refused(why), _) => plain(StatusCode::SERVICE_UNAVAILABLE, refusal_body(why)),
            (Fate::Inward(inward), _) => answer(inward),
            (Fate::DeadlinePassed, _) => plain(StatusCode::GATEWAY_TIMEOUT, "deadline exceeded\n"),
            (Fate::ShuttingDown, _) => plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
        };
        let refused = matches!(fate, Fate::Refused(why) if why != Refusal::Failed);
        if let (Some(pushback), true) = (&self.pushback, refused) {
            resp.headers_mut().insert(PUSHBACK_HEADER, pushback.clone());
        }
        resp
    }
}

/// What the synchronous part of a service call decided.
enum Route {
    /// Answer at once (unknown path, wrong method).
    Answer(Response<Full<Bytes>>),
    /// Sent into the model, or told at once why not.
    Entered(Result<Waiting, Fate>),
    /// A gRPC call, admitted once its message is read.
    Grpc(Request<Incoming>, Option<Worker>),
}

/// A request in the model: wait on `done`; `guard` cancels the work if
/// dropped first (in `cancel` mode).
pub(super) struct Waiting {
    done: oneshot::Receiver<Reply>,
    guard: Option<CancelOnDrop>,
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
