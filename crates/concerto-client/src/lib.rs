//! The client library: a file system over a cluster file.
//!
//! Namespace operations go to the metadata server; data is split by the
//! file's layout (concerto-core's striping arithmetic) into one request per
//! server — list I/O when the access is not contiguous on that server — and
//! sent to all of them at once. A file's size is the furthest byte any of
//! its objects holds, asked of its servers (as in PVFS2), so it is right
//! after concurrent strided writes with no size update per write.
//!
//! This crate links the wire protocol and the client only — no server,
//! database or FUSE code — so the Python module and MPI-IO programs that
//! use it stay small.

mod identity;
pub mod probe;

pub use concerto_proto as proto;
pub use concerto_proto::cluster::{ClusterFile, ServerEntry};
pub use concerto_proto::connection::{ClientError, ServerConnection};
pub use identity::{credential_for, Identity, CREDENTIAL_VAR};

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::future::try_join_all;
use tokio::sync::Mutex;

use concerto_core::{Extent, RequestLimits, StripeLayout};

use concerto_proto::auth::Credential;
use concerto_proto::stats::ServerStats;
use concerto_proto::{
    ordered_total, DirEntry, ErrorKind, FileKind, FsCounts, LayoutRequest, MetaAttr, MetaReply,
    MetaRequest, Role, Tags, MAX_IO, MAX_SEGMENTS,
};

/// An open file: its inode and its layout.
#[derive(Clone, Debug)]
pub struct FileHandle {
    pub path: String,
    pub inode: u64,
    pub layout: StripeLayout,
}

/// What `stat` returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Stat {
    pub inode: u64,
    pub kind: FileKind,
    pub size: u64,
    pub ctime_ns: u64,
    pub mtime_ns: u64,
    /// A file's layout.
    pub layout: Option<StripeLayout>,
    /// A directory's default layout (unit, count) and number of entries.
    pub default_layout: Option<(u64, u32)>,
    pub entries: u64,
    /// A file's object lengths, in layout order: what each server holds.
    pub object_sizes: Vec<u64>,
}

/// What a file's objects say: their lengths (layout order), the file's size and its latest data change.
struct ObjectsState {
    sizes: Vec<u64>,
    size: u64,
    mtime_ns: u64,
}

/// The wire protocol's bounds on one data request.
const LIMITS: RequestLimits = RequestLimits {
    max_bytes: MAX_IO,
    max_extents: MAX_SEGMENTS,
};

fn layout_of(attr: &MetaAttr, path: &str) -> Result<StripeLayout, ClientError> {
    let wire = attr
        .layout
        .as_ref()
        .ok_or_else(|| ClientError::Invalid(format!("{path}: is a directory")))?;
    StripeLayout::new(wire.unit, wire.servers.clone()).map_err(|e| {
        ClientError::Invalid(format!("{path}: bad layout from the metadata server: {e}"))
    })
}

/// A caller's extents must be in order; a list read is also bounded, because
/// its buffer (zeros where nothing was written) is allocated whole.
fn check_extents(extents: &[Extent]) -> Result<u64, ClientError> {
    ordered_total(extents).map_err(|(_, message)| ClientError::Invalid(message))
}

/// Largest buffer one read call fills.
pub const MAX_READ: u64 = 1 << 30;

/// A client of one cluster, acting for one identity. Cloning it, or making
/// it act for someone else ([`FsClient::with_identity`]), shares the cluster
/// file and the connections: a FUSE mount has one client for all its callers.
#[derive(Clone)]
pub struct FsClient {
    shared: Arc<Shared>,
    identity: Identity,
}

struct Shared {
    cluster: ClusterFile,
    /// The key every connection authenticates with.
    credential: Credential,
    /// One lazily opened connection per server (index in the cluster file),
    /// reopened after a failure.
    connections: Vec<Mutex<Option<Arc<ServerConnection>>>>,
}

/// A write planned and copied into its per-server requests, ready to send:
/// what [`FsClient::prepare_write`] returns. The caller's bytes are copied
/// once, here, straight into the requests' payloads.
pub struct PreparedWrite {
    inode: u64,
    tags: Tags,
    requests: Vec<(u32, Vec<Extent>, Bytes)>,
}

impl FsClient {
    /// A client for `cluster` authenticating with `credential`;
    /// connections open on first use. A tenant's credential names its job,
    /// which then is the application every request carries, whatever
    /// `identity` says (the servers accept no other from it).
    pub fn new(cluster: ClusterFile, identity: Identity, credential: Credential) -> FsClient {
        let connections = cluster.servers.iter().map(|_| Mutex::new(None)).collect();
        FsClient {
            shared: Arc::new(Shared {
                cluster,
                credential,
                connections,
            }),
            identity,
        }
        .bound()
    }

    /// The identity with a tenant credential's job as its application.
    fn bound(mut self) -> FsClient {
        if let Some(job) = self.shared.credential.job {
            self.identity.app = job;
        }
        self
    }

    /// The same client (same connections) acting for someone else: how the
    /// FUSE mount tags each caller's requests with the caller's application.
    pub fn with_identity(&self, identity: Identity) -> FsClient {
        FsClient {
            shared: self.shared.clone(),
            identity,
        }
        .bound()
    }

    pub fn cluster(&self) -> &ClusterFile {
        &self.shared.cluster
    }

    pub fn identity(&self) -> Identity {
        self.identity
    }

    async fn connection(&self, id: u32) -> Result<Arc<ServerConnection>, ClientError> {
        let index = self
            .cluster()
            .servers
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| {
                ClientError::Invalid(format!("server id {id} is not in the cluster file"))
            })?;
        let mut slot = self.shared.connections[index].lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let cluster = self.cluster();
        let c = Arc::new(
            ServerConnection::connect(
                cluster.servers[index].address,
                cluster.timeout(),
                &self.shared.credential,
            )
            .await?,
        );
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn meta(&self, op: MetaRequest) -> Result<MetaReply, ClientError> {
        for path in op.paths() {
            concerto_proto::namespace::components(path).map_err(ClientError::Invalid)?;
        }
        // Said here, before sending: the server would treat a bad layout
        // as a malformed frame and close the connection.
        if let MetaRequest::Create { layout, .. } | MetaRequest::SetStripe { layout, .. } = &op {
            concerto_proto::check_layout_request(layout).map_err(ClientError::Invalid)?;
        }
        let id = self.cluster().metadata_server().id;
        self.connection(id)
            .await?
            .meta(self.identity.tags(), op)
            .await
    }

    async fn meta_attr(&self, op: MetaRequest) -> Result<MetaAttr, ClientError> {
        match self.meta(op).await? {
            MetaReply::Attr(a) => Ok(a),
            _ => Err(ClientError::Unexpected {
                server: self.cluster().metadata_server().address,
            }),
        }
    }

    pub async fn mkdir(&self, path: &str) -> Result<(), ClientError> {
        self.meta_attr(MetaRequest::Mkdir { path: path.into() })
            .await
            .map(|_| ())
    }

    pub async fn rmdir(&self, path: &str) -> Result<(), ClientError> {
        self.meta_attr(MetaRequest::Rmdir { path: path.into() })
            .await
            .map(|_| ())
    }

    /// Creates a file (an error if it exists when `exclusive`, else opens it).
    pub async fn create(
        &self,
        path: &str,
        layout: LayoutRequest,
        exclusive: bool,
    ) -> Result<FileHandle, ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Create {
                path: path.into(),
                layout,
                exclusive,
            })
            .await?;
        Ok(FileHandle {
            path: path.into(),
            inode: attr.inode,
            layout: layout_of(&attr, path)?,
        })
    }

    /// Opens an existing file.
    pub async fn open(&self, path: &str) -> Result<FileHandle, ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Lookup { path: path.into() })
            .await?;
        if attr.kind == FileKind::Directory {
            return Err(ClientError::Server {
                server: self.cluster().metadata_server().address,
                kind: ErrorKind::IsADirectory,
                message: format!("{path}: is a directory"),
            });
        }
        Ok(FileHandle {
            path: path.into(),
            inode: attr.inode,
            layout: layout_of(&attr, path)?,
        })
    }

    /// Writes `data` at `offset`.
    pub async fn write(
        &self,
        file: &FileHandle,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        self.write_list(file, &[Extent::new(offset, data.len() as u64)], data)
            .await
    }

    /// Writes `data` over the file `extents` (ascending, disjoint; list I/O).
    pub async fn write_list(
        &self,
        file: &FileHandle,
        extents: &[Extent],
        data: &[u8],
    ) -> Result<(), ClientError> {
        let prepared = self.prepare_write(file, extents, data)?;
        self.send_write(prepared).await
    }

    /// The first half of a write, done where the caller's bytes are still
    /// borrowed (a FUSE callback): plans the per-server requests and copies
    /// the bytes into their payloads, the one copy on the client. The tags
    /// (and so the issue time) are taken now, once for every server.
    pub fn prepare_write(
        &self,
        file: &FileHandle,
        extents: &[Extent],
        data: &[u8],
    ) -> Result<PreparedWrite, ClientError> {
        let total = check_extents(extents)?;
        if total != data.len() as u64 {
            return Err(ClientError::Invalid(format!(
                "{} bytes of data for extents of {total} bytes",
                data.len()
            )));
        }
        let requests = file
            .layout
            .requests(extents, LIMITS)
            .into_iter()
            .map(|r| {
                let mut bytes = BytesMut::with_capacity(r.bytes as usize);
                for p in &r.parts {
                    let at = p.buf_offset as usize;
                    bytes.extend_from_slice(&data[at..at + p.len as usize]);
                }
                (r.server, r.extents, bytes.freeze())
            })
            .collect();
        Ok(PreparedWrite {
            inode: file.inode,
            tags: self.identity.tags(),
            requests,
        })
    }

    /// The second half of a write: sends the prepared requests, to every
    /// server at once, and waits for all of them.
    pub async fn send_write(&self, write: PreparedWrite) -> Result<(), ClientError> {
        let PreparedWrite {
            inode,
            tags,
            requests,
        } = write;
        try_join_all(
            requests
                .into_iter()
                .map(|(server, extents, bytes)| async move {
                    self.connection(server)
                        .await?
                        .write(tags, inode, extents, bytes)
                        .await
                }),
        )
        .await
        .map(|_| ())
    }

    /// Reads up to `len` bytes at `offset`; shorter only at the end of the file.
    pub async fn read(
        &self,
        file: &FileHandle,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, ClientError> {
        // A large request is first cut to the file, so asking for "everything" costs no more than there is.
        let len = if len > MAX_IO {
            len.min(self.objects_state(file).await?.size.saturating_sub(offset))
        } else {
            len
        };
        let (mut buf, complete) = self.read_extents(file, &[Extent::new(offset, len)]).await?;
        if !complete {
            // Some object ended early: a hole or the end of the file. Only the size can tell.
            let size = self.objects_state(file).await?.size;
            buf.truncate(size.saturating_sub(offset).min(len) as usize);
        }
        Ok(buf)
    }

    /// Reads the file `extents` (ascending, disjoint; list I/O), concatenated;
    /// bytes never written (holes, past the end) read as zeros.
    pub async fn read_list(
        &self,
        file: &FileHandle,
        extents: &[Extent],
    ) -> Result<Vec<u8>, ClientError> {
        check_extents(extents)?;
        Ok(self.read_extents(file, extents).await?.0)
    }

    /// The bytes of `extents`, zero where objects end early, and whether every object had all of its part.
    async fn read_extents(
        &self,
        file: &FileHandle,
        extents: &[Extent],
    ) -> Result<(Vec<u8>, bool), ClientError> {
        let total = check_extents(extents)?;
        if total > MAX_READ {
            return Err(ClientError::Invalid(format!("a read of {total} bytes is over the {MAX_READ}-byte limit of one call; read in pieces")));
        }
        let batches = file.layout.requests(extents, LIMITS);
        let tags = self.identity.tags();
        let replies = try_join_all(batches.iter().map(|b| async move {
            self.connection(b.server)
                .await?
                .read(tags, file.inode, b.extents.clone())
                .await
        }))
        .await?;
        let mut buf = vec![0u8; total as usize];
        let mut complete = true;
        for (b, data) in batches.iter().zip(replies) {
            let mut at = 0usize;
            for p in &b.parts {
                let n = (p.len as usize).min(data.len().saturating_sub(at));
                let to = p.buf_offset as usize;
                buf[to..to + n].copy_from_slice(&data[at..at + n]);
                at += n;
                complete &= n == p.len as usize;
            }
        }
        Ok((buf, complete))
    }

    /// Makes everything written to the file durable on every server holding part of it.
    pub async fn fsync(&self, file: &FileHandle) -> Result<(), ClientError> {
        let tags = self.identity.tags();
        try_join_all(
            file.layout
                .servers()
                .iter()
                .map(|&s| async move { self.connection(s).await?.fsync(tags, file.inode).await }),
        )
        .await
        .map(|_| ())
    }

    /// Size (furthest byte any object holds) and latest data modification time.
    /// The size is the furthest byte any object holds.
    async fn objects_state(&self, file: &FileHandle) -> Result<ObjectsState, ClientError> {
        let layout = &file.layout;
        let tags = self.identity.tags();
        let answers = try_join_all(layout.servers().iter().map(|&s| async move {
            self.connection(s)
                .await?
                .object_size(tags, file.inode)
                .await
        }))
        .await?;
        let mut state = ObjectsState {
            sizes: Vec::with_capacity(answers.len()),
            size: 0,
            mtime_ns: 0,
        };
        for (len, mtime) in answers {
            state.mtime_ns = state.mtime_ns.max(mtime);
            state.sizes.push(len);
        }
        state.size = layout.size_from_objects(&state.sizes);
        Ok(state)
    }

    pub async fn stat(&self, path: &str) -> Result<Stat, ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Lookup { path: path.into() })
            .await?;
        let mut stat = Stat {
            inode: attr.inode,
            kind: attr.kind,
            size: 0,
            ctime_ns: attr.ctime_ns,
            mtime_ns: attr.mtime_ns,
            layout: None,
            default_layout: attr.default_layout,
            entries: attr.entries,
            object_sizes: Vec::new(),
        };
        if attr.kind == FileKind::File {
            let file = FileHandle {
                path: path.into(),
                inode: attr.inode,
                layout: layout_of(&attr, path)?,
            };
            let objects = self.objects_state(&file).await?;
            stat.size = objects.size;
            stat.mtime_ns = stat.mtime_ns.max(objects.mtime_ns);
            stat.object_sizes = objects.sizes;
            stat.layout = Some(file.layout);
        }
        Ok(stat)
    }

    /// Every entry of a directory, in name order.
    pub async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        let mut out: Vec<DirEntry> = Vec::new();
        loop {
            let after = out.last().map(|e| e.name.clone());
            match self
                .meta(MetaRequest::Readdir {
                    path: path.into(),
                    after,
                })
                .await?
            {
                MetaReply::Entries { entries, more } => {
                    out.extend(entries);
                    if !more {
                        return Ok(out);
                    }
                }
                _ => {
                    return Err(ClientError::Unexpected {
                        server: self.cluster().metadata_server().address,
                    })
                }
            }
        }
    }

    /// Removes the file's objects once its name is gone.
    async fn remove_objects(&self, attr: &MetaAttr, path: &str) -> Result<(), ClientError> {
        let layout = layout_of(attr, path)?;
        let tags = self.identity.tags();
        try_join_all(
            layout
                .servers()
                .iter()
                .map(|&s| async move { self.connection(s).await?.remove(tags, attr.inode).await }),
        )
        .await
        .map(|_| ())
    }

    pub async fn unlink(&self, path: &str) -> Result<(), ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Unlink { path: path.into() })
            .await?;
        self.remove_objects(&attr, path).await
    }

    /// Renames; a file at `to` is replaced (and its data removed).
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        match self
            .meta(MetaRequest::Rename {
                from: from.into(),
                to: to.into(),
            })
            .await?
        {
            MetaReply::Replaced(Some(old)) if old.kind == FileKind::File => {
                self.remove_objects(&old, to).await
            }
            MetaReply::Replaced(_) => Ok(()),
            _ => Err(ClientError::Unexpected {
                server: self.cluster().metadata_server().address,
            }),
        }
    }

    /// Cuts or extends the file to `size` bytes (extending reads as zeros).
    pub async fn truncate(&self, path: &str, size: u64) -> Result<(), ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Truncate { path: path.into() })
            .await?;
        let layout = layout_of(&attr, path)?;
        let layout = &layout;
        let tags = self.identity.tags();
        try_join_all(
            layout
                .servers()
                .iter()
                .enumerate()
                .map(|(slot, &s)| async move {
                    self.connection(s)
                        .await?
                        .truncate(tags, attr.inode, layout.object_len(slot as u32, size))
                        .await
                }),
        )
        .await
        .map(|_| ())
    }

    /// Sets a directory's default layout for files created in it from now on.
    pub async fn setstripe(
        &self,
        path: &str,
        unit: Option<u64>,
        count: Option<u32>,
    ) -> Result<(), ClientError> {
        self.meta_attr(MetaRequest::SetStripe {
            path: path.into(),
            layout: LayoutRequest { unit, count },
        })
        .await
        .map(|_| ())
    }

    pub async fn statfs(&self) -> Result<FsCounts, ClientError> {
        match self.meta(MetaRequest::Statfs).await? {
            MetaReply::Statfs(c) => Ok(c),
            _ => Err(ClientError::Unexpected {
                server: self.cluster().metadata_server().address,
            }),
        }
    }

    /// Every server's statistics, in cluster-file order.
    pub async fn stats(&self) -> Vec<Result<ServerStats, ClientError>> {
        futures::future::join_all(
            self.cluster()
                .servers
                .iter()
                .map(|s| async move { self.connection(s.id).await?.stats().await }),
        )
        .await
    }

    /// The space of the data servers' file systems, summed: bytes in all
    /// and free. A server that does not answer is left out.
    pub async fn space(&self) -> (u64, u64) {
        let answers = futures::future::join_all(
            self.cluster()
                .servers
                .iter()
                .filter(|s| s.roles.contains(&Role::Data))
                .map(|s| async move { self.connection(s.id).await?.space().await }),
        )
        .await;
        answers
            .into_iter()
            .flatten()
            .fold((0, 0), |(t, f), (st, sf)| (t + st, f + sf))
    }

    /// Every server's policy and roles, in cluster-file order.
    pub async fn ping_all(&self) -> Vec<Result<(String, Vec<Role>), ClientError>> {
        futures::future::join_all(
            self.cluster()
                .servers
                .iter()
                .map(|s| async move { self.connection(s.id).await?.ping().await }),
        )
        .await
    }

    /// Switches every server's policy live; stops at the first refusal.
    /// Returns, per server, how many requests the previous policy still
    /// held (it finishes them before it goes).
    pub async fn set_policy(&self, policy: &str) -> Result<Vec<u64>, ClientError> {
        let mut retiring = Vec::with_capacity(self.cluster().servers.len());
        for s in &self.cluster().servers {
            retiring.push(self.connection(s.id).await?.set_policy(policy).await?);
        }
        Ok(retiring)
    }

    /// Puts the QoS rules `text` (TOML) in force on every server, as
    /// nearly together as a cluster without a coordinator allows: every
    /// server checks them first, and they are applied only when all
    /// accept; a server that refuses or cannot be reached is named and
    /// nothing changes. (One that fails between the check and the apply
    /// is named too; the others then have the new rules.)
    pub async fn set_rules(&self, text: &str) -> Result<(), ClientError> {
        let ids: Vec<u32> = self.cluster().servers.iter().map(|s| s.id).collect();
        for apply in [false, true] {
            let outcomes =
                futures::future::join_all(ids.iter().map(|&id| async move {
                    self.connection(id).await?.set_rules(text, apply).await
                }))
                .await;
            let failed: Vec<String> = outcomes
                .iter()
                .zip(&ids)
                .filter_map(|(o, id)| o.as_ref().err().map(|e| format!("server {id}: {e}")))
                .collect();
            if !failed.is_empty() {
                let stage = if apply {
                    "the rules were checked by every server but not applied on"
                } else {
                    "no server changed its rules;"
                };
                return Err(ClientError::Invalid(format!(
                    "{stage} {}",
                    failed.join("; ")
                )));
            }
        }
        Ok(())
    }

    /// Every server's QoS rules in force (TOML), by server id.
    pub async fn rules(&self) -> Result<Vec<(u32, String)>, ClientError> {
        let mut out = Vec::new();
        for s in &self.cluster().servers {
            out.push((s.id, self.connection(s.id).await?.rules().await?));
        }
        Ok(out)
    }

    /// Tells every data server the others' addresses, for service reports.
    pub async fn introduce_peers(&self) -> Result<(), ClientError> {
        let data: Vec<&ServerEntry> = self
            .cluster()
            .servers
            .iter()
            .filter(|s| s.roles.contains(&Role::Data))
            .collect();
        let addresses: Vec<SocketAddr> = data.iter().map(|s| s.address).collect();
        for s in data {
            self.connection(s.id)
                .await?
                .set_peers(addresses.clone())
                .await?;
        }
        Ok(())
    }
}
