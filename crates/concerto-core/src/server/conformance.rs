//! Properties every queue must keep, checked on random operation sequences,
//! plus each policy's own ordering semantics.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::request::{MetaOp, ObjectId, Op};

fn all_policies() -> Vec<PolicyConfig> {
    PolicyConfig::NAMES
        .iter()
        .map(|n| PolicyConfig::from_name(n).unwrap())
        .collect()
}

const SIZES: [u64; 5] = [320, 4096, 65536, 1 << 20, 4 << 20];

#[derive(Clone, Debug)]
enum Step {
    Arrive {
        app: u32,
        object: u64,
        issue_ms: u64,
        size: usize,
        meta: bool,
    },
    Dispatch {
        slots: u32,
    },
    CompleteOldest,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..6, 0u64..4, 0u64..5_000, 0..SIZES.len(), prop::bool::weighted(0.1))
            .prop_map(|(app, object, issue_ms, size, meta)| Step::Arrive { app, object, issue_ms, size, meta }),
        2 => (0u32..5).prop_map(|slots| Step::Dispatch { slots }),
        2 => Just(Step::CompleteOldest),
    ]
}

proptest! {
    /// No request is lost or duplicated, dispatch never exceeds the free
    /// slots, and `len` counts exactly the waiting requests.
    #[test]
    fn queues_conserve_requests(steps in prop::collection::vec(step(), 1..200)) {
        for policy in all_policies() {
            let mut q = policy.build(Time::from_millis(1000));
            let mut next_id = 0u64;
            let mut in_flight: Vec<Request> = Vec::new();
            let mut seen: HashSet<u64> = HashSet::new();
            let mut now = Time::ZERO;
            let mut out = Vec::new();
            for s in &steps {
                now += Time::from_micros(100);
                match *s {
                    Step::Arrive { app, object, issue_ms, size, meta } => {
                        let mut r = Request::data(next_id, app, 0, Time::from_millis(issue_ms), Op::Write, object, 0, SIZES[size]);
                        if meta {
                            r.op = Op::Meta(MetaOp::Getattr);
                            r.len = 0;
                        }
                        r.weight = Some(1.0 + (app % 3) as f64);
                        q.enqueue(r, now);
                        next_id += 1;
                    }
                    Step::Dispatch { slots } => {
                        out.clear();
                        q.dispatch(now, slots, &mut out);
                        let used: u32 = out.iter().map(|r| q.slot_cost(r)).sum();
                        prop_assert!(used <= slots, "{} used {} of {} slots", q.name(), used, slots);
                        for r in out.drain(..) {
                            prop_assert!(seen.insert(r.id.0), "{} dispatched {} twice", q.name(), r.id.0);
                            in_flight.push(r);
                        }
                    }
                    Step::CompleteOldest => {
                        if !in_flight.is_empty() {
                            let r = in_flight.remove(0);
                            q.complete(&r, now);
                        }
                    }
                }
                prop_assert_eq!(q.len() as u64, next_id - seen.len() as u64);
            }
            // Drain: complete everything in flight and dispatch until empty.
            // With every slot free, a work-conserving policy always starts
            // something; one that holds requests back names a wakeup time.
            let mut rounds = 0;
            while !q.is_empty() {
                for r in in_flight.drain(..) { q.complete(&r, now); }
                out.clear();
                q.dispatch(now, q.depth().unwrap_or(4), &mut out);
                if out.is_empty() {
                    let wake = q.next_wakeup(now);
                    prop_assert!(wake.is_some_and(|w| w > now), "{} holds requests but dispatches none", q.name());
                    prop_assert_eq!(q.name(), "capped", "only capped may idle with work queued");
                    now = wake.unwrap();
                }
                for r in out.drain(..) {
                    prop_assert!(seen.insert(r.id.0));
                    in_flight.push(r);
                }
                rounds += 1;
                prop_assert!(rounds < 10_000);
            }
            prop_assert_eq!(seen.len() as u64, next_id);
        }
    }

    /// Coordination's central property: for the same tagged requests, every
    /// server serves applications in the same order, whatever order the
    /// requests arrived in.
    #[test]
    fn coordinated_order_is_identical_on_every_server(
        tags in prop::collection::vec((0u32..32768, 0u64..4_000), 1..60),
        perm_seeds in prop::collection::vec(any::<u64>(), 2..5),
        window_ms in 1u64..2_000,
    ) {
        let mut orders: Vec<Vec<(u32, Time)>> = Vec::new();
        for seed in perm_seeds {
            // A different arrival order per server (a seeded shuffle).
            let mut idx: Vec<usize> = (0..tags.len()).collect();
            let mut x = seed | 1;
            for i in (1..idx.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                idx.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut q = Coordinated::new(Time::from_millis(window_ms), TimeSource::Issue);
            for (arrival, &i) in idx.iter().enumerate() {
                let (app, issue) = tags[i];
                q.enqueue(Request::data(i as u64, app, 0, Time::from_millis(issue), Op::Read, 0, 0, 1), Time::from_micros(arrival as u64));
            }
            let mut out = Vec::new();
            q.dispatch(Time::ZERO, u32::MAX, &mut out);
            orders.push(out.iter().map(|r| (r.app.0, r.issue_time)).collect());
        }
        for o in &orders[1..] {
            prop_assert_eq!(o, &orders[0]);
        }
        // And that order is (window, application) ascending.
        let keys: Vec<(u64, u32)> = orders[0].iter().map(|&(a, t)| (t.as_nanos() / Time::from_millis(window_ms).as_nanos(), a)).collect();
        prop_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
    }

    /// FIFO serves in arrival order exactly.
    #[test]
    fn fifo_is_arrival_order(apps in prop::collection::vec(0u32..100, 1..100), slots in 1u32..8) {
        let mut q = Fifo::new();
        for (i, &a) in apps.iter().enumerate() {
            q.enqueue(Request::data(i as u64, a, 0, Time::from_millis(1000 - a as u64), Op::Read, a as u64, 0, 1), Time::ZERO);
        }
        let mut got = Vec::new();
        let mut out = Vec::new();
        while !q.is_empty() {
            q.dispatch(Time::ZERO, slots, &mut out);
            got.extend(out.drain(..).map(|r| r.id.0));
        }
        prop_assert_eq!(got, (0..apps.len() as u64).collect::<Vec<_>>());
    }

    /// Per-object FCFS: at most one request per object in service, each
    /// object's requests in arrival order.
    #[test]
    fn per_object_serves_heads_only(objects in prop::collection::vec(0u64..5, 1..80), slots in 1u32..6) {
        let mut q = PerObjectFcfs::new();
        for (i, &o) in objects.iter().enumerate() {
            q.enqueue(Request::data(i as u64, 0, 0, Time::ZERO, Op::Read, o, 0, 1), Time::ZERO);
        }
        let mut served: HashMap<ObjectId, Vec<u64>> = HashMap::new();
        let mut out = Vec::new();
        while !q.is_empty() {
            out.clear();
            q.dispatch(Time::ZERO, slots, &mut out);
            let distinct: HashSet<ObjectId> = out.iter().map(|r| r.object).collect();
            prop_assert_eq!(distinct.len(), out.len(), "two requests of one object in service");
            for r in &out {
                served.entry(r.object).or_default().push(r.id.0);
                q.complete(r, Time::ZERO);
            }
        }
        for ids in served.values() {
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        }
    }
}

#[test]
fn per_object_takes_objects_in_turn() {
    let mut q = PerObjectFcfs::new();
    for i in 0..6u64 {
        // Three requests for object 0 first, then three for object 1.
        q.enqueue(
            Request::data(i, 0, 0, Time::ZERO, Op::Read, i / 3, 0, 1),
            Time::ZERO,
        );
    }
    let mut order = Vec::new();
    let mut out = Vec::new();
    while !q.is_empty() {
        out.clear();
        q.dispatch(Time::ZERO, 1, &mut out);
        let r = out.pop().unwrap();
        order.push(r.object.0);
        q.complete(&r, Time::ZERO);
    }
    assert_eq!(order, vec![0, 1, 0, 1, 0, 1]);
}

#[test]
fn per_object_ignores_unknown_completions() {
    let mut q = PerObjectFcfs::new();
    let stranger = Request::data(7, 0, 0, Time::ZERO, Op::Read, 42, 0, 1);
    q.complete(&stranger, Time::ZERO);
    q.enqueue(
        Request::data(1, 0, 0, Time::ZERO, Op::Read, 1, 0, 1),
        Time::ZERO,
    );
    q.complete(&stranger, Time::ZERO);
    assert_eq!(q.len(), 1);
}

#[test]
fn policy_names_round_trip() {
    for name in PolicyConfig::NAMES {
        let p = PolicyConfig::from_name(name).unwrap();
        assert_eq!(p.name(), *name);
        assert_eq!(p.build(Time::from_millis(1)).name(), *name);
        // The name a file writes (`kind`, the variant's kebab-case) is the
        // spec's NAME, and the table it writes reads back the same.
        let text = toml::to_string(&p).unwrap();
        assert!(text.starts_with(&format!("kind = \"{name}\"\n")), "{text}");
        assert_eq!(toml::from_str::<PolicyConfig>(&text).unwrap(), p);
        // A key no policy takes is refused, naming it.
        let err = toml::from_str::<PolicyConfig>(&format!("{text}bogus = 1\n")).unwrap_err();
        assert!(
            err.message().contains("unknown field `bogus`"),
            "{name}: {err}"
        );
    }
    assert!(PolicyConfig::from_name("lottery").is_none());
}

fn sfq_family() -> Vec<PolicyConfig> {
    ["sfq", "sfq-d", "sfq-d-plus", "service-sync"]
        .iter()
        .map(|n| PolicyConfig::from_name(n).unwrap())
        .collect()
}

/// Runs `arrivals` (app, size, weight) through a queue with `depth` slots,
/// completing the oldest request whenever no slot is free; returns the
/// dispatch order as (app, size) and the highest slot occupancy seen.
fn run_backlogged(
    q: &mut dyn RequestQueue,
    arrivals: &[(u32, u64, f64)],
    depth: u32,
) -> (Vec<(u32, u64)>, u32) {
    for (i, &(app, size, w)) in arrivals.iter().enumerate() {
        let mut r = Request::data(i as u64, app, 0, Time::ZERO, Op::Write, app as u64, 0, size);
        r.weight = Some(w);
        q.enqueue(r, Time::ZERO);
    }
    let (mut order, mut in_flight, mut used, mut peak) =
        (Vec::new(), Vec::<Request>::new(), 0u32, 0u32);
    let mut out = Vec::new();
    while !q.is_empty() || !in_flight.is_empty() {
        out.clear();
        q.dispatch(Time::ZERO, depth - used, &mut out);
        for r in out.drain(..) {
            used += q.slot_cost(&r);
            order.push((r.app.0, r.len));
            in_flight.push(r);
        }
        peak = peak.max(used);
        if !in_flight.is_empty() {
            let r = in_flight.remove(0);
            used -= q.slot_cost(&r);
            q.complete(&r, Time::ZERO);
        }
    }
    (order, peak)
}

proptest! {
    /// SFQ's fairness bound: for two continuously backlogged applications,
    /// over any prefix of the schedule, the difference of their service
    /// divided by weight is at most max_i/w_i + max_j/w_j (Goyal et al.).
    #[test]
    fn sfq_shares_follow_the_weights_within_the_bound(
        weights in prop::collection::vec(1u32..5, 2..5),
        sizes in prop::collection::vec(prop::collection::vec(1u64..65_536, 40..60), 5),
    ) {
        let arrivals: Vec<(u32, u64, f64)> = (0..60)
            .flat_map(|k| weights.iter().enumerate().map(move |(a, &w)| (a as u32, k, w as f64)))
            .filter_map(|(a, k, w)| sizes[a as usize].get(k).map(|&s| (a, s, w)))
            .collect();
        let mut q = Sfq::new("sfq", SfqParams::sfq());
        let (order, _) = run_backlogged(&mut q, &arrivals, 1);
        let n = weights.len();
        let max_size: Vec<f64> = (0..n).map(|a| *sizes[a].iter().max().unwrap() as f64).collect();
        let total: Vec<usize> = (0..n).map(|a| sizes[a].len().min(60)).collect();
        let (mut served, mut count) = (vec![0f64; n], vec![0usize; n]);
        for &(app, size) in &order {
            let a = app as usize;
            served[a] += size as f64;
            count[a] += 1;
            // Only while every application still has requests waiting.
            if (0..n).any(|i| count[i] >= total[i]) { break; }
            for i in 0..n {
                for j in 0..n {
                    let (wi, wj) = (weights[i] as f64, weights[j] as f64);
                    let gap = served[i] / wi - served[j] / wj;
                    prop_assert!(gap <= max_size[i] / wi + max_size[j] / wj + 1e-6,
                        "apps {i},{j}: normalized service gap {gap} exceeds the bound");
                }
            }
        }
    }

    /// SFQ(D)+ never has more than D slots in service, and its backfill
    /// promotes at most the blocked head's cost (plus one request) past it.
    #[test]
    fn sfq_d_plus_respects_depth_and_the_backfill_bound(
        arrivals in prop::collection::vec((0u32..4, 0..SIZES.len()), 1..150),
        depth in 5u32..20,
        large in 2u32..6,
    ) {
        let costs = SlotCosts::two_class(128 * 1024, large);
        let mut q = Sfq::new("sfq-d-plus", SfqParams::sfq_d_plus(depth, costs.clone(), true));
        let reqs: Vec<(u32, u64, f64)> = arrivals.iter().map(|&(a, s)| (a, SIZES[s], 1.0)).collect();
        for (i, &(app, size, _)) in reqs.iter().enumerate() {
            q.enqueue(Request::data(i as u64, app, 0, Time::ZERO, Op::Write, 0, 0, size), Time::ZERO);
        }
        let (mut used, mut in_flight, mut out) = (0u32, Vec::<Request>::new(), Vec::new());
        let mut promoted_past: HashMap<u64, u32> = HashMap::new();
        while !q.is_empty() || !in_flight.is_empty() {
            let head = q.head();
            out.clear();
            q.dispatch(Time::ZERO, depth - used, &mut out);
            // Requests started while the head stays waiting were promoted past it.
            let head_waits = head.is_some_and(|h| out.iter().all(|r| r.id != h));
            for r in out.drain(..) {
                used += q.slot_cost(&r);
                prop_assert!(used <= depth, "{used} slots in service, depth {depth}");
                if let (Some(h), true) = (head, head_waits) {
                    *promoted_past.entry(h.0).or_default() += q.slot_cost(&r);
                }
                in_flight.push(r);
            }
            if let Some(h) = head {
                let head_cost = costs.slots(reqs[h.0 as usize].1).min(depth);
                let p = promoted_past.get(&h.0).copied().unwrap_or(0);
                prop_assert!(p < head_cost + large.min(depth), "{p} slots promoted past a head costing {head_cost}");
            }
            if !in_flight.is_empty() {
                let r = in_flight.remove(0);
                used -= q.slot_cost(&r);
                q.complete(&r, Time::ZERO);
            }
        }
    }

    /// Same requests, same order: the SFQ family is deterministic.
    #[test]
    fn sfq_family_is_deterministic(arrivals in prop::collection::vec((0u32..5, 0..SIZES.len(), 1u32..4), 1..100)) {
        let reqs: Vec<(u32, u64, f64)> = arrivals.iter().map(|&(a, s, w)| (a, SIZES[s], w as f64)).collect();
        for p in sfq_family() {
            let depth = p.build(Time::ZERO).depth().unwrap_or(1);
            let (a, _) = run_backlogged(p.build(Time::ZERO).as_mut(), &reqs, depth);
            let (b, _) = run_backlogged(p.build(Time::ZERO).as_mut(), &reqs, depth);
            prop_assert_eq!(a, b);
        }
    }
}

#[test]
fn sfq_d_plus_lets_small_requests_through_a_wall_of_large_ones() {
    // One application floods 1 MiB writes; another sends 4 KiB requests.
    // Under SFQ(D) with D = 14 the large ones take all slots; under SFQ(D)+
    // with L = 5 at most two large requests fit, leaving slots for small ones.
    let mut arrivals: Vec<(u32, u64, f64)> = (0..200).map(|_| (0, 1 << 20, 1.0)).collect();
    arrivals.extend((0..20).map(|_| (1, 4096, 1.0)));
    let mut plus = PolicyConfig::from_name("sfq-d-plus")
        .unwrap()
        .build(Time::ZERO);
    let (order_plus, peak) = run_backlogged(plus.as_mut(), &arrivals, 14);
    assert!(peak <= 14);
    let pos_plus = order_plus.iter().position(|&(a, _)| a == 1).unwrap();
    let mut d = PolicyConfig::from_name("sfq-d").unwrap().build(Time::ZERO);
    let (order_d, _) = run_backlogged(d.as_mut(), &arrivals, 14);
    let pos_d = order_d.iter().position(|&(a, _)| a == 1).unwrap();
    assert!(
        pos_plus <= 3,
        "first small request at {pos_plus} under SFQ(D)+"
    );
    assert!(pos_d >= pos_plus, "SFQ(D) {pos_d} vs SFQ(D)+ {pos_plus}");
}

#[test]
fn policy_parameters_are_validated() {
    let bad = |toml: &str| -> String {
        let p: PolicyConfig = toml::from_str(toml).unwrap();
        let crate::FieldError {
            field,
            message: msg,
        } = p.validate().unwrap_err();
        format!("{field}: {msg}")
    };
    assert_eq!(bad("kind = \"sfq-d\"\ndepth = 0"), "depth: must be > 0");
    assert_eq!(
        bad("kind = \"sfq-d-plus\"\nlarge_slots = 0"),
        "large_slots: must be > 0"
    );
    assert!(
        bad("kind = \"sfq-d-plus\"\ncost_table = [{ size = \"4KiB\", slots = 0 }]")
            .starts_with("cost_table:")
    );
    assert_eq!(
        bad("kind = \"service-sync\"\nthreshold = 0"),
        "threshold: must be > 0"
    );
    assert_eq!(
        bad("kind = \"capped\"\ncapacity = 0"),
        "capacity: must be > 0"
    );
    assert!(
        toml::from_str::<PolicyConfig>("kind = \"sfq-d\"\ndepht = 3").is_err(),
        "unknown keys are rejected"
    );
}
