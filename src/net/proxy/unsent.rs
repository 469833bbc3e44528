//! A request handed to the pooled client that the proxy can take back for
//! as long as none of it has been written to the target. Its client may
//! go while it waits for a connection (a new one's handshake, a target
//! slow to accept, or before hyper has seen its client's FIN behind it);
//! it should then reach the target with its client's departure
//! ([`super::departure`]), as it would have reached a stopped target,
//! rather than be dropped unsent.
//!
//! hyper looks at a request's body only as it writes the request: it asks
//! whether the body is empty right before it writes the head, and the
//! pooled client before it does nothing with the body. A body never
//! looked at is a request not begun: the body handed to the client
//! ([`Lent`]) marks the first look, and the proxy takes the request back
//! ([`Unsent::take_back`]) only before it. The proxy runs on one thread,
//! so nothing writes the request between the take-back and the pooled
//! request's drop that follows it.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use hyper::Request;
use hyper::body::{Body, Frame, SizeHint};
use hyper::http::request::Parts;

/// The body, until it is taken back, and whether hyper looked at it.
struct Slot<B> {
    body: Option<B>,
    looked_at: bool,
}

type Shared<B> = Arc<Mutex<Slot<B>>>;

fn lock<B>(slot: &Shared<B>) -> MutexGuard<'_, Slot<B>> {
    slot.lock().expect("unsent lock poisoned")
}

/// The body handed to the pooled client: marks when hyper first looks at
/// it.
pub(super) struct Lent<B>(Shared<B>);

/// What the proxy keeps of a request handed to the pooled client: a copy
/// of its head, and its body's slot.
pub(super) struct Unsent<B> {
    head: Parts,
    slot: Shared<B>,
}

/// `req` to hand to the pooled client, and what takes it back.
pub(super) fn lend<B>(req: Request<B>) -> (Request<Lent<B>>, Unsent<B>) {
    let (parts, body) = req.into_parts();
    let mut head = Request::new(()).into_parts().0;
    head.method = parts.method.clone();
    head.uri = parts.uri.clone();
    head.version = parts.version;
    head.headers = parts.headers.clone();
    let slot = Arc::new(Mutex::new(Slot {
        body: Some(body),
        looked_at: false,
    }));
    let lent = Request::from_parts(parts, Lent(slot.clone()));
    (lent, Unsent { head, slot })
}

impl<B> Unsent<B> {
    /// The request whole again, if hyper has not begun to write it.
    pub(super) fn take_back(self) -> Option<Request<B>> {
        let body = {
            let mut slot = lock(&self.slot);
            if slot.looked_at {
                return None;
            }
            slot.body.take()?
        };
        Some(Request::from_parts(self.head, body))
    }
}

impl<B: Body + Unpin> Body for Lent<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut slot = lock(&self.0);
        slot.looked_at = true;
        match slot.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let mut slot = lock(&self.0);
        slot.looked_at = true;
        slot.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let mut slot = lock(&self.0);
        slot.looked_at = true;
        slot.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};

    fn request() -> Request<Full<Bytes>> {
        Request::put("http://127.0.0.1:8000/api?x=1")
            .header("x-custom", "kept")
            .body(Full::new(Bytes::from_static(b"body")))
            .unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_never_looked_at_comes_back_whole() {
        let (lent, unsent) = lend(request());
        drop(lent);
        let back = unsent.take_back().expect("not begun");
        assert_eq!(back.method(), "PUT");
        assert_eq!(back.uri(), "http://127.0.0.1:8000/api?x=1");
        assert_eq!(back.headers()["x-custom"], "kept");
        let body = back.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "body");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn once_hyper_looks_at_the_body_the_request_stays_with_it() {
        let looks: [fn(&Lent<Full<Bytes>>); 2] = [
            |lent| {
                lent.is_end_stream();
            },
            |lent| {
                lent.size_hint();
            },
        ];
        for look in looks {
            let (lent, unsent) = lend(request());
            look(lent.body());
            assert!(unsent.take_back().is_none());
        }
        let (lent, unsent) = lend(request());
        let body = lent.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "body", "the body goes through as it is");
        assert!(unsent.take_back().is_none());
    }
}
