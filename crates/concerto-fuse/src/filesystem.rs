//! The file system the kernel talks to: each FUSE operation is one call
//! of the client library, run as a task that replies when done.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, TimeOrNow,
};
use libc::c_int;
use tokio::runtime::Handle;

use concerto_client::{FileHandle, FsClient, Identity, Stat};
use concerto_core::job::PhaseConfig;
use concerto_core::Extent;
use concerto_proto::auth::Principal;
use concerto_proto::{ErrorKind, FileKind, LayoutRequest};

use crate::cache::{direct_flags, PageCache};
use crate::inodes::{OpenFile, State};
use crate::listing::Listing;
use crate::phases::ImplicitPhases;
use crate::replies::{Errno, Statfs};
use crate::MountOptions;

/// How long a process's identity is reused before its environment is read
/// again. Short, so a process that execs with a new environment, or a
/// process id that is reused, is seen as its new self within a second.
pub const CALLER_TTL: Duration = Duration::from_secs(1);
/// Most processes whose identity is remembered; beyond it, expired entries
/// are dropped, and if none has expired, all of them.
const MAX_CALLERS: usize = 4096;

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// What an operation's task gets: the client acting for the caller, the shared state and how to build attributes.
#[derive(Clone)]
struct Ctx {
    client: FsClient,
    state: Arc<Mutex<State>>,
    ttl: Duration,
    /// Callers' I/O phases, found in their streams (with a coordinator).
    phases: Option<Arc<ImplicitPhases>>,
    /// What the kernel caches of files, and when it may keep it.
    cache: Arc<PageCache>,
}

impl Ctx {
    /// Waits, when phases are detected, until the caller's job may do I/O.
    async fn enter_phase(&self) {
        if let Some(p) = &self.phases {
            p.enter(&self.client).await;
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere never leaves the table half-changed in a way that matters here.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn attr(&self, s: &Stat) -> FileAttr {
        let (kind, nlink) = match s.kind {
            FileKind::Directory => (FileType::Directory, 2),
            FileKind::File => (FileType::RegularFile, 1),
        };
        let blksize = s
            .layout
            .as_ref()
            .map_or(4096, |l| l.unit().min(u32::MAX as u64) as u32);
        FileAttr {
            ino: s.inode,
            size: s.size,
            blocks: s.size.div_ceil(512),
            atime: time(s.mtime_ns),
            mtime: time(s.mtime_ns),
            ctime: time(s.ctime_ns),
            crtime: time(s.ctime_ns),
            kind,
            perm: s.mode as u16,
            nlink,
            uid: s.uid,
            gid: s.gid,
            rdev: 0,
            blksize,
            flags: 0,
        }
    }

    /// The attributes of inode `ino` (asked by number: a rename elsewhere
    /// does not confuse it; ESTALE once it is removed).
    async fn stat_inode(&self, ino: u64) -> Result<Stat, Errno> {
        // The kernel's inode numbers are the metadata service's (the root
        // is 1 in both).
        let path = self.state().path(ino)?;
        Ok(self.client.getattr(ino, &path).await?)
    }

    /// Stat of `path`, remembered as a kernel reference to its inode.
    async fn entry(&self, path: &str) -> Result<FileAttr, Errno> {
        let stat = self.client.stat(path).await?;
        self.state().looked_up(stat.inode, path);
        Ok(self.attr(&stat))
    }

    /// Keeps an open file, with the client acting for whoever opened it,
    /// under a new handle number.
    fn keep_open(&self, file: FileHandle) -> u64 {
        self.state().opened(file.inode);
        if let Some(p) = &self.phases {
            p.opened(self.client.identity().app);
        }
        let open = OpenFile {
            file,
            client: self.client.clone(),
        };
        self.keep(|s| &mut s.files, open)
    }

    /// Unlinks `path` unless this mount has it open; then hides it instead
    /// (POSIX: an unlinked file lives on until its last close), and removes
    /// it once the last handle is closed.
    async fn unlink_or_hide(&self, path: &str) -> Result<(), Errno> {
        let hide = self.state().begin_hiding(path);
        let Some((ino, hidden)) = hide else {
            return Ok(self.client.unlink(path).await?);
        };
        if let Err(e) = self.client.rename(path, &hidden).await {
            self.state().hiding_failed(ino);
            return Err(e.into());
        }
        let last_closed = self.state().hidden(ino, path, &hidden);
        if last_closed {
            self.client.unlink(&hidden).await?;
        }
        Ok(())
    }

    /// Keeps `value` under a new handle number.
    fn keep<T>(&self, table: impl FnOnce(&mut State) -> &mut HashMap<u64, T>, value: T) -> u64 {
        let mut state = self.state();
        let fh = state.handle();
        table(&mut state).insert(fh, value);
        fh
    }
}

/// A FUSE reply that an operation's result completes.
trait Answer<T>: Send + 'static {
    fn answer(self, ctx: &Ctx, value: T);
    fn fail(self, errno: Errno);
}

macro_rules! answer {
    ($reply:ty, $value:ty, |$r:ident, $ctx:ident, $v:ident| $ok:expr) => {
        impl Answer<$value> for $reply {
            fn answer(self, $ctx: &Ctx, $v: $value) {
                let $r = self;
                $ok
            }
            fn fail(self, errno: Errno) {
                self.error(errno.0)
            }
        }
    };
}

answer!(ReplyEntry, FileAttr, |r, ctx, attr| r
    .entry(&ctx.ttl, &attr, 0));
answer!(ReplyAttr, Stat, |r, ctx, stat| r
    .attr(&ctx.ttl, &ctx.attr(&stat)));
answer!(ReplyEmpty, (), |r, _ctx, _v| r.ok());
// (handle, FOPEN_* flags)
answer!(ReplyOpen, (u64, u32), |r, _ctx, v| r.opened(v.0, v.1));
answer!(ReplyCreate, (FileAttr, u64, u32), |r, ctx, v| r
    .created(&ctx.ttl, &v.0, 0, v.1, v.2));
answer!(ReplyData, bytes::Bytes, |r, _ctx, data| r.data(&data));
answer!(ReplyWrite, u32, |r, _ctx, n| r.written(n));
answer!(ReplyStatfs, Statfs, |r, _ctx, s| r.statfs(
    s.blocks,
    s.free,
    s.available,
    s.files,
    s.ffree,
    s.bsize,
    s.namelen,
    s.frsize
));

/// What the mount knows of a calling process, read once per [`CALLER_TTL`].
#[derive(Clone)]
struct Caller {
    identity: Identity,
    groups: Arc<Vec<u32>>,
    read_at: Instant,
}

pub(crate) struct ConcertoFuse {
    runtime: Handle,
    /// Acting as the mount itself; each request gets a copy acting as its caller.
    mount: Ctx,
    /// pid → (identity, supplementary groups, when they were read): see
    /// [`CALLER_TTL`].
    callers: HashMap<u32, Caller>,
    /// Whether each caller acts as its own user (a node key's mount).
    serve_users: bool,
    /// Whether writes not asked to be synchronous are written behind.
    write_behind: bool,
}

impl ConcertoFuse {
    pub(crate) fn new(
        client: FsClient,
        runtime: Handle,
        options: MountOptions,
        serve_users: bool,
    ) -> ConcertoFuse {
        ConcertoFuse {
            runtime: runtime.clone(),
            mount: Ctx {
                client,
                state: Arc::new(Mutex::new(State::new())),
                ttl: options.attr_ttl,
                phases: options
                    .detect_phases
                    .then(|| ImplicitPhases::start(PhaseConfig::default(), runtime.clone())),
                cache: Arc::default(),
            },
            callers: HashMap::new(),
            serve_users,
            write_behind: options.write_behind > 0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.mount.state()
    }

    /// Where the mount's notifier goes once its session is up.
    pub(crate) fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.mount.cache.notifier_slot()
    }

    /// The client acting for `req`'s caller; the mount's own identity for
    /// requests the kernel makes itself (pid 0). On a node key's mount it
    /// acts on files as the caller's user (the uid and gid the kernel
    /// gives, the groups its process has).
    fn client_for(&mut self, req: &Request<'_>) -> FsClient {
        let pid = req.pid();
        if pid == 0 {
            return self.mount.client.clone();
        }
        let now = Instant::now();
        let fresh = |c: &Caller| now.duration_since(c.read_at) < CALLER_TTL;
        let caller = match self.callers.get(&pid).filter(|c| fresh(c)) {
            Some(c) => c.clone(),
            None => {
                if self.callers.len() >= MAX_CALLERS {
                    self.callers.retain(|_, c| fresh(c));
                    if self.callers.len() >= MAX_CALLERS {
                        self.callers.clear();
                    }
                }
                let caller = Caller {
                    identity: Identity::of_process(pid),
                    groups: if self.serve_users {
                        Arc::new(Identity::groups_of_process(pid))
                    } else {
                        Arc::default()
                    },
                    read_at: now,
                };
                self.callers.insert(pid, caller.clone());
                caller
            }
        };
        let client = self.mount.client.with_identity(caller.identity);
        if self.serve_users {
            client.as_user(Principal::user(req.uid(), req.gid(), &caller.groups))
        } else {
            client
        }
    }

    /// Runs `work` as a task acting for `req`'s caller, and answers `reply` with its result.
    fn run<T, R, W, F>(&mut self, req: &Request<'_>, reply: R, work: W)
    where
        T: Send + 'static,
        R: Answer<T>,
        W: FnOnce(Ctx) -> F,
        F: Future<Output = Result<T, Errno>> + Send + 'static,
    {
        let client = self.client_for(req);
        self.spawn(client, reply, work);
    }

    /// Runs `work` on open file `fh`, acting for the process that opened it.
    fn run_on_file<T, R, W, F>(&self, fh: u64, reply: R, work: W)
    where
        T: Send + 'static,
        R: Answer<T>,
        W: FnOnce(Ctx, FileHandle) -> F,
        F: Future<Output = Result<T, Errno>> + Send + 'static,
    {
        let Some(open) = self.state().files.get(&fh).cloned() else {
            return reply.fail(Errno(libc::EBADF));
        };
        self.spawn(open.client, reply, |ctx| work(ctx, open.file));
    }

    fn spawn<T, R, W, F>(&self, client: FsClient, reply: R, work: W)
    where
        T: Send + 'static,
        R: Answer<T>,
        W: FnOnce(Ctx) -> F,
        F: Future<Output = Result<T, Errno>> + Send + 'static,
    {
        let ctx = Ctx {
            client,
            ..self.mount.clone()
        };
        let done = work(ctx.clone());
        self.runtime.spawn(async move {
            match done.await {
                Ok(value) => reply.answer(&ctx, value),
                Err(e) => reply.fail(e),
            }
        });
    }
}

impl Filesystem for ConcertoFuse {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), c_int> {
        // Let the kernel send up to 1 MiB per write, so a large write(2) is
        // a few striped requests rather than many 128 KiB ones.
        let _ = config
            .set_max_write(1 << 20)
            .or_else(|n| config.set_max_write(n));
        // Listings with attributes (readdirplus), when the kernel judges
        // they help: the first call of each listing, and listings whose
        // entries were looked up after.
        const FUSE_DO_READDIRPLUS: u32 = 1 << 13;
        const FUSE_READDIRPLUS_AUTO: u32 = 1 << 14;
        let _ = config.add_capabilities(FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO);
        Ok(())
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let path = self.state().child(parent, name);
        self.run(req, reply, |ctx| async move { ctx.entry(&path?).await });
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        if self.state().forget(ino, nlookup) {
            self.mount.cache.forget(ino);
        }
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.run(req, reply, |ctx| async move { ctx.stat_inode(ino).await });
    }

    /// The size (truncate), the mode (chmod) and the owner and group
    /// (chown, chgrp) change on the metadata service, which checks them
    /// against the key's user; times other than those it keeps are not
    /// stored, so those changes are accepted and the attributes stay.
    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.run(req, reply, |ctx| async move {
            if mode.is_some() || uid.is_some() || gid.is_some() {
                let path = ctx.state().path(ino)?;
                let mode = mode.map(|m| m & concerto_proto::MAX_MODE);
                ctx.client.set_attr(&path, mode, uid, gid).await?;
            }
            if let Some(size) = size {
                let path = ctx.state().path(ino)?;
                ctx.client.truncate(&path, size).await?;
            }
            ctx.stat_inode(ino).await
        });
    }

    /// access(2) and the shell's `test -r/-w/-x`: asked of the metadata
    /// service for the user the request acts as (the key's, or on a node
    /// key's mount the caller's; a tenant key's mount does not use the
    /// kernel's `default_permissions`: the key, not the local uid, acts).
    fn access(&mut self, req: &Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        self.run(req, reply, |ctx| async move {
            let path = ctx.state().path(ino)?;
            if mask == libc::F_OK {
                ctx.stat_inode(ino).await?;
                return Ok(());
            }
            Ok(ctx.client.access(&path, (mask & 7) as u32).await?)
        });
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let path = self.state().child(parent, name);
        self.run(req, reply, |ctx| async move {
            let path = path?;
            let stat = ctx
                .client
                .mkdir_mode(&path, mode & !umask & concerto_proto::MAX_MODE)
                .await?;
            ctx.state().looked_up(stat.inode, &path);
            Ok(ctx.attr(&stat))
        });
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let path = self.state().child(parent, name);
        self.run(
            req,
            reply,
            |ctx| async move { ctx.unlink_or_hide(&path?).await },
        );
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let path = self.state().child(parent, name);
        self.run(req, reply, |ctx| async move {
            Ok(ctx.client.rmdir(&path?).await?)
        });
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let (from, to) = {
            let state = self.state();
            (state.child(parent, name), state.child(newparent, newname))
        };
        self.run(req, reply, |ctx| async move {
            let (from, to) = (from?, to?);
            if flags & !libc::RENAME_NOREPLACE != 0 {
                // RENAME_EXCHANGE and whiteouts have no counterpart in the metadata service.
                return Err(Errno(libc::EINVAL));
            }
            if flags & libc::RENAME_NOREPLACE != 0 {
                match ctx.client.stat(&to).await {
                    Ok(_) => return Err(Errno(libc::EEXIST)),
                    Err(e) if e.kind() == Some(ErrorKind::NotFound) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // A file replaced while open here lives on until its last close.
            let replaced_open = ctx.state().open_at(&to).is_some();
            if replaced_open {
                ctx.unlink_or_hide(&to).await?;
            }
            ctx.client.rename(&from, &to).await?;
            ctx.state().renamed(&from, &to);
            Ok(())
        });
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
        self.run(req, reply, |ctx| async move {
            let path = ctx.state().path(ino)?;
            let file = ctx.client.open(&path, write).await?;
            if file.inode != ino {
                ctx.client.release(&file);
                return Err(Errno(libc::ESTALE));
            }
            let open_flags = ctx.cache.open_flags(&file, flags);
            Ok((ctx.keep_open(file), open_flags))
        });
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let path = self.state().child(parent, name);
        let exclusive = flags & libc::O_EXCL != 0;
        self.run(req, reply, |ctx| async move {
            let path = path?;
            // One request: the reply says what was created.
            let (file, stat) = ctx
                .client
                .create_stat(
                    &path,
                    LayoutRequest::default(),
                    exclusive,
                    mode & !umask & concerto_proto::MAX_MODE,
                )
                .await?;
            ctx.state().looked_up(stat.inode, &path);
            let open_flags = if flags & libc::O_DIRECT != 0 {
                direct_flags()
            } else {
                ctx.cache.created(&file)
            };
            Ok((ctx.attr(&stat), ctx.keep_open(file), open_flags))
        });
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        self.run_on_file(fh, reply, |ctx, file| async move {
            let offset = u64::try_from(offset).map_err(|_| Errno(libc::EINVAL))?;
            ctx.enter_phase().await;
            Ok(ctx.client.read(&file, offset, size as u64).await?)
        });
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let Some(open) = self.state().files.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        let Ok(offset) = u64::try_from(offset) else {
            return reply.error(libc::EINVAL);
        };
        let written = data.len() as u32;
        // O_DIRECT, O_SYNC and O_DSYNC are written through (answered once
        // the servers have the data; the kernel then fsyncs O_*SYNC):
        // planned and copied here, while the kernel's buffer is borrowed,
        // straight into the per-server requests. Other writes go behind
        // (held, coalesced with the handle's adjacent writes; see the
        // client's write_behind), so that the kernel's lock on the file,
        // held across a write that extends it, is held only for a moment.
        let through =
            !self.write_behind || flags & (libc::O_DIRECT | libc::O_SYNC | libc::O_DSYNC) != 0;
        if through {
            let extent = [Extent::new(offset, data.len() as u64)];
            let prepared = match open.client.prepare_write(&open.file, &extent, data) {
                Ok(p) => p,
                Err(e) => return reply.error(Errno::from(e).0),
            };
            return self.spawn(open.client, reply, move |ctx| async move {
                ctx.enter_phase().await;
                ctx.client.write_through(&open.file, prepared).await?;
                Ok(written)
            });
        }
        let data = bytes::Bytes::copy_from_slice(data);
        self.spawn(open.client, reply, move |ctx| async move {
            ctx.enter_phase().await;
            ctx.client.write_behind(&open.file, offset, data).await?;
            Ok(written)
        });
    }

    /// close(2): what was written through this file since its last fsync
    /// is made durable on the servers it went to before close returns; a
    /// file only read costs nothing.
    fn flush(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, _owner: u64, reply: ReplyEmpty) {
        // Nothing written since the last fsync (a file only read, or just
        // created): answered here, without a task.
        let clean = self
            .state()
            .files
            .get(&fh)
            .is_some_and(|open| !open.client.has_unflushed_writes(&open.file));
        if clean {
            return reply.ok();
        }
        self.run_on_file(fh, reply, |ctx, file| async move {
            Ok(ctx.client.flush(&file).await?)
        });
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run_on_file(fh, reply, |ctx, file| async move {
            Ok(ctx.client.fsync(&file).await?)
        });
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let released = {
            let mut state = self.state();
            let Some(open) = state.files.remove(&fh) else {
                return reply.error(libc::EBADF);
            };
            let hidden = state.closed(open.file.inode);
            (open.file, open.client, hidden)
        };
        let (file, client, hidden) = released;
        // A descriptor open for writing is let go at the metadata service
        // (which then knows the size again), with others, in the background
        // (on the mount's runtime: this thread is FUSE's own).
        {
            let _runtime = self.runtime.enter();
            client.release(&file);
        }
        // Its data flushed (the kernel's flush came first): a job that
        // closed its last file may have ended its I/O phase.
        if let Some(p) = &self.mount.phases {
            p.closed(client.identity().app);
        }
        match hidden {
            // The last close of a file unlinked while open: it goes now.
            Some(path) => self.spawn(client, reply, |ctx| async move {
                Ok(ctx.client.unlink(&path).await?)
            }),
            None => reply.ok(),
        }
    }

    /// Device nodes, fifos and sockets have no counterpart in the metadata
    /// service (regular files come through `create`).
    fn mknod(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EPERM);
    }

    /// Hard and symbolic links are not supported: EPERM, what POSIX
    /// specifies for a file system that does not support them.
    fn link(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _newparent: u64,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EPERM);
    }

    fn symlink(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(libc::EPERM);
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.run(req, reply, |ctx| async move {
            let path = ctx.state().path(ino)?;
            let (entries, dir) = tokio::try_join!(
                ctx.client.readdir_stat(&path),
                ctx.client.getattr(ino, &path)
            )?;
            let listing = Listing::new(path, dir, entries);
            Ok((ctx.keep(|s| &mut s.listings, listing), 0))
        });
    }

    /// Serves the listing taken at opendir from `offset` on.
    fn readdir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let state = self.state();
        let Some(listing) = state.listings.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        for line in listing.from(offset) {
            if reply.add(line.inode, line.next, line.kind, line.name) {
                break;
            }
        }
        reply.ok();
    }

    /// Serves the listing with each entry's attributes: the kernel then
    /// holds a reference to each entry's inode (one lookup each, as a
    /// lookup would give; "." and ".." excepted).
    fn readdirplus(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let mut state = self.state();
        let Some(listing) = state.listings.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let mut looked_up = Vec::new();
        for line in listing.from(offset) {
            let attr = self.mount.attr(line.stat);
            if reply.add(line.inode, line.next, line.name, &self.mount.ttl, &attr, 0) {
                break;
            }
            if !line.dot {
                looked_up.push((line.inode, listing.child(line.name)));
            }
        }
        for (inode, path) in looked_up {
            state.looked_up(inode, &path);
        }
        reply.ok();
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.state().listings.remove(&fh);
        reply.ok();
    }

    fn statfs(&mut self, req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        self.run(req, reply, |ctx| async move {
            let counts = ctx.client.statfs().await?;
            // Space is what the data servers' file systems have, each
            // counted once however many servers share it (any key may ask;
            // statistics are the administrator's).
            let space = ctx.client.space().await?;
            // One block unit for the counts and the fragment size alike:
            // df multiplies the counts by the fragment size.
            const BLOCK: u64 = 4096;
            let used = counts.files + counts.directories;
            Ok(Statfs {
                blocks: space.total / BLOCK,
                free: space.free / BLOCK,
                available: space.available / BLOCK,
                // Files and directories there are, and room for as many
                // more as the metadata store's disk can hold.
                files: used + counts.inodes_free,
                ffree: counts.inodes_free,
                bsize: BLOCK as u32,
                namelen: concerto_proto::namespace::MAX_NAME as u32,
                frsize: BLOCK as u32,
            })
        });
    }
}
