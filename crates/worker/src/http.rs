//! The outbound HTTP client of deliveries.
//!
//! reqwest with a connect timeout (the total timeout is the caller's, in the node's running
//! time: [`crate::stall::StallWatch::run_for`]; reqwest's own would fire on waking from a
//! stall before reading a response already in the socket), no redirects followed (a 3xx is an answer, and
//! following it could lead anywhere), no proxy, no client-side retries (the queue owns
//! retrying). Unless private targets are allowed, a DNS resolver drops internal addresses
//! (see [`breakwater_core::targets`]), so a hostname that resolves inside the network —
//! including through DNS rebinding after the channel was created — is never connected to.

use breakwater_core::targets::is_forbidden_ip;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::error::Error as StdError;
use std::net::SocketAddr;
use std::time::Duration;

/// The error a refused resolution carries; [`is_blocked`] looks for it.
#[derive(Debug)]
pub(crate) struct BlockedTarget(pub(crate) String);

impl std::fmt::Display for BlockedTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} resolves only to internal addresses, which are not allowed",
            self.0
        )
    }
}

impl StdError for BlockedTarget {}

/// A resolver that only returns public addresses.
#[derive(Debug, Clone, Copy)]
struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| !is_forbidden_ip(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(Box::new(BlockedTarget(host)) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Builds the delivery client: `connect_timeout` bounds each connect (TCP and TLS); no total
/// timeout (see the module doc).
pub(crate) fn client(
    connect_timeout: Duration,
    allow_private: bool,
) -> reqwest::Result<reqwest::Client> {
    let mut b = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_idle_timeout(Duration::from_secs(30))
        .user_agent(concat!("Breakwater-Webhooks/", env!("CARGO_PKG_VERSION")));
    if !allow_private {
        b = b.dns_resolver(std::sync::Arc::new(PublicOnlyResolver));
    }
    b.build()
}

/// Whether a request error came from refusing an internal target.
pub(crate) fn is_blocked(e: &reqwest::Error) -> bool {
    let mut src: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(s) = src {
        if s.is::<BlockedTarget>() {
            return true;
        }
        src = s.source();
    }
    false
}
