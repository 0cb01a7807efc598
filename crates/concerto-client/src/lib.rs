//! The client library: a file system over a cluster file.
//!
//! Namespace operations are one request to the metadata server, which
//! also knows (or finds out) files' sizes; data is split by the file's
//! layout (concerto-core's striping arithmetic) into one request per
//! server — list I/O when the access is not contiguous on that server —
//! and sent to all of them at once ([`data`]), or in blocks in the order
//! of Clusterfile's heuristics ([`transfers`]). What a client remembers of
//! the files it has open — which servers hold data it has not made
//! durable yet, how far it wrote — is in [`open_files`].
//!
//! This crate links the wire protocol and the client only — no server,
//! database or FUSE code — so the Python module and MPI-IO programs that
//! use it stay small.

mod capabilities;
mod closer;
mod data;
pub mod identity;
mod open_files;
mod pending;
mod phase;
pub mod probe;
mod readahead;
pub mod transfers;
mod write_behind;

pub use concerto_proto as proto;
pub use concerto_proto::cluster::{ClusterFile, ServerEntry, MOUNT_SOURCE};
pub use concerto_proto::connection::{ClientError, ServerConnection};
pub use data::{PreparedWrite, MAX_READ};
pub use identity::{credential_for, load_cluster, Identity, CREDENTIAL_VAR};
pub use phase::IoPhase;
pub use transfers::{Ordering, TransferOrder};

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::try_join_all;

use concerto_core::{RequestLimits, StripeLayout};

use concerto_proto::auth::{Credential, Principal};
use concerto_proto::connection::{ServerPool, Space};
use concerto_proto::stats::{Arrival, ServerStats};
use concerto_proto::{
    DirEntry, ErrorKind, FileKind, FsCounts, LayoutRequest, MetaAttr, MetaReply, MetaRequest, Role,
    MAX_IO, MAX_SEGMENTS,
};

use open_files::OpenFiles;

/// An open file: its inode and its layout, and whether it was opened for
/// writing (the metadata service then counts it as written, see
/// [`FsClient::close`]).
#[derive(Clone, Debug)]
pub struct FileHandle {
    pub path: String,
    pub inode: u64,
    pub layout: StripeLayout,
    pub writable: bool,
    /// The file's generation when it was opened: it differs from any
    /// earlier one once the file's data may have changed (what a cache of
    /// the file is checked against; see `MetaAttr::change`).
    pub change: u64,
    /// Whether another client held the file open for writing when it was
    /// opened (its data may be changing: nothing of it may be cached).
    pub written_elsewhere: bool,
    /// Which open this is (shared by its clones): the writer whose
    /// adjacent writes are coalesced.
    handle: u64,
    /// This handle's read-ahead (shared by its clones).
    readahead: Arc<readahead::ReadAhead>,
    /// Its right to the file's objects (shared by its clones).
    capability: capabilities::Held,
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
    /// The owner, the group and the permission bits (`st_mode & 07777`).
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// The mode [`FsClient::create`] gives a file: what `open(2)`'s 0666
/// gives under the usual umask 022.
pub const DEFAULT_FILE_MODE: u32 = 0o644;
/// The mode [`FsClient::mkdir`] gives a directory (0777 under umask 022).
pub const DEFAULT_DIR_MODE: u32 = 0o755;

impl Stat {
    fn of(attr: &MetaAttr, path: &str) -> Result<Stat, ClientError> {
        Ok(Stat {
            inode: attr.inode,
            kind: attr.kind,
            size: attr.size.unwrap_or(0),
            ctime_ns: attr.ctime_ns,
            mtime_ns: attr.mtime_ns,
            layout: match attr.kind {
                FileKind::File => Some(layout_of(attr, path)?),
                FileKind::Directory => None,
            },
            default_layout: attr.default_layout,
            entries: attr.entries,
            uid: attr.uid,
            gid: attr.gid,
            mode: attr.mode,
        })
    }
}

/// The space the data servers' file systems have, each counted once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskSpace {
    pub total: u64,
    pub free: u64,
    pub available: u64,
}

/// The wire protocol's bounds on one data request.
const LIMITS: RequestLimits = RequestLimits {
    max_bytes: MAX_IO,
    max_extents: MAX_SEGMENTS,
};

/// A number no other open of this process has.
fn next_handle() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn layout_of(attr: &MetaAttr, path: &str) -> Result<StripeLayout, ClientError> {
    let wire = attr
        .layout
        .as_ref()
        .ok_or_else(|| ClientError::Invalid(format!("{path}: is a directory")))?;
    StripeLayout::new(wire.unit, wire.servers.clone()).map_err(|e| {
        ClientError::Invalid(format!("{path}: bad layout from the metadata server: {e}"))
    })
}

/// A client of one cluster, acting for one identity. Cloning it, or making
/// it act for someone else ([`FsClient::with_identity`]), shares the cluster
/// file, the connections and what it knows of its open files: a FUSE mount
/// has one client for all its callers.
#[derive(Clone)]
pub struct FsClient {
    shared: Arc<Shared>,
    identity: Identity,
    /// The user namespace operations are done as, when a node key's mount
    /// acts for one ([`FsClient::as_user`]); a key of any other kind is its
    /// own user and names none.
    user: Option<Arc<Principal>>,
}

struct Shared {
    cluster: ClusterFile,
    /// The key every connection authenticates with.
    credential: Credential,
    /// One connection per server, opened on first use, reopened after a failure.
    pool: ServerPool,
    files: OpenFiles,
    closer: closer::Closer,
    /// Writes answered and still on their way ([`FsClient::write_behind`]).
    pending: pending::Pending,
    /// Writes answered and not sent yet: held to be coalesced.
    held: write_behind::Held,
    /// Bounds what the client's handles hold read ahead.
    readahead_budget: Arc<tokio::sync::Semaphore>,
    /// How large accesses are sent ([`transfers`]); None: all at once.
    transfer_order: Option<TransferOrder>,
    /// Whether the coordinator answers, and its lease ([`FsClient::begin_phase`]).
    coordinator: phase::CoordinatorWatch,
}

/// Most attribute requests [`FsClient::readdir_stat`] has in flight at once.
pub const STATS_AT_ONCE: usize = 16;

/// What a client may have written behind at once, by default.
pub const DEFAULT_WRITE_BEHIND: u64 = 16 << 20;

impl FsClient {
    /// A client for `cluster` authenticating with `credential`;
    /// connections open on first use. A tenant's credential names its job,
    /// which then is the application every request carries, whatever
    /// `identity` says (the servers accept no other from it).
    pub fn new(cluster: ClusterFile, identity: Identity, credential: Credential) -> FsClient {
        let pool = ServerPool::new(
            cluster.servers.iter().map(|s| (s.id, s.address)).collect(),
            cluster.timeout(),
            credential.clone(),
            cluster.cluster.integrity,
        );
        FsClient {
            shared: Arc::new(Shared {
                cluster,
                credential,
                pool,
                files: OpenFiles::default(),
                closer: closer::Closer::default(),
                pending: pending::Pending::new(DEFAULT_WRITE_BEHIND),
                held: write_behind::Held::default(),
                readahead_budget: readahead::budget(),
                transfer_order: None,
                coordinator: phase::CoordinatorWatch::default(),
            }),
            identity,
            user: None,
        }
        .bound()
    }

    /// The same client with `bytes` as the bound on what it may have
    /// written behind at once (see [`FsClient::write_behind`]); call it on
    /// a new client, before any write.
    pub fn with_write_behind(mut self, bytes: u64) -> FsClient {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.pending = pending::Pending::new(bytes);
            shared.held = write_behind::Held::bounded(bytes);
        }
        self
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
            user: self.user.clone(),
        }
        .bound()
    }

    /// The same client (same connections) doing namespace operations as
    /// `user`: how a mount with a node key serves each of its node's users
    /// (the servers take it from a node key only, within the key's users).
    pub fn as_user(&self, user: Principal) -> FsClient {
        FsClient {
            user: Some(Arc::new(user)),
            ..self.clone()
        }
    }

    /// What the metadata server says this client's key grants (a node
    /// key's mount acts for its callers' users; others do not).
    pub async fn grant(&self) -> Result<concerto_proto::auth::Grant, ClientError> {
        let id = self.cluster().metadata_server().id;
        Ok(self.connection(id).await?.grant())
    }

    pub fn cluster(&self) -> &ClusterFile {
        &self.shared.cluster
    }

    pub fn identity(&self) -> Identity {
        self.identity
    }

    async fn connection(&self, id: u32) -> Result<Arc<ServerConnection>, ClientError> {
        self.shared.pool.get(id).await
    }

    fn unexpected<T>(&self) -> Result<T, ClientError> {
        Err(ClientError::Unexpected {
            server: self.cluster().metadata_server().address,
        })
    }

    /// One metadata request; the reply's change counts are noted (an
    /// `fsync` after changes that are not durable yet asks for them).
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
        let (reply, changes) = self
            .connection(id)
            .await?
            .meta_counted(self.identity.tags(), op, self.user.as_deref().cloned())
            .await?;
        self.shared.files.saw(changes);
        Ok(reply)
    }

    async fn meta_attr(&self, op: MetaRequest) -> Result<MetaAttr, ClientError> {
        match self.meta(op).await? {
            MetaReply::Attr(a) => Ok(a),
            _ => self.unexpected(),
        }
    }

    /// Makes every namespace change this client saw durable, unless it
    /// knows they are.
    async fn sync_namespace(&self) -> Result<(), ClientError> {
        if self.shared.files.changes_durable() {
            return Ok(());
        }
        match self.meta(MetaRequest::Sync).await? {
            MetaReply::Done => Ok(()),
            _ => self.unexpected(),
        }
    }

    /// Makes a directory of mode [`DEFAULT_DIR_MODE`].
    pub async fn mkdir(&self, path: &str) -> Result<(), ClientError> {
        self.mkdir_mode(path, DEFAULT_DIR_MODE).await.map(|_| ())
    }

    /// Makes a directory with permission bits `mode` (the caller's umask
    /// already applied): its attributes.
    pub async fn mkdir_mode(&self, path: &str, mode: u32) -> Result<Stat, ClientError> {
        concerto_proto::check_mode_bits(mode).map_err(ClientError::Invalid)?;
        let attr = self
            .meta_attr(MetaRequest::Mkdir {
                path: path.into(),
                mode,
            })
            .await?;
        Stat::of(&attr, path)
    }

    /// chmod (`mode`), chown (`uid`: the admin key only) and chgrp (`gid`:
    /// the owner, to a group its key names); the new attributes.
    pub async fn set_attr(
        &self,
        path: &str,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> Result<Stat, ClientError> {
        if let Some(mode) = mode {
            concerto_proto::check_mode_bits(mode).map_err(ClientError::Invalid)?;
        }
        let attr = self
            .meta_attr(MetaRequest::SetAttr {
                path: path.into(),
                mode,
                uid,
                gid,
            })
            .await?;
        Stat::of(&attr, path)
    }

    /// access(2): `Ok` when the key's user may read (4), write (2) and/or
    /// search (1) `path` as `mask` says; a `Denied` error naming why not.
    pub async fn access(&self, path: &str, mask: u32) -> Result<(), ClientError> {
        if mask > 7 {
            return Err(ClientError::Invalid(format!(
                "access mask {mask}: must combine read (4), write (2) and search (1)"
            )));
        }
        match self
            .meta(MetaRequest::Access {
                path: path.into(),
                mask,
            })
            .await?
        {
            MetaReply::Done => Ok(()),
            _ => self.unexpected(),
        }
    }

    pub async fn rmdir(&self, path: &str) -> Result<(), ClientError> {
        self.meta_attr(MetaRequest::Rmdir { path: path.into() })
            .await
            .map(|_| ())
    }

    fn handle(
        &self,
        attr: &MetaAttr,
        path: &str,
        writable: bool,
    ) -> Result<FileHandle, ClientError> {
        if attr.kind == FileKind::Directory {
            return Err(ClientError::Server {
                server: self.cluster().metadata_server().address,
                kind: ErrorKind::IsADirectory,
                message: format!("{path}: is a directory"),
            });
        }
        let handle = FileHandle {
            path: path.into(),
            inode: attr.inode,
            layout: layout_of(attr, path)?,
            writable,
            change: attr.change,
            written_elsewhere: attr.written_elsewhere,
            handle: next_handle(),
            readahead: Arc::default(),
            capability: capabilities::Held::new(attr.capability),
        };
        if writable {
            self.shared.files.opened_for_write(attr.inode);
        }
        Ok(handle)
    }

    /// Creates a file of mode [`DEFAULT_FILE_MODE`] (an error if it exists
    /// when `exclusive`, else opens it) and opens it for writing; one
    /// request. Close it with [`FsClient::close`].
    pub async fn create(
        &self,
        path: &str,
        layout: LayoutRequest,
        exclusive: bool,
    ) -> Result<FileHandle, ClientError> {
        self.create_stat(path, layout, exclusive, DEFAULT_FILE_MODE)
            .await
            .map(|(f, _)| f)
    }

    /// [`FsClient::create`] with permission bits `mode` (the caller's
    /// umask applied), and the file's attributes as the service answered
    /// them (a FUSE create replies with both).
    pub async fn create_stat(
        &self,
        path: &str,
        layout: LayoutRequest,
        exclusive: bool,
        mode: u32,
    ) -> Result<(FileHandle, Stat), ClientError> {
        concerto_proto::check_mode_bits(mode).map_err(ClientError::Invalid)?;
        let attr = self
            .meta_attr(MetaRequest::Create {
                path: path.into(),
                layout,
                exclusive,
                mode,
            })
            .await?;
        Ok((self.handle(&attr, path, true)?, Stat::of(&attr, path)?))
    }

    /// Opens an existing file, for writing too when `write` (then close it
    /// with [`FsClient::close`]); one request.
    pub async fn open(&self, path: &str, write: bool) -> Result<FileHandle, ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Open {
                path: path.into(),
                write,
            })
            .await?;
        self.handle(&attr, path, write)
    }

    /// Closes a handle: what it wrote is made durable (only on the servers
    /// it wrote to), and a handle opened for writing tells the metadata
    /// service how far this client wrote (which then knows the file's size
    /// without asking the data servers), with other closes of the next
    /// milliseconds, in the background.
    pub async fn close(&self, file: &FileHandle) -> Result<(), ClientError> {
        self.flush(file).await?;
        self.release(file);
        Ok(())
    }

    /// Returns once the metadata service answered every close this client
    /// queued before the call (see [`FsClient::release`]): from then on
    /// it knows the sizes those closes told.
    pub async fn closes_told(&self) {
        self.shared.closer.told().await;
    }

    /// The second half of [`FsClient::close`]: a handle opened for writing
    /// is let go at the metadata service, in the background (FUSE's
    /// release; its flush is [`FsClient::flush`]).
    pub fn release(&self, file: &FileHandle) {
        if !file.writable {
            return;
        }
        let written_end = self.shared.files.closed_for_write(file.inode);
        self.shared.closer.queue(
            Arc::downgrade(&self.shared),
            self.identity,
            concerto_proto::Closed {
                inode: file.inode,
                written_end,
            },
        );
    }

    /// A file's or directory's attributes: one request to the metadata
    /// server, which knows the size (or asks the data servers itself).
    pub async fn stat(&self, path: &str) -> Result<Stat, ClientError> {
        let attr = self
            .meta_attr(MetaRequest::Lookup { path: path.into() })
            .await?;
        Stat::of(&attr, path)
    }

    /// The attributes of the file an open handle refers to; `Stale` once
    /// it was removed (by anyone).
    pub async fn fstat(&self, file: &FileHandle) -> Result<Stat, ClientError> {
        self.getattr(file.inode, &file.path).await
    }

    /// The attributes of the file or directory with inode `inode` (known
    /// as `path`, for messages); `Stale` once it was removed.
    pub async fn getattr(&self, inode: u64, path: &str) -> Result<Stat, ClientError> {
        // What this client wrote behind counts.
        self.settle(inode, None).await?;
        let attr = self
            .meta_attr(MetaRequest::Getattr { inode })
            .await
            .map_err(|e| stale_if_gone(e, path))?;
        Stat::of(&attr, path)
    }

    /// Every entry of a directory, in name order.
    pub async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        Ok(self
            .list(path, false)
            .await?
            .into_iter()
            .map(|(e, _)| e)
            .collect())
    }

    /// The directory's entries with their attributes (what `ls -l` shows):
    /// one request per [`concerto_proto::MAX_ENTRIES`] entries, and one
    /// more for each file whose size the metadata service does not know
    /// without asking the data servers (at most [`STATS_AT_ONCE`] at
    /// once). An entry removed meanwhile is left out.
    pub async fn readdir_stat(&self, path: &str) -> Result<Vec<(DirEntry, Stat)>, ClientError> {
        let listed = self.list(path, true).await?;
        let dir = path.trim_end_matches('/');
        use futures::StreamExt;
        let stats = futures::stream::iter(listed.into_iter().map(|(entry, attr)| async move {
            let full = format!("{dir}/{}", entry.name);
            let known = attr.filter(|a| a.size.is_some() || a.kind == FileKind::Directory);
            let stat = match known {
                Some(a) => Stat::of(&a, &full),
                None => self.getattr(entry.inode, &full).await,
            };
            match stat {
                Ok(s) => Ok(Some((entry, s))),
                Err(e)
                    if e.kind() == Some(ErrorKind::Stale)
                        || e.kind() == Some(ErrorKind::NotFound) =>
                {
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        }))
        .buffered(STATS_AT_ONCE)
        .collect::<Vec<_>>()
        .await;
        stats.into_iter().filter_map(Result::transpose).collect()
    }

    /// Every page of the directory's listing, with attributes when asked.
    async fn list(
        &self,
        path: &str,
        attrs: bool,
    ) -> Result<Vec<(DirEntry, Option<MetaAttr>)>, ClientError> {
        let mut out: Vec<(DirEntry, Option<MetaAttr>)> = Vec::new();
        loop {
            let after = out.last().map(|e| e.0.name.clone());
            match self
                .meta(MetaRequest::Readdir {
                    path: path.into(),
                    after,
                    attrs,
                })
                .await?
            {
                MetaReply::Entries {
                    entries,
                    more,
                    attrs: got,
                } => {
                    let mut got = got.into_iter();
                    out.extend(entries.into_iter().map(|e| (e, got.next().flatten())));
                    if !more {
                        return Ok(out);
                    }
                }
                _ => return self.unexpected(),
            }
        }
    }

    /// Removes a file: one request; the metadata service removes its
    /// objects from the data servers afterwards.
    pub async fn unlink(&self, path: &str) -> Result<(), ClientError> {
        self.meta_attr(MetaRequest::Unlink { path: path.into() })
            .await
            .map(|_| ())
    }

    /// Renames; a file at `to` is replaced (and its data removed by the
    /// metadata service).
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        match self
            .meta(MetaRequest::Rename {
                from: from.into(),
                to: to.into(),
            })
            .await?
        {
            MetaReply::Replaced(_) => Ok(()),
            _ => self.unexpected(),
        }
    }

    /// Cuts or extends the file to `size` bytes (extending reads as zeros).
    pub async fn truncate(&self, path: &str, size: u64) -> Result<(), ClientError> {
        // This client's closes before the cut reach the service before it
        // (the written ends they carry are of bytes the cut may remove).
        self.closes_told().await;
        let attr = self
            .meta_attr(MetaRequest::Truncate {
                path: path.into(),
                size,
            })
            .await?;
        // Writes still on their way land before the cut, not after it.
        self.settle(attr.inode, None).await?;
        self.shared.files.truncated(attr.inode, size);
        let layout = layout_of(&attr, path)?;
        let layout = &layout;
        let tags = self.identity.tags();
        let object = concerto_proto::connection::Object {
            id: attr.inode,
            cap: attr.capability,
        };
        try_join_all(
            layout
                .servers()
                .iter()
                .enumerate()
                .map(|(slot, &s)| async move {
                    self.connection(s)
                        .await?
                        .truncate(tags, object, layout.object_len(slot as u32, size))
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
            _ => self.unexpected(),
        }
    }

    /// Every server's arrival log after request `after`, in cluster-file
    /// order (an administrator's view: every tenant's requests are in it).
    pub async fn arrivals(&self, after: u64) -> Vec<Result<Vec<Arrival>, ClientError>> {
        futures::future::join_all(
            self.cluster()
                .servers
                .iter()
                .map(|s| async move { self.connection(s.id).await?.arrivals(after).await }),
        )
        .await
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

    /// The space of the data servers' file systems: each file system once,
    /// however many servers share it. An error names a server that does
    /// not answer.
    pub async fn space(&self) -> Result<DiskSpace, ClientError> {
        let answers: Vec<Space> = try_join_all(
            self.cluster()
                .servers
                .iter()
                .filter(|s| s.roles.contains(&Role::Data))
                .map(|s| async move { self.connection(s.id).await?.space().await }),
        )
        .await?;
        let disks: HashMap<u64, Space> = answers.into_iter().map(|s| (s.disk, s)).collect();
        Ok(disks
            .values()
            .fold(DiskSpace::default(), |sum, s| DiskSpace {
                total: sum.total + s.total,
                free: sum.free + s.free,
                available: sum.available + s.available,
            }))
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

    /// Tells every server the cluster map (every server's id, address and
    /// roles): the metadata server learns its data servers, a data server
    /// its metadata server and its peers.
    pub async fn introduce_cluster(&self) -> Result<(), ClientError> {
        let map = self.cluster().members();
        for s in &self.cluster().servers {
            self.connection(s.id)
                .await?
                .set_cluster(map.clone())
                .await?;
        }
        Ok(())
    }
}

/// A file that is gone (its inode unknown to the metadata service) seen
/// through a handle: the handle is stale.
fn stale_if_gone(e: ClientError, path: &str) -> ClientError {
    match e {
        ClientError::Server {
            server,
            kind: ErrorKind::NotFound,
            ..
        } => ClientError::Server {
            server,
            kind: ErrorKind::Stale,
            message: format!("{path}: the file has been removed (stale file handle)"),
        },
        other => other,
    }
}
