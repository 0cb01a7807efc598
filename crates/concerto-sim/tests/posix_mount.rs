//! What `[cluster.metadata] posix_mount` models of Concerto's FUSE mount
//! beyond its lookups: the kernel's lock on a file across a write that
//! goes through, the close of a written file, and where its metadata
//! server places new files.

#[allow(dead_code)]
mod common;
use common::scenario;
use concerto_sim::simulate;

/// Four tasks in IOR's layout, 64 KiB blocks and transfers, eight
/// segments, on four servers of 64 KiB stripes: each task's blocks are on
/// its own server. A fixed 1 ms per request and no network make the
/// arithmetic exact.
const IOR: &str = r#"
name = "mount"
[cluster]
servers = 4
stripe_unit = "64KiB"
[cluster.device]
kind = "fixed"
service_time = "1ms"
[cluster.network]
mode = "ideal"
[[apps]]
workload = "ior"
processes = 4
block_size = "64KiB"
request_size = "64KiB"
segments = 8
operations = ["write", "read"]
"#;

fn seconds(sets: &[&str]) -> Vec<f64> {
    let run = simulate(&scenario(IOR, sets), 1, None);
    run.apps[0]
        .ior
        .as_ref()
        .expect("an IOR-layout application reports its operations")
        .iter()
        .map(|op| op.seconds)
        .collect()
}

/// Through the mount, the kernel holds a file's lock across each write(2)
/// that goes through: the four tasks' 32 writes of one shared file take
/// turns (32 ms), where without the mount they run on their four servers
/// at once (8 ms). Reads do not take the lock, and tasks writing files of
/// their own do not wait for each other.
#[test]
fn a_mounts_writes_to_one_file_go_one_at_a_time() {
    let mount = "cluster.metadata.posix_mount=true";
    let [write, read] = seconds(&[])[..] else {
        panic!()
    };
    let [locked_write, mount_read] = seconds(&[mount])[..] else {
        panic!()
    };
    assert!((write - 0.008).abs() < 1e-6, "without the mount: {write} s");
    assert!(
        (locked_write - 0.032).abs() < 1e-6,
        "through the mount: {locked_write} s"
    );
    assert!(
        (read - mount_read).abs() < 1e-9,
        "reads: {read} s and {mount_read} s"
    );
    let own = "apps[0].file=\"per-process\"";
    let [own_write, _] = seconds(&[mount, own])[..] else {
        panic!()
    };
    assert!(
        (own_write - 0.008).abs() < 1e-6,
        "a file each, through the mount: {own_write} s"
    );
}

const MDTEST: &str = r#"
name = "mount-md"
[cluster]
servers = 4
[cluster.device]
kind = "fixed"
service_time = "1ms"
[cluster.network]
mode = "ideal"
[cluster.metadata]
servers = 1
[[apps]]
workload = "md-test"
processes = 4
items = 8
request_size = "4KiB"
md_steps = ["create", "write"]
"#;

/// A file written through the mount is closed with an fsync of the data
/// server written and the namespace's sync, and the release's notice: four
/// requests more per file than the write and create alone (two of them
/// to the metadata server), every one served.
#[test]
fn a_written_files_close_asks_its_data_server_and_its_metadata_server() {
    let requests = |sets: &[&str]| {
        let run = simulate(&scenario(MDTEST, sets), 1, None);
        (run.apps[0].requests, run.apps[0].metadata_ops)
    };
    let (plain, plain_meta) = requests(&[]);
    let (mount, mount_meta) = requests(&["cluster.metadata.posix_mount=true"]);
    let files = 4 * 8;
    // The kernel's lookup before each create, then the close: an fsync,
    // the namespace's sync and the release's notice.
    assert_eq!(
        mount,
        plain + files * 4,
        "{plain} requests without the mount, {mount} with"
    );
    assert_eq!(mount_meta, plain_meta + files * 3);
}

/// Concerto's metadata server places a new file by its inode, that is in
/// the order files are made; md-test's tasks make theirs in turns, so
/// through the mount the four tasks' first files start on four different
/// servers (file i of task r on (i x tasks + r) mod servers), where the
/// simulator's own round robin by file index puts every task's i-th file
/// on one server.
#[test]
fn a_mounts_files_are_placed_in_the_order_they_are_made() {
    let first_writes = |sets: &[&str]| {
        let mut sets = sets.to_vec();
        sets.extend([
            "output.detail=true",
            "apps[0].processes=4",
            "apps[0].items=8",
        ]);
        let run = simulate(&scenario(MDTEST, &sets), 1, None);
        let detail = run.detail.expect("output.detail asks for it");
        let mut servers: Vec<Vec<u32>> = vec![Vec::new(); 4];
        for p in detail
            .iter()
            .filter(|p| p.op == concerto_core::Op::Write && p.bytes > 0)
        {
            servers[p.rank as usize].push(p.server);
        }
        servers
    };
    let plain = first_writes(&[]);
    let mount = first_writes(&["cluster.metadata.posix_mount=true"]);
    for r in 0..4 {
        // Task r's files are 8r..8r+7: file index mod 4 is i mod 4 for every task.
        assert_eq!(
            plain[r],
            (0..8).map(|i| i % 4).collect::<Vec<u32>>(),
            "task {r}"
        );
        assert_eq!(mount[r], vec![r as u32; 8], "task {r}: (i x 4 + r) mod 4");
    }
}
