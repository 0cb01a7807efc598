//! `[cluster] calibration = "FILE"`: a scenario's cluster taken from a
//! `concerto calibrate` file — the calibrated cluster's twin (its servers,
//! the throttle's device, the mount's write-behind and read-ahead, the
//! kernel's lookups) with what was measured (client overhead, each
//! operation's cost, the servers' overhead per data request, the mount's
//! bandwidth).
//!
//! The file's `[cluster]` fills what the scenario's `[cluster]` leaves out:
//! a key the scenario sets is its own (a user who simulates 8 servers with
//! the calibrated costs says `servers = 8`). Tables merge key by key, except
//! a table with a `kind` (a device): one description of a device is taken
//! whole, never mixed with another's keys. The path is read as a trace's
//! is, from the directory the command runs in.

use crate::scenario::ConfigError;

/// The key a scenario names its calibration file with, in `[cluster]`.
pub const KEY: &str = "calibration";

/// Replaces `cluster.calibration` in `doc` by what its file gives; a
/// document without one is left as it is.
pub fn include(doc: &mut toml::Table) -> Result<(), ConfigError> {
    let Some(toml::Value::Table(cluster)) = doc.get_mut("cluster") else {
        return Ok(());
    };
    let at = format!("cluster.{KEY}");
    let path = match cluster.remove(KEY) {
        None => return Ok(()),
        Some(toml::Value::String(path)) => path,
        Some(other) => {
            return Err(ConfigError::at(
                at,
                format!("must be a file name (a string), not {}", other.type_str()),
            ))
        }
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ConfigError::at(&at, format!("cannot read {path}: {e}")))?;
    let mut file: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::at(
            &at,
            format!(
                "{path}: invalid TOML: {}",
                concerto_toml::syntax_message(&text, &e)
            ),
        )
    })?;
    let calibrated = match file.remove("cluster") {
        Some(toml::Value::Table(t)) => t,
        Some(_) => {
            return Err(ConfigError::at(
                &at,
                format!("{path}: [cluster] must be a table"),
            ))
        }
        None => {
            return Err(ConfigError::at(
                &at,
                format!(
                    "{path}: no [cluster] table (is it a `concerto calibrate` calibration.toml?)"
                ),
            ))
        }
    };
    if calibrated.contains_key(KEY) {
        return Err(ConfigError::at(
            &at,
            format!(
                "{path}: names a calibration of its own (cluster.{KEY}); give the file it names"
            ),
        ));
    }
    fill(cluster, calibrated);
    Ok(())
}

/// Puts each key of `from` that `into` lacks into `into`; tables both have
/// merge the same way, unless either describes one thing by its `kind`.
fn fill(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (None, value) => {
                into.insert(key, value);
            }
            (Some(toml::Value::Table(mine)), toml::Value::Table(theirs))
                if !mine.contains_key("kind") && !theirs.contains_key("kind") =>
            {
                fill(mine, theirs)
            }
            (Some(_), _) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use concerto_core::Time;

    const CALIBRATION: &str = r#"
[cluster]
servers = 4
stripe_unit = 65536
depth = 8
client_overhead = "70us"
write_behind = "16MiB"
read_ahead = true
[cluster.device]
kind = "emulated"
bandwidth = 100000000
latency = "100us"
seek = "8ms"
parallelism = 1
[cluster.metadata]
servers = 1
posix_mount = true
costs = { create = "450us", getattr = "300us" }
[cluster.network]
client_bandwidth = "700MB/s"
"#;

    const APPS: &str = r#"
[[apps]]
workload = "ior"
processes = 2
request_size = "1MiB"
block_size = "4MiB"
operations = ["write"]
file = "per-process"
"#;

    fn scenario_with(dir: &tempfile::TempDir, cluster: &str) -> Result<Scenario, ConfigError> {
        let file = dir.path().join("calibration.toml");
        std::fs::write(&file, CALIBRATION).unwrap();
        let text = format!(
            "[cluster]\ncalibration = {:?}\n{cluster}{APPS}",
            file.display().to_string()
        );
        Scenario::from_toml(&text, &[])
    }

    #[test]
    fn a_scenario_with_only_a_calibration_runs_on_the_calibrated_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let s = scenario_with(&dir, "").unwrap();
        let c = &s.cluster;
        assert_eq!((c.servers, c.depth, c.stripe_unit.0), (4, 8, 65536));
        assert_eq!(c.client_overhead, Time::from_micros(70));
        assert!(c.read_ahead && c.metadata.posix_mount);
        assert_eq!(c.metadata.costs.create, Time::from_micros(450));
        assert!(matches!(
            c.device,
            crate::scenario::DeviceConfig::Emulated(_)
        ));
    }

    #[test]
    fn the_scenarios_own_keys_win_and_tables_merge_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let s = scenario_with(
            &dir,
            "servers = 8\n[cluster.metadata.costs]\ncreate = \"1ms\"\n",
        )
        .unwrap();
        let c = &s.cluster;
        assert_eq!(c.servers, 8);
        assert_eq!(c.metadata.costs.create, Time::from_millis(1));
        assert_eq!(c.metadata.costs.getattr, Time::from_micros(300));
        assert!(c.metadata.posix_mount);
    }

    #[test]
    fn a_device_the_scenario_describes_is_taken_whole() {
        let dir = tempfile::tempdir().unwrap();
        let s = scenario_with(&dir, "[cluster.device]\nkind = \"ssd\"\n").unwrap();
        assert!(matches!(
            s.cluster.device,
            crate::scenario::DeviceConfig::Ssd(_)
        ));
    }

    #[test]
    fn a_calibration_that_cannot_be_read_is_refused_at_its_key() {
        let missing = "[cluster]\ncalibration = \"/nonexistent/calibration.toml\"\n";
        let e = Scenario::from_toml(&format!("{missing}{APPS}"), &[]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("cluster.calibration") && text.contains("/nonexistent/calibration.toml"),
            "{text}"
        );
        let e =
            Scenario::from_toml(&format!("[cluster]\ncalibration = 3\n{APPS}"), &[]).unwrap_err();
        assert!(e.to_string().contains("must be a file name"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calibration.toml");
        for (body, says) in [
            ("servers = 4\n", "no [cluster] table"),
            ("[cluster\n", "invalid TOML"),
            (
                "[cluster]\ncalibration = \"x\"\n",
                "names a calibration of its own",
            ),
        ] {
            std::fs::write(&file, body).unwrap();
            let text = format!(
                "[cluster]\ncalibration = {:?}\n{APPS}",
                file.display().to_string()
            );
            let e = Scenario::from_toml(&text, &[]).unwrap_err().to_string();
            assert!(e.contains("cluster.calibration") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_calibration_can_be_given_by_an_override() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calibration.toml");
        std::fs::write(&file, CALIBRATION).unwrap();
        let set = format!("cluster.calibration={:?}", file.display().to_string());
        let s = Scenario::from_toml(APPS, &[set]).unwrap();
        assert_eq!(s.cluster.servers, 4);
    }
}
