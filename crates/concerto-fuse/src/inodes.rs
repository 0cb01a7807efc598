//! What the mount remembers between the kernel's calls: which path each
//! inode the kernel holds names, the files open here, and the files
//! unlinked while open (kept under a hidden name until their last close).
//! Plain data, tested without a mount.

use std::collections::HashMap;
use std::ffi::OsStr;

use crate::listing::Listing;
use concerto_client::{FileHandle, FsClient};

use crate::replies::Errno;

/// An open file and the client acting for the process that opened it.
#[derive(Clone)]
pub(crate) struct OpenFile {
    pub(crate) file: FileHandle,
    pub(crate) client: FsClient,
}

/// What the mount remembers between calls.
pub(crate) struct State {
    /// inode → (path, how many lookups the kernel holds).
    pub(crate) names: HashMap<u64, (String, u64)>,
    pub(crate) files: HashMap<u64, OpenFile>,
    /// inode → how many handles the kernel has open on it.
    pub(crate) opens: HashMap<u64, u32>,
    /// Files unlinked (or renamed over) while open here, kept under a
    /// hidden name until their last close: inode → (hidden path, whether
    /// the rename to it is done).
    pub(crate) unlinked: HashMap<u64, (String, bool)>,
    /// Directory listings taken at opendir, served in pieces by readdir.
    pub(crate) listings: HashMap<u64, Listing>,
    pub(crate) next_handle: u64,
}

pub(crate) const ROOT: u64 = fuser::FUSE_ROOT_ID;

impl State {
    pub(crate) fn new() -> State {
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

    pub(crate) fn path(&self, ino: u64) -> Result<String, Errno> {
        self.names
            .get(&ino)
            .map(|(p, _)| p.clone())
            .ok_or(Errno(libc::ESTALE))
    }

    /// The path of `name` in directory `parent`, checked as a name.
    pub(crate) fn child(&self, parent: u64, name: &OsStr) -> Result<String, Errno> {
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
    pub(crate) fn looked_up(&mut self, ino: u64, path: &str) {
        let entry = self.names.entry(ino).or_insert_with(|| (String::new(), 0));
        entry.0 = path.to_string();
        entry.1 += 1;
    }

    /// The kernel lets go of `n` lookups of `ino`; whether it holds none
    /// now (it forgot the inode).
    pub(crate) fn forget(&mut self, ino: u64, n: u64) -> bool {
        if ino == ROOT {
            return false;
        }
        if let Some(entry) = self.names.get_mut(&ino) {
            entry.1 = entry.1.saturating_sub(n);
            if entry.1 == 0 {
                self.names.remove(&ino);
                return true;
            }
        }
        false
    }

    /// After a rename, everything under `from` lives under `to`.
    pub(crate) fn renamed(&mut self, from: &str, to: &str) {
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
    pub(crate) fn open_at(&self, path: &str) -> Option<u64> {
        self.opens
            .keys()
            .copied()
            .find(|ino| self.names.get(ino).is_some_and(|(p, _)| p == path))
    }

    /// A handle on `ino` was closed; true when it was the last one of a
    /// file hidden since its unlink, which is now for the caller to remove.
    pub(crate) fn closed(&mut self, ino: u64) -> Option<String> {
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

    pub(crate) fn handle(&mut self) -> u64 {
        self.next_handle += 1;
        self.next_handle
    }

    /// A handle on `ino` was opened.
    pub(crate) fn opened(&mut self, ino: u64) {
        *self.opens.entry(ino).or_default() += 1;
    }

    /// An unlink of `path`: when this mount has it open, the inode and the
    /// hidden name to rename it to (the file is now being hidden); else
    /// None (the caller unlinks it).
    pub(crate) fn begin_hiding(&mut self, path: &str) -> Option<(u64, String)> {
        let ino = self.open_at(path)?;
        let hidden = hidden_path(path, ino);
        self.unlinked.insert(ino, (hidden.clone(), false));
        Some((ino, hidden))
    }

    /// The rename to the hidden name failed: the file is not hidden.
    pub(crate) fn hiding_failed(&mut self, ino: u64) {
        self.unlinked.remove(&ino);
    }

    /// The rename to the hidden name is done; true when the last handle
    /// was closed meanwhile (the caller then removes the hidden file).
    pub(crate) fn hidden(&mut self, ino: u64, path: &str, hidden: &str) -> bool {
        self.renamed(path, hidden);
        if self.opens.contains_key(&ino) {
            if let Some(entry) = self.unlinked.get_mut(&ino) {
                entry.1 = true;
            }
            false
        } else {
            self.unlinked.remove(&ino);
            true
        }
    }
}

/// Files unlinked while open on this mount are kept under this name
/// (followed by the inode number) in their directory until their last
/// close, as NFS clients keep theirs as `.nfsXXXX`; listings leave them out.
pub(crate) const HIDDEN_PREFIX: &str = ".concerto-unlinked-";

pub(crate) fn hidden_path(path: &str, ino: u64) -> String {
    let dir = &path[..path.rfind('/').unwrap_or(0)];
    format!("{dir}/{HIDDEN_PREFIX}{ino:x}")
}

#[cfg(test)]
mod tests {
    //! The mount's memory of inodes and open files, without a mount.
    use super::*;

    #[test]
    fn lookups_name_inodes_and_forgetting_every_lookup_drops_the_name() {
        let mut s = State::new();
        let path = s.child(ROOT, OsStr::new("a")).unwrap();
        assert_eq!(path, "/a");
        s.looked_up(7, &path);
        s.looked_up(7, &path);
        assert_eq!(s.child(7, OsStr::new("b")).unwrap(), "/a/b");
        s.forget(7, 1);
        assert_eq!(s.path(7).unwrap(), "/a");
        s.forget(7, 1);
        assert_eq!(s.path(7).unwrap_err().0, libc::ESTALE);
        // the root is never forgotten
        s.forget(ROOT, 100);
        assert_eq!(s.path(ROOT).unwrap(), "/");
    }

    #[test]
    fn names_that_are_too_long_or_not_utf8_are_refused() {
        use std::os::unix::ffi::OsStrExt;
        let s = State::new();
        let long = "x".repeat(concerto_proto::namespace::MAX_NAME + 1);
        assert_eq!(
            s.child(ROOT, OsStr::new(&long)).unwrap_err().0,
            libc::ENAMETOOLONG
        );
        assert_eq!(
            s.child(ROOT, OsStr::from_bytes(&[0xff])).unwrap_err().0,
            libc::EINVAL
        );
        assert_eq!(s.child(99, OsStr::new("a")).unwrap_err().0, libc::ESTALE);
    }

    #[test]
    fn a_rename_moves_everything_under_the_old_name() {
        let mut s = State::new();
        s.looked_up(2, "/d");
        s.looked_up(3, "/d/f");
        s.looked_up(4, "/dd/g");
        s.renamed("/d", "/e");
        assert_eq!(s.path(2).unwrap(), "/e");
        assert_eq!(s.path(3).unwrap(), "/e/f");
        // a sibling whose name starts alike is not under it
        assert_eq!(s.path(4).unwrap(), "/dd/g");
    }

    #[test]
    fn a_file_unlinked_while_open_is_hidden_until_its_last_close() {
        let mut s = State::new();
        s.looked_up(5, "/dir/f");
        s.opened(5);
        s.opened(5);
        let (ino, hidden) = s.begin_hiding("/dir/f").unwrap();
        assert_eq!((ino, hidden.as_str()), (5, "/dir/.concerto-unlinked-5"));
        assert!(!s.hidden(5, "/dir/f", &hidden));
        // still reachable by its inode, under the hidden name
        assert_eq!(s.path(5).unwrap(), hidden);
        assert_eq!(s.closed(5), None);
        // the last close hands the hidden file over for removal, once
        assert_eq!(s.closed(5).as_deref(), Some(hidden.as_str()));
        assert!(s.unlinked.is_empty() && s.opens.is_empty());
    }

    #[test]
    fn a_file_not_open_here_is_unlinked_at_once() {
        let mut s = State::new();
        s.looked_up(5, "/f");
        assert_eq!(s.begin_hiding("/f"), None);
        assert_eq!(s.closed(5), None);
    }

    #[test]
    fn a_last_close_during_the_rename_leaves_the_removal_to_the_unlink() {
        let mut s = State::new();
        s.looked_up(6, "/f");
        s.opened(6);
        let (ino, hidden) = s.begin_hiding("/f").unwrap();
        // closed before the rename to the hidden name finished: not yet
        // handed over (the rename is not done) ...
        assert_eq!(s.closed(ino), None);
        // ... so the unlink, finishing the rename, removes it
        assert!(s.hidden(ino, "/f", &hidden));
        assert!(s.unlinked.is_empty());
    }

    #[test]
    fn a_failed_rename_leaves_the_file_as_it_was() {
        let mut s = State::new();
        s.looked_up(8, "/f");
        s.opened(8);
        let (ino, _) = s.begin_hiding("/f").unwrap();
        s.hiding_failed(ino);
        assert!(s.unlinked.is_empty());
        assert_eq!(s.path(8).unwrap(), "/f");
        assert_eq!(s.closed(8), None);
    }
}
