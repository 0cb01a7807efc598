//! Access patterns: what process `rank` does in its `call`-th call, for
//! each workload kind. A call is a sequence of steps; each step is issued
//! when the previous one's replies are all in (one data access split over
//! the servers, or one metadata operation).

use concerto_core::client::collective::patterns::tile_extents;
use concerto_core::{Extent, MetaOp};
use smallvec::{smallvec, SmallVec};

use crate::scenario::{
    AppSpec, BtioSubtype, DataOp, FileMode, MdStep, MetadataConfig, Pattern, WorkloadKind,
};

/// What one data step of one process accesses: a file of the application
/// (an index into its files) and the file extents, ascending.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub file: u32,
    /// Inline when there is one (most workloads): one heap allocation per
    /// call saved in the simulator's hottest path.
    pub extents: SmallVec<[Extent; 1]>,
}

/// What a metadata operation names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaTarget {
    /// A file of the application (an index into its files).
    File(u32),
    /// The process's own directory (md-test's unique test directory).
    Dir,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Data {
        op: DataOp,
        access: Access,
    },
    Meta {
        op: MetaOp,
        target: MetaTarget,
    },
    /// close(2) of a file opened for writing through Concerto's mount
    /// (docs/filesystem.md): when it `written` something, an fsync to each
    /// data server those extents touch and the namespace's sync at the
    /// file's metadata server, which the process waits for; then the
    /// release's notice there, which it does not (both setattr-class).
    Close {
        file: u32,
        written: SmallVec<[Extent; 1]>,
    },
}

/// The largest request of a "phases" workload when `request_size` is not given.
pub const DEFAULT_PHASE_REQUEST: u64 = 4 << 20;

/// md-test's phases, one call each, in order, unless `md_steps` chooses.
pub const MDTEST_PHASES: [MdStep; 8] = [
    MdStep::Mktestdir,
    MdStep::Create,
    MdStep::Write,
    MdStep::Readdir,
    MdStep::Read,
    MdStep::Close,
    MdStep::Rm,
    MdStep::Rmtestdir,
];

/// Number of files an application instance uses.
pub fn files_per_instance(app: &AppSpec) -> u32 {
    match (app.workload, app.file.unwrap_or_default()) {
        (WorkloadKind::Ior | WorkloadKind::PioBench, FileMode::PerProcess) => app.processes,
        (WorkloadKind::Wrf, _) => app.processes,
        (WorkloadKind::Trace, _) => app.trace_data.as_ref().map_or(1, |t| t.file_count().max(1)),
        // Validation bounds processes x items.
        (WorkloadKind::MdTest, _) => app.processes.saturating_mul(app.items.unwrap_or(1)),
        _ => 1,
    }
}

/// Appends to `out` the steps of call `call` of process `rank`, in order,
/// as the client `metadata` describes sends them: with
/// `getattr_before_read`, every data read is preceded by a getattr of its
/// file (the PVFS2 client protocol); with `posix_mount`, md-test's
/// requests are the FUSE mount's ([`md_test_steps`]).
pub fn call_steps(
    app: &AppSpec,
    rank: u32,
    call: u32,
    metadata: &MetadataConfig,
    out: &mut Vec<Step>,
) {
    let (getattr_before_read, posix_mount) = (metadata.getattr_before_read, metadata.posix_mount);
    let data = |op: DataOp, access: Access, out: &mut Vec<Step>| {
        if getattr_before_read && op == DataOp::Read {
            out.push(Step::Meta {
                op: MetaOp::Getattr,
                target: MetaTarget::File(access.file),
            });
        }
        out.push(Step::Data { op, access });
    };
    match app.workload {
        WorkloadKind::Ior if app.block_size.is_some() => ior_operation(app, rank, call, out, data),
        WorkloadKind::Trace => {
            let traced = app
                .trace_data
                .as_ref()
                .and_then(|t| t.ranks.get(rank as usize)?.get(call as usize));
            if let Some(q) = traced {
                let access = Access {
                    file: q.file,
                    extents: smallvec![Extent::new(q.offset, q.length)],
                };
                data(q.op, access, out);
            }
        }
        WorkloadKind::Ior
        | WorkloadKind::PioBench
        | WorkloadKind::MpiTileIo
        | WorkloadKind::Noncontig => data(app.op, access(app, rank, call), out),
        // The model runs a collective call from its plan (model/collective.rs).
        WorkloadKind::Collective => {}
        WorkloadKind::Btio => btio_steps(app, rank, call, out, data),
        WorkloadKind::Wrf => {
            for _ in 0..app.getattrs.unwrap_or(0) {
                out.push(Step::Meta {
                    op: MetaOp::Getattr,
                    target: MetaTarget::File(rank),
                });
            }
            let size = app.request_size.map_or(0, |b| b.0);
            let access = Access {
                file: rank,
                extents: smallvec![Extent::new(call as u64 * size, size)],
            };
            data(app.op, access, out);
        }
        WorkloadKind::Phases => phase_steps(app, rank, call, out, data),
        WorkloadKind::MdTest => md_test_steps(app, rank, call, posix_mount, out, data),
    }
}

/// BTIO's call `call` of process `rank`: output steps write the solution;
/// verification steps read it back in the same places.
fn btio_steps(
    app: &AppSpec,
    rank: u32,
    call: u32,
    out: &mut Vec<Step>,
    data: impl Fn(DataOp, Access, &mut Vec<Step>),
) {
    let (r, procs) = (rank as u64, app.processes as u64);
    let steps = app.requests as u64;
    let (op, k) = if (call as u64) < steps {
        (DataOp::Write, call as u64)
    } else {
        (DataOp::Read, call as u64 - steps)
    };
    let n = app.elements.unwrap_or(1) as u64;
    let esz = app.element_size.map_or(1, |b| b.0);
    let at = |offset: u64, len: u64| Access {
        file: 0,
        extents: smallvec![Extent::new(offset, len)],
    };
    match app.subtype.unwrap_or_default() {
        // Collective buffering hands each process one aggregated, contiguous piece.
        BtioSubtype::Full => data(op, at((k * procs + r) * n * esz, n * esz), out),
        // Each cell is its own tiny I/O, one outstanding, interleaved across processes.
        BtioSubtype::Simple => {
            for i in 0..n {
                data(op, at(((k * n + i) * procs + r) * esz, esz), out);
            }
        }
    }
}

/// Phase `call` of process `rank` of a `phases` application: the phase's
/// bytes in equal shares (the first ones a byte more), each process's
/// share contiguous, in requests of at most `request_size`.
fn phase_steps(
    app: &AppSpec,
    rank: u32,
    call: u32,
    out: &mut Vec<Step>,
    data: impl Fn(DataOp, Access, &mut Vec<Step>),
) {
    let (r, procs) = (rank as u64, app.processes as u64);
    let total =
        crate::scenario::phase_bytes(app.phases.as_ref().map_or(0.0, |p| p[call as usize][1]));
    let (share, extra) = (total / procs, total % procs);
    let mine = share + u64::from(r < extra);
    let mut offset = r * share + r.min(extra);
    let chunk = app.request_size.map_or(DEFAULT_PHASE_REQUEST, |b| b.0);
    let end = offset + mine;
    while offset < end {
        let len = chunk.min(end - offset);
        let access = Access {
            file: 0,
            extents: smallvec![Extent::new(offset, len)],
        };
        data(app.op, access, out);
        offset += len;
    }
}

/// md-test's phase `call` of process `rank`: its items' requests. With
/// `posix_mount`, as Concerto's FUSE mount sends them from a client that
/// has not seen the names (`concerto twin` forgets them before each
/// phase): every operation on a name comes after the kernel's lookup of
/// it (which misses for a create or mkdir, and is all a stat asks), and a
/// file is opened (one request more) before it is read; a file written
/// is closed as the mount closes it ([`Step::Close`]), one created empty
/// with the release's notice.
fn md_test_steps(
    app: &AppSpec,
    rank: u32,
    call: u32,
    posix_mount: bool,
    out: &mut Vec<Step>,
    data: impl Fn(DataOp, Access, &mut Vec<Step>),
) {
    let p = MdProcess {
        rank,
        items: app.items.unwrap_or(1),
        size: app.request_size.map_or(0, |b| b.0),
        posix_mount,
    };
    // mdtest writes a file in the loop that creates it (its "File
    // creation"): the file is closed after the write, not the create.
    let steps = app.md_steps();
    let at = |k: Option<usize>| k.and_then(|k| steps.get(k)).copied();
    let written_next = at(Some(call as usize + 1)) == Some(MdStep::Write) && p.size > 0;
    let after_create = at((call as usize).checked_sub(1)) == Some(MdStep::Create);
    let meta = |op: MetaOp, target: MetaTarget| Step::Meta { op, target };
    match steps.get(call as usize).copied() {
        Some(MdStep::Mktestdir) => {
            p.lookup(MetaTarget::Dir, out);
            out.push(meta(MetaOp::Mkdir, MetaTarget::Dir));
        }
        Some(MdStep::Create) => {
            for file in p.file_indices() {
                let f = MetaTarget::File(file);
                p.lookup(f, out);
                out.push(meta(MetaOp::Create, f));
                if posix_mount && !written_next {
                    out.push(Step::Close {
                        file,
                        written: SmallVec::new(),
                    });
                }
            }
        }
        // Through the mount, the lookup is the stat.
        Some(MdStep::Stat) => out.extend(p.files().map(|f| meta(MetaOp::Getattr, f))),
        Some(MdStep::Write) if p.size > 0 => p.write(after_create, out, data),
        Some(MdStep::Readdir) => out.push(meta(MetaOp::Readdir, MetaTarget::Dir)),
        Some(MdStep::Read) if p.size > 0 => p.read(out, data),
        Some(MdStep::Read) => out.extend(p.files().map(|f| meta(MetaOp::Getattr, f))),
        // PVFS2 has no close request: the phase only synchronizes.
        Some(MdStep::Close) => {}
        Some(MdStep::Rm) => {
            for f in p.files() {
                p.lookup(f, out);
                out.push(meta(MetaOp::Remove, f));
            }
        }
        Some(MdStep::Rmtestdir) => {
            p.lookup(MetaTarget::Dir, out);
            out.push(meta(MetaOp::Rmdir, MetaTarget::Dir));
        }
        Some(MdStep::Write) | None => {}
    }
}

/// One md-test process: its items (files `rank * items ..`), the bytes it
/// writes and reads of each, and whether it works through the mount.
struct MdProcess {
    rank: u32,
    items: u32,
    size: u64,
    posix_mount: bool,
}

impl MdProcess {
    /// Its items' files, as metadata targets.
    fn files(&self) -> impl Iterator<Item = MetaTarget> {
        self.file_indices().map(MetaTarget::File)
    }

    fn file_indices(&self) -> std::ops::Range<u32> {
        let first = self.rank * self.items;
        first..first + self.items
    }

    /// The kernel's lookup of a name, or the open of a file: one
    /// getattr-class request (through the mount only).
    fn lookup(&self, target: MetaTarget, out: &mut Vec<Step>) {
        if self.posix_mount {
            out.push(Step::Meta {
                op: MetaOp::Getattr,
                target,
            });
        }
    }

    /// Each item's whole content from the start; through the mount opened
    /// first unless the create just did, and closed after.
    fn write(
        &self,
        after_create: bool,
        out: &mut Vec<Step>,
        data: impl Fn(DataOp, Access, &mut Vec<Step>),
    ) {
        for file in self.file_indices() {
            let f = MetaTarget::File(file);
            let written = Access {
                file,
                extents: smallvec![Extent::new(0, self.size)],
            };
            if self.posix_mount && !after_create {
                // open(O_WRONLY) of a name not seen: the lookup, then the open.
                self.lookup(f, out);
                self.lookup(f, out);
            }
            if self.posix_mount {
                data(DataOp::Write, written.clone(), out);
                out.push(Step::Close {
                    file,
                    written: written.extents,
                });
            } else {
                data(DataOp::Write, written, out);
            }
        }
    }

    /// Each item's whole content, after its lookup and open.
    fn read(&self, out: &mut Vec<Step>, data: impl Fn(DataOp, Access, &mut Vec<Step>)) {
        for file in self.file_indices() {
            let f = MetaTarget::File(file);
            self.lookup(f, out);
            self.lookup(f, out);
            let access = Access {
                file,
                extents: smallvec![Extent::new(0, self.size)],
            };
            data(DataOp::Read, access, out);
        }
    }
}

/// IOR's layout (`block_size`): call `call` is the application's
/// `call`-th operation; process `rank` moves each of its `segments`
/// blocks in transfers of `request_size`, in order, one at a time.
fn ior_operation(
    app: &AppSpec,
    rank: u32,
    call: u32,
    out: &mut Vec<Step>,
    data: impl Fn(DataOp, Access, &mut Vec<Step>),
) {
    let Some(&op) = app.ior_operations().get(call as usize) else {
        return;
    };
    let block = app.block_size.map_or(0, |b| b.0);
    let transfer = app.request_size.map_or(block, |b| b.0).max(1);
    let (r, procs) = (rank as u64, app.processes as u64);
    let per_process = app.file.unwrap_or_default() == FileMode::PerProcess;
    for s in 0..app.segments.unwrap_or(1) as u64 {
        let (file, start) = if per_process {
            (rank, s * block)
        } else {
            (0, (s * procs + r) * block)
        };
        for j in 0..block / transfer {
            let access = Access {
                file,
                extents: smallvec![Extent::new(start + j * transfer, transfer)],
            };
            data(op, access, out);
        }
    }
}

/// The access of process `rank` (of `app.processes`) in call `call`, for
/// the workloads whose call is a single data access.
pub fn access(app: &AppSpec, rank: u32, call: u32) -> Access {
    let procs = app.processes as u64;
    let (r, k) = (rank as u64, call as u64);
    match app.workload {
        WorkloadKind::MpiTileIo => {
            // The same tiles the collective planners read (core's patterns).
            let extents = tile_extents(
                app.grid.unwrap_or([1, 1]).map(u64::from),
                app.tile.unwrap_or([1, 1]).map(u64::from),
                app.planes.unwrap_or(1) as u64,
                app.element_size.map_or(1, |b| b.0),
                r,
                k,
            );
            Access {
                file: 0,
                extents: extents.into(),
            }
        }
        WorkloadKind::Noncontig => {
            // The noncontig benchmark's vector type: element i of process r
            // sits at (i · processes + r) · element_size; call k continues
            // with the next `elements` elements.
            let n = app.elements.unwrap_or(1) as u64;
            let esz = app.element_size.map_or(1, |b| b.0);
            let extents = (0..n)
                .map(|i| Extent::new(((k * n + i) * procs + r) * esz, esz))
                .collect();
            Access { file: 0, extents }
        }
        _ => {
            // IOR and PIO-bench.
            let size = app.request_size.map_or(0, |b| b.0);
            let calls = app.requests as u64;
            match app.file.unwrap_or_default() {
                FileMode::PerProcess => Access {
                    file: rank,
                    extents: smallvec![Extent::new(k * size, size)],
                },
                FileMode::Shared => {
                    let offset = match app.pattern.unwrap_or_default() {
                        Pattern::Contiguous => (r * calls + k) * size,
                        Pattern::Strided => (k * procs + r) * size,
                    };
                    Access {
                        file: 0,
                        extents: smallvec![Extent::new(offset, size)],
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn app(extra: &str) -> AppSpec {
        let text = format!(
            "[cluster]\nservers = 4\n[cluster.device]\nkind = \"ssd\"\n[[apps]]\n{extra}\n"
        );
        Scenario::from_toml(&text, &[]).unwrap().apps.remove(0)
    }

    #[test]
    fn ior_patterns() {
        let seg = app("workload = \"ior\"\nprocesses = 4\nrequests = 3\nrequest_size = 100");
        assert_eq!(access(&seg, 1, 2).extents[..], [Extent::new(500, 100)]);
        let strided = app("workload = \"ior\"\nprocesses = 4\nrequests = 3\nrequest_size = 100\npattern = \"strided\"");
        assert_eq!(access(&strided, 1, 2).extents[..], [Extent::new(900, 100)]);
        let fpp =
            app("workload = \"ior\"\nprocesses = 4\nrequest_size = 100\nfile = \"per-process\"");
        let a = access(&fpp, 3, 0);
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
        assert_eq!(kinds(0, &mount), ["Getattr", "Mkdir"]);
        // Created empty: closed with nothing written after each create.
        assert_eq!(
            kinds(1, &mount),
            [
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
            ["Getattr", "Getattr", "Read 2", "Getattr", "Getattr", "Read 3"]
        );
        assert_eq!(kinds(3, &mount), ["Getattr", "Getattr"]);
        assert_eq!(kinds(4, &mount), ["Getattr", "Remove", "Getattr", "Remove"]);
        assert_eq!(kinds(5, &mount), ["Getattr", "Rmdir"]);
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
        let created_then_written = r#"["create", "write"]"#;
        assert_eq!(
            steps_of(created_then_written, 0, true),
            [lookup.clone(), create]
        );
        assert_eq!(
            steps_of(created_then_written, 1, true),
            [write.clone(), close.clone()]
        );
        assert_eq!(
            steps_of(r#"["stat", "write"]"#, 1, true),
            [lookup.clone(), lookup, write.clone(), close]
        );
        assert_eq!(steps_of(created_then_written, 1, false), [write]);
    }

    #[test]
    fn tiles_cover_the_dataset_exactly_once() {
        let t = app("workload = \"mpi-tile-io\"\nprocesses = 6\ngrid = [3, 2]\ntile = [4, 5]\nelement_size = 8\nrequests = 2");
        for call in 0..2 {
            let mut all: Vec<Extent> = (0..6).flat_map(|r| access(&t, r, call).extents).collect();
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
        let e = access(&t, 4, 0).extents;
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
        let mut all: Vec<Extent> = (0..9).flat_map(|r| access(&t, r, 0).extents).collect();
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
            access(&n, 1, 0).extents[..],
            [Extent::new(8, 8), Extent::new(40, 8), Extent::new(72, 8)]
        );
        assert_eq!(access(&n, 0, 1).extents[0], Extent::new(96, 8));
    }
}
