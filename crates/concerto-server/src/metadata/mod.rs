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
mod namespace;
mod reaper;
mod sizes;
mod store;

pub use namespace::{MetaError, MetadataConfig, DEFAULT_COMMIT_INTERVAL};
pub use store::RESERVE_BYTES;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::runtime::Handle;
use tokio::sync::watch;

use concerto_core::StripeLayout;
use concerto_proto::auth::Principal;
use concerto_proto::capability;
use concerto_proto::{
    FileKind, FsCounts, Message, MetaAttr, MetaReply, MetaRequest, Tags, WireLayout,
};

use crate::members::Members;
use namespace::Inode;
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
        let conn = caller.conn;
        let who = &caller.who;
        let result = match op {
            MetaRequest::Lookup { path } => {
                let found = self.store.read(wait, |ops| ops.lookup(path, who));
                if is_busy(&found) {
                    return Err(MetaError::Busy);
                }
                return Ok(self.with_size(found, caller.tags));
            }
            MetaRequest::Getattr { inode } => {
                let found = self.store.read(wait, |ops| ops.get(*inode));
                if is_busy(&found) {
                    return Err(MetaError::Busy);
                }
                let found = found.and_then(|n| {
                    n.map(|n| (*inode, n))
                        .ok_or_else(|| MetaError::NotFound(format!("inode {inode:#x}")))
                });
                return Ok(self.with_size(found, caller.tags));
            }
            MetaRequest::Open { path, write } => self
                .store
                .read(wait, |ops| ops.open(path, *write, who))
                .and_then(|(ino, node)| {
                    let size = self.sizes().size(ino).ok();
                    if *write && node.kind == FileKind::File {
                        self.sizes()
                            .opened_for_write(ino, conn)
                            .map_err(MetaError::Invalid)?;
                    }
                    Ok(MetaReply::Attr(self.with_capability(
                        attr(ino, &node, size),
                        &node,
                        &caller,
                        *write,
                    )))
                }),
            MetaRequest::Renew { inode, write } => self
                .store
                .read(wait, |ops| ops.renew(*inode, *write, who))
                .map(|node| {
                    let size = self.sizes().size(*inode).ok();
                    MetaReply::Attr(self.with_capability(
                        attr(*inode, &node, size),
                        &node,
                        &caller,
                        *write,
                    ))
                }),
            MetaRequest::Create {
                path,
                layout,
                exclusive,
                mode,
            } => self
                .store
                .change(wait, true, |ops, alloc| {
                    ops.make(path, (Some(*layout), *exclusive, *mode), who, now_ns, alloc)
                })
                .and_then(|(made, _)| {
                    let mut sizes = self.sizes();
                    let size = if made.created {
                        sizes.created(made.ino, conn).map_err(MetaError::Invalid)?;
                        Some(0)
                    } else {
                        let known = sizes.size(made.ino).ok();
                        sizes
                            .opened_for_write(made.ino, conn)
                            .map_err(MetaError::Invalid)?;
                        known
                    };
                    Ok(MetaReply::Attr(self.with_capability(
                        attr(made.ino, &made.node, size),
                        &made.node,
                        &caller,
                        true,
                    )))
                }),
            MetaRequest::Mkdir { path, mode } => self
                .store
                .change(wait, true, |ops, alloc| {
                    ops.make(path, (None, true, *mode), who, now_ns, alloc)
                })
                .map(|(made, _)| MetaReply::Attr(attr(made.ino, &made.node, Some(0)))),
            MetaRequest::Readdir { path, after } => self
                .store
                .read(wait, |ops| ops.readdir(path, after.as_deref(), who))
                .map(|(entries, more)| MetaReply::Entries { entries, more }),
            MetaRequest::Unlink { path } | MetaRequest::Rmdir { path } => {
                let kind = match op {
                    MetaRequest::Unlink { .. } => FileKind::File,
                    _ => FileKind::Directory,
                };
                self.store
                    .change(wait, false, |ops, _| ops.remove(path, kind, who, now_ns))
                    .map(|((ino, node), _)| {
                        if kind == FileKind::File {
                            self.sizes().forget(ino);
                            self.store.made_orphans();
                        }
                        MetaReply::Attr(attr(ino, &node, None))
                    })
            }
            MetaRequest::Rename { from, to } => self
                .store
                .change(wait, false, |ops, _| ops.rename(from, to, who, now_ns))
                .map(|(replaced, _)| {
                    MetaReply::Replaced(replaced.map(|(ino, node)| {
                        if node.kind == FileKind::File {
                            self.sizes().forget(ino);
                            self.store.made_orphans();
                        }
                        attr(ino, &node, None)
                    }))
                }),
            MetaRequest::Truncate { path, size } => self
                .store
                .change(wait, false, |ops, _| ops.truncate(path, who, now_ns))
                .map(|((ino, node), _)| {
                    self.sizes().truncated(ino, conn, *size);
                    MetaReply::Attr(self.with_capability(
                        attr(ino, &node, Some(*size)),
                        &node,
                        &caller,
                        true,
                    ))
                }),
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
            } => self
                .store
                .change(wait, false, |ops, _| {
                    ops.set_attr(path, (*mode, *uid, *gid), who, now_ns)
                })
                .map(|((ino, node), _)| {
                    let size = self.sizes().size(ino).ok();
                    MetaReply::Attr(attr(ino, &node, size))
                }),
            MetaRequest::Access { path, mask } => self
                .store
                .read(wait, |ops| ops.access(path, *mask, who))
                .map(|()| MetaReply::Done),
            MetaRequest::Statfs => self.store.read(wait, |ops| ops.counts()).map(
                |(files, directories, default_layout)| {
                    MetaReply::Statfs(FsCounts {
                        files,
                        directories,
                        inodes_free: self.store.free_bytes() / BYTES_PER_INODE,
                        data_servers: self.store.config().data_servers.clone(),
                        default_layout,
                    })
                },
            ),
            MetaRequest::Close { files } => {
                // Descriptors that wrote: their files' modification time is now.
                let wrote: Vec<u64> = files
                    .iter()
                    .filter(|c| c.written_end > 0)
                    .map(|c| c.inode)
                    .collect();
                let touched = if wrote.is_empty() {
                    Ok(())
                } else {
                    self.store
                        .change(wait, false, |ops, _| {
                            wrote.iter().try_for_each(|&ino| ops.touch(ino, now_ns))
                        })
                        .map(|_| ())
                };
                if is_busy(&touched) {
                    return Err(MetaError::Busy);
                }
                let mut sizes = self.sizes();
                for c in files {
                    sizes.closed(c.inode, conn, c.written_end);
                }
                touched.map(|()| MetaReply::Done)
            }
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
