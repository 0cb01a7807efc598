//! Reading the namespace: lookups, attributes, listings and counts, in
//! whichever view the store gives ([`super::store`]).
//!
//! Most of the time that is the open write transaction, which holds every
//! change, committed or not. While a commit flushes the disk there is no
//! open write transaction (redb has one writer, and the flush is its
//! commit): the store then gives a read transaction, which sees every
//! change too, because a commit first makes its changes visible (a commit
//! without a flush) and only then flushes them. So a lookup never waits
//! for the disk: measured before, a lookup waited 2 to 8 ms at the
//! metadata server while a commit flushed (docs/reproductions.md).

use std::ops::Bound;

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::access::{self, READ, SEARCH, WRITE};
use super::error::MetaError;
use super::namespace::{resolve, resolve_dir, MetadataConfig};
use super::records::{counter, load, Inode, COUNTERS, DIRECTORIES, ENTRIES, FILES, INODES, ROOT};

use concerto_proto::auth::Principal;
use concerto_proto::namespace;
use concerto_proto::{DirEntry, FileKind, MAX_ENTRIES};

/// A directory entry and its inode, when it has one.
pub(super) type Listed = (DirEntry, Option<Inode>);

/// What a read looks at: the open write transaction, or a read
/// transaction while a commit flushes (every change committed, not yet
/// durable).
pub(super) enum View<'a> {
    Open(&'a WriteTransaction),
    Committed(&'a ReadTransaction),
}

/// `body` with `$t` the view's transaction, whichever kind it is (their
/// tables are different types with the same reading methods).
macro_rules! with_txn {
    ($view:expr, $t:ident => $body:expr) => {
        match $view {
            View::Open($t) => $body,
            View::Committed($t) => $body,
        }
    };
}

/// The namespace's reads in one view.
pub(super) struct Reads<'a> {
    pub view: View<'a>,
    pub cfg: &'a MetadataConfig,
}

impl Reads<'_> {
    pub fn lookup(&self, path: &str, who: &Principal) -> Result<(u64, Inode), MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        with_txn!(self.view, t => resolve(
            &t.open_table(INODES)?,
            &t.open_table(ENTRIES)?,
            &names,
            who,
        ))
    }

    /// A file opened for reading, or for writing too: `who` must may.
    pub fn open(
        &self,
        path: &str,
        write: bool,
        who: &Principal,
    ) -> Result<(u64, Inode), MetaError> {
        let (ino, node) = self.lookup(path, who)?;
        if node.kind == FileKind::File {
            let (want, operation) = if write {
                (WRITE, "open for writing")
            } else {
                (READ, "open for reading")
            };
            access::check(who, &node, want, operation, path)?;
        }
        Ok((ino, node))
    }

    /// A file by inode, for a descriptor's renewed capability: `who` must
    /// still may read it, or write it when `write` (its mode now decides;
    /// the path it was opened by is not searched again, as a descriptor
    /// outlives changes to its directories).
    pub fn renew(&self, inode: u64, write: bool, who: &Principal) -> Result<Inode, MetaError> {
        let node = self.getattr(inode, who)?;
        let shown = format!("inode {inode:#x}");
        if node.kind != FileKind::File {
            // Capabilities are to a file's objects; a directory has none.
            return Err(MetaError::IsADirectory(shown));
        }
        if write {
            access::check(who, &node, WRITE, "renew for writing", &shown)?;
        } else {
            access::check(who, &node, READ, "renew for reading", &shown)?;
        }
        Ok(node)
    }

    /// access(2): whether `who` may do `mask` on `path`.
    pub fn access(&self, path: &str, mask: u32, who: &Principal) -> Result<(), MetaError> {
        let (_, node) = self.lookup(path, who)?;
        access::check(who, &node, mask, "access", path)
    }

    pub fn get(&self, ino: u64) -> Result<Option<Inode>, MetaError> {
        with_txn!(self.view, t => load(&t.open_table(INODES)?, ino))
    }

    /// The inode `ino` for `who`, answered as a lookup of its path would
    /// be: `who` must be allowed to search every directory above it. A
    /// request names an inode number, which anyone can count through; the
    /// path it stands for is what permissions are about.
    pub fn getattr(&self, ino: u64, who: &Principal) -> Result<Inode, MetaError> {
        with_txn!(self.view, t => reachable(&t.open_table(INODES)?, ino, who))
    }

    /// A page of the directory's entries, each with its inode when it has
    /// one (an entry whose inode is missing lists as a file).
    pub fn readdir(
        &self,
        path: &str,
        after: Option<&str>,
        who: &Principal,
    ) -> Result<(Vec<Listed>, bool), MetaError> {
        let names = namespace::components(path).map_err(MetaError::Invalid)?;
        with_txn!(self.view, t => list(
            &t.open_table(INODES)?,
            &t.open_table(ENTRIES)?,
            (path, &names),
            after,
            who,
        ))
    }

    /// Files, directories, and the root's default layout.
    pub fn counts(&self) -> Result<(u64, u64, (u64, u32)), MetaError> {
        let (files, directories, root) = with_txn!(self.view, t => {
            let counters = t.open_table(COUNTERS)?;
            (
                counter(&counters, FILES)?,
                counter(&counters, DIRECTORIES)?,
                load(&t.open_table(INODES)?, ROOT)?,
            )
        });
        let root = root.ok_or_else(|| MetaError::Store("the root directory is missing".into()))?;
        Ok((
            files,
            directories,
            root.default_layout
                .unwrap_or((self.cfg.default_unit, self.cfg.default_count)),
        ))
    }
}

/// A directory's entries after `after` (at most [`MAX_ENTRIES`], and
/// whether more follow); `who` must may list it.
/// How many directories above an inode are walked before the store is
/// taken to be corrupt (a loop of parents): far deeper than any path.
const MAX_DEPTH: usize = 1 << 16;

/// Inode `ino`, if `who` may search every directory from its parent up to
/// the root; refused as a lookup of its path would be (not found for a
/// number no file has).
fn reachable<I>(inodes: &I, ino: u64, who: &Principal) -> Result<Inode, MetaError>
where
    I: ReadableTable<u64, &'static [u8]>,
{
    let shown = || format!("inode {ino:#x}");
    let node = load(inodes, ino)?.ok_or_else(|| MetaError::NotFound(shown()))?;
    let mut at = node.parent;
    for _ in 0..MAX_DEPTH {
        if ino == ROOT {
            return Ok(node);
        }
        let dir = load(inodes, at)?.ok_or_else(|| {
            MetaError::Store(format!("{}: its parent {at:#x} is missing", shown()))
        })?;
        if !access::allows(who, &dir, SEARCH) {
            access::check(
                who,
                &dir,
                SEARCH,
                "search",
                &format!("a directory above {}", shown()),
            )?;
        }
        if at == ROOT {
            return Ok(node);
        }
        at = dir.parent;
    }
    Err(MetaError::Store(format!(
        "{}: no way up to the root",
        shown()
    )))
}

fn list<I, E>(
    inodes: &I,
    entries: &E,
    (path, names): (&str, &[&str]),
    after: Option<&str>,
    who: &Principal,
) -> Result<(Vec<Listed>, bool), MetaError>
where
    I: ReadableTable<u64, &'static [u8]>,
    E: ReadableTable<(u64, &'static str), u64>,
{
    let (ino, dir) = resolve_dir(inodes, entries, names, who)?;
    access::check(who, &dir, READ, "list", path)?;
    let start = match after {
        Some(name) => Bound::Excluded((ino, name)),
        None => Bound::Included((ino, "")),
    };
    let mut out = Vec::new();
    for item in entries.range::<(u64, &str)>((start, Bound::Excluded((ino + 1, ""))))? {
        let (key, child) = item?;
        if out.len() == MAX_ENTRIES {
            return Ok((out, true));
        }
        let child = child.value();
        let node = load(inodes, child)?;
        let entry = DirEntry {
            name: key.value().1.to_string(),
            inode: child,
            kind: node.as_ref().map_or(FileKind::File, |n| n.kind),
        };
        out.push((entry, node));
    }
    Ok((out, false))
}
