//! The metadata service: the namespace (directories, files, their
//! attributes) and each file's stripe layout, in an embedded ACID store
//! (redb). Every mutating operation is one write transaction, durable when
//! it returns, so a crash leaves either the old namespace or the new one.
//!
//! A file's size is not stored here. As in PVFS2, it is derived from the
//! lengths of the file's objects on the data servers (the client's `stat`
//! asks them), which is what makes it right after concurrent strided
//! writes from many clients without a metadata update per write.
//!
//! Tables:
//! - `inodes`: inode number → bincode [`Inode`]
//! - `entries`: (directory inode, name) → child inode; a directory's entries
//!   are one key range, listed in name order
//! - `counters`: the next inode number and the numbers of files and directories

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use concerto_proto::namespace;
use concerto_proto::{
    DirEntry, ErrorKind, FileKind, FsCounts, LayoutRequest, MetaAttr, MetaReply, MetaRequest,
    WireLayout, MAX_ENTRIES,
};

const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
const ENTRIES: TableDefinition<(u64, &str), u64> = TableDefinition::new("entries");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

const ROOT: u64 = 1;
const NEXT_INODE: &str = "next_inode";
const FILES: &str = "files";
const DIRECTORIES: &str = "directories";

/// What the metadata service needs to know of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataConfig {
    /// Ids of the data servers new files are striped over.
    pub data_servers: Vec<u32>,
    /// The root directory's default layout when the store is first created.
    pub default_unit: u64,
    pub default_count: u32,
}

#[derive(Debug, Error)]
pub enum MetaError {
    #[error("{0}: no such file or directory")]
    NotFound(String),
    #[error("{0}: already exists")]
    Exists(String),
    #[error("{0}: directory not empty")]
    NotEmpty(String),
    #[error("{0}: not a directory")]
    NotADirectory(String),
    #[error("{0}: is a directory")]
    IsADirectory(String),
    #[error("{0}")]
    Invalid(String),
    #[error("metadata store: {0}")]
    Store(String),
    /// The store's disk failed; the store is closed and opened again by
    /// the next operation.
    #[error("metadata store: {0}")]
    StoreIo(String),
    /// The store's disk is full; as `StoreIo`, the next operation opens
    /// the store again, and works once space was freed.
    #[error("metadata store: {0}")]
    NoSpace(String),
}

impl MetaError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            MetaError::NotFound(_) => ErrorKind::NotFound,
            MetaError::Exists(_) => ErrorKind::Exists,
            MetaError::NotEmpty(_) => ErrorKind::NotEmpty,
            MetaError::NotADirectory(_) => ErrorKind::NotADirectory,
            MetaError::IsADirectory(_) => ErrorKind::IsADirectory,
            MetaError::Invalid(_) => ErrorKind::Invalid,
            MetaError::Store(_) | MetaError::StoreIo(_) => ErrorKind::Io,
            MetaError::NoSpace(_) => ErrorKind::NoSpace,
        }
    }

    /// Whether the store must be closed and opened again: redb refuses
    /// every later transaction after an I/O error ("Previous I/O error
    /// occurred. Please close and re-open the database.").
    fn needs_reopen(&self) -> bool {
        matches!(self, MetaError::StoreIo(_) | MetaError::NoSpace(_))
    }
}

/// Every redb error kind converts into `redb::Error`; all of them mean the
/// store failed, and an I/O error says whether the disk was full.
impl<E: Into<redb::Error>> From<E> for MetaError {
    fn from(e: E) -> MetaError {
        match e.into() {
            redb::Error::Io(io) => match io.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
                    MetaError::NoSpace(format!("{io} (free space, then retry)"))
                }
                _ => MetaError::StoreIo(io.to_string()),
            },
            e @ redb::Error::PreviousIo => MetaError::StoreIo(e.to_string()),
            e => MetaError::Store(e.to_string()),
        }
    }
}

/// A stored file or directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Inode {
    kind: FileKind,
    ctime_ns: u64,
    mtime_ns: u64,
    layout: Option<WireLayout>,
    default_layout: Option<(u64, u32)>,
    entries: u64,
}

impl Inode {
    fn attr(&self, inode: u64) -> MetaAttr {
        MetaAttr {
            inode,
            kind: self.kind,
            ctime_ns: self.ctime_ns,
            mtime_ns: self.mtime_ns,
            layout: self.layout.clone(),
            default_layout: self.default_layout,
            entries: self.entries,
        }
    }
}

fn encode(inode: &Inode) -> Vec<u8> {
    bincode::serialize(inode).unwrap_or_default()
}

fn load<T: ReadableTable<u64, &'static [u8]>>(
    inodes: &T,
    ino: u64,
) -> Result<Option<Inode>, MetaError> {
    match inodes.get(ino)? {
        None => Ok(None),
        Some(bytes) => bincode::deserialize(bytes.value())
            .map(Some)
            .map_err(|e| MetaError::Store(format!("inode {ino} is corrupt: {e}"))),
    }
}

/// Walks `names` from the root: the inode they name, or the error a shell would show.
fn resolve<I, E>(inodes: &I, entries: &E, names: &[&str]) -> Result<(u64, Inode), MetaError>
where
    I: ReadableTable<u64, &'static [u8]>,
    E: ReadableTable<(u64, &'static str), u64>,
{
    let shown = |upto: usize| format!("/{}", names[..upto].join("/"));
    let mut ino = ROOT;
    let mut node = load(inodes, ROOT)?
        .ok_or_else(|| MetaError::Store("the root directory is missing".into()))?;
    for (i, name) in names.iter().enumerate() {
        if node.kind != FileKind::Directory {
            return Err(MetaError::NotADirectory(shown(i)));
        }
        ino = entries
            .get((ino, *name))?
            .ok_or_else(|| MetaError::NotFound(shown(i + 1)))?
            .value();
        node = load(inodes, ino)?.ok_or_else(|| {
            MetaError::Store(format!(
                "entry {} points to missing inode {ino}",
                shown(i + 1)
            ))
        })?;
    }
    Ok((ino, node))
}

fn resolve_dir<I, E>(inodes: &I, entries: &E, names: &[&str]) -> Result<(u64, Inode), MetaError>
where
    I: ReadableTable<u64, &'static [u8]>,
    E: ReadableTable<(u64, &'static str), u64>,
{
    let (ino, node) = resolve(inodes, entries, names)?;
    if node.kind != FileKind::Directory {
        return Err(MetaError::NotADirectory(format!("/{}", names.join("/"))));
    }
    Ok((ino, node))
}

fn bump(counters: &mut redb::Table<&str, u64>, key: &str, delta: i64) -> Result<u64, MetaError> {
    let now = counters.get(key)?.map_or(0, |v| v.value());
    let next = now.saturating_add_signed(delta);
    counters.insert(key, next)?;
    Ok(now)
}

/// The namespace in `dir/metadata.redb`. After a disk error (a full disk,
/// most often) redb refuses every later transaction until the database is
/// opened again, so the store closes it and the next operation opens it
/// again: once space is freed, the service works on without a restart. A
/// transaction that failed was not committed, so reopening finds the last
/// committed state.
///
/// Freeing space on a full disk takes a transaction too (an unlink), and a
/// transaction needs room. So the store keeps a reserve file beside the
/// database (`metadata.reserve`, [`RESERVE_BYTES`]), as databases keep
/// ballast. When the disk is full under a transaction, the reserve goes
/// and the store takes only operations that free space or change nothing
/// (unlink, rmdir, rename, truncate, lookups) until the disk has room for
/// the reserve again: deletes go through and make room, and creates, which
/// would fill the disk again, are refused with NoSpace meanwhile.
pub struct MetadataStore {
    path: PathBuf,
    reserve: PathBuf,
    /// Whether the reserve is given up (deletes only).
    reserve_gone: std::sync::Mutex<bool>,
    cfg: MetadataConfig,
    /// `None` while closed after a disk error. Operations share the read
    /// side; closing and reopening take the write side, so no transaction
    /// is open when the database is dropped.
    open: RwLock<Option<Namespace>>,
}

impl MetadataStore {
    /// Opens (creating on first use) the store in `dir/metadata.redb`.
    pub fn open(dir: &Path, cfg: MetadataConfig) -> Result<MetadataStore, MetaError> {
        if cfg.data_servers.is_empty() {
            return Err(MetaError::Invalid(
                "the metadata service needs at least one data server".into(),
            ));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| MetaError::Store(format!("{}: {e}", dir.display())))?;
        let path = dir.join("metadata.redb");
        let namespace = Namespace::open(&path, cfg.clone())?;
        let store = MetadataStore {
            path,
            reserve: dir.join("metadata.reserve"),
            reserve_gone: std::sync::Mutex::new(false),
            cfg,
            open: RwLock::new(Some(namespace)),
        };
        if !store.reserve.exists() && store.make_reserve().is_err() {
            *store.reserve_gone.lock().unwrap_or_else(|p| p.into_inner()) = true;
        }
        Ok(store)
    }

    /// Writes the reserve file (real blocks, not a sparse file); a partial
    /// one is removed.
    fn make_reserve(&self) -> std::io::Result<()> {
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&self.reserve)?;
            let block = vec![0u8; 64 << 10];
            for _ in 0..RESERVE_BYTES / block.len() as u64 {
                f.write_all(&block)?;
            }
            f.sync_all()
        };
        write().inspect_err(|_| {
            let _ = std::fs::remove_file(&self.reserve);
        })
    }

    /// Gives the reserve up when a transaction found the disk full.
    fn release_reserve(&self) {
        let mut gone = self.reserve_gone.lock().unwrap_or_else(|p| p.into_inner());
        if *gone {
            return;
        }
        *gone = true;
        eprintln!(
            "concerto-server: the metadata store's disk is full; its reserve ({}) is given up so that \
             deletes can make room",
            self.reserve.display()
        );
        let _ = std::fs::remove_file(&self.reserve);
    }

    /// Whether the store takes only what frees space: the reserve is gone
    /// and cannot be taken back yet (the disk lacks twice its size).
    fn deletes_only(&self) -> bool {
        let mut gone = self.reserve_gone.lock().unwrap_or_else(|p| p.into_inner());
        let room = || {
            let dir = self.reserve.parent().unwrap_or(&self.reserve);
            crate::storage::disk_space(dir).is_ok_and(|(_, free)| free >= 2 * RESERVE_BYTES)
        };
        if *gone && room() && self.make_reserve().is_ok() {
            *gone = false;
        }
        *gone
    }

    /// Carries out one operation at time `now_ns` (ns since the Unix epoch).
    pub fn apply(&self, op: &MetaRequest, now_ns: u64) -> Result<MetaReply, MetaError> {
        let adds = matches!(op, MetaRequest::Mkdir { .. } | MetaRequest::Create { .. });
        if adds && self.deletes_only() {
            return Err(MetaError::NoSpace(
                "the disk is full: files and directories can be removed, not created, until \
                 there is room again"
                    .into(),
            ));
        }
        self.with(!adds, |ns| ns.apply(op, now_ns))
    }

    /// Number of inodes stored (for statistics).
    pub fn inode_count(&self) -> Result<u64, MetaError> {
        self.with(false, Namespace::inode_count)
    }

    /// Runs `f` on the open namespace (opening it if a disk error closed
    /// it) and closes it after a disk error. When the disk was full, the
    /// reserve goes, and an operation that frees space (`frees`) is tried
    /// once more.
    fn with<T>(
        &self,
        frees: bool,
        f: impl Fn(&Namespace) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        let result = self.once(&f);
        if matches!(result, Err(MetaError::NoSpace(_))) {
            self.release_reserve();
            if frees {
                return self.once(&f);
            }
        }
        result
    }

    fn once<T>(&self, f: &impl Fn(&Namespace) -> Result<T, MetaError>) -> Result<T, MetaError> {
        let result = {
            let open = self.open.read().unwrap_or_else(|p| p.into_inner());
            match open.as_ref() {
                Some(ns) => f(ns),
                None => {
                    drop(open);
                    let mut closed = self.open.write().unwrap_or_else(|p| p.into_inner());
                    if closed.is_none() {
                        *closed = Some(Namespace::open(&self.path, self.cfg.clone())?);
                    }
                    f(closed.as_ref().expect("opened just now"))
                }
            }
        };
        if result.as_ref().is_err_and(MetaError::needs_reopen) {
            *self.open.write().unwrap_or_else(|p| p.into_inner()) = None;
        }
        result
    }
}

/// Bytes kept free for the metadata store's own transactions on a full
/// disk.
pub const RESERVE_BYTES: u64 = 4 << 20;

/// The open database and what the namespace operations need.
struct Namespace {
    db: Database,
    cfg: MetadataConfig,
}

impl Namespace {
    fn open(path: &Path, cfg: MetadataConfig) -> Result<Namespace, MetaError> {
        let ns = Namespace {
            db: Database::create(path)?,
            cfg,
        };
        ns.format_if_new()?;
        Ok(ns)
    }

    fn format_if_new(&self) -> Result<(), MetaError> {
        let txn = self.db.begin_write()?;
        {
            let mut inodes = txn.open_table(INODES)?;
            txn.open_table(ENTRIES)?;
            let mut counters = txn.open_table(COUNTERS)?;
            if inodes.get(ROOT)?.is_none() {
                let count = self
                    .cfg
                    .default_count
                    .min(self.cfg.data_servers.len() as u32)
                    .max(1);
                let root = Inode {
                    kind: FileKind::Directory,
                    ctime_ns: 0,
                    mtime_ns: 0,
                    layout: None,
                    default_layout: Some((self.cfg.default_unit, count)),
                    entries: 0,
                };
                inodes.insert(ROOT, encode(&root).as_slice())?;
                counters.insert(NEXT_INODE, ROOT + 1)?;
                counters.insert(DIRECTORIES, 1)?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn apply(&self, op: &MetaRequest, now_ns: u64) -> Result<MetaReply, MetaError> {
        match op {
            MetaRequest::Lookup { path } => self.lookup(path),
            MetaRequest::Readdir { path, after } => self.readdir(path, after.as_deref()),
            MetaRequest::Statfs => self.statfs(),
            MetaRequest::Mkdir { path } => self.make(path, None, true, now_ns),
            MetaRequest::Create {
                path,
                layout,
                exclusive,
            } => self.make(path, Some(*layout), *exclusive, now_ns),
            MetaRequest::Unlink { path } => self.remove(path, FileKind::File, now_ns),
            MetaRequest::Rmdir { path } => self.remove(path, FileKind::Directory, now_ns),
            MetaRequest::Rename { from, to } => self.rename(from, to, now_ns),
            MetaRequest::Truncate { path } => self.touch_file(path, now_ns),
            MetaRequest::SetStripe { path, layout } => self.set_stripe(path, *layout, now_ns),
        }
    }

    fn lookup(&self, path: &str) -> Result<MetaReply, MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        let txn = self.db.begin_read()?;
        let (ino, node) = resolve(&txn.open_table(INODES)?, &txn.open_table(ENTRIES)?, &names)?;
        Ok(MetaReply::Attr(node.attr(ino)))
    }

    fn readdir(&self, path: &str, after: Option<&str>) -> Result<MetaReply, MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        let txn = self.db.begin_read()?;
        let (inodes, entries) = (txn.open_table(INODES)?, txn.open_table(ENTRIES)?);
        let (ino, _) = resolve_dir(&inodes, &entries, &names)?;
        let start = match after {
            Some(name) => Bound::Excluded((ino, name)),
            None => Bound::Included((ino, "")),
        };
        let mut out = Vec::new();
        let mut more = false;
        for item in entries.range::<(u64, &str)>((start, Bound::Excluded((ino + 1, ""))))? {
            let (key, child) = item?;
            if out.len() == MAX_ENTRIES {
                more = true;
                break;
            }
            let child = child.value();
            let kind = load(&inodes, child)?.map_or(FileKind::File, |n| n.kind);
            out.push(DirEntry {
                name: key.value().1.to_string(),
                inode: child,
                kind,
            });
        }
        Ok(MetaReply::Entries { entries: out, more })
    }

    fn statfs(&self) -> Result<MetaReply, MetaError> {
        let txn = self.db.begin_read()?;
        let counters = txn.open_table(COUNTERS)?;
        let get =
            |k: &str| -> Result<u64, MetaError> { Ok(counters.get(k)?.map_or(0, |v| v.value())) };
        let root = load(&txn.open_table(INODES)?, ROOT)?
            .ok_or_else(|| MetaError::Store("the root directory is missing".into()))?;
        Ok(MetaReply::Statfs(FsCounts {
            files: get(FILES)?,
            directories: get(DIRECTORIES)?,
            data_servers: self.cfg.data_servers.clone(),
            default_layout: root
                .default_layout
                .unwrap_or((self.cfg.default_unit, self.cfg.default_count)),
        }))
    }

    /// The layout a new file gets: the request's fields, else the directory's default.
    fn layout_for(
        &self,
        ino: u64,
        dir: &Inode,
        req: LayoutRequest,
    ) -> Result<WireLayout, MetaError> {
        let (dir_unit, dir_count) = dir
            .default_layout
            .unwrap_or((self.cfg.default_unit, self.cfg.default_count));
        let unit = req.unit.unwrap_or(dir_unit);
        let servers = &self.cfg.data_servers;
        // A directory default wider than the cluster (it shrank) is capped; an explicit request is not.
        let count = req.count.unwrap_or(dir_count.min(servers.len() as u32));
        if count as usize > servers.len() {
            return Err(MetaError::Invalid(format!(
                "stripe count {count} is larger than the {} data servers of this cluster",
                servers.len()
            )));
        }
        // Spread files' first stripes over the servers, as PVFS2 and Lustre do.
        let first = (ino % servers.len() as u64) as usize;
        let servers = (0..count as usize)
            .map(|i| servers[(first + i) % servers.len()])
            .collect();
        Ok(WireLayout { unit, servers })
    }

    /// mkdir (`layout` is `None`) or create.
    fn make(
        &self,
        path: &str,
        layout: Option<LayoutRequest>,
        exclusive: bool,
        now_ns: u64,
    ) -> Result<MetaReply, MetaError> {
        let (parent_names, name) = namespace::parent_and_name(path).map_err(MetaError::Invalid)?;
        let txn = self.db.begin_write()?;
        let attr = {
            let mut inodes = txn.open_table(INODES)?;
            let mut entries = txn.open_table(ENTRIES)?;
            let mut counters = txn.open_table(COUNTERS)?;
            let (parent, mut dir) = resolve_dir(&inodes, &entries, &parent_names)?;
            if let Some(existing) = entries.get((parent, name))?.map(|v| v.value()) {
                let node = load(&inodes, existing)?
                    .ok_or_else(|| MetaError::Store(format!("{path}: missing inode")))?;
                return match (layout, exclusive, node.kind) {
                    (Some(_), false, FileKind::File) => Ok(MetaReply::Attr(node.attr(existing))),
                    (Some(_), false, FileKind::Directory) => {
                        Err(MetaError::IsADirectory(path.into()))
                    }
                    _ => Err(MetaError::Exists(path.into())),
                };
            }
            let ino = bump(&mut counters, NEXT_INODE, 1)?;
            let node = match layout {
                Some(req) => {
                    bump(&mut counters, FILES, 1)?;
                    let layout = self.layout_for(ino, &dir, req)?;
                    Inode {
                        kind: FileKind::File,
                        ctime_ns: now_ns,
                        mtime_ns: now_ns,
                        layout: Some(layout),
                        default_layout: None,
                        entries: 0,
                    }
                }
                None => {
                    bump(&mut counters, DIRECTORIES, 1)?;
                    let default_layout = dir.default_layout;
                    Inode {
                        kind: FileKind::Directory,
                        ctime_ns: now_ns,
                        mtime_ns: now_ns,
                        layout: None,
                        default_layout,
                        entries: 0,
                    }
                }
            };
            inodes.insert(ino, encode(&node).as_slice())?;
            entries.insert((parent, name), ino)?;
            dir.entries += 1;
            dir.mtime_ns = now_ns;
            inodes.insert(parent, encode(&dir).as_slice())?;
            node.attr(ino)
        };
        txn.commit()?;
        Ok(MetaReply::Attr(attr))
    }

    /// unlink (`kind` File) or rmdir (`kind` Directory); the reply is the removed inode's attributes.
    fn remove(&self, path: &str, kind: FileKind, now_ns: u64) -> Result<MetaReply, MetaError> {
        let (parent_names, name) = namespace::parent_and_name(path).map_err(MetaError::Invalid)?;
        let txn = self.db.begin_write()?;
        let attr = {
            let mut inodes = txn.open_table(INODES)?;
            let mut entries = txn.open_table(ENTRIES)?;
            let mut counters = txn.open_table(COUNTERS)?;
            let (parent, mut dir) = resolve_dir(&inodes, &entries, &parent_names)?;
            let ino = entries
                .get((parent, name))?
                .map(|v| v.value())
                .ok_or_else(|| MetaError::NotFound(path.into()))?;
            let node = load(&inodes, ino)?
                .ok_or_else(|| MetaError::Store(format!("{path}: missing inode")))?;
            match (kind, node.kind) {
                (FileKind::File, FileKind::Directory) => {
                    return Err(MetaError::IsADirectory(path.into()))
                }
                (FileKind::Directory, FileKind::File) => {
                    return Err(MetaError::NotADirectory(path.into()))
                }
                (FileKind::Directory, _) if node.entries > 0 => {
                    return Err(MetaError::NotEmpty(path.into()))
                }
                _ => {}
            }
            entries.remove((parent, name))?;
            inodes.remove(ino)?;
            bump(
                &mut counters,
                if kind == FileKind::File {
                    FILES
                } else {
                    DIRECTORIES
                },
                -1,
            )?;
            dir.entries = dir.entries.saturating_sub(1);
            dir.mtime_ns = now_ns;
            inodes.insert(parent, encode(&dir).as_slice())?;
            node.attr(ino)
        };
        txn.commit()?;
        Ok(MetaReply::Attr(attr))
    }

    fn rename(&self, from: &str, to: &str, now_ns: u64) -> Result<MetaReply, MetaError> {
        let (from_parent_names, from_name) =
            namespace::parent_and_name(from).map_err(MetaError::Invalid)?;
        let (to_parent_names, to_name) =
            namespace::parent_and_name(to).map_err(MetaError::Invalid)?;
        let txn = self.db.begin_write()?;
        let replaced = {
            let mut inodes = txn.open_table(INODES)?;
            let mut entries = txn.open_table(ENTRIES)?;
            let mut counters = txn.open_table(COUNTERS)?;
            let (from_parent, _) = resolve_dir(&inodes, &entries, &from_parent_names)?;
            let ino = entries
                .get((from_parent, from_name))?
                .map(|v| v.value())
                .ok_or_else(|| MetaError::NotFound(from.into()))?;
            let node = load(&inodes, ino)?
                .ok_or_else(|| MetaError::Store(format!("{from}: missing inode")))?;
            // Resolving the target's parent walks its ancestors: moving a
            // directory under itself would pass through it.
            let mut ancestor = ROOT;
            for name in &to_parent_names {
                if ancestor == ino {
                    break;
                }
                ancestor = entries.get((ancestor, *name))?.map_or(0, |v| v.value());
            }
            if ancestor == ino && node.kind == FileKind::Directory {
                return Err(MetaError::Invalid(format!(
                    "cannot move {from} into itself ({to})"
                )));
            }
            let (to_parent, _) = resolve_dir(&inodes, &entries, &to_parent_names)?;
            let mut replaced = None;
            if let Some(target) = entries.get((to_parent, to_name))?.map(|v| v.value()) {
                if target == ino {
                    return Ok(MetaReply::Replaced(None));
                }
                let old = load(&inodes, target)?
                    .ok_or_else(|| MetaError::Store(format!("{to}: missing inode")))?;
                match (node.kind, old.kind) {
                    (FileKind::File, FileKind::Directory) => {
                        return Err(MetaError::IsADirectory(to.into()))
                    }
                    (FileKind::Directory, FileKind::File) => {
                        return Err(MetaError::NotADirectory(to.into()))
                    }
                    (FileKind::Directory, FileKind::Directory) if old.entries > 0 => {
                        return Err(MetaError::NotEmpty(to.into()))
                    }
                    _ => {}
                }
                inodes.remove(target)?;
                bump(
                    &mut counters,
                    if old.kind == FileKind::File {
                        FILES
                    } else {
                        DIRECTORIES
                    },
                    -1,
                )?;
                let mut dir = load(&inodes, to_parent)?
                    .ok_or_else(|| MetaError::Store("missing directory".into()))?;
                dir.entries = dir.entries.saturating_sub(1);
                inodes.insert(to_parent, encode(&dir).as_slice())?;
                replaced = Some(old.attr(target));
            }
            entries.remove((from_parent, from_name))?;
            entries.insert((to_parent, to_name), ino)?;
            for (parent, delta) in [(from_parent, -1i64), (to_parent, 1)] {
                let mut dir = load(&inodes, parent)?
                    .ok_or_else(|| MetaError::Store("missing directory".into()))?;
                dir.entries = dir.entries.saturating_add_signed(delta);
                dir.mtime_ns = now_ns;
                inodes.insert(parent, encode(&dir).as_slice())?;
            }
            replaced
        };
        txn.commit()?;
        Ok(MetaReply::Replaced(replaced))
    }

    /// Records a truncate: the file's times move, the client resizes its objects.
    fn touch_file(&self, path: &str, now_ns: u64) -> Result<MetaReply, MetaError> {
        self.update(path, now_ns, |node| match node.kind {
            FileKind::File => Ok(()),
            FileKind::Directory => Err(MetaError::IsADirectory(path.into())),
        })
    }

    fn set_stripe(
        &self,
        path: &str,
        req: LayoutRequest,
        now_ns: u64,
    ) -> Result<MetaReply, MetaError> {
        let total = self.cfg.data_servers.len() as u32;
        if let Some(count) = req.count.filter(|&c| c > total) {
            return Err(MetaError::Invalid(format!(
                "stripe count {count} is larger than the {total} data servers of this cluster"
            )));
        }
        let (unit, count) = (self.cfg.default_unit, self.cfg.default_count);
        self.update(path, now_ns, |node| match node.kind {
            FileKind::Directory => {
                let (old_unit, old_count) = node.default_layout.unwrap_or((unit, count));
                node.default_layout =
                    Some((req.unit.unwrap_or(old_unit), req.count.unwrap_or(old_count)));
                Ok(())
            }
            FileKind::File => Err(MetaError::NotADirectory(format!(
                "{path} (a file's layout is fixed when it is created)"
            ))),
        })
    }

    /// Read-modify-write of one inode in one transaction.
    fn update(
        &self,
        path: &str,
        now_ns: u64,
        change: impl FnOnce(&mut Inode) -> Result<(), MetaError>,
    ) -> Result<MetaReply, MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        let txn = self.db.begin_write()?;
        let attr = {
            let mut inodes = txn.open_table(INODES)?;
            let entries = txn.open_table(ENTRIES)?;
            let (ino, mut node) = resolve(&inodes, &entries, &names)?;
            change(&mut node)?;
            node.ctime_ns = now_ns;
            node.mtime_ns = now_ns;
            inodes.insert(ino, encode(&node).as_slice())?;
            node.attr(ino)
        };
        txn.commit()?;
        Ok(MetaReply::Attr(attr))
    }

    fn inode_count(&self) -> Result<u64, MetaError> {
        let txn = self.db.begin_read()?;
        Ok(txn.open_table(INODES)?.len()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> MetadataStore {
        MetadataStore::open(
            dir,
            MetadataConfig {
                data_servers: vec![0, 1, 2, 3],
                default_unit: 65536,
                default_count: 4,
            },
        )
        .unwrap()
    }

    fn attr(r: Result<MetaReply, MetaError>) -> MetaAttr {
        match r.unwrap() {
            MetaReply::Attr(a) => a,
            other => panic!("expected attributes, got {other:?}"),
        }
    }

    fn create(path: &str) -> MetaRequest {
        MetaRequest::Create {
            path: path.into(),
            layout: LayoutRequest::default(),
            exclusive: true,
        }
    }

    #[test]
    fn namespace_operations_and_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let op = |r: MetaRequest| s.apply(&r, 5);
        attr(op(MetaRequest::Mkdir { path: "/a".into() }));
        let f = attr(op(create("/a/f")));
        assert_eq!(f.layout.as_ref().unwrap().servers.len(), 4);
        assert_eq!(f.layout.as_ref().unwrap().unit, 65536);
        assert!(matches!(op(create("/a/f")), Err(MetaError::Exists(p)) if p == "/a/f"));
        assert!(matches!(op(create("/nope/f")), Err(MetaError::NotFound(p)) if p == "/nope"));
        assert!(matches!(op(create("/a/f/g")), Err(MetaError::NotADirectory(p)) if p == "/a/f"));
        assert!(matches!(
            op(MetaRequest::Rmdir { path: "/a".into() }),
            Err(MetaError::NotEmpty(_))
        ));
        assert!(matches!(
            op(MetaRequest::Unlink { path: "/a".into() }),
            Err(MetaError::IsADirectory(_))
        ));
        assert!(matches!(
            op(MetaRequest::Rmdir {
                path: "/a/f".into()
            }),
            Err(MetaError::NotADirectory(_))
        ));
        // Non-exclusive create opens the existing file.
        let again = MetaRequest::Create {
            path: "/a/f".into(),
            layout: LayoutRequest::default(),
            exclusive: false,
        };
        assert_eq!(attr(op(again)).inode, f.inode);
        // Rename keeps the inode and its layout.
        op(MetaRequest::Rename {
            from: "/a/f".into(),
            to: "/g".into(),
        })
        .unwrap();
        let g = attr(op(MetaRequest::Lookup { path: "/g".into() }));
        assert_eq!((g.inode, g.layout), (f.inode, f.layout));
        assert!(matches!(
            op(MetaRequest::Lookup {
                path: "/a/f".into()
            }),
            Err(MetaError::NotFound(_))
        ));
        let mv_into_self = MetaRequest::Rename {
            from: "/a".into(),
            to: "/a/b".into(),
        };
        assert!(matches!(op(mv_into_self), Err(MetaError::Invalid(_))));
        attr(op(MetaRequest::Rmdir { path: "/a".into() }));
        let removed = attr(op(MetaRequest::Unlink { path: "/g".into() }));
        assert_eq!(removed.inode, f.inode);
        match op(MetaRequest::Statfs).unwrap() {
            MetaReply::Statfs(c) => assert_eq!((c.files, c.directories), (0, 1)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn layouts_come_from_the_request_or_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        s.apply(&MetaRequest::Mkdir { path: "/d".into() }, 0)
            .unwrap();
        s.apply(
            &MetaRequest::SetStripe {
                path: "/d".into(),
                layout: LayoutRequest {
                    unit: Some(1 << 20),
                    count: Some(2),
                },
            },
            0,
        )
        .unwrap();
        let f = attr(s.apply(&create("/d/f"), 0));
        assert_eq!(
            f.layout.as_ref().map(|l| (l.unit, l.servers.len())),
            Some((1 << 20, 2))
        );
        // Subdirectories inherit the default; explicit fields override it.
        s.apply(
            &MetaRequest::Mkdir {
                path: "/d/e".into(),
            },
            0,
        )
        .unwrap();
        let explicit = MetaRequest::Create {
            path: "/d/e/x".into(),
            layout: LayoutRequest {
                unit: None,
                count: Some(3),
            },
            exclusive: true,
        };
        let x = attr(s.apply(&explicit, 0));
        assert_eq!(
            x.layout.as_ref().map(|l| (l.unit, l.servers.len())),
            Some((1 << 20, 3))
        );
        let too_wide = MetaRequest::Create {
            path: "/w".into(),
            layout: LayoutRequest {
                unit: None,
                count: Some(9),
            },
            exclusive: true,
        };
        assert!(
            matches!(s.apply(&too_wide, 0), Err(MetaError::Invalid(m)) if m.contains("larger than the 4 data servers"))
        );
    }

    #[test]
    fn readdir_pages_in_name_order_and_the_store_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = store(dir.path());
            for i in (0..MAX_ENTRIES + 10).rev() {
                s.apply(&create(&format!("/f{i:05}")), 0).unwrap();
            }
        }
        let s = store(dir.path());
        let page = |after: Option<String>| match s
            .apply(
                &MetaRequest::Readdir {
                    path: "/".into(),
                    after,
                },
                0,
            )
            .unwrap()
        {
            MetaReply::Entries { entries, more } => (entries, more),
            other => panic!("{other:?}"),
        };
        let (first, more) = page(None);
        assert!(more);
        assert_eq!(first.len(), MAX_ENTRIES);
        assert_eq!(first[0].name, "f00000");
        let (rest, more) = page(first.last().map(|e| e.name.clone()));
        assert!(!more);
        assert_eq!(rest.len(), 10);
        assert_eq!(rest[9].name, format!("f{:05}", MAX_ENTRIES + 9));
    }
}
