use super::*;

#[test]
fn the_transition_past_the_limit_flaps_and_the_rest_are_suppressed() {
    assert_eq!(verdict(false, 0), Verdict::Alert);
    assert_eq!(verdict(true, 1), Verdict::StartFlapping);
    assert_eq!(verdict(true, 2), Verdict::Suppress);
    assert_eq!(verdict(true, 40), Verdict::Suppress);
}

#[test]
fn only_a_tenants_own_pause_is_quiet_unless_asked() {
    let tenant = audit::tenant_actor(Uuid::nil());
    assert!(!manual_alerts(&tenant, false));
    assert!(manual_alerts(&tenant, true));
    assert!(manual_alerts(audit::ACTOR_OPERATOR, false));
    assert!(manual_alerts(ACTOR_CIRCUIT_BREAKER, false));
}

#[test]
fn config_is_validated_with_the_key_named() {
    assert!(AlertConfig::default().validate().is_ok());
    let c = AlertConfig {
        flapping_transitions: 0,
        ..Default::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .contains("alerts.flapping_transitions"));
    let c = AlertConfig {
        flapping_window_ms: 0,
        ..Default::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .contains("alerts.flapping_window_ms"));
}
