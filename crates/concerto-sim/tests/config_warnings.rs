//! Values a scenario may hold that are valid but almost surely mistakes are
//! accepted and warned about, each warning placed like an error (line,
//! column, key path) and saying how to write what was probably meant.

use concerto_sim::{ConfigError, Scenario};

const BASE: &str = r#"
[cluster]
servers = 4
stripe_unit = "64KiB"
device = { kind = "hdd" }

[policy]
kind = "coordinated"
window = "10ms"

[[apps]]
name = "a"
workload = "ior"
processes = 2
requests = 2
request_size = "64KiB"
"#;

fn warnings(text: &str, overrides: &[&str]) -> Vec<String> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let (_, warnings) = Scenario::from_toml_table_warned(text, None, &overrides)
        .unwrap_or_else(|e| panic!("the scenario is valid: {e}"));
    warnings.iter().map(ConfigError::to_string).collect()
}

#[test]
fn a_scenario_written_with_units_gives_no_warning() {
    assert_eq!(warnings(BASE, &[]), Vec::<String>::new());
}

#[test]
fn a_bare_integer_window_in_the_policy_table_is_warned_at_its_key() {
    let text = BASE.replace("window = \"10ms\"", "window = 1000");
    let found = warnings(&text, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(
            "line 9, column 10: policy.window: 1000 has no unit and is read as 1000 ns = 1 µs"
        ),
        "{}",
        found[0]
    );
    assert!(found[0].contains("\"1000ms\""), "{}", found[0]);
    // Accepted as written: 1000 ns.
    let sc = Scenario::from_toml(&text, &[]).unwrap();
    let window = serde_json::to_value(&sc.policy).unwrap()["window"].clone();
    assert_eq!(window, serde_json::json!(1000), "{window}");
}

#[test]
fn a_decimal_stripe_unit_is_warned_with_the_binary_one() {
    let found = warnings(&BASE.replace("\"64KiB\"", "\"4KB\""), &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("line 4, column 15: cluster.stripe_unit: \"4KB\" is 4000 bytes"),
        "{}",
        found[0]
    );
    assert!(found[0].contains("write \"4KiB\""), "{}", found[0]);
    // A decimal unit that happens to be whole pages is still named.
    let found = warnings(&BASE.replace("\"64KiB\"", "\"4096KB\""), &[]);
    assert!(
        found[0].contains("\"4096KB\" is 4096000 bytes") && found[0].contains("\"4096KiB\""),
        "{found:?}"
    );
    // A bare number of bytes that is not whole pages.
    let found = warnings(&BASE.replace("\"64KiB\"", "5000"), &[]);
    assert!(
        found[0].contains("a stripe unit of 5000 bytes is not a whole number of 4 KiB pages"),
        "{found:?}"
    );
}

#[test]
fn every_trap_is_warned_once_in_file_order() {
    let text = BASE
        .replace("\"64KiB\"", "\"1MB\"")
        .replace("window = \"10ms\"", "window = 250");
    let found = warnings(&text, &[]);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains("cluster.stripe_unit: \"1MB\""),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("policy.window: 250 has no unit"),
        "{}",
        found[1]
    );
}

#[test]
fn a_trap_set_by_an_override_says_so() {
    let found = warnings(BASE, &["cluster.poll_interval=50"]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("cluster.poll_interval: 50 has no unit and is read as 50 ns;"),
        "{}",
        found[0]
    );
    assert!(found[0].ends_with("(as set by --set)"), "{}", found[0]);
}

#[test]
fn an_invalid_scenario_is_an_error_not_a_warning() {
    let text = BASE.replace("window = \"10ms\"", "window = 1000\nwindow_x = 1");
    let overrides: Vec<String> = Vec::new();
    let err = Scenario::from_toml_table_warned(&text, None, &overrides).unwrap_err();
    assert!(err.to_string().contains("window_x"), "{err}");
}
