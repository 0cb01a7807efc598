//! GIFT's defining properties on a paced device model: an application
//! throttled below its share is issued coupons, redeems them for more than
//! its share later, and coupons are conserved.

use proptest::prelude::*;

use super::*;
use crate::server::paced_device::{run, served, Paced};

const MB: f64 = 1e6;
const CAPACITY: f64 = 100.0 * MB;

fn gift() -> Gift {
    let config = GiftConfig {
        depth: 1,
        capacity: Some(Bandwidth(CAPACITY)),
        ..GiftConfig::default()
    };
    config.validate().unwrap();
    Gift::new(&config)
}

fn conserved(c: Coupons) -> bool {
    (c.issued - (c.redeemed + c.expired + c.outstanding)).abs() <= 1e-6 * c.issued.max(1.0)
}

/// Three applications on one server. For three seconds application 1 can
/// send only 10 MB/s (held back elsewhere) while 2 and 3 want everything;
/// then 1 wants everything and 3 is held to 10 MB/s.
fn throttle_then_reward() -> (Gift, Vec<(u32, f64, u64)>) {
    let mut q = gift();
    let loads = [
        Paced::at(1, &[(0.0, 3.0, 10.0 * MB), (3.0, 6.0, f64::INFINITY)]),
        Paced::greedy(2, 0.0, 6.0),
        Paced::at(3, &[(0.0, 3.0, f64::INFINITY), (3.0, 6.0, 10.0 * MB)]),
    ];
    let started = run(&mut q, &loads, CAPACITY, 6.0);
    (q, started)
}

#[test]
fn an_application_held_back_elsewhere_gets_coupons_and_redeems_them_for_more_than_its_share() {
    let (q, started) = throttle_then_reward();
    let mb = |app, from, to| served(&started, app, from, to) as f64 / MB;
    // While 1 is held to 10 MB/s the others share the rest: the server stays busy.
    let first: f64 = (1..=3).map(|a| mb(a, 0.5, 3.0)).sum();
    assert!(
        first >= 0.95 * 100.0 * 2.5,
        "{first} MB in 2.5 s at 100 MB/s"
    );
    // Then 1 redeems what it gave up, ahead of 2, which holds no coupons.
    let (one, two) = (mb(1, 3.2, 5.0), mb(2, 3.2, 5.0));
    assert!(
        one >= 1.4 * two,
        "application 1 {one:.1} MB against 2's {two:.1} MB while redeeming"
    );
    let c = q.coupons();
    assert!(
        c.issued >= 40.0 * MB,
        "coupons issued {:.1} MB",
        c.issued / MB
    );
    assert!(
        c.redeemed >= 20.0 * MB,
        "coupons redeemed {:.1} MB",
        c.redeemed / MB
    );
    assert!(conserved(c), "{c:?}");
}

#[test]
fn with_everyone_wanting_more_no_coupons_are_issued_and_shares_are_equal() {
    let mut q = gift();
    let loads = [Paced::greedy(1, 0.0, 2.0), Paced::greedy(2, 0.0, 2.0)];
    let started = run(&mut q, &loads, CAPACITY, 2.0);
    let (one, two) = (served(&started, 1, 0.2, 2.0), served(&started, 2, 0.2, 2.0));
    let ratio = one as f64 / two as f64;
    assert!((0.95..=1.05).contains(&ratio), "{one} against {two}");
    assert_eq!(q.coupons().issued, 0.0);
}

#[test]
fn coupons_not_redeemed_in_their_lifetime_expire() {
    let config = GiftConfig {
        depth: 1,
        capacity: Some(Bandwidth(CAPACITY)),
        coupon_lifetime: Time::from_millis(500),
        ..GiftConfig::default()
    };
    let mut q = Gift::new(&config);
    let loads = [
        Paced::at(1, &[(0.0, 3.0, 10.0 * MB)]),
        Paced::greedy(2, 0.0, 3.0),
    ];
    run(&mut q, &loads, CAPACITY, 3.0);
    let c = q.coupons();
    assert!(c.expired > 0.0 && c.redeemed == 0.0, "{c:?}");
    assert!(
        q.coupons_of(AppId(1)) <= 45.0 * MB * 0.6,
        "at most 0.6 s of coupons held"
    );
    assert!(conserved(c), "{c:?}");
}

#[test]
fn bad_parameters_are_named() {
    let bad = |c: GiftConfig| c.validate().unwrap_err().field;
    assert_eq!(
        bad(GiftConfig {
            floor: 1.5,
            ..GiftConfig::default()
        }),
        "floor"
    );
    assert_eq!(
        bad(GiftConfig {
            epoch: Time::ZERO,
            ..GiftConfig::default()
        }),
        "epoch"
    );
    assert_eq!(
        bad(GiftConfig {
            capacity: Some(Bandwidth(0.0)),
            ..GiftConfig::default()
        }),
        "capacity"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the applications' paces: coupons issued are redeemed,
    /// expired or still held, and the holders' coupons add up to what the
    /// ledger says is outstanding.
    #[test]
    fn coupons_are_conserved(
        paces in prop::collection::vec((0u32..4, 1u32..60, 0u32..3), 2..5),
        lifetime_ms in 200u64..3_000,
    ) {
        let config = GiftConfig {
            depth: 1,
            capacity: Some(Bandwidth(CAPACITY)),
            coupon_lifetime: Time::from_millis(lifetime_ms),
            ..GiftConfig::default()
        };
        let mut q = Gift::new(&config);
        let loads: Vec<Paced> = paces
            .iter()
            .enumerate()
            .map(|(i, &(start, rate, greedy_after))| Paced::slow_then_greedy(i as u32 + 1, start, rate, greedy_after))
            .collect();
        run(&mut q, &loads, CAPACITY, 4.0);
        let c = q.coupons();
        prop_assert!(conserved(c), "{:?}", c);
        let held: f64 = (1..=loads.len() as u32).map(|a| q.coupons_of(AppId(a))).sum();
        prop_assert!((held - c.outstanding).abs() <= 1e-6 * c.issued.max(1.0), "{} held, {:?}", held, c);
    }
}
