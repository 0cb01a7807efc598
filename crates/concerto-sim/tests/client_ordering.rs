//! Clusterfile's client-side ordering in the simulator: processes that send
//! their blocks one at a time, over a network where every node does one
//! transfer at a time.

mod common;

use common::{error_of, scenario};
use concerto_sim::simulate;

/// Two processes each write (or read) 2 MB contiguously over two servers
/// with 1 MB stripes: one 1 MB block per server each. Transfers take 1 ms
/// (1 GB/s, no latency, no headers); the device takes 1 us per request.
const TWO_BY_TWO: &str = r#"
[cluster]
servers = 2
stripe_unit = "1MB"
[cluster.network]
mode = "exclusive"
latency = "0us"
jitter = "0us"
client_bandwidth = "1GB/s"
server_bandwidth = "1GB/s"
header_bytes = 0
[cluster.device]
kind = "fixed"
service_time = "1us"
[[apps]]
workload = "ior"
processes = 2
request_size = "2MB"
ordering = "hash-ios"
schedule_block = "1MB"
"#;

fn makespan_us(sets: &[&str]) -> u64 {
    let sc = scenario(TWO_BY_TWO, sets);
    let run = simulate(&sc, 1, None);
    (run.summary.makespan_s * 1e6).round() as u64
}

#[test]
fn first_ios_writes_convoy_where_hash_ios_keeps_both_servers_busy() {
    // The Clusterfile paper's Figure 1 as a simulation. hash-IOS: process 0
    // sends to server 0 while process 1 sends to server 1, then they swap:
    // 2 ms, plus the last block's 1 us on the device.
    assert_eq!(makespan_us(&["apps[0].op=\"write\""]), 2001);
    // first-IOS: both start with server 0, so process 1 waits 1 ms for it;
    // process 0 goes on to server 1, where process 1 follows: 3 ms.
    assert_eq!(
        makespan_us(&["apps[0].op=\"write\"", "apps[0].ordering=\"first-ios\""]),
        3001
    );
}

#[test]
fn a_read_block_waits_for_the_previous_blocks_data() {
    // hash-IOS: each process asks one server, gets its 1 MB back (1 us on
    // the device, 1 ms on the wire), then asks the other.
    assert_eq!(makespan_us(&["apps[0].op=\"read\""]), 2002);
    // first-IOS: server 0 sends to process 0, then to process 1, who only
    // then asks server 1.
    assert_eq!(
        makespan_us(&["apps[0].op=\"read\"", "apps[0].ordering=\"first-ios\""]),
        3002
    );
}

#[test]
fn smaller_blocks_mean_more_requests() {
    let sc = scenario(
        TWO_BY_TWO,
        &["apps[0].op=\"write\"", "apps[0].schedule_block=\"250KB\""],
    );
    let run = simulate(&sc, 1, None);
    // 2 processes x 2 servers x 4 blocks of 250 KB.
    assert_eq!(run.apps[0].requests, 16);
    assert_eq!(run.apps[0].bytes, 4_000_000);
}

#[test]
fn random_ios_is_seeded() {
    let sc = scenario(
        TWO_BY_TWO,
        &[
            "apps[0].op=\"write\"",
            "apps[0].ordering=\"random-ios\"",
            "apps[0].schedule_block=\"100KB\"",
            "cluster.network.jitter=\"5us\"",
        ],
    );
    let a = serde_json::to_string(&simulate(&sc, 7, None)).unwrap();
    let b = serde_json::to_string(&simulate(&sc, 7, None)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_schedule_block_needs_an_ordering() {
    let e = error_of(TWO_BY_TWO, &["apps[0].ordering=\"none\""]);
    assert!(e.contains("apps[0].ordering"), "{e}");
    let text = TWO_BY_TWO.replace("ordering = \"hash-ios\"\n", "");
    let e = error_of(&text, &[]);
    assert!(
        e.contains("apps[0].schedule_block") && e.contains("needs ordering"),
        "{e}"
    );
    let e = error_of(TWO_BY_TWO, &["apps[0].schedule_block=0"]);
    assert!(e.contains("apps[0].schedule_block"), "{e}");
    let e = error_of(TWO_BY_TWO, &["cluster.network.mode=\"token-ring\""]);
    assert!(e.contains("mode"), "{e}");
}
