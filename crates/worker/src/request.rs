//! Sending one signed request: the Standard Webhooks headers (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature`, signed at the attempt), a delivery's channel's own
//! headers and `Authorization` (never an alert's), the target check, and what
//! the request observed ([`Sent`]). Error texts never carry the endpoint's URL (its path or query
//! may carry a token): reqwest's URL is stripped and the endpoint named by its origin.

use crate::http::{is_blocked, url_free_error};
use crate::worker::Worker;
use breakwater_core::channels::{Auth, Headers};
use breakwater_core::deliveries::Dispatch;
use breakwater_core::outcome::{is_redirect, redirect_note, Observed};
use breakwater_core::{signing, targets};
use chrono::Utc;
use std::time::Duration;

/// What one HTTP request observed.
#[derive(Debug)]
pub(crate) struct Sent {
    /// The observation, for [`breakwater_core::outcome::classify`].
    pub(crate) observed: Observed,
    /// The start of the response body, if any (lossy UTF-8, no NULs).
    pub(crate) excerpt: Option<String>,
    /// Error text when the request failed without a status.
    pub(crate) error: Option<String>,
    /// The raw `Retry-After` header, if any.
    pub(crate) retry_after: Option<String>,
    /// For a timeout, the limit that fired: the connect timeout (reqwest's, wall time) or the
    /// request's own (running time, [`crate::stall::StallWatch::run_for`]); what
    /// [`breakwater_core::outcome::stall_excuses`] compares the node's running time with.
    pub(crate) limit: Option<Duration>,
    /// Whether the attempt failed at the channel's OAuth2 token endpoint, before any request to
    /// the channel's URL ([`Sent::token_failed`]): it counts for the channel, not for the host
    /// of its URL ([`breakwater_core::circuit::AttemptResult::token_failure`]).
    pub(crate) token_failure: bool,
}

impl Sent {
    /// A request that failed before any response.
    pub(crate) fn failed(observed: Observed, error: String) -> Self {
        Sent {
            observed,
            excerpt: None,
            error: Some(error),
            retry_after: None,
            limit: None,
            token_failure: false,
        }
    }

    /// An attempt that failed at the channel's OAuth2 token endpoint (`error`: `oauth2 token
    /// endpoint <origin>/…: …`, [`crate::oauth2`]); no request went to the channel's URL.
    pub(crate) fn token_failed(error: String) -> Self {
        Sent {
            token_failure: true,
            ..Sent::failed(Observed::Other, error)
        }
    }

    /// A request that did not finish within `budget` of this node's running time (`waited`:
    /// the wall time it was given, longer when the node stood still meanwhile). The error names
    /// the endpoint by its origin only.
    pub(crate) fn timed_out(url: &str, budget: Duration, waited: Duration) -> Self {
        let origin = url::Url::parse(url)
            .map(|u| format!("{}/…", u.origin().ascii_serialization()))
            .unwrap_or_else(|_| "the endpoint".into());
        let mut error = format!(
            "{origin}: no complete response within {} ms",
            budget.as_millis()
        );
        if waited > budget + Duration::from_millis(50) {
            error.push_str(&format!(
                " of this node's running time ({} ms with its stalls)",
                waited.as_millis()
            ));
        }
        Sent {
            limit: Some(budget),
            ..Sent::failed(Observed::Timeout, error)
        }
    }
}

/// A [`Sent`] for a request error (connect, timeout, blocked target, other). The error text
/// never contains the URL (its path or query may carry a token): reqwest's URL is stripped and
/// the endpoint named by its origin.
/// A reqwest timeout is its connect timeout (the client sets no other): `connect_timeout` is
/// the limit that fired.
fn observe(e: reqwest::Error, connect_timeout: Duration) -> Sent {
    let observed = observe_error(&e);
    Sent {
        limit: (observed == Observed::Timeout).then_some(connect_timeout),
        ..Sent::failed(observed, url_free_error(e))
    }
}

/// The JSON body sent for a delivery: the Standard Webhooks envelope
/// `{"type": <event type>, "timestamp": <accepted at, RFC 3339>, "data": <payload>}`, with the
/// payload spliced in as the exact JSON text the tenant sent (never re-encoded: numbers keep
/// their precision, keys their order).
pub(crate) fn body(d: &Dispatch) -> Vec<u8> {
    let event_type = serde_json::to_string(&d.event_type).expect("strings serialize");
    let timestamp = serde_json::to_string(&d.created_at).expect("timestamps serialize");
    format!(
        r#"{{"type":{event_type},"timestamp":{timestamp},"data":{}}}"#,
        d.payload
    )
    .into_bytes()
}

/// The `Authorization` a delivery request carries (its channel's `auth`; the OAuth2 token is
/// fetched before). Sent marked sensitive (never in debug output, not indexed by HPACK).
pub(crate) enum Authorization<'a> {
    /// HTTP Basic (RFC 7617).
    Basic(&'a str, &'a str),
    /// `Bearer <token>` (RFC 6750): a static token, or an OAuth2 access token.
    Bearer(&'a str),
}

/// One signed POST: where it goes, its `webhook-id`, the secrets it is signed with (the current
/// one first; see [`signing::sign_all`]), its JSON body, and for a delivery its channel's own
/// headers and auth (an alert carries none).
pub(crate) struct Signed<'a> {
    /// The endpoint.
    pub(crate) url: &'a str,
    /// The `webhook-id` header, also signed (stable across attempts, for the receiver's dedup).
    pub(crate) webhook_id: &'a str,
    /// Signing secrets (`whsec_…`), at least one.
    pub(crate) secrets: &'a [&'a str],
    /// The body, sent as `application/json`.
    pub(crate) body: Vec<u8>,
    /// The channel's custom headers (checked when set: no reserved name can collide with ours).
    pub(crate) headers: Option<&'a Headers>,
    /// The channel's `Authorization`.
    pub(crate) authorization: Option<Authorization<'a>>,
}

/// Sends one signed request, the only place the Standard Webhooks headers are made: checks the
/// target (unless private targets are allowed: a literal internal IP never reaches the
/// resolver, so it is refused here), signs the body now (at the attempt, so the timestamp is
/// fresh) and posts it with `content-type`, `webhook-id`, `webhook-timestamp` and
/// `webhook-signature`. Returns the response, its body unread, or, when no response came, the
/// failed [`Sent`] (blocked target, signing failure, or the request error without its URL).
///
/// The client bounds the connect only (`worker.connect_timeout_ms`); a caller runs this, and
/// the read of the body, under [`crate::stall::StallWatch::run_for`] with
/// `worker.request_timeout_ms`, so the total timeout counts this node's running time.
pub(crate) async fn post(w: &Worker, req: Signed<'_>) -> Result<reqwest::Response, Sent> {
    if !w.allow_private {
        if let Err(e) = targets::parse_channel_url(req.url, false) {
            return Err(Sent::failed(Observed::Blocked, e));
        }
    }
    let headers = match signing::sign_all(
        req.secrets,
        req.webhook_id,
        Utc::now().timestamp(),
        &req.body,
    ) {
        Ok(h) => h,
        Err(e) => {
            return Err(Sent::failed(
                Observed::Other,
                format!("signing failed: {e}"),
            ))
        }
    };
    let mut rb = w.client.post(req.url);
    for h in req.headers.map(|h| h.0.as_slice()).unwrap_or_default() {
        // Checked when set ([`breakwater_core::channels::resolve_headers`]); one that no longer
        // parses is left out rather than failing the delivery.
        let Ok(mut value) = reqwest::header::HeaderValue::from_str(&h.value) else {
            continue;
        };
        value.set_sensitive(h.sensitive);
        rb = rb.header(h.name.as_str(), value);
    }
    rb = match req.authorization {
        Some(Authorization::Basic(user, password)) => rb.basic_auth(user, Some(password)),
        Some(Authorization::Bearer(token)) => rb.bearer_auth(token),
        None => rb,
    };
    rb.header("content-type", "application/json")
        .header("webhook-id", &headers.id)
        .header("webhook-timestamp", headers.timestamp.to_string())
        .header("webhook-signature", &headers.signature)
        .body(req.body)
        .send()
        .await
        .map_err(|e| observe(e, w.connect_timeout))
}

/// Sends one attempt of delivery `d` ([`post`], signature and timestamp made now): its
/// `webhook-id` is `d.webhook_id` (the message id of a fan-out, else the delivery id), and its
/// `webhook-signature` carries `v1,<current>` and, during a secret rotation's grace period,
/// `v1,<previous>` after it. Reads the status, `Retry-After` and the first `excerpt_bytes` of
/// the body. A redirect is not followed (the client's policy is `none`); the answer is recorded
/// with where it pointed ([`redirect_note`]). All of it within the delivery's request timeout
/// (its retry policy's `request_timeout_ms`, else `worker.request_timeout_ms`;
/// [`breakwater_core::retry_policy::request_timeout`]) of this node's running time
/// ([`crate::stall::StallWatch::run_for`]): a response that arrived while the node stood still
/// is read when it wakes, and the limit the stall judgement compares with ([`Sent::limit`]) is
/// this delivery's own.
pub(crate) async fn send(w: &Worker, d: &Dispatch) -> Sent {
    let policy = d.retry_policy.as_ref().map(|p| &p.0);
    let timeout = breakwater_core::retry_policy::request_timeout(policy, w.request_timeout);
    match w.stall.run_for(timeout, exchange(w, d)).await {
        Ok(sent) => sent,
        Err(waited) => Sent::timed_out(&d.url, timeout, waited),
    }
}

/// [`send`] without its timeout. The request carries the channel's headers and auth; with
/// OAuth2, the token comes from the node's cache ([`crate::oauth2`]), and a 401 answer fetches a
/// new one and sends again, once (the second answer is the attempt's). A token endpoint that
/// fails fails the attempt (`oauth2 token endpoint …`, [`Sent::token_failed`]), with no request to the
/// endpoint: a failure of the channel's, not of its URL's host.
async fn exchange(w: &Worker, d: &Dispatch) -> Sent {
    let secrets: Vec<&str> = std::iter::once(d.signing_secret.as_str())
        .chain(d.previous_signing_secret.as_deref())
        .collect();
    let webhook_id = d.webhook_id.to_string();
    let signed = |authorization| Signed {
        url: &d.url,
        webhook_id: &webhook_id,
        secrets: &secrets,
        body: body(d),
        headers: d.headers.as_deref(),
        authorization,
    };
    let resp = match d.auth.as_deref() {
        None => post(w, signed(None)).await,
        Some(Auth::Basic { username, password }) => {
            let basic = Authorization::Basic(username, password);
            post(w, signed(Some(basic))).await
        }
        Some(Auth::Bearer { token }) => post(w, signed(Some(Authorization::Bearer(token)))).await,
        Some(auth @ Auth::OAuth2ClientCredentials { .. }) => {
            let token = match w.tokens.get(w.token_via(), d.channel_id, auth, None).await {
                Ok(t) => t,
                Err(e) => return Sent::token_failed(e),
            };
            let first = post(w, signed(Some(Authorization::Bearer(&token)))).await;
            match first {
                Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => {
                    drop(r);
                    let fresh = match w
                        .tokens
                        .get(w.token_via(), d.channel_id, auth, Some(&token))
                        .await
                    {
                        Ok(t) => t,
                        Err(e) => return Sent::token_failed(e),
                    };
                    post(w, signed(Some(Authorization::Bearer(&fresh)))).await
                }
                other => other,
            }
        }
    };
    let mut resp = match resp {
        Ok(r) => r,
        Err(failed) => return failed,
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let redirect = is_redirect(status).then(|| {
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        redirect_note(status, location.as_deref(), &d.url)
    });
    // Keep only the first bytes of the body; stop reading past the cap.
    let mut buf: Vec<u8> = Vec::new();
    let mut read_error = None;
    while buf.len() < w.excerpt_bytes {
        match resp.chunk().await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        }
    }
    buf.truncate(w.excerpt_bytes);
    let excerpt = (!buf.is_empty()).then(|| String::from_utf8_lossy(&buf).replace('\0', ""));
    match read_error {
        // A timeout while reading the body still fails the attempt.
        Some(e) if e.is_timeout() => Sent {
            observed: Observed::Timeout,
            excerpt,
            error: Some(url_free_error(e)),
            retry_after,
            limit: None,
            token_failure: false,
        },
        _ => Sent {
            observed: Observed::Status(status),
            excerpt,
            error: redirect,
            retry_after,
            limit: None,
            token_failure: false,
        },
    }
}

fn observe_error(e: &reqwest::Error) -> Observed {
    if is_blocked(e) {
        Observed::Blocked
    } else if e.is_timeout() {
        Observed::Timeout
    } else if e.is_connect() {
        Observed::Connect
    } else {
        Observed::Other
    }
}

/// The error text of an attempt: the request's error, else `HTTP <status>`, else the observation.
pub(crate) fn describe(s: &Sent) -> String {
    match (&s.observed, &s.error) {
        (_, Some(e)) => e.clone(),
        (Observed::Status(code), None) => format!("HTTP {code}"),
        (o, None) => format!("{o:?}"),
    }
}
