//! AdapTBF's defining properties on a paced device model: shares follow
//! the priorities, unused tokens are lent so the device stays busy, and
//! borrowed tokens are returned when the lender wants them back.

use proptest::prelude::*;

use super::*;
use crate::server::paced_device::{run, served, Paced};

const MB: f64 = 1e6;
const CAPACITY: f64 = 100.0 * MB;

fn adaptbf(jobs: &[(u32, f64)]) -> AdapTbf {
    let config = AdapTbfConfig {
        depth: 1,
        capacity: Some(Bandwidth(CAPACITY)),
        jobs: jobs
            .iter()
            .map(|&(app, priority)| JobPriority { app, priority })
            .collect(),
        ..AdapTbfConfig::default()
    };
    config.validate().unwrap();
    AdapTbf::new(&config)
}

fn conserved(l: Loans) -> bool {
    (l.borrowed - (l.repaid + l.forgiven + l.outstanding)).abs() <= 1e-6 * l.borrowed.max(1.0)
}

#[test]
fn two_jobs_wanting_everything_share_by_priority() {
    let mut q = adaptbf(&[(1, 4.0), (2, 1.0)]);
    let loads = [Paced::greedy(1, 0.0, 3.0), Paced::greedy(2, 0.0, 3.0)];
    let started = run(&mut q, &loads, CAPACITY, 3.0);
    let one = served(&started, 1, 0.2, 3.0) as f64;
    let both = one + served(&started, 2, 0.2, 3.0) as f64;
    assert!(
        (0.76..=0.84).contains(&(one / both)),
        "priority 4 of 5 got {:.3}",
        one / both
    );
    assert_eq!(q.loans().borrowed, 0.0, "nobody lends when all want more");
}

#[test]
fn tokens_a_job_does_not_use_are_lent_so_the_device_stays_busy() {
    let mut q = adaptbf(&[]);
    let loads = [
        Paced::at(1, &[(0.0, 3.0, 10.0 * MB)]),
        Paced::greedy(2, 0.0, 3.0),
    ];
    let started = run(&mut q, &loads, CAPACITY, 3.0);
    let two = served(&started, 2, 0.5, 3.0) as f64 / MB / 2.5;
    assert!(
        two >= 80.0,
        "the borrower moved {two:.1} MB/s; its base is 50"
    );
    assert!(q.loans().borrowed > 0.0);
}

#[test]
fn borrowed_tokens_are_returned_when_the_lender_wants_them() {
    let mut q = adaptbf(&[]);
    let loads = [
        Paced::at(1, &[(0.0, 2.0, 10.0 * MB), (2.0, 8.0, f64::INFINITY)]),
        Paced::greedy(2, 0.0, 8.0),
    ];
    let started = run(&mut q, &loads, CAPACITY, 8.0);
    let l = q.loans();
    assert!(l.borrowed >= 50.0 * MB, "{l:?}");
    assert_eq!(
        q.owed(AppId(2), AppId(1)),
        0.0,
        "every loan paid back: {l:?}"
    );
    assert!(l.repaid >= 0.99 * l.borrowed, "{l:?}");
    // While it is paid back the lender gets more than its base.
    let one = served(&started, 1, 2.2, 3.5) as f64 / MB / 1.3;
    assert!(
        one >= 65.0,
        "the lender moved {one:.1} MB/s while reclaiming"
    );
    // And once paid back, the shares are even again.
    let (a, b) = (served(&started, 1, 7.0, 8.0), served(&started, 2, 7.0, 8.0));
    assert!(
        (0.9..=1.1).contains(&(a as f64 / b as f64)),
        "{a} against {b}"
    );
    assert!(conserved(l), "{l:?}");
}

#[test]
fn a_loan_whose_lender_left_is_written_off() {
    let mut q = adaptbf(&[]);
    let loads = [
        Paced::at(1, &[(0.0, 1.0, 10.0 * MB)]),
        Paced::greedy(2, 0.0, 4.0),
    ];
    run(&mut q, &loads, CAPACITY, 4.0);
    let l = q.loans();
    assert!(l.forgiven > 0.0 && l.outstanding.abs() < 1.0, "{l:?}");
    assert!(conserved(l), "{l:?}");
}

#[test]
fn bad_parameters_are_named() {
    let bad = |c: AdapTbfConfig| c.validate().unwrap_err().field;
    assert_eq!(
        bad(AdapTbfConfig {
            repay: -0.1,
            ..AdapTbfConfig::default()
        }),
        "repay"
    );
    let twice = AdapTbfConfig {
        jobs: vec![
            JobPriority {
                app: 3,
                priority: 1.0,
            },
            JobPriority {
                app: 3,
                priority: 2.0,
            },
        ],
        ..AdapTbfConfig::default()
    };
    assert_eq!(bad(twice), "jobs[1].app");
    let zero = AdapTbfConfig {
        jobs: vec![JobPriority {
            app: 3,
            priority: 0.0,
        }],
        ..AdapTbfConfig::default()
    };
    assert_eq!(bad(zero), "jobs[0].priority");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the jobs' paces and priorities: tokens borrowed are
    /// repaid, written off or still owed, and the debts add up to what the
    /// ledger says is outstanding.
    #[test]
    fn borrowed_tokens_are_conserved(
        jobs in prop::collection::vec((0u32..4, 1u32..60, 0u32..3, 1u32..5), 2..5),
    ) {
        let priorities: Vec<(u32, f64)> =
            jobs.iter().enumerate().map(|(i, j)| (i as u32 + 1, j.3 as f64)).collect();
        let mut q = adaptbf(&priorities);
        let loads: Vec<Paced> = jobs
            .iter()
            .enumerate()
            .map(|(i, &(start, rate, greedy_for, _))| Paced::slow_then_greedy(i as u32 + 1, start, rate, greedy_for))
            .collect();
        run(&mut q, &loads, CAPACITY, 5.0);
        let l = q.loans();
        prop_assert!(conserved(l), "{:?}", l);
        let n = loads.len() as u32;
        let owed: f64 = (1..=n).flat_map(|b| (1..=n).map(move |x| (b, x)))
            .map(|(b, x)| q.owed(AppId(b), AppId(x)))
            .sum();
        prop_assert!((owed - l.outstanding).abs() <= 1e-6 * l.borrowed.max(1.0), "{} owed, {:?}", owed, l);
    }
}

#[test]
fn without_a_capacity_the_shares_are_of_what_the_server_delivers() {
    let config = AdapTbfConfig {
        depth: 1,
        jobs: vec![JobPriority {
            app: 1,
            priority: 3.0,
        }],
        ..AdapTbfConfig::default()
    };
    let mut q = AdapTbf::new(&config);
    // The device moves 40 MB/s; a rated bandwidth of 100 would never bind.
    let loads = [Paced::greedy(1, 0.0, 3.0), Paced::greedy(2, 0.0, 3.0)];
    let started = run(&mut q, &loads, 40.0 * MB, 3.0);
    let one = served(&started, 1, 0.5, 3.0) as f64;
    let share = one / (one + served(&started, 2, 0.5, 3.0) as f64);
    assert!(
        (0.71..=0.79).contains(&share),
        "priority 3 of 4 got {share:.3}"
    );
}
