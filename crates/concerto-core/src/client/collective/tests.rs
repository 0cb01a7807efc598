use proptest::prelude::*;
use proptest::strategy::Strategy;

use super::*;

fn layout(unit: u64, servers: u32) -> StripeLayout {
    StripeLayout::round_robin(unit, servers, 0, servers).unwrap()
}

/// The paper's demonstration program: N processes, process i asks for
/// segments k·N + i, k = 0..3.
fn demo(n: u64, segment: u64) -> Vec<Vec<Extent>> {
    (0..n)
        .map(|i| {
            (0..4)
                .map(|k| Extent::new((k * n + i) * segment, segment))
                .collect()
        })
        .collect()
}

fn planners() -> Vec<Box<dyn Planner>> {
    vec![
        Box::new(Independent::default()),
        Box::new(TwoPhase::default()),
        Box::new(TwoPhase {
            cb_nodes: Some(2),
            cb_buffer_size: 100_000,
            align: true,
            max_segments: 3,
        }),
        Box::new(Resonant::default()),
        Box::new(Resonant {
            max_segments: 2,
            agents_per_server: 2,
            group_delay: Time::from_micros(100),
            // Small rounds: a write's agents take several.
            cb_buffer_size: 50_000,
        }),
    ]
}

/// Per agent and server, the offsets it asks that server for, in the
/// order of its requests, must ascend.
fn ascending_per_server(plan: &CollectivePlan, l: &StripeLayout) -> bool {
    plan.processes.iter().all(|batches| {
        let mut last = std::collections::HashMap::new();
        batches
            .iter()
            .flat_map(|b| &b.requests)
            .flat_map(|r| &r.extents)
            .all(|e| {
                l.chunks(e.offset, e.len).all(|c| {
                    let prev = last.insert(c.server, c.file_offset);
                    prev.is_none_or(|p| p < c.file_offset)
                })
            })
    })
}

#[test]
fn resonance_demo_four_processes_each_agent_reads_its_own_server() {
    // Segment = stripe unit: process i's four segments all sit on server i.
    let l = layout(65536, 4);
    let acc = demo(4, 65536);
    let plan = Resonant::default().plan(Direction::Read, &acc, &l).unwrap();
    plan.check(&acc).unwrap();
    assert_eq!(
        plan.agents,
        vec![(0, vec![0]), (1, vec![1]), (2, vec![2]), (3, vec![3])]
    );
    assert_eq!(plan.exchanges, vec![]);
    // Nothing left for a second phase: every agent read exactly its own data.
    assert!(plan.processes.iter().all(|b| b.len() == 1));
    assert_eq!(plan.io_bytes(), 16 * 65536);
}

#[test]
fn two_phase_gives_each_process_a_contiguous_domain_over_every_server() {
    let l = layout(65536, 4);
    let acc = demo(4, 65536);
    let plan = TwoPhase::default().plan(Direction::Read, &acc, &l).unwrap();
    plan.check(&acc).unwrap();
    // Domain i is segments 4i..4i+3: one request of 256 KiB, striped over all four servers.
    for (i, batches) in plan.processes.iter().enumerate() {
        assert_eq!(
            batches[0].requests[..],
            [ListRequest {
                extents: smallvec::smallvec![Extent::new(i as u64 * 262144, 262144)]
            }]
        );
    }
    // Each process keeps one of its domain's four segments and gets three.
    assert_eq!(plan.exchanged_bytes(), 12 * 65536);
}

#[test]
fn independent_makes_one_call_per_segment_in_order() {
    let l = layout(65536, 4);
    let acc = demo(2, 131072);
    let plan = Independent::default()
        .plan(Direction::Write, &acc, &l)
        .unwrap();
    plan.check(&acc).unwrap();
    let p1 = &plan.processes[1];
    assert_eq!(p1.len(), 4);
    assert!(p1[2].after_previous && !p1[0].after_previous);
    assert_eq!(
        p1[3].requests[0].extents[..],
        [Extent::new(7 * 131072, 131072)]
    );
}

#[test]
fn data_ordered_by_rank_goes_in_timed_groups_without_exchange() {
    // ior-mpi-io: each process its own quarter; 8 processes whose 64 KiB
    // all sit on server 0: one set, and each process its own group.
    let l = layout(65536, 4);
    let quarter = 4 << 20;
    let acc: Vec<Vec<Extent>> = (0..8)
        .map(|i| vec![Extent::new(i * quarter, 65536)])
        .collect();
    let plan = Resonant::default().plan(Direction::Read, &acc, &l).unwrap();
    plan.check(&acc).unwrap();
    assert!(
        plan.arrangement.starts_with("timed groups"),
        "{}",
        plan.arrangement
    );
    assert!(plan.exchanges.is_empty() && plan.agents.is_empty());
    assert_eq!(plan.processes[0][0].after_sent, vec![]);
    assert_eq!(plan.processes[5][0].after_sent, vec![(4, 0)]);
    assert_eq!(plan.processes[5][0].delay, Time::from_micros(500));
    // mpi-io-test with 128 KiB segments on 4 servers: ranks 0, 2, 4, ...
    // read servers 0 and 1, the odd ranks 2 and 3: two sets, and in each
    // a process shares both servers with the one before it.
    let acc: Vec<Vec<Extent>> = (0..8)
        .map(|i| vec![Extent::new(i * 131072, 131072)])
        .collect();
    let plan = Resonant::default().plan(Direction::Read, &acc, &l).unwrap();
    assert_eq!(plan.processes[1][0].after_sent, vec![]);
    assert_eq!(plan.processes[4][0].after_sent, vec![(2, 0)]);
    assert_eq!(plan.processes[7][0].after_sent, vec![(5, 0)]);
    // 16 KiB units over 4 servers, 8 processes of one unit each: ranks
    // i and i + 4 share server i mod 4: four sets of two, in turn.
    let wide = layout(16384, 4);
    let acc: Vec<Vec<Extent>> = (0..8)
        .map(|i| vec![Extent::new(i * 16384, 16384)])
        .collect();
    let plan = Resonant::default()
        .plan(Direction::Read, &acc, &wide)
        .unwrap();
    assert_eq!(plan.processes[3][0].after_sent, vec![]);
    assert_eq!(plan.processes[6][0].after_sent, vec![(2, 0)]);
}

#[test]
fn two_phase_domains_partition_the_range_and_align_when_asked() {
    let tp = TwoPhase {
        cb_nodes: Some(3),
        align: true,
        ..TwoPhase::default()
    };
    let (ranks, bounds) = tp.domains(8, 1000, 1_000_000, 65536);
    assert_eq!(ranks, vec![0, 2, 5]);
    assert_eq!((bounds[0], bounds[3]), (1000, 1_000_000));
    assert!(bounds.windows(2).all(|w| w[0] <= w[1]));
    assert!(bounds[1..3].iter().all(|b| b % 65536 == 0), "{bounds:?}");
    let (_, plain) = TwoPhase::default().domains(4, 0, 1000, 65536);
    assert_eq!(plain, vec![0, 250, 500, 750, 1000]);
}

#[test]
fn overlapping_writes_and_empty_calls_are_refused_or_planned() {
    let l = layout(4096, 2);
    let acc = vec![vec![Extent::new(0, 100)], vec![Extent::new(50, 100)]];
    for p in planners() {
        assert_eq!(
            p.plan(Direction::Write, &acc, &l),
            Err(PlanError::OverlappingWrites(0, 1, 50)),
            "{}",
            p.name()
        );
        // Reading the same bytes from two processes is fine.
        p.plan(Direction::Read, &acc, &l)
            .unwrap()
            .check(&acc)
            .unwrap();
        assert_eq!(
            p.plan(Direction::Read, &[], &l),
            Err(PlanError::NoProcesses)
        );
        let nothing = vec![vec![], vec![]];
        p.plan(Direction::Write, &nothing, &l)
            .unwrap()
            .check(&nothing)
            .unwrap();
    }
}

/// Random calls: up to 6 processes, extents within 0..400 KB; for writes
/// each byte range is given to one owner, so writes never overlap.
fn call() -> impl Strategy<Value = (Vec<Vec<Extent>>, bool, u64, u32)> {
    (
        1usize..7,
        proptest::collection::vec((0u64..400_000, 1u64..40_000, 0usize..6), 0..40),
        any::<bool>(),
        prop_oneof![Just(4096u64), Just(65536), Just(10_000)],
        1u32..6,
    )
        .prop_map(|(procs, raw, write, unit, servers)| {
            let mut acc = vec![Vec::new(); procs];
            if write {
                // Disjoint pieces: cut the line at the drawn offsets.
                let mut cuts: Vec<u64> = raw.iter().map(|&(o, _, _)| o).collect();
                cuts.sort_unstable();
                cuts.dedup();
                for (w, &(_, _, owner)) in cuts.windows(2).zip(&raw) {
                    acc[owner % procs].push(Extent::new(w[0], (w[1] - w[0]).div_ceil(2)));
                }
            } else {
                for (o, len, owner) in raw {
                    acc[owner % procs].push(Extent::new(o, len));
                }
            }
            (acc, write, unit, servers)
        })
}

proptest! {
    #[test]
    fn every_plan_moves_exactly_the_requested_bytes((acc, write, unit, servers) in call()) {
        let l = layout(unit, servers);
        let direction = if write { Direction::Write } else { Direction::Read };
        for p in planners() {
            let plan = p.plan(direction, &acc, &l).map_err(|e| TestCaseError::fail(e.to_string()))?;
            plan.check(&acc).map_err(|e| TestCaseError::fail(format!("{}: {e}", p.name())))?;
            prop_assert_eq!(&plan, &p.plan(direction, &acc, &l).unwrap(), "{} is not deterministic", p.name());
        }
    }

    #[test]
    fn resonant_agents_cover_each_server_once_in_ascending_offsets((acc, write, unit, servers) in call()) {
        let l = layout(unit, servers);
        let direction = if write { Direction::Write } else { Direction::Read };
        let plan = Resonant::default().plan(direction, &acc, &l).unwrap();
        if plan.agents.is_empty() {
            // Timed groups: every process accesses only its own data.
            prop_assert!(plan.exchanges.is_empty());
        } else {
            let per_server = by_server(&acc.iter().map(|a| normalize(a)).collect::<Vec<_>>(), &l);
            let used: Vec<u32> = per_server
                .iter()
                .enumerate()
                .filter(|(_, ranks)| ranks.iter().any(|e| !e.is_empty()))
                .map(|(s, _)| s as u32)
                .collect();
            prop_assert_eq!(plan.agents.iter().map(|(s, _)| *s).collect::<Vec<_>>(), used);
            prop_assert!(plan.agents.iter().all(|(_, a)| a.len() == 1));
            // The agent has data on its server, and it serves a second
            // server only if every process with data there already served one.
            let mut serving = vec![false; acc.len()];
            for (server, a) in &plan.agents {
                let ranks = &per_server[*server as usize];
                let agent = a[0] as usize;
                prop_assert!(!ranks[agent].is_empty(), "agent {} has no data on server {}", agent, server);
                if serving[agent] {
                    prop_assert!((0..acc.len()).all(|r| ranks[r].is_empty() || serving[r]));
                } else {
                    // The most data of those not yet serving, ties to the lowest rank.
                    let best = (0..acc.len())
                        .filter(|&r| !serving[r] && !ranks[r].is_empty())
                        .max_by_key(|&r| (bytes_of(&ranks[r]), std::cmp::Reverse(r)));
                    prop_assert_eq!(best, Some(agent));
                }
                serving[agent] = true;
            }
        }
        prop_assert!(ascending_per_server(&plan, &l));
    }

    #[test]
    fn no_request_carries_more_segments_than_allowed((acc, write, unit, servers) in call()) {
        let l = layout(unit, servers);
        let direction = if write { Direction::Write } else { Direction::Read };
        for (p, limit) in [
            (Box::new(TwoPhase { max_segments: 3, ..TwoPhase::default() }) as Box<dyn Planner>, 3),
            (Box::new(Resonant { max_segments: 2, ..Resonant::default() }), 2),
            (Box::new(Independent { max_segments: 5 }), 5),
        ] {
            let plan = p.plan(direction, &acc, &l).unwrap();
            prop_assert!(plan.processes.iter().flatten().flat_map(|b| &b.requests).all(|r| r.extents.len() <= limit));
        }
    }
}

/// The plan with every extent `by` bytes further into the file.
fn shifted(plan: &CollectivePlan, by: u64) -> CollectivePlan {
    let mut p = plan.clone();
    let mv = |es: &mut [Extent]| {
        for e in es.iter_mut() {
            e.offset += by;
        }
    };
    for batch in p.processes.iter_mut().flatten() {
        for r in &mut batch.requests {
            mv(&mut r.extents);
        }
    }
    for x in &mut p.exchanges {
        mv(&mut x.extents);
    }
    p
}

#[test]
fn a_call_shifted_by_whole_stripes_gets_the_plan_shifted() {
    // The simulator plans a repeating pattern once and shifts the plan
    // (model/collective.rs): that is only right if every planner's plan
    // moves with the data when the data moves by whole stripes.
    let l = layout(65536, 4);
    for spec in [
        "demo:segment=32KiB",
        "demo:segment=96KiB",
        "mpi-io-test:segment=128KiB",
        "noncontig:elmtcount=4096,call=1MiB",
        "hpio:count=16,size=24KiB",
        "coll-perf:n=64",
    ] {
        let pattern = patterns::Pattern::parse(spec).unwrap();
        let shift = pattern.call_shift(4).unwrap();
        if shift % (65536 * 4) != 0 {
            continue;
        }
        for direction in [Direction::Read, Direction::Write] {
            for p in planners() {
                let first = p.plan(direction, &pattern.accesses(4, 0), &l).unwrap();
                let third = p.plan(direction, &pattern.accesses(4, 2), &l).unwrap();
                assert_eq!(
                    third,
                    shifted(&first, 2 * shift),
                    "{spec} {direction:?} {}",
                    p.name()
                );
            }
        }
    }
}
