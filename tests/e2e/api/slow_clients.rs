//! Slow clients (slow loris): a client that never finishes a request's headers, or stops in
//! the middle of its body, gets its connection closed (headers) or a 408 problem (body) within
//! the configured bounds, instead of holding a connection and a task for good.

use super::{enqueue_path, event};
use breakwater_e2e::TestApp;
use serde_json::Value;
use sqlx::PgPool;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Everything the server sends on `stream` until it closes the connection; panics when it is
/// still open after `within`.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> String {
    let mut got = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut got))
        .await
        .unwrap_or_else(|_| panic!("the server kept the connection open for {within:?}"))
        .expect("read");
    String::from_utf8_lossy(&got).into_owned()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_request_whose_headers_never_end_has_its_connection_closed(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.api.header_read_timeout_ms = 300).await;
    let addr = app.api.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    // The request line and one header, and never the blank line that ends the headers.
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let answer = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    assert!(
        !answer.contains("200 OK"),
        "no request was ever made: {answer:?}"
    );
    // A request that finishes its headers is served as ever.
    let r = app
        .http
        .get(format!("{}/healthz", app.api))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_body_that_stops_arriving_is_a_408_problem(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.api.body_read_timeout_ms = 300).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let addr = app.api.trim_start_matches("http://").to_string();
    for path in [
        enqueue_path(channel),
        format!("/api/v1/channels/{channel}/secret/rotate"),
    ] {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        // 100 bytes announced, 1 sent.
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let answer = read_until_closed(&mut stream, Duration::from_secs(10)).await;
        let (status_line, rest) = answer.split_once("\r\n").expect("a response");
        assert!(status_line.contains(" 408 "), "{path}: {status_line}");
        assert!(
            rest.to_ascii_lowercase()
                .contains("content-type: application/problem+json"),
            "{path}: {rest}"
        );
        let body = rest.split_once("\r\n\r\n").expect("a body").1;
        let problem: Value = serde_json::from_str(body.trim()).expect("a JSON problem");
        assert_eq!(problem["code"], "request_timeout", "{path}: {problem}");
    }
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "a request cut short changed nothing");
    // The same request in full is accepted.
    let (s, v) = app.post(&enqueue_path(channel), &key, &event("t")).await;
    assert_eq!(s, 202, "{v}");
    app.stop().await;
}
