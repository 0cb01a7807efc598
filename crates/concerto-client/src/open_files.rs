//! What a client remembers of the files it has open, shared by every
//! handle of the client (and so by every process of a FUSE mount): per
//! file, the servers holding data written through it and not made durable
//! yet (an fsync or a close flushes those, and only those), and how far it
//! wrote (what its close tells the metadata service); and the metadata
//! service's change counts as its replies said, so an fsync asks for the
//! namespace to be made durable only when something this client saw may
//! not be yet.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use concerto_proto::connection::Changes;

#[derive(Debug, Default)]
struct FileState {
    /// Servers written to since their last fsync.
    dirty: BTreeSet<u32>,
    /// The furthest byte written since the file was opened or last truncated here.
    written_end: u64,
    /// Handles open for writing.
    writers: u32,
}

#[derive(Debug, Default)]
pub(crate) struct OpenFiles {
    files: Mutex<HashMap<u64, FileState>>,
    /// Per file, a counter of this client's writes and truncates (what
    /// read ahead before a change is not served after it). Kept only
    /// while it is not zero.
    generations: Mutex<HashMap<u64, u64>>,
    changes_seen: AtomicU64,
    durable_seen: AtomicU64,
}

impl OpenFiles {
    fn with<T>(&self, inode: u64, f: impl FnOnce(&mut FileState) -> T) -> T {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let state = files.entry(inode).or_default();
        let out = f(state);
        if state.writers == 0 && state.dirty.is_empty() {
            files.remove(&inode);
        }
        out
    }

    pub fn opened_for_write(&self, inode: u64) {
        self.with(inode, |s| s.writers += 1);
    }

    /// A handle open for writing closes: how far this client wrote.
    pub fn closed_for_write(&self, inode: u64) -> u64 {
        self.with(inode, |s| {
            s.writers = s.writers.saturating_sub(1);
            let end = s.written_end;
            if s.writers == 0 {
                s.written_end = 0;
            }
            end
        })
    }

    /// The counter of this client's changes to the file's data.
    pub fn generation(&self, inode: u64) -> u64 {
        let generations = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        generations.get(&inode).copied().unwrap_or(0)
    }

    fn changed(&self, inode: u64) {
        let mut generations = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        *generations.entry(inode).or_default() += 1;
    }

    /// A write reached `servers` and ended at byte `end` of the file.
    pub fn wrote(&self, inode: u64, servers: impl IntoIterator<Item = u32>, end: u64) {
        self.changed(inode);
        self.with(inode, |s| {
            s.dirty.extend(servers);
            s.written_end = s.written_end.max(end);
        })
    }

    /// The servers to flush for an fsync of the file (taken: a write that
    /// lands after this marks its server again).
    pub fn take_dirty(&self, inode: u64) -> BTreeSet<u32> {
        self.with(inode, |s| std::mem::take(&mut s.dirty))
    }

    /// Whether this client wrote to the file since its last fsync.
    pub fn is_dirty(&self, inode: u64) -> bool {
        let files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files.get(&inode).is_some_and(|s| !s.dirty.is_empty())
    }

    /// An fsync of these servers failed: they still hold unflushed data.
    pub fn still_dirty(&self, inode: u64, servers: BTreeSet<u32>) {
        self.with(inode, |s| s.dirty.extend(servers));
    }

    /// This client truncated the file: its writes count from here.
    pub fn truncated(&self, inode: u64, size: u64) {
        self.changed(inode);
        self.with(inode, |s| s.written_end = size.min(s.written_end));
    }

    /// A metadata reply's change counts.
    pub fn saw(&self, changes: Changes) {
        self.changes_seen.fetch_max(changes.made, Ordering::AcqRel);
        self.durable_seen
            .fetch_max(changes.durable, Ordering::AcqRel);
    }

    /// Whether every change this client saw is known durable.
    pub fn changes_durable(&self) -> bool {
        self.durable_seen.load(Ordering::Acquire) >= self.changes_seen.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_servers_are_flushed_once_and_written_ends_count_from_a_truncate() {
        let files = OpenFiles::default();
        files.opened_for_write(7);
        files.wrote(7, [1, 2], 100);
        files.wrote(7, [2, 3], 50);
        assert_eq!(files.take_dirty(7), BTreeSet::from([1, 2, 3]));
        assert!(files.take_dirty(7).is_empty(), "flushed once");
        files.still_dirty(7, BTreeSet::from([3]));
        assert_eq!(files.take_dirty(7), BTreeSet::from([3]));
        files.truncated(7, 10);
        files.wrote(7, [1], 30);
        files.take_dirty(7);
        assert_eq!(files.closed_for_write(7), 30);
        assert!(
            files.files.lock().unwrap().is_empty(),
            "nothing kept once closed and clean"
        );
        files.saw(Changes {
            made: 5,
            durable: 4,
        });
        assert!(!files.changes_durable());
        files.saw(Changes {
            made: 5,
            durable: 5,
        });
        assert!(files.changes_durable());
    }
}
