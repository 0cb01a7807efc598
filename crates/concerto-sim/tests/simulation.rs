//! End-to-end checks of the simulator: determinism, conservation, the
//! analytical model, and configuration errors that name their key.

mod common;
use common::{error_of, scenario};
use concerto_core::analysis::{coordinated_expected_completion, fifo_expected_completion};
use concerto_sim::{simulate, simulate_reps, Scenario};

const IOR: &str = r#"
name = "ior-test"
[cluster]
servers = 8
stripe_unit = "4KiB"
[cluster.device]
kind = "hdd"
[policy]
kind = "fifo"
[[apps]]
workload = "ior"
instances = 4
processes = 8
requests = 6
request_size = "128KiB"
"#;

#[test]
fn same_seed_gives_identical_results() {
    for policy in [
        "fifo",
        "per-object",
        "coordinated",
        "sfq-d-plus",
        "service-sync",
        "capped",
    ] {
        let sc = scenario(
            IOR,
            &[&format!("policy.kind={policy}"), "output.detail=true"],
        );
        let a = simulate(&sc, 42, None);
        let b = simulate(&sc, 42, None);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let (mut ca, mut cb) = (Vec::new(), Vec::new());
        a.write_detail_csv(&mut ca, true).unwrap();
        b.write_detail_csv(&mut cb, true).unwrap();
        assert_eq!(ca, cb);
        assert!(ca.len() > 1000);
        let c = simulate(&sc, 43, None);
        assert_ne!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&c).unwrap()
        );
    }
}

/// `cluster.network.mode = "ideal"` takes the network out of the model: a
/// request is at its server the instant it is sent, a reply back the
/// instant the server is done, and nothing random is drawn for either. One
/// process reading from a fixed device then sees each read take exactly the
/// service time, whatever the seed.
#[test]
fn incast_delays_a_read_whose_answers_overflow_the_clients_port_by_the_timeout() {
    // One process reads 16 x 8 KiB, one piece from each of 16 servers,
    // whose answers all reach its port at once.
    let text = r#"
name = "incast"
[cluster]
servers = 16
stripe_unit = "8KiB"
[cluster.network]
client_bandwidth = "125MB/s"
server_bandwidth = "125MB/s"
jitter = "0ns"
[cluster.device]
kind = "fixed"
service_time = "1ms"
[policy]
kind = "fifo"
[[apps]]
workload = "ior"
processes = 1
requests = 1
request_size = "128KiB"
op = "read"
"#;
    let plain = simulate(&scenario(text, &[]), 1, None).summary.makespan_s;
    assert!(plain < 0.01, "{plain}");
    let incast = |buffer: &str| {
        let set = format!("cluster.network.incast={{buffer=\"{buffer}\", timeout=\"200ms\"}}");
        simulate(&scenario(text, &[&set]), 1, None)
            .summary
            .makespan_s
    };
    // A port that holds 16 KiB loses answers: the read waits the timeout.
    let lost = incast("16KiB");
    assert!(
        lost >= 0.2 && lost < 0.2 + plain + 0.001,
        "{lost} vs {plain}"
    );
    // One that holds the whole burst loses none.
    assert_eq!(incast("1MiB"), plain);
}

#[test]
fn an_ideal_network_adds_no_time_and_draws_nothing() {
    let text = r#"
name = "ideal-network"
[cluster]
servers = 2
stripe_unit = "1MiB"
[cluster.network]
mode = "ideal"
[cluster.device]
kind = "fixed"
service_time = "10ms"
[policy]
kind = "fifo"
[output]
detail = true
[[apps]]
workload = "ior"
processes = 1
requests = 50
request_size = "1MiB"
op = "read"
"#;
    let sc = scenario(text, &[]);
    let run = simulate(&sc, 1, None);
    let detail = run.detail.as_ref().expect("detail was asked for");
    assert_eq!(detail.len(), 50);
    for r in detail {
        assert_eq!((r.issue, r.done), (r.arrive, r.response), "{r:?}");
        assert_eq!(r.done - r.start, concerto_core::Time::from_millis(10));
    }
    assert!(
        (run.summary.makespan_s - 0.5).abs() < 1e-9,
        "{}",
        run.summary.makespan_s
    );
    // Another seed draws another application id, and nothing else changes.
    let other_seed = simulate(&sc, 2, None);
    assert_eq!(
        format!("{detail:?}"),
        format!("{:?}", other_seed.detail.unwrap())
    );
    // The same run with the default network takes longer on every read.
    let networked = simulate(
        &scenario(text, &["cluster.network.mode=\"queued\""]),
        1,
        None,
    );
    assert!(networked.summary.makespan_s > 0.5 + 50.0 * 100e-6);
}

#[test]
fn repetitions_are_independent_of_thread_timing() {
    let sc = scenario(IOR, &[]);
    let set = simulate_reps(&sc, 7, 4, None);
    assert_eq!(set.seeds, vec![7, 8, 9, 10]);
    for (i, run) in set.runs.iter().enumerate() {
        let alone = simulate(&sc, 7 + i as u64, None);
        assert_eq!(
            serde_json::to_string(run).unwrap(),
            serde_json::to_string(&alone).unwrap()
        );
    }
}

#[test]
fn every_byte_is_served_once() {
    for policy in concerto_core::PolicyConfig::NAMES {
        for workload in [
            "workload = \"ior\"\nrequest_size = \"100KiB\"\npattern = \"strided\"",
            "workload = \"pio-bench\"\nrequest_size = \"96KiB\"\nfile = \"per-process\"\nop = \"write\"",
            "workload = \"mpi-tile-io\"\ngrid = [2, 2]\ntile = [64, 32]\nelement_size = 8",
            "workload = \"noncontig\"\nelements = 40\nelement_size = 16\nbarrier = false",
        ] {
            let text = format!(
                "[cluster]\nservers = 5\nstripe_unit = \"4KiB\"\n[cluster.device]\nkind = \"ssd\"\n[policy]\nkind = \"{policy}\"\n[[apps]]\ninstances = 3\nprocesses = 4\nrequests = 5\n{workload}\n"
            );
            let sc = scenario(&text, &[]);
            let r = simulate(&sc, 1, None);
            let expected: u64 = sc.apps.iter().map(|a| a.bytes_per_call() * a.requests as u64 * a.processes as u64 * a.instances as u64).sum();
            assert_eq!(r.summary.bytes, expected, "{policy}: {workload}");
            let served: u64 = r.servers.iter().map(|s| s.bytes).sum();
            assert_eq!(served, expected);
            let ops = if sc.apps[0].barrier { 5 } else { 5 * 4 };
            assert!(r.apps.iter().all(|a| a.operations == ops), "{policy}: {workload}");
        }
    }
}

/// Formula (1) and (2) of the coordination paper, with the analytical
/// model's assumptions: a fixed service time, all pieces arriving at once, in
/// an independent random order on each server.
fn formula_scenario(m: u32, n: u32, policy: &str) -> Scenario {
    let text = format!(
        r#"
[cluster]
servers = {n}
stripe_unit = "1MiB"
[cluster.device]
kind = "fixed"
service_time = "10ms"
[cluster.network]
latency = "0ns"
jitter = "0ns"
header_bytes = 0
client_bandwidth = "1000000000TB/s"
server_bandwidth = "1000000000TB/s"
[app_ids]
rule = "sequential"
[policy]
kind = "{policy}"
[[apps]]
workload = "ior"
instances = {m}
request_size = "{n}MiB"
"#
    );
    scenario(&text, &[])
}

#[test]
fn analytical_model_holds() {
    for (m, n) in [(4u32, 1u32), (4, 4), (8, 8), (3, 16)] {
        let t = 0.010;
        let fifo = simulate_reps(&formula_scenario(m, n, "fifo"), 1, 400, None);
        let coord = simulate_reps(&formula_scenario(m, n, "coordinated"), 1, 50, None);
        let f = fifo.aggregate["avg_completion_s"].mean;
        let c = coord.aggregate["avg_completion_s"].mean;
        let f_expected = fifo_expected_completion(m, n, t);
        let c_expected = coordinated_expected_completion(m, t);
        assert!(
            (f - f_expected).abs() / f_expected < 0.03,
            "m={m} n={n}: fifo {f} vs {f_expected}"
        );
        assert!(
            (c - c_expected).abs() / c_expected < 1e-6,
            "m={m} n={n}: coordinated {c} vs {c_expected}"
        );
    }
}

#[test]
fn coordination_shortens_completion_under_contention() {
    let fifo = simulate_reps(&scenario(IOR, &["policy.kind=fifo"]), 1, 3, None);
    let coord = simulate_reps(&scenario(IOR, &["policy.kind=coordinated"]), 1, 3, None);
    let (f, c) = (
        fifo.aggregate["avg_completion_s"].mean,
        coord.aggregate["avg_completion_s"].mean,
    );
    assert!(c < 0.95 * f, "coordinated {c} vs fifo {f}");
}

#[test]
fn configuration_errors_name_their_key() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["cluster.network.mode=\"ideal\"", "cluster.network.jitter=\"1ms\""],
            "cluster.network.jitter: has no effect with mode = \"ideal\"",
        ),
        (
            &["apps[0].request_size=0"],
            "apps[0].request_size: must be > 0",
        ),
        (&["cluster.servers=0"], "cluster.servers: must be > 0"),
        (
            &["cluster.network.incast={buffer=0, timeout=\"200ms\"}"],
            "cluster.network.incast.buffer: must be > 0",
        ),
        (
            &[
                "cluster.network.mode=\"exclusive\"",
                "cluster.network.incast={buffer=\"64KiB\", timeout=\"200ms\"}",
            ],
            "cluster.network.incast: has no effect with mode = \"exclusive\"",
        ),
        (
            &[
                "cluster.network.mode=\"ideal\"",
                "cluster.network.incast={buffer=\"64KiB\", timeout=\"200ms\"}",
            ],
            "cluster.network.incast: has no effect with mode = \"ideal\"",
        ),
        (
            &[
                "cluster.device={kind=\"ssd\", parallelism=14, overload={after=4, loss=1.5}}",
            ],
            "cluster.device.overload.loss: 1.5 must be between 0 and 1",
        ),
        (
            &["cluster.device={kind=\"ssd\", parallelism=14, overload={after=15, loss=0.1}}"],
            "cluster.device.overload.after: 15 must be from 1 to parallelism (14)",
        ),
        (
            &["cluster.stripe_count=9"],
            "cluster.stripe_count: 9 is larger than cluster.servers (8)",
        ),
        (
            &["policy.kind=lottery"],
            "policy.kind: unknown variant `lottery`",
        ),
        (
            &["apps[0].processes=-3"],
            "apps[0].processes: invalid value",
        ),
        (
            &["apps[0].request_size=\"12 parsecs\""],
            "apps[0].request_size: unknown size unit",
        ),
        (
            &["apps[0].colour=\"red\""],
            "apps[0].colour: unknown field `colour`",
        ),
        (
            &["cluster.device.rmp=5400"],
            "cluster.device: unknown field `rmp`",
        ),
        (
            &["apps[0].tile=[2, 2]"],
            "apps[0].tile: does not apply to workload \"ior\"",
        ),
        (
            &["apps[0].workload=\"mpi-tile-io\"", "apps[0].request_size=1"],
            "apps[0].request_size: does not apply",
        ),
        (
            &["apps[0].workload=\"noncontig\""],
            "apps[0].request_size: does not apply",
        ),
        (
            &["policy.kind=coordinated", "policy.window=\"0ms\""],
            "policy.window: must be > 0",
        ),
        (
            &["app_ids.rule=\"explicit\""],
            "apps[0].app_id: required when app_ids.rule = \"explicit\"",
        ),
        (
            &["app_ids.rule=random", "app_ids.max=2"],
            "app_ids: [0, 2] holds fewer distinct ids than the 4 application instances",
        ),
        (&["cluster.depth=0"], "cluster.depth: must be > 0"),
        (
            &["apps[3].processes=1"],
            "apps[3].processes: index 3 is out of range",
        ),
        (
            &["apps[0].instances=1000000", "apps[0].processes=1000"],
            "apps: 1000000000 processes in all",
        ),
        (
            &["apps[0].weight=0"],
            "apps[0].weight: must be a number > 0",
        ),
        (
            &["apps[0].stripe_count=9"],
            "apps[0].stripe_count: 9 is larger than cluster.servers (8)",
        ),
        (
            &["apps[0].first_server=8"],
            "apps[0].first_server: server 8 does not exist",
        ),
        (
            &["policy.kind=sfq-d-plus", "policy.large_slots=0"],
            "policy.large_slots: must be > 0",
        ),
        (
            &["policy.kind=sfq-d", "policy.small_threshold=1"],
            "policy: unknown field `small_threshold`",
        ),
        (
            &["policy.kind=service-sync", "policy.threshold=0"],
            "policy.threshold: must be > 0",
        ),
        (
            &["output.timeline=\"0s\""],
            "output.timeline: bins must be at least 1 ms wide",
        ),
        (
            &["output.server_timeline=true"],
            "output.server_timeline: needs output.timeline",
        ),
        (
            &["cluster.metadata.depth=4"],
            "cluster.metadata.depth: only for placement = \"dedicated\"",
        ),
        (
            &["cluster.metadata.servers=9"],
            "cluster.metadata.servers: 9 co-located metadata servers but only 8 data servers",
        ),
        (
            &[
                "cluster.metadata.placement=\"dedicated\"",
                "cluster.metadata.device={ kind = \"ssd\", parallelism = 0 }",
            ],
            "cluster.metadata.device.parallelism: must be > 0",
        ),
        (
            &["cluster.metadata.costs.getattr=\"0s\""],
            "cluster.metadata.costs.getattr: must be > 0",
        ),
        (
            &["cluster.metadata.placement=\"nearby\""],
            "cluster.metadata.placement: unknown variant `nearby`",
        ),
        (
            &["apps[0].workload=\"md-test\"", "apps[0].items=3"],
            "apps[0].requests: does not apply to workload \"md-test\"",
        ),
        (
            &["apps[0].workload=\"md-test\"", "apps[0].requests=1"],
            "apps[0].items: required for workload \"md-test\"",
        ),
        (
            &["apps[0].workload=\"btio\""],
            "apps[0].request_size: does not apply to workload \"btio\"",
        ),
        (
            &["apps[0].getattrs=2"],
            "apps[0].getattrs: does not apply to workload \"ior\"",
        ),
        (
            &["apps[0].subtype=\"full\""],
            "apps[0].subtype: does not apply to workload \"ior\"",
        ),
        (
            &["apps[0].segments=2"],
            "apps[0].segments: goes with block_size (IOR's layout)",
        ),
        (
            &["apps[0].block_size=\"200KiB\"", "apps[0].requests=1"],
            "apps[0].block_size: 204800 bytes is not a whole number of transfers (request_size = 131072)",
        ),
        (
            &["apps[0].block_size=\"256KiB\""],
            "apps[0].requests: block_size gives IOR's layout: the calls are its operations",
        ),
        (
            &[
                "apps[0].block_size=\"256KiB\"",
                "apps[0].requests=1",
                "apps[0].barrier=false",
            ],
            "apps[0].barrier: IOR's layout has a barrier between its operations",
        ),
        (
            &[
                "apps[0].block_size=\"256KiB\"",
                "apps[0].requests=1",
                "apps[0].operations=[]",
            ],
            "apps[0].operations: needs at least one operation",
        ),
        (
            &["apps[0].md_steps=[\"create\"]"],
            "apps[0].md_steps: does not apply to workload \"ior\"",
        ),
        (
            &[
                "apps[0].workload=\"md-test\"",
                "apps[0].requests=1",
                "apps[0].items=3",
                "apps[0].request_size=\"4KiB\"",
                "apps[0].md_steps=[\"fly\"]",
            ],
            "unknown variant `fly`",
        ),
    ];
    for (sets, expected) in cases {
        let e = error_of(IOR, sets);
        assert!(
            e.contains(expected),
            "{sets:?}: got \"{e}\", expected \"...{expected}...\""
        );
    }
    // Where: a syntax error's line and column; a bad value written in the
    // text, its line and column; a bad value an override set, that it did.
    assert_eq!(
        error_of("name = \"x\"\n[cluster\nservers=1", &[]),
        "invalid TOML: line 2, column 9: invalid table header\nexpected `.`, `]`"
    );
    let servers = IOR.lines().position(|l| l.starts_with("servers")).unwrap() + 1;
    assert!(error_of(&IOR.replace("servers = 8", "servers = 0"), &[])
        .starts_with(&format!("line {servers}, column 11: cluster.servers: ")));
    assert_eq!(
        error_of(IOR, &["cluster.servers=0"]),
        "cluster.servers: must be > 0 (as set by --set)"
    );
    assert!(error_of("name = \"x\"", &[]).contains("missing field `cluster`"));
    // A key of another policy: pointed at where the file writes it, also
    // when an override switched the kind (the key came from the file).
    let windowed = IOR.replace("kind = \"fifo\"", "kind = \"coordinated\"\nwindow = \"1s\"");
    let window = windowed
        .lines()
        .position(|l| l.starts_with("window"))
        .unwrap()
        + 1;
    let e = error_of(&windowed, &["policy.kind=\"sfq-d-plus\""]);
    assert!(
        e.starts_with(&format!(
            "line {window}, column 1: policy: unknown field `window`"
        )) && e.ends_with("(with policy.kind set by --set)"),
        "{e}"
    );
    assert!(
        error_of(&windowed.replace("coordinated", "sfq-d-plus"), &[]).starts_with(&format!(
            "line {window}, column 1: policy: unknown field `window`"
        ))
    );
    // FIFO takes no keys at all, and says so rather than ignoring one.
    let e = error_of(IOR, &["policy.window=\"1s\""]);
    assert!(
        e.starts_with("policy: unknown field `window`") && e.ends_with("(as set by --set)"),
        "{e}"
    );
}

const UNEVEN: &str = r#"
name = "uneven"
[cluster]
servers = 2
stripe_unit = "64KiB"
[cluster.device]
kind = "ssd"
latency = "4ms"
bandwidth = "120MB/s"
parallelism = 14
[policy]
kind = "sfq-d-plus"
[output]
timeline = "50ms"
[[apps]]
name = "narrow"
workload = "ior"
processes = 16
requests = 100
request_size = "64KiB"
barrier = false
op = "write"
stripe_count = 1
first_server = 0
[[apps]]
name = "wide"
workload = "ior"
processes = 16
requests = 100
request_size = "128KiB"
barrier = false
op = "write"
stripe_count = 2
first_server = 0
"#;

/// Bytes each application was served while both were still running.
fn shared_service(r: &concerto_sim::RunResult) -> (f64, f64) {
    let end = r.apps.iter().map(|a| a.end_s).fold(f64::INFINITY, f64::min);
    let t = |i: usize| {
        let tl = r.apps[i].timeline.as_ref().expect("timeline requested");
        tl.bytes.iter().take((end / tl.bin_s) as usize).sum::<u64>() as f64
    };
    (t(0), t(1))
}

#[test]
fn service_sync_shares_total_service_across_servers() {
    // "wide" uses both servers, "narrow" only server 0. Per-server SFQ gives
    // wide about twice narrow's service; exchanging service evens it out.
    let alone = simulate(&scenario(UNEVEN, &[]), 1, None);
    let (n, w) = shared_service(&alone);
    assert!(w / n > 1.6, "per-server SFQ: wide/narrow = {}", w / n);
    let mut last_gap = f64::INFINITY;
    for threshold in ["4MiB", "512KiB"] {
        let sc = scenario(
            UNEVEN,
            &[
                "policy.kind=service-sync",
                &format!("policy.threshold=\"{threshold}\""),
            ],
        );
        let r = simulate(&sc, 1, None);
        let (n, w) = shared_service(&r);
        let gap = (w / n - 1.0).abs();
        assert!(gap < 0.05, "threshold {threshold}: wide/narrow = {}", w / n);
        assert!(gap <= last_gap, "a smaller threshold must not be less fair");
        assert!(r.servers.iter().all(|s| s.service_reports > 0));
        last_gap = gap;
    }
}

#[test]
fn weights_split_a_server_in_proportion() {
    // Both on one server, each with enough processes to stay backlogged past D.
    let sets = [
        "apps[1].stripe_count=1",
        "apps[1].request_size=\"64KiB\"",
        "apps[0].weight=2",
        "apps[0].processes=32",
        "apps[1].processes=32",
    ];
    let sc = scenario(UNEVEN, &sets);
    let r = simulate(&sc, 1, None);
    let (heavy, light) = shared_service(&r);
    assert!(
        (heavy / light - 2.0).abs() < 0.1,
        "2:1 weights gave {}",
        heavy / light
    );
}

const META: &str = r#"
name = "meta"
[cluster]
servers = 4
stripe_unit = "4KiB"
depth = 4
[cluster.device]
kind = "ssd"
[cluster.metadata]
getattr_before_read = true
[policy]
kind = "sfq-d-plus"
[[apps]]
workload = "md-test"
processes = 6
items = 7
request_size = "6KiB"
"#;

#[test]
fn md_test_runs_its_phases_as_metadata_and_data_requests() {
    let (procs, items) = (6u64, 7u64);
    for placement in ["co-located", "dedicated"] {
        let sc = scenario(
            META,
            &[
                &format!("cluster.metadata.placement=\"{placement}\""),
                "output.detail=true",
            ],
        );
        let r = simulate(&sc, 3, None);
        let again = simulate(&sc, 3, None);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            serde_json::to_string(&again).unwrap(),
            "deterministic"
        );
        let a = &r.apps[0];
        // mkdir, items creates, readdir, items getattrs before reads, items removes, rmdir.
        assert_eq!(a.metadata_ops, procs * (3 * items + 3), "{placement}");
        // Each 6 KiB file spans two 4 KiB stripes: two pieces per write and per read.
        assert_eq!(
            a.requests - a.metadata_ops,
            procs * items * 2 * 2,
            "{placement}"
        );
        assert_eq!(a.bytes, procs * items * 6 * 1024 * 2);
        assert_eq!(a.operations, 8, "one operation per phase");
        let meta_servers: Vec<_> = r.servers.iter().filter(|s| s.metadata_ops > 0).collect();
        let served: u64 = meta_servers.iter().map(|s| s.metadata_ops).sum();
        assert_eq!(served, a.metadata_ops);
        let mut csv = Vec::new();
        r.write_detail_csv(&mut csv, true).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert_eq!(
            csv.lines().filter(|l| l.contains(",create,")).count() as u64,
            procs * items
        );
        if placement == "dedicated" {
            assert_eq!(r.servers.len(), 5);
            assert_eq!(r.servers[4].role, "metadata");
            assert_eq!(r.servers[4].bytes, 0);
            assert!(r.servers[..4]
                .iter()
                .all(|s| s.role == "data" && s.metadata_ops == 0));
        } else {
            assert!(r.servers.iter().all(|s| s.role == "data+metadata"));
            assert_eq!(
                meta_servers.len(),
                4,
                "files and directories spread over all metadata servers"
            );
        }
    }
}

#[test]
fn wrf_and_btio_issue_their_steps() {
    let wrf = scenario(META, &[
        "apps[0]={ workload = \"wrf\", processes = 5, requests = 3, request_size = \"8KiB\", getattrs = 4, op = \"write\", barrier = false }",
    ]);
    let r = simulate(&wrf, 1, None);
    assert_eq!(r.apps[0].metadata_ops, 5 * 3 * 4);
    assert_eq!(r.apps[0].bytes, 5 * 3 * 8192);
    assert_eq!(r.apps[0].operations, 15);
    // 8 cells of 512 B: one 4 KiB stripe per process and step once aggregated.
    for (subtype, data_pieces) in [("simple", 4 * 3 * 8 * 2), ("full", 4 * 3 * 2)] {
        let btio = scenario(META, &[&format!(
            "apps[0]={{ workload = \"btio\", subtype = \"{subtype}\", processes = 4, requests = 3, elements = 8, element_size = \"512B\" }}"
        )]);
        let r = simulate(&btio, 1, None);
        let a = &r.apps[0];
        // Output steps write, verification steps read the same bytes back.
        assert_eq!(a.bytes, 2 * 4 * 3 * 8 * 512, "{subtype}");
        assert_eq!(a.operations, 6, "{subtype}");
        // Reads are preceded by a getattr (cluster.metadata.getattr_before_read).
        let getattrs = if subtype == "simple" {
            4 * 3 * 8
        } else {
            4 * 3
        };
        assert_eq!(a.metadata_ops, getattrs, "{subtype}");
        assert_eq!(a.requests - a.metadata_ops, data_pieces, "{subtype}");
    }
}

#[test]
fn metadata_weights_hold_on_a_backlogged_metadata_server() {
    let two = format!("{META}[[apps]]\nworkload = \"md-test\"\nprocesses = 32\nitems = 200\nrequest_size = \"6KiB\"\n");
    let sc = scenario(&two, &[
        "cluster.metadata={ placement = \"dedicated\", servers = 1, getattr_before_read = true }",
        "apps[0].processes=32",
        "apps[0].items=200",
        "apps[0].weight=2",
        "output.timeline=\"20ms\"",
        "output.server_timeline=true",
    ]);
    let r = simulate(&sc, 1, None);
    let md = &r.servers[4];
    let tl = md.timeline.as_ref().expect("server timeline");
    let (a, b) = (&tl[0], &tl[1]);
    let wait = |t: &concerto_sim::results::Timeline, i: usize| {
        t.waiting_s.as_ref().unwrap().get(i).copied().unwrap_or(0.0)
    };
    let (mut ops_a, mut ops_b, mut bins) = (0u64, 0u64, 0);
    for i in 0..a.metadata_ops.len().min(b.metadata_ops.len()) {
        if wait(a, i) >= 0.9 * a.bin_s && wait(b, i) >= 0.9 * b.bin_s {
            ops_a += a.metadata_ops[i];
            ops_b += b.metadata_ops[i];
            bins += 1;
        }
    }
    assert!(bins >= 5, "only {bins} bins with both backlogged");
    let ratio = ops_a as f64 / ops_b as f64;
    assert!(
        (ratio - 2.0).abs() < 0.1,
        "2:1 weights gave {ratio} over {bins} bins"
    );
}

/// The client's overhead delays each step of a call before it leaves, and
/// nothing else: one process stating 50 files one at a time takes exactly
/// 50 overheads longer (the same seed draws the same network jitter); the
/// servers see the same requests.
#[test]
fn client_overhead_delays_each_step_by_exactly_itself() {
    let text = r#"
name = "overhead"
[cluster]
servers = 2
[cluster.device]
kind = "fixed"
service_time = "300us"
[[apps]]
workload = "md-test"
processes = 1
items = 50
md_steps = ["mktestdir", "create", "stat", "rm", "rmtestdir"]
"#;
    let phases = |sets: &[&str]| {
        let run = simulate(&scenario(text, sets), 3, None);
        let a = &run.apps[0];
        (
            a.mdtest
                .as_ref()
                .unwrap()
                .iter()
                .map(|p| p.seconds)
                .collect::<Vec<_>>(),
            a.requests,
        )
    };
    let (plain, requests) = phases(&[]);
    let (slowed, same_requests) = phases(&["cluster.client_overhead=\"120us\""]);
    assert_eq!(requests, same_requests);
    let items = [1.0, 50.0, 50.0, 50.0, 1.0];
    for ((p, s), n) in plain.iter().zip(&slowed).zip(items) {
        assert!(
            ((s - p) - n * 120e-6).abs() < 1e-9,
            "a phase of {n} steps: {p} s without, {s} s with 120 us each"
        );
    }
}
