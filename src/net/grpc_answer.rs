//! The server's gRPC answers (grpc/grpc's `doc/PROTOCOL-HTTP2.md`): a
//! request with `content-type: application/grpc` over HTTP/2 has its
//! message read whole, goes through the same model as any request, and
//! is answered `:status 200` with its message and the trailer
//! `grpc-status: 0`, or, refused, Trailers-Only: one HEADERS frame with
//! END_STREAM holding `grpc-status`, `grpc-message` and, for overload,
//! the server's pushback. Which code a refusal gets is the model's
//! ([`crate::model::grpc_status`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode, Version};

use super::endpoint::text as plain;
use crate::model::grpc::{self, Code, MESSAGE_HEADER, STATUS_HEADER};
use crate::model::grpc_status::{self, Fate, Overload, Status, served_message};
use crate::model::outcome::PUSHBACK_HEADER;

/// Every answer's body: a plain one, or a gRPC message with trailers.
pub(super) type AnswerBody = Either<Full<Bytes>, Trailed>;

/// A gRPC request's message is read up to this size; a longer one is
/// answered `RESOURCE_EXHAUSTED`, as gRPC servers answer a message over
/// their limit (4 MiB in grpc-go and C-core).
const MAX_MESSAGE: usize = 4 << 20;

/// Whether `req` is a gRPC call: its content type is `application/grpc`,
/// alone or with a codec (`application/grpc+proto`).
pub(super) fn is_grpc<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix(grpc::CONTENT_TYPE))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['+', ';']))
}

/// How a server answers gRPC: the code of overload, a failing
/// backend's HTTP status (mapped), and its pushback, if any.
pub(super) struct Grpc {
    /// The code of a refusal for overload.
    pub(super) overload: Overload,
    /// The HTTP status of a failing backend's failures.
    pub(super) fail_status: u16,
    /// `grpc-retry-pushback-ms`'s value, sent with refusals for overload.
    pub(super) pushback: Option<HeaderValue>,
}

impl Grpc {
    /// Answers the gRPC call `req`: its method's path checked (else
    /// `UNIMPLEMENTED`), its message read and unframed (else `INTERNAL`),
    /// then `serve`d (admitted into the model and waited on), and answered
    /// as the model decides.
    pub(super) async fn answer<F>(
        &self,
        req: Request<Incoming>,
        serve: impl FnOnce() -> F,
    ) -> Response<AnswerBody>
    where
        F: Future<Output = Fate>,
    {
        // gRPC's answer ends with trailers, which HTTP/1.1 cannot carry: 505,
        // which gRPC clients map to UNKNOWN and do not retry, since a retry
        // by the same protocol would fare no better.
        if req.version() != Version::HTTP_2 {
            return plain(
                StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                "gRPC needs HTTP/2 (prior knowledge in clear, or h2 by ALPN over TLS)\n",
            )
            .map(Either::Left);
        }
        let path = req.uri().path().to_string();
        if grpc::method_path(&path).is_err() {
            return trailers_only(error(Code::Unimplemented, "not a gRPC method"), None);
        }
        // A unary call's handler starts once its message is whole, as gRPC
        // servers start theirs: a client that resets its stream before then
        // never reached the model.
        let body = match http_body_util::Limited::new(req.into_body(), MAX_MESSAGE + 5)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return trailers_only(
                    error(Code::ResourceExhausted, "the message is too large"),
                    None,
                );
            }
            Err(_) => return trailers_only(error(Code::Internal, "the request was cut off"), None),
        };
        match grpc::unframe(&body) {
            Ok(messages) if messages.len() == 1 => {}
            Ok(_) => {
                return trailers_only(
                    error(Code::Internal, "a unary call sends one message"),
                    None,
                );
            }
            Err(grpc::FrameError::Truncated) => {
                return trailers_only(error(Code::Internal, "the message is cut short"), None);
            }
            Err(grpc::FrameError::Compressed) => {
                return trailers_only(error(Code::Internal, "the message is compressed"), None);
            }
        }
        let fate = serve().await;
        let status = grpc_status::status(fate, self.overload, self.fail_status);
        if status.code == Code::Ok {
            return served(&path);
        }
        let pushback = self.pushback.clone().filter(|_| status.pushback);
        trailers_only(status, pushback)
    }
}

/// A status that carries no pushback.
fn error(code: Code, message: &'static str) -> Status {
    Status {
        code,
        message,
        pushback: false,
    }
}

/// The head of every gRPC answer: 200 and the content type.
fn head(body: AnswerBody) -> Response<AnswerBody> {
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(grpc::CONTENT_TYPE));
    resp
}

/// `status`'s fields, as trailers or as Trailers-Only's headers.
fn insert_status(headers: &mut HeaderMap, status: Status, pushback: Option<HeaderValue>) {
    headers.insert(STATUS_HEADER, HeaderValue::from(status.code.number()));
    if !status.message.is_empty() {
        headers.insert(MESSAGE_HEADER, HeaderValue::from_static(status.message));
    }
    if let Some(pushback) = pushback {
        headers.insert(PUSHBACK_HEADER, pushback);
    }
}

/// A served call's answer: the method's message framed, then the
/// trailer `grpc-status: 0`.
fn served(path: &str) -> Response<AnswerBody> {
    let mut trailers = HeaderMap::new();
    insert_status(&mut trailers, error(Code::Ok, ""), None);
    head(Either::Right(Trailed {
        data: Some(Bytes::from(grpc::frame(served_message(path)))),
        trailers: Some(trailers),
    }))
}

/// A Trailers-Only answer: the status in the headers and no body, so
/// hyper sends one HEADERS frame with END_STREAM.
fn trailers_only(status: Status, pushback: Option<HeaderValue>) -> Response<AnswerBody> {
    let mut resp = head(Either::Left(Full::new(Bytes::new())));
    insert_status(resp.headers_mut(), status, pushback);
    resp
}

/// A body of at most one data frame, then trailers.
#[derive(Debug)]
pub(super) struct Trailed {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for Trailed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let frame = match this.data.take() {
            Some(data) => Some(Frame::data(data)),
            None => this.trailers.take().map(Frame::trailers),
        };
        Poll::Ready(frame.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let len = self.data.as_ref().map_or(0, |d| d.len() as u64);
        SizeHint::with_exact(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(content_type: Option<&str>) -> Request<()> {
        let mut req = Request::new(());
        if let Some(v) = content_type {
            req.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_str(v).unwrap());
        }
        req
    }

    #[test]
    fn grpc_is_its_content_type_alone_or_with_a_codec() {
        assert!(is_grpc(&request(Some("application/grpc"))));
        assert!(is_grpc(&request(Some("application/grpc+proto"))));
        assert!(!is_grpc(&request(Some("application/grpc-web"))));
        assert!(!is_grpc(&request(Some("application/json"))));
        assert!(!is_grpc(&request(None)));
    }

    /// Reads every frame of a body: its data, then its trailers.
    fn frames(mut body: Trailed) -> (Vec<Bytes>, Option<HeaderMap>) {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let (mut data, mut trailers) = (Vec::new(), None);
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut body).poll_frame(&mut cx) {
            match frame.into_data() {
                Ok(d) => data.push(d),
                Err(frame) => trailers = frame.into_trailers().ok(),
            }
        }
        assert!(body.is_end_stream());
        (data, trailers)
    }

    #[test]
    fn a_served_health_check_is_serving_framed_then_status_zero() {
        let resp = served("/grpc.health.v1.Health/Check");
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/grpc");
        let Either::Right(body) = resp.into_body() else {
            panic!("a body with trailers");
        };
        assert_eq!(body.size_hint().exact(), Some(7));
        let (data, trailers) = frames(body);
        assert_eq!(data, vec![Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1])]);
        let trailers = trailers.expect("trailers");
        assert_eq!(trailers[STATUS_HEADER], "0");
        assert!(!trailers.contains_key(MESSAGE_HEADER));
    }

    #[test]
    fn a_refusal_is_trailers_only_with_its_pushback() {
        let status = Status {
            code: Code::ResourceExhausted,
            message: "overloaded: queue full",
            pushback: true,
        };
        let resp = trailers_only(status, Some(HeaderValue::from(250)));
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(
            (&h[STATUS_HEADER], &h[MESSAGE_HEADER], &h[PUSHBACK_HEADER]),
            (
                &HeaderValue::from(8),
                &HeaderValue::from_static("overloaded: queue full"),
                &HeaderValue::from(250)
            )
        );
        assert!(resp.body().is_end_stream(), "no DATA frame");
    }
}
