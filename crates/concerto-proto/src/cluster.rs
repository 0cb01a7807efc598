//! The cluster file (`cluster.toml`): every server's id, address and roles,
//! what a client connects with. `concerto cluster up` writes one; a
//! deployment writes its own (docs/deployment.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use concerto_core::Time;

use crate::integrity::Ask;
use crate::{Member, Role};
use concerto_toml::parse;

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
    /// The credential file clients authenticate with unless
    /// `CONCERTO_CREDENTIAL` names another; relative to this file's
    /// directory. `concerto cluster up` points it at the admin key it
    /// generates (readable by its owner only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<PathBuf>,
    /// When clients ask for a MAC on every frame ("between-hosts", the
    /// default, "always" or "never"; a server may require it anyway).
    #[serde(default, skip_serializing_if = "Ask::is_default")]
    pub integrity: Ask,
}

fn default_timeout() -> Time {
    Time::from_millis(10_000)
}

/// A cluster file.
/// What a Concerto FUSE mount's source starts with in mountinfo (then,
/// since wire version 15's mounts, `@` and its cluster: `mount_source`).
pub const MOUNT_SOURCE: &str = "concerto";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    pub cluster: ClusterSection,
    pub servers: Vec<ServerEntry>,
}

impl ClusterFile {
    /// The cluster map the file describes: every server's id, address and roles.
    pub fn members(&self) -> Vec<Member> {
        self.servers
            .iter()
            .map(|s| Member {
                id: s.id,
                address: s.address,
                roles: s.roles.clone(),
            })
            .collect()
    }

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
        let coordinators = c
            .servers
            .iter()
            .filter(|s| s.roles.contains(&Role::Coordinator))
            .count();
        if coordinators > 1 {
            return Err(format!(
                "servers: at most one server may have the \"coordinator\" role (found {coordinators})"
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

    /// The source a FUSE mount of this cluster shows in
    /// `/proc/self/mountinfo`: `concerto@` and the metadata server's
    /// address, which names the cluster (it has exactly one). The MPI-IO
    /// library reads it to serve a path under a mount only from that
    /// mount's cluster.
    pub fn mount_source(&self) -> String {
        format!("{MOUNT_SOURCE}@{}", self.metadata_server().address)
    }

    /// The server with the coordinator role, if the cluster has one.
    pub fn coordinator(&self) -> Option<&ServerEntry> {
        self.servers
            .iter()
            .find(|s| s.roles.contains(&Role::Coordinator))
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
        assert!(c.coordinator().is_none());
        let two = text.replace("[\"data\"]", "[\"data\", \"coordinator\"]");
        assert_eq!(
            ClusterFile::parse(&two).unwrap().coordinator().unwrap().id,
            1
        );
        let three = two.replace(
            "[\"data\", \"metadata\"]",
            "[\"data\", \"metadata\", \"coordinator\"]",
        );
        assert!(ClusterFile::parse(&three)
            .unwrap_err()
            .contains("at most one server may have the \"coordinator\" role"));
        assert!(ClusterFile::parse(&text.replace("id = 1", "id = 0"))
            .unwrap_err()
            .contains("id 0 appears twice"));
        let err = ClusterFile::parse(&text.replace("4101\"", "x\"")).unwrap_err();
        assert!(
            err.starts_with("line 10, column 11: servers[1].address: "),
            "{err}"
        );
    }
}
