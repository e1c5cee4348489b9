//! Raw API responses and the problem (RFC 9457) assertions of the error tests: every error must
//! be an `application/problem+json` body whose `status` matches the HTTP status and whose
//! `detail` says what is wrong.

use crate::TestApp;
use reqwest::{RequestBuilder, Response};
use serde_json::{json, Value};

/// Sends a request built on `app.http`.
pub async fn send(req: RequestBuilder) -> Response {
    req.send().await.expect("request")
}

/// The response's content type (empty when it has none).
pub fn content_type(resp: &Response) -> String {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// `GET {url}` with a bearer `token` (if any); returns the status, the content type and the
/// body as text.
pub async fn get_text(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> (u16, String, String) {
    let mut req = http.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = send(req).await;
    let ct = content_type(&r);
    (r.status().as_u16(), ct, r.text().await.expect("body"))
}

/// `POST {api}{path}` with `key` (if any) and a JSON body; the raw response.
pub async fn post(app: &TestApp, path: &str, key: Option<&str>, body: &Value) -> Response {
    let mut req = app.http.post(format!("{}{path}", app.api)).json(body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    send(req).await
}

/// `POST {api}{path}` with `key` and a raw body (text sent as is, e.g. malformed JSON) sent as
/// `application/json`.
pub async fn post_raw(
    app: &TestApp,
    path: &str,
    key: &str,
    body: impl Into<reqwest::Body>,
) -> Response {
    send(
        app.http
            .post(format!("{}{path}", app.api))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body),
    )
    .await
}

/// `GET {api}{path}` with `key` (if any); the raw response.
pub async fn get(app: &TestApp, path: &str, key: Option<&str>) -> Response {
    let mut req = app.http.get(format!("{}{path}", app.api));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    send(req).await
}

/// Asserts that `resp` is a problem with HTTP status `status`: the content type is
/// `application/problem+json`, the body's `status` equals the HTTP status, `detail`, `code`,
/// `title` and `type` are non-empty. Returns the body.
pub async fn assert_problem(resp: Response, status: u16) -> Value {
    let got = resp.status().as_u16();
    let content_type = content_type(&resp);
    let url = resp.url().clone();
    let text = resp.text().await.expect("body");
    assert_eq!(got, status, "{url}: status; body: {text}");
    assert!(
        content_type.starts_with("application/problem+json"),
        "{url}: content-type {content_type:?}; body: {text}"
    );
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{url}: problem is not JSON ({e}): {text}"));
    assert_eq!(body["status"], json!(status), "{url}: body status: {body}");
    for field in ["detail", "code", "title", "type"] {
        let v = body[field].as_str().unwrap_or("");
        assert!(
            !v.trim().is_empty(),
            "{url}: problem {field} is empty: {body}"
        );
    }
    body
}

/// Asserts a 422 problem that names `field`.
pub async fn assert_invalid(resp: Response, field: &str) -> Value {
    let body = assert_problem(resp, 422).await;
    if body["code"] == "invalid_field" {
        assert_eq!(body["field"], json!(field), "field of {body}");
    }
    assert!(
        body["detail"].as_str().unwrap().contains(field),
        "detail should name {field}: {body}"
    );
    body
}

/// Asserts a success status and returns the JSON body.
pub async fn assert_ok(resp: Response, status: u16) -> Value {
    let got = resp.status().as_u16();
    let url = resp.url().clone();
    let text = resp.text().await.expect("body");
    assert_eq!(got, status, "{url}: status; body: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {text}"))
}
