//! What a channel adds to every request of its deliveries: custom headers
//! (some of them sensitive) and endpoint authentication (HTTP Basic, Bearer, OAuth2 client
//! credentials).
//!
//! Stored on the channel row as two nullable `jsonb` columns, `headers` ([`Headers`]) and
//! `auth` ([`Auth`]), read with the delivery by the statement that begins its attempt (so a
//! channel without them costs nothing more: two NULL columns in a row already read).
//!
//! **JSON shape.** `headers` is an object, name → value, where a value is either a string (a
//! plain header) or `{"value": "…", "sensitive": true}`. We chose the inline object over a
//! separate `sensitive_headers` list so a header's name, value and sensitivity travel together:
//! renaming or dropping a header cannot leave a stale entry in a second list, and the simple
//! case stays the one-line `{"X-Api-Key": "…"}` of the issue. Reads always answer the object
//! form, with a sensitive value replaced by [`MASK`]. In a `PATCH`, `{"sensitive": true}`
//! without a `value` keeps the stored value of that header, so a client that only read the
//! mask can still change the other headers.
//!
//! **Secrets.** A sensitive header's value, a Basic password, a Bearer token and an OAuth2
//! client secret are never shown again ([`MASK`] on every read), never logged (the `Debug` of
//! these types prints no value) and never written to the audit log: the audit records that they
//! are set and, on a change, that they changed ([`audit_view`]).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most custom headers on one channel.
pub(crate) const MAX_HEADERS: usize = 20;
/// Most bytes of all custom header names and values together, on one channel (4 KiB).
pub(crate) const MAX_HEADER_BYTES: usize = 4096;
/// Longest Basic username or password, Bearer token, OAuth2 client id, secret or scope, bytes.
pub(crate) const MAX_AUTH_FIELD: usize = 1024;
/// What a read shows instead of a secret.
pub(crate) const MASK: &str = "********";

/// Header names a channel may not set (lowercase), with why. Hop-by-hop and framing headers
/// (RFC 9110 §7.6.1, RFC 9112 §6–7: the client owns the connection and the body's framing),
/// the Standard Webhooks headers (the signature is ours to make) and `Content-Type` (the body
/// is always `application/json`). Every `Proxy-*` name is refused too ([`check_name`]).
const RESERVED: &[(&str, &str)] = &[
    ("host", "set from the channel's URL"),
    ("content-length", "a framing header, set by the client"),
    ("transfer-encoding", "a framing header, set by the client"),
    ("content-encoding", "the body is sent as is"),
    ("content-type", "the body is always application/json"),
    ("connection", "a hop-by-hop header"),
    ("keep-alive", "a hop-by-hop header"),
    ("upgrade", "a hop-by-hop header"),
    ("te", "a hop-by-hop header"),
    ("trailer", "a hop-by-hop header"),
    ("expect", "the client does not send 100-continue"),
    (
        "webhook-id",
        "a Standard Webhooks header, set by the signer",
    ),
    (
        "webhook-timestamp",
        "a Standard Webhooks header, set by the signer",
    ),
    (
        "webhook-signature",
        "a Standard Webhooks header, set by the signer",
    ),
];

/// One custom header as stored. `Debug` never prints the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The name as the tenant wrote it (HTTP names are case-insensitive; it is sent lowercase).
    pub name: String,
    /// The value (visible ASCII, spaces and tabs).
    pub value: String,
    /// Whether the value is a secret: masked on reads, never in the audit log.
    #[serde(default)]
    pub sensitive: bool,
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("name", &self.name)
            .field("sensitive", &self.sensitive)
            .finish_non_exhaustive()
    }
}

/// A channel's custom headers as stored (`channels.headers`, a JSON array), in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Headers(pub Vec<Header>);

/// A header's value in a body: a plain string, or the object form.
// `Debug` (below) prints no value.
#[derive(Clone, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum HeaderInput {
    /// A plain (not sensitive) value.
    Plain(String),
    /// `{"value": "…", "sensitive": true}`.
    Detailed(HeaderSpec),
}

/// A header's value in its object form.
#[derive(Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderSpec {
    /// The value: visible ASCII, spaces and tabs (no CR, LF or NUL). In a `PATCH`, absent
    /// keeps the header's stored value (for a header that is already set).
    pub value: Option<String>,
    /// Whether the value is a secret: never shown again (reads show `********`), never logged,
    /// audited only as changed.
    #[serde(default)]
    pub sensitive: bool,
}

impl std::fmt::Debug for HeaderInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderInput")
    }
}

impl std::fmt::Debug for HeaderSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderSpec")
            .field("sensitive", &self.sensitive)
            .finish_non_exhaustive()
    }
}

/// A header as reads show it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub(crate) struct HeaderView {
    /// The value, or `********` when sensitive.
    pub value: String,
    /// Whether the value is a secret.
    pub sensitive: bool,
}

/// Checks a header name: an RFC 9110 token (§5.1, §5.6.2; parsed by the `http` crate) that is
/// not reserved ([`RESERVED`], `Proxy-*`). The error names the header.
fn check_name(name: &str) -> Result<()> {
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() || name.is_empty() {
        return Err(Error::invalid(
            "headers",
            format!("{name:?} is not a valid header name (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"),
        ));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("proxy-") {
        return Err(Error::invalid(
            "headers",
            format!("{name:?} may not be set: Proxy-* headers are for proxies"),
        ));
    }
    if let Some((_, why)) = RESERVED.iter().find(|(n, _)| *n == lower) {
        return Err(Error::invalid(
            "headers",
            format!("{name:?} may not be set: {why}"),
        ));
    }
    Ok(())
}

/// Checks a header value (RFC 9110 §5.5): no CR, LF or NUL (which would split the header or the
/// request), and otherwise what the `http` crate accepts as visible ASCII, spaces and tabs.
fn check_value(name: &str, value: &str) -> Result<()> {
    if value.contains(['\r', '\n', '\0']) {
        return Err(Error::invalid(
            "headers",
            format!("the value of {name:?} contains CR, LF or NUL"),
        ));
    }
    if http::HeaderValue::from_str(value).is_err() {
        return Err(Error::invalid(
            "headers",
            format!("the value of {name:?} must be visible ASCII, spaces and tabs"),
        ));
    }
    Ok(())
}

/// The headers to store from a body's `headers` (`None` when the body gives none, or an empty
/// object: the channel then has none). `current`: the channel's headers now (in a `PATCH`),
/// whose value a `{"sensitive": true}` without `value` keeps. Refused with a field error on
/// `headers` naming the header: a name that is no token or is reserved, a value with CR, LF or
/// NUL, two names equal but for case, more than [`MAX_HEADERS`] headers or more than
/// [`MAX_HEADER_BYTES`] of names and values, an object form without a value for a header that
/// is not set yet.
pub(crate) fn resolve_headers(
    input: &BTreeMap<String, HeaderInput>,
    current: Option<&Headers>,
) -> Result<Option<Headers>> {
    if input.len() > MAX_HEADERS {
        return Err(Error::invalid(
            "headers",
            format!("at most {MAX_HEADERS} headers, not {}", input.len()),
        ));
    }
    let mut out: Vec<Header> = Vec::with_capacity(input.len());
    let mut bytes = 0;
    for (name, given) in input {
        check_name(name)?;
        if let Some(dup) = out.iter().find(|h| h.name.eq_ignore_ascii_case(name)) {
            return Err(Error::invalid(
                "headers",
                format!("{name:?} and {:?} are the same header", dup.name),
            ));
        }
        let (value, sensitive) = match given {
            HeaderInput::Plain(v) => (v.clone(), false),
            HeaderInput::Detailed(HeaderSpec {
                value: Some(v),
                sensitive,
            }) => (v.clone(), *sensitive),
            HeaderInput::Detailed(HeaderSpec {
                value: None,
                sensitive,
            }) => {
                let kept = current
                    .and_then(|c| c.0.iter().find(|h| h.name.eq_ignore_ascii_case(name)))
                    .ok_or_else(|| {
                        Error::invalid(
                            "headers",
                            format!("{name:?} needs a value (it is not set yet)"),
                        )
                    })?;
                (kept.value.clone(), *sensitive)
            }
        };
        check_value(name, &value)?;
        bytes += name.len() + value.len();
        out.push(Header {
            name: name.clone(),
            value,
            sensitive,
        });
    }
    if bytes > MAX_HEADER_BYTES {
        return Err(Error::invalid(
            "headers",
            format!("names and values take {bytes} bytes; at most {MAX_HEADER_BYTES}"),
        ));
    }
    Ok((!out.is_empty()).then_some(Headers(out)))
}

/// `headers` as reads show them: name → [`HeaderView`], sensitive values masked; `{}` for none.
pub(crate) fn view_headers(headers: Option<&Headers>) -> BTreeMap<String, HeaderView> {
    headers
        .map(|h| {
            h.0.iter()
                .map(|h| {
                    let value = if h.sensitive {
                        MASK.to_string()
                    } else {
                        h.value.clone()
                    };
                    (
                        h.name.clone(),
                        HeaderView {
                            value,
                            sensitive: h.sensitive,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Serializes a channel's stored headers as [`view_headers`] (for `#[serde(serialize_with)]`).
pub(crate) fn serialize_headers<S: serde::Serializer>(
    h: &Option<Headers>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    view_headers(h.as_ref()).serialize(s)
}

/// A channel's endpoint authentication as stored (`channels.auth`) and as reads show it
/// ([`Auth::masked`]). `Debug` prints no secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type")]
pub enum Auth {
    /// HTTP Basic (RFC 7617): `Authorization: Basic base64(username:password)` on every request.
    #[serde(rename = "basic")]
    Basic {
        /// The user id (no `:`, RFC 7617 §2).
        username: String,
        /// The password; `********` on reads.
        password: String,
    },
    /// A static bearer token (RFC 6750): `Authorization: Bearer <token>` on every request.
    #[serde(rename = "bearer")]
    Bearer {
        /// The token; `********` on reads.
        token: String,
    },
    /// OAuth2 client credentials (RFC 6749 §4.4): a token is fetched from `token_url` with the
    /// client's id and secret (HTTP Basic, §2.3.1), cached by the worker node until it expires,
    /// and sent as `Authorization: Bearer <access_token>`; fetched again once after a 401.
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        /// The token endpoint: the same rules as a channel's URL (absolute `http(s)`, public
        /// addresses only unless `allow_private_targets`).
        token_url: String,
        /// The client id.
        client_id: String,
        /// The client secret; `********` on reads.
        client_secret: String,
        /// The scope asked for (space-separated), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::Basic { .. } => "Auth::Basic",
            Auth::Bearer { .. } => "Auth::Bearer",
            Auth::OAuth2ClientCredentials { .. } => "Auth::OAuth2ClientCredentials",
        })
    }
}

impl Auth {
    /// The auth as reads show it: every secret replaced by [`MASK`].
    pub(crate) fn masked(&self) -> Auth {
        let mut a = self.clone();
        match &mut a {
            Auth::Basic { password, .. } => *password = MASK.into(),
            Auth::Bearer { token } => *token = MASK.into(),
            Auth::OAuth2ClientCredentials { client_secret, .. } => *client_secret = MASK.into(),
        }
        a
    }

    /// The secret of this auth (password, token or client secret).
    fn secret(&self) -> &str {
        match self {
            Auth::Basic { password, .. } => password,
            Auth::Bearer { token } => token,
            Auth::OAuth2ClientCredentials { client_secret, .. } => client_secret,
        }
    }

    /// The OAuth2 token URL, if this is OAuth2.
    pub fn token_url(&self) -> Option<&str> {
        match self {
            Auth::OAuth2ClientCredentials { token_url, .. } => Some(token_url),
            _ => None,
        }
    }
}

/// Serializes a channel's stored auth masked ([`Auth::masked`]; for `#[serde(serialize_with)]`).
pub(crate) fn serialize_auth<S: serde::Serializer>(
    a: &Option<Auth>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    a.as_ref().map(Auth::masked).serialize(s)
}

/// Endpoint authentication in a body (`auth` of `POST`/`PATCH /api/v1/channels`). A secret left
/// out keeps the stored one when the channel already has an auth of the same type (and, for
/// OAuth2, the same `token_url`: a secret never follows a new token URL).
#[derive(Clone, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type")]
pub enum AuthInput {
    /// HTTP Basic (RFC 7617).
    #[serde(rename = "basic")]
    Basic {
        /// The user id: no `:` and no control characters, at most 1024 bytes.
        username: String,
        /// The password: no control characters, at most 1024 bytes (absent in a `PATCH`: kept).
        password: Option<String>,
    },
    /// A static bearer token (RFC 6750).
    #[serde(rename = "bearer")]
    Bearer {
        /// The token: visible ASCII without spaces, at most 1024 bytes (absent in a `PATCH`:
        /// kept).
        token: Option<String>,
    },
    /// OAuth2 client credentials (RFC 6749 §4.4).
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        /// The token endpoint (same rules as a channel's `url`).
        #[schema(format = "uri", max_length = 2048)]
        token_url: String,
        /// The client id: no control characters, at most 1024 bytes.
        client_id: String,
        /// The client secret: no control characters, at most 1024 bytes (absent in a `PATCH`:
        /// kept while `token_url` is unchanged).
        client_secret: Option<String>,
        /// The scope asked for, if any (RFC 6749 §3.3: space-separated tokens).
        scope: Option<String>,
    },
}

impl std::fmt::Debug for AuthInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthInput")
    }
}

impl AuthInput {
    /// The token URL given, if OAuth2 (the API checks it as a channel URL).
    pub fn token_url_mut(&mut self) -> Option<&mut String> {
        match self {
            AuthInput::OAuth2ClientCredentials { token_url, .. } => Some(token_url),
            _ => None,
        }
    }
}

/// A text field of an auth: present (or kept), at most [`MAX_AUTH_FIELD`] bytes, no control
/// characters.
fn auth_text(field: &'static str, v: Option<String>, kept: Option<&str>) -> Result<String> {
    let v = v
        .or(kept.map(str::to_string))
        .ok_or_else(|| Error::invalid(field, "is required (there is no stored value to keep)"))?;
    if v.is_empty() || v.len() > MAX_AUTH_FIELD || v.chars().any(char::is_control) {
        return Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_AUTH_FIELD} bytes without control characters"),
        ));
    }
    Ok(v)
}

/// The auth to store from a body's `auth`, given the channel's current one (in a `PATCH`).
/// Field errors name `auth.<field>`. The caller has already checked an OAuth2 `token_url` as a
/// channel URL.
pub(crate) fn resolve_auth(input: &AuthInput, current: Option<&Auth>) -> Result<Auth> {
    Ok(match input.clone() {
        AuthInput::Basic { username, password } => {
            let kept = match current {
                Some(a @ Auth::Basic { .. }) => Some(a.secret()),
                _ => None,
            };
            let username = auth_text("auth.username", Some(username), None)?;
            if username.contains(':') {
                return Err(Error::invalid(
                    "auth.username",
                    "may not contain ':' (RFC 7617 §2)",
                ));
            }
            Auth::Basic {
                username,
                password: auth_text("auth.password", password, kept)?,
            }
        }
        AuthInput::Bearer { token } => {
            let kept = match current {
                Some(a @ Auth::Bearer { .. }) => Some(a.secret()),
                _ => None,
            };
            let token = auth_text("auth.token", token, kept)?;
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Error::invalid(
                    "auth.token",
                    "must be visible ASCII without spaces (RFC 6750 §2.1)",
                ));
            }
            Auth::Bearer { token }
        }
        AuthInput::OAuth2ClientCredentials {
            token_url,
            client_id,
            client_secret,
            scope,
        } => {
            let kept = match current {
                Some(a @ Auth::OAuth2ClientCredentials { token_url: t, .. }) if *t == token_url => {
                    Some(a.secret())
                }
                _ => None,
            };
            let scope = match scope {
                Some(s) => Some(auth_text("auth.scope", Some(s), None)?),
                None => None,
            };
            Auth::OAuth2ClientCredentials {
                token_url,
                client_id: auth_text("auth.client_id", Some(client_id), None)?,
                client_secret: auth_text("auth.client_secret", client_secret, kept)?,
                scope,
            }
        }
    })
}

/// Refuses a custom `Authorization` header beside an `auth` setting (the two would collide).
pub(crate) fn check_compatible(headers: Option<&Headers>, auth: Option<&Auth>) -> Result<()> {
    if auth.is_none() {
        return Ok(());
    }
    if let Some(h) = headers.and_then(|h| {
        h.0.iter()
            .find(|h| h.name.eq_ignore_ascii_case("authorization"))
    }) {
        return Err(Error::invalid(
            "headers",
            format!("{:?} may not be set beside `auth`, which sets it", h.name),
        ));
    }
    Ok(())
}

/// The headers and auth as the audit log shows them: plain values as they are, a sensitive
/// header's value and an auth's secret as `"(secret)"`, or `"(secret, changed)"` when `old`
/// (the settings before a `PATCH`) held another value under the same name or type. An OAuth2
/// token URL is shown as [`crate::audit::url_summary`]. Never a secret.
pub(crate) fn audit_view(
    headers: Option<&Headers>,
    auth: Option<&Auth>,
    old: Option<(Option<&Headers>, Option<&Auth>)>,
) -> (serde_json::Value, serde_json::Value) {
    let secret = |changed: bool| {
        serde_json::Value::from(if changed {
            "(secret, changed)"
        } else {
            "(secret)"
        })
    };
    let mut hv = serde_json::Map::new();
    for h in headers.map(|h| h.0.as_slice()).unwrap_or_default() {
        let v = if h.sensitive {
            let before = old
                .and_then(|(oh, _)| oh)
                .and_then(|oh| oh.0.iter().find(|o| o.name.eq_ignore_ascii_case(&h.name)));
            secret(before.is_some_and(|o| o.value != h.value))
        } else {
            h.value.clone().into()
        };
        hv.insert(h.name.clone(), v);
    }
    let av = auth.map(|a| {
        let changed = old.and_then(|(_, oa)| oa).is_some_and(|o| {
            std::mem::discriminant(o) == std::mem::discriminant(a) && o.secret() != a.secret()
        });
        let mut v = serde_json::to_value(a.masked()).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            for k in ["password", "token", "client_secret"] {
                if o.contains_key(k) {
                    o.insert(k.into(), secret(changed));
                }
            }
            if let Some(url) = a.token_url() {
                o.insert("token_url".into(), crate::audit::url_summary(url));
            }
        }
        v
    });
    (
        if hv.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::Value::Object(hv)
        },
        av.unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(pairs: &[(&str, HeaderInput)]) -> BTreeMap<String, HeaderInput> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    fn plain(v: &str) -> HeaderInput {
        HeaderInput::Plain(v.into())
    }

    fn refused(pairs: &[(&str, HeaderInput)]) -> String {
        match resolve_headers(&input(pairs), None) {
            Err(Error::Invalid { field, message }) => {
                assert_eq!(field, "headers");
                message
            }
            other => panic!("accepted: {other:?}"),
        }
    }

    #[test]
    fn reserved_and_malformed_headers_are_refused_by_name() {
        for name in [
            "Host",
            "content-LENGTH",
            "Transfer-Encoding",
            "Connection",
            "Keep-Alive",
            "Upgrade",
            "TE",
            "Trailer",
            "Proxy-Authorization",
            "proxy-connection",
            "Webhook-Id",
            "webhook-timestamp",
            "WEBHOOK-SIGNATURE",
            "Content-Type",
        ] {
            let m = refused(&[(name, plain("x"))]);
            assert!(m.contains(name), "{name}: {m}");
        }
        for name in ["X Api", "X:Api", "", "Ä-Key", "X(Api)"] {
            let m = refused(&[(name, plain("x"))]);
            assert!(m.contains("not a valid header name"), "{name}: {m}");
        }
        for value in ["a\rb", "a\nb", "a\0b"] {
            let m = refused(&[("X-Key", plain(value))]);
            assert!(
                m.contains("\"X-Key\"") && m.contains("CR, LF or NUL"),
                "{m}"
            );
        }
        let m = refused(&[("X-Key", plain("a")), ("x-key", plain("b"))]);
        assert!(m.contains("same header"), "{m}");
    }

    #[test]
    fn limits_are_twenty_headers_and_four_kib() {
        let many: Vec<(String, HeaderInput)> =
            (0..21).map(|i| (format!("X-H{i}"), plain("v"))).collect();
        let many: Vec<(&str, HeaderInput)> =
            many.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        assert!(refused(&many).contains("at most 20"));
        assert!(resolve_headers(&input(&many[..20]), None).is_ok());
        let big = "v".repeat(MAX_HEADER_BYTES - 5);
        assert!(resolve_headers(&input(&[("X-Big", plain(&big))]), None).is_ok());
        let big = "v".repeat(MAX_HEADER_BYTES - 4);
        assert!(refused(&[("X-Big", plain(&big))]).contains("4096"));
    }

    #[test]
    fn a_sensitive_value_is_masked_kept_and_never_audited() {
        let stored = resolve_headers(
            &input(&[
                (
                    "X-Api-Key",
                    HeaderInput::Detailed(HeaderSpec {
                        value: Some("s3cret".into()),
                        sensitive: true,
                    }),
                ),
                ("X-Plain", plain("p")),
            ]),
            None,
        )
        .unwrap()
        .unwrap();
        let view = view_headers(Some(&stored));
        assert_eq!(view["X-Api-Key"].value, MASK);
        assert_eq!(view["X-Plain"].value, "p");
        assert!(!format!("{stored:?}").contains("s3cret"));
        // Kept by a PATCH that gives no value.
        let kept = resolve_headers(
            &input(&[(
                "x-api-key",
                HeaderInput::Detailed(HeaderSpec {
                    value: None,
                    sensitive: true,
                }),
            )]),
            Some(&stored),
        )
        .unwrap()
        .unwrap();
        assert_eq!(kept.0[0].value, "s3cret");
        let (h, _) = audit_view(Some(&stored), None, None);
        assert!(!h.to_string().contains("s3cret"));
        let mut changed = stored.clone();
        changed.0[0].value = "other".into();
        let (h, _) = audit_view(Some(&changed), None, Some((Some(&stored), None)));
        assert_eq!(h["X-Api-Key"], "(secret, changed)");
    }

    #[test]
    fn auth_secrets_are_required_kept_and_masked() {
        let basic = AuthInput::Basic {
            username: "u".into(),
            password: None,
        };
        assert!(resolve_auth(&basic, None).is_err());
        let cur = Auth::Basic {
            username: "old".into(),
            password: "pw".into(),
        };
        let a = resolve_auth(&basic, Some(&cur)).unwrap();
        assert_eq!(
            a,
            Auth::Basic {
                username: "u".into(),
                password: "pw".into()
            }
        );
        assert!(!serde_json::to_string(&a.masked()).unwrap().contains("pw"));
        assert!(!format!("{a:?}").contains("pw"));
        // An OAuth2 secret does not follow a new token URL.
        let cur = Auth::OAuth2ClientCredentials {
            token_url: "https://a.example/token".into(),
            client_id: "c".into(),
            client_secret: "cs".into(),
            scope: None,
        };
        let moved = AuthInput::OAuth2ClientCredentials {
            token_url: "https://b.example/token".into(),
            client_id: "c".into(),
            client_secret: None,
            scope: None,
        };
        assert!(resolve_auth(&moved, Some(&cur)).is_err());
        let colon = AuthInput::Basic {
            username: "a:b".into(),
            password: Some("p".into()),
        };
        assert!(resolve_auth(&colon, None).is_err());
    }
}
