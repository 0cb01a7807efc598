//! Two mounts of one cluster, as two nodes would have them (each its own
//! client, connections and write-behind): what one writes and closes the
//! other reads when it opens the file after; both writing disjoint ranges
//! of one file at once — page-aligned halves, and interleaved 1000-byte
//! records that share pages — all land, as a third client reads back; a
//! truncation on one is what the other reads; and so are the pages of a
//! shared writable mapping; and fsx's random operations, in sessions on
//! either node, read back as on a local file (a mount that kept its pages
//! across another node's writes fails it at the 11th session). Needs root
//! and /dev/fuse.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use concerto_client::{FsClient, Identity};
use concerto_fuse::{mount, MountOptions};
use concerto_server::local::{LocalCluster, LocalClusterSpec};

use crate::{cluster_with_admin, read_at, runtime};

struct Nodes {
    _dir: tempfile::TempDir,
    cluster: Option<LocalCluster>,
    admin: FsClient,
    mounts: Vec<(PathBuf, concerto_fuse::Mount)>,
}

/// A four-server cluster and two mounts of it, each with a client of its own.
fn two_nodes(rt: &tokio::runtime::Runtime) -> Nodes {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, admin) =
        cluster_with_admin(rt, &dir.path().join("cluster"), LocalClusterSpec::fifo(4));
    let mounts = (0..2)
        .map(|n| {
            let mnt = dir.path().join(format!("node{n}"));
            fs::create_dir(&mnt).unwrap();
            let client = FsClient::new(
                cluster.cluster.clone(),
                Identity::new(10 + n, 0),
                cluster.admin.clone(),
            );
            let mounted = mount(client, &mnt, rt.handle().clone(), MountOptions::default())
                .expect("mount (needs /dev/fuse and root)");
            (mnt, mounted)
        })
        .collect();
    Nodes {
        _dir: dir,
        cluster: Some(cluster),
        admin,
        mounts,
    }
}

impl Nodes {
    fn path(&self, node: usize, name: &str) -> PathBuf {
        self.mounts[node].0.join(name)
    }

    fn shutdown(mut self, rt: &tokio::runtime::Runtime) {
        self.mounts.clear();
        if let Some(c) = self.cluster.take() {
            rt.block_on(c.shutdown());
        }
    }
}

/// The whole file as a third client (the library) reads it.
fn read_by_third(rt: &tokio::runtime::Runtime, admin: &FsClient, name: &str) -> Vec<u8> {
    rt.block_on(async {
        let path = format!("/{name}");
        let file = admin.open(&path, false).await.unwrap();
        let size = admin.fstat(&file).await.unwrap().size;
        let bytes = admin.read(&file, 0, size).await.unwrap();
        admin.release(&file);
        bytes.to_vec()
    })
}

fn writer(path: &Path) -> File {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

#[test]
fn what_one_node_writes_and_closes_the_other_reads_and_disjoint_writes_all_land() {
    let rt = runtime();
    let nodes = two_nodes(&rt);

    // Written and closed on one node; opened after, on the other.
    let first: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(nodes.path(0, "handoff"), &first).unwrap();
    assert!(fs::read(nodes.path(1, "handoff")).unwrap() == first);
    // Rewritten (a different length) on the second; the first reads the new bytes.
    let second: Vec<u8> = (0..1_234_567u32).map(|i| (i % 241) as u8 ^ 0x5a).collect();
    let mut f = File::create(nodes.path(1, "handoff")).unwrap();
    f.write_all(&second).unwrap();
    drop(f);
    let mut back = Vec::new();
    File::open(nodes.path(0, "handoff"))
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert!(back == second, "the first node reads the second's rewrite");

    // A truncation on one node is what the other reads.
    OpenOptions::new()
        .write(true)
        .open(nodes.path(0, "handoff"))
        .unwrap()
        .set_len(1000)
        .unwrap();
    assert_eq!(fs::read(nodes.path(1, "handoff")).unwrap(), &second[..1000]);

    // Page-aligned halves, one per node, written at once.
    let half = 2 << 20;
    let halves: Vec<_> = (0..2usize)
        .map(|n| {
            let path = nodes.path(n, "halves");
            std::thread::spawn(move || {
                let f = writer(&path);
                let data = vec![n as u8 + 1; half];
                for (i, piece) in data.chunks(4096).enumerate() {
                    f.write_all_at(piece, (n * half + i * 4096) as u64).unwrap();
                }
            })
        })
        .collect();
    for h in halves {
        h.join().unwrap();
    }
    let all = read_by_third(&rt, &nodes.admin, "halves");
    assert_eq!(all.len(), 2 * half);
    assert!(all[..half].iter().all(|&b| b == 1) && all[half..].iter().all(|&b| b == 2));

    // Interleaved 1000-byte records, even ones from node 0 and odd ones
    // from node 1: many share a page with the other node's.
    const RECORD: usize = 1000;
    const RECORDS: usize = 4000;
    let records: Vec<_> = (0..2usize)
        .map(|n| {
            let path = nodes.path(n, "records");
            std::thread::spawn(move || {
                let f = writer(&path);
                for r in (n..RECORDS).step_by(2) {
                    let byte = (r % 250) as u8 + 1;
                    f.write_all_at(&[byte; RECORD], (r * RECORD) as u64)
                        .unwrap();
                }
            })
        })
        .collect();
    for h in records {
        h.join().unwrap();
    }
    let all = read_by_third(&rt, &nodes.admin, "records");
    assert_eq!(all.len(), RECORD * RECORDS);
    for (r, rec) in all.chunks(RECORD).enumerate() {
        let byte = (r % 250) as u8 + 1;
        assert!(
            rec.iter().all(|&b| b == byte),
            "record {r} is not its writer's"
        );
    }
    // And each node reads all of it the same.
    for n in 0..2 {
        assert!(
            fs::read(nodes.path(n, "records")).unwrap() == all,
            "node {n}"
        );
    }

    // A shared writable mapping (the page cache's own way of writing): its
    // pages, synced, are what the other node reads.
    let path = nodes.path(0, "mapped");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    const MAPPED: usize = 256 << 10;
    f.set_len(MAPPED as u64).unwrap();
    let expected: Vec<u8> = (0..MAPPED).map(|i| (i % 239) as u8).collect();
    // SAFETY: a fresh shared mapping of a file this test owns, unmapped
    // before the file is closed; nothing else aliases it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            MAPPED,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        std::ptr::copy_nonoverlapping(expected.as_ptr(), p as *mut u8, MAPPED);
        assert_eq!(libc::msync(p, MAPPED, libc::MS_SYNC), 0);
        assert_eq!(libc::munmap(p, MAPPED), 0);
    }
    drop(f);
    assert!(
        fs::read(nodes.path(1, "mapped")).unwrap() == expected,
        "the other node reads the mapped writes"
    );
    nodes.shutdown(&rt);
}

/// fsx's method on two nodes: sessions on a random node each (open, one
/// to four random writes, reads, truncations and fsyncs, close), checked
/// against the same operations on a local file. Close-to-open is the
/// model the mount promises: a session opened after another node's
/// closed reads every byte that node wrote, whatever its cache held of
/// the file before, so every read must be the local file's. At the end
/// both nodes and a third client read the whole file as the local file.
#[test]
fn random_sessions_on_two_nodes_read_back_as_on_a_local_file() {
    use rand::{Rng, SeedableRng};
    let rt = runtime();
    let nodes = two_nodes(&rt);
    let dir = tempfile::tempdir().unwrap();
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
    let model = open(&model_path);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(57);
    const SPAN: u64 = 2 << 20;
    for session in 0..150 {
        let node = rng.gen_range(0..2);
        let ours = open(&nodes.path(node, "fsx2"));
        for op in 0..rng.gen_range(1..=4) {
            let at_step = format!("session {session} on node {node}, operation {op}");
            match rng.gen_range(0..100) {
                0..=44 => {
                    let at = rng.gen_range(0..SPAN);
                    let len = rng.gen_range(1..150_000usize);
                    let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    ours.write_all_at(&data, at).unwrap();
                    model.write_all_at(&data, at).unwrap();
                }
                45..=84 => {
                    let size = model.metadata().unwrap().len();
                    let at = rng.gen_range(0..size.max(1));
                    let len = rng.gen_range(1..400_000usize);
                    let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
                    let n = read_at(&ours, &mut a, at);
                    let m = read_at(&model, &mut b, at);
                    assert_eq!(n, m, "{at_step}: read of {len} at {at}: lengths");
                    assert!(a[..n] == b[..m], "{at_step}: read of {len} at {at}: bytes");
                }
                85..=94 => {
                    let size = rng.gen_range(0..SPAN);
                    ours.set_len(size).unwrap();
                    model.set_len(size).unwrap();
                }
                _ => ours.sync_all().unwrap(),
            }
        }
        drop(ours);
    }
    let expected = fs::read(&model_path).unwrap();
    for node in 0..2 {
        assert!(
            fs::read(nodes.path(node, "fsx2")).unwrap() == expected,
            "node {node} reads the whole file as the local file"
        );
    }
    assert!(read_by_third(&rt, &nodes.admin, "fsx2") == expected);
    nodes.shutdown(&rt);
}
