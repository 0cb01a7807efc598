//! Directory listings: taken whole at opendir with every entry's
//! attributes (one request per 1,024 entries, and one more per file whose
//! size the metadata service would have to ask the data servers for), and
//! served from there by readdir and readdirplus, each call continuing at
//! the offset the last one ended (an entry's offset is its position plus
//! one). With readdirplus the kernel gets each entry's attributes with its
//! name, so `ls -l` of a directory needs no lookup per entry.

use concerto_client::Stat;
use concerto_proto::{DirEntry, FileKind};
use fuser::FileType;

use crate::inodes::HIDDEN_PREFIX;

/// A directory's listing as opendir took it.
pub(crate) struct Listing {
    /// The directory's path and attributes (its "." and "..").
    pub(crate) path: String,
    pub(crate) dir: Stat,
    /// Its entries but hidden ones (files unlinked while open here).
    pub(crate) entries: Vec<(DirEntry, Stat)>,
}

/// One line of a listing as readdir serves it.
pub(crate) struct Line<'a> {
    pub(crate) inode: u64,
    pub(crate) kind: FileType,
    pub(crate) name: &'a str,
    /// The entry's attributes, and whether it is "." or ".." (the kernel
    /// keeps no reference to those from a readdirplus).
    pub(crate) stat: &'a Stat,
    pub(crate) dot: bool,
    /// Where the next call resumes after this line.
    pub(crate) next: i64,
}

impl Listing {
    pub(crate) fn new(path: String, dir: Stat, entries: Vec<(DirEntry, Stat)>) -> Listing {
        let entries = entries
            .into_iter()
            .filter(|(e, _)| !e.name.starts_with(HIDDEN_PREFIX))
            .collect();
        Listing { path, dir, entries }
    }

    /// The lines from `offset` on: "." and ".." first, then the entries.
    pub(crate) fn from(&self, offset: i64) -> impl Iterator<Item = Line<'_>> {
        let start = usize::try_from(offset).unwrap_or(0);
        let dots = [".", ".."].into_iter().map(|name| Line {
            inode: self.dir.inode,
            kind: FileType::Directory,
            name,
            stat: &self.dir,
            dot: true,
            next: 0,
        });
        // Skipping the dots and slicing the entries: each call costs what
        // it serves, not the listing up to it.
        let dots_left = 2usize.saturating_sub(start);
        let first_entry = start.saturating_sub(2).min(self.entries.len());
        let entries = self.entries[first_entry..].iter().map(|(e, stat)| Line {
            inode: e.inode,
            kind: match e.kind {
                FileKind::Directory => FileType::Directory,
                FileKind::File => FileType::RegularFile,
            },
            name: e.name.as_str(),
            stat,
            dot: false,
            next: 0,
        });
        dots.skip(2 - dots_left)
            .chain(entries)
            .zip(start..)
            .map(|(line, i)| Line {
                next: i as i64 + 1,
                ..line
            })
    }

    /// The path of an entry of this directory.
    pub(crate) fn child(&self, name: &str) -> String {
        if self.path == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(inode: u64, kind: FileKind) -> Stat {
        Stat {
            inode,
            kind,
            size: 0,
            ctime_ns: 0,
            mtime_ns: 0,
            layout: None,
            default_layout: None,
            entries: 0,
            uid: 0,
            gid: 0,
            mode: 0o755,
        }
    }

    #[test]
    fn each_call_continues_where_the_last_ended_and_hidden_names_are_left_out() {
        let hidden = format!("{HIDDEN_PREFIX}1");
        let entries = ["a", hidden.as_str(), "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let e = DirEntry {
                    name: name.to_string(),
                    inode: 10 + i as u64,
                    kind: FileKind::File,
                };
                (e, stat(10 + i as u64, FileKind::File))
            })
            .collect();
        let l = Listing::new("/d".into(), stat(2, FileKind::Directory), entries);
        let all: Vec<(String, i64, bool)> = l
            .from(0)
            .map(|x| (x.name.to_string(), x.next, x.dot))
            .collect();
        let names: Vec<&str> = all.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(names, [".", "..", "a", "b", "c"]);
        assert_eq!(all.iter().map(|x| x.1).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
        for (i, line) in all.iter().enumerate() {
            let rest: Vec<String> = l.from(line.1).map(|x| x.name.to_string()).collect();
            assert_eq!(rest, names[i + 1..], "resuming after {}", line.0);
        }
        assert_eq!(l.from(99).count(), 0);
        assert_eq!(l.child("b"), "/d/b");
    }
}
