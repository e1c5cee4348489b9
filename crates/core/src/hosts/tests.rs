use super::config::DEFAULT_HOST_MAX_IN_FLIGHT;
use super::*;

#[test]
fn host_granularity_keeps_explicit_non_default_ports() {
    let k = |u| host_key(u, Granularity::Host).unwrap();
    assert_eq!(k("https://API.Example.com/hooks?x=1"), "api.example.com");
    assert_eq!(k("https://api.example.com:443/a"), "api.example.com");
    assert_eq!(k("http://api.example.com:80/a"), "api.example.com");
    assert_eq!(k("https://api.example.com:8443/a"), "api.example.com:8443");
    assert_eq!(k("http://127.0.0.1:41234/ep-1"), "127.0.0.1:41234");
    assert_ne!(k("http://127.0.0.1:41234/a"), k("http://127.0.0.1:41235/a"));
    assert_eq!(k("http://127.0.0.1:41234/a"), k("http://127.0.0.1:41234/b"));
    assert_eq!(k("http://[::1]:8080/a"), "[::1]:8080");
    assert_eq!(k("https://example.com./a"), "example.com");
    // IDNA: the url crate gives the punycode form.
    assert_eq!(k("https://bücher.example/a"), "xn--bcher-kva.example");
}

#[test]
fn domain_granularity_uses_the_public_suffix_list() {
    let k = |u| host_key(u, Granularity::Domain).unwrap();
    assert_eq!(k("https://a.b.example.co.uk/x"), "example.co.uk");
    assert_eq!(k("https://hooks.slack.com/services/T/B"), "slack.com");
    assert_eq!(k("https://maxime.medium.com:8443/feed"), "medium.com");
    assert_eq!(k("https://foo.github.io/x"), "foo.github.io");
    // IP literals and names without a registrable domain fall back to the host rule.
    assert_eq!(k("http://127.0.0.1:41234/x"), "127.0.0.1:41234");
    assert_eq!(k("http://localhost:8080/x"), "localhost:8080");
    assert_eq!(k("https://co.uk/x"), "co.uk");
}

#[test]
fn a_url_without_a_host_has_no_key() {
    assert!(host_key("mailto:a@example.com", Granularity::Host).is_err());
    assert!(host_key("not a url", Granularity::Host).is_err());
}

#[test]
fn the_host_gate_passes_closed_parks_open_and_hands_out_one_probe() {
    let d = Uuid::new_v4();
    let other = Uuid::new_v4();
    assert_eq!(decide(None, None, None, d), HostGate::Pass);
    assert_eq!(
        decide(Some(State::Closed), Some(3), None, d),
        HostGate::Pass
    );
    assert_eq!(decide(Some(State::Open), Some(3), None, d), HostGate::Park);
    assert_eq!(
        decide(Some(State::HalfOpen), Some(4), Some(d), d),
        HostGate::Probe(4)
    );
    assert_eq!(
        decide(Some(State::HalfOpen), Some(4), Some(other), d),
        HostGate::Park
    );
    assert_eq!(
        decide(Some(State::HalfOpen), Some(4), None, d),
        HostGate::Claim(4)
    );
}

#[test]
fn default_config_is_valid_and_bad_values_are_named() {
    assert!(HostsConfig::default().validate().is_ok());
    let c = HostsConfig {
        failure_threshold: 1,
        ..Default::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .contains("hosts.failure_threshold"));
    let c = HostsConfig {
        max_cooldown_ms: 1,
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().contains("hosts.max_cooldown_ms"));
    let c = HostsConfig {
        max_in_flight: Some(-1),
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().contains("hosts.max_in_flight"));
    // 0 is allowed: no default per-host cap.
    let c = HostsConfig {
        max_in_flight: Some(0),
        ..HostsConfig::default()
    };
    assert!(c.validate().is_ok());
    assert_eq!(c.default_cap(), None);
    assert_eq!(
        HostsConfig::default().default_cap(),
        Some(DEFAULT_HOST_MAX_IN_FLIGHT)
    );
}
