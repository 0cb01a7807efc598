//! Object files under a server's data directory. Names derive only from the
//! numeric object id (a file's inode number), never from anything a client
//! wrote.
//!
//! Objects come into being with their first write. Before one is created,
//! the store asks its [`ObjectAuthority`] (the metadata service) whether
//! the file it belongs to still exists: inode numbers are never reused, so
//! a write that reaches a removed file's object (through a descriptor
//! opened before the unlink, on any client) is refused with ESTALE instead
//! of bringing back an object no file points to. That is why no tombstone
//! is kept for removed objects: the metadata service, which knows which
//! files exist, is asked once per object created, and an object that
//! exists needs no question. (Lustre's object servers likewise create only
//! the objects their metadata server allotted.) Ids from
//! [`SCRATCH_OBJECTS`] up belong to no file and are created without asking
//! (only the admin key may write them).
//!
//! Open files are kept in a bounded cache, so a read, write or fsync does
//! not reopen its object; an fsync of an object written nothing since its
//! last fsync (by this process) costs no disk flush.

use std::fs::{File, OpenOptions};
use std::io;
use std::num::NonZeroUsize;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::UNIX_EPOCH;

use lru::LruCache;

use concerto_core::Extent;
use concerto_proto::{ErrorKind, SCRATCH_OBJECTS};

/// Who decides whether an object may be created: whether the file it
/// belongs to (its inode) still exists. Called on a storage thread, so it
/// may block.
pub trait ObjectAuthority: Send + Sync {
    fn is_live(&self, object: u64) -> io::Result<bool>;
}

pub struct ObjectStore {
    dir: PathBuf,
    open: Mutex<LruCache<u64, Arc<ObjectFile>>>,
    /// Held (one of them, by object id) while an object is brought into
    /// being and while one is removed, so a first write cannot slip between
    /// a removal's check and its delete.
    lifecycle: Box<[Mutex<()>]>,
    authority: RwLock<Option<Arc<dyn ObjectAuthority>>>,
}

/// An object's open file, and whether it was written since its last fsync.
struct ObjectFile {
    file: File,
    dirty: AtomicBool,
}

/// The bytes of `extents` of `file`, concatenated, up to the file's end
/// (a short result there); `read_at` fills a buffer from an offset.
fn gather(
    file: &File,
    extents: &[Extent],
    mut read_at: impl FnMut(&mut [u8], u64) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let size = file.metadata()?.len();
    let mut out = Vec::with_capacity(extents.iter().map(|e| e.len as usize).sum());
    for e in extents {
        let n = size.saturating_sub(e.offset).min(e.len) as usize;
        let at = out.len();
        out.resize(at + n, 0);
        read_at(&mut out[at..], e.offset)?;
        if (n as u64) < e.len {
            break;
        }
    }
    Ok(out)
}

/// Fills `buf` from `offset` of `file` from the page cache only
/// (`preadv2` with `RWF_NOWAIT`): `WouldBlock` when a byte is not there,
/// or the file was cut meanwhile (a storage thread's read then says what
/// is), or the kernel cannot promise not to wait.
fn read_now(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        let iov = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        // SAFETY: one iovec over `rest`, which outlives the call; the
        // descriptor is the open object file.
        let got = unsafe {
            libc::preadv2(
                file.as_raw_fd(),
                &iov,
                1,
                (offset + done as u64) as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        match got {
            n if n > 0 => done += n as usize,
            0 => return Err(io::ErrorKind::WouldBlock.into()),
            _ => {
                let e = io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::EINTR) => {
                        io::ErrorKind::WouldBlock.into()
                    }
                    _ => e,
                });
            }
        }
    }
    Ok(())
}

/// The wire's error kind for a storage error: a full disk (or quota) and a
/// removed object have their own; anything else is an I/O error.
pub fn error_kind(e: &io::Error) -> ErrorKind {
    if e.get_ref().is_some_and(|inner| inner.is::<StaleObject>()) {
        return ErrorKind::Stale;
    }
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorKind::NoSpace,
        _ => ErrorKind::Io,
    }
}

fn stale(object: u64) -> io::Error {
    io::Error::other(StaleObject(object))
}

/// An access to a removed object.
#[derive(Debug)]
struct StaleObject(u64);

impl std::fmt::Display for StaleObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "object {:#x} belonged to a file that has been removed (stale file handle)",
            self.0
        )
    }
}

impl std::error::Error for StaleObject {}

/// Where tombstones lived before the store asked the metadata service
/// instead; a directory left by an older server is removed at start.
const OLD_TOMBSTONES: &str = "removed";

/// Striped lifecycle locks: enough that unrelated objects rarely wait for each other.
const LIFECYCLE_LOCKS: usize = 64;

fn absent<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// How many object files to keep open: a quarter of the descriptors the
/// process may hold (connections need the rest), at most 4096.
fn open_file_budget() -> usize {
    let mut limit: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur as usize
    } else {
        1024
    };
    (soft / 4).clamp(16, 4096)
}

impl ObjectStore {
    /// Uses (and creates) `dir/objects`.
    pub fn open(dir: &Path) -> io::Result<ObjectStore> {
        let dir = dir.join("objects");
        std::fs::create_dir_all(&dir)?;
        let old = dir.join(OLD_TOMBSTONES);
        if old.is_dir() {
            std::fs::remove_dir_all(&old)?;
        }
        let budget = NonZeroUsize::new(open_file_budget()).unwrap_or(NonZeroUsize::MIN);
        Ok(ObjectStore {
            dir,
            open: Mutex::new(LruCache::new(budget)),
            lifecycle: (0..LIFECYCLE_LOCKS).map(|_| Mutex::new(())).collect(),
            authority: RwLock::new(None),
        })
    }

    /// From now on, objects are created only for files `authority` says exist.
    pub fn set_authority(&self, authority: Arc<dyn ObjectAuthority>) {
        *self.authority.write().unwrap_or_else(|p| p.into_inner()) = Some(authority);
    }

    fn path(&self, object: u64) -> PathBuf {
        self.dir.join(format!("{object:016x}"))
    }

    fn lifecycle(&self, object: u64) -> std::sync::MutexGuard<'_, ()> {
        self.lifecycle[(object % LIFECYCLE_LOCKS as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn cached(&self, object: u64) -> Option<Arc<ObjectFile>> {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&object)
            .cloned()
    }

    fn keep(&self, object: u64, file: File) -> Arc<ObjectFile> {
        let entry = Arc::new(ObjectFile {
            file,
            // Written by an earlier process, perhaps, and not synced since.
            dirty: AtomicBool::new(true),
        });
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .put(object, entry.clone());
        entry
    }

    /// The object's open file, if the object exists.
    fn existing(&self, object: u64) -> io::Result<Option<Arc<ObjectFile>>> {
        if let Some(f) = self.cached(object) {
            return Ok(Some(f));
        }
        let opened = absent(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.path(object)),
        )?;
        Ok(opened.map(|f| self.keep(object, f)))
    }

    /// The object's open file, brought into being if it was never written
    /// and its file still exists; refused if the file is gone.
    fn for_write(&self, object: u64) -> io::Result<Arc<ObjectFile>> {
        if let Some(f) = self.existing(object)? {
            return Ok(f);
        }
        let _creating = self.lifecycle(object);
        if let Some(f) = self.existing(object)? {
            return Ok(f);
        }
        let authority = self
            .authority
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(authority) = authority.filter(|_| object < SCRATCH_OBJECTS) {
            if !authority.is_live(object)? {
                return Err(stale(object));
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(self.path(object))?;
        Ok(self.keep(object, file))
    }

    /// Positioned write of `data` over `extents` (ascending, lengths summing
    /// to `data.len()`); the object grows as needed.
    pub fn write(&self, object: u64, extents: &[Extent], data: &[u8]) -> io::Result<()> {
        let f = self.for_write(object)?;
        f.dirty.store(true, Ordering::Release);
        let mut at = 0usize;
        for e in extents {
            let end = at + e.len as usize;
            let part = data.get(at..end).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "extents longer than the data")
            })?;
            f.file.write_all_at(part, e.offset)?;
            at = end;
        }
        Ok(())
    }

    /// Positioned read of `extents`, concatenated; it stops at the end of
    /// the object (so the reply is short), and is empty for an object never
    /// written (a hole, or a removed file's object).
    pub fn read(&self, object: u64, extents: &[Extent]) -> io::Result<Vec<u8>> {
        let Some(f) = self.existing(object)? else {
            return Ok(Vec::new());
        };
        gather(&f.file, extents, |buf, offset| {
            f.file.read_exact_at(buf, offset)
        })
    }

    /// [`ObjectStore::read`] if it can be done without waiting for the
    /// disk: the object is open already and every byte is in the page
    /// cache (`preadv2` with `RWF_NOWAIT`); `None` when it would wait (the
    /// caller then reads on a storage thread). What the scheduling loop
    /// serves itself, sparing a small read the hop to a storage thread.
    pub fn read_if_cached(&self, object: u64, extents: &[Extent]) -> Option<io::Result<Vec<u8>>> {
        let f = self.cached(object)?;
        match gather(&f.file, extents, |buf, offset| {
            read_now(&f.file, buf, offset)
        }) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            read => Some(read),
        }
    }

    /// Makes the object's data durable: a disk flush unless nothing was
    /// written to it since its last one.
    pub fn fsync(&self, object: u64) -> io::Result<()> {
        let Some(f) = self.existing(object)? else {
            return Ok(());
        };
        // Cleared before the flush: a write that lands meanwhile marks it
        // again, and the next fsync flushes that too.
        if f.dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = f.file.sync_all() {
                f.dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// The object's length and modification time (ns since the epoch); zeros if it does not exist.
    pub fn size(&self, object: u64) -> io::Result<(u64, u64)> {
        let meta = match self.cached(object) {
            Some(f) => Some(f.file.metadata()?),
            None => absent(std::fs::metadata(self.path(object)))?,
        };
        Ok(meta.map_or((0, 0), |m| {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64);
            (m.len(), mtime)
        }))
    }

    /// Cuts or extends the object to `size` bytes, durably.
    pub fn truncate(&self, object: u64, size: u64) -> io::Result<()> {
        if size == 0 && self.existing(object)?.is_none() {
            return Ok(());
        }
        let f = self.for_write(object)?;
        f.file.set_len(size)?;
        f.file.sync_all()
    }

    /// Deletes the objects (those never written need nothing), and makes
    /// the deletions durable with one flush of the objects' directory.
    pub fn remove(&self, objects: &[u64]) -> io::Result<()> {
        for &object in objects {
            let _removing = self.lifecycle(object);
            self.open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop(&object);
            absent(std::fs::remove_file(self.path(object)))?;
        }
        File::open(&self.dir)?.sync_all()
    }

    /// Total, free and available (to unprivileged users) bytes of the file
    /// system holding the objects, and that file system's identity.
    pub fn space(&self) -> io::Result<DiskSpace> {
        disk_space(&self.dir)
    }
}

/// What `statvfs` says of the file system holding a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSpace {
    pub total: u64,
    /// Free bytes, the superuser's reserve included.
    pub free: u64,
    /// Free bytes an unprivileged user may take.
    pub available: u64,
    /// The file system's id (`f_fsid`): servers on one machine that share
    /// a disk report the same one, so it is counted once.
    pub fsid: u64,
}

/// One number for a file system on this machine: its id and the machine's
/// boot id together, so that servers sharing a disk report the same and
/// servers on different machines (whose file system ids may collide) do not.
pub fn disk_identity(fsid: u64) -> u64 {
    use sha2::{Digest, Sha256};
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let mut h = Sha256::new();
    h.update(boot.trim().as_bytes());
    h.update(fsid.to_le_bytes());
    let digest = h.finalize();
    u64::from_le_bytes(digest[..8].try_into().unwrap_or([0; 8]))
}

/// [`DiskSpace`] of the file system holding `dir`.
pub fn disk_space(dir: &Path) -> io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call and
    // `stat` is a plain-data struct statvfs fills in.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let block = stat.f_frsize as u64;
    Ok(DiskSpace {
        total: stat.f_blocks as u64 * block,
        free: stat.f_bfree as u64 * block,
        available: stat.f_bavail as u64 * block,
        fsid: stat.f_fsid as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_io_round_trips_and_reads_stop_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let s = ObjectStore::open(dir.path()).unwrap();
        let extents = [Extent::new(0, 3), Extent::new(10, 2)];
        s.write(7, &extents, b"abcde").unwrap();
        assert_eq!(s.read(7, &extents).unwrap(), b"abcde");
        assert_eq!(
            s.read(
                7,
                &[Extent::new(8, 2), Extent::new(11, 5), Extent::new(20, 1)]
            )
            .unwrap(),
            b"\0\0e"
        );
        assert_eq!(s.size(7).unwrap().0, 12);
        s.truncate(7, 2).unwrap();
        assert_eq!(s.read(7, &[Extent::new(0, 10)]).unwrap(), b"ab");
        s.remove(&[7, 9]).unwrap();
        assert_eq!(s.size(7).unwrap(), (0, 0));
        assert!(s.read(8, &extents).unwrap().is_empty(), "never written");
        let space = s.space().unwrap();
        assert!(space.total >= space.free && space.free >= space.available && space.total > 0);
    }

    /// The files the authority knows of; everything else is gone.
    struct Known(Vec<u64>);

    impl ObjectAuthority for Known {
        fn is_live(&self, object: u64) -> io::Result<bool> {
            Ok(self.0.contains(&object))
        }
    }

    /// A removed file's object stays removed: a write or truncate through a
    /// stale descriptor gets ESTALE and brings back no object, whether the
    /// object existed on this server or not, while live files' objects are
    /// created as before.
    #[test]
    fn an_object_of_a_removed_file_is_never_created_again() {
        let dir = tempfile::tempdir().unwrap();
        let s = ObjectStore::open(dir.path()).unwrap();
        let whole = [Extent::new(0, 4)];
        s.write(7, &whole, b"data").unwrap();
        s.set_authority(Arc::new(Known(vec![8])));
        s.remove(&[7]).unwrap();
        for object in [7, 9] {
            let e = s.write(object, &whole, b"late").unwrap_err();
            assert_eq!(error_kind(&e), ErrorKind::Stale, "{e}");
            assert!(e.to_string().contains("has been removed"), "{e}");
            assert_eq!(
                error_kind(&s.truncate(object, 10).unwrap_err()),
                ErrorKind::Stale
            );
            assert!(!s.path(object).exists(), "no object came back");
        }
        s.write(8, &whole, b"live").unwrap();
        assert_eq!(s.read(8, &whole).unwrap(), b"live");
        assert_eq!(
            error_kind(&io::Error::from_raw_os_error(libc::ENOSPC)),
            ErrorKind::NoSpace
        );
    }

    /// Tombstones of an older server (a file per removed object) are gone
    /// once the store opens: nothing of a removed file outlives it.
    #[test]
    fn old_tombstones_are_removed_when_the_store_opens() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("objects").join(OLD_TOMBSTONES);
        std::fs::create_dir_all(&old).unwrap();
        for i in 0..10 {
            std::fs::write(old.join(format!("{i:016x}")), b"").unwrap();
        }
        let s = ObjectStore::open(dir.path()).unwrap();
        assert!(!old.exists());
        s.write(1, &[Extent::new(0, 1)], b"x").unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("objects"))
                .unwrap()
                .count(),
            1
        );
    }

    /// A read of cached pages is served at once, and one that would wait
    /// for the disk (or an object not open) is left to a storage thread.
    #[test]
    fn a_read_of_cached_pages_is_served_and_others_are_left() {
        let dir = tempfile::tempdir().unwrap();
        let s = ObjectStore::open(dir.path()).unwrap();
        let extents = [Extent::new(0, 3), Extent::new(10, 2)];
        s.write(7, &extents, b"abcde").unwrap();
        assert_eq!(s.read_if_cached(7, &extents).unwrap().unwrap(), b"abcde");
        assert_eq!(
            s.read_if_cached(7, &[Extent::new(11, 5)]).unwrap().unwrap(),
            b"e"
        );
        assert!(s.read_if_cached(8, &extents).is_none(), "not open: left");
        // Pages dropped from the cache: a read would wait, so it is left.
        let f = s.cached(7).unwrap();
        f.file.sync_all().unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: advice on the open object file's descriptor.
        unsafe { libc::posix_fadvise(f.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        match s.read_if_cached(7, &extents) {
            None => assert_eq!(s.read(7, &extents).unwrap(), b"abcde"),
            // The kernel may keep pages it was advised to drop; then they
            // are still served right.
            Some(read) => assert_eq!(read.unwrap(), b"abcde"),
        }
    }

    /// An fsync flushes only what was written since the last one, and an
    /// object evicted from the open-file cache is flushed when asked.
    #[test]
    fn fsync_flushes_what_was_written_and_the_cache_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let s = ObjectStore::open(dir.path()).unwrap();
        let one = [Extent::new(0, 1)];
        s.write(1, &one, b"a").unwrap();
        assert!(s.cached(1).unwrap().dirty.load(Ordering::Acquire));
        s.fsync(1).unwrap();
        assert!(!s.cached(1).unwrap().dirty.load(Ordering::Acquire));
        s.fsync(1).unwrap();
        s.write(1, &one, b"b").unwrap();
        assert!(s.cached(1).unwrap().dirty.load(Ordering::Acquire));
        let budget = open_file_budget() as u64;
        for object in 2..budget + 10 {
            s.write(object, &one, b"x").unwrap();
        }
        let held = s.open.lock().unwrap().len() as u64;
        assert_eq!(held, budget, "the cache holds at most its budget");
        assert!(s.cached(1).is_none(), "the least recently used went first");
        s.fsync(1).unwrap();
        assert_eq!(s.read(1, &one).unwrap(), b"b");
    }
}
