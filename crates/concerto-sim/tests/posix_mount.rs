//! What `[cluster.metadata] posix_mount` models of Concerto's FUSE mount
//! beyond its lookups: the kernel's lock on a file across a write that
//! goes through, the close of a written file, and where its metadata
//! server places new files.

#[allow(dead_code)]
mod common;
use common::scenario;
use concerto_sim::simulate;

use common::IOR_FOUR_TASKS as IOR;

/// The four tasks through one mount: on one node, whose kernel's locks
/// they share (each node's kernel has its own).
const ONE_MOUNT: &str = "apps[0].processes_per_node=4";

fn seconds(sets: &[&str]) -> Vec<f64> {
    let mut sets = sets.to_vec();
    sets.push(ONE_MOUNT);
    let run = simulate(&scenario(IOR, &sets), 1, None);
    run.apps[0]
        .ior
        .as_ref()
        .expect("an IOR-layout application reports its operations")
        .iter()
        .map(|op| op.seconds)
        .collect()
}

/// The data writes of IOR's write operation: (task, issued, replied),
/// in issue order.
fn writes(sets: &[&str]) -> Vec<(u32, f64, f64)> {
    let mut sets = sets.to_vec();
    sets.extend(["output.detail=true", ONE_MOUNT]);
    let run = simulate(&scenario(IOR, &sets), 1, None);
    let mut out: Vec<_> = run
        .detail
        .expect("output.detail asks for it")
        .iter()
        .filter(|p| p.call == 0 && p.op == concerto_core::Op::Write && p.bytes > 0)
        .map(|p| (p.rank, p.issue.as_secs_f64(), p.response.as_secs_f64()))
        .collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}

/// From the first write's issue to the last one's reply.
fn span(writes: &[(u32, f64, f64)]) -> f64 {
    let last = writes.iter().map(|w| w.2).fold(0.0, f64::max);
    last - writes[0].1
}

/// Through the mount, the kernel holds a file's lock across each write(2)
/// that goes through: the four tasks' 32 writes of one shared file take
/// turns, each issued once the one before has its reply (32 ms and more),
/// where without the mount they run on their four servers at once (8 ms).
/// Reads do not take the lock (through the mount they take as long but
/// for the opens and closes), and tasks writing files of their own do not
/// wait for each other's writes: each task's eight go back to back.
#[test]
fn a_mounts_writes_to_one_file_go_one_at_a_time() {
    let mount = "cluster.metadata.posix_mount=true";
    let plain = writes(&[]);
    assert!(
        (span(&plain) - 0.008).abs() < 1e-6,
        "without the mount: {plain:?}"
    );
    let locked = writes(&[mount]);
    assert_eq!(locked.len(), 32);
    assert!(
        locked.windows(2).all(|w| w[1].1 >= w[0].2 - 1e-12),
        "through the mount, one at a time: {locked:?}"
    );
    assert!(span(&locked) >= 0.032 - 1e-9, "{locked:?}");
    let [_, read] = seconds(&[])[..] else {
        panic!()
    };
    let [_, mount_read] = seconds(&[mount])[..] else {
        panic!()
    };
    assert!(
        mount_read >= read && mount_read < read + 0.002,
        "reads: {read} s, through the mount {mount_read} s"
    );
    let own = writes(&[mount, "apps[0].file=\"per-process\""]);
    for r in 0..4 {
        let task: Vec<_> = own.iter().copied().filter(|w| w.0 == r).collect();
        assert_eq!(task.len(), 8);
        assert!(
            task.windows(2).all(|w| (w[1].1 - w[0].2).abs() < 1e-9),
            "task {r}'s own file, through the mount: each write issued at the last one's reply: {task:?}"
        );
    }
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
# One mount: the four tasks on one node.
processes_per_node = 4
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
    let (tasks, files) = (4, 4 * 8);
    // Each task's lookup of its directory as the phase begins, the
    // kernel's lookup before each create, then the close: an fsync, the
    // namespace's sync and the release's notice.
    assert_eq!(
        mount,
        plain + tasks + files * 4,
        "{plain} requests without the mount, {mount} with"
    );
    assert_eq!(mount_meta, plain_meta + tasks + files * 3);
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

/// The metadata requests of one operation through the mount, by rank:
/// (op, issued, replied) in seconds, in issue order.
fn meta_requests(text: &str, sets: &[&str], call: u32) -> Vec<(concerto_core::Op, f64, f64)> {
    let mut sets = sets.to_vec();
    sets.extend([
        "output.detail=true",
        "cluster.metadata.posix_mount=true",
        ONE_MOUNT,
    ]);
    let run = simulate(&scenario(text, &sets), 1, None);
    let mut out: Vec<_> = run
        .detail
        .expect("output.detail asks for it")
        .iter()
        .filter(|p| p.call == call && matches!(p.op, concerto_core::Op::Meta(_)))
        .map(|p| (p.op, p.issue.as_secs_f64(), p.response.as_secs_f64()))
        .collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}

/// Whether every request of kind `op` was issued only once the one before
/// had its reply: they took turns.
fn took_turns(requests: &[(concerto_core::Op, f64, f64)], op: concerto_core::MetaOp) -> bool {
    let of: Vec<_> = requests
        .iter()
        .filter(|r| r.0 == concerto_core::Op::Meta(op))
        .collect();
    of.windows(2).all(|w| w[1].1 >= w[0].2 - 1e-12)
}

/// Through the mount, the kernel holds a directory's lock across a call
/// that adds or removes a name in it: IOR's four tasks creating their
/// files in one directory take turns (each create issued after the last
/// one's reply), as md-test's four tasks making their own directories in
/// the test directory do; md-test's files, in each task's own directory,
/// are created side by side.
#[test]
fn a_mounts_creates_in_one_directory_take_turns() {
    use concerto_core::MetaOp;
    let ior = meta_requests(IOR, &["apps[0].file=\"per-process\""], 0);
    assert_eq!(
        ior.iter()
            .filter(|r| r.0 == concerto_core::Op::Meta(MetaOp::Create))
            .count(),
        4
    );
    assert!(took_turns(&ior, MetaOp::Create), "IOR's creates: {ior:?}");

    let md = "apps[0].md_steps=[\"mktestdir\", \"create\", \"rmtestdir\"]";
    let mkdirs = meta_requests(MDTEST, &[md], 0);
    assert!(took_turns(&mkdirs, MetaOp::Mkdir), "mkdirs: {mkdirs:?}");
    let creates = meta_requests(MDTEST, &[md], 1);
    assert!(
        !took_turns(&creates, MetaOp::Create),
        "md-test's creates, each task in its own directory: {creates:?}"
    );
    let rmdirs = meta_requests(MDTEST, &[md], 2);
    assert!(took_turns(&rmdirs, MetaOp::Rmdir), "rmdirs: {rmdirs:?}");
}

/// Whether every request, whatever its kind, was issued only once the one
/// before had its reply, and the kinds alternate lookup, `op`, lookup, ...
fn lookup_and_change_in_turns(
    requests: &[(concerto_core::Op, f64, f64)],
    op: concerto_core::MetaOp,
) -> bool {
    use concerto_core::{MetaOp, Op};
    requests.windows(2).all(|w| w[1].1 >= w[0].2 - 1e-12)
        && requests
            .iter()
            .enumerate()
            .all(|(i, r)| r.0 == Op::Meta(if i % 2 == 0 { MetaOp::Getattr } else { op }))
}

/// The kernel locks the directory before it looks up the name a create,
/// mkdir, unlink or rmdir changes (a kernel FUSE trace of four tasks'
/// mkdirs in one directory: lookup, mkdir, lookup, mkdir, ..., each sent
/// at the last one's reply): through the mount, each lookup before such a
/// change waits for the lock and the change keeps it, so the four tasks'
/// lookups and changes all take turns. Lookups before changes in a task's
/// own directory (md-test's creates) still go side by side.
#[test]
fn a_changed_name_is_looked_up_under_its_directorys_lock() {
    use concerto_core::{MetaOp, Op};
    let md = "apps[0].md_steps=[\"mktestdir\", \"create\", \"rmtestdir\"]";
    // Each phase begins with every task's lookup of the directory its
    // names are in, side by side (no change follows it in that directory).
    let after_parent_lookups = |requests: Vec<(Op, f64, f64)>| {
        let (parents, rest) = requests.split_at(4);
        assert!(
            parents
                .iter()
                .all(|r| r.0 == Op::Meta(MetaOp::Getattr) && r.1 == parents[0].1),
            "{requests:?}"
        );
        rest.to_vec()
    };
    let mkdirs = after_parent_lookups(meta_requests(MDTEST, &[md], 0));
    assert_eq!(mkdirs.len(), 8, "{mkdirs:?}");
    assert!(
        lookup_and_change_in_turns(&mkdirs, MetaOp::Mkdir),
        "mkdirs: {mkdirs:?}"
    );
    let rmdirs = after_parent_lookups(meta_requests(MDTEST, &[md], 2));
    assert_eq!(rmdirs.len(), 8, "{rmdirs:?}");
    assert!(
        lookup_and_change_in_turns(&rmdirs, MetaOp::Rmdir),
        "rmdirs: {rmdirs:?}"
    );

    let ior = meta_requests(IOR, &["apps[0].file=\"per-process\""], 0);
    let opens: Vec<_> = ior
        .iter()
        .copied()
        .filter(|r| matches!(r.0, Op::Meta(MetaOp::Getattr | MetaOp::Create)))
        .collect();
    assert_eq!(opens.len(), 8, "{ior:?}");
    assert!(
        lookup_and_change_in_turns(&opens, MetaOp::Create),
        "IOR's opens: {opens:?}"
    );

    let creates = after_parent_lookups(meta_requests(MDTEST, &[md], 1));
    // Not in turns: every task's first lookup leaves before any create is answered.
    let first_reply = creates
        .iter()
        .find(|r| r.0 == Op::Meta(MetaOp::Create))
        .map_or(f64::INFINITY, |r| r.2);
    let first_lookups = creates
        .iter()
        .filter(|r| r.0 == Op::Meta(MetaOp::Getattr) && r.1 < first_reply)
        .count();
    assert_eq!(
        first_lookups, 4,
        "md-test's tasks look their first files up side by side, each in its own directory: {creates:?}"
    );
}

/// Through the mount, a removed file's objects are removed by the
/// metadata server's reaper, batched per data server a gathering time
/// after the first committed orphan, off the process's path: a Tree removal right
/// after mdtest's File removal meets the batch at the servers when it
/// falls in the phase (server 0 serves the metadata too), and is never
/// faster than the same phase after removals of files that had no data;
/// the Tree creation, which no removal precedes, is the same in both.
/// Where the last batch falls depends on how long the File removal took,
/// so the phase is looked at over a range of file counts.
#[test]
fn the_reaper_slows_the_tree_removal_exactly_when_removals_of_written_files_precede_it() {
    use concerto_core::{MetaOp, Op};
    let run = |items: u32, steps: &str| {
        let steps = format!("apps[0].md_steps={steps}");
        let items = format!("apps[0].items={items}");
        let sets = [
            steps.as_str(),
            items.as_str(),
            "cluster.metadata.posix_mount=true",
            "output.detail=true",
        ];
        simulate(&scenario(MDTEST, &sets), 1, None)
    };
    let phases = |r: &concerto_sim::RunResult| -> Vec<f64> {
        r.apps[0]
            .mdtest
            .as_ref()
            .expect("md-test reports its phases")
            .iter()
            .map(|p| p.seconds)
            .collect()
    };
    // The reaper's removals: requests beyond the files' own removals.
    let reaped = |r: &concerto_sim::RunResult, files: u32| {
        r.detail
            .as_ref()
            .expect("output.detail asks for it")
            .iter()
            .filter(|p| p.op == Op::Meta(MetaOp::Remove))
            .count()
            - files as usize
    };
    let mut slowed = 0;
    for items in 16..=40 {
        let written = run(
            items,
            r#"["mktestdir", "create", "write", "rm", "rmtestdir"]"#,
        );
        let empty = run(items, r#"["mktestdir", "create", "rm", "rmtestdir"]"#);
        let (w, e) = (phases(&written), phases(&empty));
        assert_eq!(w[0], e[0], "{items} items: Tree creation {w:?} {e:?}");
        assert!(
            w[4] >= e[3],
            "{items} items: Tree removal after written files' removal {w:?}, after empty ones' {e:?}"
        );
        slowed += (w[4] > e[3]) as u32;
        assert!(reaped(&written, 4 * items) > 0, "{items} items");
        assert_eq!(reaped(&empty, 4 * items), 0, "{items} items");
    }
    assert!(slowed > 0, "no Tree removal met the reaper");
}

/// The reaper takes a removal's objects only once the metadata server has
/// committed it ([`METADATA_COMMIT_INTERVAL`] after the first change), an
/// idle one gathers [`REAPER_GATHER`] first, and once a batch is answered
/// it sends what was committed meanwhile at once, as the real reaper's
/// loop does: one batch at a time, some following another sooner than a
/// gathering would allow.
#[test]
fn the_reaper_removes_committed_orphans_and_loops_while_removals_stream() {
    use concerto_core::server::{METADATA_COMMIT_INTERVAL, REAPER_GATHER};
    use concerto_core::{MetaOp, Op, Time};
    let sets = [
        r#"apps[0].md_steps=["mktestdir", "create", "write", "rm", "rmtestdir"]"#,
        "apps[0].items=200",
        "cluster.metadata.posix_mount=true",
        "output.detail=true",
    ];
    let run = simulate(&scenario(MDTEST, &sets), 1, None);
    let detail = run.detail.as_ref().expect("output.detail asks for it");
    let removes = |server: u32| {
        detail
            .iter()
            .filter(move |p| p.op == Op::Meta(MetaOp::Remove) && p.server == server)
    };
    // Server 0 holds the namespace: its removals include the files'; the
    // other data servers see only the reaper's, one per batch.
    let first_removal = removes(0).map(|p| p.done).min().expect("files removed");
    let mut batches: Vec<(Time, Time)> = removes(1).map(|p| (p.issue, p.response)).collect();
    batches.sort();
    assert!(batches.len() >= 3, "{batches:?}");
    assert!(
        batches[0].0 >= first_removal + METADATA_COMMIT_INTERVAL + REAPER_GATHER,
        "the first batch at {:?}, the first removal done at {first_removal:?}",
        batches[0].0
    );
    for w in batches.windows(2) {
        assert!(w[1].0 >= w[0].1, "two batches at once: {w:?}");
    }
    assert!(
        batches.windows(2).any(|w| w[1].0 - w[0].1 < REAPER_GATHER),
        "no batch followed another without gathering: {batches:?}"
    );
}
