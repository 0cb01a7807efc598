//! The cluster map: every server's id, address and roles, as `SetCluster`
//! gives them (`concerto cluster up` sends it once every server answers;
//! on hosts of one's own, the server file's `cluster` names the cluster
//! file), and connections to the other servers, authenticated with the
//! ring's peer key. The metadata server asks data servers for objects'
//! sizes and removes the objects of removed files through it; a data
//! server asks the metadata server whether a file exists before it
//! creates one of its objects; `service-sync` sends service reports to
//! the data servers it lists.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::runtime::Handle;

use concerto_proto::auth::Grant;
use concerto_proto::connection::ServerPool;
use concerto_proto::integrity::Ask;
use concerto_proto::{Member, MetaReply, MetaRequest, Role, Tags};

use crate::keys::Keys;
use crate::storage::ObjectAuthority;

/// How long another server may take to answer.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// The tags of the servers' own requests to each other: application 0.
pub fn own_tags() -> Tags {
    Tags {
        app: 0,
        rank: 0,
        issue_ns: 0,
        weight: None,
    }
}

pub struct Members {
    own: SocketAddr,
    keys: Arc<Keys>,
    current: RwLock<Option<Arc<Map>>>,
}

/// One version of the map, with its connections.
pub struct Map {
    pub members: Vec<Member>,
    pub pool: ServerPool,
}

impl Map {
    /// The metadata server's id.
    pub fn metadata_server(&self) -> Option<u32> {
        self.members
            .iter()
            .find(|m| m.roles.contains(&Role::Metadata))
            .map(|m| m.id)
    }
}

impl Members {
    /// The secret object capabilities are made and checked with, from the
    /// key ring as it is now.
    pub fn capability_key(&self) -> Option<concerto_proto::capability::CapabilityKey> {
        concerto_proto::capability::CapabilityKey::from_ring(&self.keys.ring())
    }

    pub fn new(own: SocketAddr, keys: Arc<Keys>) -> Members {
        Members {
            own,
            keys,
            current: RwLock::new(None),
        }
    }

    /// Replaces the map; connections to the old one close as their users finish.
    pub fn set(&self, members: Vec<Member>) -> Result<(), String> {
        let credential = self
            .keys
            .ring()
            .with_grant(Grant::Peer)
            .map(|k| k.credential())
            .ok_or("the key ring has no peer key, which servers talk to each other with")?;
        let pool = ServerPool::new(
            members.iter().map(|m| (m.id, m.address)).collect(),
            PEER_TIMEOUT,
            credential,
            Ask::default(),
        );
        *self.current.write().unwrap_or_else(|p| p.into_inner()) =
            Some(Arc::new(Map { members, pool }));
        Ok(())
    }

    pub fn map(&self) -> Option<Arc<Map>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The other data servers' addresses (service reports go to them).
    pub fn data_peers(&self) -> Vec<SocketAddr> {
        self.map().map_or_else(Vec::new, |m| {
            m.members
                .iter()
                .filter(|s| s.roles.contains(&Role::Data) && s.address != self.own)
                .map(|s| s.address)
                .collect()
        })
    }
}

/// Where a server keeps the last cluster map it was given, in its data
/// directory, so that a restart knows its cluster before anyone says.
const MAP_FILE: &str = "cluster-map.json";

/// Saves the map in `dir`, replacing the file atomically.
pub fn save(dir: &Path, members: &[Member]) -> Result<(), String> {
    let write = || -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!("{MAP_FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec(members).unwrap_or_default())?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, dir.join(MAP_FILE))
    };
    write().map_err(|e| format!("{}: {e}", dir.join(MAP_FILE).display()))
}

/// The map saved in `dir`, if any.
pub fn load(dir: &Path) -> Result<Option<Vec<Member>>, String> {
    let path = dir.join(MAP_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// A data server's authority on which objects may be created: the
/// metadata server of the cluster map, asked over the network. Without a
/// map (a data server on its own, as in some tests) every object may.
pub struct MetadataAuthority {
    pub members: Arc<Members>,
    pub runtime: Handle,
}

impl ObjectAuthority for MetadataAuthority {
    fn is_live(&self, object: u64) -> io::Result<bool> {
        let Some(map) = self.members.map() else {
            return Ok(true);
        };
        let Some(mds) = map.metadata_server() else {
            return Ok(true);
        };
        let asked = self.runtime.block_on(async {
            map.pool
                .get(mds)
                .await?
                .meta(own_tags(), MetaRequest::Exists { inode: object })
                .await
        });
        match asked {
            Ok(MetaReply::Exists(live)) => Ok(live),
            Ok(_) => Err(io::Error::other(format!(
                "the metadata server sent an unexpected answer about object {object:#x}"
            ))),
            Err(e) => Err(io::Error::other(format!(
                "cannot ask the metadata server whether object {object:#x}'s file exists: {e}"
            ))),
        }
    }
}
