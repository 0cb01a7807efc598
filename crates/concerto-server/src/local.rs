//! A cluster inside one process, on loopback: what the integration tests
//! and benchmarks start. (`concerto cluster up` starts one process per
//! server instead.)

use std::io;
use std::path::Path;

use concerto_core::emulation::EmulationConfig;
use concerto_core::PolicyConfig;

use concerto_proto::cluster::{ClusterFile, ClusterSection, ServerEntry};
use concerto_proto::connection::ServerConnection;
use concerto_proto::Role;

use crate::metadata::MetadataConfig;
use crate::server::{self, ServerConfig, ServerHandle};

pub struct LocalCluster {
    pub servers: Vec<ServerHandle>,
    pub cluster: ClusterFile,
}

/// How to start one.
#[derive(Clone, Debug)]
pub struct LocalClusterSpec {
    pub servers: u32,
    pub policy: PolicyConfig,
    pub stripe_unit: u64,
    pub throttle: Option<EmulationConfig>,
    pub timeout_ms: u64,
}

impl LocalCluster {
    /// Server 0 holds data and metadata, the others data; each gets `dir/s<i>`.
    pub async fn start(dir: &Path, spec: LocalClusterSpec) -> io::Result<LocalCluster> {
        let data_servers: Vec<u32> = (0..spec.servers).collect();
        let mut servers = Vec::new();
        let mut entries = Vec::new();
        for id in 0..spec.servers {
            let roles = if id == 0 {
                vec![Role::Data, Role::Metadata]
            } else {
                vec![Role::Data]
            };
            let metadata = (id == 0).then(|| MetadataConfig {
                data_servers: data_servers.clone(),
                default_unit: spec.stripe_unit,
                default_count: spec.servers,
            });
            let cfg = ServerConfig {
                roles: roles.clone(),
                metadata,
                throttle: spec.throttle.clone(),
                ..ServerConfig::data(dir.join(format!("s{id}")), spec.policy.clone())
            };
            let handle = server::start(cfg).await?;
            entries.push(ServerEntry {
                id,
                address: handle.addr,
                roles,
                metrics: None,
                pid: None,
                config: None,
            });
            servers.push(handle);
        }
        let cluster = ClusterFile {
            cluster: ClusterSection {
                timeout: concerto_core::Time::from_millis(spec.timeout_ms),
            },
            servers: entries,
        };
        // Every data server learns the others, for service reports.
        let addresses: Vec<_> = servers.iter().map(|s: &ServerHandle| s.addr).collect();
        let failed = |e: concerto_proto::connection::ClientError| io::Error::other(e.to_string());
        for &addr in &addresses {
            let c = ServerConnection::connect(addr, cluster.timeout())
                .await
                .map_err(failed)?;
            c.set_peers(addresses.clone()).await.map_err(failed)?;
        }
        Ok(LocalCluster { servers, cluster })
    }

    pub async fn shutdown(self) {
        for s in self.servers {
            s.shutdown().await;
        }
    }
}
