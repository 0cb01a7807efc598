//! A server: its configuration, and what starting one wires together —
//! the roles' stores, the scheduling loop ([`crate::schedule`]), the
//! connections ([`crate::connection`]), the metrics port and the cluster
//! map ([`crate::members`]).

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use concerto_core::emulation::EmulationConfig;
use concerto_core::server::{DeviceClass, DeviceDefaults};
use concerto_core::units::Bandwidth;
use concerto_core::{PolicyConfig, Time};
use concerto_proto::auth::{Credential, Grant, KeyRing};
use concerto_proto::cluster::ClusterFile;
use concerto_proto::{Member, Role};

use crate::coordinator::{CoordinatorConfig, CoordinatorHandle};
use crate::keys::Keys;
use crate::members::{Members, MetadataAuthority};
use crate::metadata::{MetadataConfig, MetadataService};
use crate::rules::load_rules;
use crate::schedule::{schedule, Backend};
use crate::stats::ConnectionCounters;
use crate::storage::ObjectStore;
use crate::throttle::Throttle;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub policy: PolicyConfig,
    /// Requests in flight on the storage when the policy sets no depth of its own.
    pub depth: u32,
    /// What `capped` shares out when its policy does not say.
    pub capacity: Bandwidth,
    /// Data objects are served when this holds [`Role::Data`]; the namespace when it holds [`Role::Metadata`].
    pub roles: Vec<Role>,
    /// Required with the metadata role.
    pub metadata: Option<MetadataConfig>,
    /// The coordinator role's settings (its defaults when unset).
    pub coordinator: Option<CoordinatorConfig>,
    /// Emulate a slower device class.
    pub throttle: Option<EmulationConfig>,
    /// Where to serve Prometheus metrics over HTTP.
    pub metrics: Option<SocketAddr>,
    /// A cluster file naming every server (ids, addresses, roles): the
    /// cluster map the server starts with (`SetCluster` replaces it).
    pub cluster: Option<PathBuf>,
    /// The keys connections authenticate with.
    pub keys: Arc<Keys>,
    /// How far before its arrival a request's issue time may be: an older
    /// (or zero) issue time counts as arrival minus this, so a client's
    /// clock buys it at most this much precedence under `coordinated`.
    pub issue_skew: Time,
    /// What one client may hold of the server.
    pub limits: ConnectionLimits,
}

/// Bounds on what clients hold of a server, so that no client (however it
/// behaves) can exhaust its memory, connections or time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnectionLimits {
    /// Authenticated connections open at once from one IP address; one
    /// more is refused (`Busy`) at the end of its handshake. Handshakes in
    /// progress are bounded apart (the connection module's
    /// `PENDING_PER_ADDRESS`).
    pub per_client: u32,
    /// Of them, authenticated connections of one key from one IP address
    /// (a job's ranks on a node): one job cannot take every place of an
    /// address the node's other jobs share.
    pub per_key: u32,
    /// Bytes one connection's requests may hold at once (frames from their
    /// first bytes, read data to send back): past it the server stops reading
    /// the connection until replies leave (backpressure), so a client that
    /// does not read its replies holds at most this much.
    pub memory: u64,
    /// Bytes the requests of all connections from one IP address may hold
    /// at once, however many connections it opens.
    pub address_memory: u64,
    /// Bytes the requests of every connection may hold at once: what the
    /// server's memory for requests is bounded by.
    pub server_memory: u64,
    /// Bytes the requests of all connections of one key may hold at once,
    /// from however many addresses: a key is who is accountable, and one
    /// that fills its share waits while the rest of `server_memory` stays
    /// for the other keys. A share is not taken back from a key that has
    /// it (its unread replies hold it until they leave or the connection
    /// is closed, `frame_timeout` after its socket stopped taking bytes),
    /// so the shares are fixed, not divided among the keys present.
    pub key_memory: u64,
    /// A frame begun must have its length within this long and, once the
    /// memory budgets let it in, its body within this long again; an idle
    /// connection, between frames, is not timed. A connection whose socket
    /// takes none of its replies' bytes for this long is closed too, and
    /// what its requests held is freed.
    pub frame_timeout: Time,
    /// How often the connections refused since the last time are written
    /// to the log, as one line ([`crate::refusals`]).
    pub refusal_log_interval: Time,
    /// Which connections' frames carry MACs after the handshake.
    pub integrity: Integrity,
}

/// Which connections carry a MAC on every frame after the handshake
/// ([`concerto_proto::integrity`]). A client asks for it when the server
/// is on another host; the server turns it on when asked, and also:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Integrity {
    /// for every client that is not on the server's own host (not
    /// loopback), asked or not (the default);
    #[default]
    BetweenHosts,
    /// for every client, the server's own host included;
    Always,
    /// only when the client asks.
    WhenAsked,
}

impl Integrity {
    /// Whether a connection from `from` whose client `asked` carries MACs.
    pub fn required(self, from: std::net::IpAddr, asked: bool) -> bool {
        asked
            || match self {
                Integrity::Always => true,
                Integrity::BetweenHosts => !from.is_loopback(),
                Integrity::WhenAsked => false,
            }
    }
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            per_client: 256,
            per_key: 128,
            memory: 64 << 20,
            address_memory: 128 << 20,
            server_memory: 1 << 30,
            key_memory: 256 << 20,
            frame_timeout: Time::from_millis(30_000),
            refusal_log_interval: Time::from_millis(10_000),
            integrity: Integrity::default(),
        }
    }
}

/// The default [`ServerConfig::issue_skew`].
pub const DEFAULT_ISSUE_SKEW: Time = Time::from_millis(100);

impl ServerConfig {
    /// The device facts the policy's unset parameters default to: the
    /// throttle's device class when there is one, else a disk's.
    pub fn device_defaults(&self) -> DeviceDefaults {
        DeviceDefaults {
            class: self
                .throttle
                .as_ref()
                .map_or(DeviceClass::Rotational, |t| t.class()),
            depth: self.depth,
            capacity: self.capacity,
        }
    }
}

impl ServerConfig {
    /// A data server on loopback with the given policy, for tests and tools.
    pub fn data(data_dir: PathBuf, policy: PolicyConfig) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            policy,
            depth: 8,
            capacity: concerto_core::server::DEFAULT_CAPACITY,
            roles: vec![Role::Data],
            metadata: None,
            coordinator: None,
            throttle: None,
            metrics: None,
            cluster: None,
            keys: Arc::new(Keys::fixed(
                KeyRing::generate().expect("the system gives random bytes"),
            )),
            issue_skew: DEFAULT_ISSUE_SKEW,
            limits: ConnectionLimits::default(),
        }
    }

    /// A credential for this server's admin key (tests and tools).
    pub fn admin_credential(&self) -> Option<Credential> {
        self.keys
            .ring()
            .with_grant(Grant::Admin)
            .map(|k| k.credential())
    }
}

/// A running server; dropping it does not stop it, [`ServerHandle::shutdown`] does.
pub struct ServerHandle {
    pub addr: SocketAddr,
    /// Where Prometheus metrics are served, when configured.
    pub metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

fn other(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// The cluster map a server starts with: its cluster file's, else the one
/// it was last given (kept in its data directory).
fn initial_members(cfg: &ServerConfig) -> io::Result<Option<Vec<Member>>> {
    if let Some(path) = &cfg.cluster {
        let text = std::fs::read_to_string(path).map_err(|e| {
            io::Error::new(e.kind(), format!("server.cluster: {}: {e}", path.display()))
        })?;
        let file = ClusterFile::parse(&text)
            .map_err(|e| other(format!("server.cluster: {}: {e}", path.display())))?;
        return Ok(Some(file.members()));
    }
    crate::members::load(&cfg.data_dir).map_err(other)
}

/// What the server's roles need, opened: the object store (data), the
/// namespace (metadata), the coordinator's task, the throttle, and the
/// cluster's members as far as they are known.
fn open_roles(
    cfg: &ServerConfig,
    addr: SocketAddr,
    stop: &watch::Sender<bool>,
) -> io::Result<Backend> {
    let members = Arc::new(Members::new(addr, cfg.keys.clone()));
    if let Some(map) = initial_members(cfg)? {
        members.set(map).map_err(other)?;
    }
    let runtime = tokio::runtime::Handle::current();
    let objects = if cfg.roles.contains(&Role::Data) {
        let store = Arc::new(ObjectStore::open(&cfg.data_dir)?);
        store.set_authority(Arc::new(MetadataAuthority {
            members: members.clone(),
            runtime: runtime.clone(),
        }));
        Some(store)
    } else {
        None
    };
    let metadata = match (cfg.roles.contains(&Role::Metadata), &cfg.metadata) {
        (false, _) => None,
        (true, None) => {
            return Err(other(
                "the metadata role needs the metadata settings (data servers, default layout)"
                    .into(),
            ))
        }
        (true, Some(m)) => Some(
            MetadataService::open(
                &cfg.data_dir,
                m.clone(),
                members.clone(),
                runtime,
                stop.subscribe(),
            )
            .map_err(|e| other(e.to_string()))?,
        ),
    };
    let coordinator = cfg.roles.contains(&Role::Coordinator).then(|| {
        CoordinatorHandle::start(
            cfg.coordinator.clone().unwrap_or_default(),
            members.clone(),
            stop.subscribe(),
        )
    });
    Ok(Backend {
        objects,
        metadata,
        coordinator,
        throttle: cfg.throttle.clone().map(Throttle::new),
        members,
    })
}

/// Opens the stores, binds, then serves until shut down.
pub async fn start(cfg: ServerConfig) -> io::Result<ServerHandle> {
    if cfg.roles.is_empty() {
        return Err(other(
            "a server needs at least one role: data, metadata, coordinator".into(),
        ));
    }
    if let Some(t) = &cfg.throttle {
        t.validate().map_err(|e| other(e.within("throttle")))?;
    }
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {}: {e}", cfg.listen)))?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let backend = open_roles(&cfg, addr, &stop)?;
    let rules = load_rules(&cfg.data_dir)?;
    let metrics_listener =
        match cfg.metrics {
            Some(at) => Some(TcpListener::bind(at).await.map_err(|e| {
                io::Error::new(e.kind(), format!("cannot serve metrics on {at}: {e}"))
            })?),
            None => None,
        };
    let metrics_addr = metrics_listener
        .as_ref()
        .map(|l| l.local_addr())
        .transpose()?;
    let (sched_tx, sched_rx) = mpsc::channel(1024);
    let connections = Arc::new(ConnectionCounters::default());
    let scheduler = tokio::spawn(schedule(
        cfg.clone(),
        addr,
        backend,
        rules,
        connections.clone(),
        sched_rx,
        stop.subscribe(),
    ));
    if let Some(l) = metrics_listener {
        tokio::spawn(crate::metrics::serve(l, sched_tx.clone(), stop.subscribe()));
    }
    let accepting = crate::connection::accept(
        listener,
        (cfg.keys.clone(), connections),
        cfg.limits,
        sched_tx,
        stopped,
    );
    let task = tokio::spawn(async move {
        accepting.await;
        let _ = scheduler.await;
    });
    Ok(ServerHandle {
        addr,
        metrics_addr,
        stop,
        task,
    })
}
