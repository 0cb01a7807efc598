//! The metadata role: the namespace (directories, files, their attributes
//! and layouts) in an embedded ACID store with group commit
//! ([`store`], [`namespace`]), files' sizes ([`sizes`]), and the removal of
//! removed files' objects ([`reaper`]).
//!
//! Every namespace operation is one round trip from the client: a create
//! answers from its own result; an unlink leaves the objects to the
//! reaper; a stat answers the size the service knows, and only when it
//! does not know it asks the file's data servers itself (after the request
//! gave its slot back, so that a server that is both a metadata and a
//! data server never waits on itself).

mod access;
mod error;
mod namespace;
mod reads;
mod reaper;
mod records;
mod sizes;
mod store;

pub use error::MetaError;
pub use namespace::{MetadataConfig, DEFAULT_COMMIT_INTERVAL};
pub use store::RESERVE_BYTES;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::runtime::Handle;
use tokio::sync::watch;

use concerto_core::StripeLayout;
use concerto_proto::auth::Principal;
use concerto_proto::capability;
use concerto_proto::{
    Closed, FileKind, FsCounts, LayoutRequest, Message, MetaAttr, MetaReply, MetaRequest, Tags,
    WireLayout,
};

use crate::members::Members;
use records::Inode;
use sizes::SizeBook;
use store::{Store, Wait};

/// What the metadata store's disk spends per file or directory, roughly
/// (a redb inode record, a directory entry, and the B-trees' share), for
/// the free inodes `statfs` reports: 210-316 bytes per file with 27-byte
/// names, measured (docs/performance.md); 1 KiB bounds 255-byte names and
/// the B-trees' slack.
pub const BYTES_PER_INODE: u64 = 1024;

/// Who sent a metadata request: its connection (which holds files open
/// for writing), its tags, and the identity its key acts as on files.
#[derive(Clone, Debug)]
pub struct Caller {
    pub conn: u64,
    pub tags: Tags,
    pub who: Arc<Principal>,
    /// The key the connection proved: capabilities are bound to it.
    pub key_id: Arc<str>,
}

/// A request's answer: now, or once the file's data servers said how
/// long its objects are (work done after the request's slot is free).
pub enum Outcome {
    Now(Message),
    Later(Box<dyn FnOnce() -> Message + Send>),
}

pub struct MetadataService {
    store: Arc<Store>,
    sizes: Mutex<SizeBook>,
    members: Arc<Members>,
    runtime: Handle,
    /// When this service started (ns since the Unix epoch): what tells
    /// its files' generations apart from a previous run's.
    started_ns: u64,
}

fn reply(service: &MetadataService, result: Result<MetaReply, MetaError>) -> Message {
    match result {
        Ok(reply) => Message::MetaReply {
            reply,
            changes: service.store.changes(),
            durable: service.store.durable(),
        },
        Err(e) => Message::Error {
            kind: e.kind(),
            message: e.to_string(),
        },
    }
}

fn is_busy<T>(r: &Result<T, MetaError>) -> bool {
    matches!(r, Err(MetaError::Busy))
}

/// Two numbers into one, as SplitMix64 finalizes: equal outputs for
/// different inputs are as unlikely as for a random 64-bit value (never
/// 0 in practice: 0 is what replies without a generation carry).
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

fn attr(ino: u64, node: &Inode, size: Option<u64>) -> MetaAttr {
    MetaAttr {
        inode: ino,
        kind: node.kind,
        size,
        ctime_ns: node.ctime_ns,
        mtime_ns: node.mtime_ns,
        layout: node.layout.clone(),
        default_layout: node.default_layout,
        entries: node.entries,
        uid: node.uid,
        gid: node.gid,
        mode: node.mode,
        capability: None,
        change: 0,
        written_elsewhere: false,
    }
}

impl MetadataService {
    /// Opens the store in `dir` and starts its reaper on `runtime`.
    pub fn open(
        dir: &Path,
        cfg: MetadataConfig,
        members: Arc<Members>,
        runtime: Handle,
        stopped: watch::Receiver<bool>,
    ) -> Result<Arc<MetadataService>, MetaError> {
        let store = Store::open(dir, cfg)?;
        runtime.spawn(reaper::run(
            Arc::downgrade(&store),
            members.clone(),
            stopped,
        ));
        Ok(Arc::new(MetadataService {
            store,
            sizes: Mutex::new(SizeBook::default()),
            members,
            runtime,
            started_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        }))
    }

    fn sizes(&self) -> MutexGuard<'_, SizeBook> {
        self.sizes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Commits what is pending (the server is stopping).
    pub fn close(&self) {
        self.store.close();
    }

    /// A connection ended: the files it held open for writing are released.
    pub fn connection_closed(&self, conn: u64) {
        self.sizes().connection_closed(conn);
    }

    /// Whether a file with inode `inode` exists: a data server's question
    /// before it creates an object, answered outside the policy's queue.
    pub fn exists(&self, inode: u64) -> Message {
        reply(
            self,
            self.store
                .read(Wait::Yes, |ops| ops.get(inode))
                .map(|n| MetaReply::Exists(n.is_some())),
        )
    }

    /// Carries out `op` for `caller` at `now_ns` (ns since the Unix epoch),
    /// waiting for the store if a commit holds it.
    pub fn apply(self: &Arc<Self>, op: &MetaRequest, caller: Caller, now_ns: u64) -> Outcome {
        self.apply_with(op, caller, now_ns, Wait::Yes)
            .unwrap_or_else(|_| Outcome::Now(reply(self, Err(MetaError::Busy))))
    }

    /// [`MetadataService::apply`] if the store is free now (the scheduling
    /// loop runs quick operations itself, sparing a hop to a storage
    /// thread); `None` (and nothing done) when a commit holds it or the
    /// operation would flush the disk.
    pub fn apply_if_free(
        self: &Arc<Self>,
        op: &MetaRequest,
        caller: Caller,
        now_ns: u64,
    ) -> Option<Outcome> {
        self.apply_with(op, caller, now_ns, Wait::No).ok()
    }

    /// `Err(Busy)` only before anything was done.
    fn apply_with(
        self: &Arc<Self>,
        op: &MetaRequest,
        caller: Caller,
        now_ns: u64,
        wait: Wait,
    ) -> Result<Outcome, MetaError> {
        let who = &caller.who;
        let at = (now_ns, wait);
        let result = match op {
            MetaRequest::Lookup { path } => {
                let found = self.store.read(wait, |ops| ops.lookup(path, who));
                return self.stat(found, caller.tags);
            }
            MetaRequest::Getattr { inode } => {
                let found = self
                    .store
                    .read(wait, |ops| ops.getattr(*inode, who))
                    .map(|n| (*inode, n));
                return self.stat(found, caller.tags);
            }
            MetaRequest::Open { path, write } => self.open_file(path, *write, &caller, wait),
            MetaRequest::Renew { inode, write } => self.renew(*inode, *write, &caller, wait),
            MetaRequest::Create {
                path,
                layout,
                exclusive,
                mode,
            } => self.create(path, (*layout, *exclusive, *mode), &caller, at),
            MetaRequest::Mkdir { path, mode } => self
                .store
                .change(wait, true, |ops, alloc| {
                    ops.make(path, (None, true, *mode), who, now_ns, alloc)
                })
                .map(|(made, _)| MetaReply::Attr(attr(made.ino, &made.node, Some(0)))),
            MetaRequest::Readdir { path, after, attrs } => self
                .store
                .read(wait, |ops| ops.readdir(path, after.as_deref(), who))
                .map(|(listed, more)| self.entries(listed, more, *attrs)),
            MetaRequest::Unlink { path } => self.remove(path, FileKind::File, who, at),
            MetaRequest::Rmdir { path } => self.remove(path, FileKind::Directory, who, at),
            MetaRequest::Rename { from, to } => self.rename(from, to, who, at),
            MetaRequest::Truncate { path, size } => self.truncate(path, *size, &caller, at),
            MetaRequest::SetStripe { path, layout } => self
                .store
                .change(wait, false, |ops, _| {
                    ops.set_stripe(path, *layout, who, now_ns)
                })
                .map(|((ino, node), _)| MetaReply::Attr(attr(ino, &node, None))),
            MetaRequest::SetAttr {
                path,
                mode,
                uid,
                gid,
            } => self.set_attr(path, (*mode, *uid, *gid), who, at),
            MetaRequest::Access { path, mask } => self
                .store
                .read(wait, |ops| ops.access(path, *mask, who))
                .map(|()| MetaReply::Done),
            MetaRequest::Statfs => self.statfs(wait),
            MetaRequest::Close { files } => self.close_files(files, caller.conn, at),
            MetaRequest::Sync => self.store.sync(wait).map(|_| MetaReply::Done),
            MetaRequest::Exists { inode } => self
                .store
                .read(wait, |ops| ops.get(*inode))
                .map(|n| MetaReply::Exists(n.is_some())),
        };
        if is_busy(&result) {
            return Err(MetaError::Busy);
        }
        Ok(Outcome::Now(reply(self, result)))
    }

    /// A lookup's or getattr's answer, with the file's size.
    fn stat(
        self: &Arc<Self>,
        found: Result<(u64, Inode), MetaError>,
        tags: Tags,
    ) -> Result<Outcome, MetaError> {
        if is_busy(&found) {
            return Err(MetaError::Busy);
        }
        Ok(self.with_size(found, tags))
    }

    /// Opens an existing file; for writing, the caller's connection holds
    /// it open for writing until it closes it.
    fn open_file(
        &self,
        path: &str,
        write: bool,
        caller: &Caller,
        wait: Wait,
    ) -> Result<MetaReply, MetaError> {
        let (ino, node) = self
            .store
            .read(wait, |ops| ops.open(path, write, &caller.who))?;
        let mut sizes = self.sizes();
        let size = sizes.size(ino).ok();
        if write && node.kind == FileKind::File {
            sizes
                .opened_for_write(ino, caller.conn)
                .map_err(MetaError::Invalid)?;
        }
        let a = self.with_change(attr(ino, &node, size), &sizes, caller.conn);
        drop(sizes);
        Ok(MetaReply::Attr(
            self.with_capability(a, &node, caller, write),
        ))
    }

    /// A fresh capability for a file the caller has open.
    fn renew(
        &self,
        inode: u64,
        write: bool,
        caller: &Caller,
        wait: Wait,
    ) -> Result<MetaReply, MetaError> {
        let node = self
            .store
            .read(wait, |ops| ops.renew(inode, write, &caller.who))?;
        let size = self.sizes().size(inode).ok();
        let a = attr(inode, &node, size);
        Ok(MetaReply::Attr(
            self.with_capability(a, &node, caller, write),
        ))
    }

    /// Creates a file (or opens it for writing, unless `exclusive`).
    fn create(
        &self,
        path: &str,
        (layout, exclusive, mode): (LayoutRequest, bool, u32),
        caller: &Caller,
        (now_ns, wait): (u64, Wait),
    ) -> Result<MetaReply, MetaError> {
        let (made, _) = self.store.change(wait, true, |ops, alloc| {
            ops.make(
                path,
                (Some(layout), exclusive, mode),
                &caller.who,
                now_ns,
                alloc,
            )
        })?;
        let mut sizes = self.sizes();
        let size = if made.created {
            sizes
                .created(made.ino, caller.conn)
                .map_err(MetaError::Invalid)?;
            Some(0)
        } else {
            let known = sizes.size(made.ino).ok();
            sizes
                .opened_for_write(made.ino, caller.conn)
                .map_err(MetaError::Invalid)?;
            known
        };
        let a = self.with_change(attr(made.ino, &made.node, size), &sizes, caller.conn);
        drop(sizes);
        Ok(MetaReply::Attr(
            self.with_capability(a, &made.node, caller, true),
        ))
    }

    /// Unlinks a file (its objects left to the reaper) or removes an empty
    /// directory.
    fn remove(
        &self,
        path: &str,
        kind: FileKind,
        who: &Principal,
        (now_ns, wait): (u64, Wait),
    ) -> Result<MetaReply, MetaError> {
        let ((ino, node), _) = self
            .store
            .change(wait, false, |ops, _| ops.remove(path, kind, who, now_ns))?;
        if kind == FileKind::File {
            self.forget_file(ino);
        }
        Ok(MetaReply::Attr(attr(ino, &node, None)))
    }

    /// A file whose last name went: its size is no longer tracked and the
    /// reaper has objects to remove.
    fn forget_file(&self, ino: u64) {
        self.sizes().forget(ino);
        self.store.made_orphans();
    }

    fn rename(
        &self,
        from: &str,
        to: &str,
        who: &Principal,
        (now_ns, wait): (u64, Wait),
    ) -> Result<MetaReply, MetaError> {
        let (replaced, _) = self
            .store
            .change(wait, false, |ops, _| ops.rename(from, to, who, now_ns))?;
        Ok(MetaReply::Replaced(replaced.map(|(ino, node)| {
            if node.kind == FileKind::File {
                self.forget_file(ino);
            }
            attr(ino, &node, None)
        })))
    }

    fn truncate(
        &self,
        path: &str,
        size: u64,
        caller: &Caller,
        (now_ns, wait): (u64, Wait),
    ) -> Result<MetaReply, MetaError> {
        let ((ino, node), _) = self.store.change(wait, false, |ops, _| {
            ops.truncate(path, size, &caller.who, now_ns)
        })?;
        self.sizes().truncated(ino, caller.conn, size);
        let a = attr(ino, &node, Some(size));
        Ok(MetaReply::Attr(
            self.with_capability(a, &node, caller, true),
        ))
    }

    fn set_attr(
        &self,
        path: &str,
        owner_and_mode: (Option<u32>, Option<u32>, Option<u32>),
        who: &Principal,
        (now_ns, wait): (u64, Wait),
    ) -> Result<MetaReply, MetaError> {
        let ((ino, node), _) = self.store.change(wait, false, |ops, _| {
            ops.set_attr(path, owner_and_mode, who, now_ns)
        })?;
        let size = self.sizes().size(ino).ok();
        Ok(MetaReply::Attr(attr(ino, &node, size)))
    }

    fn statfs(&self, wait: Wait) -> Result<MetaReply, MetaError> {
        let (files, directories, default_layout) = self.store.read(wait, |ops| ops.counts())?;
        Ok(MetaReply::Statfs(FsCounts {
            files,
            directories,
            inodes_free: self.store.free_bytes() / BYTES_PER_INODE,
            data_servers: self.store.config().data_servers.clone(),
            default_layout,
        }))
    }

    /// A page of a listing as answered: the entries, and their attributes
    /// when asked, with the sizes this service knows (one it would have to
    /// ask the data servers for is left out: the client asks for it when
    /// it needs it).
    fn entries(&self, listed: Vec<reads::Listed>, more: bool, attrs: bool) -> MetaReply {
        let sizes = self.sizes();
        let attrs = match attrs {
            false => Vec::new(),
            true => listed
                .iter()
                .map(|(e, node)| {
                    node.as_ref().map(|n| {
                        let size = match n.kind {
                            FileKind::Directory => Some(0),
                            FileKind::File => sizes.size(e.inode).ok(),
                        };
                        attr(e.inode, n, size)
                    })
                })
                .collect(),
        };
        drop(sizes);
        MetaReply::Entries {
            entries: listed.into_iter().map(|(e, _)| e).collect(),
            more,
            attrs,
        }
    }

    /// `a` with what a client checks its cache of the file against: the
    /// file's generation as the caller's connection sees it (the latest
    /// change not its own), mixed with this service's start, so a restart,
    /// which starts generations afresh, gives none of the values before
    /// it; and whether another connection writes it.
    fn with_change(&self, mut a: MetaAttr, sizes: &SizeBook, conn: u64) -> MetaAttr {
        a.change = mix(self.started_ns, sizes.change_seen_by(a.inode, conn));
        a.written_elsewhere = sizes.written_elsewhere(a.inode, conn);
        a
    }

    /// A connection closed files: those it wrote get a modification time of
    /// now, and their sizes what it wrote. A file it does not hold open for
    /// writing is left as it is: a close names inode numbers, which anyone
    /// can guess, and must not touch another's file.
    fn close_files(
        &self,
        files: &[Closed],
        conn: u64,
        (now_ns, wait): (u64, Wait),
    ) -> Result<MetaReply, MetaError> {
        let wrote: Vec<u64> = {
            let sizes = self.sizes();
            files
                .iter()
                .filter(|c| c.written_end > 0 && sizes.holds(c.inode, conn))
                .map(|c| c.inode)
                .collect()
        };
        let touched = if wrote.is_empty() {
            Ok(())
        } else {
            self.store
                .change(wait, false, |ops, _| {
                    wrote.iter().try_for_each(|&ino| ops.touch(ino, now_ns))
                })
                .map(|_| ())
        };
        // Busy: nothing done, the request waits for the store.
        if is_busy(&touched) {
            return Err(MetaError::Busy);
        }
        let mut sizes = self.sizes();
        for c in files {
            sizes.closed(c.inode, conn, c.written_end);
        }
        touched.map(|()| MetaReply::Done)
    }

    /// `a` with a capability for the caller's key to the file's objects:
    /// writing when it opened for writing (the service checked the mode),
    /// reading when the mode lets it read. None for a directory, or where
    /// the ring has no peer key to make capabilities with.
    fn with_capability(
        &self,
        mut a: MetaAttr,
        node: &Inode,
        caller: &Caller,
        write: bool,
    ) -> MetaAttr {
        if node.kind != FileKind::File {
            return a;
        }
        let Some(key) = self.members.capability_key() else {
            return a;
        };
        let mut rights = 0;
        if write {
            rights |= capability::WRITE;
        }
        if access::allows(&caller.who, node, access::READ) {
            rights |= capability::READ;
        }
        a.capability = Some(key.issue(
            &caller.key_id,
            a.inode,
            rights,
            caller.who.uid,
            capability::now_s(),
        ));
        a
    }

    /// A lookup's answer with the file's size: known, or asked of its data
    /// servers once the request's slot is free.
    fn with_size(self: &Arc<Self>, found: Result<(u64, Inode), MetaError>, tags: Tags) -> Outcome {
        let (ino, node) = match found {
            Ok(f) => f,
            Err(e) => return Outcome::Now(reply(self, Err(e))),
        };
        let Some(layout) = node.layout.clone().filter(|_| node.kind == FileKind::File) else {
            return Outcome::Now(reply(self, Ok(MetaReply::Attr(attr(ino, &node, Some(0))))));
        };
        let generation = match self.sizes().size(ino) {
            Ok(size) => {
                return Outcome::Now(reply(
                    self,
                    Ok(MetaReply::Attr(attr(ino, &node, Some(size)))),
                ))
            }
            Err(generation) => generation,
        };
        let service = self.clone();
        Outcome::Later(Box::new(move || {
            let glimpsed = service.glimpse(ino, &layout, tags);
            let result = glimpsed.map(|(size, mtime_ns)| {
                service.sizes().glimpsed(ino, generation, size);
                let mut a = attr(ino, &node, Some(size));
                a.mtime_ns = a.mtime_ns.max(mtime_ns);
                MetaReply::Attr(a)
            });
            reply(&service, result)
        }))
    }

    /// Asks the file's data servers how long its objects are and when they
    /// were last written: the file's size and latest data change (on a
    /// storage thread: it blocks until they answer).
    fn glimpse(&self, ino: u64, layout: &WireLayout, tags: Tags) -> Result<(u64, u64), MetaError> {
        let unavailable = |why: String| {
            MetaError::Unavailable(format!("inode {ino:#x}: cannot learn its size: {why}"))
        };
        let map = self.members.map().ok_or_else(|| {
            unavailable("the metadata server has not been told the cluster's servers".into())
        })?;
        let stripes = StripeLayout::new(layout.unit, layout.servers.clone())
            .map_err(|e| unavailable(e.to_string()))?;
        let lengths =
            self.runtime
                .block_on(futures::future::try_join_all(layout.servers.iter().map(
                    |&s| {
                        let pool = &map.pool;
                        async move { pool.get(s).await?.object_size(tags, ino).await }
                    },
                )));
        let objects = lengths.map_err(|e| unavailable(e.to_string()))?;
        let lengths: Vec<u64> = objects.iter().map(|&(len, _)| len).collect();
        let mtime_ns = objects.iter().map(|&(_, t)| t).max().unwrap_or(0);
        Ok((stripes.size_from_objects(&lengths), mtime_ns))
    }
}
