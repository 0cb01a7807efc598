//! `cluster.write_behind`: the simulated client holds and coalesces its
//! writes with core's write-behind policy, the one the real client runs,
//! so a program's small writes reach the simulated servers as the same
//! few large requests they reach the real ones as (the mount's count is
//! in crates/concerto-fuse/tests/integration/requests.rs: 4 MiB of 4 KiB
//! writes on four 64 KiB-striped servers, 12 writes and a close's fsyncs).

#[allow(dead_code)]
mod common;
use common::scenario;
use concerto_core::client::write_behind::{FileWrites, WriteBehindConfig};
use concerto_core::{Extent, RequestLimits, StripeLayout, Time};
use concerto_sim::simulate;

/// One process writing 4 MiB in 4 KiB transfers through the mount, on
/// four servers of 64 KiB stripes.
const IOR: &str = r#"
name = "write-behind"
[cluster]
servers = 4
stripe_unit = "64KiB"
write_behind = "16MiB"
[cluster.device]
kind = "fixed"
service_time = "1ms"
[cluster.network]
mode = "ideal"
[cluster.metadata]
posix_mount = true
[[apps]]
workload = "ior"
processes = 1
block_size = "4MiB"
request_size = "4KiB"
segments = 1
operations = ["write"]
"#;

/// The data writes the servers saw: (server, bytes), in issue order.
fn writes(sets: &[&str]) -> Vec<(u32, u64)> {
    let mut sets = sets.to_vec();
    sets.push("output.detail=true");
    let run = simulate(&scenario(IOR, &sets), 1, None);
    let mut out: Vec<_> = run
        .detail
        .expect("output.detail asks for it")
        .iter()
        .filter(|p| p.op == concerto_core::Op::Write && p.bytes > 0)
        .map(|p| (p.issue, p.server, p.bytes))
        .collect();
    out.sort_by_key(|p| p.0);
    out.into_iter().map(|(_, s, b)| (s, b)).collect()
}

#[test]
fn small_writes_reach_the_simulated_servers_as_the_policy_sends_them() {
    let simulated = writes(&[]);
    // The policy itself, fed the same program: what it sends, split by the
    // layout into the requests each server gets.
    let layout = StripeLayout::new(64 << 10, vec![0, 1, 2, 3]).unwrap();
    let mut policy = FileWrites::new(WriteBehindConfig::bounded(16 << 20));
    let mut sent: Vec<Extent> = Vec::new();
    for i in 0..1024u64 {
        let plan = policy.write(0u32, i * 4096, 4096, Time::ZERO, &layout);
        sent.extend(plan.before.into_iter().chain(plan.after).map(|f| f.extent));
    }
    sent.extend(policy.flush(None).into_iter().map(|f| f.extent));
    let limits = RequestLimits {
        max_bytes: 64 << 20,
        max_extents: 64,
    };
    let expected: Vec<(u32, u64)> = sent
        .iter()
        .flat_map(|e| layout.requests(&[*e], limits))
        .map(|r| (r.server, r.bytes))
        .collect();
    assert_eq!(
        expected.len(),
        12,
        "runs of 1 and 2 MiB (the ramp), then the last MiB: a request per server each"
    );
    let by_server = |w: &[(u32, u64)]| {
        let mut w = w.to_vec();
        w.sort();
        w
    };
    assert_eq!(
        by_server(&simulated),
        by_server(&expected),
        "the simulated servers get what the policy sends"
    );
    // Written through, each 4 KiB write is a request.
    assert_eq!(writes(&["cluster.write_behind=0"]).len(), 1024);
}

#[test]
fn a_write_behind_program_ends_when_its_close_has_everything_on_the_servers() {
    let ior = |sets: &[&str]| {
        let run = simulate(&scenario(IOR, sets), 1, None);
        run.apps[0].ior.as_ref().unwrap()[0].seconds
    };
    let behind = ior(&[]);
    let through = ior(&["cluster.write_behind=0"]);
    // 12 requests of 1 ms on four servers, three each (3 ms, and the close's
    // fsyncs and sync), against 1024 requests of 1 ms, 256 on each server
    // one after the other: the 4 KiB writes waited for each reply.
    assert!(behind < 0.01, "written behind: {behind} s");
    assert!(through > 1.0, "written through: {through} s");
}

#[test]
fn a_small_bound_makes_writes_wait_for_room() {
    let run = |bound: &str| {
        let bound = format!("cluster.write_behind={bound}");
        let sets = [bound.as_str(), "output.detail=true"];
        let run = simulate(&scenario(IOR, &sets), 1, None);
        let issues: Vec<f64> = run
            .detail
            .unwrap()
            .iter()
            .filter(|p| p.op == concerto_core::Op::Write && p.bytes > 0)
            .map(|p| p.issue.as_secs_f64())
            .collect();
        let first = issues.iter().copied().fold(f64::INFINITY, f64::min);
        issues.iter().copied().fold(0.0, f64::max) - first
    };
    // With room for one MiB in flight, each later MiB's requests leave
    // only once an earlier MiB's came back (1 ms each); with 16 MiB, all
    // leave at once (the program's writes take no time here).
    assert!(run("16MiB") < 1e-9, "{}", run("16MiB"));
    assert!(run("1MiB") >= 0.003 - 1e-9, "{}", run("1MiB"));
}

/// One process reading 16 MiB in 1 MiB transfers (after writing it), on
/// four servers of 64 KiB stripes, reading ahead.
const READER: &str = include_str!("read_ahead.toml");

/// A sequential reader's requests are those core's read-ahead policy asks
/// for: the first two reads its own (a first read alone fetches nothing;
/// the second starts the fetching, from the next stripe on), then chunks
/// of 4 MiB, one request per server each, the window doubling, none past
/// the data's end (the real client, which does not know the end, fetches
/// up to a window past it: its count is 24 to 40 in
/// crates/concerto-fuse/tests/integration/requests.rs). The same program
/// on a real cluster, request by request beside this one:
/// tests/test_transfers.py.
#[test]
fn a_sequential_reader_reads_what_the_read_ahead_policy_fetches() {
    let run = simulate(&scenario(READER, &["output.detail=true"]), 1, None);
    let mut reads: Vec<(u64, u32, u64)> = run
        .detail
        .unwrap()
        .iter()
        .filter(|p| p.op == concerto_core::Op::Read)
        .map(|p| (p.issue.as_nanos(), p.server, p.bytes))
        .collect();
    reads.sort();
    let mut sizes: Vec<u64> = reads.iter().map(|r| r.2).collect();
    sizes.sort();
    // Two direct reads (256 KiB on each server), four chunks of 4 MiB
    // (1 MiB on each server), the last cut to the file's end at 16 MiB.
    let mut expected = vec![256 << 10; 8];
    expected.extend(vec![512 << 10; 4]);
    expected.extend(vec![1 << 20; 12]);
    assert_eq!(sizes, expected);
    assert_eq!(sizes.iter().sum::<u64>(), 16 << 20, "every byte read once");
    let without = simulate(
        &scenario(READER, &["cluster.read_ahead=false", "output.detail=true"]),
        1,
        None,
    );
    let plain = without
        .detail
        .unwrap()
        .iter()
        .filter(|p| p.op == concerto_core::Op::Read)
        .count();
    assert_eq!(plain, 64, "each 1 MiB read its own four requests");
}

/// Two processes on one client node, each writing its own 8 MiB file in
/// 1 MiB transfers, written behind; the node's data path moves 100 MB/s.
const TWO_WRITERS: &str = r#"
name = "two-writers"
[cluster]
servers = 1
stripe_unit = "64KiB"
write_behind = "16MiB"
[cluster.device]
kind = "fixed"
service_time = "1ms"
[cluster.network]
client_bandwidth = "100MB/s"
[[apps]]
workload = "ior"
processes = 2
processes_per_node = 2
block_size = "8MiB"
request_size = "1MiB"
file = "per-process"
segments = 1
operations = ["write"]
"#;

/// A held write costs its process the copy of its bytes into the client
/// (the real write(2) returns once the mount has them), so two processes'
/// runs leave interleaved, a MiB each per 10.5 ms, as they reach the real
/// servers through the mount; a write that cost nothing let one process
/// send its whole file before the other's first byte, and the simulated
/// servers never saw the two streams alternate (an HDD-class twin then
/// wrote 2.4x as fast as the real cluster).
#[test]
fn held_writes_cost_their_copy_into_the_client_so_two_writers_interleave() {
    let run = simulate(&scenario(TWO_WRITERS, &["output.detail=true"]), 1, None);
    let mut writes: Vec<(u64, u32)> = run
        .detail
        .unwrap()
        .iter()
        .filter(|p| p.op == concerto_core::Op::Write && p.bytes > 0)
        .map(|p| (p.issue.as_nanos(), p.rank))
        .collect();
    writes.sort();
    let ranks: Vec<u32> = writes.iter().map(|w| w.1).collect();
    let switches = ranks.windows(2).filter(|w| w[0] != w[1]).count();
    // 16 MiB in 1 MiB runs, two writers: alternating, the runs switch
    // writer at nearly every step (8 runs each).
    assert_eq!(ranks.len(), 16, "{ranks:?}");
    assert!(switches >= 12, "the writers' runs alternate: {ranks:?}");
    // Each process's eight copies of 1 MiB at 100 MB/s: 84 ms at least.
    let seconds = run.apps[0].ior.as_ref().unwrap()[0].seconds;
    assert!(seconds >= 8.0 * 1048576.0 / 100e6, "{seconds} s");
}

/// Four processes writing one shared file through one node's client, in
/// 256 KiB transfers of 4 MiB blocks (IOR's shared-file pattern through
/// the mount), on four servers of 64 KiB stripes.
const SHARED_ON_ONE_NODE: &str = r#"
name = "shared-file-one-node"
[cluster]
servers = 4
stripe_unit = "64KiB"
write_behind = "16MiB"
[cluster.device]
kind = "fixed"
service_time = "5ms"
[cluster.network]
client_bandwidth = "240MB/s"
[cluster.metadata]
posix_mount = true
[[apps]]
workload = "ior"
processes = 4
processes_per_node = 4
block_size = "4MiB"
request_size = "256KiB"
segments = 1
operations = ["write"]
"#;

/// The processes of a node share its client, whose close (fsync, then
/// close) settles the whole file as the mount's does: the first process
/// to close sends the other processes' held runs of the file, cut where
/// they stand (the real servers' arrival logs show those partial runs,
/// 64-192 KiB per server, beside the ramp's 256 and 512 KiB), and the
/// kernel holds the file's lock across the fsync, so no other process's
/// write to it leaves while a close syncs. With a node per process each
/// process's runs are its own: the ramp's quarter, half, and the rest.
#[test]
fn a_close_settles_the_nodes_runs_of_the_file_and_holds_its_writes_until_synced() {
    let pieces = |per_node: &str| {
        let run = simulate(
            &scenario(
                SHARED_ON_ONE_NODE,
                &[
                    &format!("apps[0].processes_per_node={per_node}"),
                    "output.detail=true",
                ],
            ),
            1,
            None,
        );
        run.detail.unwrap()
    };
    let sizes = |pieces: &[concerto_sim::results::PieceRecord]| {
        let mut s: Vec<u64> = pieces
            .iter()
            .filter(|p| p.op == concerto_core::Op::Write && p.bytes > 0)
            .map(|p| p.bytes)
            .collect();
        s.sort();
        s.dedup();
        s
    };
    let apart = pieces("1");
    assert_eq!(
        sizes(&apart),
        vec![256 << 10, 512 << 10],
        "each process's own runs"
    );
    let together = pieces("4");
    assert!(
        sizes(&together).iter().any(|&b| b < 256 << 10),
        "a close cut another process's run: {:?}",
        sizes(&together)
    );
    // The closes take the file's lock in turn: each one's syncs, from the
    // first's issue to the last's reply, end before the next one's begin,
    // and no other process's data leaves meanwhile.
    let mut spans: Vec<(u64, u64, u32)> = (0..4)
        .map(|rank| {
            let syncs = together
                .iter()
                .filter(|p| p.rank == rank && p.op == concerto_core::Op::Write && p.bytes == 0);
            let from = syncs.clone().map(|p| p.issue.as_nanos()).min().unwrap();
            let to = syncs.map(|p| p.response.as_nanos()).max().unwrap();
            (from, to, rank)
        })
        .collect();
    spans.sort();
    assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "{spans:?}");
    for &(from, to, rank) in &spans {
        let inside = together
            .iter()
            .filter(|p| p.rank != rank && p.op == concerto_core::Op::Write && p.bytes > 0)
            .any(|p| p.issue.as_nanos() > from && p.issue.as_nanos() < to);
        assert!(!inside, "rank {rank}'s sync {from}..{to}");
    }
}

/// Each node's kernel has its own lock on a file: through the mount
/// without write-behind, four processes on one node write a shared file
/// one write(2) at a time (each holds the file's lock until its replies),
/// while four processes on four nodes have their writes in flight at once.
#[test]
fn a_files_kernel_lock_is_each_nodes_own() {
    let overlapping = |per_node: &str| {
        let run = simulate(
            &scenario(
                SHARED_ON_ONE_NODE,
                &[
                    "cluster.write_behind=\"0\"",
                    &format!("apps[0].processes_per_node={per_node}"),
                    "output.detail=true",
                ],
            ),
            1,
            None,
        );
        let writes: Vec<(u32, u64, u64)> = run
            .detail
            .unwrap()
            .iter()
            .filter(|p| p.op == concerto_core::Op::Write && p.bytes > 0)
            .map(|p| (p.rank, p.issue.as_nanos(), p.response.as_nanos()))
            .collect();
        writes
            .iter()
            .flat_map(|a| writes.iter().map(move |b| (a, b)))
            .filter(|(a, b)| a.0 != b.0 && a.1 < b.2 && b.1 < a.2)
            .count()
    };
    assert_eq!(overlapping("4"), 0, "one node: one write(2) at a time");
    assert!(overlapping("1") > 0, "four nodes: their writes overlap");
}
