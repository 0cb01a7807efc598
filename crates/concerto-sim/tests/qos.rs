//! Rate rules (TBF) in the simulator: the administrator's cap holds a job
//! to its rate whatever the size of its requests, the other job takes the
//! rest, and bad rules are named.

mod common;
use common::{error_of, scenario};
use concerto_sim::simulate;

/// Two IOR-like jobs writing on four SSD servers of 200 MB/s (800 MB/s in
/// all); job 1 is capped at 20 MB/s on every server (80 MB/s in all).
const CAPPED: &str = r#"
name = "capped"
app_ids = { rule = "sequential", start = 1 }
[cluster]
servers = 4
stripe_unit = "1MiB"
[cluster.device]
kind = "ssd"
latency = "50us"
bandwidth = "200MB/s"
parallelism = 4
[policy]
kind = "fifo"
[[qos.rules]]
name = "job1"
job = 1
bandwidth = "20MB/s"
[[apps]]
name = "capped"
workload = "ior"
op = "write"
processes = 8
requests = 40
request_size = "4MiB"
[[apps]]
name = "free"
workload = "ior"
op = "write"
processes = 8
requests = 40
request_size = "4MiB"
"#;

fn bandwidths(sets: &[&str]) -> (f64, f64) {
    let run = simulate(&scenario(CAPPED, sets), 1, None);
    let bw = |name: &str| {
        run.apps
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.bandwidth_bps)
            .unwrap()
    };
    (bw("capped"), bw("free"))
}

#[test]
fn a_capped_job_gets_its_rate_within_five_percent_and_the_other_the_rest() {
    let (capped, free) = bandwidths(&[]);
    assert!(
        (capped / 80e6 - 1.0).abs() < 0.05,
        "capped job at {capped} B/s"
    );
    // The other job is not held back: it gets far more than the capped one.
    assert!(free > 4.0 * capped, "free job at {free} B/s");
    // Without the rule both share the servers alike.
    let (a, b) = bandwidths(&["qos.rules=[]"]);
    assert!(a > 2.0 * 80e6 && (a / b - 1.0).abs() < 0.25, "{a} {b}");
}

#[test]
fn a_byte_rate_holds_for_4kib_and_4mib_requests_alike() {
    for (size, requests) in [("4KiB", 4000), ("4MiB", 40)] {
        let sets: Vec<String> = (0..2)
            .flat_map(|i| {
                [
                    format!("apps[{i}].request_size=\"{size}\""),
                    format!("apps[{i}].requests={requests}"),
                ]
            })
            .collect();
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (capped, _) = bandwidths(&sets);
        assert!(
            (capped / 80e6 - 1.0).abs() < 0.05,
            "{size} requests: capped job at {capped} B/s"
        );
    }
}

#[test]
fn bad_rules_name_the_rule_and_key() {
    let e = error_of(CAPPED, &["qos.rules[0].bandwidth=\"0MB/s\""]);
    assert!(e.contains("qos.rules[0].bandwidth: must be > 0"), "{e}");
    let e = error_of(CAPPED, &["qos.rules=[{name = \"x\", job = 1}]"]);
    assert!(
        e.contains(
            "qos.rules[0].requests_per_second: give a weight, requests_per_second, bandwidth, or several of them"
        ),
        "{e}"
    );
}

/// Under SFQ(D), a weight rule decides each job's share, whatever weight
/// the job's requests carry: "free" claims 3 and "capped" 1, the rules
/// give job 1 weight 3 and job 2 weight 1. While both are backlogged job 1
/// gets 3/4 of the servers; it moves as much as job 2, so it ends first at
/// 3/4 of the capacity C, and job 2 at C/2 over its whole run: a ratio of
/// 1.5. Without the rules the claims win and the ratio is 1/1.5. (No
/// barriers: a job waiting at its barrier is not backlogged, and would
/// lend its share to the other.)
#[test]
fn weight_rules_decide_the_shares_whatever_the_requests_claim() {
    let claims = [
        "policy={kind=\"sfq-d\", depth=4}",
        "apps[1].weight=3",
        "apps[0].weight=1",
        "apps[0].barrier=false",
        "apps[1].barrier=false",
    ];
    let mut sets = claims.to_vec();
    sets.push("qos.rules=[{name=\"job1\", job=1, weight=3.0}, {name=\"job2\", job=2, weight=1.0}]");
    let (one, two) = bandwidths(&sets);
    assert!(
        (one / two / 1.5 - 1.0).abs() < 0.1,
        "with the rules: {one} {two}"
    );
    let mut sets = claims.to_vec();
    sets.push("qos.rules=[]");
    let (one, two) = bandwidths(&sets);
    assert!((two / one / 1.5 - 1.0).abs() < 0.1, "without: {one} {two}");
}

/// A rule for a user caps all of the user's jobs together: both jobs run
/// as user 7 and share the 20 MB/s per server (80 MB/s in all) the rule
/// gives the user; with the second job another user's, the first alone
/// gets the cap and the second runs free.
#[test]
fn a_user_rule_caps_the_users_jobs_together() {
    let rule = "qos.rules=[{name=\"u7\", user=7, bandwidth=\"20MB/s\"}]";
    let (one, two) = bandwidths(&[rule, "apps[0].user=7", "apps[1].user=7"]);
    // The jobs end at different times; what the user moved over the time
    // both took is what the cap bounds.
    let sum = one + two;
    assert!(
        sum <= 80e6 * 1.05 && one.min(two) > 0.3 * 80e6,
        "user 7's jobs: {one} + {two} B/s"
    );
    let (one, two) = bandwidths(&[rule, "apps[0].user=7", "apps[1].user=8"]);
    assert!((one / 80e6 - 1.0).abs() < 0.05, "user 7's job: {one} B/s");
    assert!(two > 4.0 * one, "user 8's job: {two} B/s");
}

/// Lustre's expressions select the same job by its nodes or its group as
/// `job = 1` does by its id: job 1's eight processes run on nodes 0-7
/// (one a node), job 2's on 8-15; job 1 runs as group 100.
#[test]
fn an_expression_caps_a_job_by_its_clients_nids_or_its_group() {
    for expression in [
        "nid={[0-7]@sim}",
        "gid={100}&opcode={ost_write}",
        "jobid={9}, gid={100}",
    ] {
        let rule = format!(
            "qos.rules=[{{name=\"lustre\", match=\"{expression}\", bandwidth=\"20MB/s\"}}]"
        );
        let (capped, free) = bandwidths(&[&rule, "apps[0].gid=100"]);
        assert!(
            (capped / 80e6 - 1.0).abs() < 0.05,
            "{expression}: capped job at {capped} B/s"
        );
        assert!(free > 4.0 * capped, "{expression}: free job at {free} B/s");
    }
    // Nodes 4-11 hold half of each job: both are held back.
    let rule = "qos.rules=[{name=\"half\", match=\"nid={[4-11]@sim}\", bandwidth=\"20MB/s\"}]";
    let (one, two) = bandwidths(&[rule]);
    assert!(one < 0.5 * 200e6 && two < 0.5 * 200e6, "{one} {two}");
}

#[test]
fn a_bad_expression_is_named_with_its_column() {
    let e = error_of(
        CAPPED,
        &["qos.rules=[{name=\"x\", match=\"jobid={1}&nidd={1@sim}\", bandwidth=\"1MB/s\"}]"],
    );
    assert!(
        e.contains("qos.rules[0].match: at column 11: unknown field \"nidd\""),
        "{e}"
    );
    let e = error_of(
        CAPPED,
        &["qos.rules=[{name=\"x\", match=\"jobid={1}\", job=1, bandwidth=\"1MB/s\"}]"],
    );
    assert!(
        e.contains("qos.rules[0].match: give either match or job, op and user"),
        "{e}"
    );
}
