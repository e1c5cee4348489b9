use super::*;
use chrono::TimeZone;

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
}

const WINDOW: TimeDelta = TimeDelta::seconds(60);

/// Runs `n` deaths at the given times through [`on_dead`], as the failure path does, and
/// returns what was sent: (individual alerts, summaries flushed by deaths), the last window and
/// the timer times asked for.
fn storm(times: &[i64], per_window: i32) -> (usize, Vec<Summary>, DeadWindow, Vec<DateTime<Utc>>) {
    let mut w = DeadWindow::default();
    let (mut alerts, mut flushed, mut timers) = (0, Vec::new(), Vec::new());
    for (i, &at) in times.iter().enumerate() {
        let d = on_dead(
            &w,
            Uuid::from_u128(i as u128 + 1),
            t(at),
            WINDOW,
            per_window,
        );
        alerts += usize::from(d.alert);
        flushed.extend(d.flush);
        timers.extend(d.timer_at);
        w = d.window;
    }
    (alerts, flushed, w, timers)
}

#[test]
fn a_storm_in_one_window_sends_the_allowance_then_one_summary_at_its_end() {
    // 200 deaths within 20 s: 5 one by one, 195 counted; one timer at the window's end.
    let times: Vec<i64> = (0..200).map(|i| i / 10).collect();
    let (alerts, flushed, w, timers) = storm(&times, 5);
    assert_eq!(alerts, 5);
    assert!(flushed.is_empty());
    assert_eq!(w.coalesced, 195);
    assert_eq!(w.in_window, 200);
    assert_eq!(w.sample.len(), SAMPLE_IDS);
    assert_eq!(
        w.sample[0],
        Uuid::from_u128(6),
        "the first coalesced death is the 6th"
    );
    assert_eq!(timers, vec![t(60)], "one timer, at the window's end");
    // The timer: nothing before the end, the summary at it, and nothing after it is sent.
    assert_eq!(summary_due(&w, t(59), WINDOW), SummaryDue::At(t(60)));
    let SummaryDue::Send(s) = summary_due(&w, t(60), WINDOW) else {
        panic!("due at the end")
    };
    assert_eq!(
        (s.count, s.window_start, s.sample.len()),
        (195, t(0), SAMPLE_IDS)
    );
    let sent = DeadWindow {
        coalesced: 0,
        sample: vec![],
        ..w
    };
    assert_eq!(summary_due(&sent, t(61), WINDOW), SummaryDue::Nothing);
}

#[test]
fn a_death_after_the_window_starts_a_new_one_and_flushes_what_the_timer_has_not_sent() {
    // 8 deaths in window 1 (3 coalesced), then one at 70 s: the new window alerts it and the
    // old window's summary goes with it (the timer, if it runs later, finds nothing).
    let (alerts, flushed, w, _) = storm(&[0, 1, 2, 3, 4, 5, 6, 7, 70], 5);
    assert_eq!(alerts, 6);
    assert_eq!(flushed.len(), 1);
    assert_eq!((flushed[0].count, flushed[0].window_start), (3, t(0)));
    assert_eq!((w.start, w.in_window, w.coalesced), (Some(t(70)), 1, 0));
    assert_eq!(summary_due(&w, t(200), WINDOW), SummaryDue::Nothing);
}

#[test]
fn the_bound_is_allowance_plus_one_per_window_whatever_the_rate() {
    // 1 000 deaths, one every 300 ms for 300 s: 5 windows of 60 s.
    let times: Vec<i64> = (0..1000).map(|i| i * 3 / 10).collect();
    let (alerts, flushed, w, timers) = storm(&times, 5);
    assert_eq!(alerts, 5 * 5);
    // 4 windows flushed by a later death, the last one by its timer.
    assert_eq!(flushed.len(), 4);
    assert!(w.coalesced > 0);
    assert_eq!(
        timers.len(),
        5,
        "one timer per window with coalesced deaths"
    );
    let total: i32 = flushed.iter().map(|s| s.count).sum::<i32>() + w.coalesced;
    assert_eq!(
        total as usize + alerts,
        1000,
        "every death is alerted or counted once"
    );
}

#[test]
fn an_allowance_of_zero_sends_summaries_only() {
    let (alerts, _, w, timers) = storm(&[0, 1, 2], 0);
    assert_eq!((alerts, w.coalesced, timers.len()), (0, 3, 1));
}

fn settings() -> EventSettings {
    EventSettings {
        channel_failing: true,
        channel_recovered: true,
        failing_window_ms: 60_000,
        failing_threshold_percent: 30,
        failing_min_attempts: 10,
        ..EventSettings::default()
    }
}

#[test]
fn a_streak_starts_at_the_threshold_with_enough_attempts_and_a_closed_circuit() {
    let s = settings();
    let share = |failed, total| Share { failed, total };
    assert_eq!(
        failing_step(None, share(3, 10), true, t(0), &s),
        Failing::Start
    );
    assert_eq!(
        failing_step(None, share(2, 10), true, t(0), &s),
        Failing::Quiet
    );
    assert_eq!(
        failing_step(None, share(5, 9), true, t(0), &s),
        Failing::Quiet,
        "too few attempts"
    );
    assert_eq!(
        failing_step(None, share(10, 10), false, t(0), &s),
        Failing::Quiet,
        "an open circuit alerts for itself"
    );
}

#[test]
fn a_streak_ends_under_the_threshold_and_not_before_one_window() {
    let s = settings();
    let since = Some(t(0));
    let low = Share {
        failed: 0,
        total: 50,
    };
    assert_eq!(failing_step(since, low, true, t(59), &s), Failing::Hold);
    assert_eq!(
        failing_step(since, low, true, t(60), &s),
        Failing::Recovered
    );
    let high = Share {
        failed: 20,
        total: 50,
    };
    assert_eq!(failing_step(since, high, true, t(600), &s), Failing::Hold);
    let unknown = Share {
        failed: 0,
        total: 3,
    };
    assert_eq!(
        failing_step(since, unknown, true, t(600), &s),
        Failing::Hold,
        "too few attempts to tell"
    );
}

#[test]
fn settings_are_bounded_and_name_the_field() {
    assert!(EventSettingsPatch::default().validate().is_ok());
    let bad = [
        EventSettingsPatch {
            dead_window_ms: Some(999),
            ..Default::default()
        },
        EventSettingsPatch {
            dead_alerts_per_window: Some(101),
            ..Default::default()
        },
        EventSettingsPatch {
            failing_threshold_percent: Some(0),
            ..Default::default()
        },
        EventSettingsPatch {
            failing_min_attempts: Some(10_001),
            ..Default::default()
        },
        EventSettingsPatch {
            failing_window_ms: Some(86_400_001),
            ..Default::default()
        },
    ];
    let fields = [
        "alert_events.dead_window_ms",
        "alert_events.dead_alerts_per_window",
        "alert_events.failing_threshold_percent",
        "alert_events.failing_min_attempts",
        "alert_events.failing_window_ms",
    ];
    for (p, field) in bad.iter().zip(fields) {
        match p.validate() {
            Err(Error::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    let on = EventSettingsPatch {
        channel_failing: Some(true),
        ..Default::default()
    }
    .apply(EventSettings::default());
    assert!(on.channel_failing && on.delivery_dead && !on.channel_recovered);
}
