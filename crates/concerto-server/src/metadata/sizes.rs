//! What the metadata service knows of files' sizes, so that `stat` is one
//! round trip to it rather than one to every server of the file's layout.
//!
//! A file's size is the furthest byte any of its objects holds (as in
//! PVFS2), which is what makes it right after concurrent strided writes
//! from many clients with no size update per write. The service learns it
//! without asking the data servers in the common case, as Lustre's "size
//! on MDS" does: a file being written is open for writing by some
//! connections (`Create`, `Open { write }`, until `Close` or the
//! connection's end), and
//! - a new file has size 0;
//! - when the last writer closes a file that one connection alone wrote
//!   since its size was last known, the size is the larger of that size
//!   and the furthest byte the writer says it wrote (`Close::written_end`);
//!   the writer could have made any such size true with its own writes, so
//!   its word decides nothing it could not have done anyway;
//! - a truncate sets it.
//!
//! Otherwise (several writers, a writer whose connection died, a file not
//! written since the service started) the size is unknown, and the service
//! asks the data servers (a glimpse); a glimpse of a file nobody has open
//! for writing is kept. Known sizes are bounded ([`MAX_KNOWN`]); one
//! forgotten is glimpsed again when asked.

use std::collections::HashMap;

/// Most file sizes kept while no writer holds them.
pub(super) const MAX_KNOWN: usize = 1 << 20;
/// Most files one connection may hold open for writing.
pub(super) const MAX_OPEN_FOR_WRITE: u32 = 1 << 16;

#[derive(Debug, Default)]
struct FileSizes {
    /// The exact size, meaningful while no connection holds the file for writing.
    known: Option<u64>,
    /// Open-for-writing counts by connection.
    writers: HashMap<u64, u32>,
    /// Since the file was last without writers.
    period: Option<Period>,
    /// Taken afresh from the book's counter at every event that can
    /// change the file's size or data (an open for writing, a close, a
    /// truncate, a writer lost), so that a glimpse begun before one is not
    /// kept after it, and a client's cache of the file can tell it changed.
    generation: u64,
    /// The connection whose event gave `generation` (none: the file came
    /// back into the book unchanged), and the generation of the latest
    /// event of any other connection: what a connection's cache of the
    /// file is checked against is the latest change not its own.
    by: Option<u64>,
    before: u64,
}

impl FileSizes {
    /// An entry for a file the book knew nothing of: at `forgotten`.
    fn at(forgotten: u64) -> FileSizes {
        FileSizes {
            generation: forgotten,
            before: forgotten,
            ..FileSizes::default()
        }
    }

    /// `conn` changed the file (or may have): a fresh generation.
    fn changed_by(&mut self, conn: u64, changes: &mut u64) {
        if self.by != Some(conn) {
            self.before = self.generation;
        }
        self.generation = next(changes);
        self.by = Some(conn);
    }

    /// The generation of the latest change `conn` did not make.
    fn seen_by(&self, conn: u64) -> u64 {
        if self.by == Some(conn) {
            self.before
        } else {
            self.generation
        }
    }
}

#[derive(Debug)]
struct Period {
    /// The size when the period began (if known), or as a truncate set it.
    base: Option<u64>,
    /// The one connection that held the file for writing, if only one did.
    sole: Option<u64>,
    /// The furthest byte the sole writer says it wrote.
    end: u64,
}

/// A fresh generation.
fn next(changes: &mut u64) -> u64 {
    *changes += 1;
    *changes
}

/// The service's knowledge of sizes and writers.
#[derive(Debug, Default)]
pub(super) struct SizeBook {
    files: HashMap<u64, FileSizes>,
    /// Per connection: the files it holds open for writing, and how often.
    by_connection: HashMap<u64, HashMap<u64, u32>>,
    /// Files with a known size and no writer, for the bound.
    idle_known: usize,
    /// The last generation handed out.
    changes: u64,
    /// The largest generation of a file forgotten: a file the book has no
    /// entry for is at this generation (so forgetting a file's entry never
    /// makes an older generation of it come back).
    forgotten: u64,
}

impl SizeBook {
    /// A file just created by `conn`, which holds it open for writing.
    pub fn created(&mut self, inode: u64, conn: u64) -> Result<(), String> {
        self.make_room();
        self.forget(inode);
        self.files.insert(
            inode,
            FileSizes {
                known: Some(0),
                ..FileSizes::at(self.forgotten)
            },
        );
        self.idle_known += 1;
        self.opened_for_write(inode, conn)
    }

    /// `conn` opens the file for writing.
    pub fn opened_for_write(&mut self, inode: u64, conn: u64) -> Result<(), String> {
        let held = self.by_connection.entry(conn).or_default();
        if held.len() as u32 >= MAX_OPEN_FOR_WRITE && !held.contains_key(&inode) {
            return Err(format!(
                "this connection holds {MAX_OPEN_FOR_WRITE} files open for writing already; \
                 close some first"
            ));
        }
        *held.entry(inode).or_default() += 1;
        let forgotten = self.forgotten;
        let file = self
            .files
            .entry(inode)
            .or_insert_with(|| FileSizes::at(forgotten));
        if file.writers.is_empty() {
            if file.known.is_some() {
                self.idle_known -= 1;
            }
            file.period = Some(Period {
                base: file.known.take(),
                sole: Some(conn),
                end: 0,
            });
        } else if let Some(p) = file.period.as_mut() {
            if p.sole != Some(conn) {
                p.sole = None;
            }
        }
        *file.writers.entry(conn).or_default() += 1;
        file.changed_by(conn, &mut self.changes);
        Ok(())
    }

    /// Whether `conn` holds the file open for writing: a close from a
    /// connection that does not may not touch the file (its mtime).
    pub fn holds(&self, inode: u64, conn: u64) -> bool {
        self.by_connection
            .get(&conn)
            .is_some_and(|held| held.contains_key(&inode))
    }

    /// `conn` closes a descriptor it opened for writing; it wrote up to
    /// `written_end` (since it opened the file or last truncated it).
    pub fn closed(&mut self, inode: u64, conn: u64, written_end: u64) {
        let Some(held) = self.by_connection.get_mut(&conn) else {
            return;
        };
        let Some(n) = held.get_mut(&inode) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            held.remove(&inode);
        }
        let Some(file) = self.files.get_mut(&inode) else {
            return;
        };
        if let Some(p) = file.period.as_mut() {
            if p.sole == Some(conn) {
                p.end = p.end.max(written_end);
            }
        }
        Self::release(file, conn, 1, (&mut self.idle_known, &mut self.changes));
    }

    /// `conn` gives up `n` holds of the file; the last one ends the period.
    fn release(
        file: &mut FileSizes,
        conn: u64,
        n: u32,
        (idle_known, changes): (&mut usize, &mut u64),
    ) {
        if let Some(count) = file.writers.get_mut(&conn) {
            *count = count.saturating_sub(n);
            if *count == 0 {
                file.writers.remove(&conn);
            }
        }
        file.changed_by(conn, changes);
        if file.writers.is_empty() {
            file.known = file.period.take().and_then(|p| match (p.sole, p.base) {
                (Some(_), Some(base)) => Some(base.max(p.end)),
                _ => None,
            });
            if file.known.is_some() {
                *idle_known += 1;
            }
        }
    }

    /// A connection ended: what it held for writing is released, and the
    /// sizes it may have changed without saying are unknown.
    pub fn connection_closed(&mut self, conn: u64) {
        let Some(held) = self.by_connection.remove(&conn) else {
            return;
        };
        for (inode, n) in held {
            if let Some(file) = self.files.get_mut(&inode) {
                if let Some(p) = file.period.as_mut() {
                    p.sole = None;
                }
                Self::release(file, conn, n, (&mut self.idle_known, &mut self.changes));
            }
        }
    }

    /// A truncate to `size` by `conn`.
    pub fn truncated(&mut self, inode: u64, conn: u64, size: u64) {
        self.make_room();
        let forgotten = self.forgotten;
        let file = self
            .files
            .entry(inode)
            .or_insert_with(|| FileSizes::at(forgotten));
        file.changed_by(conn, &mut self.changes);
        match file.period.as_mut() {
            None => {
                if file.known.is_none() {
                    self.idle_known += 1;
                }
                file.known = Some(size);
            }
            // The sole writer's own truncate: its writes after it count
            // from here (the client counts its written end afresh too).
            Some(p) if p.sole == Some(conn) => {
                p.base = Some(size);
                p.end = 0;
            }
            Some(p) => p.sole = None,
        }
    }

    /// The file is gone.
    pub fn forget(&mut self, inode: u64) {
        if let Some(file) = self.files.remove(&inode) {
            self.forgotten = self.forgotten.max(file.generation);
            if file.writers.is_empty() && file.known.is_some() {
                self.idle_known -= 1;
            }
            for conn in file.writers.keys() {
                if let Some(held) = self.by_connection.get_mut(conn) {
                    held.remove(&inode);
                }
            }
        }
    }

    /// The size if known now, else the generation a glimpse must match to be kept.
    pub fn size(&self, inode: u64) -> Result<u64, u64> {
        match self.files.get(&inode) {
            Some(f) if f.writers.is_empty() => f.known.ok_or(f.generation),
            Some(f) => Err(f.generation),
            None => Err(self.forgotten),
        }
    }

    /// The file's generation as `conn` sees it: it differs from any
    /// earlier one (in this service's life) once another connection may
    /// have changed the file's data. (A connection's own writes are in its
    /// own cache already.)
    pub fn change_seen_by(&self, inode: u64, conn: u64) -> u64 {
        self.files
            .get(&inode)
            .map_or(self.forgotten, |f| f.seen_by(conn))
    }

    /// Whether a connection other than `conn` holds the file open for
    /// writing (its data may be changing now).
    pub fn written_elsewhere(&self, inode: u64, conn: u64) -> bool {
        self.files
            .get(&inode)
            .is_some_and(|f| f.writers.keys().any(|&c| c != conn))
    }

    /// A glimpse begun at `generation` found `size`: kept if nothing
    /// changed meanwhile and nobody holds the file for writing.
    pub fn glimpsed(&mut self, inode: u64, generation: u64, size: u64) {
        self.make_room();
        let forgotten = self.forgotten;
        let file = self
            .files
            .entry(inode)
            .or_insert_with(|| FileSizes::at(forgotten));
        if file.generation == generation && file.writers.is_empty() {
            if file.known.is_none() {
                self.idle_known += 1;
            }
            file.known = Some(size);
        }
    }

    /// At the bound, forgets known sizes of files nobody writes until a
    /// tenth of it is free (they are glimpsed again when asked).
    fn make_room(&mut self) {
        if self.idle_known < MAX_KNOWN {
            return;
        }
        let target = MAX_KNOWN - MAX_KNOWN / 10;
        let mut idle = self.idle_known;
        let mut forgotten = self.forgotten;
        self.files.retain(|_, f| {
            let drop = idle > target && f.writers.is_empty();
            if drop && f.known.is_some() {
                idle -= 1;
            }
            if drop {
                forgotten = forgotten.max(f.generation);
            }
            !drop
        });
        self.idle_known = idle;
        self.forgotten = forgotten;
    }

    #[cfg(test)]
    fn writers(&self, inode: u64) -> u32 {
        self.files
            .get(&inode)
            .map_or(0, |f| f.writers.values().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sole_writer_decides_the_size_and_a_second_one_makes_it_unknown() {
        let mut book = SizeBook::default();
        book.created(7, 1).unwrap();
        assert!(book.size(7).is_err(), "held open for writing");
        book.closed(7, 1, 4096);
        assert_eq!(book.size(7), Ok(4096));
        // A sole writer that only overwrote keeps the old, larger size.
        book.opened_for_write(7, 1).unwrap();
        book.closed(7, 1, 100);
        assert_eq!(book.size(7), Ok(4096));
        // Two connections writing: nobody's word decides.
        book.opened_for_write(7, 1).unwrap();
        book.opened_for_write(7, 2).unwrap();
        book.closed(7, 1, 9000);
        book.closed(7, 2, 10);
        let generation = book.size(7).unwrap_err();
        book.glimpsed(7, generation, 9000);
        assert_eq!(book.size(7), Ok(9000));
        // A glimpse overtaken by a writer is not kept.
        book.opened_for_write(7, 3).unwrap();
        let stale = book.size(7).unwrap_err();
        book.closed(7, 3, 0);
        book.glimpsed(7, stale, 1);
        assert_eq!(book.size(7), Ok(9000));
    }

    #[test]
    fn every_change_by_another_connection_gives_a_generation_never_seen() {
        let mut book = SizeBook::default();
        // Connection 5 only reads: it sees every change.
        let mut seen = vec![book.change_seen_by(9, 5)];
        let mut fresh = |book: &SizeBook, what: &str| {
            let g = book.change_seen_by(9, 5);
            assert!(!seen.contains(&g), "{what}: generation {g} seen before");
            seen.push(g);
        };
        book.created(9, 1).unwrap();
        fresh(&book, "created");
        assert!(
            !book.written_elsewhere(9, 1),
            "its own writer is not elsewhere"
        );
        assert!(book.written_elsewhere(9, 2));
        book.closed(9, 1, 10);
        fresh(&book, "closed");
        let quiet = book.change_seen_by(9, 5);
        let generation = book.size(9).map_or_else(|g| g, |_| quiet);
        book.glimpsed(9, generation, 10);
        assert_eq!(
            book.change_seen_by(9, 5),
            quiet,
            "a glimpse changes nothing"
        );
        book.opened_for_write(9, 2).unwrap();
        fresh(&book, "opened for writing");
        book.connection_closed(2);
        fresh(&book, "its writer lost");
        book.truncated(9, 3, 0);
        fresh(&book, "truncated");
        // Forgotten (past the bound, or removed: inode numbers are never
        // used again): never back to an older value.
        let last = book.change_seen_by(9, 5);
        book.forget(9);
        assert_eq!(book.change_seen_by(9, 5), last);
        assert_eq!(
            book.change_seen_by(12345, 5),
            last,
            "a file without an entry is at the mark"
        );
        book.opened_for_write(9, 4).unwrap();
        fresh(&book, "written again");
    }

    #[test]
    fn a_connections_own_changes_leave_its_view_of_the_file_as_it_was() {
        let mut book = SizeBook::default();
        book.created(3, 1).unwrap();
        book.closed(3, 1, 100);
        let mine = book.change_seen_by(3, 1);
        // Connection 1 writes again: its own cache has what it wrote.
        book.opened_for_write(3, 1).unwrap();
        book.closed(3, 1, 200);
        assert_eq!(book.change_seen_by(3, 1), mine);
        let theirs = book.change_seen_by(3, 2);
        // Connection 2 writes: connection 1 sees a change, 2 does not.
        book.opened_for_write(3, 2).unwrap();
        book.closed(3, 2, 300);
        assert_ne!(book.change_seen_by(3, 1), mine);
        assert_eq!(book.change_seen_by(3, 2), theirs);
        // Then 1 writes again: 2 sees that; 1 still sees 2's change.
        let after_theirs = book.change_seen_by(3, 1);
        book.opened_for_write(3, 1).unwrap();
        assert_eq!(book.change_seen_by(3, 1), after_theirs);
        assert_ne!(book.change_seen_by(3, 2), theirs);
    }

    #[test]
    fn a_writer_that_dies_leaves_the_size_unknown_and_truncates_set_it() {
        let mut book = SizeBook::default();
        book.created(5, 1).unwrap();
        book.opened_for_write(5, 1).unwrap();
        book.connection_closed(1);
        assert_eq!(book.writers(5), 0);
        assert!(book.size(5).is_err());
        book.truncated(5, 9, 123);
        assert_eq!(book.size(5), Ok(123));
        // The sole writer's own truncate, then its writes.
        book.opened_for_write(5, 2).unwrap();
        book.truncated(5, 2, 0);
        book.closed(5, 2, 50);
        assert_eq!(book.size(5), Ok(50));
        // Someone else's truncate while a writer holds it: unknown.
        book.opened_for_write(5, 2).unwrap();
        book.truncated(5, 3, 10);
        book.closed(5, 2, 20);
        assert!(book.size(5).is_err());
        let last = book.change_seen_by(5, 99);
        book.forget(5);
        assert_eq!(book.size(5), Err(last), "unknown, at the mark");
    }

    #[test]
    fn a_close_without_an_open_changes_nothing_and_holds_are_bounded() {
        let mut book = SizeBook::default();
        book.created(1, 1).unwrap();
        book.closed(1, 2, 1 << 40);
        book.closed(1, 1, 10);
        assert_eq!(book.size(1), Ok(10));
        let mut refused = None;
        for inode in 0..=MAX_OPEN_FOR_WRITE as u64 {
            if let Err(e) = book.opened_for_write(100 + inode, 4) {
                refused = Some(e);
            }
        }
        assert!(refused.is_some_and(|e| e.contains("open for writing")));
    }

    /// Events for one file from three connections.
    #[derive(Clone, Debug)]
    enum Event {
        Open(u64),
        Close(u64, u64),
        Truncate(u64, u64),
        Die(u64),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (1u64..4).prop_map(Event::Open),
            (1u64..4, 0u64..1000).prop_map(|(c, e)| Event::Close(c, e)),
            (1u64..4, 0u64..1000).prop_map(|(c, s)| Event::Truncate(c, s)),
            (1u64..4).prop_map(Event::Die),
        ]
    }

    proptest! {
        /// Whatever the events, a size is known only while no connection
        /// holds the file for writing, and the writer counts never go wrong.
        #[test]
        fn a_known_size_never_coexists_with_a_writer(events in proptest::collection::vec(event(), 0..60)) {
            let mut book = SizeBook::default();
            book.created(1, 1).unwrap();
            book.closed(1, 1, 0);
            let mut open: HashMap<u64, u32> = HashMap::new();
            for e in events {
                match e {
                    Event::Open(c) => { book.opened_for_write(1, c).unwrap(); *open.entry(c).or_default() += 1; }
                    Event::Close(c, end) => {
                        book.closed(1, c, end);
                        if let Some(n) = open.get_mut(&c) { *n = n.saturating_sub(1); }
                    }
                    Event::Truncate(c, s) => book.truncated(1, c, s),
                    Event::Die(c) => { book.connection_closed(c); open.remove(&c); }
                }
                let held: u32 = open.values().sum();
                prop_assert_eq!(book.writers(1), held);
                if held > 0 { prop_assert!(book.size(1).is_err()); }
            }
        }
    }
}
