//! POSIX permissions on the namespace: who may search, read and write a
//! file or directory, remove or rename an entry, and change owners and
//! modes. The identity checked is the one the connection's *key* carries
//! ([`Principal`]); nothing a request says about its user counts. Written
//! here rather than taken from a library because the rules are the
//! product's: they are the POSIX ones (owner class first, then group, then
//! others; root passes every check; sticky directories keep others'
//! entries), applied to the service's own inodes.

use concerto_proto::auth::Principal;
use concerto_proto::FileKind;

use super::error::MetaError;
use super::records::Inode;

pub(super) const READ: u32 = 4;
pub(super) const WRITE: u32 = 2;
pub(super) const SEARCH: u32 = 1;
pub(super) const SETUID: u32 = 0o4000;
pub(super) const SETGID: u32 = 0o2000;
pub(super) const STICKY: u32 = 0o1000;

/// The mode a new store's root directory gets: everyone may create in
/// it, and only an entry's owner (or the directory's, or root) may remove
/// or rename it, as a shared `/scratch` or `/tmp`.
pub(super) const ROOT_MODE: u32 = 0o1777;

/// Whether `who` may do `want` (a mask of [`READ`], [`WRITE`], [`SEARCH`])
/// on `node`. The owner's bits apply to the owner even where the group's
/// or others' would allow more, as POSIX says; root may do everything but
/// execute a file no one may execute.
pub(super) fn allows(who: &Principal, node: &Inode, want: u32) -> bool {
    if who.is_root() {
        let executes = want & SEARCH != 0 && node.kind == FileKind::File;
        return !executes || node.mode & 0o111 != 0;
    }
    let bits = if who.uid == node.uid {
        node.mode >> 6
    } else if who.in_group(node.gid) {
        node.mode >> 3
    } else {
        node.mode
    } & 7;
    bits & want == want
}

/// `Ok` when `who` may do `want` on `node` at `path`; else `Denied` naming
/// the operation, the file and why.
pub(super) fn check(
    who: &Principal,
    node: &Inode,
    want: u32,
    operation: &str,
    path: &str,
) -> Result<(), MetaError> {
    if allows(who, node, want) {
        return Ok(());
    }
    Err(denied(
        operation,
        path,
        format!(
            "needs {} on a {} of mode {:04o} owned by {}:{}; the key acts as {}",
            rights(want),
            kind_name(node.kind),
            node.mode,
            node.uid,
            node.gid,
            shown(who)
        ),
    ))
}

/// The error for a refused operation on `path`.
pub(super) fn denied(operation: &str, path: &str, why: String) -> MetaError {
    MetaError::Denied(format!("{operation} {path}: permission denied ({why})"))
}

/// What only the owner (or root) may do, refused to another, as POSIX's
/// EPERM: no mode bit would have let them.
fn not_permitted(operation: &str, path: &str, why: String) -> MetaError {
    MetaError::NotPermitted(format!(
        "{operation} {path}: operation not permitted ({why})"
    ))
}

/// Whether `who` may remove or rename away the entry `node` of directory
/// `dir` (on which it has write and search permission already): in a
/// sticky directory only the entry's owner, the directory's owner or root.
pub(super) fn check_sticky(
    who: &Principal,
    dir: &Inode,
    node: &Inode,
    operation: &str,
    path: &str,
) -> Result<(), MetaError> {
    if dir.mode & STICKY == 0 || who.is_root() || who.uid == node.uid || who.uid == dir.uid {
        return Ok(());
    }
    Err(not_permitted(
        operation,
        path,
        format!(
            "its directory is sticky (mode {:04o}): only its owner {}, the directory's owner {} or root may; the key acts as {}",
            dir.mode,
            node.uid,
            dir.uid,
            shown(who)
        ),
    ))
}

/// The owner, group and mode a new entry of directory `dir` gets, asked
/// for with `mode` by `who`: its group is the directory's when the
/// directory is set-group-id (and a new directory inherits that bit), else
/// the caller's primary group; a non-root caller cannot make a file
/// set-group-id for a group it is not in.
pub(super) fn new_owner(
    who: &Principal,
    dir: &Inode,
    kind: FileKind,
    mode: u32,
) -> (u32, u32, u32) {
    let inherit = dir.mode & SETGID != 0;
    let gid = if inherit { dir.gid } else { who.gid };
    let mut mode = mode & concerto_proto::MAX_MODE;
    if kind == FileKind::Directory && inherit {
        mode |= SETGID;
    }
    if kind == FileKind::File && !who.is_root() && !who.in_group(gid) {
        mode &= !SETGID;
    }
    (who.uid, gid, mode)
}

/// chmod and chown/chgrp of `node` at `path` by `who`: the new owner,
/// group and mode, or why not. Only root changes a file's owner; its owner
/// may give it a group it is in and change its mode. A change of owner or
/// group by someone other than root clears set-user-id and set-group-id,
/// as Linux does; a non-root chmod that keeps set-group-id for a group the
/// caller is not in clears it.
pub(super) fn set_attr(
    who: &Principal,
    node: &Inode,
    path: &str,
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
) -> Result<(u32, u32, u32), MetaError> {
    let owner = who.is_root() || who.uid == node.uid;
    let new_uid = uid.unwrap_or(node.uid);
    let new_gid = gid.unwrap_or(node.gid);
    if new_uid != node.uid && !who.is_root() {
        return Err(not_permitted(
            "chown",
            path,
            format!(
                "only root (the admin key) gives a file to another user; the key acts as {}",
                shown(who)
            ),
        ));
    }
    if new_gid != node.gid && !(who.is_root() || (owner && who.in_group(new_gid))) {
        return Err(not_permitted(
            "chgrp",
            path,
            format!(
                "only its owner {}, to a group it is in, or root may; the key acts as {}",
                node.uid,
                shown(who)
            ),
        ));
    }
    if mode.is_some() && !owner {
        return Err(not_permitted(
            "chmod",
            path,
            format!(
                "only its owner {} or root may; the key acts as {}",
                node.uid,
                shown(who)
            ),
        ));
    }
    let mut bits = mode.unwrap_or(node.mode) & concerto_proto::MAX_MODE;
    let moved = new_uid != node.uid || new_gid != node.gid;
    if moved && !who.is_root() && mode.is_none() && node.kind == FileKind::File {
        bits &= !(SETUID | SETGID);
    }
    if mode.is_some() && !who.is_root() && !who.in_group(new_gid) && node.kind == FileKind::File {
        bits &= !SETGID;
    }
    Ok((new_uid, new_gid, bits))
}

fn rights(want: u32) -> String {
    let mut s = String::new();
    for (bit, name) in [(READ, "read"), (WRITE, "write"), (SEARCH, "search")] {
        if want & bit != 0 {
            if !s.is_empty() {
                s.push_str(" and ");
            }
            s.push_str(name);
        }
    }
    s
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Directory => "directory",
    }
}

fn shown(who: &Principal) -> String {
    match who.uid {
        0 => "root".into(),
        concerto_proto::auth::NOBODY => "nobody (65534: a key that names no user)".into(),
        uid => format!("user {uid} (groups {:?})", who.groups),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: FileKind, uid: u32, gid: u32, mode: u32) -> Inode {
        Inode {
            kind,
            ctime_ns: 0,
            mtime_ns: 0,
            layout: None,
            default_layout: None,
            entries: 0,
            uid,
            gid,
            mode,
            parent: 0,
        }
    }

    fn user(uid: u32, groups: &[u32]) -> Principal {
        Principal {
            uid,
            gid: groups[0],
            groups: groups.to_vec(),
        }
    }

    /// Each class's bits, for the owner, a group member and another user,
    /// as `ls -l` reads them; the owner's class applies to the owner even
    /// where others' bits allow more.
    #[test]
    fn owner_group_and_others_each_get_their_own_bits() {
        let owner = user(1001, &[100]);
        let member = user(1002, &[200, 100]);
        let other = user(1003, &[300]);
        let cases = [
            // mode, who, want, allowed
            (0o600, &owner, READ | WRITE, true),
            (0o600, &member, READ, false),
            (0o640, &member, READ, true),
            (0o640, &member, WRITE, false),
            (0o640, &other, READ, false),
            (0o604, &other, READ, true),
            (0o604, &member, READ, false),
            (0o077, &owner, READ, false),
            (0o070, &member, READ | WRITE | SEARCH, true),
            (0o001, &other, SEARCH, true),
        ];
        for (mode, who, want, allowed) in cases {
            let n = node(FileKind::File, 1001, 100, mode);
            assert_eq!(
                allows(who, &n, want),
                allowed,
                "mode {mode:o} uid {} want {want}",
                who.uid
            );
        }
    }

    #[test]
    fn root_passes_every_check_but_executing_what_no_one_may() {
        let root = Principal::root();
        let f = node(FileKind::File, 1001, 100, 0o000);
        assert!(allows(&root, &f, READ | WRITE));
        assert!(!allows(&root, &f, SEARCH));
        let d = node(FileKind::Directory, 1001, 100, 0o000);
        assert!(allows(&root, &d, READ | WRITE | SEARCH));
    }

    #[test]
    fn a_sticky_directory_keeps_others_entries() {
        let dir = node(FileKind::Directory, 0, 0, ROOT_MODE);
        let theirs = node(FileKind::File, 1001, 100, 0o666);
        let me = user(1002, &[100]);
        let e = check_sticky(&me, &dir, &theirs, "unlink", "/f").unwrap_err();
        assert!(
            e.to_string().contains("unlink /f: operation not permitted"),
            "{e}"
        );
        assert_eq!(e.kind(), concerto_proto::ErrorKind::NotPermitted);
        assert!(e.to_string().contains("sticky"), "{e}");
        assert!(check_sticky(&user(1001, &[100]), &dir, &theirs, "unlink", "/f").is_ok());
        assert!(check_sticky(&Principal::root(), &dir, &theirs, "unlink", "/f").is_ok());
        let plain = node(FileKind::Directory, 0, 0, 0o777);
        assert!(check_sticky(&me, &plain, &theirs, "unlink", "/f").is_ok());
    }

    #[test]
    fn a_set_group_id_directory_gives_its_group_and_passes_the_bit_to_directories() {
        let me = user(1001, &[100]);
        let shared = node(FileKind::Directory, 0, 500, 0o2775);
        assert_eq!(
            new_owner(&me, &shared, FileKind::Directory, 0o755),
            (1001, 500, 0o2755)
        );
        // Not in group 500: a file cannot be set-group-id for it.
        assert_eq!(
            new_owner(&me, &shared, FileKind::File, 0o2644),
            (1001, 500, 0o644)
        );
        let plain = node(FileKind::Directory, 0, 0, 0o1777);
        assert_eq!(
            new_owner(&me, &plain, FileKind::File, 0o640),
            (1001, 100, 0o640)
        );
    }

    #[test]
    fn only_root_gives_a_file_away_and_only_the_owner_changes_its_mode() {
        let f = node(FileKind::File, 1001, 100, 0o6755);
        let owner = user(1001, &[100, 101]);
        let other = user(1002, &[100]);
        // Only the owner or root: EPERM, as POSIX (no mode bit would do).
        let e = set_attr(&owner, &f, "/f", None, Some(1002), None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("chown /f: operation not permitted"),
            "{e}"
        );
        assert_eq!(e.kind(), concerto_proto::ErrorKind::NotPermitted);
        let e = set_attr(&other, &f, "/f", Some(0o777), None, None).unwrap_err();
        assert_eq!(e.kind(), concerto_proto::ErrorKind::NotPermitted, "{e}");
        let e = set_attr(&owner, &f, "/f", None, None, Some(300)).unwrap_err();
        assert_eq!(e.kind(), concerto_proto::ErrorKind::NotPermitted, "{e}");
        // chgrp to a group of its own clears set-user-id and set-group-id.
        assert_eq!(
            set_attr(&owner, &f, "/f", None, None, Some(101)).unwrap(),
            (1001, 101, 0o755)
        );
        assert_eq!(
            set_attr(&owner, &f, "/f", Some(0o600), None, None).unwrap(),
            (1001, 100, 0o600)
        );
        assert_eq!(
            set_attr(&Principal::root(), &f, "/f", None, Some(7), Some(8)).unwrap(),
            (7, 8, 0o6755)
        );
    }

    #[test]
    fn a_refusal_names_the_operation_the_file_the_mode_and_the_user() {
        let f = node(FileKind::File, 1001, 100, 0o600);
        let e = check(&user(1002, &[200]), &f, READ, "open for reading", "/a/f").unwrap_err();
        assert_eq!(
            e.to_string(),
            "open for reading /a/f: permission denied (needs read on a file of mode 0600 owned by 1001:100; the key acts as user 1002 (groups [200]))"
        );
        assert_eq!(e.kind(), concerto_proto::ErrorKind::Denied);
    }
}
