//! OAuth2 client-credentials tokens of channels (RFC 6749 §4.4), fetched and cached per channel.
//!
//! **The cache is in memory on each worker node**, one entry per channel that uses OAuth2 and
//! has been delivered by this node: each node fetches its own token once and reuses it until
//! it expires (`expires_in` minus a margin, [`margin`]). Nodes do not share tokens (a token is
//! a secret, and the database holds none); with N nodes a token endpoint sees up to N fetches
//! per token lifetime. An entry is keyed by the channel and remembers the settings it was
//! fetched with, so a changed `auth` (new client, secret, scope or URL) fetches afresh.
//!
//! One fetch at a time per channel: concurrent deliveries of a channel wait for the fetch in
//! flight and then share its token, rather than each asking for one.
//!
//! The request: `POST token_url` with the form `grant_type=client_credentials[&scope=…]`,
//! client authentication by HTTP Basic with the form-urlencoded id and secret (§2.3.1), through
//! the delivery client (its resolver refuses internal addresses, no redirects, no proxy) after
//! the same target check as a channel URL ([`breakwater_core::targets`]). Errors name the token
//! endpoint by its origin only and never carry the secret or the token.

use crate::http::url_free_error;
use breakwater_core::channels::Auth;
use breakwater_core::targets;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long a token without `expires_in` is kept (RFC 6749 §5.1 leaves the lifetime to the
/// server's documentation then; a 401 fetches a new one sooner).
const DEFAULT_TTL: Duration = Duration::from_secs(300);
/// Longest a token is kept, whatever its `expires_in`.
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Most bytes of a token response read.
const MAX_RESPONSE: usize = 64 * 1024;

/// A token and until when this node uses it.
struct Cached {
    /// The settings it was fetched with.
    auth: Auth,
    /// The access token.
    token: String,
    /// When it is no longer used (its expiry minus [`margin`]).
    until: Instant,
}

/// The node's tokens, per channel.
#[derive(Default)]
pub(crate) struct Tokens {
    channels: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
}

/// How long before its expiry a token stops being used: a tenth of its lifetime, at most 60 s
/// (a request that starts just before the expiry still arrives with a valid token).
fn margin(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(60))
}

/// What a token request needs of the node: the delivery client (its resolver refuses internal
/// addresses, it follows no redirects), whether internal targets are allowed
/// (`BREAKWATER_ALLOW_PRIVATE_TARGETS`), and the delivery request timeout (the token request
/// gets half of it).
#[derive(Clone, Copy)]
pub(crate) struct Via<'a> {
    /// The node's delivery client.
    pub(crate) client: &'a reqwest::Client,
    /// Whether internal addresses are allowed targets.
    pub(crate) allow_private: bool,
    /// The delivery request timeout.
    pub(crate) request_timeout: Duration,
}

impl Tokens {
    /// A token for `channel` with its `auth` (OAuth2): the cached one unless it expired, was
    /// fetched with other settings, or is `rejected` (the token a 401 answered); otherwise a
    /// fresh one from the token endpoint. The error text is the attempt's (`oauth2 token
    /// endpoint <origin>/…: …`).
    pub(crate) async fn get(
        &self,
        w: Via<'_>,
        channel: Uuid,
        auth: &Auth,
        rejected: Option<&str>,
    ) -> Result<String, String> {
        let slot = self
            .channels
            .lock()
            .expect("token map lock")
            .entry(channel)
            .or_default()
            .clone();
        // Held across the fetch: one fetch per channel at a time (see the module doc).
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref() {
            if c.auth == *auth && c.until > Instant::now() && Some(c.token.as_str()) != rejected {
                return Ok(c.token.clone());
            }
        }
        *cached = None;
        let (token, lifetime) = fetch(w, auth).await.map_err(|e| {
            let origin = auth
                .token_url()
                .and_then(|u| url::Url::parse(u).ok())
                .map(|u| format!(" {}/…", u.origin().ascii_serialization()))
                .unwrap_or_default();
            format!("oauth2 token endpoint{origin}: {e}")
        })?;
        let lifetime = lifetime.unwrap_or(DEFAULT_TTL).min(MAX_TTL);
        *cached = Some(Cached {
            auth: auth.clone(),
            token: token.clone(),
            until: Instant::now() + lifetime - margin(lifetime),
        });
        Ok(token)
    }
}

/// One token request (module doc): the access token and its lifetime (`expires_in`), or what
/// went wrong (without the URL).
async fn fetch(w: Via<'_>, auth: &Auth) -> Result<(String, Option<Duration>), String> {
    let Auth::OAuth2ClientCredentials {
        token_url,
        client_id,
        client_secret,
        scope,
    } = auth
    else {
        return Err("not an OAuth2 auth".into());
    };
    if !w.allow_private {
        targets::parse_channel_url(token_url, false)?;
    }
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let mut form = vec![("grant_type", "client_credentials")];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    let request = w
        .client
        .post(token_url)
        .basic_auth(enc(client_id), Some(enc(client_secret)))
        .header(reqwest::header::ACCEPT, "application/json")
        .form(&form)
        .send();
    // Half the request's budget: the delivery itself needs the rest.
    let budget = w.request_timeout / 2;
    let exchange = async {
        let mut resp = request.await.map_err(strip)?;
        let status = resp.status();
        let mut body = Vec::new();
        while body.len() < MAX_RESPONSE {
            match resp.chunk().await.map_err(strip)? {
                Some(c) => body.extend_from_slice(&c),
                None => break,
            }
        }
        Ok::<_, String>((status, body))
    };
    let (status, body) = tokio::time::timeout(budget, exchange)
        .await
        .map_err(|_| format!("no complete response within {} ms", budget.as_millis()))??;
    let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    if !status.is_success() {
        // RFC 6749 §5.2: `error` is a short ASCII code, safe to show.
        let code = json
            .as_ref()
            .and_then(|j| j["error"].as_str())
            .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_graphic()))
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        return Err(format!("HTTP {}{code}", status.as_u16()));
    }
    let json = json.ok_or("the response is not JSON")?;
    let token = json["access_token"]
        .as_str()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or("the response has no usable access_token")?;
    if let Some(kind) = json["token_type"].as_str() {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(format!("token_type {kind:?} is not Bearer"));
        }
    }
    let lifetime = match &json["expires_in"] {
        serde_json::Value::Number(n) => n.as_u64().map(Duration::from_secs),
        serde_json::Value::String(s) => s.parse().ok().map(Duration::from_secs),
        _ => None,
    };
    Ok((token.to_string(), lifetime))
}

/// A request error as text without its URL.
fn strip(e: reqwest::Error) -> String {
    let text = url_free_error(e);
    // `url_free_error` prefixes the origin; the caller names the endpoint already.
    match text.split_once("/…: ") {
        Some((_, rest)) => rest.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::margin;
    use std::time::Duration;

    #[test]
    fn a_token_is_dropped_a_tenth_of_its_life_early_at_most_a_minute() {
        assert_eq!(margin(Duration::from_secs(3600)), Duration::from_secs(60));
        assert_eq!(margin(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(margin(Duration::ZERO), Duration::ZERO);
    }
}
