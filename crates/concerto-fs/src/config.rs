//! The two files a deployment is described by:
//!
//! - a **server file** (`concerto server --config FILE`): one server's
//!   address, data directory, roles, policy, throttle and, for the metadata
//!   role, the cluster's data servers and default layout;
//! - a **cluster file** (`cluster.toml`, what clients connect with): every
//!   server's id, address and roles.
//!
//! Both are TOML; an error names the key (`server.listen: invalid socket address syntax`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use concerto_core::emulation::EmulationConfig;
use concerto_core::units::{Bandwidth, Bytes};
use concerto_core::{PolicyConfig, Time};

use crate::metadata::MetadataConfig;
use crate::protocol::{Role, MAX_STRIPE_UNIT};
use crate::server::ServerConfig;

fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().message().trim().to_string();
        if path == "." {
            msg
        } else {
            format!("{path}: {msg}")
        }
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    server: ServerSection,
    #[serde(default = "default_policy")]
    policy: PolicyConfig,
    throttle: Option<ThrottleSection>,
    metadata: Option<MetadataSection>,
}

fn default_policy() -> PolicyConfig {
    PolicyConfig::Fifo
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    listen: SocketAddr,
    data_dir: PathBuf,
    roles: Vec<Role>,
    metrics: Option<SocketAddr>,
    #[serde(default = "default_depth")]
    depth: u32,
    capacity: Option<Bandwidth>,
    /// The other data servers (`service-sync` sends them its service reports).
    #[serde(default)]
    peers: Vec<SocketAddr>,
}

fn default_depth() -> u32 {
    8
}

/// A preset (`hdd`, `ssd`) with optional overrides, or all four numbers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottleSection {
    pub preset: Option<String>,
    pub bandwidth: Option<Bandwidth>,
    pub latency: Option<Time>,
    pub seek: Option<Time>,
    pub parallelism: Option<u32>,
}

impl ThrottleSection {
    /// The device to emulate, or `None` for `preset = "none"`.
    pub fn resolve(&self) -> Result<Option<EmulationConfig>, String> {
        let base = match self.preset.as_deref() {
            Some("none") => return Ok(None),
            Some(name) => Some(EmulationConfig::preset(name).ok_or_else(|| {
                format!("throttle.preset: unknown preset {name:?} (hdd, ssd or none)")
            })?),
            None => None,
        };
        let missing = |k: &str| format!("throttle.{k}: required without a preset");
        let cfg = EmulationConfig {
            bandwidth: self
                .bandwidth
                .or(base.as_ref().map(|b| b.bandwidth))
                .ok_or_else(|| missing("bandwidth"))?,
            latency: self
                .latency
                .or(base.as_ref().map(|b| b.latency))
                .ok_or_else(|| missing("latency"))?,
            seek: self
                .seek
                .or(base.as_ref().map(|b| b.seek))
                .unwrap_or(Time::ZERO),
            parallelism: self
                .parallelism
                .or(base.as_ref().map(|b| b.parallelism))
                .unwrap_or(1),
        };
        cfg.validate()
            .map_err(|(field, msg)| format!("throttle.{field}: {msg}"))?;
        Ok(Some(cfg))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetadataSection {
    data_servers: Vec<u32>,
    #[serde(default = "default_unit")]
    stripe_unit: Bytes,
    stripe_count: Option<u32>,
}

fn default_unit() -> Bytes {
    Bytes(64 * 1024)
}

/// Reads a server file.
pub fn server_config(text: &str) -> Result<ServerConfig, String> {
    let f: ServerFile = parse(text)?;
    f.policy
        .validate()
        .map_err(|(field, msg)| format!("policy.{field}: {msg}"))?;
    if f.server.roles.is_empty() {
        return Err("server.roles: give at least one of \"data\", \"metadata\"".into());
    }
    if f.server.depth == 0 {
        return Err("server.depth: must be > 0".into());
    }
    let metadata = match (f.server.roles.contains(&Role::Metadata), f.metadata) {
        (true, None) => return Err("metadata: a server with the metadata role needs a [metadata] section (data_servers, stripe_unit)".into()),
        (false, Some(_)) => return Err("metadata: only a server with the metadata role takes a [metadata] section".into()),
        (false, None) => None,
        (true, Some(m)) => {
            if m.data_servers.is_empty() {
                return Err("metadata.data_servers: list at least one data server id".into());
            }
            let unit = m.stripe_unit.0;
            if unit == 0 || unit > MAX_STRIPE_UNIT {
                return Err(format!("metadata.stripe_unit: must be between 1 byte and {MAX_STRIPE_UNIT}"));
            }
            let count = m.stripe_count.unwrap_or(m.data_servers.len() as u32);
            if count == 0 || count as usize > m.data_servers.len() {
                return Err(format!("metadata.stripe_count: must be between 1 and the {} data servers", m.data_servers.len()));
            }
            Some(MetadataConfig { data_servers: m.data_servers, default_unit: unit, default_count: count })
        }
    };
    let throttle = match f.throttle {
        Some(t) => t.resolve()?,
        None => None,
    };
    let capacity = f
        .server
        .capacity
        .or(throttle.as_ref().map(|t| t.bandwidth))
        .unwrap_or(Bandwidth(100e6));
    Ok(ServerConfig {
        listen: f.server.listen,
        data_dir: f.server.data_dir,
        policy: f.policy,
        depth: f.server.depth,
        capacity,
        roles: f.server.roles,
        metadata,
        throttle,
        metrics: f.server.metrics,
        peers: f.server.peers,
    })
}

/// One server as clients see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    pub id: u32,
    pub address: SocketAddr,
    pub roles: Vec<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
    /// Set by `concerto cluster up` for the servers it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// How long a client waits for any one server before giving up on it.
    #[serde(default = "default_timeout")]
    pub timeout: Time,
}

fn default_timeout() -> Time {
    Time::from_millis(10_000)
}

/// A cluster file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub cluster: ClusterSection,
    pub servers: Vec<ServerEntry>,
}

impl ClusterFile {
    pub fn parse(text: &str) -> Result<ClusterFile, String> {
        let c: ClusterFile = parse(text)?;
        let metadata = c
            .servers
            .iter()
            .filter(|s| s.roles.contains(&Role::Metadata))
            .count();
        if metadata != 1 {
            return Err(format!(
                "servers: exactly one server must have the \"metadata\" role (found {metadata})"
            ));
        }
        let mut ids: Vec<u32> = c.servers.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("servers: id {} appears twice", w[0]));
        }
        if c.cluster.timeout == Time::ZERO {
            return Err("cluster.timeout: must be > 0".into());
        }
        Ok(c)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.cluster.timeout.as_nanos())
    }

    pub fn metadata_server(&self) -> &ServerEntry {
        // `parse` checked there is exactly one.
        self.servers
            .iter()
            .find(|s| s.roles.contains(&Role::Metadata))
            .unwrap_or(&self.servers[0])
    }

    pub fn server(&self, id: u32) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.id == id)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &str = r#"
[server]
listen = "127.0.0.1:4100"
data_dir = "/tmp/s0"
roles = ["data", "metadata"]
[policy]
kind = "sfq-d-plus"
[throttle]
preset = "hdd"
seek = "4ms"
[metadata]
data_servers = [0, 1]
stripe_unit = "1MiB"
"#;

    #[test]
    fn a_server_file_reads_with_presets_and_defaults() {
        let c = server_config(SERVER).unwrap();
        assert_eq!(c.policy.name(), "sfq-d-plus");
        let t = c.throttle.unwrap();
        assert_eq!(
            (t.seek, t.bandwidth),
            (Time::from_millis(4), Bandwidth(100e6))
        );
        let m = c.metadata.unwrap();
        assert_eq!((m.default_unit, m.default_count), (1 << 20, 2));
    }

    #[test]
    fn bad_server_files_name_the_key() {
        let err = |text: &str| server_config(text).unwrap_err();
        assert!(err(&SERVER.replace("127.0.0.1:4100", "nowhere")).starts_with("server.listen"));
        assert!(
            err(&SERVER.replace("preset = \"hdd\"", "preset = \"tape\""))
                .contains("throttle.preset: unknown preset \"tape\"")
        );
        assert!(err(&SERVER.replace(
            "[metadata]\ndata_servers = [0, 1]",
            "[metadata]\ndata_servers = []"
        ))
        .starts_with("metadata.data_servers"));
        assert!(err(&SERVER.replace(
            "kind = \"sfq-d-plus\"",
            "kind = \"sfq-d-plus\"\nlarge_slots = 0"
        ))
        .starts_with("policy.large_slots"));
        assert!(
            err(&SERVER.replace("roles = [\"data\", \"metadata\"]", "roles = [\"data\"]"))
                .starts_with("metadata:")
        );
        assert!(err(&SERVER.replace(
            "roles = [\"data\", \"metadata\"]",
            "roles = [\"data\", \"cache\"]"
        ))
        .starts_with("server.roles"));
    }

    #[test]
    fn cluster_files_round_trip_and_need_one_metadata_server() {
        let text = r#"
[cluster]
timeout = "2s"
[[servers]]
id = 0
address = "127.0.0.1:4100"
roles = ["data", "metadata"]
[[servers]]
id = 1
address = "127.0.0.1:4101"
roles = ["data"]
"#;
        let c = ClusterFile::parse(text).unwrap();
        assert_eq!(c.metadata_server().id, 0);
        assert_eq!(ClusterFile::parse(&c.to_toml()).unwrap(), c);
        assert!(
            ClusterFile::parse(&text.replace("[\"data\", \"metadata\"]", "[\"data\"]"))
                .unwrap_err()
                .contains("exactly one")
        );
        assert!(ClusterFile::parse(&text.replace("id = 1", "id = 0"))
            .unwrap_err()
            .contains("id 0 appears twice"));
        assert!(ClusterFile::parse(&text.replace("4101\"", "x\""))
            .unwrap_err()
            .starts_with("servers[1].address"));
    }
}
