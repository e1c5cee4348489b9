//! Keeping a client's HTTP/1.1 keep-alive connection usable after an answer given before the
//! request's body was read.
//!
//! Many answers come before the body is read: a wrong key (401), the ingress limit (429), a
//! body over the route's limit (413, after reading only up to the limit), a missing route, a
//! 408. hyper then reads what is already buffered, and if the body is not all there it closes
//! the connection after the response — without saying `Connection: close`. A client that
//! reuses the connection (every pooled client does) sends its next request into a closed
//! socket and fails it. So [`keep_alive`] wraps every request's body to know whether it was
//! read to its end; when it was not, it reads and discards the rest, up to
//! [`DRAIN_MAX_BYTES`] within [`DRAIN_MAX_WAIT`], so the connection carries the next request;
//! a body larger or slower than that (or one the client waits to send, `Expect:
//! 100-continue`, or the body of a 408) is not read and the answer says `Connection: close`,
//! as RFC 9112 §9.6 asks of a server that closes.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Version};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// The most of a refused request's unread body read and discarded to keep its connection
/// (bytes): enough for any single delivery or message over its limit (256 KiB by default) or a
/// few MB of a refused batch; a larger rest costs the connection instead.
pub const DRAIN_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The longest the rest of a refused request's body is waited for (then `Connection: close`):
/// a client that stops sending does not hold the answer up longer.
pub const DRAIN_MAX_WAIT: Duration = Duration::from_secs(2);

/// The request body, shared between the handler (through [`Shared`]) and [`keep_alive`], which
/// takes back what the handler left unread. `done` once the body reached its end.
struct Slot {
    body: Option<Body>,
    done: bool,
}

/// The handler's view of the request body: reads from the shared [`Slot`].
struct Shared(Arc<Mutex<Slot>>);

impl HttpBody for Shared {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut slot = self.0.lock().expect("body slot lock poisoned");
        let Some(body) = slot.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || body.is_end_stream() {
            slot.done = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let slot = self.0.lock().expect("body slot lock poisoned");
        slot.done || slot.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let slot = self.0.lock().expect("body slot lock poisoned");
        slot.body
            .as_ref()
            .map_or_else(|| http_body::SizeHint::with_exact(0), |b| b.size_hint())
    }
}

/// Middleware (the outermost layer of [`crate::app`]): runs the request with its body
/// wrapped, then, on an HTTP/1.x connection, if the body was not read to its end, reads and
/// discards the rest ([`drain`]) or, when that is not possible within the bounds above, marks
/// the answer `Connection: close`. Costs one mutex per body frame; nothing else changes for a
/// request whose body was read.
pub(crate) async fn keep_alive(req: Request, next: Next) -> Response {
    let http1 = matches!(req.version(), Version::HTTP_10 | Version::HTTP_11);
    let expects_continue = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (parts, body) = req.into_parts();
    let done = body.is_end_stream();
    let slot = Arc::new(Mutex::new(Slot {
        body: Some(body),
        done,
    }));
    let req = Request::from_parts(parts, Body::new(Shared(slot.clone())));
    let mut response = next.run(req).await;
    if !http1 {
        return response;
    }
    let rest = {
        let mut s = slot.lock().expect("body slot lock poisoned");
        if s.done {
            None
        } else {
            s.body.take()
        }
    };
    let Some(rest) = rest else {
        return response;
    };
    // A 408 answers a body that stopped arriving, and a client waiting for `100 Continue` has
    // not sent its body: reading either would only wait.
    let drained = response.status() != axum::http::StatusCode::REQUEST_TIMEOUT
        && !expects_continue
        && drain(rest).await;
    if !drained {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Reads `body` to its end and discards it; `true` if it ended within [`DRAIN_MAX_BYTES`] and
/// [`DRAIN_MAX_WAIT`], `false` if it was larger, slower, or failed.
async fn drain(body: Body) -> bool {
    use http_body_util::BodyExt;
    let limited = http_body_util::Limited::new(body, DRAIN_MAX_BYTES);
    matches!(
        tokio::time::timeout(DRAIN_MAX_WAIT, limited.collect()).await,
        Ok(Ok(_))
    )
}
