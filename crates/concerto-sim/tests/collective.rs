//! Collective calls in the simulator: plans from concerto-core's planners
//! run as requests, exchanges over the network, a server read cache, and
//! the disk behaviour that makes resonance (resonant-io.txt).

mod common;

use common::{error_of, scenario};
use concerto_sim::simulate;

/// The demonstration program on the paper's cluster, as
/// `experiments/resonance/` calibrates it: 4 servers with one SATA disk
/// each, 64 KiB stripes, gigabit Ethernet.
const DEMO: &str = r#"
[policy]
kind = "fifo"
[cluster]
servers = 4
stripe_unit = "64KiB"
[cluster.network]
latency = "50us"
jitter = "20us"
client_bandwidth = "110MB/s"
server_bandwidth = "110MB/s"
flow_buffer = "256KiB"
[cluster.device]
kind = "hdd"
transfer_rate = "55MB/s"
object_placement = "random"
cache = "64MiB"
[[apps]]
workload = "collective"
access = "demo:segment=64KiB"
processes = 4
requests = 40
"#;

fn bandwidth(sets: &[&str]) -> f64 {
    let run = simulate(&scenario(DEMO, sets), 1, None);
    run.summary.aggregate_bandwidth_bps / 1e6
}

fn strategy(s: &str) -> String {
    format!("apps[0].collective.strategy=\"{s}\"")
}

#[test]
fn independent_io_resonates_where_each_server_serves_one_process() {
    // Segment = stripe unit, 4 processes: process i reads only server i, in
    // ascending offsets. Two-phase gives each server's four stripes of a
    // call to four processes, which arrive in any order and make it seek.
    let independent = bandwidth(&[&strategy("independent")]);
    let two_phase = bandwidth(&[&strategy("two-phase")]);
    assert!(
        independent > 2.0 * two_phase,
        "independent {independent:.1} MB/s, two-phase {two_phase:.1} MB/s"
    );
    // Off resonance (128 KiB: two processes per server) independent loses it.
    let off = bandwidth(&[
        &strategy("independent"),
        "apps[0].access=\"demo:segment=128KiB\"",
    ]);
    assert!(off < 0.5 * independent, "{off:.1} against {independent:.1}");
}

#[test]
fn resonant_agents_keep_each_server_sequential_where_two_phase_does_not() {
    for segment in ["32KiB", "64KiB", "128KiB", "1MiB"] {
        let access = format!("apps[0].access=\"demo:segment={segment}\"");
        let resonant = bandwidth(&[&strategy("resonant"), &access]);
        let two_phase = bandwidth(&[&strategy("two-phase"), &access]);
        assert!(
            resonant > two_phase,
            "{segment}: resonant {resonant:.1} MB/s, two-phase {two_phase:.1} MB/s"
        );
    }
}

#[test]
fn a_collective_call_counts_the_bytes_asked_for_not_the_bytes_moved() {
    // Resonant reads at 32 KiB: agents read whole stripes, owners read
    // their halves again from the cache; the application still moved
    // 4 processes x 4 segments x 32 KiB per call.
    for s in ["independent", "two-phase", "resonant"] {
        let run = simulate(
            &scenario(
                DEMO,
                &[&strategy(s), "apps[0].access=\"demo:segment=32KiB\""],
            ),
            1,
            None,
        );
        assert_eq!(run.apps[0].bytes, 40 * 4 * 4 * 32 * 1024, "{s}");
    }
    let resonant = simulate(
        &scenario(
            DEMO,
            &[
                &strategy("resonant"),
                "apps[0].access=\"demo:segment=32KiB\"",
            ],
        ),
        1,
        None,
    );
    let served: u64 = resonant.servers.iter().map(|s| s.bytes).sum();
    assert!(
        served > resonant.apps[0].bytes,
        "the prefetching reads served {served}"
    );
}

#[test]
fn the_second_phase_of_a_resonant_read_is_served_from_the_cache() {
    let sets = [
        strategy("resonant"),
        "apps[0].access=\"demo:segment=32KiB\"".to_string(),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let cached = bandwidth(&sets);
    let mut uncached = sets.clone();
    uncached.push("cluster.device.cache=0");
    let uncached = bandwidth(&uncached);
    assert!(
        cached > 1.3 * uncached,
        "with the cache {cached:.1} MB/s, without {uncached:.1} MB/s"
    );
}

#[test]
fn exchanged_data_costs_the_network_it_crosses() {
    // Two-phase writes of 4 x 1 MiB per call with one aggregator: each call
    // it takes 3 MiB from the others, then sends all 4 MiB to the servers,
    // through one 110 MB/s NIC: at best 4 MiB per 7 MiB / 110 MB/s, 63 MB/s.
    // With every process aggregating its own segment nothing is exchanged.
    let write = [
        "apps[0].op=\"write\"",
        "apps[0].access=\"mpi-io-test:segment=1MiB\"",
    ];
    let all = bandwidth(&[write[0], write[1], &strategy("two-phase")]);
    let one = bandwidth(&[
        write[0],
        write[1],
        &strategy("two-phase"),
        "apps[0].collective.cb_nodes=1",
    ]);
    let mib = 1048576.0;
    let bound = 4.0 * mib / (7.0 * mib / 110e6) / 1e6;
    assert!(
        one <= bound,
        "one aggregator {one:.1} MB/s, above {bound:.1}"
    );
    assert!(
        all > 1.3 * one,
        "one aggregator {one:.1} MB/s, four {all:.1} MB/s"
    );
}

#[test]
fn collective_runs_are_deterministic() {
    let sc = scenario(DEMO, &[&strategy("resonant"), "apps[0].op=\"write\""]);
    let a = serde_json::to_string(&simulate(&sc, 7, None)).unwrap();
    let b = serde_json::to_string(&simulate(&sc, 7, None)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn bad_collective_settings_are_named() {
    assert!(error_of(DEMO, &["apps[0].access=\"demo\""]).contains("apps[0].access"));
    assert!(error_of(DEMO, &["apps[0].access=\"zigzag:segment=1\""]).contains("unknown pattern"));
    let e = error_of(
        DEMO,
        &[&strategy("resonant"), "apps[0].collective.cb_nodes=2"],
    );
    assert!(e.contains("apps[0].collective.cb_nodes"), "{e}");
    assert!(error_of(DEMO, &["apps[0].barrier=false"]).contains("apps[0].barrier"));
    let e = error_of(
        DEMO,
        &["apps[0].workload=\"ior\"", "apps[0].request_size=1024"],
    );
    assert!(e.contains("apps[0].access"), "{e}");
}

#[test]
fn romio_cb_automatic_runs_a_call_whose_processes_share_no_stripe_unit_as_independent_calls() {
    // The MPI-IO library's default rule (core's Buffering), in the
    // simulator, on IOR's -c layout, planned by two-phase with one
    // aggregator (which moves every byte itself): with 64 KiB blocks each
    // call's four blocks lie in four stripe units, so with automatic the
    // call is each process's own, as the independent strategy runs it;
    // with 32 KiB blocks two processes share each unit and the call is
    // planned. (The demo pattern's processes interleave within a call:
    // planned.)
    let ior = |block: &str| format!("apps[0].access=\"ior:block={block},transfer={block}\"");
    let two_phase = [
        strategy("two-phase"),
        "apps[0].collective.cb_nodes=1".to_string(),
    ];
    let with = |extra: &[&str]| {
        let sets: Vec<&str> = two_phase
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied())
            .collect();
        bandwidth(&sets)
    };
    let automatic = "apps[0].collective.romio_cb=\"automatic\"";
    let (whole, half) = (ior("64KiB"), ior("32KiB"));
    let independent = bandwidth(&[&strategy("independent"), &whole]);
    let planned = with(&[&whole]);
    assert_ne!(independent, planned, "one aggregator is not four processes");
    assert_eq!(with(&[automatic, &whole]), independent);
    assert_eq!(with(&[automatic, &half]), with(&[&half]));
    let demo = "apps[0].access=\"demo:segment=64KiB\"";
    assert_eq!(with(&[automatic, demo]), with(&[demo]));
    // disable: every call alone; enable: every call planned.
    assert_eq!(
        with(&["apps[0].collective.romio_cb=\"disable\"", &half]),
        bandwidth(&[&strategy("independent"), &half])
    );
    assert_eq!(
        with(&["apps[0].collective.romio_cb=\"enable\"", &whole]),
        planned
    );
}

#[test]
fn a_collective_write_run_as_independent_calls_is_held_behind_and_its_last_call_waits_for_the_servers(
) {
    // IOR's -c layout with 64 KiB blocks on 64 KiB stripes: romio_cb's
    // automatic rule runs every call as the processes' own. With
    // write-behind on, the MPI-IO library holds such a write as it holds
    // an independent one (MPI's nonatomic mode lets another process see
    // it only after a sync), and the simulator holds it alike: a part
    // ends at its copy into the client, so one process's sixteen calls
    // reach the servers at once where written through each waits for the
    // last; every byte still lands, and the last call (the program's sync
    // and close) ends only once the servers have answered them all.
    const IOR_C: &str = r#"
[policy]
kind = "fifo"
[cluster]
servers = 4
stripe_unit = "64KiB"
[cluster.network]
mode = "ideal"
[cluster.device]
kind = "fixed"
service_time = "1ms"
[[apps]]
workload = "collective"
access = "ior:block=64KiB,transfer=64KiB"
processes = 1
requests = 16
[apps.collective]
strategy = "two-phase"
romio_cb = "automatic"
"#;
    let run = |write_behind: &str| {
        let sets = [
            "apps[0].op=\"write\"".to_string(),
            format!("cluster.write_behind=\"{write_behind}\""),
            "output.detail=true".to_string(),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        simulate(&scenario(IOR_C, &sets), 1, None)
    };
    let (held, through) = (run("16MiB"), run("0"));
    for r in [&held, &through] {
        let detail = r.detail.as_ref().expect("output.detail asks for it");
        let written: u64 = detail
            .iter()
            .filter(|p| p.op == concerto_core::Op::Write)
            .map(|p| p.bytes)
            .sum();
        assert_eq!(written, 16 * 65536, "every byte reaches the servers");
        let last = detail.iter().map(|p| p.response).max().unwrap();
        assert!(
            r.apps[0].end_s >= last.as_secs_f64(),
            "the last call waits for the servers"
        );
    }
    let last_issue = |r: &concerto_sim::RunResult| {
        r.detail
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| p.issue)
            .max()
            .unwrap()
    };
    assert_eq!(
        last_issue(&held),
        concerto_core::Time::ZERO,
        "held: no call waits for the servers"
    );
    assert!(
        last_issue(&through).as_secs_f64() >= 0.015,
        "written through: each call waits for the last ({:?})",
        last_issue(&through)
    );
}
