//! OAuth2 client-credentials tokens of channels (RFC 6749 §4.4), fetched and cached per channel.
//!
//! **The cache is in memory on each worker node**, one entry per channel that uses OAuth2 and
//! has been delivered by this node: each node fetches its own token once and reuses it until
//! it expires (`expires_in` minus a margin, [`margin`]). Nodes do not share tokens (a token is
//! a secret, and the database holds none); with N nodes a token endpoint sees up to N fetches
//! per token lifetime. An entry is keyed by the channel and a fingerprint of its auth settings
//! ([`Tokens`]), so a changed `auth` (new client, secret, scope or URL) replaces it and fetches
//! afresh. The cache is bounded: expired entries (deleted channels', idle channels') are
//! dropped as new ones come, and it never holds more than [`MAX_ENTRIES`] channels.
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

/// Most channels whose tokens a node keeps ([`Tokens`]): past it, entries no delivery is using
/// are dropped, expired ones first, then the least recently used, down to nine tenths of it.
const MAX_ENTRIES: usize = 10_000;
/// How often, at most, an insertion also drops the entries whose tokens expired (those of
/// deleted channels, or of channels no longer delivered by this node).
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// A token and until when this node uses it.
struct Cached {
    /// The access token.
    token: String,
    /// When it is no longer used (its expiry minus [`margin`]).
    until: Instant,
}

/// One channel's slot: its fetch lock and token, for one fingerprint of its auth settings.
type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// One channel's entry in the cache.
struct Entry {
    /// The fingerprint of the auth settings its token was (or is being) fetched with
    /// ([`Tokens::fingerprint`]).
    fingerprint: u64,
    /// The fetch lock and the token.
    slot: Slot,
    /// When a delivery last asked for it (for the least-recently-used eviction).
    used: Instant,
}

/// The node's tokens, keyed by channel and by a fingerprint of its auth settings: an entry
/// whose fingerprint differs from the delivery's settings (a changed token URL, client id,
/// secret or scope) is replaced, its token never reused. Bounded: an insertion drops the
/// entries whose tokens expired (at most every [`SWEEP_EVERY`]), and at [`MAX_ENTRIES`]
/// channels the idle entries, expired first and then the least recently used. An entry a
/// delivery is using (fetching, or waiting for the fetch) is never dropped, so the cap can be
/// passed by at most the deliveries in flight.
pub(crate) struct Tokens {
    channels: Mutex<Map>,
    /// The key of the settings' fingerprints (random per node: a fingerprint says nothing of
    /// the secret it was made from outside this process).
    hasher: std::collections::hash_map::RandomState,
    /// Most entries kept ([`MAX_ENTRIES`]; smaller in tests).
    cap: usize,
}

/// The entries and when expired ones were last dropped.
struct Map {
    entries: HashMap<Uuid, Entry>,
    swept: Instant,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens::with_cap(MAX_ENTRIES)
    }
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
    /// An empty cache of at most `cap` channels (at least 1).
    fn with_cap(cap: usize) -> Self {
        Tokens {
            channels: Mutex::new(Map {
                entries: HashMap::new(),
                swept: Instant::now(),
            }),
            hasher: Default::default(),
            cap: cap.max(1),
        }
    }

    /// A fingerprint of `auth`'s settings (every field, the secret included, under this
    /// node's random key): equal settings give equal fingerprints, changed ones (but for a
    /// 2^-64 chance) differ.
    fn fingerprint(&self, auth: &Auth) -> u64 {
        use std::hash::BuildHasher;
        match auth {
            Auth::OAuth2ClientCredentials {
                token_url,
                client_id,
                client_secret,
                scope,
            } => self
                .hasher
                .hash_one(("oauth2", token_url, client_id, client_secret, scope)),
            Auth::Basic { username, password } => {
                self.hasher.hash_one(("basic", username, password))
            }
            Auth::Bearer { token } => self.hasher.hash_one(("bearer", token)),
        }
    }

    /// The slot of `channel` for settings `fingerprint`, made if missing or if the channel's
    /// entry has other settings (then replaced: its token is not reused), marked used `now`.
    /// Making one may drop other entries first ([`Tokens::sweep`]).
    fn slot(&self, channel: Uuid, fingerprint: u64, now: Instant) -> Slot {
        let mut map = self.channels.lock().expect("token map lock");
        if let Some(e) = map.entries.get_mut(&channel) {
            if e.fingerprint == fingerprint {
                e.used = now;
                return e.slot.clone();
            }
        }
        let due = now.saturating_duration_since(map.swept) >= SWEEP_EVERY;
        if due || map.entries.len() >= self.cap {
            self.sweep(&mut map, now);
        }
        let slot = Slot::default();
        map.entries.insert(
            channel,
            Entry {
                fingerprint,
                slot: slot.clone(),
                used: now,
            },
        );
        slot
    }

    /// Drops the idle entries (no delivery holds their slot) whose token expired or that have
    /// none; then, if [`Tokens::cap`] entries are left, the least recently used idle ones down
    /// to nine tenths of it (so the sort runs about once per tenth of the cap's insertions), so
    /// that the insertion that follows stays within the cap.
    fn sweep(&self, map: &mut Map, now: Instant) {
        map.swept = now;
        let idle = |e: &Entry| Arc::strong_count(&e.slot) == 1;
        map.entries.retain(|_, e| {
            if !idle(e) {
                return true;
            }
            match e.slot.try_lock() {
                Ok(cached) => cached.as_ref().is_some_and(|c| c.until > now),
                Err(_) => true,
            }
        });
        if map.entries.len() < self.cap {
            return;
        }
        let keep = self.cap - self.cap.div_ceil(10);
        let mut idle_by_use: Vec<(Instant, Uuid)> = map
            .entries
            .iter()
            .filter(|(_, e)| idle(e))
            .map(|(id, e)| (e.used, *id))
            .collect();
        idle_by_use.sort_unstable();
        let excess = map.entries.len().saturating_sub(keep);
        for (_, id) in idle_by_use.into_iter().take(excess) {
            map.entries.remove(&id);
        }
    }

    /// How many channels' entries are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.channels.lock().unwrap().entries.len()
    }

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
        let slot = self.slot(channel, self.fingerprint(auth), Instant::now());
        // Held across the fetch: one fetch per channel at a time (see the module doc).
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref() {
            if c.until > Instant::now() && Some(c.token.as_str()) != rejected {
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
    use super::*;

    fn oauth2(token_url: &str, client_id: &str, secret: &str, scope: Option<&str>) -> Auth {
        Auth::OAuth2ClientCredentials {
            token_url: token_url.into(),
            client_id: client_id.into(),
            client_secret: secret.into(),
            scope: scope.map(Into::into),
        }
    }

    /// Puts token `token`, used until `until`, in `slot` (idle).
    fn fill(slot: &Slot, token: &str, until: Instant) {
        *slot.try_lock().unwrap() = Some(Cached {
            token: token.into(),
            until,
        });
    }

    fn token(slot: &Slot) -> Option<String> {
        slot.try_lock().unwrap().as_ref().map(|c| c.token.clone())
    }

    #[test]
    fn a_token_is_dropped_a_tenth_of_its_life_early_at_most_a_minute() {
        assert_eq!(margin(Duration::from_secs(3600)), Duration::from_secs(60));
        assert_eq!(margin(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(margin(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn every_auth_setting_changes_the_fingerprint() {
        let t = Tokens::default();
        let base = oauth2("https://a.example/token", "id", "secret", Some("s"));
        assert_eq!(
            t.fingerprint(&base),
            t.fingerprint(&base.clone()),
            "equal settings"
        );
        for changed in [
            oauth2("https://b.example/token", "id", "secret", Some("s")),
            oauth2("https://a.example/token", "id2", "secret", Some("s")),
            oauth2("https://a.example/token", "id", "secret2", Some("s")),
            oauth2("https://a.example/token", "id", "secret", Some("s2")),
            oauth2("https://a.example/token", "id", "secret", None),
            // A field boundary moved: `id` + `secret` vs `ids` + `ecret`.
            oauth2("https://a.example/token", "ids", "ecret", Some("s")),
        ] {
            assert_ne!(t.fingerprint(&base), t.fingerprint(&changed));
        }
    }

    #[test]
    fn changed_settings_replace_the_channels_entry_and_never_reuse_its_token() {
        let t = Tokens::default();
        let ch = Uuid::new_v4();
        let now = Instant::now();
        let old = t.fingerprint(&oauth2("https://a.example/t", "id", "s1", None));
        let new = t.fingerprint(&oauth2("https://a.example/t", "id", "s2", None));
        let slot = t.slot(ch, old, now);
        fill(&slot, "tok-old", now + Duration::from_secs(600));
        drop(slot);
        assert_eq!(token(&t.slot(ch, old, now)).as_deref(), Some("tok-old"));
        let fresh = t.slot(ch, new, now);
        assert_eq!(token(&fresh), None, "the old settings' token was reused");
        assert_eq!(t.len(), 1, "one entry per channel");
        drop(fresh);
        // Back to the old settings: no token either (its entry was replaced).
        assert_eq!(token(&t.slot(ch, old, now)), None);
    }

    #[test]
    fn expired_idle_entries_are_dropped_by_the_next_insertion_after_a_sweep_period() {
        let t = Tokens::default();
        let now = Instant::now();
        let (expired, valid, busy, empty) = (
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
        );
        let later = now + SWEEP_EVERY;
        fill(&t.slot(expired, 1, now), "a", now + Duration::from_secs(1));
        fill(
            &t.slot(valid, 1, now),
            "b",
            later + Duration::from_secs(600),
        );
        let in_use = t.slot(busy, 1, now);
        fill(&in_use, "c", now + Duration::from_secs(1));
        drop(t.slot(empty, 1, now));
        // Within the sweep period nothing is dropped.
        t.slot(Uuid::new_v4(), 1, now + Duration::from_secs(2));
        assert_eq!(t.len(), 5);
        t.slot(Uuid::new_v4(), 1, later + Duration::from_secs(1));
        let kept: Vec<Uuid> = t.channels.lock().unwrap().entries.keys().copied().collect();
        assert!(!kept.contains(&expired), "an expired token kept");
        assert!(!kept.contains(&empty), "an entry without token kept");
        assert!(kept.contains(&valid), "a valid token dropped");
        assert!(kept.contains(&busy), "an entry in use dropped");
        assert_eq!(t.len(), 3, "valid, busy and the new one");
    }

    #[test]
    fn at_the_cap_the_least_recently_used_idle_entries_go() {
        let t = Tokens::with_cap(10);
        let t0 = Instant::now();
        let until = t0 + Duration::from_secs(3600);
        let ids: Vec<Uuid> = (0..10).map(|_| Uuid::new_v4()).collect();
        for (i, id) in ids.iter().enumerate() {
            fill(
                &t.slot(*id, 1, t0 + Duration::from_millis(i as u64)),
                "t",
                until,
            );
        }
        // The oldest is used again; the second oldest is in use.
        let _ = t.slot(ids[0], 1, t0 + Duration::from_millis(100));
        let busy = t.slot(ids[1], 1, t0 + Duration::from_millis(1));
        assert_eq!(t.len(), 10);
        let newcomer = Uuid::new_v4();
        t.slot(newcomer, 1, t0 + Duration::from_millis(200));
        let kept: Vec<Uuid> = t.channels.lock().unwrap().entries.keys().copied().collect();
        // Down to nine tenths (9), then the newcomer: the least recently used idle one went.
        assert_eq!(t.len(), 10, "{kept:?}");
        assert!(kept.contains(&newcomer));
        assert!(kept.contains(&ids[0]), "a recently used entry evicted");
        assert!(kept.contains(&ids[1]), "an entry in use evicted");
        assert!(
            !kept.contains(&ids[2]),
            "the least recently used idle entry kept"
        );
        assert!(kept.contains(&ids[3]));
        drop(busy);
        // However many channels come, the map stays within the cap.
        for i in 0..100u64 {
            t.slot(Uuid::new_v4(), 1, t0 + Duration::from_millis(300 + i));
            assert!(t.len() <= 10);
        }
    }
}
