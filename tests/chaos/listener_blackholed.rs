//! A blackholed LISTEN connection: the path between the queue listener and
//! Postgres silently drops everything (no FIN, no RST, no error: a failover, a lost NAT entry).
//! A proxy in the test sits between the listener and Postgres and stops forwarding the
//! connections it has (their sockets stay open); new connections go through. The listener must
//! notice within its configured bound (ping interval + ping timeout), say so in the log,
//! reconnect, and a `NOTIFY` after that must wake the queue's pool promptly, rather than wait
//! on the dead connection for good, silently, with wake-ups falling back to polling.

use breakwater_e2e::proxy::Proxy;
use breakwater_queue::{notify_queues, ListenConfig, Wakers};
use sqlx::PgPool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A `MakeWriter` that appends everything to a shared buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The listener's settings here: checked after 1 s without a notification, dead after 1 s
/// without an answer; so a blackhole is noticed within 2 s.
const CFG: ListenConfig = ListenConfig {
    retry: Duration::from_millis(100),
    ping_interval: Duration::from_secs(1),
    ping_timeout: Duration::from_secs(1),
};

/// Waits for one wake-up of `wake` within `within`; whether it came.
async fn woken(wake: &tokio::sync::Notify, within: Duration) -> bool {
    tokio::time::timeout(within, wake.notified()).await.is_ok()
}

#[sqlx::test]
async fn a_blackholed_listener_is_noticed_logged_and_replaced(pool: PgPool) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_ansi(false)
        .with_writer(capture.clone())
        .finish();
    let _ = tracing::subscriber::set_global_default(subscriber);

    // The listener's pool reaches Postgres through the proxy; NOTIFY goes direct.
    let (proxy, via_proxy) = Proxy::in_front_of(&pool, 2).await;

    let wakers = Wakers::default();
    let wake = wakers.get("q");
    let stop = CancellationToken::new();
    let listening = tokio::spawn(wakers.clone().listen(via_proxy, CFG, stop.clone()));
    // It wakes every pool once it listens.
    assert!(
        woken(&wake, Duration::from_secs(10)).await,
        "never listened"
    );
    notify_queues(&pool, &["q".to_string()]).await.unwrap();
    assert!(
        woken(&wake, Duration::from_secs(2)).await,
        "a NOTIFY through the healthy path woke nobody"
    );

    // The path dies silently.
    proxy.blackhole();
    let cut_at = Instant::now();
    // The listener notices (a log line), reconnects and wakes every pool again.
    let bound = CFG.ping_interval + CFG.ping_timeout + CFG.retry + Duration::from_secs(3);
    let reconnected = woken(&wake, bound).await;
    let noticed_after = cut_at.elapsed();
    let logs = capture.text();
    assert!(
        reconnected,
        "the listener did not notice its dead connection within {bound:?}; logs:\n{logs}"
    );
    assert!(
        logs.contains("queue listener: no answer to the liveness check"),
        "noticed, but not logged:\n{logs}"
    );
    // A NOTIFY now wakes the pool promptly (well before any poll period).
    let sent = Instant::now();
    notify_queues(&pool, &["q".to_string()]).await.unwrap();
    assert!(
        woken(&wake, Duration::from_millis(500)).await,
        "a NOTIFY after the reconnect woke nobody within 500 ms"
    );
    println!(
        "chaos[listener_blackholed]: dead listener noticed and replaced {:.1} s after the \
         blackhole; a NOTIFY then woke the pool in {} ms",
        noticed_after.as_secs_f64(),
        sent.elapsed().as_millis()
    );
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), listening).await;
}
