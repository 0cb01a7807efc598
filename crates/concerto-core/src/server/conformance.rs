//! Properties every queue must keep, checked on random operation sequences,
//! plus each policy's own ordering semantics.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::request::{ObjectId, Op};

fn all_policies() -> Vec<PolicyConfig> {
    PolicyConfig::NAMES.iter().map(|n| PolicyConfig::from_name(n).unwrap()).collect()
}

#[derive(Clone, Debug)]
enum Step {
    Arrive { app: u32, object: u64, issue_ms: u64 },
    Dispatch { slots: u32 },
    CompleteOldest,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..6, 0u64..4, 0u64..5_000).prop_map(|(app, object, issue_ms)| Step::Arrive { app, object, issue_ms }),
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
                    Step::Arrive { app, object, issue_ms } => {
                        q.enqueue(Request::data(next_id, app, 0, Time::from_millis(issue_ms), Op::Write, object, 0, 4096), now);
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
            let mut rounds = 0;
            while !q.is_empty() {
                for r in in_flight.drain(..) { q.complete(&r, now); }
                out.clear();
                q.dispatch(now, 4, &mut out);
                prop_assert!(!out.is_empty(), "{} holds requests but dispatches none", q.name());
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
        q.enqueue(Request::data(i, 0, 0, Time::ZERO, Op::Read, i / 3, 0, 1), Time::ZERO);
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
    q.enqueue(Request::data(1, 0, 0, Time::ZERO, Op::Read, 1, 0, 1), Time::ZERO);
    q.complete(&stranger, Time::ZERO);
    assert_eq!(q.len(), 1);
}

#[test]
fn policy_names_round_trip() {
    for name in PolicyConfig::NAMES {
        let p = PolicyConfig::from_name(name).unwrap();
        assert_eq!(p.name(), *name);
        assert_eq!(p.build(Time::from_millis(1)).name(), *name);
    }
    assert!(PolicyConfig::from_name("lottery").is_none());
}
