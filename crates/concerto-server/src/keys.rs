//! The key ring a server authenticates connections against, and what each
//! key may ask of it.
//!
//! A ring read from a file is read again when the file changes, so keys
//! that `concerto auth issue` adds or `concerto auth revoke` removes take
//! effect at the next connection, without a restart. A file that no longer
//! parses is reported and the last good ring kept: a typo must not lock
//! every tenant out.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use concerto_proto::auth::{Grant, Key, KeyRing};
use concerto_proto::capability::{self, CapabilityKey};
use concerto_proto::{Message, MetaRequest, SCRATCH_OBJECTS};

pub struct Keys {
    file: Option<PathBuf>,
    current: Mutex<Loaded>,
}

struct Loaded {
    modified: Option<SystemTime>,
    ring: Arc<KeyRing>,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "Keys({})", p.display()),
            None => f.write_str("Keys(in memory)"),
        }
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Keys {
    /// A ring that never changes (tests, an in-process cluster).
    pub fn fixed(ring: KeyRing) -> Keys {
        Keys {
            file: None,
            current: Mutex::new(Loaded {
                modified: None,
                ring: Arc::new(ring),
            }),
        }
    }

    /// The ring in `path`, which must read now.
    pub fn from_file(path: &Path) -> Result<Keys, String> {
        let stamp = modified(path);
        let ring = KeyRing::load(path)?;
        Ok(Keys {
            file: Some(path.to_path_buf()),
            current: Mutex::new(Loaded {
                modified: stamp,
                ring: Arc::new(ring),
            }),
        })
    }

    /// The ring as it is now (re-read if its file changed).
    pub fn ring(&self) -> Arc<KeyRing> {
        let mut current = match self.current.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(path) = &self.file {
            let stamp = modified(path);
            if stamp != current.modified {
                current.modified = stamp;
                match KeyRing::load(path) {
                    Ok(ring) => current.ring = Arc::new(ring),
                    Err(e) => eprintln!("concerto-server: keeping the previous keys: {e}"),
                }
            }
        }
        current.ring.clone()
    }
}

/// Why a tenant `key`'s data request `message` may not reach its object:
/// it needs a capability the metadata service issued to that key for that
/// object, with the right the request needs (reading for a read, writing
/// for a write or a truncate, either for an fsync or a length), not
/// expired at `now_s`. Admin and peer keys need none (the metadata
/// server's glimpses and removals, `profile --server`'s scratch objects).
pub fn capability_refusal(
    key: &Key,
    capabilities: Option<&CapabilityKey>,
    message: &Message,
    now_s: u64,
) -> Option<String> {
    if !matches!(key.grant, Grant::Tenant { .. } | Grant::Node { .. }) {
        return None;
    }
    let (object, cap, want) = match message {
        Message::Read { object, cap, .. } => (*object, cap, capability::READ),
        Message::Write { object, cap, .. } | Message::Truncate { object, cap, .. } => {
            (*object, cap, capability::WRITE)
        }
        Message::Fsync { object, cap, .. } | Message::ObjectSize { object, cap, .. } => {
            (*object, cap, 0)
        }
        _ => return None,
    };
    match capabilities {
        Some(k) => k.refusal(cap.as_ref(), &key.id, object, want, now_s),
        None => Some(
            "this server's key ring has no peer key, which capabilities are checked with: tenants cannot reach objects"
                .into(),
        ),
    }
}

/// Why `key` may not send `message`, or `None` when it may.
///
/// Tenants send data and namespace requests as their own job only, node
/// keys as any job (a node's mount serves all of the node's), each
/// namespace request as a user of the key's range; peers
/// (other servers) send service reports, removals of removed files'
/// objects, glimpses of objects' lengths and questions whether a file
/// exists; the administrator may do anything. Everyone may ping.
pub fn refusal(key: &Key, message: &Message) -> Option<String> {
    let admin_only = |what: &str| {
        (key.grant != Grant::Admin).then(|| {
            format!(
                "{what} needs an admin key (key {:?} is {})",
                key.id, key.grant
            )
        })
    };
    if let Message::Meta {
        user: Some(claimed),
        ..
    } = message
    {
        if let Err(why) = key.acting_for(Some(claimed)) {
            return Some(why);
        }
    }
    match message {
        Message::Ping | Message::Space => None,
        Message::SetPolicy { .. } => admin_only("switching the policy"),
        Message::SetSets { .. } => admin_only("switching the coordinator's set rule"),
        Message::SetCluster { .. } => admin_only("setting the cluster map"),
        Message::SetRules { .. } | Message::GetRules => admin_only("the QoS rules"),
        Message::Stats => admin_only("reading the statistics"),
        Message::Arrivals { .. } => admin_only("reading the arrival log"),
        // The servers' own business with each other.
        Message::ServiceReport(_)
        | Message::SetGrants { .. }
        | Message::RemoveObjects { .. }
        | Message::Meta {
            op: MetaRequest::Exists { .. },
            ..
        } => match key.grant {
            Grant::Admin | Grant::Peer => None,
            _ => Some(format!("key {:?} is not a server's peer key", key.id)),
        },
        // A glimpse: the metadata server asks a data server for an object's length.
        Message::ObjectSize { .. } if key.grant == Grant::Peer => None,
        // Objects no file has: the administrator's scratch space.
        Message::Write { object, .. } | Message::Truncate { object, .. }
            if *object >= SCRATCH_OBJECTS && key.grant != Grant::Admin =>
        {
            Some(format!(
                "object {object:#x} is a scratch object: writing it needs an admin key (key {:?} is {})",
                key.id, key.grant
            ))
        }
        other => match (key.grant, other.tags()) {
            (Grant::Admin | Grant::Node { .. }, Some(_)) => None,
            (Grant::Tenant { job }, Some(tags)) if tags.app == job => None,
            (Grant::Tenant { job }, Some(tags)) => Some(format!(
                "key {:?} acts as application {job}, not {}",
                key.id, tags.app
            )),
            (Grant::Peer, Some(_)) => Some(format!(
                "key {:?} is a peer key: it sends the servers' own requests only",
                key.id
            )),
            // Replies and handshake messages are no requests: the
            // connection answers them as protocol errors.
            (_, None) => None,
        },
    }
}
