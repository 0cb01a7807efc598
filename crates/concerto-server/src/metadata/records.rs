//! How the namespace is kept in redb: its tables, an inode's record
//! (bincode, read also in the shapes of stores made before owners and
//! before parents), and the counters; a new store's formatting.
//!
//! Tables:
//! - `inodes`: inode number → bincode [`Inode`]
//! - `entries`: (directory inode, name) → child inode; a directory's entries
//!   are one key range, listed in name order
//! - `counters`: the inode numbers handed out so far (a durable limit, see
//!   [`super::store`]) and the numbers of files and directories
//! - `orphans`: inode → the data servers holding objects of a file that is
//!   gone; the reaper deletes them and then the row

use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::error::MetaError;
use concerto_proto::{FileKind, WireLayout};

pub(super) const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
pub(super) const ENTRIES: TableDefinition<(u64, &str), u64> = TableDefinition::new("entries");
pub(super) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
pub(super) const ORPHANS: TableDefinition<u64, &[u8]> = TableDefinition::new("orphans");

pub(super) const ROOT: u64 = 1;
/// Every inode number below it may have been handed out (see the store).
pub(super) const INODE_LIMIT: &str = "inode_limit";
/// The counter an older store kept instead.
pub(super) const NEXT_INODE: &str = "next_inode";
/// How many namespace changes were ever made: the number a reply's
/// `durable` is counted in, kept across restarts.
pub(super) const CHANGES: &str = "changes";
pub(super) const FILES: &str = "files";
pub(super) const DIRECTORIES: &str = "directories";
/// 1 once every inode record names its parent directory (a store made
/// before parents has them filled in when it is opened).
pub(super) const PARENTS_KNOWN: &str = "parents_known";

/// A stored file or directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Inode {
    pub kind: FileKind,
    pub ctime_ns: u64,
    pub mtime_ns: u64,
    pub layout: Option<WireLayout>,
    pub default_layout: Option<(u64, u32)>,
    pub entries: u64,
    pub uid: u32,
    pub gid: u32,
    /// Permission bits, set-user-id, set-group-id and sticky (`07777`).
    pub mode: u32,
    /// The directory that holds it (the root: itself). Every inode has one
    /// name, so one parent: a request that names an inode, not a path, is
    /// allowed only if its path's directories would let the caller search
    /// them ([`super::reads`]). 0 in a record from before parents, until
    /// the store is opened and fills them in.
    pub parent: u64,
}

/// An inode as a store from before parents kept it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct InodeWithoutParent {
    kind: FileKind,
    ctime_ns: u64,
    mtime_ns: u64,
    layout: Option<WireLayout>,
    default_layout: Option<(u64, u32)>,
    entries: u64,
    uid: u32,
    gid: u32,
    mode: u32,
}

impl From<InodeWithoutParent> for Inode {
    fn from(o: InodeWithoutParent) -> Inode {
        Inode {
            kind: o.kind,
            ctime_ns: o.ctime_ns,
            mtime_ns: o.mtime_ns,
            layout: o.layout,
            default_layout: o.default_layout,
            entries: o.entries,
            uid: o.uid,
            gid: o.gid,
            mode: o.mode,
            parent: 0,
        }
    }
}

/// An inode as a store from before owners and modes kept it: read as
/// owned by root and open to everyone (0666 files, 0777 directories), as
/// it was, until the administrator changes it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct InodeWithoutOwner {
    kind: FileKind,
    ctime_ns: u64,
    mtime_ns: u64,
    layout: Option<WireLayout>,
    default_layout: Option<(u64, u32)>,
    entries: u64,
}

impl From<InodeWithoutOwner> for Inode {
    fn from(o: InodeWithoutOwner) -> Inode {
        Inode {
            mode: match o.kind {
                FileKind::File => 0o666,
                FileKind::Directory => 0o777,
            },
            kind: o.kind,
            ctime_ns: o.ctime_ns,
            mtime_ns: o.mtime_ns,
            layout: o.layout,
            default_layout: o.default_layout,
            entries: o.entries,
            uid: 0,
            gid: 0,
            parent: 0,
        }
    }
}

pub(super) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serialize(value).unwrap_or_default()
}

/// An inode's record; one too short for a parent, or for an owner and
/// mode, is from a store made before them (bincode reads a struct's fields
/// in order, so a shorter record fails the longer shape).
pub(super) fn decode(ino: u64, bytes: &[u8]) -> Result<Inode, MetaError> {
    bincode::deserialize::<Inode>(bytes).or_else(|e| {
        bincode::deserialize::<InodeWithoutParent>(bytes)
            .map(Inode::from)
            .or_else(|_| bincode::deserialize::<InodeWithoutOwner>(bytes).map(Inode::from))
            .map_err(|_| MetaError::Store(format!("inode {ino} is corrupt: {e}")))
    })
}

pub(super) fn load<T: ReadableTable<u64, &'static [u8]>>(
    inodes: &T,
    ino: u64,
) -> Result<Option<Inode>, MetaError> {
    match inodes.get(ino)? {
        None => Ok(None),
        Some(bytes) => decode(ino, bytes.value()).map(Some),
    }
}

pub(super) fn counter(
    counters: &impl ReadableTable<&'static str, u64>,
    key: &str,
) -> Result<u64, MetaError> {
    Ok(counters.get(key)?.map_or(0, |v| v.value()))
}

pub(super) fn bump(
    counters: &mut redb::Table<&str, u64>,
    key: &str,
    delta: i64,
) -> Result<(), MetaError> {
    let now = counter(counters, key)?;
    counters.insert(key, now.saturating_add_signed(delta))?;
    Ok(())
}

/// Sets a counter (the store's inode limit and change count).
pub(super) fn set_counter(txn: &WriteTransaction, key: &str, value: u64) -> Result<(), MetaError> {
    txn.open_table(COUNTERS)?.insert(key, value)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inode_from_before_owners_reads_as_roots_and_open_to_all_as_it_was() {
        let old = InodeWithoutOwner {
            kind: FileKind::File,
            ctime_ns: 5,
            mtime_ns: 6,
            layout: Some(WireLayout {
                unit: 65536,
                servers: vec![0, 1],
            }),
            default_layout: None,
            entries: 0,
        };
        let node = decode(7, &bincode::serialize(&old).unwrap()).unwrap();
        assert_eq!((node.uid, node.gid, node.mode), (0, 0, 0o666));
        assert_eq!((node.ctime_ns, node.mtime_ns), (5, 6));
        assert_eq!(node.layout.unwrap().servers, vec![0, 1]);
        let dir = InodeWithoutOwner {
            kind: FileKind::Directory,
            layout: None,
            ..old
        };
        let node = decode(8, &bincode::serialize(&dir).unwrap()).unwrap();
        assert_eq!(node.mode, 0o777);
        // A new record reads as itself, and garbage as corrupt.
        let again = decode(9, &encode(&node)).unwrap();
        assert_eq!((again.kind, again.mode), (FileKind::Directory, 0o777));
        let e = decode(10, &[1, 2, 3]).unwrap_err();
        assert!(e.to_string().contains("inode 10 is corrupt"), "{e}");
    }

    #[test]
    fn an_inode_from_before_parents_keeps_its_owner_and_waits_for_its_parent() {
        let old = InodeWithoutParent {
            kind: FileKind::File,
            ctime_ns: 5,
            mtime_ns: 6,
            layout: None,
            default_layout: None,
            entries: 0,
            uid: 1001,
            gid: 100,
            mode: 0o640,
        };
        let node = decode(7, &bincode::serialize(&old).unwrap()).unwrap();
        assert_eq!(
            (node.uid, node.gid, node.mode, node.parent),
            (1001, 100, 0o640, 0)
        );
        let parented = Inode { parent: 42, ..node };
        assert_eq!(decode(7, &encode(&parented)).unwrap().parent, 42);
    }
}
