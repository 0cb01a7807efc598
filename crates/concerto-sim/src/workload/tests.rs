//! The steps and accesses of the workload kinds.

use super::*;
use smallvec::smallvec;

use crate::scenario::{MetadataConfig, Scenario};

fn app(extra: &str) -> AppSpec {
    let text =
        format!("[cluster]\nservers = 4\n[cluster.device]\nkind = \"ssd\"\n[[apps]]\n{extra}\n");
    Scenario::from_toml(&text, &[]).unwrap().apps.remove(0)
}

#[test]
fn ior_patterns() {
    let seg = app("workload = \"ior\"\nprocesses = 4\nrequests = 3\nrequest_size = 100");
    assert_eq!(ior::access(&seg, 1, 2).extents[..], [Extent::new(500, 100)]);
    let strided = app("workload = \"ior\"\nprocesses = 4\nrequests = 3\nrequest_size = 100\npattern = \"strided\"");
    assert_eq!(
        ior::access(&strided, 1, 2).extents[..],
        [Extent::new(900, 100)]
    );
    let fpp = app("workload = \"ior\"\nprocesses = 4\nrequest_size = 100\nfile = \"per-process\"");
    let a = ior::access(&fpp, 3, 0);
    assert_eq!((a.file, &a.extents[..]), (3, &[Extent::new(0, 100)][..]));
    assert_eq!(files_per_instance(&fpp), 4);
}

#[test]
fn ior_layout_follows_iors_segments_blocks_and_transfers() {
    // -b 300 -t 100 -s 2 -w -r with 4 processes on one file.
    let ior = app("workload = \"ior\"\nprocesses = 4\nrequest_size = 100\nblock_size = 300\nsegments = 2\noperations = [\"write\", \"read\"]");
    assert_eq!(ior.calls(), 2);
    assert_eq!(ior.bytes_per_call(), 600);
    for (call, op) in [(0, DataOp::Write), (1, DataOp::Read)] {
        let mut steps = Vec::new();
        call_steps(&ior, 1, call, &MetadataConfig::default(), &mut steps);
        let offsets: Vec<u64> = steps
            .iter()
            .map(|s| match s {
                Step::Data { op: o, access } if *o == op && access.file == 0 => {
                    access.extents[0].offset
                }
                other => panic!("{other:?}"),
            })
            .collect();
        // Block 0 of process 1 at 300, block 1 (segment 1) at (4 + 1) * 300.
        assert_eq!(offsets, [300, 400, 500, 1500, 1600, 1700]);
    }
    let fpp = app("workload = \"ior\"\nprocesses = 4\nrequest_size = 100\nblock_size = 200\nsegments = 2\nfile = \"per-process\"");
    let mut steps = Vec::new();
    call_steps(&fpp, 3, 0, &MetadataConfig::default(), &mut steps);
    assert_eq!(steps.len(), 4);
    assert!(
        matches!(&steps[3], Step::Data { access, .. } if access.file == 3 && access.extents[0].offset == 300)
    );
}

/// Through a POSIX mount that has not seen the names, every md-test
/// operation follows the kernel's lookup of its name (a stat is the
/// lookup), and a read the file's open too; the PVFS2 client sends the
/// operation alone.
#[test]
fn a_posix_mount_looks_names_up_before_each_operation_and_opens_before_reading() {
    let md = app("workload = \"md-test\"\nprocesses = 2\nitems = 2\nrequest_size = 4096\nmd_steps = [\"mktestdir\", \"create\", \"read\", \"stat\", \"rm\", \"rmtestdir\"]");
    let mount = MetadataConfig {
        posix_mount: true,
        ..MetadataConfig::default()
    };
    let kinds = |call: u32, metadata: &MetadataConfig| {
        let mut steps = Vec::new();
        call_steps(&md, 1, call, metadata, &mut steps);
        steps
            .iter()
            .map(|s| match s {
                Step::Meta { op, .. } => format!("{op:?}"),
                Step::Data { op, access } => format!("{op:?} {}", access.file),
                Step::Close { file, written } => format!("Close {file} {}", written.len()),
            })
            .collect::<Vec<_>>()
    };
    // Each phase first looks up the directory its names are in.
    assert_eq!(kinds(0, &mount), ["Getattr", "Getattr", "Mkdir"]);
    // Created empty: closed with nothing written after each create.
    assert_eq!(
        kinds(1, &mount),
        [
            "Getattr",
            "Getattr",
            "Create",
            "Close 2 0",
            "Getattr",
            "Create",
            "Close 3 0"
        ]
    );
    assert_eq!(
        kinds(2, &mount),
        ["Getattr", "Getattr", "Getattr", "Read 2", "Getattr", "Getattr", "Read 3"]
    );
    assert_eq!(kinds(3, &mount), ["Getattr", "Getattr", "Getattr"]);
    assert_eq!(
        kinds(4, &mount),
        ["Getattr", "Getattr", "Remove", "Getattr", "Remove"]
    );
    assert_eq!(kinds(5, &mount), ["Getattr", "Getattr", "Rmdir"]);
    // The directory phases look up the shared directory, the others the process's own.
    let targets = |call: u32| {
        let mut steps = Vec::new();
        call_steps(&md, 1, call, &mount, &mut steps);
        match steps.first() {
            Some(Step::Meta { target, .. }) => *target,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(targets(0), MetaTarget::Parent);
    assert_eq!(targets(5), MetaTarget::Parent);
    assert_eq!(targets(1), MetaTarget::Dir);
    let pvfs2 = MetadataConfig::default();
    assert_eq!(kinds(0, &pvfs2), ["Mkdir"]);
    assert_eq!(kinds(1, &pvfs2), ["Create", "Create"]);
    assert_eq!(kinds(2, &pvfs2), ["Read 2", "Read 3"]);
}

/// mdtest -w: a file is written in the loop that creates it and closed
/// after the write (an fsync of what it wrote, the namespace's sync and
/// the release); written in a phase of its own, it is opened first.
#[test]
fn a_posix_mount_closes_a_written_file_after_its_write() {
    let steps_of = |md_steps: &str, call: u32, posix_mount: bool| {
        let md = app(&format!("workload = \"md-test\"\nprocesses = 1\nitems = 1\nrequest_size = 4096\nmd_steps = {md_steps}"));
        let metadata = MetadataConfig {
            posix_mount,
            ..MetadataConfig::default()
        };
        let mut steps = Vec::new();
        call_steps(&md, 0, call, &metadata, &mut steps);
        steps
    };
    let write = Step::Data {
        op: DataOp::Write,
        access: Access {
            file: 0,
            extents: smallvec![Extent::new(0, 4096)],
        },
    };
    let close = Step::Close {
        file: 0,
        written: smallvec![Extent::new(0, 4096)],
    };
    let lookup = Step::Meta {
        op: MetaOp::Getattr,
        target: MetaTarget::File(0),
    };
    let create = Step::Meta {
        op: MetaOp::Create,
        target: MetaTarget::File(0),
    };
    let directory = Step::Meta {
        op: MetaOp::Getattr,
        target: MetaTarget::Dir,
    };
    let created_then_written = r#"["create", "write"]"#;
    assert_eq!(
        steps_of(created_then_written, 0, true),
        [directory.clone(), lookup.clone(), create]
    );
    // In the loop that created them: the names are known.
    assert_eq!(
        steps_of(created_then_written, 1, true),
        [write.clone(), close.clone()]
    );
    assert_eq!(
        steps_of(r#"["stat", "write"]"#, 1, true),
        [directory, lookup.clone(), lookup, write.clone(), close]
    );
    assert_eq!(steps_of(created_then_written, 1, false), [write]);
}

/// Through the mount, an IOR operation opens its file first (the
/// kernel's lookup, then a write's create or a read's open) and closes it
/// last (a written file with what the task wrote: its blocks, merged where
/// they touch); IOR's time counts both. Without the mount, only the data.
#[test]
fn a_posix_mount_opens_and_closes_each_ior_operations_file() {
    let steps_of = |file: &str, call: u32, posix_mount: bool| {
        let ior = app(&format!(
            "workload = \"ior\"\nprocesses = 2\nrequest_size = 100\nblock_size = 200\nsegments = 2\n\
             operations = [\"write\", \"read\"]\nfile = \"{file}\""
        ));
        let metadata = MetadataConfig {
            posix_mount,
            ..MetadataConfig::default()
        };
        let mut steps = Vec::new();
        call_steps(&ior, 1, call, &metadata, &mut steps);
        steps
    };
    let meta = |op, file| Step::Meta {
        op,
        target: MetaTarget::File(file),
    };
    let data = |op, file, offset| Step::Data {
        op,
        access: Access::one(file, offset, 100),
    };
    let (w, r) = (DataOp::Write, DataOp::Read);
    assert_eq!(
        steps_of("per-process", 0, true),
        [
            meta(MetaOp::Getattr, 1),
            meta(MetaOp::Create, 1),
            data(w, 1, 0),
            data(w, 1, 100),
            data(w, 1, 200),
            data(w, 1, 300),
            Step::Close {
                file: 1,
                written: smallvec![Extent::new(0, 400)]
            },
        ]
    );
    assert_eq!(
        steps_of("per-process", 1, true),
        [
            meta(MetaOp::Getattr, 1),
            meta(MetaOp::Getattr, 1),
            data(r, 1, 0),
            data(r, 1, 100),
            data(r, 1, 200),
            data(r, 1, 300),
            Step::Close {
                file: 1,
                written: smallvec![]
            },
        ]
    );
    // Rank 1 of 2 in a shared file: blocks 1 and 3, apart.
    let shared = steps_of("shared", 0, true);
    assert_eq!(
        shared.last(),
        Some(&Step::Close {
            file: 0,
            written: smallvec![Extent::new(200, 200), Extent::new(600, 200)]
        })
    );
    assert_eq!(
        steps_of("per-process", 0, false),
        [
            data(w, 1, 0),
            data(w, 1, 100),
            data(w, 1, 200),
            data(w, 1, 300)
        ]
    );
}

#[test]
fn tiles_cover_the_dataset_exactly_once() {
    let t = app("workload = \"mpi-tile-io\"\nprocesses = 6\ngrid = [3, 2]\ntile = [4, 5]\nelement_size = 8\nrequests = 2");
    for call in 0..2 {
        let mut all: Vec<Extent> = (0..6)
            .flat_map(|r| tile::access(&t, r, call).extents)
            .collect();
        all.sort();
        let dataset = 3 * 4 * 2 * 5 * 8;
        let mut next = call as u64 * dataset;
        for e in all {
            assert_eq!(e.offset, next);
            next = e.end();
        }
        assert_eq!(next, (call as u64 + 1) * dataset);
    }
}

#[test]
fn planes_nest_the_tiles_two_strides_deep() {
    // BTIO's view: 3 x 3 processes, runs of one 3240-byte element, 2 rows per tile, 2 planes.
    let t = app("workload = \"mpi-tile-io\"\nprocesses = 9\ngrid = [3, 3]\ntile = [1, 2]\nplanes = 2\nelement_size = 3240");
    let e = tile::access(&t, 4, 0).extents;
    // Process 4 is tile (1, 1): rows 2 and 3 of each plane, second run of each row.
    let row = 3 * 3240;
    let plane = 6 * row;
    assert_eq!(
        e[..],
        [
            Extent::new(2 * row + 3240, 3240),
            Extent::new(3 * row + 3240, 3240),
            Extent::new(plane + 2 * row + 3240, 3240),
            Extent::new(plane + 3 * row + 3240, 3240),
        ]
    );
    assert_eq!(t.bytes_per_call(), 4 * 3240);
    let mut all: Vec<Extent> = (0..9)
        .flat_map(|r| tile::access(&t, r, 0).extents)
        .collect();
    all.sort();
    assert!(
        all.windows(2).all(|w| w[0].end() == w[1].offset),
        "the processes tile the dataset"
    );
    assert_eq!(all.last().unwrap().end(), 2 * plane);
}

#[test]
fn noncontig_interleaves_processes() {
    let n = app("workload = \"noncontig\"\nprocesses = 4\nelements = 3\nelement_size = 8");
    assert_eq!(
        noncontig::access(&n, 1, 0).extents[..],
        [Extent::new(8, 8), Extent::new(40, 8), Extent::new(72, 8)]
    );
    assert_eq!(noncontig::access(&n, 0, 1).extents[0], Extent::new(96, 8));
}
