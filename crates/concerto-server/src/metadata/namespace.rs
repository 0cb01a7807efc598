//! The namespace in redb tables: directories, files, their attributes and
//! layouts, and the objects of removed files still to be deleted. Every
//! change works inside the store's open write transaction
//! ([`super::store`]), which commits many changes at once; the reads are
//! in [`super::reads`].
//!
//! A file's size is not stored here: it is the furthest byte any of its
//! objects holds, which the service knows from the file's writers or asks
//! the data servers ([`super::sizes`]).

use redb::{ReadableTable, WriteTransaction};

use super::access::{self, SEARCH, WRITE};
use super::error::MetaError;
use super::records::{
    bump, counter, encode, load, Inode, CHANGES, COUNTERS, DIRECTORIES, ENTRIES, FILES, INODES,
    INODE_LIMIT, NEXT_INODE, ORPHANS, PARENTS_KNOWN, ROOT,
};

use concerto_core::layout::largest_file;
use concerto_proto::auth::Principal;
use concerto_proto::namespace;
use concerto_proto::{FileKind, LayoutRequest, WireLayout, MAX_OBJECT_END};

/// What the metadata service needs to know of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataConfig {
    /// Ids of the data servers new files are striped over.
    pub data_servers: Vec<u32>,
    /// The root directory's default layout when the store is first created.
    pub default_unit: u64,
    pub default_count: u32,
    /// How long a namespace change may wait for the commit that makes it
    /// durable (many changes share one); zero commits every change before
    /// its reply.
    pub commit_interval: std::time::Duration,
}

/// The default [`MetadataConfig::commit_interval`].
pub const DEFAULT_COMMIT_INTERVAL: std::time::Duration =
    std::time::Duration::from_nanos(concerto_core::server::METADATA_COMMIT_INTERVAL.as_nanos());

/// Creates the tables and the root directory in a new store; returns the
/// inode limit and the change count it holds.
pub(super) fn format_if_new(
    txn: &WriteTransaction,
    cfg: &MetadataConfig,
) -> Result<(u64, u64), MetaError> {
    let mut inodes = txn.open_table(INODES)?;
    txn.open_table(ENTRIES)?;
    txn.open_table(ORPHANS)?;
    let mut counters = txn.open_table(COUNTERS)?;
    if inodes.get(ROOT)?.is_none() {
        let count = cfg.default_count.min(cfg.data_servers.len() as u32).max(1);
        let root = Inode {
            kind: FileKind::Directory,
            ctime_ns: 0,
            mtime_ns: 0,
            layout: None,
            default_layout: Some((cfg.default_unit, count)),
            entries: 0,
            uid: 0,
            gid: 0,
            mode: access::ROOT_MODE,
            parent: ROOT,
        };
        inodes.insert(ROOT, encode(&root).as_slice())?;
        counters.insert(INODE_LIMIT, ROOT + 1)?;
        counters.insert(DIRECTORIES, 1)?;
        counters.insert(PARENTS_KNOWN, 1)?;
    }
    if counter(&counters, PARENTS_KNOWN)? == 0 {
        fill_parents(&mut inodes, &txn.open_table(ENTRIES)?)?;
        counters.insert(PARENTS_KNOWN, 1)?;
    }
    if counters.get(INODE_LIMIT)?.is_none() {
        let next = counter(&counters, NEXT_INODE)?.max(ROOT + 1);
        counters.insert(INODE_LIMIT, next)?;
    }
    Ok((
        counter(&counters, INODE_LIMIT)?,
        counter(&counters, CHANGES)?,
    ))
}

/// A store made before inodes named their parents: each entry's inode
/// gets the directory that holds it (one pass over the entries, once).
fn fill_parents<E>(inodes: &mut redb::Table<u64, &[u8]>, entries: &E) -> Result<(), MetaError>
where
    E: ReadableTable<(u64, &'static str), u64>,
{
    for entry in entries.iter()? {
        let (key, child) = entry?;
        let (dir, child) = (key.value().0, child.value());
        if let Some(mut node) = load(inodes, child)? {
            node.parent = dir;
            inodes.insert(child, encode(&node).as_slice())?;
        }
    }
    if let Some(mut root) = load(inodes, ROOT)? {
        root.parent = ROOT;
        inodes.insert(ROOT, encode(&root).as_slice())?;
    }
    Ok(())
}

/// Walks `names` from the root: the inode they name, or the error a shell
/// would show; `who` must may search every directory on the way.
pub(super) fn resolve<I, E>(
    inodes: &I,
    entries: &E,
    names: &[&str],
    who: &Principal,
) -> Result<(u64, Inode), MetaError>
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
        // The message (and its path) is made only for a refusal: a lookup
        // passes every directory of its path here.
        if !access::allows(who, &node, SEARCH) {
            access::check(who, &node, SEARCH, "search", &shown(i))?;
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

/// Whether the path of directory names `names` from the root passes
/// through inode `ino` (moving a directory under itself would).
fn passes_through<E>(entries: &E, names: &[&str], ino: u64) -> Result<bool, MetaError>
where
    E: ReadableTable<(u64, &'static str), u64>,
{
    let mut ancestor = ROOT;
    for name in names {
        if ancestor == ino {
            break;
        }
        ancestor = entries.get((ancestor, *name))?.map_or(0, |v| v.value());
    }
    Ok(ancestor == ino)
}

/// Whether a rename of a `kind` may replace `old` at `to`: a file a file,
/// a directory an empty directory.
fn may_replace(kind: FileKind, old: &Inode, to: &str) -> Result<(), MetaError> {
    match (kind, old.kind) {
        (FileKind::File, FileKind::Directory) => Err(MetaError::IsADirectory(to.into())),
        (FileKind::Directory, FileKind::File) => Err(MetaError::NotADirectory(to.into())),
        (FileKind::Directory, FileKind::Directory) if old.entries > 0 => {
            Err(MetaError::NotEmpty(to.into()))
        }
        _ => Ok(()),
    }
}

pub(super) fn resolve_dir<I, E>(
    inodes: &I,
    entries: &E,
    names: &[&str],
    who: &Principal,
) -> Result<(u64, Inode), MetaError>
where
    I: ReadableTable<u64, &'static [u8]>,
    E: ReadableTable<(u64, &'static str), u64>,
{
    let (ino, node) = resolve(inodes, entries, names, who)?;
    if node.kind != FileKind::Directory {
        return Err(MetaError::NotADirectory(format!("/{}", names.join("/"))));
    }
    Ok((ino, node))
}

/// A file created, or one that existed (`create` without `exclusive`).
pub(super) struct Made {
    pub ino: u64,
    pub node: Inode,
    pub created: bool,
}

/// The namespace's changes inside one write transaction (its reads: [`super::reads`]).
pub(super) struct Ops<'a> {
    pub txn: &'a WriteTransaction,
    pub cfg: &'a MetadataConfig,
}

impl Ops<'_> {
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

    /// mkdir (`layout` is `None`) or create; a new inode number comes from `alloc`.
    /// mkdir (`layout` is `None`) or create, with permission bits `mode`,
    /// as `who`; a new inode number comes from `alloc`.
    pub fn make(
        &self,
        path: &str,
        (layout, exclusive, mode): (Option<LayoutRequest>, bool, u32),
        who: &Principal,
        now_ns: u64,
        alloc: &mut dyn FnMut() -> Result<u64, MetaError>,
    ) -> Result<Made, MetaError> {
        let (parent_names, name) = namespace::parent_and_name(path).map_err(MetaError::Invalid)?;
        let mut inodes = self.txn.open_table(INODES)?;
        let mut entries = self.txn.open_table(ENTRIES)?;
        let mut counters = self.txn.open_table(COUNTERS)?;
        let (parent, mut dir) = resolve_dir(&inodes, &entries, &parent_names, who)?;
        if !access::allows(who, &dir, SEARCH) {
            access::check(who, &dir, SEARCH, "search", &parent_path(&parent_names))?;
        }
        if let Some(existing) = entries.get((parent, name))?.map(|v| v.value()) {
            let node = load(&inodes, existing)?
                .ok_or_else(|| MetaError::Store(format!("{path}: missing inode")))?;
            return match (layout, exclusive, node.kind) {
                (Some(_), false, FileKind::File) => {
                    access::check(who, &node, WRITE, "open for writing", path)?;
                    Ok(Made {
                        ino: existing,
                        node,
                        created: false,
                    })
                }
                (Some(_), false, FileKind::Directory) => Err(MetaError::IsADirectory(path.into())),
                _ => Err(MetaError::Exists(path.into())),
            };
        }
        let operation = if layout.is_some() { "create" } else { "mkdir" };
        access::check(who, &dir, WRITE | SEARCH, operation, path)?;
        // What can refuse is checked before the tables change, so a refused
        // operation leaves the open transaction as it was (a refused layout
        // only skips an inode number).
        let ino = alloc()?;
        let kind = match layout {
            Some(_) => FileKind::File,
            None => FileKind::Directory,
        };
        let (uid, gid, mode) = access::new_owner(who, &dir, kind, mode);
        let node = Inode {
            kind,
            ctime_ns: now_ns,
            mtime_ns: now_ns,
            layout: match layout {
                Some(req) => Some(self.layout_for(ino, &dir, req)?),
                None => None,
            },
            default_layout: match layout {
                Some(_) => None,
                None => dir.default_layout,
            },
            entries: 0,
            uid,
            gid,
            mode,
            parent,
        };
        bump(
            &mut counters,
            if layout.is_some() { FILES } else { DIRECTORIES },
            1,
        )?;
        inodes.insert(ino, encode(&node).as_slice())?;
        entries.insert((parent, name), ino)?;
        dir.entries += 1;
        dir.mtime_ns = now_ns;
        inodes.insert(parent, encode(&dir).as_slice())?;
        Ok(Made {
            ino,
            node,
            created: true,
        })
    }

    /// The file is gone: its objects go to the reaper.
    fn orphan(&self, ino: u64, node: &Inode) -> Result<(), MetaError> {
        if let Some(layout) = &node.layout {
            self.txn
                .open_table(ORPHANS)?
                .insert(ino, encode(&layout.servers).as_slice())?;
        }
        Ok(())
    }

    /// unlink (`kind` File) or rmdir (`kind` Directory): the removed inode.
    pub fn remove(
        &self,
        path: &str,
        kind: FileKind,
        who: &Principal,
        now_ns: u64,
    ) -> Result<(u64, Inode), MetaError> {
        let (parent_names, name) = namespace::parent_and_name(path).map_err(MetaError::Invalid)?;
        let mut inodes = self.txn.open_table(INODES)?;
        let mut entries = self.txn.open_table(ENTRIES)?;
        let mut counters = self.txn.open_table(COUNTERS)?;
        let (parent, mut dir) = resolve_dir(&inodes, &entries, &parent_names, who)?;
        let operation = match kind {
            FileKind::File => "unlink",
            FileKind::Directory => "rmdir",
        };
        access::check(who, &dir, WRITE | SEARCH, operation, path)?;
        let ino = entries
            .get((parent, name))?
            .map(|v| v.value())
            .ok_or_else(|| MetaError::NotFound(path.into()))?;
        let node = load(&inodes, ino)?
            .ok_or_else(|| MetaError::Store(format!("{path}: missing inode")))?;
        // The sticky bit first, as Linux's may_delete: another user's
        // directory is refused before anyone is told it is not empty.
        access::check_sticky(who, &dir, &node, operation, path)?;
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
        drop((inodes, entries, counters));
        self.orphan(ino, &node)?;
        Ok((ino, node))
    }

    /// Moves `from` to `to`; a file replaced at `to` is returned (its objects go to the reaper).
    pub fn rename(
        &self,
        from: &str,
        to: &str,
        who: &Principal,
        now_ns: u64,
    ) -> Result<Option<(u64, Inode)>, MetaError> {
        let (from_parent_names, from_name) =
            namespace::parent_and_name(from).map_err(MetaError::Invalid)?;
        let (to_parent_names, to_name) =
            namespace::parent_and_name(to).map_err(MetaError::Invalid)?;
        let mut inodes = self.txn.open_table(INODES)?;
        let mut entries = self.txn.open_table(ENTRIES)?;
        let mut counters = self.txn.open_table(COUNTERS)?;
        let (from_parent, from_dir) = resolve_dir(&inodes, &entries, &from_parent_names, who)?;
        access::check(who, &from_dir, WRITE | SEARCH, "rename", from)?;
        let ino = entries
            .get((from_parent, from_name))?
            .map(|v| v.value())
            .ok_or_else(|| MetaError::NotFound(from.into()))?;
        let node = load(&inodes, ino)?
            .ok_or_else(|| MetaError::Store(format!("{from}: missing inode")))?;
        if node.kind == FileKind::Directory && passes_through(&entries, &to_parent_names, ino)? {
            return Err(MetaError::Invalid(format!(
                "cannot move {from} into itself ({to})"
            )));
        }
        let (to_parent, to_dir) = resolve_dir(&inodes, &entries, &to_parent_names, who)?;
        access::check(who, &to_dir, WRITE | SEARCH, "rename", to)?;
        access::check_sticky(who, &from_dir, &node, "rename", from)?;
        // A directory moved to another parent has its `..` changed: Linux
        // asks for write permission on it.
        if node.kind == FileKind::Directory && from_parent != to_parent {
            access::check(who, &node, WRITE, "rename", from)?;
        }
        let mut replaced = None;
        if let Some(target) = entries.get((to_parent, to_name))?.map(|v| v.value()) {
            if target == ino {
                return Ok(None);
            }
            let old = load(&inodes, target)?
                .ok_or_else(|| MetaError::Store(format!("{to}: missing inode")))?;
            may_replace(node.kind, &old, to)?;
            access::check_sticky(who, &to_dir, &old, "rename", to)?;
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
            replaced = Some((target, old));
        }
        entries.remove((from_parent, from_name))?;
        entries.insert((to_parent, to_name), ino)?;
        if from_parent != to_parent {
            let moved = Inode {
                parent: to_parent,
                ..node
            };
            inodes.insert(ino, encode(&moved).as_slice())?;
        }
        for (parent, delta) in [(from_parent, -1i64), (to_parent, 1)] {
            let mut dir = load(&inodes, parent)?
                .ok_or_else(|| MetaError::Store("missing directory".into()))?;
            dir.entries = dir.entries.saturating_add_signed(delta);
            dir.mtime_ns = now_ns;
            inodes.insert(parent, encode(&dir).as_slice())?;
        }
        drop((inodes, entries, counters));
        if let Some((target, old)) = &replaced {
            self.orphan(*target, old)?;
        }
        Ok(replaced)
    }

    /// Records a truncate: the file's times move, the client resizes its
    /// objects. A size past the largest file the layout allows under the
    /// servers' bound on an object ([`MAX_OBJECT_END`]) is refused here,
    /// before any object is asked for it.
    pub fn truncate(
        &self,
        path: &str,
        size: u64,
        who: &Principal,
        now_ns: u64,
    ) -> Result<(u64, Inode), MetaError> {
        self.update(path, who, now_ns, |node| match node.kind {
            FileKind::File => {
                access::check(who, node, WRITE, "truncate", path)?;
                let largest = node.layout.as_ref().map_or(u64::MAX, |l| {
                    largest_file(l.unit, l.servers.len() as u64, MAX_OBJECT_END)
                });
                if size > largest {
                    return Err(MetaError::Invalid(format!(
                        "{path}: {size} bytes is past the largest file of its layout ({largest} bytes: \
                         the servers' bound of {MAX_OBJECT_END} bytes per object)"
                    )));
                }
                Ok(())
            }
            FileKind::Directory => Err(MetaError::IsADirectory(path.into())),
        })
    }

    /// chmod, chown and chgrp ([`access::set_attr`] says who may): the
    /// change time moves, the modification time does not.
    pub fn set_attr(
        &self,
        path: &str,
        (mode, uid, gid): (Option<u32>, Option<u32>, Option<u32>),
        who: &Principal,
        now_ns: u64,
    ) -> Result<(u64, Inode), MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        let mut inodes = self.txn.open_table(INODES)?;
        let entries = self.txn.open_table(ENTRIES)?;
        let (ino, mut node) = resolve(&inodes, &entries, &names, who)?;
        (node.uid, node.gid, node.mode) = access::set_attr(who, &node, path, mode, uid, gid)?;
        node.ctime_ns = now_ns;
        inodes.insert(ino, encode(&node).as_slice())?;
        Ok((ino, node))
    }

    pub fn set_stripe(
        &self,
        path: &str,
        req: LayoutRequest,
        who: &Principal,
        now_ns: u64,
    ) -> Result<(u64, Inode), MetaError> {
        let total = self.cfg.data_servers.len() as u32;
        if let Some(count) = req.count.filter(|&c| c > total) {
            return Err(MetaError::Invalid(format!(
                "stripe count {count} is larger than the {total} data servers of this cluster"
            )));
        }
        let (unit, count) = (self.cfg.default_unit, self.cfg.default_count);
        self.update(path, who, now_ns, |node| match node.kind {
            FileKind::Directory if !(who.is_root() || who.uid == node.uid) => Err(access::denied(
                "setstripe",
                path,
                format!("only the directory's owner {} or root may", node.uid),
            )),
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

    /// Read-modify-write of one inode.
    fn update(
        &self,
        path: &str,
        who: &Principal,
        now_ns: u64,
        change: impl FnOnce(&mut Inode) -> Result<(), MetaError>,
    ) -> Result<(u64, Inode), MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        let mut inodes = self.txn.open_table(INODES)?;
        let entries = self.txn.open_table(ENTRIES)?;
        let (ino, mut node) = resolve(&inodes, &entries, &names, who)?;
        change(&mut node)?;
        node.ctime_ns = now_ns;
        node.mtime_ns = now_ns;
        inodes.insert(ino, encode(&node).as_slice())?;
        Ok((ino, node))
    }

    /// A descriptor that wrote the file closed: its modification time is `now_ns`.
    pub fn touch(&self, ino: u64, now_ns: u64) -> Result<(), MetaError> {
        let mut inodes = self.txn.open_table(INODES)?;
        // A file removed meanwhile has nothing to touch.
        if let Some(mut node) = load(&inodes, ino)? {
            node.mtime_ns = node.mtime_ns.max(now_ns);
            inodes.insert(ino, encode(&node).as_slice())?;
        }
        Ok(())
    }

    /// Objects of removed files the reaper deleted: their rows go.
    pub fn forget_orphans(&self, gone: &[u64]) -> Result<(), MetaError> {
        let mut orphans = self.txn.open_table(ORPHANS)?;
        for ino in gone {
            orphans.remove(ino)?;
        }
        Ok(())
    }
}

/// A directory's path from its names, for messages.
fn parent_path(names: &[&str]) -> String {
    format!("/{}", names.join("/"))
}

/// Up to `limit` committed orphans (inode and the servers holding its
/// objects), skipping those `skip` says are being removed already.
pub(super) fn orphans(
    txn: &redb::ReadTransaction,
    limit: usize,
    skip: impl Fn(u64) -> bool,
) -> Result<Vec<(u64, Vec<u32>)>, MetaError> {
    let table = match txn.open_table(ORPHANS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for item in table.iter()? {
        let (ino, servers) = item?;
        let ino = ino.value();
        if skip(ino) {
            continue;
        }
        let servers: Vec<u32> = bincode::deserialize(servers.value())
            .map_err(|e| MetaError::Store(format!("orphan {ino} is corrupt: {e}")))?;
        out.push((ino, servers));
        if out.len() == limit {
            break;
        }
    }
    Ok(out)
}
