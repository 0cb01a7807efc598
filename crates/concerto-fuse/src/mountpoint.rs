//! The mount point: what is mounted there (from `/proc/self/mountinfo`,
//! by mount id, so that a mount detaches only itself), a busy mount point
//! refused, and a stale Concerto mount (its process killed) cleared.

use std::io;
use std::path::Path;

use concerto_proto::cluster::MOUNT_SOURCE;

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// Unique while mounted; reused only after it is gone.
    pub id: u64,
    pub fstype: String,
    pub source: String,
}

impl MountEntry {
    /// A Concerto mount (fuse or fuse.concerto, source `concerto`, or
    /// `concerto@` and its cluster's metadata server).
    pub fn is_concerto(&self) -> bool {
        let ours = match self.source.split_once('@') {
            Some((name, _)) => name == MOUNT_SOURCE,
            None => self.source == MOUNT_SOURCE,
        };
        ours && self.fstype.starts_with("fuse")
    }
}

/// The kernel writes spaces and the like in paths as octal escapes.
fn escaped(path: &Path) -> String {
    path.to_string_lossy()
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012")
}

/// Every mount at exactly `path`, bottom first (the last is the one a
/// lookup of `path` reaches).
pub(crate) fn mounts_at(path: &Path) -> io::Result<Vec<MountEntry>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let want = escaped(path);
    Ok(info.lines().filter_map(|line| parse(line, &want)).collect())
}

/// `36 35 98:0 /root /mnt rw,noatime master:1 - fuse.concerto concerto rw,...`:
/// id, parent, device, root, mount point, options, optional fields up to
/// `-`, then type, source, super options.
fn parse(line: &str, want: &str) -> Option<MountEntry> {
    let mut fields = line.split(' ');
    let id = fields.next()?.parse().ok()?;
    let at = fields.nth(3)?;
    if at != want {
        return None;
    }
    let mut rest = fields.skip_while(|f| *f != "-").skip(1);
    Some(MountEntry {
        id,
        fstype: rest.next()?.to_string(),
        source: rest.next()?.to_string(),
    })
}

/// The mount a lookup of `path` reaches, if `path` is a mount point.
pub(crate) fn top(path: &Path) -> Option<MountEntry> {
    mounts_at(path).ok()?.pop()
}

/// A lazy unmount of `mountpoint`: as root with umount2, else with
/// `fusermount3 -u -z`. True when it is gone.
pub(crate) fn detach(mountpoint: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    (unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) } == 0)
        || std::process::Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(mountpoint)
            .status()
            .is_ok_and(|s| s.success())
}

/// Makes sure `mountpoint` can be mounted on: a live mount there (of any
/// file system, Concerto's included) is refused, so that one mount never
/// hides or later detaches another; a Concerto mount whose process died
/// (every access fails with ENOTCONN) is cleared; anything else dead is
/// left to its owner, with the command to clear it.
pub(crate) fn prepare(mountpoint: &Path) -> io::Result<()> {
    let stale = matches!(
        std::fs::metadata(mountpoint),
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN)
    );
    // Not canonicalize: that needs the stat that fails on a dead mount.
    // The mount table holds absolute paths.
    let absolute = std::path::absolute(mountpoint)?;
    let shown = absolute.display();
    let Some(existing) = top(&absolute) else {
        return Ok(());
    };
    if !stale {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{shown} is a mount point already ({} from {}): mount Concerto on an empty directory that is not mounted on",
                existing.fstype, existing.source
            ),
        ));
    }
    if !existing.is_concerto() {
        return Err(io::Error::other(format!(
            "{shown} is a mount whose file system is gone (transport endpoint not connected), \
             and not a Concerto one: unmount it (`fusermount3 -u {shown}` or, as root, `umount -l {shown}`)"
        )));
    }
    if detach(&absolute) {
        eprintln!("concerto-fuse: cleared the stale mount left at {shown} by a mount that died");
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{shown} holds a stale Concerto mount (its process died) that could not be cleared: \
             run `fusermount3 -u {shown}` (or, as root, `umount -l {shown}`) and mount again"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_id_type_and_source() {
        let line = "812 29 0:64 / /tmp/a\\040b rw,nosuid,nodev,noatime shared:401 - fuse.concerto concerto rw,user_id=0";
        assert_eq!(
            parse(line, "/tmp/a\\040b"),
            Some(MountEntry {
                id: 812,
                fstype: "fuse.concerto".into(),
                source: "concerto".into()
            })
        );
        assert!(parse(line, "/tmp/a").is_none());
        assert!(parse(line, "/tmp/a\\040b").unwrap().is_concerto());
        let named = "813 29 0:65 / /m rw - fuse concerto@127.0.0.1:7000 rw,user_id=0";
        assert!(
            parse(named, "/m").unwrap().is_concerto(),
            "a mount naming its cluster"
        );
        let other = "814 29 0:66 / /o rw - fuse concertox@1.2.3.4:5 rw,user_id=0";
        assert!(!parse(other, "/o").unwrap().is_concerto());
        let bare = "40 29 0:33 / /mnt rw - tmpfs tmpfs rw";
        assert!(!parse(bare, "/mnt").unwrap().is_concerto());
        assert_eq!(escaped(Path::new("/a b")), "/a\\040b");
        assert!(parse("garbage", "/").is_none());
    }
}
