//! Workload kinds: what an `[[apps]]` table's `workload` names. Each kind
//! is one file here behind the [`Workload`] trait — the keys it takes
//! beyond those every application has, the checks of their values, how
//! many calls a process makes and what each moves, the files an instance
//! uses, and the steps of each call — and one line in
//! [`workload_kinds!`]'s list below. A call is a sequence of steps; each
//! step is issued when the previous one's replies are all in (one data
//! access split over the servers, or one metadata operation).

use concerto_core::client::collective::Planner;
use concerto_core::{Extent, MetaOp};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::scenario::{AppSpec, ConfigError, DataOp, MetadataConfig};

mod btio;
mod collective;
mod ior;
mod mdtest;
mod noncontig;
mod phases;
#[cfg(test)]
mod tests;
mod tile;
mod trace;
mod wrf;

pub use ior::IorOperation;
pub use mdtest::{MdPhase, MDTEST_PHASES};
pub use phases::DEFAULT_PHASE_REQUEST;

/// What one kind of workload is. Every method but [`Workload::keys`],
/// [`Workload::check`] and [`Workload::steps`] has the common answer as
/// its default.
pub trait Workload: Sync {
    /// The keys of `[[apps]]` this kind takes beyond those every
    /// application has (`processes`, `requests`, `op`, `barrier`, ...); a
    /// key another kind takes is refused here, naming the kind.
    fn keys(&self) -> &'static [&'static str];

    /// The checks of this kind's keys; `at` is the table's path
    /// (`apps[2]`), for the errors' key.
    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError>;

    /// Calls each process makes.
    fn calls(&self, app: &AppSpec) -> u32 {
        app.requests
    }

    /// Bytes one process moves per call (the largest, where calls differ).
    fn bytes_per_call(&self, app: &AppSpec) -> u64;

    /// The bytes all of one instance's processes move in call `call`.
    fn bytes_of_call(&self, app: &AppSpec, _call: u32) -> u64 {
        self.bytes_per_call(app) * app.processes as u64
    }

    /// Files one instance uses.
    fn files_per_instance(&self, _app: &AppSpec) -> u32 {
        1
    }

    /// The steps of call `call` of process `rank`, in order, into `steps`.
    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps);

    /// Where file `file` of an instance comes in the order its processes
    /// create their files (a metadata server that places files by inode
    /// places them in that order).
    fn creation_order(&self, _app: &AppSpec, file: u32) -> u32 {
        file
    }

    /// The planner each call is run from, for a kind whose calls are
    /// planned collectively rather than built from steps.
    fn planner(&self, _app: &AppSpec) -> Option<Box<dyn Planner + Send + Sync>> {
        None
    }

    /// Whether each process names its files in a directory of its own
    /// (md-test's unique directories) rather than all in the
    /// application's: through the mount, a name added to or removed from
    /// a directory holds that directory's lock in the kernel.
    fn files_in_process_directory(&self) -> bool {
        false
    }

    /// The kind's own rows in an application's result, as its program
    /// reports them (IOR's operations, mdtest's phases), from the calls'
    /// completion times; none by default.
    fn report(&self, _app: &AppSpec, _completions: &[f64]) -> Option<KindReport> {
        None
    }
}

/// A workload kind's own rows in an application's result.
pub enum KindReport {
    Ior(Vec<IorOperation>),
    MdTest(Vec<MdPhase>),
}

/// The registry: each kind's variant of [`WorkloadKind`], the name a
/// scenario gives it, and its [`Workload`].
macro_rules! workload_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $workload:expr,)*) => {
        /// The kinds of workload an application can be.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum WorkloadKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl WorkloadKind {
            /// The name a scenario's `workload` key gives the kind.
            pub fn name(self) -> &'static str {
                match self {
                    $(WorkloadKind::$variant => $name,)*
                }
            }

            /// What the kind does.
            pub fn workload(self) -> &'static dyn Workload {
                match self {
                    $(WorkloadKind::$variant => &$workload,)*
                }
            }
        }
    };
}

workload_kinds! {
    /// IOR: `request_size` per call, contiguous (segmented) or strided;
    /// with `block_size`, IOR's own layout.
    Ior = "ior" => ior::Ior,
    /// PIO-bench sequential / simple-strided access (the same shapes as IOR).
    PioBench = "pio-bench" => ior::PioBench,
    /// MPI-TILE-IO: each process reads or writes one tile of a 2-D dataset.
    MpiTileIo = "mpi-tile-io" => tile::MpiTileIo,
    /// noncontig: a vector of small elements interleaved across processes.
    Noncontig = "noncontig" => noncontig::Noncontig,
    /// NPB BTIO: `requests` output steps writing the solution, then as many
    /// verification steps reading it back; each step moves `elements` cells
    /// of `element_size` per process, as tiny I/Os one at a time (subtype
    /// "simple") or aggregated by collective buffering into one I/O ("full").
    Btio = "btio" => btio::Btio,
    /// WRF-like: each call is `getattrs` getattr requests then one small
    /// I/O of `request_size` to the process's own (checkpoint) file.
    Wrf = "wrf" => wrf::Wrf,
    /// md-test: phases mktestdir, create, write, readdir, read, close, rm,
    /// rmtestdir over `items` files per process in a directory per process;
    /// each phase is one call (a barrier between phases when `barrier`).
    MdTest = "md-test" => mdtest::MdTest,
    /// Explicit phases (a job-level workload): `phases` lists `[compute
    /// seconds, bytes]`; each call computes, then the processes write the
    /// bytes (an equal share each, contiguous, in requests of at most
    /// `request_size`, default 4 MiB) over the same region of one file.
    Phases = "phases" => phases::Phases,
    /// Collective I/O (resonant-io.txt): each call, every process asks for
    /// what the `access` pattern gives it, and the `collective` planner
    /// decides who sends which requests, in which order, and what the
    /// processes exchange over the network.
    Collective = "collective" => collective::Collective,
    /// An explicit request trace (`trace`, docs/workloads.md): each rank
    /// replays its own requests, one at a time, with no barriers.
    Trace = "trace" => trace::Trace,
}

/// What one data step of one process accesses: a file of the application
/// (an index into its files) and the file extents, ascending.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub file: u32,
    /// Inline when there is one (most workloads): one heap allocation per
    /// call saved in the simulator's hottest path.
    pub extents: SmallVec<[Extent; 1]>,
}

impl Access {
    /// One extent of one file.
    pub fn one(file: u32, offset: u64, len: u64) -> Access {
        Access {
            file,
            extents: smallvec::smallvec![Extent::new(offset, len)],
        }
    }
}

/// What a metadata operation names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaTarget {
    /// A file of the application (an index into its files).
    File(u32),
    /// The process's own directory (md-test's unique test directory).
    Dir,
    /// The directory the process's own directory is in (md-test's test
    /// directory, shared by the application's processes).
    Parent,
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

/// Where a call's steps go, as the client the cluster's `[metadata]`
/// describes sends them.
pub struct Steps<'a> {
    out: &'a mut Vec<Step>,
    /// Every data read is preceded by a getattr of its file (the PVFS2
    /// client protocol).
    getattr_before_read: bool,
    /// The requests are those of Concerto's FUSE mount (md-test's lookups,
    /// opens and closes).
    pub posix_mount: bool,
}

impl Steps<'_> {
    /// A data access (after its getattr, where the client sends one).
    pub fn data(&mut self, op: DataOp, access: Access) {
        if self.getattr_before_read && op == DataOp::Read {
            self.meta(MetaOp::Getattr, MetaTarget::File(access.file));
        }
        self.out.push(Step::Data { op, access });
    }

    pub fn meta(&mut self, op: MetaOp, target: MetaTarget) {
        self.out.push(Step::Meta { op, target });
    }

    pub fn close(&mut self, file: u32, written: SmallVec<[Extent; 1]>) {
        self.out.push(Step::Close { file, written });
    }
}

/// Appends to `out` the steps of call `call` of process `rank`, in order,
/// as the client `metadata` describes sends them.
pub fn call_steps(
    app: &AppSpec,
    rank: u32,
    call: u32,
    metadata: &MetadataConfig,
    out: &mut Vec<Step>,
) {
    let mut steps = Steps {
        out,
        getattr_before_read: metadata.getattr_before_read,
        posix_mount: metadata.posix_mount,
    };
    app.workload.workload().steps(app, rank, call, &mut steps);
}

/// Number of files an application instance uses.
pub fn files_per_instance(app: &AppSpec) -> u32 {
    app.workload.workload().files_per_instance(app)
}

/// A check that `field`, which the kind needs, is set.
fn required(at: &str, app: &AppSpec, field: &str, present: bool) -> Result<(), ConfigError> {
    if present {
        return Ok(());
    }
    Err(ConfigError::at(
        format!("{at}.{field}"),
        format!("required for workload \"{}\"", app.workload_name()),
    ))
}
