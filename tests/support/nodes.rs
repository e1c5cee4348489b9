//! Nodes on their own thread, runtime and pool: as close to separate processes as one test
//! binary gets.

use breakwater::config::Settings;
use breakwater::Role;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// A node running on its own thread and Tokio runtime, with its own pool.
pub struct ThreadNode {
    /// The node's API address, if it runs the API.
    pub api_addr: Option<std::net::SocketAddr>,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a node with `settings` and `role` on its own runtime and pool; returns once it
/// serves.
pub fn spawn_node_thread(connect: PgConnectOptions, settings: Settings, role: Role) -> ThreadNode {
    let shutdown = CancellationToken::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let token = shutdown.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let pool = PgPoolOptions::new()
                .max_connections(10)
                .connect_with(connect)
                .await
                .expect("node pool");
            let node = breakwater::start_node(&settings, pool, role, token)
                .await
                .expect("start node");
            tx.send(node.api_addr).expect("report address");
            node.wait().await.expect("node stopped cleanly");
        });
    });
    let api_addr = rx.recv().expect("node started");
    ThreadNode {
        api_addr,
        shutdown,
        thread: Some(thread),
    }
}

/// Starts `n` worker nodes ([`Role::Worker`]) with the same `settings` on the database of
/// `pool`, each with its own thread, runtime, pool and node id.
pub fn spawn_workers(pool: &PgPool, n: usize, settings: &Settings) -> Vec<ThreadNode> {
    (0..n)
        .map(|_| {
            spawn_node_thread(
                (*pool.connect_options()).clone(),
                settings.clone(),
                Role::Worker,
            )
        })
        .collect()
}

/// Stops every node of `nodes` (gracefully, one after the other).
pub fn stop_all(nodes: Vec<ThreadNode>) {
    for n in nodes {
        n.stop();
    }
}

impl ThreadNode {
    /// Graceful stop; waits for the thread.
    pub fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.thread.take() {
            t.join().expect("node thread");
        }
    }
}
