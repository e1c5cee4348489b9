//! Outbound target checks: channel URLs may not aim at internal addresses.
//!
//! Unless configuration explicitly allows private targets, a channel URL is refused when its host
//! is, or resolves to, a loopback, private, link-local (including the cloud metadata address
//! 169.254.169.254), shared (CGNAT), multicast, broadcast, documentation or unspecified address.
//! The check runs when a channel is created and again at every attempt (the worker's DNS
//! resolver filters addresses), so DNS rebinding after creation does not get through.

use ipnet::IpNet;
use std::net::IpAddr;
use std::sync::OnceLock;
use url::Url;

fn blocked_nets() -> &'static [IpNet] {
    static NETS: OnceLock<Vec<IpNet>> = OnceLock::new();
    NETS.get_or_init(|| {
        [
            "0.0.0.0/8",       // "this network"
            "10.0.0.0/8",      // private (RFC 1918)
            "100.64.0.0/10",   // shared address space (RFC 6598)
            "127.0.0.0/8",     // loopback
            "169.254.0.0/16",  // link-local, incl. cloud metadata
            "172.16.0.0/12",   // private
            "192.0.0.0/24",    // IETF protocol assignments
            "192.0.2.0/24",    // documentation
            "192.88.99.0/24",  // 6to4 relay anycast
            "192.168.0.0/16",  // private
            "198.18.0.0/15",   // benchmarking
            "198.51.100.0/24", // documentation
            "203.0.113.0/24",  // documentation
            "224.0.0.0/4",     // multicast
            "240.0.0.0/4",     // reserved, broadcast
            "::/128",          // unspecified
            "::1/128",         // loopback
            "::/96",           // IPv4-compatible (deprecated; embeds IPv4)
            "::ffff:0:0:0/96", // IPv4-translated (embeds IPv4)
            "64:ff9b::/96",    // NAT64, well-known prefix (embeds IPv4)
            "64:ff9b:1::/48",  // NAT64, local-use prefix
            "2001::/32",       // Teredo (embeds IPv4)
            "2002::/16",       // 6to4 (embeds IPv4)
            "fec0::/10",       // site-local (deprecated)
            "100::/64",        // discard
            "2001:db8::/32",   // documentation
            "fc00::/7",        // unique local
            "fe80::/10",       // link-local
            "ff00::/8",        // multicast
        ]
        .iter()
        .map(|s| s.parse().expect("valid CIDR"))
        .collect()
    })
}

/// Whether `ip` is an internal address that outbound requests must not reach by default.
/// IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) are judged by their IPv4 address.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    blocked_nets().iter().any(|net| net.contains(&ip))
}

/// What a tenant is told when a URL's host is refused, whether it is or resolves to an internal
/// address or does not resolve at all: the same words for every refusal, naming the rule (only
/// public addresses; which kinds are internal) but nothing about which address the host is or
/// resolves to (that goes to the server's debug log), so a tenant can learn neither which
/// internal names exist nor where they point: "does not resolve" against "not allowed" would
/// tell internal names apart. It names the setting that allows internal targets, which a
/// newcomer trying a receiver on loopback needs and which tells a tenant nothing about the
/// network.
pub(crate) const NOT_ALLOWED: &str =
    "the URL's host is not an allowed target: it must resolve, and only \
     to public addresses (loopback, private, link-local, CGNAT, multicast and reserved addresses \
     are internal and refused; a server for development or tests allows them with \
     BREAKWATER_ALLOW_PRIVATE_TARGETS=true)";

/// Whether `c` may not stand in a URL as given: white space, a control character, or one that
/// shows as nothing — those of display names ([`crate::names`]), the zero width joiners, and
/// the variation selectors (U+180B–U+180D, U+FE00–U+FE0F, U+E0100–U+E01EF), which IDNA maps to
/// nothing in a host.
fn unseen(c: char) -> bool {
    c.is_whitespace()
        || crate::names::refused(c)
        || crate::names::joiner(c)
        || matches!(c, '\u{180B}'..='\u{180D}' | '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

/// Parses and checks the form of a channel URL: absolute `http` or `https`, a host, a port
/// other than 0, no credentials, no fragment (RFC 9110 §4.2.4: a fragment is never sent in a
/// request, so `…#x` would be delivered to `…` while the channel showed `#x`), no space,
/// control or invisible character anywhere ([`unseen`]: the WHATWG URL parser silently drops
/// leading and trailing ones and every tab and newline, and IDNA drops invisible ones from a
/// host, so the stored URL would differ from the one given without a word),
/// at most 2 048 characters. A host that is a literal
/// internal IP is refused unless `allow_private`. Errors are messages for the `url` field.
pub fn parse_channel_url(raw: &str, allow_private: bool) -> Result<Url, String> {
    if raw.len() > 2048 {
        return Err("must be at most 2048 characters".into());
    }
    if let Some(c) = raw.chars().find(|&c| unseen(c)) {
        return Err(format!(
            "must not contain spaces, control or invisible characters (found {c:?}; percent-encode one that belongs in the URL, e.g. %20)"
        ));
    }
    let url = Url::parse(raw).map_err(|e| format!("not a valid absolute URL ({e})"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!(
            "scheme must be http or https, not {:?}",
            url.scheme()
        ));
    }
    // The WHATWG parser reads `http:///x`, `http:/x`, `http:x` and `http:\\x` as `http://x/`:
    // a slash too many or too few, or a backslash, and the path becomes the host. Only
    // `scheme://host…` is taken, so the URL stored is the one given (not `http:///x` stored as
    // a channel to host `x`).
    let authority = raw.get(url.scheme().len() + 1..).unwrap_or_default();
    if !authority.starts_with("//") || authority[2..].starts_with(['/', '\\']) {
        return Err(format!(
            "must start with {}:// and a host (e.g. {}://example.com/hook)",
            url.scheme(),
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not contain credentials".into());
    }
    if url.fragment().is_some() {
        return Err("must not contain a fragment (#…): it is never sent to the endpoint".into());
    }
    let host = match url.host() {
        Some(h) => h,
        None => return Err("must have a host".into()),
    };
    // Port 0 names no listening socket (a connect to it always fails): a typo, refused at once.
    if url.port() == Some(0) {
        return Err("port must be 1 to 65535, not 0".into());
    }
    if !allow_private {
        let literal = match host {
            url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
            url::Host::Domain(d)
                if d.eq_ignore_ascii_case("localhost") || d.ends_with(".localhost") =>
            {
                tracing::debug!(host = %d, "refused target: localhost");
                return Err(NOT_ALLOWED.into());
            }
            url::Host::Domain(_) => None,
        };
        if let Some(ip) = literal.filter(|ip| is_forbidden_ip(*ip)) {
            tracing::debug!(%ip, "refused target: an internal address");
            return Err(NOT_ALLOWED.into());
        }
    }
    Ok(url)
}

/// Resolves the URL's host and refuses it if any address is internal (unless `allow_private`).
/// A host that does not resolve is refused too, with the same [`NOT_ALLOWED`]: a channel must be
/// reachable when created.
pub async fn check_resolves_publicly(url: &Url, allow_private: bool) -> Result<(), String> {
    if allow_private {
        return Ok(());
    }
    let host = url.host_str().ok_or("must have a host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs = tokio::net::lookup_host((host, port)).await.map_err(|e| {
        tracing::debug!(host, error = %e, "refused target: does not resolve");
        NOT_ALLOWED.to_string()
    })?;
    for addr in addrs {
        if is_forbidden_ip(addr.ip()) {
            tracing::debug!(host, ip = %addr.ip(), "refused target: resolves to an internal address");
            return Err(NOT_ALLOWED.into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_that_does_not_resolve_is_refused_as_an_internal_one_is() {
        // RFC 6761: names under .invalid never resolve; localhost resolves to loopback.
        let unresolved = Url::parse("https://no-such-host.invalid/hook").unwrap();
        let internal = Url::parse("http://localhost:9/hook").unwrap();
        let a = check_resolves_publicly(&unresolved, false).await;
        let b = check_resolves_publicly(&internal, false).await;
        assert_eq!(a, Err(NOT_ALLOWED.to_string()));
        assert_eq!(a, b);
        assert!(NOT_ALLOWED.contains("BREAKWATER_ALLOW_PRIVATE_TARGETS=true"));
        assert!(NOT_ALLOWED.contains("loopback, private"));
        assert_eq!(check_resolves_publicly(&unresolved, true).await, Ok(()));
    }

    #[test]
    fn internal_addresses_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::ffff:0:7f00:1",
            "64:ff9b:1::7f00:1",
            "2002:7f00:1::",
            "2001::1",
            "fec0::1",
        ] {
            assert!(is_forbidden_ip(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_forbidden_ip(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn channel_urls_are_checked() {
        assert!(parse_channel_url("https://example.com/hook", false).is_ok());
        assert!(parse_channel_url("ftp://example.com/", false).is_err());
        assert!(parse_channel_url("not a url", false).is_err());
        assert!(parse_channel_url("https://user:pw@example.com/", false).is_err());
        assert!(parse_channel_url("https://example.com/hook#part", false)
            .unwrap_err()
            .contains("fragment"));
        assert!(parse_channel_url("https://example.com/hook?q=%23x", false).is_ok());
        for spaced in [
            " https://example.com/hook",
            "https://example.com/hook ",
            "https://exa\tmple.com/hook",
            "https://example.com/a\nb",
            "https://example.com/a b",
            "https://example.com/\u{a0}",
            // IDNA would drop these from the host: https://example.com/hook.
            "https://exa\u{200B}mple.com/hook",
            "https://exa\u{AD}mple.com/hook",
            "https://exa\u{FE0F}mple.com/hook",
            "https://exa\u{200D}mple.com/hook",
        ] {
            assert!(
                parse_channel_url(spaced, false)
                    .unwrap_err()
                    .contains("spaces, control or invisible characters"),
                "{spaced:?}"
            );
        }
        // A name in another script is a URL as given (its host is stored in punycode).
        assert!(parse_channel_url("https://bücher.example/hook", false).is_ok());
        assert!(parse_channel_url("https://example.com/a%20b", false).is_ok());
        assert!(parse_channel_url("http://127.0.0.1:8080/", false).is_err());
        assert!(parse_channel_url("http://[::1]/", false).is_err());
        assert!(parse_channel_url("http://localhost/", false).is_err());
        assert!(parse_channel_url("http://169.254.169.254/latest/meta-data", false).is_err());
        assert!(parse_channel_url("http://127.0.0.1:8080/", true).is_ok());
    }

    #[test]
    fn a_url_whose_host_the_parser_would_invent_is_refused() {
        for url in [
            "http:///x",
            "https:///example.com/hook",
            "http:/example.com",
            "http:example.com",
            "http:\\\\example.com",
            "http://\\example.com",
            "HTTP:///example.com",
        ] {
            let err = parse_channel_url(url, true).unwrap_err();
            assert!(err.contains("://"), "{url}: {err}");
        }
        assert!(parse_channel_url("HTTPS://Example.com/hook", false).is_ok());
        assert!(parse_channel_url("http://127.0.0.1:8080/x", true).is_ok());
    }

    #[test]
    fn port_zero_is_refused_even_where_private_targets_are_allowed() {
        for (url, allow_private) in [
            ("http://example.com:0/hook", false),
            ("http://example.com:0/hook", true),
            ("http://127.0.0.1:0/", true),
        ] {
            assert_eq!(
                parse_channel_url(url, allow_private).unwrap_err(),
                "port must be 1 to 65535, not 0",
                "{url}"
            );
        }
        assert!(parse_channel_url("http://example.com:1/hook", false).is_ok());
    }
}
