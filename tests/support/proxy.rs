//! A TCP proxy on loopback in front of Postgres, for faults between a node and its database that
//! stopping the (shared) server cannot make, each on the proxy's connections only:
//!
//! - [`Proxy::cut`] / [`Proxy::restore`]: a database outage — every open connection is closed at
//!   once and new ones are closed as soon as they are accepted, until restored;
//! - [`Proxy::blackhole`]: the path silently drops everything (no FIN, no RST) on the
//!   connections open so far; new ones go through;
//! - [`Proxy::drop_commit_after`]: the connection that carries a given text (a request's
//!   idempotency key, say) is closed when its client next sends `COMMIT`, before or after the
//!   `COMMIT` reaches the server — a commit whose answer is lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// An armed [`Proxy::drop_commit_after`].
#[derive(Clone)]
struct CommitDrop {
    marker: Vec<u8>,
    forward: bool,
}

#[derive(Default)]
struct Shared {
    /// Connections numbered below this are blackholed.
    blackholed_below: AtomicU64,
    /// Connections accepted so far.
    accepted: AtomicU64,
    /// While true, new connections are closed at once.
    down: AtomicBool,
    /// Cancelled by [`Proxy::cut`]: ends every connection open then.
    cut: Mutex<CancellationToken>,
    /// The armed commit drop, taken by the connection it fires on.
    commit_drop: Mutex<Option<CommitDrop>>,
    /// How many commit drops fired.
    commits_dropped: AtomicU64,
}

/// A TCP proxy on `127.0.0.1:<port>` to one upstream address; stops with the runtime.
pub struct Proxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Starts forwarding connections on a free loopback port to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let n = s.accepted.fetch_add(1, Ordering::SeqCst);
                if s.down.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let stop = s.cut.lock().unwrap().clone();
                tokio::spawn(carry(client, server, n, s.clone(), stop));
            }
        });
        Proxy { port, shared }
    }

    /// A proxy in front of `pool`'s server, and a pool of `max` connections on the same
    /// database through it.
    pub async fn in_front_of(pool: &sqlx::PgPool, max: u32) -> (Self, sqlx::PgPool) {
        let proxy = Self::start(Self::upstream_of(pool)).await;
        let via = sqlx::postgres::PgPoolOptions::new()
            .max_connections(max)
            .connect_with(proxy.options(pool))
            .await
            .expect("a pool through the proxy");
        (proxy, via)
    }

    /// Connect options of `pool`'s database through this proxy.
    pub fn options(&self, pool: &sqlx::PgPool) -> sqlx::postgres::PgConnectOptions {
        (*pool.connect_options())
            .clone()
            .host("127.0.0.1")
            .port(self.port)
    }

    /// `host:port` of `pool`'s server (what to pass to [`Proxy::start`]).
    pub fn upstream_of(pool: &sqlx::PgPool) -> String {
        let o = pool.connect_options();
        format!("{}:{}", o.get_host(), o.get_port())
    }

    /// A database outage: closes every connection open now, and every new one as soon as it is
    /// accepted, until [`Proxy::restore`].
    pub fn cut(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        let mut token = self.shared.cut.lock().unwrap();
        token.cancel();
        *token = CancellationToken::new();
    }

    /// Ends a [`Proxy::cut`]: new connections are forwarded again.
    pub fn restore(&self) {
        self.shared.down.store(false, Ordering::SeqCst);
    }

    /// Blackholes every connection opened so far: their bytes are read and dropped in both
    /// directions and their sockets stay open (nothing tells either end); connections opened
    /// after it are forwarded.
    pub fn blackhole(&self) {
        self.shared.blackholed_below.store(
            self.shared.accepted.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
    }

    /// Arms one commit drop: the next connection whose client sends `marker` (anywhere in its
    /// stream) and then a `COMMIT` (a simple-query message) is closed at that `COMMIT` —
    /// after forwarding it to the server when `forward` (so the transaction commits, and only
    /// its answer is lost), else before (so it never commits). Fires once.
    pub fn drop_commit_after(&self, marker: &str, forward: bool) {
        *self.shared.commit_drop.lock().unwrap() = Some(CommitDrop {
            marker: marker.as_bytes().to_vec(),
            forward,
        });
    }

    /// How many armed commit drops fired.
    pub fn commits_dropped(&self) -> u64 {
        self.shared.commits_dropped.load(Ordering::SeqCst)
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether `chunk` holds a simple-query `COMMIT` message (`Q`, its length, `COMMIT\0`).
fn is_commit(chunk: &[u8]) -> bool {
    chunk
        .windows(12)
        .any(|w| w[0] == b'Q' && w[1..5] == 11u32.to_be_bytes() && &w[5..12] == b"COMMIT\0")
}

/// Carries connection `n` both ways until either end closes it, a [`Proxy::cut`] (`stop`), or
/// an armed commit drop fires on it.
async fn carry(
    client: TcpStream,
    server: TcpStream,
    n: u64,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = up(cr, sw, n, &shared) => {}
        _ = pump(sr, cw, n, &shared) => {}
    }
}

/// Client to server, watching for an armed commit drop.
async fn up(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, n: u64, shared: &Shared) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut marked = false;
    loop {
        let read = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let chunk = &buf[..read];
        if n < shared.blackholed_below.load(Ordering::SeqCst) {
            continue;
        }
        let armed = shared.commit_drop.lock().unwrap().clone();
        if let Some(arm) = armed {
            marked |= contains(chunk, &arm.marker);
            if marked && is_commit(chunk) && shared.commit_drop.lock().unwrap().take().is_some() {
                if arm.forward {
                    let _ = to.write_all(chunk).await;
                    let _ = to.flush().await;
                }
                shared.commits_dropped.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
        if to.write_all(chunk).await.is_err() {
            break;
        }
    }
    hold_if_blackholed(n, shared).await;
}

/// Server to client.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, n: u64, shared: &Shared) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if n < shared.blackholed_below.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..read]).await.is_err() {
            break;
        }
    }
    hold_if_blackholed(n, shared).await;
}

/// A blackholed connection's sockets stay open (a blackhole sends no FIN).
async fn hold_if_blackholed(n: u64, shared: &Shared) {
    if n < shared.blackholed_below.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
}
