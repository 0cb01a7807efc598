//! Object files under a server's data directory. Names derive only from the
//! numeric object id, never from anything a client wrote.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct ObjectStore {
    dir: PathBuf,
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

    /// Positioned write; the object grows as needed.
    pub fn write(&self, object: u64, offset: u64, data: &[u8]) -> io::Result<()> {
        let f = OpenOptions::new().create(true).write(true).truncate(false).open(self.path(object))?;
        f.write_all_at(data, offset)
    }

    /// Positioned read of up to `len` bytes; shorter at the end of the
    /// object, empty for an object never written.
    pub fn read(&self, object: u64, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let f = match File::open(self.path(object)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let size = f.metadata()?.len();
        let n = size.saturating_sub(offset).min(len) as usize;
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// Makes the object's data durable.
    pub fn fsync(&self, object: u64) -> io::Result<()> {
        match File::open(self.path(object)) {
            Ok(f) => f.sync_all(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}
