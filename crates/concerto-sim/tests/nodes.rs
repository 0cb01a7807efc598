//! `processes_per_node`: processes of one node share its client NIC, as
//! ranks on one host share its network link (and a `concerto demo
//! --netns` application's processes share their namespace's link).

#[allow(dead_code)]
mod common;
use common::{error_of, scenario};
use concerto_sim::simulate;

/// Two instances of four processes, each writing its own 1 MB of a shared file (on a server of its own)
/// once, through 10 MB/s NICs to servers far faster than that: a process
/// with a NIC of its own takes 0.1 s; four sharing one take 0.4 s
/// together, and the other instance's four do not wait for them.
const WRITES: &str = r#"
name = "nodes"
[cluster]
servers = 4
stripe_unit = "1MB"
[cluster.device]
kind = "fixed"
service_time = "1us"
[cluster.network]
mode = "queued"
latency = "1us"
client_bandwidth = "10MB/s"
server_bandwidth = "10GB/s"
header_bytes = 0
[[apps]]
workload = "ior"
instances = 2
processes = 4
requests = 1
request_size = "1MB"
pattern = "contiguous"
op = "write"
"#;

fn seconds(sets: &[&str]) -> Vec<f64> {
    let run = simulate(&scenario(WRITES, sets), 1, None);
    run.apps.iter().map(|a| a.completion_s.max).collect()
}

#[test]
fn processes_of_one_node_share_its_nic_and_nodes_do_not() {
    for (per_node, expected) in [(1, 0.1), (4, 0.4), (2, 0.2)] {
        let set = format!("apps[0].processes_per_node={per_node}");
        for s in seconds(&[&set]) {
            assert!(
                (s - expected).abs() < 1e-3,
                "{per_node} per node: a call took {s} s, not {expected}"
            );
        }
    }
}

#[test]
fn a_node_of_no_processes_is_refused_by_its_key() {
    let e = error_of(WRITES, &["apps[0].processes_per_node=0"]);
    assert!(e.contains("apps[0].processes_per_node"), "{e}");
}

/// When each piece reached its server, in seconds to 0.1 ms, in order, in
/// network `mode` with the overrides `sets`.
fn arrivals_s(mode: &str, sets: &[&str]) -> Vec<f64> {
    let mode = format!("cluster.network.mode=\"{mode}\"");
    let sets: Vec<&str> = sets
        .iter()
        .copied()
        .chain(["output.detail=true", &mode])
        .collect();
    let run = simulate(&scenario(WRITES, &sets), 1, None);
    let mut at: Vec<f64> = run
        .detail
        .expect("detail asked for")
        .iter()
        .map(|p| (p.arrive.as_secs_f64() * 1e4).round() / 1e4)
        .collect();
    at.sort_by(f64::total_cmp);
    at
}

/// When each of one node's four pieces reaches its server, in `queued`
/// mode (one after the other: 0.1, 0.2, 0.3, 0.4 s) and in `shared` mode
/// (side by side, as TCP shares a link: all at 0.4 s).
#[test]
fn a_shared_nic_sends_a_nodes_pieces_side_by_side_where_a_queued_one_sends_them_in_turn() {
    let one_node = ["apps[0].processes_per_node=4", "apps[0].instances=1"];
    assert_eq!(arrivals_s("queued", &one_node), [0.1, 0.2, 0.3, 0.4]);
    assert_eq!(arrivals_s("shared", &one_node), [0.4, 0.4, 0.4, 0.4]);
}

#[test]
fn a_shared_network_refuses_a_flow_buffer_by_its_key() {
    let e = error_of(
        WRITES,
        &[
            "cluster.network.mode=\"shared\"",
            "cluster.network.flow_buffer=\"64KiB\"",
        ],
    );
    assert!(e.contains("cluster.network.flow_buffer"), "{e}");
}

/// Two copies' processes r write to server r at once (`first_server = 0`)
/// through servers' NICs of 10 MB/s: a queued server takes the two 1 MB
/// pieces in one after the other (0.1 and 0.2 s), a shared one side by
/// side (both 0.2 s).
#[test]
fn a_shared_server_nic_takes_colliding_pieces_in_side_by_side() {
    let colliding = [
        "apps[0].first_server=0",
        "apps[0].processes=2",
        "cluster.network.client_bandwidth=\"10GB/s\"",
        "cluster.network.server_bandwidth=\"10MB/s\"",
    ];
    assert_eq!(arrivals_s("queued", &colliding), [0.1, 0.1, 0.2, 0.2]);
    assert_eq!(arrivals_s("shared", &colliding), [0.2; 4]);
}
