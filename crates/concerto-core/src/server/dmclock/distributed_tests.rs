//! dmClock's distributed tags: an application striped over several
//! servers has its reservation and limit for the service of all of them
//! together, with the servers telling one another what they served.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::tests::{drawn_loads, load, worst_window, Load, MB, SIZE};
use super::*;
use crate::request::Op;

/// A request started: its application, server, start time and length.
type Started = (u32, usize, Time, u64);

/// Servers of one distributed dmClock policy, each serving one request at
/// a time; a server's service report reaches the others as it is made.
struct Servers {
    qs: Vec<DmClock>,
    /// Per server, the request in service and when it is done.
    busy: Vec<Option<(Time, Request)>>,
}

impl Servers {
    fn new(config: &DmClockConfig, servers: usize) -> Servers {
        config.validate().unwrap();
        Servers {
            qs: (0..servers).map(|_| DmClock::new(config)).collect(),
            busy: vec![None; servers],
        }
    }

    /// Starts a request at each idle server that has one to start; `took`
    /// says how long it takes. Returns (server, request) for each.
    fn start(&mut self, now: Time, mut took: impl FnMut(&Request) -> f64) -> Vec<(usize, Request)> {
        let mut started = Vec::new();
        for (s, q) in self.qs.iter_mut().enumerate() {
            let mut out = Vec::new();
            if self.busy[s].is_none() {
                q.dispatch(now, 1, &mut out);
            }
            if let Some(r) = out.pop() {
                let done = now + Time::from_secs_f64(took(&r));
                self.busy[s] = Some((done, r.clone()));
                started.push((s, r));
            }
        }
        started
    }

    /// The next completion, or the next tag to come due at an idle server.
    fn next_event(&self, now: Time) -> Option<Time> {
        (0..self.qs.len())
            .filter_map(|s| match &self.busy[s] {
                Some((done, _)) => Some(*done),
                None => self.qs[s].next_wakeup(now),
            })
            .min()
    }

    /// Completes the requests done by `now`, carrying the reports they
    /// make to the other servers; returns them.
    fn finish(&mut self, now: Time) -> Vec<Request> {
        let mut finished = Vec::new();
        for s in 0..self.qs.len() {
            let Some((done, r)) = self.busy[s].take_if(|(done, _)| *done <= now) else {
                continue;
            };
            self.qs[s].complete(&r, done);
            if let Some(report) = self.qs[s].service_report(done) {
                for (o, q) in self.qs.iter_mut().enumerate() {
                    if o != s {
                        q.absorb_service(&report);
                    }
                }
            }
            finished.push(r);
        }
        finished
    }
}

/// The policy the runs use: one request in service, reports every request.
fn config(apps: Vec<AppQos>, distributed: bool) -> DmClockConfig {
    DmClockConfig {
        depth: 1,
        apps,
        distributed,
        report_threshold: Bytes(SIZE),
        ..DmClockConfig::default()
    }
}

/// Runs backlogged applications (four requests of `SIZE` queued at each
/// server) on `servers` servers serving at `capacity` bytes per second,
/// for `seconds`. Returns every start, in time order.
fn starts_on_servers(
    loads: &[Load],
    servers: usize,
    capacity: f64,
    seconds: u64,
    distributed: bool,
) -> Vec<Started> {
    let apps = loads.iter().map(|l| l.qos.clone()).collect();
    let mut cluster = Servers::new(&config(apps, distributed), servers);
    let mut queued = vec![BTreeMap::<u32, u32>::new(); servers];
    let end = Time::from_secs(seconds);
    let (mut now, mut id, mut started) = (Time::ZERO, 0, Vec::new());
    loop {
        for (s, q) in cluster.qs.iter_mut().enumerate() {
            for l in loads {
                let n = queued[s].entry(l.app).or_default();
                while *n < 4 {
                    q.enqueue(Request::data(id, l.app, 0, now, Op::Read, 0, 0, SIZE), now);
                    id += 1;
                    *n += 1;
                }
            }
        }
        for (s, r) in cluster.start(now, |r| r.len as f64 / capacity) {
            started.push((r.app.0, s, now, r.len));
            *queued[s].get_mut(&r.app.0).unwrap() -= 1;
        }
        match cluster.next_event(now) {
            Some(t) if t < end => now = t,
            _ => return started,
        }
        cluster.finish(now);
    }
}

/// An application's mean rate over all servers from `from_s` on, bytes/s.
fn total_rate(started: &[Started], app: u32, from_s: u64, seconds: u64) -> f64 {
    let bytes: u64 = started
        .iter()
        .filter(|s| s.0 == app && s.2 >= Time::from_secs(from_s))
        .map(|s| s.3)
        .sum();
    bytes as f64 / (seconds - from_s) as f64
}

/// The most `app` started over all servers in any one-second window.
fn worst_total_window(started: &[Started], app: u32) -> f64 {
    let flat: Vec<(u32, Time, u64)> = started.iter().map(|&(a, _, t, b)| (a, t, b)).collect();
    worst_window(&flat, app) as f64
}

#[test]
fn a_limit_holds_for_the_service_of_all_servers_together() {
    // 20 MB/s, striped over three servers of 100 MB/s, alone on them.
    let loads = [load(1, None, 1.0, Some("20MB/s"))];
    let together = starts_on_servers(&loads, 3, 100.0 * MB, 10, true);
    let worst = worst_total_window(&together, 1);
    assert!(worst <= 1.05 * 20.0 * MB, "{} MB in a second", worst / MB);
    let rate = total_rate(&together, 1, 1, 10);
    assert!(rate >= 0.95 * 20.0 * MB, "{} MB/s", rate / MB);
    // Each server alone (mClock) lets it have the limit at every server.
    let apart = starts_on_servers(&loads, 3, 100.0 * MB, 10, false);
    let rate = total_rate(&apart, 1, 1, 10);
    assert!(rate >= 0.95 * 3.0 * 20.0 * MB, "{} MB/s", rate / MB);
}

#[test]
fn a_reservation_is_counted_once_over_the_servers_and_still_met() {
    // 30 MB/s reserved, beside two heavy neighbours, on two servers of
    // 100 MB/s: the reservation phases of both servers together give it
    // its 30 MB/s (not 30 at each), and it gets at least that in all.
    let loads = [
        load(1, Some("30MB/s"), 1.0, None),
        load(2, None, 10.0, None),
        load(3, None, 10.0, None),
    ];
    let together = starts_on_servers(&loads, 2, 100.0 * MB, 20, true);
    let got = total_rate(&together, 1, 1, 20);
    assert!(got >= 0.95 * 30.0 * MB, "{} MB/s", got / MB);
    // By weight it would get 1/21 of the 170 MB/s left: about 38 MB/s in
    // all with the reservation counted once, about 68 counted per server.
    assert!(
        got <= 1.15 * (30.0 + 170.0 / 21.0) * MB,
        "{} MB/s",
        got / MB
    );
    let apart = starts_on_servers(&loads, 2, 100.0 * MB, 20, false);
    let got_apart = total_rate(&apart, 1, 1, 20);
    assert!(
        got_apart >= 1.5 * got,
        "{} vs {} MB/s",
        got_apart / MB,
        got / MB
    );
}

/// Ranks that each write a piece to every one of `servers` servers at
/// once and write again once all pieces are done (IOR's ranks on a file
/// striped over the servers): the servers' paces are coupled, and with
/// service times drawn from `[0.5, 1.5)` of the nominal (seeded) they go
/// out of step, the leading server waiting on the others. Returns the
/// application's bytes over all servers from 1 s to `seconds`, per second.
fn coupled_ranks_rate(limit: &str, servers: usize, ranks: usize, seconds: u64) -> f64 {
    use rand::{Rng, SeedableRng};
    let apps = vec![load(1, None, 1.0, Some(limit)).qos];
    let mut cluster = Servers::new(&config(apps, true), servers);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    // Per rank, the pieces of its write still to finish.
    let mut left = vec![servers; ranks];
    let nominal = SIZE as f64 / (100.0 * MB);
    let (end, mut now, mut id, mut bytes) = (Time::from_secs(seconds), Time::ZERO, 0u64, 0u64);
    let write = |cluster: &mut Servers, rank: usize, id: &mut u64, now: Time| {
        for q in cluster.qs.iter_mut() {
            q.enqueue(
                Request::data(*id, 1, rank as u32, now, Op::Write, 0, 0, SIZE),
                now,
            );
            *id += 1;
        }
    };
    for rank in 0..ranks {
        write(&mut cluster, rank, &mut id, now);
    }
    loop {
        for (_, r) in cluster.start(now, |_| nominal * rng.gen_range(0.5..1.5)) {
            if now >= Time::from_secs(1) {
                bytes += r.len;
            }
        }
        match cluster.next_event(now) {
            Some(t) if t < end => now = t,
            _ => return bytes as f64 / (seconds - 1) as f64,
        }
        for r in cluster.finish(now) {
            let rank = r.rank as usize;
            left[rank] -= 1;
            if left[rank] == 0 {
                write(&mut cluster, rank, &mut id, now);
                left[rank] = servers;
            }
        }
    }
}

#[test]
fn a_limit_holds_when_the_servers_go_out_of_step() {
    // Each server's tags fall behind the clock while the ranks wait on the
    // others, and catch up with the service they are told of.
    for servers in [2, 4] {
        let rate = coupled_ranks_rate("8MB/s", servers, 8, 20);
        assert!(
            (rate / (8.0 * MB) - 1.0).abs() < 0.05,
            "{servers} servers: {} MB/s for a limit of 8",
            rate / MB
        );
    }
}

#[test]
fn reports_are_only_made_with_distributed_tags() {
    let config = DmClockConfig::default();
    let mut q = DmClock::new(&config);
    let r = Request::data(0, 1, 0, Time::ZERO, Op::Write, 0, 0, 1 << 20);
    q.enqueue(r.clone(), Time::ZERO);
    let mut out = Vec::new();
    q.dispatch(Time::ZERO, 1, &mut out);
    q.complete(&r, Time::ZERO);
    assert!(q.service_report(Time::from_secs(1)).is_none());
    // Reports from elsewhere leave a one-server mClock alone.
    q.absorb_service(&ServiceReport {
        served: vec![Served {
            bytes: 1 << 30,
            requests: 1 << 14,
            ..Served::none(AppId(1), 1.0)
        }],
    });
    assert!(q.clients.get(&AppId(1)).is_some_and(|c| c.elsewhere == 0.0));
}

#[test]
fn a_peer_cannot_grow_the_table_without_bound() {
    let config = DmClockConfig {
        distributed: true,
        ..DmClockConfig::default()
    };
    let mut q = DmClock::new(&config);
    for chunk in 0..(MAX_REMEMBERED as u32 / 100 + 10) {
        let served = (0..100)
            .map(|i| Served {
                bytes: 1,
                requests: 1,
                ..Served::none(AppId(chunk * 100 + i), 1.0)
            })
            .collect();
        q.absorb_service(&ServiceReport { served });
    }
    assert_eq!(q.clients.len(), MAX_REMEMBERED);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// On two to four servers, whenever the reservations sum to less than
    /// one server's capacity, each application's total service meets its
    /// reservation within 5% and never passes its limit by more than 5% in
    /// any second, whatever the weights. (Before service elsewhere moved
    /// the tags of the requests already waiting, 400 drawn cases found a
    /// worst second of 11.3 MB under a limit of 10, 17.3 under 16.)
    #[test]
    fn reservations_and_limits_hold_over_the_servers_together(
        servers in 2usize..5,
        apps in prop::collection::vec((0u32..30, 1u32..20, prop::option::of(10u32..60)), 2..4),
    ) {
        let total: u32 = apps.iter().map(|a| a.0).sum();
        prop_assume!((total as f64) < 0.9 * 100.0);
        let loads = drawn_loads(&apps);
        let started = starts_on_servers(&loads, servers, 100.0 * MB, 6, true);
        for (i, &(r, _, l)) in apps.iter().enumerate() {
            let app = i as u32 + 1;
            let got = total_rate(&started, app, 1, 6);
            prop_assert!(got >= 0.95 * r as f64 * MB, "app {}: {} MB/s, reserved {}", app, got / MB, r);
            if let Some(l) = l {
                let limit = l.max(r) as f64 * MB;
                let worst = worst_total_window(&started, app);
                prop_assert!(worst <= 1.05 * limit, "app {}: {} MB in a second, limit {}", app, worst / MB, limit / MB);
            }
        }
    }
}
