//! The process's one client of the cluster (made at the first Concerto
//! open), which file names are Concerto's, and the files it has open.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use concerto_client::{
    load_cluster, ClientError, ClusterFile, FileHandle, FsClient, Identity, MOUNT_SOURCE,
};
use concerto_core::Extent;

use crate::hints::Hints;
use crate::view::View;

/// The variable naming the cluster file (as for `concerto fs` and the
/// Python library); `concerto mpirun` sets it for every rank.
pub const CLUSTER_VAR: &str = "CONCERTO_CLUSTER";

/// ROMIO's convention for naming a file system driver in a file name.
pub const PREFIX: &str = "concerto:";

/// The variable giving the bytes a rank's independent writes may hold
/// behind (a size, as `16MiB`; `0`: each write reaches its servers before
/// it returns). Default: the mount's, `concerto_client::DEFAULT_WRITE_BEHIND`.
pub const WRITE_BEHIND_VAR: &str = "CONCERTO_MPIIO_WRITE_BEHIND";

/// The process's write-behind bound from `WRITE_BEHIND_VAR`.
fn write_behind_bound(var: Option<String>) -> Result<u64, String> {
    match var.filter(|v| !v.is_empty()) {
        None => Ok(concerto_client::DEFAULT_WRITE_BEHIND),
        Some(v) => concerto_core::units::parse_size(&v)
            .map_err(|e| format!("{WRITE_BEHIND_VAR}={v:?}: {e}")),
    }
}

/// The client and the runtime its requests run on.
pub struct Session {
    runtime: tokio::runtime::Runtime,
    pub client: FsClient,
    /// Whether independent writes are held behind (`WRITE_BEHIND_VAR` > 0).
    pub write_behind: bool,
}

static SESSION: OnceLock<Result<Session, String>> = OnceLock::new();

impl Session {
    /// The process's session, made on first use from the cluster file
    /// `CONCERTO_CLUSTER` names, the credential `concerto_client` finds
    /// for it, and the identity the environment gives this rank.
    pub fn get() -> Result<&'static Session, String> {
        SESSION
            .get_or_init(Session::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    fn start() -> Result<Session, String> {
        let path = std::env::var(CLUSTER_VAR)
            .ok()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                format!(
                    "{CLUSTER_VAR} is not set: name the cluster file (`concerto mpirun` sets it)"
                )
            })?;
        let (cluster, credential) =
            load_cluster(Path::new(&path)).map_err(|e| format!("{CLUSTER_VAR}: {e}"))?;
        let bound = write_behind_bound(std::env::var(WRITE_BEHIND_VAR).ok())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("concerto-mpiio")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the client runtime: {e}"))?;
        Ok(Session {
            runtime,
            client: FsClient::new(cluster, Identity::from_env(), credential)
                .with_write_behind(bound.max(1)),
            write_behind: bound > 0,
        })
    }

    /// Runs a client call to its end.
    pub fn run<T>(&self, f: impl Future<Output = Result<T, ClientError>>) -> Result<T, String> {
        self.runtime.block_on(f).map_err(|e| e.to_string())
    }

    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> tokio::task::JoinHandle<T> {
        self.runtime.spawn(f)
    }

    pub fn wait<T>(&self, task: tokio::task::JoinHandle<T>) -> Result<T, String> {
        self.runtime
            .block_on(task)
            .map_err(|e| format!("an I/O task failed: {e}"))
    }
}

/// The path in the cluster's namespace a file name means, if it is
/// Concerto's: `concerto:/PATH`, or a path under a Concerto FUSE mount of
/// the configured cluster. A path under another cluster's mount (or under
/// one that does not name its cluster), or under any mount when no
/// cluster is configured, is left to the MPI library, which reaches it
/// through that mount: the library never writes one cluster's file to
/// another cluster.
pub fn resolve(name: &str) -> Option<String> {
    if let Some(rest) = name.strip_prefix(PREFIX) {
        let rest = rest.trim_start_matches('/');
        return Some(format!("/{rest}"));
    }
    let cluster = std::env::var_os(CLUSTER_VAR).filter(|v| !v.is_empty())?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let absolute = lexical(&std::env::current_dir().ok()?.join(name));
    let (source, rest) = mount_of(&mountinfo, &absolute)?;
    let ours = std::fs::read_to_string(cluster)
        .ok()
        .and_then(|text| ClusterFile::parse(&text).ok())?
        .mount_source();
    (source == ours).then(|| format!("/{}", rest.display()))
}

/// The Concerto mount `absolute` is under (the deepest, if mounts nest):
/// its source and the path below its mount point.
fn mount_of(mountinfo: &str, absolute: &Path) -> Option<(String, PathBuf)> {
    concerto_mounts(mountinfo)
        .into_iter()
        .filter_map(|(point, source)| {
            let rest = absolute.strip_prefix(&point).ok()?.to_path_buf();
            Some((source, rest))
        })
        .min_by_key(|(_, rest)| rest.components().count())
}

/// Concerto's FUSE mounts in a mountinfo text, each its mount point and
/// source: type `fuse.concerto` (mounted through fusermount3, which keeps
/// the subtype), or `fuse` with source `concerto` or `concerto@CLUSTER`
/// (mounted by root with mount(2)).
fn concerto_mounts(mountinfo: &str) -> Vec<(PathBuf, String)> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut fields = right.split_whitespace();
            let (kind, source) = (fields.next()?, fields.next()?);
            let named = source.split('@').next() == Some(MOUNT_SOURCE);
            (kind == "fuse.concerto" || (kind == "fuse" && named))
                .then(|| (PathBuf::from(unescape(point)), unescape(source)))
        })
        .collect()
}

/// Mountinfo writes spaces and such as octal escapes (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `.` and `..` taken out of an absolute path without asking the file
/// system (the file may not exist yet).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// How a file was opened (`MPI_MODE_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amode {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub exclusive: bool,
    pub append: bool,
    pub delete_on_close: bool,
}

/// A file a rank has open.
pub struct OpenFile {
    pub path: String,
    pub handle: FileHandle,
    pub amode: Amode,
    pub view: View,
    /// The individual file pointer, in elementary types of the view.
    pub pointer: u64,
    pub hints: Hints,
    /// The file's size is at least this: the end of a collective write
    /// the ranks hold behind (every rank learned every rank's span in the
    /// call's first exchange), so that every rank's `MPI_File_get_size`
    /// after the call agrees, as after a written-through plan, before the
    /// bytes land. Forgotten when a collective call sets the size.
    pub size_floor: u64,
}

impl OpenFile {
    /// The file's size as this rank may report it: the servers' (after
    /// this rank's held writes) or the floor, whichever is larger.
    pub fn size(&self, s: &Session) -> Result<u64, String> {
        Ok(s.run(s.client.fstat(&self.handle))?
            .size
            .max(self.size_floor))
    }

    /// The file extents of an access of `bytes` at `offset` (in
    /// elementary types of the view).
    pub fn extents(&self, offset: u64, bytes: u64) -> Vec<Extent> {
        self.view.extents(offset * self.view.etype_size, bytes)
    }
}

/// The files this process has open, by the id the MPI side holds.
#[derive(Default)]
pub struct Files {
    next: u64,
    open: HashMap<u64, Arc<Mutex<OpenFile>>>,
}

static FILES: OnceLock<Mutex<Files>> = OnceLock::new();

fn files() -> std::sync::MutexGuard<'static, Files> {
    FILES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

pub fn register(file: OpenFile) -> u64 {
    let mut f = files();
    f.next += 1;
    let id = f.next;
    f.open.insert(id, Arc::new(Mutex::new(file)));
    id
}

pub fn get(id: u64) -> Result<Arc<Mutex<OpenFile>>, String> {
    files()
        .open
        .get(&id)
        .cloned()
        .ok_or_else(|| format!("no open Concerto file {id}"))
}

pub fn remove(id: u64) -> Result<Arc<Mutex<OpenFile>>, String> {
    files()
        .open
        .remove(&id)
        .ok_or_else(|| format!("no open Concerto file {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_names_a_namespace_path() {
        assert_eq!(resolve("concerto:/a/b").as_deref(), Some("/a/b"));
        assert_eq!(resolve("concerto:c").as_deref(), Some("/c"));
    }

    #[test]
    fn concerto_mounts_are_found_in_mountinfo_with_escapes() {
        let info = "36 35 98:0 / /mnt/x rw - ext4 /dev/root rw\n\
                    40 35 0:44 / /mnt/con\\040fs rw,nosuid - fuse.concerto concerto rw\n\
                    43 27 0:39 / /tmp/mm rw,nosuid - fuse concerto rw,user_id=0\n\
                    44 27 0:40 / /tmp/other rw,nosuid - fuse sshfs rw,user_id=0\n";
        let points: Vec<PathBuf> = concerto_mounts(info).into_iter().map(|m| m.0).collect();
        assert_eq!(
            points,
            vec![PathBuf::from("/mnt/con fs"), PathBuf::from("/tmp/mm")]
        );
    }

    #[test]
    fn a_path_is_under_the_deepest_mount_with_that_mounts_cluster() {
        let info = "40 35 0:44 / /m rw - fuse concerto@10.0.0.1:7000 rw\n\
                    41 40 0:45 / /m/inner rw - fuse concerto@10.0.0.2:7000 rw\n\
                    42 35 0:46 / /x rw - fuse sshfs@10.0.0.3 rw\n";
        let at = |p: &str| mount_of(info, Path::new(p));
        assert_eq!(
            at("/m/a/b"),
            Some(("concerto@10.0.0.1:7000".into(), PathBuf::from("a/b")))
        );
        assert_eq!(
            at("/m/inner/c"),
            Some(("concerto@10.0.0.2:7000".into(), PathBuf::from("c")))
        );
        assert_eq!(at("/x/d"), None, "not a Concerto mount");
        assert_eq!(at("/elsewhere"), None);
    }

    #[test]
    fn the_write_behind_bound_is_a_size_and_a_bad_one_is_named() {
        assert_eq!(
            write_behind_bound(None).unwrap(),
            concerto_client::DEFAULT_WRITE_BEHIND
        );
        assert_eq!(write_behind_bound(Some("4MiB".into())).unwrap(), 4 << 20);
        assert_eq!(write_behind_bound(Some("0".into())).unwrap(), 0);
        let e = write_behind_bound(Some("lots".into())).unwrap_err();
        assert!(e.contains(WRITE_BEHIND_VAR) && e.contains("lots"), "{e}");
    }

    #[test]
    fn lexical_paths_lose_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
