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
