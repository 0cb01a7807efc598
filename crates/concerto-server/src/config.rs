//! The server file (`concerto-server --config FILE`): one server's address,
//! data directory, roles, policy, throttle and, for the metadata role, the
//! cluster's data servers and default layout. (The cluster file, what
//! clients connect with, is concerto-proto's `cluster`.)
//!
//! TOML; an error names the key (`server.listen: invalid socket address
//! syntax`), or the line and column of a syntax error.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use concerto_core::emulation::EmulationConfig;
use concerto_core::job::SetRule;
use concerto_core::server::DEFAULT_CAPACITY;
use concerto_core::units::{Bandwidth, Bytes};
use concerto_core::{PolicyConfig, Time};

use crate::coordinator::CoordinatorConfig;
use crate::keys::Keys;
use crate::metadata::{MetadataConfig, DEFAULT_COMMIT_INTERVAL};
use crate::server::{ConnectionLimits, Integrity, ServerConfig, DEFAULT_ISSUE_SKEW};
use concerto_proto::{check_stripe_unit, Role, MAX_IO};
use concerto_toml::parse;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    server: ServerSection,
    #[serde(default = "default_policy")]
    policy: PolicyConfig,
    throttle: Option<ThrottleSection>,
    metadata: Option<MetadataSection>,
    coordinator: Option<CoordinatorSection>,
}

/// `[coordinator]`: the set rule, the lease, the smoothing of w_iter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CoordinatorSection {
    /// `[coordinator.sets]`: `kind = "set10"` (the default),
    /// `"exclusive-fcfs"`, `"fair-share"`, ... or a table.
    sets: Option<SetRule>,
    lease: Option<Time>,
    smoothing: Option<f64>,
}

impl CoordinatorSection {
    fn resolve(self) -> Result<CoordinatorConfig, String> {
        let mut c = CoordinatorConfig::default();
        if let Some(sets) = self.sets {
            sets.validate().map_err(|e| e.within("coordinator.sets"))?;
            c.sets = sets;
        }
        if let Some(lease) = self.lease {
            let lease = std::time::Duration::from_nanos(lease.as_nanos());
            if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
                return Err(format!(
                    "coordinator.lease: {lease:?}: must be from {MIN_LEASE:?} to {MAX_LEASE:?}"
                ));
            }
            c.lease = lease;
        }
        if let Some(a) = self.smoothing {
            c.phases.smoothing = a;
            c.phases.validate().map_err(|e| e.within("coordinator"))?;
        }
        Ok(c)
    }
}

/// Bounds on the coordinator's lease: a client renews every third of it,
/// so shorter would be mostly renewals; longer would hold a dead job's set
/// for too long.
const MIN_LEASE: std::time::Duration = std::time::Duration::from_millis(300);
const MAX_LEASE: std::time::Duration = std::time::Duration::from_secs(3600);

fn default_policy() -> PolicyConfig {
    PolicyConfig::Fifo(Default::default())
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
    /// The cluster file (every server's id, address and roles): which
    /// servers a data server's objects belong to, where `service-sync`
    /// sends its reports, which data servers the metadata server removes
    /// objects from.
    cluster: Option<PathBuf>,
    /// The key ring connections authenticate against (`keys.toml`).
    keys: PathBuf,
    /// How much older than its arrival a request's issue time may be.
    issue_skew: Option<Time>,
    /// Connections at once from one address.
    max_connections_per_client: Option<u32>,
    /// Of them, connections of one key from one address.
    max_connections_per_key: Option<u32>,
    /// Bytes one connection's requests may hold at once.
    connection_memory: Option<Bytes>,
    /// Bytes the requests of all connections from one address may hold.
    address_memory: Option<Bytes>,
    /// Which connections' frames carry MACs ("between-hosts", "always", "when-asked").
    integrity: Option<Integrity>,
    /// Bytes the requests of every connection may hold together.
    server_memory: Option<Bytes>,
    /// Bytes the requests of one key's connections may hold together.
    key_memory: Option<Bytes>,
    /// How long a frame begun may take to arrive.
    frame_timeout: Option<Time>,
    /// How often refused connections are written to the log, as one line.
    refusal_log_interval: Option<Time>,
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
    pub segment: Option<Time>,
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
            segment: self
                .segment
                .or(base.as_ref().map(|b| b.segment))
                .unwrap_or(Time::ZERO),
        };
        cfg.validate().map_err(|e| e.within("throttle"))?;
        Ok(Some(cfg))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetadataSection {
    data_servers: Vec<u32>,
    #[serde(
        default = "default_unit",
        deserialize_with = "concerto_core::units::deserialize_stripe_unit"
    )]
    stripe_unit: Bytes,
    stripe_count: Option<u32>,
    /// How long a namespace change may wait for the commit that makes it durable.
    commit_interval: Option<Time>,
}

fn default_unit() -> Bytes {
    Bytes(64 * 1024)
}

/// Reads a server file.
pub fn server_config(text: &str) -> Result<ServerConfig, String> {
    validated(parse::<ServerFile>(text)?)
}

/// Reads a server file; with it, a warning for each value in it that is
/// valid but almost surely a mistake (see `concerto_core::traps`), naming
/// its line and key, and a note for each documented default that matters
/// for the policy configured.
pub fn server_config_warned(text: &str) -> Result<(ServerConfig, Vec<String>), String> {
    let (f, mut warnings) = concerto_core::traps::read_warned(|| parse::<ServerFile>(text))?;
    if let Some(note) = default_capacity_note(&f) {
        warnings.push(note);
    }
    Ok((validated(f)?, warnings))
}

/// The capacity a server file gives: `server.capacity`, else the
/// throttle's bandwidth, else [`DEFAULT_CAPACITY`].
fn capacity(server: &ServerSection, throttle: Option<&EmulationConfig>) -> Bandwidth {
    server
        .capacity
        .or(throttle.map(|t| t.bandwidth))
        .unwrap_or(DEFAULT_CAPACITY)
}

/// A note when the policy uses the server's capacity (`capped` without
/// its own, `service-sync`'s report bounds) and the file leaves it to
/// [`DEFAULT_CAPACITY`].
fn default_capacity_note(f: &ServerFile) -> Option<String> {
    let throttled = f
        .throttle
        .as_ref()
        .is_some_and(|t| t.preset.as_deref() != Some("none"));
    if f.server.capacity.is_some() || throttled {
        return None;
    }
    let uses = match &f.policy {
        PolicyConfig::Capped(c) if c.capacity.is_none() => "shares out",
        PolicyConfig::ServiceSync(_) => "bounds its peers' service reports by",
        _ => return None,
    };
    Some(format!(
        "server.capacity: not set and no throttle: the {} policy {uses} the default {} MB/s; set capacity to the storage's bandwidth",
        f.policy.name(),
        DEFAULT_CAPACITY.0 / 1e6
    ))
}

/// The server a file describes, once its values are checked together.
fn validated(f: ServerFile) -> Result<ServerConfig, String> {
    f.policy.validate().map_err(|e| e.within("policy"))?;
    if f.server.roles.is_empty() {
        return Err(
            "server.roles: give at least one of \"data\", \"metadata\", \"coordinator\"".into(),
        );
    }
    if f.server.depth == 0 {
        return Err("server.depth: must be > 0".into());
    }
    let metadata = metadata_section(f.server.roles.contains(&Role::Metadata), f.metadata)?;
    let coordinator = match (f.server.roles.contains(&Role::Coordinator), f.coordinator) {
        (false, Some(_)) => return Err(
            "coordinator: only a server with the coordinator role takes a [coordinator] section"
                .into(),
        ),
        (_, section) => section.map(CoordinatorSection::resolve).transpose()?,
    };
    let throttle = match f.throttle {
        Some(t) => t.resolve()?,
        None => None,
    };
    let capacity = capacity(&f.server, throttle.as_ref());
    let keys = Keys::from_file(&f.server.keys).map_err(|e| format!("server.keys: {e}"))?;
    let limits = connection_limits(&f.server)?;
    Ok(ServerConfig {
        listen: f.server.listen,
        data_dir: f.server.data_dir,
        policy: f.policy,
        depth: f.server.depth,
        capacity,
        roles: f.server.roles,
        metadata,
        coordinator,
        throttle,
        metrics: f.server.metrics,
        cluster: f.server.cluster,
        keys: Arc::new(keys),
        issue_skew: f.server.issue_skew.unwrap_or(DEFAULT_ISSUE_SKEW),
        limits,
    })
}

/// `[metadata]`, which a server takes exactly when it has the metadata role.
fn metadata_section(
    role: bool,
    section: Option<MetadataSection>,
) -> Result<Option<MetadataConfig>, String> {
    let m = match (role, section) {
        (true, None) => return Err("metadata: a server with the metadata role needs a [metadata] section (data_servers, stripe_unit)".into()),
        (false, Some(_)) => return Err("metadata: only a server with the metadata role takes a [metadata] section".into()),
        (false, None) => return Ok(None),
        (true, Some(m)) => m,
    };
    if m.data_servers.is_empty() {
        return Err("metadata.data_servers: list at least one data server id".into());
    }
    let unit = m.stripe_unit.0;
    check_stripe_unit(unit).map_err(|e| format!("metadata.stripe_unit: {e}"))?;
    let count = m.stripe_count.unwrap_or(m.data_servers.len() as u32);
    if count == 0 || count as usize > m.data_servers.len() {
        return Err(format!(
            "metadata.stripe_count: must be between 1 and the {} data servers",
            m.data_servers.len()
        ));
    }
    let commit_interval = m.commit_interval.map_or(DEFAULT_COMMIT_INTERVAL, |t| {
        std::time::Duration::from_nanos(t.as_nanos())
    });
    if commit_interval > std::time::Duration::from_secs(1) {
        return Err(
            "metadata.commit_interval: at most 1s (changes wait this long to be durable)".into(),
        );
    }
    Ok(Some(MetadataConfig {
        data_servers: m.data_servers,
        default_unit: unit,
        default_count: count,
        commit_interval,
    }))
}

/// What one client, one key and every connection may hold, checked
/// against each other.
fn connection_limits(server: &ServerSection) -> Result<ConnectionLimits, String> {
    let defaults = ConnectionLimits::default();
    let limits = ConnectionLimits {
        per_client: server
            .max_connections_per_client
            .unwrap_or(defaults.per_client),
        per_key: server.max_connections_per_key.unwrap_or(defaults.per_key),
        memory: server.connection_memory.map_or(defaults.memory, |b| b.0),
        address_memory: server
            .address_memory
            .map_or(defaults.address_memory, |b| b.0),
        server_memory: server.server_memory.map_or(defaults.server_memory, |b| b.0),
        key_memory: 0,
        frame_timeout: server.frame_timeout.unwrap_or(defaults.frame_timeout),
        refusal_log_interval: server
            .refusal_log_interval
            .unwrap_or(defaults.refusal_log_interval),
        integrity: server.integrity.unwrap_or_default(),
    };
    if limits.per_client == 0 {
        return Err("server.max_connections_per_client: must be > 0".into());
    }
    if limits.per_key == 0 {
        return Err("server.max_connections_per_key: must be > 0".into());
    }
    if limits.memory < MAX_IO {
        return Err(format!(
            "server.connection_memory: must be at least one request's data, {} MiB",
            MAX_IO >> 20
        ));
    }
    if limits.address_memory < limits.memory {
        return Err(format!(
            "server.address_memory: must be at least server.connection_memory ({} MiB)",
            limits.memory >> 20
        ));
    }
    if limits.server_memory < limits.address_memory {
        return Err(format!(
            "server.server_memory: must be at least server.address_memory ({} MiB)",
            limits.address_memory >> 20
        ));
    }
    // A quarter of the server by default, so that three other keys find
    // room however greedy one is; at least what one connection may hold.
    let key_memory = server
        .key_memory
        .map_or((limits.server_memory / 4).max(limits.memory), |b| b.0);
    if key_memory < limits.memory || key_memory > limits.server_memory {
        return Err(format!(
            "server.key_memory: must be between server.connection_memory ({} MiB) and server.server_memory ({} MiB)",
            limits.memory >> 20,
            limits.server_memory >> 20
        ));
    }
    let limits = ConnectionLimits {
        key_memory,
        ..limits
    };
    if limits.frame_timeout == Time::ZERO {
        return Err("server.frame_timeout: must be > 0".into());
    }
    if limits.refusal_log_interval < Time::from_millis(100) {
        return Err("server.refusal_log_interval: must be at least 100ms".into());
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server file whose key ring is a real file (the file must read),
    /// in a directory that lives as long as the returned guard.
    fn server_text() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys.toml");
        std::fs::write(
            &keys,
            concerto_proto::auth::KeyRing::generate().unwrap().to_toml(),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = SERVER.replace("KEYS", &keys.display().to_string());
        (dir, text)
    }

    const SERVER: &str = r#"
[server]
listen = "127.0.0.1:4100"
data_dir = "/tmp/s0"
roles = ["data", "metadata"]
keys = "KEYS"
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
        let (_dir, text) = server_text();
        let c = server_config(&text).unwrap();
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
    fn the_default_capacity_is_noted_only_where_the_policy_uses_it() {
        let (_dir, text) = server_text();
        let unthrottled = text.replace("[throttle]\npreset = \"hdd\"\nseek = \"4ms\"\n", "");
        assert_ne!(unthrottled, text);
        let capped = unthrottled.replace("kind = \"sfq-d-plus\"", "kind = \"capped\"");
        let (config, notes) = server_config_warned(&capped).unwrap();
        assert_eq!(config.capacity, DEFAULT_CAPACITY);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("server.capacity: not set and no throttle: the capped policy shares out the default 100 MB/s"),
            "{}",
            notes[0]
        );
        let synced = unthrottled.replace("kind = \"sfq-d-plus\"", "kind = \"service-sync\"");
        let (_, notes) = server_config_warned(&synced).unwrap();
        assert!(
            notes.len() == 1 && notes[0].contains("bounds its peers' service reports"),
            "{notes:?}"
        );
        // Set, throttled, or a policy that does not use it: nothing to note.
        let set = capped.replace("keys = ", "capacity = \"250MB/s\"\nkeys = ");
        let (config, notes) = server_config_warned(&set).unwrap();
        assert_eq!(
            (config.capacity, notes.len()),
            (Bandwidth(250e6), 0),
            "{notes:?}"
        );
        let throttled = text.replace("kind = \"sfq-d-plus\"", "kind = \"capped\"");
        let (config, notes) = server_config_warned(&throttled).unwrap();
        assert_eq!(
            (config.capacity, notes.len()),
            (Bandwidth(100e6), 0),
            "{notes:?}"
        );
        let (_, notes) = server_config_warned(&unthrottled).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn likely_mistakes_are_warned_at_their_key_and_a_decimal_stripe_unit_refused_with_the_fix() {
        let (_dir, text) = server_text();
        let (_, warnings) = server_config_warned(&text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        // A policy window without a unit is 1000 ns: accepted, warned at its key.
        let windowed = text.replace(
            "kind = \"sfq-d-plus\"",
            "kind = \"coordinated\"\nwindow = 1000",
        );
        let (config, warnings) = server_config_warned(&windowed).unwrap();
        assert_eq!(config.policy.name(), "coordinated");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("line 9, column 10: policy.window: 1000 has no unit"),
            "{}",
            warnings[0]
        );
        // 4096 KB is whole pages: accepted, warned as decimal.
        let (_, warnings) = server_config_warned(&text.replace("\"1MiB\"", "\"4096KB\"")).unwrap();
        assert!(
            warnings.len() == 1
                && warnings[0].contains("metadata.stripe_unit: \"4096KB\" is 4096000 bytes"),
            "{warnings:?}"
        );
        // 4 KB is not: refused, with the unit that was meant.
        let err = server_config_warned(&text.replace("\"1MiB\"", "\"4KB\"")).unwrap_err();
        assert!(
            err.starts_with("metadata.stripe_unit: stripe unit 4000: must be a multiple of 4096")
                && err.contains("write 4KiB"),
            "{err}"
        );
    }

    #[test]
    fn bad_server_files_name_the_key() {
        let err = |text: &str| server_config(text).unwrap_err();
        let (_dir, text) = server_text();
        let text = text.as_str();
        // A bad value names its line, column and key.
        assert!(err(&text.replace("127.0.0.1:4100", "nowhere"))
            .starts_with("line 3, column 10: server.listen: "));
        assert!(err(&text.replace("keys = ", "keys_ = ")).contains("server.keys_"));
        assert!(err(&text.replace("keys.toml", "missing.toml")).starts_with("server.keys: "));
        assert!(err(&text.replace("preset = \"hdd\"", "preset = \"tape\""))
            .contains("throttle.preset: unknown preset \"tape\""));
        assert!(err(&text.replace(
            "[metadata]\ndata_servers = [0, 1]",
            "[metadata]\ndata_servers = []"
        ))
        .starts_with("metadata.data_servers"));
        assert!(err(&text.replace(
            "kind = \"sfq-d-plus\"",
            "kind = \"sfq-d-plus\"\nlarge_slots = 0"
        ))
        .starts_with("policy.large_slots"));
        assert!(
            err(&text.replace("roles = [\"data\", \"metadata\"]", "roles = [\"data\"]"))
                .starts_with("metadata:")
        );
        assert!(err(&text.replace(
            "roles = [\"data\", \"metadata\"]",
            "roles = [\"data\", \"cache\"]"
        ))
        .contains("server.roles"));
        // Memory budgets nest: connection <= address <= server.
        let limits = |extra: &str| text.replace("keys = ", &format!("{extra}\nkeys = "));
        assert!(err(&limits("address_memory = \"32MiB\"")).starts_with(
            "server.address_memory: must be at least server.connection_memory (64 MiB)"
        ));
        assert!(err(&limits("server_memory = \"64MiB\""))
            .starts_with("server.server_memory: must be at least server.address_memory (128 MiB)"));
        // A key's share lies between one connection's and the server's.
        assert!(err(&limits("key_memory = \"2GiB\"")).starts_with(
            "server.key_memory: must be between server.connection_memory (64 MiB) and server.server_memory (1024 MiB)"
        ));
        assert!(err(&limits("key_memory = \"1MiB\"")).starts_with("server.key_memory: "));
        assert!(err(&limits("refusal_log_interval = \"1ms\""))
            .starts_with("server.refusal_log_interval: must be at least 100ms"));
        assert!(err(&limits("refusal_log_interval = 10")).contains("server.refusal_log_interval"));
        // The coordinator's section: only with the role, and its keys checked.
        assert!(err(&format!("{text}[coordinator]\nlease = \"5s\"\n"))
            .starts_with("coordinator: only a server with the coordinator role"));
        let coordinator = text.replace("\"metadata\"]", "\"metadata\", \"coordinator\"]");
        let with = |section: &str| format!("{coordinator}[coordinator]\n{section}\n");
        let c = server_config(&with(
            "lease = \"5s\"\n[coordinator.sets]\nkind = \"exclusive-fcfs\"",
        ))
        .unwrap()
        .coordinator
        .unwrap();
        assert_eq!(
            (c.lease, c.sets),
            (std::time::Duration::from_secs(5), SetRule::ExclusiveFcfs)
        );
        assert!(err(&with("lease = \"1ms\"")).starts_with("coordinator.lease: 1ms: must be from"));
        assert!(err(&with("smoothing = 0")).starts_with("coordinator.smoothing: "));
        assert!(err(&with("[coordinator.sets]\nkind = \"log\"\nbase = 1"))
            .starts_with("coordinator.sets.base: "));
        assert!(err(&with("[coordinator.sets]\nkind = \"set11\"")).contains("coordinator.sets"));
    }
}
