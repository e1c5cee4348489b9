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

/// The error chain of `e` without the endpoint's URL, prefixed with its origin:
/// `scheme://host[:port]/…: <error>: <cause>: …`. A path, query or userinfo may carry a token,
/// and this text goes on to the attempt row, the circuit's reason, the audit log, alerts and
/// logs: reqwest's own URL is removed ([`reqwest::Error::without_url`]), and a cause that names
/// the URL again has it cut to the origin too. The one URL redaction of the worker (deliveries, alerts, OAuth2 token requests).
pub(crate) fn url_free_error(e: reqwest::Error) -> String {
    let url = e.url().cloned();
    let text = error_chain(&e.without_url());
    match url {
        Some(u) => redact(&text, &u),
        None => text,
    }
}

/// `text` (an error chain) prefixed with `url`'s origin, and `url` within it cut to that origin.
fn redact(text: &str, url: &url::Url) -> String {
    let origin = format!("{}/…", url.origin().ascii_serialization());
    format!("{origin}: {}", text.replace(url.as_str(), &origin))
}

/// The error and its causes, joined (reqwest's top-level message alone hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn request_errors_name_the_endpoint_by_its_origin_only() {
        let url = url::Url::parse("https://user:pw@hooks.example.com:8443/t/SECRET?token=SECRET")
            .unwrap();
        assert_eq!(
            redact("error sending request: connection refused", &url),
            "https://hooks.example.com:8443/…: error sending request: connection refused"
        );
        // A cause that names the URL again.
        let text = format!("client error: {url}: connection reset");
        assert_eq!(
            redact(&text, &url),
            "https://hooks.example.com:8443/…: client error: https://hooks.example.com:8443/…: connection reset"
        );
        // A bare origin: the prefix is not redacted twice.
        let url = url::Url::parse("http://example.com").unwrap();
        assert_eq!(redact("timed out", &url), "http://example.com/…: timed out");
    }
}
