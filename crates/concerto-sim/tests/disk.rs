//! The HDD below the server's queue: an elevator that reorders what the
//! server dispatched, and objects placed independently on each disk.

mod common;

use common::{error_of, scenario};
use concerto_sim::simulate;

/// Eight processes each read their own file, 32 calls of 64 KiB, on one
/// server whose queue hands the disk up to eight requests at once.
const STREAMS: &str = r#"
[policy]
kind = "fifo"
[cluster]
servers = 1
depth = 8
[cluster.network]
jitter = "20us"
[cluster.device]
kind = "hdd"
[[apps]]
workload = "ior"
processes = 8
requests = 32
request_size = "64KiB"
file = "per-process"
barrier = false
"#;

#[test]
fn the_elevator_serves_every_request_once_and_sweeps_faster_than_dispatch_order() {
    let plain = simulate(&scenario(STREAMS, &[]), 3, None);
    let sorted = simulate(
        &scenario(STREAMS, &["cluster.device.scheduler=\"elevator\""]),
        3,
        None,
    );
    // Nothing lost or served twice: every call's bytes, in every run.
    for run in [&plain, &sorted] {
        assert_eq!(run.apps[0].requests, 8 * 32);
        assert_eq!(run.apps[0].bytes, 8 * 32 * 65536);
    }
    // Eight streams 1 GiB apart: in address order the disk seeks less than
    // in the order the requests arrived.
    assert!(
        sorted.summary.makespan_s < plain.summary.makespan_s,
        "elevator {} s, dispatch order {} s",
        sorted.summary.makespan_s,
        plain.summary.makespan_s
    );
}

#[test]
fn a_short_deadline_still_finishes_and_the_keys_are_checked() {
    let run = simulate(
        &scenario(
            STREAMS,
            &[
                "cluster.device.scheduler=\"elevator\"",
                "cluster.device.deadline=\"1us\"",
            ],
        ),
        1,
        None,
    );
    assert_eq!(run.apps[0].bytes, 8 * 32 * 65536);
    // The device table is tagged by kind, so the error names the table and the choices.
    let e = error_of(STREAMS, &["cluster.device.scheduler=\"cfq\""]);
    assert!(
        e.contains("cluster.device") && e.contains("`cfq`") && e.contains("elevator"),
        "{e}"
    );
    let e = error_of(STREAMS, &["cluster.device.object_placement=\"scattered\""]);
    assert!(e.contains("`scattered`") && e.contains("random"), "{e}");
}

#[test]
fn random_placement_is_seeded_and_moves_the_objects() {
    let sc = scenario(STREAMS, &["cluster.device.object_placement=\"random\""]);
    let a = serde_json::to_string(&simulate(&sc, 5, None)).unwrap();
    let b = serde_json::to_string(&simulate(&sc, 5, None)).unwrap();
    assert_eq!(a, b);
    let spaced = simulate(&scenario(STREAMS, &[]), 5, None);
    let random = simulate(&sc, 5, None);
    assert_ne!(spaced.summary.makespan_s, random.summary.makespan_s);
}
