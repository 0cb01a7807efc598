//! `[cluster] page_cache`: a node's reads of what its processes wrote or
//! read before are served from its memory; another node's write drops them.

#[allow(dead_code)]
mod common;
use common::{error_of, scenario};
use concerto_sim::simulate;

use common::IOR_FOUR_TASKS as IOR;

/// (write seconds, read seconds, read pieces served by the servers).
fn run(sets: &[&str]) -> (f64, f64, usize) {
    let mut sets = sets.to_vec();
    sets.push("output.detail=true");
    let r = simulate(&scenario(IOR, &sets), 1, None);
    let ops = r.apps[0].ior.as_ref().expect("IOR's operations");
    let reads = r
        .detail
        .as_ref()
        .expect("output.detail asks for it")
        .iter()
        .filter(|p| p.op == concerto_core::Op::Read)
        .count();
    (ops[0].seconds, ops[1].seconds, reads)
}

#[test]
fn a_node_reads_what_its_tasks_wrote_from_its_memory() {
    // The four tasks on one node (one mount), as IOR runs on one host.
    let one_node = "apps[0].processes_per_node=4";
    let (write, read, served) = run(&[one_node]);
    assert_eq!(
        served,
        4 * 8,
        "without a page cache every read asks a server"
    );
    assert!(read > 0.005, "{read}");
    let (cached_write, cached_read, cached_served) =
        run(&[one_node, "cluster.page_cache=\"2GB/s\""]);
    assert_eq!(cached_write, write, "writes are as before");
    assert_eq!(cached_served, 0, "the node held every byte its tasks read");
    // 2 MiB at 2 GB/s, a block at a time per task: about 33 us a block.
    assert!(cached_read < read / 10.0, "{cached_read} against {read}");
}

#[test]
fn a_file_another_node_wrote_is_read_from_the_servers() {
    // A task a node, one shared file: every node's write drops what the
    // others held of it (close-to-open: each would find the file changed
    // at its next open), so the reads go to the servers.
    let cache = "cluster.page_cache=\"2GB/s\"";
    let (_, _, served) = run(&[cache, "apps[0].file=\"shared\""]);
    assert_eq!(served, 4 * 8);
    // A file per task: each node reads back only what it wrote itself.
    let (_, _, served) = run(&[cache, "apps[0].file=\"per-process\""]);
    assert_eq!(served, 0);
}

#[test]
fn a_page_cache_of_no_rate_is_refused_naming_the_key() {
    let e = error_of(IOR, &["cluster.page_cache=\"0MB/s\""]);
    assert!(e.contains("cluster.page_cache") && e.contains("> 0"), "{e}");
}
