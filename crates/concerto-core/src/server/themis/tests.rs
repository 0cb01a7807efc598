//! ThemisIO's splits: each job's share of many draws within 5% of what its
//! policy gives it, a share left unused going to the others, and the same
//! seed drawing the same order.

use proptest::prelude::*;

use super::*;
use crate::request::Op;

/// Keeps every job in `jobs` (application, user) backlogged for `draws`
/// dispatches of one request; returns the requests each job was served.
fn run(config: &ThemisConfig, jobs: &[(u32, Option<u32>)], draws: u64) -> BTreeMap<u32, u64> {
    let mut q = Themis::new(config);
    let mut id = 0;
    let mut send = |q: &mut Themis, app: u32, user: Option<u32>| {
        let mut r = Request::data(id, app, 0, Time::ZERO, Op::Read, app as u64, 0, 4096);
        r.user = user;
        q.enqueue(r, Time::ZERO);
        id += 1;
    };
    for &(app, user) in jobs {
        send(&mut q, app, user);
    }
    let mut served = BTreeMap::new();
    let mut out = Vec::new();
    for _ in 0..draws {
        out.clear();
        q.dispatch(Time::ZERO, 1, &mut out);
        let r = &out[0];
        *served.entry(r.app.0).or_insert(0) += 1;
        q.complete(r, Time::ZERO);
        let user = jobs.iter().find(|j| j.0 == r.app.0).unwrap().1;
        send(&mut q, r.app.0, user);
    }
    served
}

fn config(fairness: Fairness) -> ThemisConfig {
    ThemisConfig {
        fairness,
        depth: 1,
        seed: 7,
        ..ThemisConfig::default()
    }
}

fn fraction(served: &BTreeMap<u32, u64>, app: u32) -> f64 {
    served.get(&app).copied().unwrap_or(0) as f64 / served.values().sum::<u64>() as f64
}

fn within_5_percent(got: f64, want: f64) -> bool {
    (got - want).abs() <= 0.05 * want
}

/// The paper's headline: a 4-node and a 1-node job, each of its own user.
#[test]
fn a_four_node_and_a_one_node_job_split_as_each_policy_says() {
    let jobs = [(1, Some(1001)), (2, Some(1002))];
    let mut size = config(Fairness::Size);
    size.jobs = vec![JobNodes { app: 1, nodes: 4 }, JobNodes { app: 2, nodes: 1 }];
    let cases = [
        (config(Fairness::Job), 0.5),
        (config(Fairness::User), 0.5),
        (size, 0.8),
    ];
    for (c, big) in cases {
        let served = run(&c, &jobs, 100_000);
        let got = fraction(&served, 1);
        assert!(
            within_5_percent(got, big),
            "{:?}: the 4-node job got {got}",
            c.fairness
        );
    }
}

#[test]
fn user_fairness_splits_a_users_share_among_its_jobs() {
    // User 1001 runs two jobs, user 1002 one: 25%, 25%, 50%.
    let jobs = [(1, Some(1001)), (2, Some(1001)), (3, Some(1002))];
    let served = run(&config(Fairness::User), &jobs, 100_000);
    for (app, want) in [(1, 0.25), (2, 0.25), (3, 0.5)] {
        let got = fraction(&served, app);
        assert!(within_5_percent(got, want), "job {app}: {got}");
    }
}

#[test]
fn group_then_user_fairness_splits_groups_then_users() {
    // Group 1: users 1001 (one job) and 1002 (one job); user 1003 in no
    // group is a group of its own: 25%, 25%, 50%.
    let mut c = config(Fairness::GroupUser);
    c.groups = vec![GroupUsers {
        group: 1,
        users: vec![1001, 1002],
    }];
    let jobs = [(1, Some(1001)), (2, Some(1002)), (3, Some(1003))];
    let served = run(&c, &jobs, 100_000);
    for (app, want) in [(1, 0.25), (2, 0.25), (3, 0.5)] {
        let got = fraction(&served, app);
        assert!(within_5_percent(got, want), "job {app}: {got}");
    }
}

#[test]
fn a_share_left_unused_goes_to_the_others() {
    // User fairness, user 1002 with nothing waiting: user 1001's two jobs
    // split the whole server, not half of it.
    let q = {
        let mut q = Themis::new(&config(Fairness::User));
        for (id, app) in [(0, 1), (1, 2)] {
            let mut r = Request::data(id, app, 0, Time::ZERO, Op::Read, 0, 0, 1);
            r.user = Some(1001);
            q.enqueue(r, Time::ZERO);
        }
        q
    };
    let shares = q.shares();
    assert_eq!(shares.values().copied().collect::<Vec<_>>(), [0.5, 0.5]);
    let served = run(
        &config(Fairness::User),
        &[(1, Some(1001)), (2, Some(1001))],
        20_000,
    );
    assert!(within_5_percent(fraction(&served, 1), 0.5));
}

#[test]
fn the_same_seed_draws_the_same_order_and_another_seed_another() {
    let order = |seed: u64| {
        let mut q = Themis::new(&ThemisConfig {
            seed,
            depth: 64,
            ..ThemisConfig::default()
        });
        for id in 0..64 {
            q.enqueue(
                Request::data(id, (id % 4) as u32, 0, Time::ZERO, Op::Read, 0, 0, 1),
                Time::ZERO,
            );
        }
        let mut out = Vec::new();
        q.dispatch(Time::ZERO, 64, &mut out);
        out.iter().map(|r| r.id.0).collect::<Vec<_>>()
    };
    assert_eq!(order(3), order(3));
    assert_ne!(order(3), order(4));
}

#[test]
fn bad_policies_name_the_field() {
    let check = |text: &str| -> String {
        match toml::from_str::<ThemisConfig>(text) {
            Err(e) => e.to_string(),
            Ok(c) => c.validate().map_or_else(
                |e| format!("{}: {}", e.field, e.message),
                |()| String::new(),
            ),
        }
    };
    assert!(check("fairness = \"size\"\n[[jobs]]\napp = 1\nnodes = 0")
        .starts_with("jobs[0].nodes: must be > 0"));
    assert!(
        check("[[jobs]]\napp = 1\nnodes = 2\n[[jobs]]\napp = 1\nnodes = 3")
            .starts_with("jobs[1].app: job 1 has two entries")
    );
    assert!(
        check("[[groups]]\ngroup = 1\nusers = [5]\n[[groups]]\ngroup = 2\nusers = [5]")
            .starts_with("groups[1].users: user 5 is in group 1 already")
    );
    assert!(check("fairness = \"nodes\"").contains("unknown variant `nodes`"));
    assert_eq!(check("fairness = \"group-user\"\nseed = 4"), "");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Whatever the jobs, users, groups and sizes, each backlogged job's
    /// share of 200,000 draws is within 5% of the share the policy gives it.
    #[test]
    fn every_jobs_service_follows_its_share(
        jobs in prop::collection::vec((0u32..3, 1u32..5), 2..6),
        fairness in prop::sample::select(vec![Fairness::Job, Fairness::User, Fairness::Size, Fairness::GroupUser]),
        seed in any::<u64>(),
    ) {
        let mut c = ThemisConfig { fairness, depth: 1, seed, ..ThemisConfig::default() };
        c.jobs = jobs.iter().enumerate().map(|(i, &(_, nodes))| JobNodes { app: i as u32 + 1, nodes }).collect();
        // Users 0 and 1 form a group; user 2 is in none.
        c.groups = vec![GroupUsers { group: 9, users: vec![0, 1] }];
        let list: Vec<(u32, Option<u32>)> = jobs.iter().enumerate().map(|(i, &(user, _))| (i as u32 + 1, Some(user))).collect();
        let mut q = Themis::new(&c);
        for &(app, user) in &list {
            let mut r = Request::data(app as u64, app, 0, Time::ZERO, Op::Read, 0, 0, 1);
            r.user = user;
            q.enqueue(r, Time::ZERO);
        }
        let shares = q.shares();
        let total: f64 = shares.values().sum();
        prop_assert!((total - 1.0).abs() < 1e-9);
        let served = run(&c, &list, 200_000);
        for (app, want) in shares {
            let got = fraction(&served, app.0);
            prop_assert!(within_5_percent(got, want), "{:?} job {}: {} for a share of {}", fairness, app.0, got, want);
        }
    }
}
