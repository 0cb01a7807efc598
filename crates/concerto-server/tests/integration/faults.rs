//! Faults that must end in clear errors, on a loopback cluster: a full
//! disk (ENOSPC for data and metadata, and the metadata store working
//! again once space is freed, without a restart), and a file removed while
//! a descriptor to it is still in use (ESTALE, and no object left behind).

use std::path::{Path, PathBuf};
use std::process::Command;

use concerto_client::{ClientError, FsClient, Identity};
use concerto_proto::{ErrorKind, LayoutRequest};
use concerto_server::local::{LocalCluster, LocalClusterSpec};

use crate::common;
use common::eventually;

fn client(c: &LocalCluster) -> FsClient {
    FsClient::new(c.cluster.clone(), Identity::new(1, 0), c.admin.clone())
}

/// A small tmpfs of its own, unmounted when dropped: a disk that fills
/// up without filling the machine's. (Mounting needs root, as the FUSE
/// tests do; CI runs as root.)
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn new(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mounting a {size} tmpfs at {} (needs root): {}",
            dir.path().display(),
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills what is left with a file of the test's own; returns it.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let taken = std::fs::read_dir(self.path()).unwrap().count();
        let path = self.path().join(format!("filler-{taken}"));
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![1u8; 4096];
        loop {
            match f.write_all(&block) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return path,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn kind<T: std::fmt::Debug>(r: Result<T, ClientError>) -> Option<ErrorKind> {
    r.unwrap_err().kind()
}

/// Data servers and the metadata store share one 16 MiB disk, filled by
/// the file system and then by another user (the test's own files):
/// - writing past the end gives NoSpace (ENOSPC on the mount), and on the
///   full disk the file can be deleted, which makes room (once the
///   metadata service removed its objects, moments after the unlink);
/// - full again, a create ends in NoSpace, the store gives up its reserve
///   and takes only what frees space until there is room, saying why;
/// - the store works on without a restart (without reopening redb, every
///   transaction after the first failure would fail with "Previous I/O
///   error occurred");
/// - once there is room, the reserve comes back and files are created
///   again; nothing committed before is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_gives_no_space_and_deletes_still_make_room() {
    let disk = SmallDisk::new("16m");
    let root = disk.path().join("cluster");
    let c = LocalCluster::start(&root, LocalClusterSpec::fifo(2))
        .await
        .unwrap();
    let reserve = root.join("s0").join("metadata.reserve");
    assert!(reserve.exists(), "the metadata store keeps a reserve");
    let fs = client(&c);
    const BEFORE: usize = 20;
    for i in 0..BEFORE {
        fs.create(&format!("/before-{i}"), LayoutRequest::default(), true)
            .await
            .unwrap();
    }
    let big = fs
        .create("/big", LayoutRequest::default(), true)
        .await
        .unwrap();
    // Durable before the data fills the disk: a group commit falling due
    // while the disk is nearly full would give the reserve up then, and
    // the other user below would take that room too, leaving the unlink no
    // room to commit in (the case the reserve exists for comes after).
    fs.fsync(&big).await.unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut written = 0u64;
    let e = loop {
        match fs.write(&big, written, &chunk).await {
            Ok(()) => written += chunk.len() as u64,
            Err(e) => break e,
        }
        assert!(written < 64 << 20, "a 16 MiB disk took {written} bytes");
    };
    assert_eq!(e.kind(), Some(ErrorKind::NoSpace), "{e}");
    assert!(
        reserve.exists(),
        "no commit gave the reserve up while the data filled the disk"
    );
    let filler = disk.fill();
    fs.unlink("/big").await.unwrap();
    eventually("the unlinked file's room is free for a create", || async {
        fs.create("/after", LayoutRequest::default(), true)
            .await
            .is_ok()
    })
    .await;
    assert!(reserve.exists());
    // Full again: a create that finds the disk full gives the reserve up,
    // and from then on only what frees space is taken.
    let filler2 = disk.fill();
    let mut refused = Vec::new();
    for i in 0..5000 {
        if let Err(e) = fs
            .create(&format!("/full-{i}"), LayoutRequest::default(), true)
            .await
        {
            refused.push(e);
            if refused.len() == 2 {
                break;
            }
        }
    }
    assert_eq!(refused.len(), 2, "5000 creates on a full disk: {refused:?}");
    for e in &refused {
        assert_eq!(e.kind(), Some(ErrorKind::NoSpace), "{e}");
        assert!(e.to_string().contains("metadata store"), "{e}");
    }
    assert!(!reserve.exists(), "the reserve was given up");
    assert!(
        refused[1]
            .to_string()
            .contains("can be removed, not created"),
        "{}",
        refused[1]
    );
    fs.unlink("/before-0").await.unwrap();
    fs.unlink("/before-1").await.unwrap();
    std::fs::remove_file(filler2).unwrap();
    fs.create("/after-room", LayoutRequest::default(), true)
        .await
        .unwrap();
    assert!(reserve.exists(), "the reserve is back once there is room");
    std::fs::remove_file(filler).unwrap();
    let names: Vec<String> = fs
        .readdir("/")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    for i in 2..BEFORE {
        assert!(names.contains(&format!("before-{i}")), "{names:?}");
    }
    assert!(names.contains(&"after".to_string()), "{names:?}");
    for gone in ["big", "before-0", "before-1"] {
        assert!(!names.contains(&gone.to_string()), "{names:?}");
    }
    c.shutdown().await;
}

/// A namespace of 100 files on a disk another user then fills: deleting a
/// file takes a commit that needs fresh pages, which only the store's
/// reserve can give. Without the reserve (removed here by hand), the same
/// delete on the same state fails with NoSpace when it is made durable.
/// (redb is pinned, so the page layout of this sequence does not change
/// under the test.)
#[test]
fn the_reserve_pays_for_a_delete_on_a_full_disk() {
    use concerto_proto::{Message, MetaRequest};
    let rt = tokio::runtime::Runtime::new().unwrap();
    for keep_reserve in [true, false] {
        let disk = SmallDisk::new("16m");
        let (service, _stop) =
            common::metadata_service(disk.path(), std::time::Duration::from_secs(1), &rt);
        let apply = |op| common::apply(&service, op);
        if !keep_reserve {
            std::fs::remove_file(disk.path().join("metadata.reserve")).unwrap();
        }
        for i in 0..100 {
            let create = MetaRequest::Create {
                path: format!("/f{i}"),
                layout: LayoutRequest::default(),
                exclusive: true,
                mode: 0o644,
            };
            assert!(matches!(apply(create), Message::MetaReply { .. }));
        }
        assert!(matches!(
            apply(MetaRequest::Sync),
            Message::MetaReply { .. }
        ));
        disk.fill();
        apply(MetaRequest::Unlink { path: "/f0".into() });
        match apply(MetaRequest::Sync) {
            Message::MetaReply { .. } => assert!(keep_reserve, "durable without the reserve"),
            Message::Error { kind, message } => {
                assert!(!keep_reserve, "the reserve did not pay for it: {message}");
                assert_eq!(kind, ErrorKind::NoSpace, "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A crash of the metadata server (here: its database file copied while it
/// runs, which is what the disk holds at that instant) keeps every change
/// made durable — by a `Sync`, as a client's fsync or close asks — and
/// loses only later ones, whole; and the server that comes back never
/// hands out an inode number it may have given before, so a data server's
/// object of a lost file can never become another file's.
#[test]
fn a_crash_keeps_what_was_synced_and_never_reuses_an_inode_number() {
    use concerto_proto::{Message, MetaReply, MetaRequest};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (running, crashed) = (dir.path().join("running"), dir.path().join("crashed"));
    // Commits only when asked (a second is more than the test takes).
    let (service, _stop) =
        common::metadata_service(&running, std::time::Duration::from_secs(1), &rt);
    // A new file's inode number.
    let create = |on: &std::sync::Arc<concerto_server::metadata::MetadataService>, path: &str| {
        let op = MetaRequest::Create {
            path: path.into(),
            layout: LayoutRequest::default(),
            exclusive: true,
            mode: 0o644,
        };
        match common::apply(on, op) {
            Message::MetaReply {
                reply: MetaReply::Attr(a),
                ..
            } => a.inode,
            other => panic!("{other:?}"),
        }
    };
    create(&service, "/kept-1");
    create(&service, "/kept-2");
    match common::apply(&service, MetaRequest::Sync) {
        Message::MetaReply {
            changes, durable, ..
        } => assert_eq!(changes, durable),
        other => panic!("{other:?}"),
    }
    let lost = [create(&service, "/lost-1"), create(&service, "/lost-2")];
    std::fs::create_dir(&crashed).unwrap();
    std::fs::copy(running.join("metadata.redb"), crashed.join("metadata.redb")).unwrap();

    let (back, _stop_back) =
        common::metadata_service(&crashed, std::time::Duration::from_secs(1), &rt);
    // (Open, not Lookup: the sizes the service knew went with the crash,
    // and a lookup would ask the data servers, which this test has none of.)
    let exists = |path: &str| {
        let open = MetaRequest::Open {
            path: path.into(),
            write: false,
        };
        match common::apply(&back, open) {
            Message::MetaReply { .. } => true,
            Message::Error {
                kind: ErrorKind::NotFound,
                ..
            } => false,
            other => panic!("{other:?}"),
        }
    };
    assert!(
        exists("/kept-1") && exists("/kept-2"),
        "what was synced survives"
    );
    assert!(
        !exists("/lost-1") && !exists("/lost-2"),
        "what was not is lost whole"
    );
    let next = create(&back, "/after");
    assert!(
        lost.iter().all(|&l| next > l),
        "inode {next} after the crash; {lost:?} were handed out before it"
    );
}

fn object_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for server in std::fs::read_dir(root).unwrap() {
        let objects = server.unwrap().path().join("objects");
        for entry in std::fs::read_dir(objects).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                out.push(path);
            }
        }
    }
    out
}

/// A descriptor opened before its file was unlinked (here: another
/// client's handle): once the metadata service removed the file's objects
/// (moments after the unlink), its writes and reads get ESTALE, and a late
/// write brings no object back; the same for a file replaced by a rename.
/// No object outlives its file, even one a write reached in those moments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_file_refuses_its_old_descriptors_and_leaves_no_object() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cluster");
    let c = LocalCluster::start(&root, LocalClusterSpec::fifo(4))
        .await
        .unwrap();
    let (fs, other) = (client(&c), client(&c));
    let data = vec![3u8; 300_000];
    let old = fs
        .create("/victim", LayoutRequest::default(), true)
        .await
        .unwrap();
    fs.write(&old, 0, &data).await.unwrap();
    let replaced = fs
        .create("/replaced", LayoutRequest::default(), true)
        .await
        .unwrap();
    fs.write(&replaced, 0, &data).await.unwrap();
    fs.create("/new", LayoutRequest::default(), true)
        .await
        .unwrap();
    assert_eq!(object_files(&root).len(), 8, "two files over four servers");

    other.unlink("/victim").await.unwrap();
    other.rename("/new", "/replaced").await.unwrap();
    // A write in the moments before the objects go lands in an object
    // about to go, or is refused; either way nothing stays.
    let _ = fs.write(&old, 0, b"early").await;
    eventually("the removed files' objects are gone", || async {
        object_files(&root).is_empty()
    })
    .await;
    for handle in [&old, &replaced] {
        assert_eq!(
            kind(fs.write(handle, 0, b"late").await),
            Some(ErrorKind::Stale)
        );
        assert_eq!(
            kind(fs.write(handle, 1 << 20, b"far").await),
            Some(ErrorKind::Stale)
        );
        assert_eq!(kind(fs.read(handle, 0, 10).await), Some(ErrorKind::Stale));
    }
    assert_eq!(
        object_files(&root),
        Vec::<PathBuf>::new(),
        "no object outlives its file"
    );
    c.shutdown().await;
}
