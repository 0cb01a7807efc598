//! Golden results: a few small experiments' full results (seed 1, one
//! repetition) as they stand, so that reshaping the simulator's code is
//! shown to change nothing, byte for byte. A deliberate change to the model
//! updates them: run `CONCERTO_BLESS=1 cargo test -p concerto-sim --test
//! golden` and review the diff of `tests/golden/` like any other change.

use std::path::{Path, PathBuf};

use concerto_sim::{simulate_reps, Scenario};

/// Experiment files (their base scenario, for sweep files), relative to
/// the repository, and the golden file each is checked against. The two
/// scenarios of `tests/golden/scenarios/` hold every workload kind whose
/// requests the simulator builds step by step, plain and through the
/// mount.
const CASES: &[(&str, &str)] = &[
    (
        "experiments/coordination/formula.toml",
        "coordination-formula.json",
    ),
    ("experiments/demo.toml", "demo.json"),
    ("experiments/vpfs/uneven.toml", "vpfs-uneven.json"),
    ("experiments/resonance/demo.toml", "resonance-demo.json"),
    (
        "experiments/clusterfile/synthetic.toml",
        "clusterfile-synthetic.json",
    ),
    (
        "crates/concerto-sim/tests/golden/scenarios/workloads.toml",
        "workloads.json",
    ),
    (
        "crates/concerto-sim/tests/golden/scenarios/mount.toml",
        "mount.json",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The results of `file` (seed 1, one repetition) as JSON, without the
/// version string (which changes with every release, not with the model).
fn results(file: &str) -> serde_json::Value {
    let path = root().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{file}: {e}"));
    let table = (!doc.contains_key("cluster")).then_some("scenario");
    let scenario =
        Scenario::from_toml_table(&text, table, &[]).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut value =
        serde_json::to_value(simulate_reps(&scenario, 1, 1, None)).expect("results serialize");
    if let Some(fields) = value.as_object_mut() {
        fields.remove("concerto_version");
    }
    value
}

#[test]
fn small_experiments_give_their_golden_results() {
    let bless = std::env::var_os("CONCERTO_BLESS").is_some();
    let mut changed = Vec::new();
    for (file, golden) in CASES {
        let got = results(file);
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(golden);
        if bless {
            let text = serde_json::to_string_pretty(&got).expect("JSON") + "\n";
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (CONCERTO_BLESS=1 writes it)", path.display()));
        let want: serde_json::Value = serde_json::from_str(&text).expect("golden JSON");
        if got != want {
            changed.push(format!("{file} (against {})", path.display()));
        }
    }
    assert!(
        changed.is_empty(),
        "results changed for {}; if the model changed on purpose, CONCERTO_BLESS=1 rewrites the golden files",
        changed.join(", ")
    );
}

#[test]
fn the_same_experiment_run_twice_gives_the_same_results() {
    // What makes golden files meaningful: a run is a function of its file and seed.
    assert_eq!(
        results("experiments/coordination/formula.toml"),
        results("experiments/coordination/formula.toml")
    );
}
