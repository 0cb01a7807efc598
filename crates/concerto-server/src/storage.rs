//! Object files under a server's data directory. Names derive only from the
//! numeric object id, never from anything a client wrote.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use concerto_core::Extent;

#[derive(Clone, Debug)]
pub struct ObjectStore {
    dir: PathBuf,
}

fn absent_is<T>(r: io::Result<T>, absent: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => absent(),
        other => other,
    }
}

impl ObjectStore {
    /// Uses (and creates) `dir/objects`.
    pub fn open(dir: &Path) -> io::Result<ObjectStore> {
        let dir = dir.join("objects");
        std::fs::create_dir_all(&dir)?;
        Ok(ObjectStore { dir })
    }

    fn path(&self, object: u64) -> PathBuf {
        self.dir.join(format!("{object:016x}"))
    }

    /// Positioned write of `data` over `extents` (ascending, lengths summing
    /// to `data.len()`); the object grows as needed.
    pub fn write(&self, object: u64, extents: &[Extent], data: &[u8]) -> io::Result<()> {
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(self.path(object))?;
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
    /// the object (so the reply is short), and is empty for an object never written.
    pub fn read(&self, object: u64, extents: &[Extent]) -> io::Result<Vec<u8>> {
        let Some(f) = absent_is(File::open(self.path(object)).map(Some), || Ok(None))? else {
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
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(self.path(object))?;
        f.set_len(size)?;
        f.sync_all()
    }

    /// Deletes the object (nothing to do if it was never written).
    pub fn remove(&self, object: u64) -> io::Result<()> {
        absent_is(std::fs::remove_file(self.path(object)), || Ok(()))
    }

    /// Total and free bytes of the file system holding the objects.
    pub fn space(&self) -> io::Result<(u64, u64)> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes())
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
        assert!(s.read(7, &extents).unwrap().is_empty());
        let (total, free) = s.space().unwrap();
        assert!(total >= free && total > 0);
    }
}
