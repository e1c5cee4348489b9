//! A request answered before its body is read (401, 413, 429) leaves its keep-alive connection
//! usable: the next request on the same connection is served. (hyper on its own closes the
//! connection after such an answer without `Connection: close`, and a client that reuses it,
//! as every pooled client does, fails its next request.)

use super::enqueue_path;
use breakwater_e2e::TestApp;
use sqlx::PgPool;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 response read from `stream`: its status, its lower-cased head, and its body
/// (by `Content-Length`). Panics if none arrives within 10 s or the connection ends first.
async fn read_response(stream: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let mut buf = Vec::new();
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                while buf.len() < end + 4 + len {
                    let mut chunk = [0u8; 8192];
                    let n = stream.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "the connection ended in the middle of a response");
                    buf.extend_from_slice(&chunk[..n]);
                }
                let status = head[9..12].parse().unwrap();
                return (status, head, buf[end + 4..end + 4 + len].to_vec());
            }
            let mut chunk = [0u8; 8192];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "the connection was closed before a response: {buf:?}"
            );
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("a response within 10 s")
}

/// Sends `POST path` with `key` and a JSON body of `body_len` bytes on `stream`, and reads the
/// answer.
async fn post_big(
    stream: &mut TcpStream,
    path: &str,
    key: &str,
    body_len: usize,
) -> (u16, String, Vec<u8>) {
    // {"event_type":"e","payload":{"pad":"xxxx…"}}
    let prefix = br#"{"event_type":"e","payload":{"pad":""#;
    let suffix = br#""}}"#;
    let mut body = prefix.to_vec();
    body.resize(body_len - suffix.len(), b'x');
    body.extend_from_slice(suffix);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    read_response(stream).await
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_request_refused_before_its_body_is_read_leaves_the_connection_usable(pool: PgPool) {
    // One request a second, no burst beyond it: the third refusal below is the ingress limit's.
    let app = TestApp::spawn_with(pool, |s| {
        s.api.ingress_per_second = 1;
        s.api.ingress_burst = 1;
    })
    .await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    // Creating the channel took the key's request of this second: the next one is due 1 s on.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let addr = app.api.trim_start_matches("http://").to_string();
    let path = enqueue_path(channel);
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    // A wrong key with a 100 KB body; a 1 MB payload (over the 256 KiB limit) with the right
    // key, which takes the key's one request of this second; then the ingress limit.
    let refusals = [
        ("bw_wrong_key_0123456789", 100_000, 401),
        (key.as_str(), 1_000_000, 413),
        (key.as_str(), 100_000, 429),
    ];
    for (k, len, want) in refusals {
        let (status, head, _) = post_big(&mut stream, &path, k, len).await;
        assert_eq!(status, want, "{head}");
        // The next request on the same connection is served, unless the refusal said it would
        // close the connection (it does not for bodies this small).
        assert!(
            !head.contains("connection: close"),
            "{want}: the refusal closed the connection: {head}"
        );
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let (status, head, _) = read_response(&mut stream).await;
        assert_eq!(status, 200, "after a {want}: {head}");
    }
    app.stop().await;
}
