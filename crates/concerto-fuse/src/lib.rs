//! A FUSE mount of a cluster, for unmodified POSIX programs (`cp`, `fio`,
//! an application's own `write(2)` calls).
//!
//! The layer is thin: every operation is one call of the client library, so
//! data is striped, tagged and scheduled exactly as through `concerto.fs`.
//! FUSE speaks in inode numbers and the metadata service in paths, so the
//! mount keeps the path of every inode the kernel holds (counted lookups,
//! dropped on `forget`). Operations run as tasks on a tokio runtime and
//! reply when done, so several callers' I/O is in flight at once rather than
//! queued behind one FUSE thread.
//!
//! Each request is tagged with its caller's identity, read from the calling
//! process's environment as it was at exec (`/proc/PID/environ`) by the
//! client library's one reader of identities: the application from
//! `CONCERTO_APP_ID`, else `SLURM_JOB_ID`, else the caller's process group,
//! so the ranks of one job share an id without any change to the program;
//! the rank from `CONCERTO_RANK`, `SLURM_PROCID`, `PMI_RANK` or
//! `OMPI_COMM_WORLD_RANK`. The identity is resolved once per open file
//! (reads, writes and closes of that file use it), and for other operations
//! once per process per second ([`CALLER_TTL`]). One client, with one set
//! of connections, serves every caller; a write's bytes are copied once,
//! from the kernel's buffer straight into the per-server requests.
//!
//! Files are opened in direct-I/O mode, as PVFS2's client keeps no data
//! cache: every read(2) and write(2) goes to the servers, so what one node
//! writes another reads at once, and the servers' policies see the
//! program's real request stream (a shared writable mmap is refused).
//! Closing a file (`flush`) makes its data durable on every server, as the
//! client library's close does; names and attributes are cached by the
//! kernel for [`MountOptions::attr_ttl`].

use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::consts::FOPEN_DIRECT_IO;
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, MountOption, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use libc::c_int;
use tokio::runtime::Handle;

use concerto_client::{ClientError, FileHandle, FsClient, Identity, Stat};
use concerto_core::Extent;
use concerto_proto::{DirEntry, ErrorKind, FileKind, LayoutRequest};

/// How long a process's identity is reused before its environment is read
/// again. Short, so a process that execs with a new environment, or a
/// process id that is reused, is seen as its new self within a second.
pub const CALLER_TTL: Duration = Duration::from_secs(1);
/// Most processes whose identity is remembered; beyond it, expired entries
/// are dropped, and if none has expired, all of them.
const MAX_CALLERS: usize = 4096;

/// How a mount behaves.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// How long the kernel may cache names and attributes before asking again.
    pub attr_ttl: Duration,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions {
            attr_ttl: Duration::from_secs(1),
        }
    }
}

/// A mounted cluster; dropping it unmounts, lazily if files on it are
/// still open (a plain unmount then fails with EBUSY and would leave a
/// dead mount behind).
pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    mountpoint: std::path::PathBuf,
}

impl Drop for Mount {
    fn drop(&mut self) {
        drop(self.session.take());
        if is_ours(&self.mountpoint) && !detach(&self.mountpoint) {
            eprintln!(
                "concerto-fuse: could not unmount {}: run `fusermount3 -u {0}` (or, as root, `umount -l {0}`)",
                self.mountpoint.display()
            );
        }
    }
}

impl Mount {
    /// Where it is mounted (the canonical path).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// False once the mount is gone (`umount` by someone else, or the kernel aborted it).
    pub fn is_mounted(&self) -> bool {
        mounted_kind(&self.mountpoint).map_or(true, |kind| kind.is_some())
    }
}

/// What `/proc/self/mounts` lists as mounted at `path`, if anything: the
/// source and the type (`concerto` and `fuse` or `fuse.concerto` for ours,
/// depending on how it was mounted).
fn mounted_kind(path: &Path) -> io::Result<Option<(String, String)>> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    // The kernel writes spaces and the like in paths as octal escapes.
    let want = path
        .to_string_lossy()
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012");
    Ok(mounts.lines().find_map(|l| {
        let mut fields = l.split(' ');
        let (source, at, kind) = (fields.next(), fields.next(), fields.next());
        (at == Some(want.as_str()))
            .then(|| (source.unwrap_or("").into(), kind.unwrap_or("").into()))
    }))
}

/// A Concerto mount whose process died (killed, say) leaves the kernel's
/// mount behind, and every access to it fails with ENOTCONN. Mounting
/// there again clears it first (a lazy unmount: as root with umount2, else
/// with `fusermount3 -u -z`), or says exactly what to run. Only a Concerto
/// mount is cleared; anything else at the path is left to its owner.
fn clear_stale_mount(mountpoint: &Path) -> io::Result<()> {
    let stale = matches!(
        std::fs::metadata(mountpoint),
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN)
    );
    if !stale {
        return Ok(());
    }
    // Not canonicalize: that needs the stat that fails. The mount table
    // holds absolute paths.
    let mountpoint = &std::path::absolute(mountpoint)?;
    let shown = mountpoint.display();
    if !is_ours(mountpoint) {
        return Err(io::Error::other(format!(
            "{shown} is a mount whose file system is gone (transport endpoint not connected), \
             and not a Concerto one: unmount it (`fusermount3 -u {shown}` or, as root, `umount -l {shown}`)"
        )));
    }
    if detach(mountpoint) {
        eprintln!("concerto-fuse: cleared the stale mount left at {shown} by a mount that died");
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{shown} holds a stale Concerto mount (its process died) that could not be cleared: \
             run `fusermount3 -u {shown}` (or, as root, `umount -l {shown}`) and mount again"
        )))
    }
}

/// Whether a Concerto mount is at `path` (alive or dead).
fn is_ours(path: &Path) -> bool {
    mounted_kind(path)
        .ok()
        .flatten()
        .is_some_and(|(source, kind)| source == "concerto" && kind.starts_with("fuse"))
}

/// A lazy unmount of `mountpoint`: as root with umount2, else with
/// `fusermount3 -u -z`. True when it is gone.
fn detach(mountpoint: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    (unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) } == 0)
        || std::process::Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(mountpoint)
            .status()
            .is_ok_and(|s| s.success())
}

/// Mounts `client`'s cluster at `mountpoint` (an existing directory); the
/// operations run on `runtime`. Needs `/dev/fuse` and the right to mount
/// (root, or `fusermount3` on the path).
pub fn mount(
    client: FsClient,
    mountpoint: &Path,
    runtime: Handle,
    options: MountOptions,
) -> io::Result<Mount> {
    clear_stale_mount(mountpoint)?;
    if !mountpoint.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("mount point {} is not a directory", mountpoint.display()),
        ));
    }
    let mountpoint = mountpoint.canonicalize()?;
    let fs = ConcertoFuse {
        runtime,
        mount: Ctx {
            client,
            state: Arc::new(Mutex::new(State::new())),
            ttl: options.attr_ttl,
            // SAFETY: geteuid and getegid only read the process's credentials.
            owner: unsafe { (libc::geteuid(), libc::getegid()) },
        },
        callers: HashMap::new(),
    };
    let opts = [
        MountOption::FSName("concerto".into()),
        MountOption::Subtype("concerto".into()),
        MountOption::NoAtime,
    ];
    let session = fuser::spawn_mount2(fs, &mountpoint, &opts).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot mount at {}: {e}", mountpoint.display()),
        )
    })?;
    Ok(Mount {
        session: Some(session),
        mountpoint,
    })
}

/// An open file and the client acting for the process that opened it.
#[derive(Clone)]
struct OpenFile {
    file: FileHandle,
    client: FsClient,
}

/// What the mount remembers between calls.
struct State {
    /// inode → (path, how many lookups the kernel holds).
    names: HashMap<u64, (String, u64)>,
    files: HashMap<u64, OpenFile>,
    /// inode → how many handles the kernel has open on it.
    opens: HashMap<u64, u32>,
    /// Files unlinked (or renamed over) while open here, kept under a
    /// hidden name until their last close: inode → (hidden path, whether
    /// the rename to it is done).
    unlinked: HashMap<u64, (String, bool)>,
    /// Directory listings taken at opendir, served in pieces by readdir.
    listings: HashMap<u64, Vec<DirEntry>>,
    next_handle: u64,
}

const ROOT: u64 = fuser::FUSE_ROOT_ID;

impl State {
    fn new() -> State {
        let mut names = HashMap::new();
        names.insert(ROOT, ("/".to_string(), 1));
        State {
            names,
            files: HashMap::new(),
            opens: HashMap::new(),
            unlinked: HashMap::new(),
            listings: HashMap::new(),
            next_handle: 1,
        }
    }

    fn path(&self, ino: u64) -> Result<String, Errno> {
        self.names
            .get(&ino)
            .map(|(p, _)| p.clone())
            .ok_or(Errno(libc::ESTALE))
    }

    /// The path of `name` in directory `parent`, checked as a name.
    fn child(&self, parent: u64, name: &OsStr) -> Result<String, Errno> {
        if name.len() > concerto_proto::namespace::MAX_NAME {
            return Err(Errno(libc::ENAMETOOLONG));
        }
        let name = name.to_str().ok_or(Errno(libc::EINVAL))?;
        let dir = self.path(parent)?;
        Ok(if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        })
    }

    /// The kernel now holds one more reference to `ino`, known as `path`.
    fn looked_up(&mut self, ino: u64, path: &str) {
        let entry = self.names.entry(ino).or_insert_with(|| (String::new(), 0));
        entry.0 = path.to_string();
        entry.1 += 1;
    }

    fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        if let Some(entry) = self.names.get_mut(&ino) {
            entry.1 = entry.1.saturating_sub(n);
            if entry.1 == 0 {
                self.names.remove(&ino);
            }
        }
    }

    /// After a rename, everything under `from` lives under `to`.
    fn renamed(&mut self, from: &str, to: &str) {
        let prefix = format!("{from}/");
        for (path, _) in self.names.values_mut() {
            if path == from {
                *path = to.to_string();
            } else if let Some(rest) = path.strip_prefix(&prefix) {
                *path = format!("{to}/{rest}");
            }
        }
    }

    /// The inode at `path` if this mount has it open.
    fn open_at(&self, path: &str) -> Option<u64> {
        self.opens
            .keys()
            .copied()
            .find(|ino| self.names.get(ino).is_some_and(|(p, _)| p == path))
    }

    /// A handle on `ino` was closed; true when it was the last one of a
    /// file hidden since its unlink, which is now for the caller to remove.
    fn closed(&mut self, ino: u64) -> Option<String> {
        let left = self.opens.get_mut(&ino).map(|n| {
            *n -= 1;
            *n
        });
        if left != Some(0) {
            return None;
        }
        self.opens.remove(&ino);
        match self.unlinked.get(&ino) {
            Some((_, true)) => self.unlinked.remove(&ino).map(|(path, _)| path),
            _ => None,
        }
    }

    fn handle(&mut self) -> u64 {
        self.next_handle += 1;
        self.next_handle
    }
}

/// Files unlinked while open on this mount are kept under this name
/// (followed by the inode number) in their directory until their last
/// close, as NFS clients keep theirs as `.nfsXXXX`; listings leave them out.
const HIDDEN_PREFIX: &str = ".concerto-unlinked-";

fn hidden_path(path: &str, ino: u64) -> String {
    let dir = &path[..path.rfind('/').unwrap_or(0)];
    format!("{dir}/{HIDDEN_PREFIX}{ino:x}")
}

/// Free inodes `statfs` reports: Concerto has no inode table to fill, so a
/// large number that stays positive to every reader.
const FREE_INODES: u64 = 1 << 32;

/// An errno for the kernel; a client error converts to the one a POSIX
/// program expects, so operations use `?` on client calls.
#[derive(Clone, Copy, Debug)]
struct Errno(c_int);

impl From<ClientError> for Errno {
    fn from(e: ClientError) -> Errno {
        Errno(match e.kind() {
            Some(ErrorKind::NotFound) => libc::ENOENT,
            Some(ErrorKind::Exists) => libc::EEXIST,
            Some(ErrorKind::NotEmpty) => libc::ENOTEMPTY,
            Some(ErrorKind::NotADirectory) => libc::ENOTDIR,
            Some(ErrorKind::IsADirectory) => libc::EISDIR,
            Some(ErrorKind::Invalid) => libc::EINVAL,
            Some(ErrorKind::Denied) => libc::EACCES,
            Some(ErrorKind::NoSpace) => libc::ENOSPC,
            Some(ErrorKind::Stale) => libc::ESTALE,
            _ if matches!(e, ClientError::Auth { .. }) => libc::EACCES,
            _ if matches!(e, ClientError::Invalid(_)) => libc::EINVAL,
            _ => libc::EIO,
        })
    }
}

/// Who process `pid` is: the identity its environment at exec names, else
/// its process group as the application.
fn identity_of(pid: u32) -> Identity {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    // SAFETY: getpgid only reads the process table.
    let group = unsafe { libc::getpgid(pid as libc::pid_t) };
    Identity::from_environ(&environ, if group > 0 { group as u32 } else { pid })
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// What an operation's task gets: the client acting for the caller, the shared state and how to build attributes.
#[derive(Clone)]
struct Ctx {
    client: FsClient,
    state: Arc<Mutex<State>>,
    ttl: Duration,
    owner: (u32, u32),
}

impl Ctx {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere never leaves the table half-changed in a way that matters here.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn attr(&self, s: &Stat) -> FileAttr {
        let (kind, perm, nlink) = match s.kind {
            FileKind::Directory => (FileType::Directory, 0o755, 2),
            FileKind::File => (FileType::RegularFile, 0o644, 1),
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
            perm,
            nlink,
            uid: self.owner.0,
            gid: self.owner.1,
            rdev: 0,
            blksize,
            flags: 0,
        }
    }

    /// Stat of the inode's path, refusing a path that now names another inode.
    async fn stat_inode(&self, ino: u64) -> Result<Stat, Errno> {
        let path = self.state().path(ino)?;
        let stat = self.client.stat(&path).await?;
        if stat.inode != ino {
            return Err(Errno(libc::ESTALE));
        }
        Ok(stat)
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
        *self.state().opens.entry(file.inode).or_default() += 1;
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
        let hide = {
            let mut state = self.state();
            state.open_at(path).map(|ino| {
                let hidden = hidden_path(path, ino);
                state.unlinked.insert(ino, (hidden.clone(), false));
                (ino, hidden)
            })
        };
        let Some((ino, hidden)) = hide else {
            return Ok(self.client.unlink(path).await?);
        };
        if let Err(e) = self.client.rename(path, &hidden).await {
            self.state().unlinked.remove(&ino);
            return Err(e.into());
        }
        let last_closed = {
            let mut state = self.state();
            state.renamed(path, &hidden);
            if state.opens.contains_key(&ino) {
                if let Some(entry) = state.unlinked.get_mut(&ino) {
                    entry.1 = true;
                }
                false
            } else {
                state.unlinked.remove(&ino);
                true
            }
        };
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
answer!(ReplyCreate, (FileAttr, u64), |r, ctx, v| r.created(
    &ctx.ttl,
    &v.0,
    0,
    v.1,
    FOPEN_DIRECT_IO
));
answer!(ReplyData, Vec<u8>, |r, _ctx, data| r.data(&data));
answer!(ReplyWrite, u32, |r, _ctx, n| r.written(n));
answer!(ReplyStatfs, Statfs, |r, _ctx, s| r.statfs(
    s.blocks, s.free, s.free, s.files, s.ffree, s.bsize, s.namelen, s.frsize
));

/// What statfs answers.
struct Statfs {
    blocks: u64,
    free: u64,
    files: u64,
    ffree: u64,
    bsize: u32,
    namelen: u32,
    frsize: u32,
}

struct ConcertoFuse {
    runtime: Handle,
    /// Acting as the mount itself; each request gets a copy acting as its caller.
    mount: Ctx,
    /// pid → (identity, when it was read): see [`CALLER_TTL`].
    callers: HashMap<u32, (Identity, Instant)>,
}

impl ConcertoFuse {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.mount.state()
    }

    /// The client acting for process `pid`; the mount's own identity for
    /// requests the kernel makes itself (pid 0).
    fn client_for(&mut self, pid: u32) -> FsClient {
        if pid == 0 {
            return self.mount.client.clone();
        }
        let now = Instant::now();
        let fresh = |(_, at): &(Identity, Instant)| now.duration_since(*at) < CALLER_TTL;
        let who = match self.callers.get(&pid).filter(|c| fresh(c)) {
            Some(&(who, _)) => who,
            None => {
                if self.callers.len() >= MAX_CALLERS {
                    self.callers.retain(|_, c| fresh(c));
                    if self.callers.len() >= MAX_CALLERS {
                        self.callers.clear();
                    }
                }
                let who = identity_of(pid);
                self.callers.insert(pid, (who, now));
                who
            }
        };
        self.mount.client.with_identity(who)
    }

    /// Runs `work` as a task acting for `req`'s caller, and answers `reply` with its result.
    fn run<T, R, W, F>(&mut self, req: &Request<'_>, reply: R, work: W)
    where
        T: Send + 'static,
        R: Answer<T>,
        W: FnOnce(Ctx) -> F,
        F: Future<Output = Result<T, Errno>> + Send + 'static,
    {
        let client = self.client_for(req.pid());
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
        Ok(())
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let path = self.state().child(parent, name);
        self.run(req, reply, |ctx| async move { ctx.entry(&path?).await });
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.state().forget(ino, nlookup);
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.run(req, reply, |ctx| async move { ctx.stat_inode(ino).await });
    }

    /// Only the size can change (truncate); modes, owners and times are not
    /// stored, so those changes are accepted and the attributes stay as they are.
    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
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
            if let Some(size) = size {
                let path = ctx.state().path(ino)?;
                ctx.client.truncate(&path, size).await?;
            }
            ctx.stat_inode(ino).await
        });
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let path = self.state().child(parent, name);
        self.run(req, reply, |ctx| async move {
            let path = path?;
            ctx.client.mkdir(&path).await?;
            ctx.entry(&path).await
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

    fn open(&mut self, req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.run(req, reply, |ctx| async move {
            let path = ctx.state().path(ino)?;
            let file = ctx.client.open(&path).await?;
            if file.inode != ino {
                return Err(Errno(libc::ESTALE));
            }
            Ok((ctx.keep_open(file), FOPEN_DIRECT_IO))
        });
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let path = self.state().child(parent, name);
        let exclusive = flags & libc::O_EXCL != 0;
        self.run(req, reply, |ctx| async move {
            let path = path?;
            let file = ctx
                .client
                .create(&path, LayoutRequest::default(), exclusive)
                .await?;
            let attr = ctx.entry(&path).await?;
            Ok((attr, ctx.keep_open(file)))
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
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        // Planned and copied here, while the kernel's buffer is borrowed:
        // the only copy of the data on its way to the servers.
        let Some(open) = self.state().files.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        let Ok(offset) = u64::try_from(offset) else {
            return reply.error(libc::EINVAL);
        };
        let extent = [Extent::new(offset, data.len() as u64)];
        let prepared = match open.client.prepare_write(&open.file, &extent, data) {
            Ok(p) => p,
            Err(e) => return reply.error(Errno::from(e).0),
        };
        let written = data.len() as u32;
        self.spawn(open.client, reply, |ctx| async move {
            ctx.client.send_write(prepared).await?;
            Ok(written)
        });
    }

    /// close(2): the file's data is made durable on its servers before close returns.
    fn flush(&mut self, req: &Request<'_>, ino: u64, fh: u64, _owner: u64, reply: ReplyEmpty) {
        self.fsync(req, ino, fh, false, reply);
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
        let hidden = {
            let mut state = self.state();
            let Some(open) = state.files.remove(&fh) else {
                return reply.error(libc::EBADF);
            };
            state
                .closed(open.file.inode)
                .map(|path| (path, open.client))
        };
        match hidden {
            // The last close of a file unlinked while open: it goes now.
            Some((path, client)) => self.spawn(client, reply, |ctx| async move {
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
            let entries = ctx.client.readdir(&path).await?;
            Ok((ctx.keep(|s| &mut s.listings, entries), 0))
        });
    }

    /// Serves the listing taken at opendir: "." and "..", then the entries;
    /// an entry's offset is its position plus one, where the next call resumes.
    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let state = self.state();
        let Some(entries) = state.listings.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let dots = [
            (ino, FileType::Directory, "."),
            (ino, FileType::Directory, ".."),
        ];
        let listed = entries
            .iter()
            .filter(|e| !e.name.starts_with(HIDDEN_PREFIX))
            .map(|e| {
                let kind = match e.kind {
                    FileKind::Directory => FileType::Directory,
                    FileKind::File => FileType::RegularFile,
                };
                (e.inode, kind, e.name.as_str())
            });
        let start = usize::try_from(offset).unwrap_or(0);
        for (i, (inode, kind, name)) in dots.into_iter().chain(listed).enumerate().skip(start) {
            if reply.add(inode, i as i64 + 1, kind, name) {
                break;
            }
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
            // Space is what the data servers' file systems have, summed
            // (any key may ask; statistics are the administrator's).
            let (total, free) = ctx.client.space().await;
            // One block unit for the counts and the fragment size alike:
            // df multiplies the counts by the fragment size.
            const BLOCK: u64 = 4096;
            let files = counts.files + counts.directories;
            Ok(Statfs {
                blocks: total / BLOCK,
                free: free / BLOCK,
                files,
                // No inode table to run out of; a count df prints as such
                // (u64::MAX less the files read as -2 to a signed reader).
                ffree: FREE_INODES.saturating_sub(files),
                bsize: BLOCK as u32,
                namelen: concerto_proto::namespace::MAX_NAME as u32,
                frsize: BLOCK as u32,
            })
        });
    }
}
