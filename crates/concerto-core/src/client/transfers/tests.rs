//! The transfer schedules and the instances they are tried on.

use super::*;
use proptest::prelude::*;

#[test]
fn regular_graphs_have_every_degree_equal() {
    for seed in 0..20 {
        let c = regular_counts(8, 5, seed);
        assert!(c.iter().all(|row| row.iter().sum::<u64>() == 5));
        assert!((0..8).all(|s| c.iter().map(|row| row[s]).sum::<u64>() == 5));
    }
}

#[test]
fn skewed_graphs_load_the_first_servers_most() {
    let c = skewed_counts(16, 16, 6, 1.0, 3);
    assert!(c.iter().all(|row| row.iter().sum::<u64>() == 6));
    let load = |s: usize| c.iter().map(|row| row[s]).sum::<u64>();
    assert!(load(0) > load(15) && load(0) + load(1) > 16 * 6 / 4);
    assert_eq!(skewed_counts(16, 16, 6, 1.0, 3), c, "seeded");
}

/// The Clusterfile paper's Figure 1: P1 and P2 issue T1 (P1 to D1), T2
/// (P2 to D2), T3 (P1 to D3), T4 (P2 to D3), in that order.
fn figure_1() -> Transfers {
    Transfers::new(2, 3, vec![(0, 0), (1, 1), (0, 2), (1, 2)]).unwrap()
}

/// FCFS as Jain et al. state it: each step scans what is left in
/// arrival order and takes every transfer whose ends are still free.
fn fcfs_by_steps(t: &Transfers) -> Vec<Vec<u32>> {
    let mut left: Vec<u32> = (0..t.edges().len() as u32).collect();
    let mut steps = Vec::new();
    while !left.is_empty() {
        let mut busy = std::collections::HashSet::new();
        let mut step = Vec::new();
        left.retain(|&e| {
            let (c, s) = t.edges()[e as usize];
            if busy.contains(&(0, c)) || busy.contains(&(1, s)) {
                return true;
            }
            busy.insert((0, c));
            busy.insert((1, s));
            step.push(e);
            false
        });
        steps.push(step);
    }
    steps
}

#[test]
fn figure_1_fcfs_takes_three_steps_hcdf_and_the_optimum_two() {
    let t = figure_1();
    assert_eq!(t.max_degree(), 2);
    let fcfs = schedule(&t, Heuristic::Fcfs, 0);
    assert_eq!(fcfs.steps, vec![vec![0, 1], vec![2], vec![3]]);
    let hcdf = schedule(&t, Heuristic::Hcdf, 0);
    assert_eq!(hcdf.len(), 2);
    assert_eq!(optimal(&t).len(), 2);
    for s in [fcfs, hcdf, optimal(&t)] {
        s.check(&t).unwrap();
    }
}

#[test]
fn a_bad_schedule_is_caught() {
    let t = figure_1();
    let twice = Schedule {
        steps: vec![vec![2, 3], vec![0, 1]],
    };
    assert!(twice.check(&t).unwrap_err().contains("shares an endpoint"));
    let missing = Schedule {
        steps: vec![vec![0, 1]],
    };
    assert!(missing.check(&t).unwrap_err().contains("never scheduled"));
    let repeated = Schedule {
        steps: vec![vec![0, 1], vec![0], vec![2], vec![3]],
    };
    assert!(repeated.check(&t).unwrap_err().contains("twice"));
}

#[test]
fn bad_instances_name_the_problem() {
    assert_eq!(
        Transfers::new(2, 2, vec![(0, 0), (2, 1)]).unwrap_err(),
        TransferError::NoSuchClient {
            index: 1,
            client: 2,
            clients: 2
        }
    );
    assert_eq!(
        Transfers::from_counts(&[]).unwrap_err(),
        TransferError::Empty
    );
    assert_eq!(
        Transfers::from_counts(&[vec![1, 2], vec![3]]).unwrap_err(),
        TransferError::Ragged {
            row: 1,
            got: 1,
            expected: 2
        }
    );
    assert_eq!(
        parse_counts("1, 2\n# note\n\n3 4 # tail\n").unwrap(),
        vec![vec![1, 2], vec![3, 4]]
    );
    let bad = |text: &str| parse_counts(text).unwrap_err().to_string();
    assert_eq!(
        bad("1 2\n3 -4\n"),
        "row 2, column 2: \"-4\" is not a whole number >= 0"
    );
    assert_eq!(
        bad("1 2\n3 x\n"),
        "row 2, column 2: \"x\" is not a whole number >= 0"
    );
    assert_eq!(bad("1 2\n3\n"), "row 2: has 1 columns, the first row has 2");
    assert_eq!(split_sizes(&[vec![10, 0, 4]], 4), vec![vec![3, 0, 1]]);
}

#[test]
fn counts_become_transfers_with_the_clients_taking_turns() {
    let t = Transfers::from_counts(&[vec![2, 0], vec![0, 1]]).unwrap();
    assert_eq!(t.edges(), &[(0, 0), (1, 1), (0, 0)]);
    assert_eq!(t.max_degree(), 2);
    assert_eq!(load_bound(&[vec![2, 0], vec![0, 1]]), 2);
}

fn instance() -> impl Strategy<Value = Transfers> {
    (1u32..8, 1u32..8).prop_flat_map(|(c, s)| {
        prop::collection::vec((0..c, 0..s), 0..60)
            .prop_map(move |edges| Transfers::new(c, s, edges).unwrap())
    })
}

proptest! {
    #[test]
    fn every_schedule_is_proper_and_complete_and_the_optimum_uses_delta_steps(
        t in instance(), seed in any::<u64>()
    ) {
        let opt = optimal(&t);
        opt.check(&t).map_err(TestCaseError::fail)?;
        prop_assert_eq!(opt.len(), t.max_degree() as usize);
        for h in [Heuristic::Fcfs, Heuristic::Hdf, Heuristic::Hcdf, Heuristic::Uar,
                  Heuristic::MPasses { passes: 3 }] {
            let s = schedule(&t, h, seed);
            s.check(&t).map_err(TestCaseError::fail)?;
            prop_assert!(s.len() >= opt.len(), "{h:?} beat the optimum");
        }
    }

    #[test]
    fn first_fit_gives_the_steps_fcfs_builds(t in instance()) {
        prop_assert_eq!(schedule(&t, Heuristic::Fcfs, 0).steps, fcfs_by_steps(&t));
    }

    #[test]
    fn the_randomized_heuristics_are_deterministic_for_a_seed(t in instance(), seed in any::<u64>()) {
        for h in [Heuristic::Uar, Heuristic::MPasses { passes: 2 }] {
            prop_assert_eq!(schedule(&t, h, seed), schedule(&t, h, seed));
        }
    }
}
