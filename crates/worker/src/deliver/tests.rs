//! Unit tests of the statuses an attempt leaves ([`super::Statuses`]).

use super::*;

fn job(attempt: i32, max_attempts: i32) -> Job {
    Job {
        id: 1,
        queue: "deliveries".into(),
        kind: "deliver".into(),
        args: serde_json::Value::Null,
        priority: 0,
        attempt,
        max_attempts,
        claim_token: Uuid::nil(),
        unique_key: None,
        group_id: None,
        gate_key: None,
        created_at: Utc::now(),
    }
}

fn statuses(same: Status, moved: Status) -> Statuses {
    Statuses { same, moved }
}

#[test]
fn a_permanent_failure_of_a_moved_url_is_retried_unless_it_was_the_last_attempt() {
    use Status::{Dead, Delivered, Failed};
    let first = job(1, 3);
    let last = job(3, 3);
    assert_eq!(
        Statuses::after(Class::Permanent, &first),
        statuses(Dead, Failed)
    );
    assert_eq!(
        Statuses::after(Class::Permanent, &last),
        statuses(Dead, Dead)
    );
    assert_eq!(
        Statuses::after(Class::Transient, &first),
        statuses(Failed, Failed)
    );
    assert_eq!(
        Statuses::after(Class::Transient, &last),
        statuses(Dead, Dead)
    );
    assert_eq!(
        Statuses::after(Class::Success, &last),
        statuses(Delivered, Delivered)
    );
}

#[test]
fn the_status_follows_the_endpoint_comparison() {
    let s = Statuses::after(Class::Permanent, &job(1, 3));
    let moved = Endpoint {
        url_changed: true,
        host_changed: false,
    };
    assert_eq!(s.of(moved), Status::Failed);
    assert_eq!(s.of(Endpoint::default()), Status::Dead);
    // Only the URL decides: a re-keyed host with the same URL is the channel's endpoint.
    let rekeyed = Endpoint {
        url_changed: false,
        host_changed: true,
    };
    assert_eq!(s.of(rekeyed), Status::Dead);
}
