//! The namespace's redb database and its group commit.
//!
//! Operations apply to one open write transaction, and a separate thread
//! commits it (durably: redb's one-phase commit with checksums, one flush)
//! at most [`MetadataConfig::commit_interval`] after its first change.
//! The commit holds the store only while it makes the changes visible (a
//! commit without a flush); the flush (an empty durable commit, which
//! makes the earlier ones durable) runs with the store released: reads go
//! on meanwhile in a read transaction ([`super::reads`]), changes wait for
//! it (redb has one writer).
//! Many operations share one flush, as in a journaling file system, which
//! is what lets a single client create files at the rate of network round
//! trips rather than disk flushes. A change is durable within the
//! interval of its reply, or at once when a client asks (`Sync`: its
//! `fsync`, and the `close` of a file it wrote, wait for it); a crash
//! loses at most the changes of the last interval, never part of one
//! (redb's recovery finds the last commit). Interval zero commits every
//! change before it is answered.
//!
//! Inode numbers are never reused, even after a crash that loses changes:
//! numbers are handed out below a limit that is committed before they
//! are, and a store opened again starts at the limit.
//!
//! The disk filling up: the store keeps a reserve file beside the database
//! (`metadata.reserve`, [`RESERVE_BYTES`]), as databases keep ballast. When
//! less than the reserve is free, the reserve goes (so commits always find
//! room), and operations that add files or directories are refused with
//! NoSpace until the disk has room for twice the reserve again; deletes go
//! through and make room. After a disk error the database is closed and
//! opened again by the next operation (redb refuses every transaction
//! after one failed), so the service works on once space is freed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError, Weak};
use std::time::{Duration, Instant};

use redb::{Database, Durability, WriteTransaction};
use tokio::sync::Notify;

use super::error::MetaError;
use super::namespace::{self, MetadataConfig, Ops};
use super::reads::{Reads, View};
use super::records::{self, CHANGES, INODE_LIMIT};

/// Bytes kept free for the metadata store's own transactions on a full disk.
pub const RESERVE_BYTES: u64 = 4 << 20;

/// Inode numbers reserved (durably) at a time.
const INODE_BATCH: u64 = 4096;

pub(super) struct Store {
    path: PathBuf,
    reserve: PathBuf,
    cfg: MetadataConfig,
    state: Mutex<State>,
    /// Wakes the committer when a change is made (and when it must stop).
    dirty: Condvar,
    /// Wakes what waits for a flush to end (changes, syncs, the reaper).
    flushed: Condvar,
    /// Held by a test to keep a flush under way.
    #[cfg(test)]
    flush_gate: Mutex<()>,
    /// Told after a commit that made files' objects orphans (the reaper waits on it).
    pub orphaned: Arc<Notify>,
    /// Changes made ever, and how many of them are durable (read without the lock).
    changes: AtomicU64,
    durable: AtomicU64,
}

/// Whether an operation may wait for the store (a commit holds it while
/// the disk flushes), or is refused with [`MetaError::Busy`] instead: what
/// the scheduling loop asks when it runs a quick operation itself rather
/// than on a storage thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    Yes,
    No,
}

struct State {
    /// The open transaction: every change since the last commit. (Before
    /// `db`: fields drop in order, and a database dropped while one of its
    /// transactions lives waits for it for ever.)
    txn: Option<WriteTransaction>,
    /// `None` after a disk error, until the next operation opens it again.
    /// (Shared with a flush and with reads made during one.)
    db: Option<Arc<Database>>,
    /// A flush is under way, the store released: no open transaction;
    /// every change so far is committed (visible), not yet durable.
    flushing: bool,
    /// When the oldest change not yet committed was made.
    dirty_since: Option<Instant>,
    /// Whether that change made orphans.
    orphans_pending: bool,
    /// Changes made ever, and how many of them are durable.
    changes: u64,
    durable: u64,
    next_inode: u64,
    inode_limit: u64,
    /// Whether the reserve is given up (deletes only).
    reserve_gone: bool,
    stop: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Store {
    /// Opens (creating on first use) the store in `dir/metadata.redb`, and
    /// starts its committer.
    pub fn open(dir: &Path, cfg: MetadataConfig) -> Result<Arc<Store>, MetaError> {
        if cfg.data_servers.is_empty() {
            return Err(MetaError::Invalid(
                "the metadata service needs at least one data server".into(),
            ));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| MetaError::Store(format!("{}: {e}", dir.display())))?;
        let store = Arc::new(Store {
            path: dir.join("metadata.redb"),
            reserve: dir.join("metadata.reserve"),
            cfg,
            state: Mutex::new(State {
                txn: None,
                db: None,
                dirty_since: None,
                flushing: false,
                orphans_pending: false,
                changes: 0,
                durable: 0,
                next_inode: 0,
                inode_limit: 0,
                reserve_gone: false,
                stop: false,
            }),
            dirty: Condvar::new(),
            flushed: Condvar::new(),
            #[cfg(test)]
            flush_gate: Mutex::new(()),
            orphaned: Arc::new(Notify::new()),
            changes: AtomicU64::new(0),
            durable: AtomicU64::new(0),
        });
        {
            let mut state = lock(&store.state);
            store.ensure_open(&mut state)?;
            if !store.reserve.exists() && store.make_reserve().is_err() {
                state.reserve_gone = true;
            }
        }
        let weak = Arc::downgrade(&store);
        std::thread::Builder::new()
            .name("metadata-commit".into())
            .spawn(move || committer(weak))
            .map_err(|e| MetaError::Store(format!("cannot start the commit thread: {e}")))?;
        Ok(store)
    }

    pub fn config(&self) -> &MetadataConfig {
        &self.cfg
    }

    /// Opens the database (after a disk error closed it) and the transaction.
    fn ensure_open(&self, state: &mut State) -> Result<(), MetaError> {
        if state.db.is_none() {
            let db = Database::create(&self.path)?;
            let txn = db.begin_write()?;
            let (limit, changes) = namespace::format_if_new(&txn, &self.cfg)?;
            txn.commit()?;
            state.db = Some(Arc::new(db));
            state.next_inode = limit;
            state.inode_limit = limit;
            state.changes = changes;
            state.durable = changes;
            self.publish(state);
        }
        if state.txn.is_none() {
            let db = state
                .db
                .as_ref()
                .ok_or_else(|| MetaError::Store("closed".into()))?;
            state.txn = Some(db.begin_write()?);
        }
        Ok(())
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

    /// Bytes free on the store's disk (for unprivileged users).
    pub fn free_bytes(&self) -> u64 {
        let dir = self.path.parent().unwrap_or(&self.path);
        crate::storage::disk_space(dir).map_or(0, |s| s.available)
    }

    /// Gives the reserve up when less than it is free, and takes it back
    /// once twice it is; true while it is given up (deletes only).
    fn deletes_only(&self, state: &mut State) -> bool {
        let free = self.free_bytes();
        if !state.reserve_gone && free < RESERVE_BYTES {
            state.reserve_gone = true;
            eprintln!(
                "concerto-server: the metadata store's disk is full; its reserve ({}) is given up so that \
                 deletes can make room",
                self.reserve.display()
            );
            let _ = std::fs::remove_file(&self.reserve);
        } else if state.reserve_gone && free >= 2 * RESERVE_BYTES && self.make_reserve().is_ok() {
            state.reserve_gone = false;
        }
        state.reserve_gone
    }

    /// The counts as the replies report them.
    fn publish(&self, state: &State) {
        self.changes.store(state.changes, Ordering::Release);
        self.durable.store(state.durable, Ordering::Release);
    }

    fn lock(&self, wait: Wait) -> Result<MutexGuard<'_, State>, MetaError> {
        match wait {
            Wait::Yes => Ok(lock(&self.state)),
            Wait::No => match self.state.try_lock() {
                Ok(state) => Ok(state),
                Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
                Err(TryLockError::WouldBlock) => Err(MetaError::Busy),
            },
        }
    }

    /// Runs a read inside the open transaction (so it sees every change,
    /// committed or not), or, while a flush is under way, in a read
    /// transaction (every change is committed then): never behind the disk.
    pub fn read<T>(
        &self,
        wait: Wait,
        f: impl FnOnce(&Reads) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        let mut state = self.lock(wait)?;
        if state.flushing {
            let db = state
                .db
                .clone()
                .ok_or_else(|| MetaError::Store("closed".into()))?;
            drop(state);
            let txn = db.begin_read()?;
            return f(&Reads {
                view: View::Committed(&txn),
                cfg: &self.cfg,
            });
        }
        self.ensure_open(&mut state)?;
        let result = {
            let txn = state
                .txn
                .as_ref()
                .ok_or_else(|| MetaError::Store("closed".into()))?;
            f(&Reads {
                view: View::Open(txn),
                cfg: &self.cfg,
            })
        };
        self.after_failure(&mut state, &result);
        result
    }

    /// `state` once no flush is under way.
    fn after_flush<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        while state.flushing {
            state = self.flushed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state
    }

    /// Runs a change inside the open transaction; `adds` when it may create
    /// a file or directory (refused on a full disk). Returns the change's
    /// number (what `durable` counts).
    pub fn change<T>(
        &self,
        wait: Wait,
        adds: bool,
        f: impl FnOnce(&Ops, &mut dyn FnMut() -> Result<u64, MetaError>) -> Result<T, MetaError>,
    ) -> Result<(T, u64), MetaError> {
        let mut state = self.lock(wait)?;
        if state.flushing {
            // redb's one writer is the flush's.
            if wait == Wait::No {
                return Err(MetaError::Busy);
            }
            state = self.after_flush(state);
        }
        self.ensure_open(&mut state)?;
        if adds && self.deletes_only(&mut state) {
            return Err(MetaError::NoSpace(
                "the disk is full: files and directories can be removed, not created, until \
                 there is room again"
                    .into(),
            ));
        }
        if adds && state.next_inode >= state.inode_limit {
            // New numbers are reserved durably before any is handed out.
            let limit = state.next_inode + INODE_BATCH;
            if let Some(txn) = state.txn.as_ref() {
                records::set_counter(txn, INODE_LIMIT, limit)?;
            }
            state.dirty_since.get_or_insert_with(Instant::now);
            self.commit(&mut state)?;
            state.inode_limit = limit;
            self.ensure_open(&mut state)?;
        }
        let result = {
            let state = &mut *state;
            let txn = state
                .txn
                .as_ref()
                .ok_or_else(|| MetaError::Store("closed".into()))?;
            let (next, limit) = (&mut state.next_inode, state.inode_limit);
            let mut alloc = || {
                if *next >= limit {
                    return Err(MetaError::Store("out of reserved inode numbers".into()));
                }
                *next += 1;
                Ok(*next - 1)
            };
            f(
                &Ops {
                    txn,
                    cfg: &self.cfg,
                },
                &mut alloc,
            )
        };
        self.after_failure(&mut state, &result);
        let value = result?;
        state.changes += 1;
        self.publish(&state);
        let number = state.changes;
        if state.dirty_since.is_none() {
            state.dirty_since = Some(Instant::now());
            self.dirty.notify_one();
        }
        if self.cfg.commit_interval.is_zero() {
            self.commit(&mut state)?;
        }
        Ok((value, number))
    }

    /// Marks that the current batch made orphans (so the reaper is told after its commit).
    pub fn made_orphans(&self) {
        lock(&self.state).orphans_pending = true;
    }

    /// A store error leaves the transaction unusable: what it held is lost
    /// (said loudly), and the database is opened again by the next operation.
    fn after_failure<T>(&self, state: &mut State, result: &Result<T, MetaError>) {
        if let Err(e) = result {
            if e.needs_reopen() {
                self.close_after_failure(state, e);
            }
        }
    }

    fn close_after_failure(&self, state: &mut State, e: &MetaError) {
        if state.dirty_since.is_some() {
            eprintln!(
                "concerto-server: the metadata store failed ({e}); the changes of the last {:?} \
                 are lost",
                state.dirty_since.map(|t| t.elapsed()).unwrap_or_default()
            );
        }
        state.txn = None;
        state.db = None;
        state.dirty_since = None;
        state.orphans_pending = false;
    }

    /// Commits the open transaction if it holds changes, holding the store
    /// throughout (rare: an inode reservation, a commit interval of zero,
    /// the last commit); [`Store::commit_released`] otherwise.
    fn commit(&self, state: &mut State) -> Result<(), MetaError> {
        if self.commit_open(state, Durability::Immediate)? {
            state.dirty_since = None;
            let orphans = std::mem::take(&mut state.orphans_pending);
            self.made_durable(state, state.changes, orphans);
        }
        Ok(())
    }

    /// Commits the open transaction with `durability` if it holds changes
    /// (false when it held none); a failure closes the store.
    fn commit_open(&self, state: &mut State, durability: Durability) -> Result<bool, MetaError> {
        if state.dirty_since.is_none() {
            return Ok(false);
        }
        let Some(mut txn) = state.txn.take() else {
            return Ok(false);
        };
        // A commit needs fresh pages: with less than the reserve free, the
        // reserve goes first.
        self.deletes_only(state);
        txn.set_durability(durability);
        records::set_counter(&txn, CHANGES, state.changes)
            .and_then(|()| txn.commit().map_err(MetaError::from))
            .inspect_err(|e| self.close_after_failure(state, e))?;
        Ok(true)
    }

    /// Changes up to `upto` are durable: published, and the reaper told
    /// when they made orphans (it removes only durable ones).
    fn made_durable(&self, state: &mut State, upto: u64, orphans: bool) {
        state.durable = upto;
        self.publish(state);
        if orphans {
            self.orphaned.notify_one();
        }
    }

    /// Commits the open transaction if it holds changes, holding the store
    /// only to make them visible (a commit without a flush); the flush (an
    /// empty durable commit, which makes the earlier ones durable) runs
    /// with the store released, reads going on in a read transaction and
    /// changes waiting for it. Returns the store held again.
    fn commit_released<'a>(
        &'a self,
        state: MutexGuard<'a, State>,
    ) -> (MutexGuard<'a, State>, Result<(), MetaError>) {
        let mut state = self.after_flush(state);
        match self.commit_open(&mut state, Durability::None) {
            Ok(true) => {}
            nothing_or_failed => return (state, nothing_or_failed.map(|_| ())),
        }
        let upto = state.changes;
        let orphans = std::mem::take(&mut state.orphans_pending);
        let since = state.dirty_since.take();
        let db = state.db.clone();
        state.flushing = true;
        drop(state);
        #[cfg(test)]
        let _gate = self.flush_gate.lock();
        let flushed = db
            .ok_or_else(|| MetaError::Store("closed".into()))
            .and_then(|db| {
                let mut txn = db.begin_write()?;
                txn.set_durability(Durability::Immediate);
                txn.commit().map_err(MetaError::from)
            });
        let mut state = lock(&self.state);
        state.flushing = false;
        self.flushed.notify_all();
        match flushed {
            Ok(()) => {
                self.made_durable(&mut state, upto, orphans);
                (state, Ok(()))
            }
            Err(e) => {
                // What is lost is what the flush was to make durable.
                state.dirty_since = since;
                self.close_after_failure(&mut state, &e);
                (state, Err(e))
            }
        }
    }

    /// Makes every change so far durable; returns how many changes are.
    pub fn sync(&self, wait: Wait) -> Result<u64, MetaError> {
        let state = self.lock(wait)?;
        if wait == Wait::No && (state.dirty_since.is_some() || state.flushing) {
            // A commit flushes the disk: not on the scheduling loop.
            return Err(MetaError::Busy);
        }
        let (state, committed) = self.commit_released(state);
        committed?;
        Ok(state.durable)
    }

    /// How many changes are durable.
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// How many changes were made.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// A read of what is committed durably (orphans the reaper may
    /// remove): not during a flush, when a read sees what is not durable yet.
    pub fn committed(&self) -> Result<redb::ReadTransaction, MetaError> {
        let mut state = self.after_flush(lock(&self.state));
        self.ensure_open(&mut state)?;
        let db = state
            .db
            .as_ref()
            .ok_or_else(|| MetaError::Store("closed".into()))?;
        Ok(db.begin_read()?)
    }

    /// Commits what is pending and stops the committer.
    pub fn close(&self) {
        let mut state = self.after_flush(lock(&self.state));
        state.stop = true;
        if let Err(e) = self.commit(&mut state) {
            eprintln!("concerto-server: the last metadata commit failed: {e}");
        }
        self.dirty.notify_all();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if state.dirty_since.is_some() {
            if let Some(txn) = state.txn.take() {
                let _ = records::set_counter(&txn, CHANGES, state.changes);
                if let Err(e) = txn.commit() {
                    eprintln!("concerto-server: the last metadata commit failed: {e}");
                }
            }
        }
    }
}

/// The commit thread: commits the open transaction once its oldest change
/// is `commit_interval` old. It holds the store only while it works, and
/// ends when the store is closed or dropped.
fn committer(store: Weak<Store>) {
    const IDLE: Duration = Duration::from_millis(200);
    loop {
        let Some(store) = store.upgrade() else {
            return;
        };
        let state = lock(&store.state);
        if state.stop {
            return;
        }
        let wait = match state.dirty_since {
            None => IDLE,
            Some(since) => {
                let due = since + store.cfg.commit_interval;
                let now = Instant::now();
                if now >= due {
                    if let (_, Err(e)) = store.commit_released(state) {
                        eprintln!("concerto-server: metadata commit failed: {e}");
                    }
                    continue;
                }
                due - now
            }
        };
        let _ = store
            .dirty
            .wait_timeout(state, wait)
            .unwrap_or_else(|p| p.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use concerto_proto::auth::Principal;

    use super::*;

    fn store(dir: &Path) -> Arc<Store> {
        Store::open(
            dir,
            MetadataConfig {
                data_servers: vec![0],
                default_unit: 64 << 10,
                default_count: 1,
                // Only syncs commit in these tests.
                commit_interval: Duration::from_secs(1),
            },
        )
        .unwrap()
    }

    fn mkdir(store: &Store, path: &str, wait: Wait) -> Result<u64, MetaError> {
        store
            .change(wait, true, |ops, alloc| {
                ops.make(path, (None, true, 0o755), &Principal::root(), 0, alloc)
            })
            .map(|(_, change)| change)
    }

    /// Polls until `done` (a flush under way) or panics after a deadline.
    fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "{what} did not happen within 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn reads_go_on_while_a_commit_flushes_and_see_every_change_while_changes_wait() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let made = mkdir(&store, "/a", Wait::Yes).unwrap();
        let gate = store.flush_gate.lock().unwrap();
        let syncer = {
            let store = store.clone();
            std::thread::spawn(move || store.sync(Wait::Yes))
        };
        until("the flush", || lock(&store.state).flushing);
        // The gate holds the flush: a read that waited for it would hang here.
        let found = store.read(Wait::Yes, |r| r.lookup("/a", &Principal::root()));
        assert!(found.is_ok(), "{found:?}");
        assert!(store
            .read(Wait::No, |r| r.get(found.unwrap().0))
            .unwrap()
            .is_some());
        assert_eq!(
            store.durable(),
            made - 1,
            "not durable before the flush ends"
        );
        // A change cannot be made during the flush: the scheduling loop is
        // told Busy, a storage thread waits.
        assert!(matches!(
            mkdir(&store, "/b", Wait::No),
            Err(MetaError::Busy)
        ));
        let waiting = {
            let store = store.clone();
            std::thread::spawn(move || mkdir(&store, "/b", Wait::Yes))
        };
        drop(gate);
        assert_eq!(syncer.join().unwrap().unwrap(), made);
        let second = waiting.join().unwrap().unwrap();
        assert_eq!(second, made + 1);
        assert_eq!(store.sync(Wait::Yes).unwrap(), second);
    }

    /// A store made before inodes named their parents (no parent in any
    /// record, no mark that they are known) has them filled in when it is
    /// opened: each inode's is the directory its entry is in.
    #[test]
    fn a_store_from_before_parents_has_them_filled_in_when_opened() {
        use super::super::records::{encode, load, COUNTERS, INODES, PARENTS_KNOWN, ROOT};

        let dir = tempfile::tempdir().unwrap();
        let ino = |store: &Store, path: &str| {
            store
                .read(Wait::Yes, |r| r.lookup(path, &Principal::root()))
                .unwrap()
                .0
        };
        let (a, b) = {
            let store = store(dir.path());
            mkdir(&store, "/a", Wait::Yes).unwrap();
            mkdir(&store, "/a/b", Wait::Yes).unwrap();
            let (a, b) = (ino(&store, "/a"), ino(&store, "/a/b"));
            store
                .change(Wait::Yes, false, |ops, _| {
                    let mut inodes = ops.txn.open_table(INODES)?;
                    for i in [ROOT, a, b] {
                        let mut node = load(&inodes, i)?.unwrap();
                        node.parent = 0;
                        inodes.insert(i, encode(&node).as_slice())?;
                    }
                    ops.txn.open_table(COUNTERS)?.remove(PARENTS_KNOWN)?;
                    Ok(())
                })
                .unwrap();
            store.sync(Wait::Yes).unwrap();
            store.close();
            (a, b)
        };
        // Opened again elsewhere (this process still holds the first).
        let again = tempfile::tempdir().unwrap();
        let file = "metadata.redb";
        std::fs::copy(dir.path().join(file), again.path().join(file)).unwrap();
        let store = store(again.path());
        let parent = |i| store.read(Wait::Yes, |r| r.get(i)).unwrap().unwrap().parent;
        assert_eq!((parent(ROOT), parent(a), parent(b)), (ROOT, ROOT, a));
    }
}
