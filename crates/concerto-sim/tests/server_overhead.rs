//! `[cluster] server_data_overhead`: what a server takes for each data
//! request beyond its device, on the reply's path, with the device free
//! meanwhile.

#[allow(dead_code)]
mod common;
use common::scenario;
use concerto_sim::simulate;

/// One server of a fixed 1 ms per request, no network; IOR, 4 KiB
/// transfers one at a time per process.
const ONE_SERVER: &str = r#"
name = "server-overhead"
[cluster]
servers = 1
depth = 1
[cluster.device]
kind = "fixed"
service_time = "1ms"
[cluster.network]
mode = "ideal"
[[apps]]
workload = "ior"
processes = 1
requests = 4
request_size = "4KiB"
barrier = false
"#;

fn makespan(sets: &[&str]) -> f64 {
    simulate(&scenario(ONE_SERVER, sets), 1, None)
        .summary
        .makespan_s
}

/// One process waits for each reply: every request costs the device's
/// 1 ms and the server's 0.5 ms (4 requests, 6 ms). Two processes keep
/// the device busy while the server hands one reply back: their 8
/// requests take the device's 8 ms and the last reply's 0.5 ms, not 12.
#[test]
fn a_servers_data_overhead_delays_the_reply_and_leaves_the_device_free() {
    let overhead = "cluster.server_data_overhead=\"500us\"";
    assert!((makespan(&[]) - 0.004).abs() < 1e-9, "{}", makespan(&[]));
    assert!(
        (makespan(&[overhead]) - 0.006).abs() < 1e-9,
        "{}",
        makespan(&[overhead])
    );
    let two = "apps[0].processes=2";
    assert!(
        (makespan(&[two]) - 0.008).abs() < 1e-9,
        "{}",
        makespan(&[two])
    );
    assert!(
        (makespan(&[two, overhead]) - 0.0085).abs() < 1e-9,
        "{}",
        makespan(&[two, overhead])
    );
}
