//! Helpers the simulator's integration tests share.

use concerto_sim::Scenario;

/// The scenario `text` with `--set` overrides; panics with the error if invalid.
pub fn scenario(text: &str, sets: &[&str]) -> Scenario {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Scenario::from_toml(text, &sets).unwrap_or_else(|e| panic!("{e}"))
}

/// The error `text` with `--set` overrides gives; panics if it is accepted.
pub fn error_of(text: &str, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    match Scenario::from_toml(text, &sets) {
        Ok(_) => panic!("accepted: {sets:?}"),
        Err(e) => e.to_string(),
    }
}

/// Four tasks in IOR's layout, 64 KiB blocks and transfers, eight
/// segments, writing then reading, on four servers of 64 KiB stripes: each
/// task's blocks are on its own server. A fixed 1 ms per request and no
/// network make the arithmetic exact. (Not every test binary uses it.)
#[allow(dead_code)]
pub const IOR_FOUR_TASKS: &str = r#"
name = "four-tasks"
[cluster]
servers = 4
stripe_unit = "64KiB"
[cluster.device]
kind = "fixed"
service_time = "1ms"
[cluster.network]
mode = "ideal"
[[apps]]
workload = "ior"
processes = 4
block_size = "64KiB"
request_size = "64KiB"
segments = 8
operations = ["write", "read"]
"#;
