//! The kernel's page cache, and when the mount lets it serve a file:
//! close-to-open consistency, as NFS gives.
//!
//! Files are opened in the kernel's cached mode (reads are served from the
//! page cache and read ahead by the kernel; writes go to the mount as they
//! are made, and the pages keep what was written), except those opened
//! with `O_DIRECT`, which go to the servers on every call. At each open the
//! metadata service says the file's generation as this mount sees it (a
//! value that changes once another client may have changed the file's
//! data: opened it for writing, closed it, truncated it; this mount's own
//! writes are in its cache already, so a file it wrote and reads back is
//! read from memory) and whether another client writes it now. The kernel
//! keeps what it cached of the file only when it cached it at the same
//! generation and nobody else writes the file; otherwise the open drops
//! the file's pages and the kernel's attributes (the size among them), so
//! a file opened after another node closed it reads that node's bytes.
//! While a file stays open here, what another node writes to it may be
//! hidden by the pages this mount cached (as on NFS): reopen it, or open
//! it with `O_DIRECT`.
//!
//! Writes to disjoint ranges from many nodes all land, ranges that share a
//! page included: the kernel's pages are never written back whole (no
//! writeback cache), each write(2) reaches the mount as the bytes written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fuser::consts::{FOPEN_DIRECT_IO, FOPEN_KEEP_CACHE};
use fuser::Notifier;

use concerto_client::FileHandle;

/// What the kernel's page cache holds of each file, by the generation it
/// was read at.
#[derive(Default)]
pub(crate) struct PageCache {
    /// Set once the mount exists (the notifier comes from its session).
    notifier: Arc<OnceLock<Notifier>>,
    /// inode → the generation its cached pages are of.
    generations: Mutex<HashMap<u64, u64>>,
}

impl PageCache {
    /// Where the mount's notifier goes once the session is up.
    pub(crate) fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }

    fn generations(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.generations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The flags an open of `file` is answered with (`flags`: open(2)'s),
    /// after dropping the kernel's attributes of a file that changed.
    pub(crate) fn open_flags(&self, file: &FileHandle, flags: i32) -> u32 {
        if flags & libc::O_DIRECT != 0 {
            return direct_flags();
        }
        let ino = file.inode;
        let keep = {
            let mut generations = self.generations();
            let keep = !file.written_elsewhere && generations.get(&ino) == Some(&file.change);
            if file.written_elsewhere {
                generations.remove(&ino);
            } else {
                generations.insert(ino, file.change);
            }
            keep
        };
        if keep {
            return FOPEN_KEEP_CACHE;
        }
        // The pages go with the open (no FOPEN_KEEP_CACHE); the attributes
        // here, before the open returns, so that the size the kernel reads
        // up to is asked again. (An offset of -1: the attributes only.)
        if let Some(n) = self.notifier.get() {
            // ENOENT: the kernel holds no inode of that number (nothing to drop).
            let _ = n.inval_inode(ino, -1, 0);
        }
        0
    }

    /// A new file, created (and so cached) at `file`'s generation.
    pub(crate) fn created(&self, file: &FileHandle) -> u32 {
        self.generations().insert(file.inode, file.change);
        0
    }

    /// The kernel forgot the inode, and its pages with it.
    pub(crate) fn forget(&self, ino: u64) {
        self.generations().remove(&ino);
    }
}

/// How a file opened with `O_DIRECT` is answered: every read(2) and
/// write(2) reaches the mount, and writes to one file from several
/// processes run in parallel rather than one at a time
/// (`FOPEN_PARALLEL_DIRECT_WRITES`, Linux 6.2; older kernels ignore it).
pub(crate) fn direct_flags() -> u32 {
    /// Not in fuser's ABI 7.28 constants; its value in the kernel's fuse.h.
    const FOPEN_PARALLEL_DIRECT_WRITES: u32 = 1 << 6;
    FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES
}
