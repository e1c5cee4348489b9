//! Serving a router (the API, `/metrics`) over HTTP/1.1 and HTTP/2: axum's router on hyper, as
//! `axum::serve` does, plus the header read timeout that `axum::serve` does not set.

use axum::serve::Listener;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `app` on `listener` until `shutdown` fires, then stops accepting and waits for the
/// connections' requests in flight to finish (each connection closes after its current
/// response). Accept errors are handled as `axum::serve` handles them (a connection reset is
/// skipped; anything else, such as running out of file descriptors, is logged and retried after
/// a second). A client gets `header_read_timeout` to send a request's headers (HTTP/1.1, from
/// the connection's start or the end of its previous request; `api.header_read_timeout_ms`),
/// then its connection is closed: without it, a client that opened connections and never
/// finished a request (slow loris) kept each one open for good.
pub async fn serve(
    mut listener: TcpListener,
    app: Router,
    header_read_timeout: Duration,
    shutdown: CancellationToken,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let graceful = GracefulShutdown::new();
    loop {
        let (io, _) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            _ = shutdown.cancelled() => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
