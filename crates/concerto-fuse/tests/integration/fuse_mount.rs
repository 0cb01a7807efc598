//! The FUSE mount on a loopback cluster: plain `std::fs` calls and
//! unmodified programs (`cp`, `cmp`, `sh`) against striped files, checked
//! byte for byte and against the client library; the namespace and its
//! errnos; and each caller's application id reaching the servers' statistics.
//!
//! Needs `/dev/fuse` and root (mount(2)), as the CI machine has.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use concerto_client::FsClient;
use concerto_core::PolicyConfig;
use concerto_fuse::{mount, MountOptions};
use concerto_server::local::{LocalCluster, LocalClusterSpec};

use crate::{cluster_with_admin, read_at, runtime};

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("program runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn posix_calls_and_programs_on_the_mount() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let spec = LocalClusterSpec {
        servers: 4,
        policy: PolicyConfig::from_name("coordinated").unwrap(),
        stripe_unit: 4096,
        throttle: None,
        timeout_ms: 10_000,
        integrity: Default::default(),
    };
    let (cluster, client, mounted) =
        cluster_and_mount(&rt, &dir.path().join("cluster"), &mnt, spec);

    // Random writes across stripe boundaries through write(2), read back through read(2).
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut model = vec![0u8; 200_000];
    let mut end = 0;
    {
        let f = File::create_new(mnt.join("data")).unwrap();
        for _ in 0..60 {
            let offset = rng.gen_range(0..model.len() - 20_000);
            let len = rng.gen_range(1..20_000);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            f.write_all_at(&bytes, offset as u64).unwrap();
            model[offset..offset + len].copy_from_slice(&bytes);
            end = end.max(offset + len);
        }
    }
    let back = fs::read(mnt.join("data")).unwrap();
    assert_eq!(back.len(), end, "size is the furthest byte written");
    assert!(back == model[..end], "bytes differ through the mount");
    // The same bytes through the client library: one file system.
    let (via_client, held) = rt.block_on(async {
        let f = client.open("/data", false).await.unwrap();
        (
            client.read(&f, 0, end as u64).await.unwrap(),
            client.object_sizes(&f).await.unwrap(),
        )
    });
    assert!(via_client == model[..end]);
    assert!(
        held.iter().filter(|&&n| n > 0).count() == 4,
        "striped over all four servers: {held:?}"
    );

    // Truncate, and a file written by the client library read through the mount.
    OpenOptions::new()
        .write(true)
        .open(mnt.join("data"))
        .unwrap()
        .set_len(5000)
        .unwrap();
    assert_eq!(fs::metadata(mnt.join("data")).unwrap().len(), 5000);
    rt.block_on(async {
        let f = client
            .create("/from-client", Default::default(), true)
            .await
            .unwrap();
        client.write(&f, 10_000, b"tail").await.unwrap();
    });
    let from_client = fs::read(mnt.join("from-client")).unwrap();
    assert_eq!(from_client.len(), 10_004);
    assert_eq!(&from_client[10_000..], b"tail");
    assert!(
        from_client[..10_000].iter().all(|&b| b == 0),
        "a hole reads as zeros"
    );

    // The namespace and its errors, as a POSIX program sees them.
    fs::create_dir(mnt.join("d")).unwrap();
    assert_eq!(
        fs::create_dir(mnt.join("d")).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        File::create_new(mnt.join("data")).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        File::open(mnt.join("missing")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    fs::rename(mnt.join("data"), mnt.join("d/moved")).unwrap();
    assert_eq!(fs::metadata(mnt.join("d/moved")).unwrap().len(), 5000);
    assert_eq!(
        errno(&fs::remove_dir(mnt.join("d")).unwrap_err()),
        libc::ENOTEMPTY
    );
    fs::rename(mnt.join("d"), mnt.join("e")).unwrap();
    assert_eq!(fs::read(mnt.join("e/moved")).unwrap(), model[..5000]);
    let mut names: Vec<String> = fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["e", "from-client"]);
    assert_eq!(
        errno(&File::open(mnt.join("from-client/x")).unwrap_err()),
        libc::ENOTDIR
    );
    fs::remove_file(mnt.join("e/moved")).unwrap();
    fs::remove_dir(mnt.join("e")).unwrap();
    assert!(!mnt.join("e").exists());

    // Unmodified programs: cp in, cmp against the original; a shell
    // redirection tagged with its own application id.
    let original = dir.path().join("original");
    let mut f = File::create(&original).unwrap();
    let blob: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    f.write_all(&blob).unwrap();
    drop(f);
    run(Command::new("cp").arg(&original).arg(mnt.join("copy")));
    run(Command::new("cmp").arg(&original).arg(mnt.join("copy")));
    let target = mnt.join("app77");
    run(Command::new("sh")
        .arg("-c")
        .arg(format!("head -c 300000 /dev/zero > {}", target.display()))
        .env("CONCERTO_APP_ID", "77"));
    assert_eq!(fs::metadata(&target).unwrap().len(), 300_000);
    let written: u64 = rt
        .block_on(client.stats())
        .into_iter()
        .map(|s| s.unwrap())
        .flat_map(|s| s.apps)
        .filter(|a| a.app == 77)
        .map(|a| a.write_bytes)
        .sum();
    assert_eq!(written, 300_000, "the servers saw application 77's bytes");

    // statfs: the four data servers share one file system (this temporary
    // directory's), counted once, in one block unit; the files in use are
    // the namespace's (three files and the root).
    let st = statvfs(&mnt);
    let local = statvfs(dir.path());
    let bytes = |s: &libc::statvfs| s.f_blocks as u128 * s.f_frsize as u128;
    assert_eq!(st.f_frsize, 4096);
    let (ours, theirs) = (bytes(&st), bytes(&local));
    assert!(
        ours.abs_diff(theirs) <= 4096,
        "statfs says {ours} bytes, the servers' file system holds {theirs}"
    );
    assert!(st.f_bavail <= st.f_bfree && st.f_bfree <= st.f_blocks);
    assert_eq!(st.f_files - st.f_ffree, 4, "files and directories in use");
    // A name over 255 bytes is ENAMETOOLONG, as POSIX says.
    let long = mnt.join("n".repeat(256));
    assert_eq!(errno(&File::create(&long).unwrap_err()), libc::ENAMETOOLONG);
    assert_eq!(errno(&fs::metadata(&long).unwrap_err()), libc::ENAMETOOLONG);

    assert!(mounted.is_mounted());
    drop(mounted);
    assert!(!is_mounted(&mnt), "dropping the mount unmounts it");
    rt.block_on(cluster.shutdown());
}

fn statvfs(path: &Path) -> libc::statvfs {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed out-parameter of the right type.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0, "statvfs");
    st
}

fn is_mounted(path: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let p = path.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

/// A cluster in `root` (on whatever disk that is), its admin client (as
/// application 1) and a mount of it at `mnt`, a new directory.
fn cluster_and_mount(
    rt: &tokio::runtime::Runtime,
    root: &Path,
    mnt: &Path,
    spec: LocalClusterSpec,
) -> (LocalCluster, FsClient, concerto_fuse::Mount) {
    let (cluster, client) = cluster_with_admin(rt, root, spec);
    fs::create_dir(mnt).unwrap();
    let mounted = mount(
        client.with_identity(client.identity()),
        mnt,
        rt.handle().clone(),
        MountOptions::default(),
    )
    .expect("mount (needs /dev/fuse and root)");
    (cluster, client, mounted)
}

/// The objects on every server of a cluster in `root`, as files.
fn object_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for server in fs::read_dir(root).unwrap() {
        for entry in fs::read_dir(server.unwrap().path().join("objects")).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                out.push(path);
            }
        }
    }
    out
}

/// POSIX: a file unlinked, or replaced by a rename, while a process has it
/// open stays readable and writable through that descriptor, out of every
/// listing, and goes (data included) at the last close. Links and special
/// files are refused with EPERM.
#[test]
fn an_unlinked_open_file_lives_until_its_last_close() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cluster");
    let mnt = dir.path().join("mnt");
    let (cluster, _client, mounted) =
        cluster_and_mount(&rt, &root, &mnt, LocalClusterSpec::fifo(2));
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(mnt.join("doomed"), &data).unwrap();
    fs::write(mnt.join("target"), b"old").unwrap();
    fs::write(mnt.join("source"), b"new").unwrap();
    let doomed = OpenOptions::new()
        .read(true)
        .write(true)
        .open(mnt.join("doomed"))
        .unwrap();
    let second = File::open(mnt.join("doomed")).unwrap();
    let replaced = File::open(mnt.join("target")).unwrap();

    fs::remove_file(mnt.join("doomed")).unwrap();
    fs::rename(mnt.join("source"), mnt.join("target")).unwrap();
    assert_eq!(
        File::open(mnt.join("doomed")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let names: Vec<String> = fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["target"], "hidden files are not listed");
    assert_eq!(fs::read(mnt.join("target")).unwrap(), b"new");
    // The descriptors still reach the old files' data, and can write it.
    let mut back = vec![0u8; data.len()];
    doomed.read_exact_at(&mut back, 0).unwrap();
    assert!(back == data, "an unlinked file reads its data");
    doomed.write_all_at(b"still here", 100).unwrap();
    let mut word = [0u8; 10];
    second.read_exact_at(&mut word, 100).unwrap();
    assert_eq!(&word, b"still here");
    let mut old = [0u8; 3];
    replaced.read_exact_at(&mut old, 0).unwrap();
    assert_eq!(&old, b"old");
    // The last close removes them, objects and all: only "target"'s remain.
    drop(doomed);
    assert_eq!(object_files(&root).len(), 2 + 1 + 1);
    drop(second);
    drop(replaced);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while object_files(&root).len() != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "objects left after the last close: {:?}",
            object_files(&root)
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let everything = rt.block_on(_client.readdir("/")).unwrap();
    assert_eq!(everything.len(), 1, "{everything:?}");

    // Links and special files.
    let link = |r: std::io::Result<()>| errno(&r.unwrap_err());
    assert_eq!(
        link(fs::hard_link(mnt.join("target"), mnt.join("h"))),
        libc::EPERM
    );
    assert_eq!(
        link(std::os::unix::fs::symlink("target", mnt.join("s"))),
        libc::EPERM
    );
    let fifo = std::ffi::CString::new(mnt.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, -1);
    assert_eq!(errno(&std::io::Error::last_os_error()), libc::EPERM);

    drop(mounted);
    rt.block_on(cluster.shutdown());
}

/// A cluster on a small disk of its own (a tmpfs): writing through the
/// mount past its end fails with ENOSPC, not EIO; the file can be removed
/// on the full disk, and writing works again.
#[test]
fn a_full_disk_gives_enospc_through_the_mount() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    fs::create_dir(&disk).unwrap();
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=32m", "tmpfs"])
        .arg(&disk)
        .output()
        .unwrap();
    assert!(out.status.success(), "mount tmpfs (needs root): {out:?}");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(disk.clone());
    let mnt = dir.path().join("mnt");
    let (cluster, _client, mounted) =
        cluster_and_mount(&rt, &disk.join("cluster"), &mnt, LocalClusterSpec::fifo(2));
    let mut f = File::create(mnt.join("big")).unwrap();
    let chunk = vec![5u8; 1 << 20];
    let e = (0..64)
        .find_map(|_| f.write_all(&chunk).err())
        .expect("64 MiB fit on a 32 MiB disk");
    assert_eq!(errno(&e), libc::ENOSPC, "{e}");
    drop(f);
    fs::remove_file(mnt.join("big")).unwrap();
    // The metadata service removes the objects moments after the unlink
    // (and a file removed right after its close may still count as open
    // here until the kernel's release comes): wait for the objects to go
    // and their room to be free.
    let objects = disk.join("cluster");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let room = |s: &libc::statvfs| s.f_bavail * s.f_frsize;
    while !object_files(&objects).is_empty() || room(&statvfs(&disk)) < 16 << 20 {
        assert!(std::time::Instant::now() < deadline, "big's objects stay");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    fs::write(mnt.join("small"), &chunk).unwrap();
    assert_eq!(fs::metadata(mnt.join("small")).unwrap().len(), 1 << 20);
    drop(mounted);
    rt.block_on(cluster.shutdown());
}

/// A mount point that is a mount already is refused, with the reason, and
/// the mount there carries on (it is neither hidden nor detached later);
/// a cluster whose metadata server does not answer is not mounted at all.
#[test]
fn a_busy_mount_point_and_a_silent_cluster_are_refused() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let (cluster, client, first) = cluster_and_mount(
        &rt,
        &dir.path().join("cluster"),
        &mnt,
        LocalClusterSpec::fifo(2),
    );
    fs::write(mnt.join("kept"), b"still served").unwrap();
    let second = mount(
        client.with_identity(client.identity()),
        &mnt,
        rt.handle().clone(),
        MountOptions::default(),
    );
    let e = second.err().expect("a second mount on a busy path");
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    assert!(e.to_string().contains("is a mount point already"), "{e}");
    assert!(first.is_mounted());
    assert_eq!(fs::read(mnt.join("kept")).unwrap(), b"still served");
    drop(first);
    assert!(!is_mounted(&mnt));

    // The cluster stops: mounting it now names the server that does not answer.
    let address = cluster.cluster.metadata_server().address;
    rt.block_on(cluster.shutdown());
    let e = mount(client, &mnt, rt.handle().clone(), MountOptions::default())
        .err()
        .expect("a mount of a stopped cluster");
    assert!(
        e.to_string().contains("metadata server") && e.to_string().contains(&address.to_string()),
        "{e}"
    );
    assert!(!is_mounted(&mnt), "nothing was mounted");
}

/// Random operations through the mount, checked against the same
/// operations on a local file (fsx's method): writes of random sizes at
/// random offsets (written behind), reads (read ahead when sequential),
/// truncates, fsyncs, closing and opening again, from one process and then
/// two at once on one file. Every read returns what the local file holds.
#[test]
fn random_operations_read_back_as_on_a_local_file() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let (cluster, _client, mounted) = cluster_and_mount(
        &rt,
        &dir.path().join("cluster"),
        &mnt,
        LocalClusterSpec::fifo(4),
    );
    let model_path = dir.path().join("model");
    let open = |p: &Path| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .unwrap()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let (mut ours, model) = (open(&mnt.join("fsx")), open(&model_path));
    const SPAN: u64 = 3 << 20;
    for step in 0..600 {
        match rng.gen_range(0..100) {
            0..=44 => {
                let at = rng.gen_range(0..SPAN);
                let len = rng.gen_range(1..200_000usize);
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                ours.write_all_at(&data, at).unwrap();
                model.write_all_at(&data, at).unwrap();
            }
            45..=79 => {
                // Sequential runs now and then, so read-ahead takes part.
                let size = model.metadata().unwrap().len();
                let mut at = rng.gen_range(0..size.max(1));
                let runs = if rng.gen_bool(0.3) { 8 } else { 1 };
                for _ in 0..runs {
                    let len = rng.gen_range(1..300_000usize);
                    let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
                    let n = read_at(&ours, &mut a, at);
                    let m = read_at(&model, &mut b, at);
                    assert_eq!(n, m, "step {step}: read of {len} at {at}: lengths");
                    assert!(
                        a[..n] == b[..m],
                        "step {step}: read of {len} at {at}: bytes"
                    );
                    at += n as u64;
                }
            }
            80..=87 => {
                let size = rng.gen_range(0..SPAN);
                ours.set_len(size).unwrap();
                model.set_len(size).unwrap();
            }
            88..=93 => ours.sync_all().unwrap(),
            _ => {
                drop(ours);
                ours = open(&mnt.join("fsx"));
            }
        }
        assert_eq!(
            ours.metadata().unwrap().len(),
            model.metadata().unwrap().len(),
            "step {step}: size"
        );
    }
    drop(ours);
    assert!(fs::read(mnt.join("fsx")).unwrap() == fs::read(&model_path).unwrap());

    // Two processes' writes to one file at once, interleaved blocks of
    // each: every block is its writer's.
    let block = 64 * 1024;
    let writers: Vec<_> = (0..2u8)
        .map(|w| {
            let path = mnt.join("shared");
            std::thread::spawn(move || {
                let f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .unwrap();
                for k in 0..64u64 {
                    let at = (2 * k + w as u64) * block as u64;
                    f.write_all_at(&vec![w + 1; block], at).unwrap();
                }
                f.sync_all().unwrap();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let shared = fs::read(mnt.join("shared")).unwrap();
    assert_eq!(shared.len(), 128 * block);
    for (i, chunk) in shared.chunks(block).enumerate() {
        assert!(chunk.iter().all(|&b| b == (i % 2) as u8 + 1), "block {i}");
    }
    drop(mounted);
    rt.block_on(cluster.shutdown());
}
