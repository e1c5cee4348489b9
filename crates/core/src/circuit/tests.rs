use super::gate::{decide, GateRow};
use super::probe_result::{after_success, AfterSuccess};
use super::*;
use std::time::Duration;

fn gate(state: &str, probe: Option<Uuid>, retry_after_secs: Option<i64>) -> GateRow {
    let now = Utc::now();
    GateRow {
        circuit_state: State::parse(state).unwrap(),
        circuit_generation: 7,
        probe_delivery_id: probe,
        retry_after_until: retry_after_secs.map(|s| now + chrono::Duration::seconds(s)),
        consecutive_failures: 2,
        rate_limit: None,
        now,
        host_state: None,
        host_generation: None,
        host_probe_delivery_id: None,
    }
}

#[test]
fn closed_sends_unless_retry_after_is_pending() {
    let d = Uuid::new_v4();
    assert_eq!(
        decide(Some(&gate("closed", None, None)), d),
        Admission::Send {
            probe_generation: None,
            consecutive_failures: 2,
            rate: None,
            host_probe: None
        }
    );
    let Admission::Wait(w) = decide(Some(&gate("closed", None, Some(30))), d) else {
        panic!("expected a wait")
    };
    assert_eq!(w, Duration::from_secs(30));
    assert!(matches!(
        decide(Some(&gate("closed", None, Some(-30))), d),
        Admission::Send { .. }
    ));
}

#[test]
fn open_and_paused_park() {
    let d = Uuid::new_v4();
    assert_eq!(decide(Some(&gate("open", None, None)), d), Admission::Park);
    assert_eq!(
        decide(Some(&gate("paused", None, None)), d),
        Admission::Park
    );
}

#[test]
fn half_open_sends_only_the_probe() {
    let d = Uuid::new_v4();
    let other = Uuid::new_v4();
    assert_eq!(
        decide(Some(&gate("half_open", Some(d), None)), d),
        Admission::Send {
            probe_generation: Some(7),
            consecutive_failures: 2,
            rate: None,
            host_probe: None
        }
    );
    assert_eq!(
        decide(Some(&gate("half_open", Some(other), None)), d),
        Admission::Park
    );
    assert_eq!(
        decide(Some(&gate("half_open", None, None)), d),
        Admission::Claim {
            channel: ProbeRole::Claims(7),
            host: ProbeRole::None
        }
    );
}

#[test]
fn careful_closing_closes_on_the_kth_consecutive_success() {
    // k = 1: the first successful probe closes, as before careful closing.
    assert_eq!(after_success(0, 1), AfterSuccess::Close);
    // k = 3: the probe and the first trial keep it half-open; the second trial closes.
    assert_eq!(after_success(0, 3), AfterSuccess::Trial { passed: 1 });
    assert_eq!(after_success(1, 3), AfterSuccess::Trial { passed: 2 });
    assert_eq!(after_success(2, 3), AfterSuccess::Close);
    // A count already past k (k lowered meanwhile) closes; k below 1 counts as 1.
    assert_eq!(after_success(5, 3), AfterSuccess::Close);
    assert_eq!(after_success(0, 0), AfterSuccess::Close);
}

#[test]
fn close_after_successes_is_checked_and_named() {
    assert!(check_close_after_successes(None).is_ok());
    assert!(check_close_after_successes(Some(1)).is_ok());
    assert!(check_close_after_successes(Some(100)).is_ok());
    for bad in [0, -1, 101] {
        let e = check_close_after_successes(Some(bad)).unwrap_err();
        assert!(e.to_string().contains("close_after_successes"), "{e}");
    }
    let c = CircuitConfig {
        close_after_successes: 0,
        ..Default::default()
    };
    assert!(c
        .validate()
        .unwrap_err()
        .contains("circuit.close_after_successes"));
}

#[test]
fn a_delivery_goes_only_if_both_the_channel_and_its_host_let_it() {
    let d = Uuid::new_v4();
    let with_host = |state: &str, host: &str, probe: Option<Uuid>| GateRow {
        host_state: Some(crate::hosts::State::parse(host).unwrap()),
        host_generation: Some(9),
        host_probe_delivery_id: probe,
        ..gate(state, None, None)
    };
    assert!(matches!(
        decide(Some(&with_host("closed", "closed", None)), d),
        Admission::Send {
            host_probe: None,
            ..
        }
    ));
    assert_eq!(
        decide(Some(&with_host("closed", "open", None)), d),
        Admission::Park
    );
    assert_eq!(
        decide(Some(&with_host("open", "closed", None)), d),
        Admission::Park
    );
    assert_eq!(
        decide(Some(&with_host("closed", "half_open", None)), d),
        Admission::Claim {
            channel: ProbeRole::None,
            host: ProbeRole::Claims(9)
        }
    );
    assert!(matches!(
        decide(Some(&with_host("closed", "half_open", Some(d))), d),
        Admission::Send {
            host_probe: Some(9),
            rate: None,
            ..
        }
    ));
    assert_eq!(
        decide(
            Some(&with_host("closed", "half_open", Some(Uuid::new_v4()))),
            d
        ),
        Admission::Park
    );
    // A half-open channel does not claim its own probe while its host is open, or half-open
    // testing with another delivery.
    assert_eq!(
        decide(Some(&with_host("half_open", "open", None)), d),
        Admission::Park
    );
    assert_eq!(
        decide(
            Some(&with_host("half_open", "half_open", Some(Uuid::new_v4()))),
            d
        ),
        Admission::Park
    );
    assert_eq!(
        decide(Some(&with_host("half_open", "closed", None)), d),
        Admission::Claim {
            channel: ProbeRole::Claims(7),
            host: ProbeRole::None
        }
    );
}

#[test]
fn with_its_host_half_open_and_free_a_channels_probe_tests_both() {
    let d = Uuid::new_v4();
    let with_host = |probe: Option<Uuid>, host_probe: Option<Uuid>| GateRow {
        host_state: Some(crate::hosts::State::HalfOpen),
        host_generation: Some(9),
        host_probe_delivery_id: host_probe,
        ..gate("half_open", probe, None)
    };
    // Neither role chosen: claims both.
    assert_eq!(
        decide(Some(&with_host(None, None)), d),
        Admission::Claim {
            channel: ProbeRole::Claims(7),
            host: ProbeRole::Claims(9)
        }
    );
    // The channel's probe (woken by its watcher), the host's role free: claims the host's.
    assert_eq!(
        decide(Some(&with_host(Some(d), None)), d),
        Admission::Claim {
            channel: ProbeRole::Holds(7),
            host: ProbeRole::Claims(9)
        }
    );
    // Already the host's probe, the channel's role free: claims the channel's.
    assert_eq!(
        decide(Some(&with_host(None, Some(d))), d),
        Admission::Claim {
            channel: ProbeRole::Claims(7),
            host: ProbeRole::Holds(9)
        }
    );
    // Both held: sent as both probes, no rate limit.
    assert_eq!(
        decide(Some(&with_host(Some(d), Some(d))), d),
        Admission::Send {
            probe_generation: Some(7),
            consecutive_failures: 2,
            rate: None,
            host_probe: Some(9)
        }
    );
}

#[test]
fn a_missing_channel_is_gone() {
    assert_eq!(decide(None, Uuid::new_v4()), Admission::Gone);
}

#[test]
fn default_config_is_valid_and_bad_values_are_named() {
    assert!(CircuitConfig::default().validate().is_ok());
    let c = CircuitConfig {
        max_cooldown_ms: 1,
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().contains("max_cooldown_ms"));
    let c = CircuitConfig {
        failure_threshold: 0,
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().contains("failure_threshold"));
}

#[test]
fn a_plainly_closed_gate_is_a_plain_send() {
    // What admit_and_begin's `plain` condition lets through (closed, no hold pending, no rate
    // limit, host closed or none) is what admit decides as a plain send: no probe role, no rate
    // limit, the row's failures passed on.
    let now = Utc::now();
    for hold in [None, Some(now), Some(now - chrono::Duration::seconds(5))] {
        for host_state in [None, Some(crate::hosts::State::Closed)] {
            for failures in [0, 3] {
                let g = GateRow {
                    circuit_state: State::Closed,
                    circuit_generation: 7,
                    probe_delivery_id: None,
                    retry_after_until: hold,
                    consecutive_failures: failures,
                    rate_limit: None,
                    now,
                    host_state,
                    host_generation: Some(2),
                    host_probe_delivery_id: None,
                };
                assert_eq!(
                    decide(Some(&g), Uuid::new_v4()),
                    Admission::Send {
                        probe_generation: None,
                        consecutive_failures: failures,
                        rate: None,
                        host_probe: None,
                    },
                    "hold {hold:?}, host {host_state:?}"
                );
            }
        }
    }
}

#[test]
fn an_attempt_feeds_back_only_the_channels_current_endpoint() {
    use crate::outcome::Class;
    use breakwater_queue::Feedback;
    let feedback = super::attempt::feedback;
    let ms = Duration::from_millis(40);
    assert_eq!(
        feedback(Class::Success, false, false, ms),
        Feedback::Ok {
            latency: ms,
            runs: 1
        }
    );
    assert_eq!(
        feedback(Class::Transient, false, false, ms),
        Feedback::Overloaded,
        "a timeout, 429 or 5xx is overload"
    );
    assert_eq!(
        feedback(Class::Permanent, false, false, ms),
        Feedback::Neutral
    );
    for class in [Class::Success, Class::Transient, Class::Permanent] {
        assert_eq!(
            feedback(class, true, false, ms),
            Feedback::Neutral,
            "a URL the channel has left"
        );
        assert_eq!(
            feedback(class, false, true, ms),
            Feedback::Neutral,
            "the token endpoint failed: the endpoint was not asked"
        );
    }
}
