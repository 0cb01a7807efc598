//! mClock's defining properties on a device model: reservations met
//! beside heavy neighbours, limits never passed over any second, weights
//! sharing what is left; and the configuration's errors.

use proptest::prelude::*;

use super::*;
use crate::request::Op;

pub(super) const MB: f64 = 1e6;
pub(super) const SIZE: u64 = 64 << 10;

/// One application of a run: its id, settings as written in a policy, and
/// when it starts and stops sending (seconds).
pub(super) struct Load {
    pub(super) app: u32,
    pub(super) qos: AppQos,
    from_s: u64,
    to_s: u64,
}

/// Applications a property test drew, as (reservation MB/s, 0 for none;
/// weight; limit MB/s, at least the reservation): applications 1, 2...
pub(super) fn drawn_loads(apps: &[(u32, u32, Option<u32>)]) -> Vec<Load> {
    apps.iter()
        .enumerate()
        .map(|(i, &(r, w, l))| {
            let reservation = (r > 0).then(|| format!("{r}MB/s"));
            let limit = l.map(|l| format!("{}MB/s", l.max(r)));
            load(
                i as u32 + 1,
                reservation.as_deref(),
                w as f64,
                limit.as_deref(),
            )
        })
        .collect()
}

pub(super) fn load(app: u32, reservation: Option<&str>, weight: f64, limit: Option<&str>) -> Load {
    Load {
        app,
        qos: AppQos {
            app,
            reservation: reservation.map(|r| parse_rate(r).unwrap()),
            weight,
            limit: limit.map(|l| parse_rate(l).unwrap()),
        },
        from_s: 0,
        to_s: u64::MAX,
    }
}

/// Runs backlogged applications (four requests of `SIZE` queued each, from
/// `from_s` to `to_s`) on a device that serves one request at a time at
/// `capacity` bytes per second, for `seconds`; returns each application's
/// bytes served in each second (by start time).
fn run(loads: &[Load], capacity: f64, seconds: u64) -> BTreeMap<u32, Vec<u64>> {
    let mut served: BTreeMap<u32, Vec<u64>> = loads
        .iter()
        .map(|l| (l.app, vec![0; seconds as usize]))
        .collect();
    for (app, start, len) in starts(loads, capacity, seconds) {
        served.get_mut(&app).unwrap()[start.as_secs_f64() as usize] += len;
    }
    served
}

/// As [`run`], each request's application, start time and length in start order.
fn starts(loads: &[Load], capacity: f64, seconds: u64) -> Vec<(u32, Time, u64)> {
    let config = DmClockConfig {
        depth: 1,
        apps: loads.iter().map(|l| l.qos.clone()).collect(),
        ..DmClockConfig::default()
    };
    config.validate().unwrap();
    let mut q = DmClock::new(&config);
    let mut started = Vec::new();
    let mut queued: BTreeMap<u32, u32> = loads.iter().map(|l| (l.app, 0)).collect();
    let end = Time::from_secs(seconds);
    let sending =
        |l: &Load, now: Time| now >= Time::from_secs(l.from_s) && now < Time::from_secs(l.to_s);
    let mut now = Time::ZERO;
    let mut id = 0;
    let mut out = Vec::new();
    while now < end {
        for l in loads {
            let n = queued.get_mut(&l.app).unwrap();
            while sending(l, now) && *n < 4 {
                q.enqueue(Request::data(id, l.app, 0, now, Op::Write, 0, 0, SIZE), now);
                id += 1;
                *n += 1;
            }
        }
        out.clear();
        q.dispatch(now, 1, &mut out);
        let Some(r) = out.pop() else {
            // Held back by limits: idle until a tag comes due (or a new
            // application starts).
            let starts = loads
                .iter()
                .map(|l| Time::from_secs(l.from_s))
                .filter(|&t| t > now);
            now = q
                .next_wakeup(now)
                .into_iter()
                .chain(starts)
                .min()
                .unwrap_or(end);
            continue;
        };
        started.push((r.app.0, now, r.len));
        *queued.get_mut(&r.app.0).unwrap() -= 1;
        now += Time::from_secs_f64(r.len as f64 / capacity);
        q.complete(&r, now);
    }
    started
}

/// The most `app` started in any window of one second (sliding).
pub(super) fn worst_window(started: &[(u32, Time, u64)], app: u32) -> u64 {
    let mine: Vec<(Time, u64)> = started
        .iter()
        .filter(|s| s.0 == app)
        .map(|&(_, t, b)| (t, b))
        .collect();
    let (mut first, mut sum, mut worst) = (0, 0, 0);
    for &(t, b) in &mine {
        sum += b;
        while mine[first].0 + Time::from_secs(1) <= t {
            sum -= mine[first].1;
            first += 1;
        }
        worst = worst.max(sum);
    }
    worst
}

fn mean_rate(per_second: &[u64], from_s: usize) -> f64 {
    let s = &per_second[from_s..];
    s.iter().sum::<u64>() as f64 / s.len() as f64
}

#[test]
fn a_reservation_is_met_beside_two_heavy_neighbours() {
    // 100 MB/s: by weight alone the first would get 1/21 of it (4.8 MB/s).
    let loads = [
        load(1, Some("30MB/s"), 1.0, None),
        load(2, None, 10.0, None),
        load(3, None, 10.0, None),
    ];
    let served = run(&loads, 100.0 * MB, 20);
    let reserved = mean_rate(&served[&1], 1);
    assert!(reserved >= 0.95 * 30.0 * MB, "{} MB/s", reserved / MB);
    // The rest is shared by weight: the reserved one's weight counts too
    // (1 of 21), so it gets a little past its reservation, the two others
    // the same as each other.
    let (b, c) = (mean_rate(&served[&2], 1), mean_rate(&served[&3], 1));
    assert!((b / c - 1.0).abs() < 0.05, "{b} vs {c}");
    assert!(reserved + b + c >= 0.99 * 100.0 * MB);
}

#[test]
fn a_limit_is_never_passed_over_any_second_even_on_an_idle_device() {
    let served = run(&[load(1, None, 1.0, Some("20MB/s"))], 100.0 * MB, 10);
    for (second, &bytes) in served[&1].iter().enumerate() {
        assert!(
            bytes as f64 <= 1.05 * 20.0 * MB,
            "second {second}: {bytes} bytes"
        );
        assert!(
            bytes as f64 >= 0.95 * 20.0 * MB,
            "second {second}: {bytes} bytes"
        );
    }
}

#[test]
fn a_limited_application_held_back_by_a_neighbour_does_not_catch_up_in_a_burst() {
    // A neighbour's reservation takes nearly the whole device for three
    // seconds, so the limited application's requests come due and wait;
    // when the neighbour stops they must not all go at once: in any
    // window of one second it starts at most its limit and one request.
    let mut neighbour = load(2, Some("95MB/s"), 1.0, None);
    neighbour.to_s = 3;
    let loads = [load(1, None, 1.0, Some("20MB/s")), neighbour];
    let started = starts(&loads, 100.0 * MB, 8);
    let worst = worst_window(&started, 1);
    assert!(
        worst as f64 <= 20.0 * MB + SIZE as f64,
        "{} MB in one second",
        worst as f64 / MB
    );
    // And it does run at its limit once the device is free.
    let after: u64 = started
        .iter()
        .filter(|s| s.0 == 1 && s.1 >= Time::from_secs(4))
        .map(|s| s.2)
        .sum();
    assert!(
        after as f64 >= 0.95 * 4.0 * 20.0 * MB,
        "{} MB in 4 s",
        after as f64 / MB
    );
}

#[test]
fn a_limit_is_delivered_when_the_timer_wakes_the_server_late() {
    // A real server's timer fires a millisecond or so after the tag it
    // was set for. 8 MB/s in 64 KiB requests is one per 8.2 ms: spaced
    // from each late start, the limit gave 7.0 MB/s on real servers.
    let config = DmClockConfig {
        depth: 1,
        apps: vec![load(1, None, 1.0, Some("8MB/s")).qos],
        ..DmClockConfig::default()
    };
    let mut q = DmClock::new(&config);
    let late = Time::from_micros(1200);
    let (end, mut now, mut id, mut queued) = (Time::from_secs(10), Time::ZERO, 0, 0);
    let (mut started, mut out) = (Vec::new(), Vec::new());
    while now < end {
        while queued < 4 {
            q.enqueue(Request::data(id, 1, 0, now, Op::Write, 0, 0, SIZE), now);
            (id, queued) = (id + 1, queued + 1);
        }
        out.clear();
        q.dispatch(now, 1, &mut out);
        match out.pop() {
            Some(r) => {
                started.push((1, now, r.len));
                queued -= 1;
                now += Time::from_micros(100);
                q.complete(&r, now);
            }
            None => now = q.next_wakeup(now).expect("a limited request waits") + late,
        }
    }
    let bytes: u64 = started.iter().map(|s| s.2).sum();
    let rate = bytes as f64 / 10.0;
    assert!(rate >= 0.97 * 8.0 * MB, "{} MB/s", rate / MB);
    let worst = worst_window(&started, 1) as f64;
    assert!(
        worst <= 8.0 * MB + SIZE as f64,
        "{} MB in one second",
        worst / MB
    );
}

#[test]
fn without_reservations_or_limits_weights_share_the_device() {
    let served = run(
        &[load(1, None, 1.0, None), load(2, None, 3.0, None)],
        100.0 * MB,
        10,
    );
    let ratio = mean_rate(&served[&2], 0) / mean_rate(&served[&1], 0);
    assert!((ratio / 3.0 - 1.0).abs() < 0.05, "{ratio}");
}

#[test]
fn an_application_back_from_idle_gets_no_credit_for_its_idle_time() {
    // Two equal weights; the second starts at 5 s. Were its tags anchored
    // where it left them (at zero), it would take the device alone for a
    // while; it shares it from its first second.
    let mut late = load(2, None, 1.0, None);
    late.from_s = 5;
    let served = run(&[load(1, None, 1.0, None), late], 100.0 * MB, 10);
    let (first, second) = (served[&1][5] as f64, served[&2][5] as f64);
    assert!((second / first - 1.0).abs() < 0.05, "{first} vs {second}");
}

#[test]
fn rates_in_iops_count_requests_not_bytes() {
    // 1,000 requests of 64 KiB a second: 200 of them reserved for app 1.
    let capacity = 1000.0 * SIZE as f64;
    let loads = [
        load(1, Some("200 IOPS"), 1.0, None),
        load(2, None, 20.0, Some("1000 IOPS")),
    ];
    let served = run(&loads, capacity, 10);
    let requests = mean_rate(&served[&1], 1) / SIZE as f64;
    assert!(requests >= 0.95 * 200.0, "{requests} requests a second");
}

#[test]
fn the_constraint_phase_serves_due_reservations_and_the_weight_phase_the_rest() {
    let loads = [load(1, Some("10MB/s"), 1.0, None), load(2, None, 1.0, None)];
    let config = DmClockConfig {
        depth: 1,
        apps: loads.iter().map(|l| l.qos.clone()).collect(),
        ..DmClockConfig::default()
    };
    let mut q = DmClock::new(&config);
    for i in 0..4 {
        q.enqueue(
            Request::data(i, 1 + (i % 2) as u32, 0, Time::ZERO, Op::Read, 0, 0, SIZE),
            Time::ZERO,
        );
    }
    let mut out = Vec::new();
    // At zero app 1's first reservation tag is due.
    q.dispatch(Time::ZERO, 1, &mut out);
    assert_eq!(out[0].app, AppId(1));
    assert_eq!(q.served_by_phase(), [1, 0]);
    q.complete(&out[0], Time::ZERO);
    out.clear();
    // Its next is due at 64 KiB / 10 MB/s = 6.6 ms; before that, weights.
    q.dispatch(Time::from_millis(1), 1, &mut out);
    assert_eq!(q.served_by_phase(), [1, 1]);
}

#[test]
fn bad_policies_name_the_field() {
    let check = |text: &str| -> String {
        match toml::from_str::<DmClockConfig>(text) {
            Err(e) => e.to_string(),
            Ok(c) => c.validate().map_or_else(
                |e| format!("{}: {}", e.field, e.message),
                |()| String::new(),
            ),
        }
    };
    let mixed = check(
        "[[apps]]\napp = 1\nreservation = \"10MB/s\"\n[[apps]]\napp = 2\nlimit = \"500 IOPS\"",
    );
    assert!(
        mixed.starts_with("apps[1].limit: mixes bytes per second and IOPS"),
        "{mixed}"
    );
    let above = check("[[apps]]\napp = 1\nreservation = \"20MB/s\"\nlimit = \"10MB/s\"");
    assert!(
        above.starts_with("apps[0].reservation: is above"),
        "{above}"
    );
    let twice = check("[[apps]]\napp = 1\n[[apps]]\napp = 1");
    assert!(
        twice.starts_with("apps[1].app: application 1 has two entries"),
        "{twice}"
    );
    assert!(check("[[apps]]\napp = 1\nweight = 0").starts_with("apps[0].weight"));
    assert!(check("[[apps]]\napp = 1\nlimit = \"0MB/s\"").starts_with("apps[0].limit: must be > 0"));
    let unit = check("[[apps]]\napp = 1\nlimit = \"10MB\"");
    assert!(
        unit.contains("\"10MB\" is not a rate (write it like \"40MB/s\" or \"500 IOPS\")"),
        "{unit}"
    );
    let number = check("[[apps]]\napp = 1\nlimit = 10");
    assert!(
        number.contains("a rate such as \"40MB/s\" or \"500 IOPS\""),
        "{number}"
    );
    assert_eq!(
        check("[[apps]]\napp = 1\nreservation = \"5 IOPS\"\nlimit = \"7.5iops\""),
        ""
    );
}

#[test]
fn rates_read_back_as_written() {
    for text in ["40000000B/s", "500 IOPS"] {
        let r = parse_rate(text).unwrap();
        let back = toml::Value::try_from(r).unwrap();
        assert_eq!(parse_rate(back.as_str().unwrap()).unwrap(), r);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whenever the reservations sum to less than the capacity, each is met
    /// within 5%, whatever the weights; and no application passes its limit
    /// by more than 5% in any second.
    #[test]
    fn reservations_are_met_and_limits_kept(
        apps in prop::collection::vec((0u32..30, 1u32..20, prop::option::of(10u32..60)), 2..5),
    ) {
        let capacity = 100.0 * MB;
        let total: u32 = apps.iter().map(|a| a.0).sum();
        prop_assume!((total as f64) < 0.9 * 100.0);
        let loads = drawn_loads(&apps);
        let started = starts(&loads, capacity, 10);
        let served = run(&loads, capacity, 10);
        for (i, &(r, _, l)) in apps.iter().enumerate() {
            let app = i as u32 + 1;
            let got = mean_rate(&served[&app], 1);
            prop_assert!(got >= 0.95 * r as f64 * MB, "app {}: {} MB/s, reserved {}", app, got / MB, r);
            if let Some(l) = l {
                // Over any window of one second, not only whole seconds.
                let limit = l.max(r) as f64 * MB;
                let worst = worst_window(&started, app) as f64;
                prop_assert!(worst <= 1.05 * limit, "app {}: {} MB in a second, limit {}", app, worst / MB, limit / MB);
            }
        }
    }
}
