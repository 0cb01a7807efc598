//! A cluster inside one process, on loopback: what the integration tests
//! and benchmarks start. (`concerto cluster up` starts one process per
//! server instead.)

use std::io;
use std::path::Path;
use std::sync::Arc;

use concerto_core::emulation::EmulationConfig;
use concerto_core::PolicyConfig;

use concerto_proto::auth::{Credential, Grant, KeyRing};
use concerto_proto::cluster::{ClusterFile, ClusterSection, ServerEntry};
use concerto_proto::connection::ServerConnection;
use concerto_proto::Role;

use crate::coordinator::CoordinatorConfig;
use crate::keys::Keys;
use crate::metadata::{MetadataConfig, DEFAULT_COMMIT_INTERVAL};
use crate::server::{self, ConnectionLimits, Integrity, ServerConfig, ServerHandle};

pub struct LocalCluster {
    pub servers: Vec<ServerHandle>,
    pub cluster: ClusterFile,
    /// The servers' key ring (an admin and a peer key; tests add tenants).
    pub keys: Arc<Keys>,
    /// The admin key's credential.
    pub admin: Credential,
}

/// How to start one.
#[derive(Clone, Debug)]
pub struct LocalClusterSpec {
    pub servers: u32,
    pub policy: PolicyConfig,
    pub stripe_unit: u64,
    pub throttle: Option<EmulationConfig>,
    pub timeout_ms: u64,
    /// Which connections' frames carry MACs (loopback: none, by default).
    pub integrity: Integrity,
}

impl LocalClusterSpec {
    /// `servers` unthrottled servers running FIFO, 64 KiB stripes, a 10 s
    /// timeout: what a test that is not about scheduling needs.
    pub fn fifo(servers: u32) -> LocalClusterSpec {
        LocalClusterSpec {
            servers,
            policy: PolicyConfig::Fifo(Default::default()),
            stripe_unit: 65536,
            throttle: None,
            timeout_ms: 10_000,
            integrity: Integrity::default(),
        }
    }
}

impl LocalCluster {
    /// Server 0 holds data and metadata, the others data; each gets `dir/s<i>`.
    pub async fn start(dir: &Path, spec: LocalClusterSpec) -> io::Result<LocalCluster> {
        Self::start_with_keys(dir, spec, KeyRing::generate().map_err(io::Error::other)?).await
    }

    /// The same with a given key ring (which needs an admin key).
    pub async fn start_with_keys(
        dir: &Path,
        spec: LocalClusterSpec,
        ring: KeyRing,
    ) -> io::Result<LocalCluster> {
        Self::start_all(dir, spec, ring, None).await
    }

    /// The same servers and one more, the last, with the coordinator role
    /// alone (`dir/coordinator`).
    pub async fn start_with_coordinator(
        dir: &Path,
        spec: LocalClusterSpec,
        coordinator: CoordinatorConfig,
    ) -> io::Result<LocalCluster> {
        let ring = KeyRing::generate().map_err(io::Error::other)?;
        Self::start_all(dir, spec, ring, Some(coordinator)).await
    }

    /// Server `id`'s configuration: data on every server, the metadata
    /// role (over all of them) on server 0.
    fn server_config(
        dir: &Path,
        spec: &LocalClusterSpec,
        id: u32,
        keys: &Arc<Keys>,
    ) -> ServerConfig {
        let roles = if id == 0 {
            vec![Role::Data, Role::Metadata]
        } else {
            vec![Role::Data]
        };
        let metadata = (id == 0).then(|| MetadataConfig {
            data_servers: (0..spec.servers).collect(),
            default_unit: spec.stripe_unit,
            default_count: spec.servers,
            commit_interval: DEFAULT_COMMIT_INTERVAL,
        });
        ServerConfig {
            roles,
            metadata,
            throttle: spec.throttle.clone(),
            keys: keys.clone(),
            limits: ConnectionLimits {
                integrity: spec.integrity,
                ..ConnectionLimits::default()
            },
            ..ServerConfig::data(dir.join(format!("s{id}")), spec.policy.clone())
        }
    }

    async fn start_all(
        dir: &Path,
        spec: LocalClusterSpec,
        ring: KeyRing,
        coordinator: Option<CoordinatorConfig>,
    ) -> io::Result<LocalCluster> {
        let admin = ring
            .with_grant(Grant::Admin)
            .map(|k| k.credential())
            .ok_or_else(|| io::Error::other("the key ring has no admin key"))?;
        let keys = Arc::new(Keys::fixed(ring));
        let mut servers = Vec::new();
        let mut entries = Vec::new();
        for id in 0..spec.servers {
            let cfg = Self::server_config(dir, &spec, id, &keys);
            let roles = cfg.roles.clone();
            let handle = server::start(cfg).await?;
            entries.push(entry(id, &handle, roles));
            servers.push(handle);
        }
        if let Some(c) = coordinator {
            let cfg = ServerConfig {
                roles: vec![Role::Coordinator],
                coordinator: Some(c),
                keys: keys.clone(),
                ..ServerConfig::data(dir.join("coordinator"), spec.policy.clone())
            };
            let handle = server::start(cfg).await?;
            entries.push(entry(spec.servers, &handle, vec![Role::Coordinator]));
            servers.push(handle);
        }
        let cluster = ClusterFile {
            cluster: ClusterSection {
                timeout: concerto_core::Time::from_millis(spec.timeout_ms),
                credential: None,
                integrity: Default::default(),
            },
            servers: entries,
        };
        // Every server learns the cluster map (the metadata server its data
        // servers, the data servers their metadata server and peers).
        let map = cluster.members();
        let failed = |e: concerto_proto::connection::ClientError| io::Error::other(e.to_string());
        for s in &servers {
            let c = ServerConnection::connect(s.addr, cluster.timeout(), &admin)
                .await
                .map_err(failed)?;
            c.set_cluster(map.clone()).await.map_err(failed)?;
        }
        Ok(LocalCluster {
            servers,
            cluster,
            keys,
            admin,
        })
    }

    pub async fn shutdown(self) {
        for s in self.servers {
            s.shutdown().await;
        }
    }
}

/// The cluster file's entry for a server started here.
fn entry(id: u32, handle: &ServerHandle, roles: Vec<Role>) -> ServerEntry {
    ServerEntry {
        id,
        address: handle.addr,
        roles,
        metrics: None,
        pid: None,
        config: None,
    }
}
