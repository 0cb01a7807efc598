//! Object files under a server's data directory. Names derive only from the
//! numeric object id, never from anything a client wrote.
//!
//! An object comes into being with its first write, and a removed object
//! leaves a tombstone (an empty file in `objects/removed/`): a file's
//! objects are its inode number, which the metadata service never reuses,
//! so a write or read that reaches an object after its file was unlinked
//! (through a descriptor opened before, on any client) is refused with
//! ESTALE instead of bringing back an object no file points to, or reading
//! as empty. Only an object's first write looks for a tombstone; a write to
//! an object that exists opens it directly.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use concerto_core::Extent;
use concerto_proto::ErrorKind;

#[derive(Clone, Debug)]
pub struct ObjectStore {
    dir: PathBuf,
    /// Held while an object is brought into being and while one is
    /// removed, so a first write cannot slip between a removal's tombstone
    /// and its delete.
    lifecycle: Arc<Mutex<()>>,
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

/// Where tombstones live, under the objects directory.
const REMOVED: &str = "removed";

fn absent_is<T>(r: io::Result<T>, absent: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => absent(),
        other => other,
    }
}

impl ObjectStore {
    /// Uses (and creates) `dir/objects` and its tombstones, `dir/objects/removed`.
    pub fn open(dir: &Path) -> io::Result<ObjectStore> {
        let dir = dir.join("objects");
        std::fs::create_dir_all(dir.join(REMOVED))?;
        Ok(ObjectStore {
            dir,
            lifecycle: Arc::default(),
        })
    }

    fn path(&self, object: u64) -> PathBuf {
        self.dir.join(format!("{object:016x}"))
    }

    fn tombstone(&self, object: u64) -> PathBuf {
        self.dir.join(REMOVED).join(format!("{object:016x}"))
    }

    /// The object opened for writing, brought into being if it was never
    /// written; refused if it was removed.
    fn open_for_write(&self, object: u64) -> io::Result<File> {
        let existing = OpenOptions::new().write(true).open(self.path(object));
        absent_is(existing, || {
            let _creating = self.lifecycle.lock().unwrap_or_else(|p| p.into_inner());
            if self.tombstone(object).exists() {
                return Err(stale(object));
            }
            OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(self.path(object))
        })
    }

    /// Positioned write of `data` over `extents` (ascending, lengths summing
    /// to `data.len()`); the object grows as needed.
    pub fn write(&self, object: u64, extents: &[Extent], data: &[u8]) -> io::Result<()> {
        let f = self.open_for_write(object)?;
        let mut at = 0usize;
        for e in extents {
            let end = at + e.len as usize;
            let part = data.get(at..end).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "extents longer than the data")
            })?;
            f.write_all_at(part, e.offset)?;
            at = end;
        }
        Ok(())
    }

    /// Positioned read of `extents`, concatenated; it stops at the end of
    /// the object (so the reply is short), and is empty for an object never
    /// written; refused for one removed.
    pub fn read(&self, object: u64, extents: &[Extent]) -> io::Result<Vec<u8>> {
        let Some(f) = absent_is(File::open(self.path(object)).map(Some), || Ok(None))? else {
            if self.tombstone(object).exists() {
                return Err(stale(object));
            }
            return Ok(Vec::new());
        };
        let size = f.metadata()?.len();
        let mut out = Vec::with_capacity(extents.iter().map(|e| e.len as usize).sum());
        for e in extents {
            let n = size.saturating_sub(e.offset).min(e.len) as usize;
            let at = out.len();
            out.resize(at + n, 0);
            f.read_exact_at(&mut out[at..], e.offset)?;
            if (n as u64) < e.len {
                break;
            }
        }
        Ok(out)
    }

    /// Makes the object's data durable.
    pub fn fsync(&self, object: u64) -> io::Result<()> {
        absent_is(
            File::open(self.path(object)).and_then(|f| f.sync_all()),
            || Ok(()),
        )
    }

    /// The object's length and modification time (ns since the epoch); zeros if it does not exist.
    pub fn size(&self, object: u64) -> io::Result<(u64, u64)> {
        absent_is(
            std::fs::metadata(self.path(object)).map(|m| {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as u64);
                (m.len(), mtime)
            }),
            || Ok((0, 0)),
        )
    }

    /// Cuts or extends the object to `size` bytes, durably.
    pub fn truncate(&self, object: u64, size: u64) -> io::Result<()> {
        if size == 0 && !self.path(object).exists() {
            return Ok(());
        }
        let f = self.open_for_write(object)?;
        f.set_len(size)?;
        f.sync_all()
    }

    /// Deletes the object (nothing to do if it was never written) and
    /// leaves its tombstone, durably, so later accesses are refused.
    pub fn remove(&self, object: u64) -> io::Result<()> {
        let _removing = self.lifecycle.lock().unwrap_or_else(|p| p.into_inner());
        let delete = || absent_is(std::fs::remove_file(self.path(object)), || Ok(()));
        match File::create(self.tombstone(object)) {
            Ok(_) => {}
            // On a full disk even an empty file may not fit: delete the
            // object first (which is what frees room), then mark it.
            Err(e) if error_kind(&e) == ErrorKind::NoSpace => {
                delete()?;
                File::create(self.tombstone(object))?;
            }
            Err(e) => return Err(e),
        }
        File::open(self.dir.join(REMOVED))?.sync_all()?;
        delete()
    }

    /// Total and free bytes of the file system holding the objects.
    pub fn space(&self) -> io::Result<(u64, u64)> {
        disk_space(&self.dir)
    }
}

/// Total and free (to unprivileged users) bytes of the file system holding `dir`.
pub fn disk_space(dir: &Path) -> io::Result<(u64, u64)> {
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
    Ok((stat.f_blocks as u64 * block, stat.f_bavail as u64 * block))
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
        s.remove(7).unwrap();
        assert_eq!(s.size(7).unwrap(), (0, 0));
        assert!(s.read(8, &extents).unwrap().is_empty(), "never written");
        let (total, free) = s.space().unwrap();
        assert!(total >= free && total > 0);
    }

    /// A removed object stays removed: a write or read through a stale
    /// descriptor gets ESTALE and brings back no object, while other
    /// objects are untouched.
    #[test]
    fn a_removed_object_refuses_later_access_and_never_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let s = ObjectStore::open(dir.path()).unwrap();
        let whole = [Extent::new(0, 4)];
        s.write(7, &whole, b"data").unwrap();
        s.remove(7).unwrap();
        s.remove(9).unwrap();
        for object in [7, 9] {
            let e = s.write(object, &whole, b"late").unwrap_err();
            assert_eq!(error_kind(&e), ErrorKind::Stale, "{e}");
            assert!(e.to_string().contains("has been removed"), "{e}");
            assert_eq!(
                error_kind(&s.read(object, &whole).unwrap_err()),
                ErrorKind::Stale
            );
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
}
