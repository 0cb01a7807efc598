//! What each POSIX operation through the mount costs the servers, counted
//! in the servers' own statistics, against what docs/filesystem.md states:
//! a create is two requests (the kernel's lookup of the new name, which
//! misses, and the create) and its close is told with others' (at most one
//! more); a stat is one; an unlink is one (two when the kernel asks for
//! the name first), and the metadata service removes the objects later,
//! one request per data server for many files; a sequential read is about
//! one request per MiB (4 MiB chunks read ahead, one request per server of
//! a four-server layout); sequential writes, small or large, are one
//! request of up to a MiB per server (coalesced by the client's
//! write-behind: runs of 1, 2, then 4 MiB on a four-server layout);
//! `ls -l` needs no lookup per entry (readdirplus).
//!
//! The kernel's name cache is emptied (`drop_caches`) before the phases
//! that count lookups, so what reaches the servers does not depend on how
//! long ago a name was seen. Needs root and /dev/fuse.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use concerto_client::FsClient;
use concerto_fuse::{mount, MountOptions};
use concerto_server::local::LocalClusterSpec;

use crate::{cluster_with_admin, runtime};

/// Requests the servers served, all applications but the file system's
/// own (application 0: the removal of removed files' objects), data and
/// metadata apart; and the file system's own. (A glimpse, the metadata
/// service asking the data servers for a file's size, is the asking
/// application's: it shows among the metadata requests.)
fn served(rt: &tokio::runtime::Runtime, client: &FsClient) -> (u64, u64, u64) {
    let (mut data, mut meta, mut own) = (0, 0, 0);
    // A server replies from its storage thread and counts the request when
    // its scheduling loop hears of it: a reply can reach the mount (and the
    // test go on) before the request is counted. Counted once no server
    // has a request in flight (a `make test` beside two busy loops counted
    // the small writes' last flush as the read-back's one data request).
    let mut stats = rt.block_on(client.stats());
    let deadline = Instant::now() + Duration::from_secs(10);
    while stats
        .iter()
        .any(|s| s.as_ref().is_ok_and(|s| s.in_flight + s.queued > 0))
    {
        assert!(Instant::now() < deadline, "requests in flight for 10 s");
        std::thread::sleep(Duration::from_millis(5));
        stats = rt.block_on(client.stats());
    }
    for s in stats {
        for a in s.unwrap().apps {
            if a.app == 0 {
                own += a.data_ops + a.metadata_ops;
            } else {
                data += a.data_ops;
                meta += a.metadata_ops;
            }
        }
    }
    (data, meta, own)
}

/// Bytes the servers read and wrote for applications other than the file
/// system's own (what a failed count says about the requests it counted).
fn bytes_moved(rt: &tokio::runtime::Runtime, client: &FsClient) -> (u64, u64) {
    let stats = rt.block_on(client.stats());
    let apps = stats.into_iter().flat_map(|s| s.unwrap().apps);
    apps.filter(|a| a.app != 0)
        .fold((0, 0), |(r, w), a| (r + a.read_bytes, w + a.write_bytes))
}

/// Empties the kernel's cache of names and attributes.
fn forget_names() {
    fs::write("/proc/sys/vm/drop_caches", "2").expect("drop_caches (needs root)");
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn each_operation_costs_the_requests_the_docs_state() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let (cluster, admin) =
        cluster_with_admin(&rt, &dir.path().join("cluster"), LocalClusterSpec::fifo(4));
    fs::create_dir(&mnt).unwrap();
    let mounted = mount(
        admin.with_identity(admin.identity()),
        &mnt,
        rt.handle().clone(),
        MountOptions::default(),
    )
    .expect("mount (needs /dev/fuse and root)");
    const N: u64 = 50;
    let name = |i: u64| mnt.join(format!("f{i:03}"));

    // Create: the lookup that misses, the create, and the closes told in
    // batches (at least one request for all of them, at most one each).
    let before = served(&rt, &admin);
    for i in 0..N {
        File::create_new(name(i)).unwrap();
    }
    wait_until("the closes reached the metadata server", || {
        served(&rt, &admin).1 > before.1 + 2 * N
    });
    let after = served(&rt, &admin);
    let creates = after.1 - before.1;
    assert!(
        (2 * N + 1..=3 * N).contains(&creates) && after.0 == before.0,
        "{N} creates cost {creates} metadata and {} data requests",
        after.0 - before.0
    );

    // Stat: one request each, the size known to the metadata service
    // once the closes arrived (the last file's close came last).
    let one_request_stat = |path: &Path, size: u64| {
        forget_names();
        let before = served(&rt, &admin);
        assert_eq!(fs::metadata(path).unwrap().len(), size);
        served(&rt, &admin).1 - before.1 == 1
    };
    wait_until("the last close reached the metadata server", || {
        one_request_stat(&name(N - 1), 0)
    });
    forget_names();
    let before = served(&rt, &admin);
    for i in 0..N {
        assert_eq!(fs::metadata(name(i)).unwrap().len(), 0);
    }
    let after = served(&rt, &admin);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (0, N),
        "a stat is one request (no glimpse of the data servers)"
    );

    // A listing with attributes (`ls -l`): the kernel gets them with the
    // names (readdirplus), so the stats after it are answered from its
    // cache: the listing's requests (the readdir, the directory's getattr)
    // and no lookup per entry. (Fewer than one per entry is the bound: a
    // stat more than the attributes' second after the listing asks again.)
    forget_names();
    let before = served(&rt, &admin);
    let out = Command::new("ls").arg("-l").arg(&mnt).output().unwrap();
    assert!(out.status.success());
    let lines = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
    assert_eq!(lines, N + 1, "ls -l shows every file (and its total)");
    let listing = served(&rt, &admin).1 - before.1;
    assert!(
        listing < N,
        "ls -l of {N} files cost {listing} metadata requests"
    );

    // A file written and closed: its size is known without a glimpse too.
    // Its 1 MiB writes, from a buffer that need not be page-aligned (the
    // kernel then cuts each in two), reach the servers coalesced: runs of
    // 1, 2, 4, 4, 4 and the last 1 MiB, one request per server each, and
    // close's fsync of each server.
    let before = served(&rt, &admin);
    let mut f = File::create(mnt.join("data")).unwrap();
    let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    for _ in 0..16 {
        f.write_all(&block).unwrap();
    }
    drop(f);
    let writes = served(&rt, &admin).0 - before.0;
    // (More allowed: a pause of a busy machine past the idle bound sends
    // a run before it holds 4 MiB, at most once per run. Unaligned and
    // uncoalesced, they were five per MiB.)
    assert!(
        (6 * 4 + 4..=2 * 6 * 4 + 4).contains(&writes),
        "16 MiB in 1 MiB writes cost {writes} data requests"
    );

    let objects = |root: &Path| -> usize {
        (0..4)
            .map(|s| {
                fs::read_dir(root.join(format!("s{s}/objects")))
                    .unwrap()
                    .count()
            })
            .sum()
    };
    let root = dir.path().join("cluster");
    let objects_before_small_writes = objects(&root);
    // 4 KiB writes coalesced the same way: runs of 1, 2 and 1 MiB, three
    // requests per server, not 256 (and at most 8 per MiB: a writer held up
    // past the age bound by a busy machine has its run sent early).
    let before = served(&rt, &admin);
    let mut f = File::create(mnt.join("small-writes")).unwrap();
    for _ in 0..4 * 256 {
        f.write_all(&block[..4096]).unwrap();
    }
    drop(f);
    let writes = served(&rt, &admin).0 - before.0;
    assert!(
        (3 * 4 + 4..=4 * 8 + 4).contains(&writes),
        "4 MiB in 4 KiB writes cost {writes} data requests"
    );
    // Read back on the mount that wrote it: from the page cache (this
    // mount's own writes do not make its cache of the file stale).
    let before = served(&rt, &admin);
    let moved_before = bytes_moved(&rt, &admin);
    let mut back = Vec::new();
    File::open(mnt.join("small-writes"))
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert!(back.chunks(4096).all(|c| c == &block[..4096]) && back.len() == 4 << 20);
    let reads = served(&rt, &admin).0 - before.0;
    let moved = bytes_moved(&rt, &admin);
    assert_eq!(
        reads,
        0,
        "reading back what this mount wrote cost {reads} data requests \
         ({} bytes read, {} written)",
        moved.0 - moved_before.0,
        moved.1 - moved_before.1
    );
    fs::remove_file(mnt.join("small-writes")).unwrap();
    // Its objects' removal done before the objects are counted again.
    wait_until("the small writes' objects are removed", || {
        objects(&root) == objects_before_small_writes
    });
    wait_until("a stat of the written file is one request", || {
        one_request_stat(&mnt.join("data"), 16 << 20)
    });

    // Reading it back from the start: about one request per MiB.
    forget_names();
    let before = served(&rt, &admin);
    let mut back = Vec::new();
    let mut f = File::open(mnt.join("data")).unwrap();
    // At a page boundary: a 1 MiB read(2) into it is one FUSE request. An
    // unaligned buffer spans 257 pages, over the 256 the kernel sends in
    // one request, and its read is split in two (one more data request
    // when it is not served from what was read ahead) — where the
    // allocator put the buffer decided the count.
    let mut backing = vec![0u8; (1 << 20) + 4096];
    let skip = backing.as_ptr().align_offset(4096);
    let buf = &mut backing[skip..skip + (1 << 20)];
    loop {
        let n = f.read(buf).unwrap();
        if n == 0 {
            break;
        }
        back.extend_from_slice(&buf[..n]);
    }
    drop(f);
    let after = served(&rt, &admin);
    assert!(
        back.chunks(1 << 20).all(|c| c == &block[..]),
        "the bytes read back"
    );
    // The kernel reads ahead in its own pieces (the page cache), several
    // in flight: the first go to the servers themselves (a 128 KiB piece
    // is two requests, one per 64 KiB unit) until the client's read-ahead
    // holds what comes next; from there chunks of 4 MiB, one request per
    // server: the file's four, and those begun before a fetch found where
    // the data ends — at most a window (16 MiB, four chunks) past it, as
    // many as began in the time one fetch took, so their count is the
    // machine's and the bound is. Without read-ahead it would be 256.
    let reads = after.0 - before.0;
    // Printed for docs/filesystem.md's figures (`-- --nocapture`).
    eprintln!("reading 16 MiB through the mount: {reads} data requests");
    assert!(
        (16..=48).contains(&reads),
        "reading 16 MiB took {reads} data requests"
    );

    // Small files read whole (mdtest's read phase): one data request each,
    // no chunk fetched ahead from every server.
    let objects_before_small_files = objects(&root);
    let small: Vec<u8> = (0..4096).map(|i| (i % 241) as u8).collect();
    for i in 0..N {
        let mut f = File::create_new(mnt.join(format!("s{i:03}"))).unwrap();
        f.write_all(&small).unwrap();
        // On the servers before the count begins (the mount writes behind).
        f.sync_all().unwrap();
    }
    // The page cache emptied too, so that every read reaches the mount.
    fs::write("/proc/sys/vm/drop_caches", "3").expect("drop_caches (needs root)");
    let before = served(&rt, &admin);
    for i in 0..N {
        let mut f = File::open(mnt.join(format!("s{i:03}"))).unwrap();
        let mut got = vec![0u8; 4096];
        f.read_exact(&mut got).unwrap();
        assert_eq!(got, small);
    }
    let after = served(&rt, &admin);
    assert_eq!(
        after.0 - before.0,
        N,
        "a 4 KiB file read whole costs one data request"
    );
    for i in 0..N {
        fs::remove_file(mnt.join(format!("s{i:03}"))).unwrap();
    }
    // Their objects' removal done before the next count begins (the
    // reaper's batches come later, the later the busier the machine).
    wait_until("the small files' objects are removed", || {
        objects(&root) == objects_before_small_files
    });

    // Unlink: the lookup (the names were forgotten) and the unlink; the
    // objects go later, in one removal per data server for many files.
    forget_names();
    let before = served(&rt, &admin);
    for i in 0..N {
        fs::remove_file(name(i)).unwrap();
    }
    fs::remove_file(mnt.join("data")).unwrap();
    let after = served(&rt, &admin);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (0, 2 * (N + 1)),
        "unlink"
    );
    // One removal per data server for each batch the metadata service
    // gathers (a file at a time, it would be four per file). A batch is
    // what 50 ms of unlinks bring, so how many there are depends on how
    // fast the machine unlinks: the bound is two per file (files in
    // batches of two at least), which a quiet machine beats tenfold.
    wait_until("the data file's objects are removed", || {
        objects(&root) == 0 && served(&rt, &admin).2 >= before.2 + 4
    });
    let removals = served(&rt, &admin).2 - before.2;
    assert!(
        (4..=2 * (N + 1)).contains(&removals),
        "{removals} removal requests for {} files",
        N + 1
    );

    drop(mounted);
    rt.block_on(cluster.shutdown());
}
