//! md-test: phases mktestdir, create, write, readdir, read, close, rm,
//! rmtestdir over `items` files per process in a directory per process;
//! each phase is one call (a barrier between phases when `barrier`). With
//! the cluster's `posix_mount`, its requests are those of Concerto's FUSE
//! mount.

use concerto_core::MetaOp;
use smallvec::SmallVec;

use serde::Serialize;

use super::{required, Access, KindReport, MetaTarget, Steps, Workload};
use crate::scenario::{positive, AppSpec, ConfigError, DataOp, MdStep, MAX_FILES};

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

pub struct MdTest;

impl Workload for MdTest {
    fn keys(&self) -> &'static [&'static str] {
        &["request_size", "items", "md_steps"]
    }

    /// Files per process, and a size for its write and read phases.
    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        if app.md_steps.as_ref().is_some_and(Vec::is_empty) {
            return Err(ConfigError::at(key("md_steps"), "needs at least one phase"));
        }
        required(at, app, "items", app.items.is_some())?;
        positive(&key("items"), app.items.unwrap_or(0) as u64)?;
        if app.items.unwrap_or(0) as u64 * app.processes as u64 > MAX_FILES {
            return Err(ConfigError::at(
                key("items"),
                format!("processes x items is over {MAX_FILES} files"),
            ));
        }
        if let Some(size) = app.request_size {
            positive(&key("request_size"), size.0)?;
        }
        if app.requests != 1 {
            return Err(ConfigError::at(
                key("requests"),
                "does not apply to workload \"md-test\" (its calls are its eight phases; set items)",
            ));
        }
        Ok(())
    }

    /// mdtest's unique directories (`-u`), one per process.
    fn files_in_process_directory(&self) -> bool {
        true
    }

    /// With a barrier between phases, each phase as mdtest reports it.
    fn report(&self, app: &AppSpec, completions: &[f64]) -> Option<KindReport> {
        app.barrier
            .then(|| KindReport::MdTest(mdtest_phases(app, completions)))
    }

    /// One per phase.
    fn calls(&self, app: &AppSpec) -> u32 {
        app.md_steps().len() as u32
    }

    /// In its write phase.
    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        app.request_size.map_or(0, |b| b.0) * app.items.unwrap_or(0) as u64
    }

    /// `items` per process (validation bounds processes x items).
    fn files_per_instance(&self, app: &AppSpec) -> u32 {
        app.processes.saturating_mul(app.items.unwrap_or(1))
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        md_test_steps(app, rank, call, steps)
    }

    /// The processes create theirs in turns: file i of process r is about
    /// the (i * processes + r)-th made.
    fn creation_order(&self, app: &AppSpec, file: u32) -> u32 {
        let items = app.items.unwrap_or(1);
        (file % items) * app.processes + file / items
    }
}

/// md-test's phase `call` of process `rank`: its items' requests. With
/// `posix_mount`, as Concerto's FUSE mount sends them from a client that
/// has not seen the names (`concerto twin` forgets them before each
/// phase): every operation on a name comes after the kernel's lookup of
/// it (which misses for a create or mkdir, and is all a stat asks), and a
/// file is opened (one request more) before it is read; a file written
/// is closed as the mount closes it ([`super::Step::Close`]), one created
/// empty with the release's notice. A phase that names anything begins
/// with the lookup of the directory its names are in (the process's own,
/// or for the directory phases the shared one), forgotten with the rest:
/// one request more per process and phase, which a kernel FUSE trace of
/// the real Tree phases shows (about 1 ms of their few).
fn md_test_steps(app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
    let posix_mount = steps.posix_mount;
    let p = MdProcess {
        rank,
        items: app.items.unwrap_or(1),
        size: app.request_size.map_or(0, |b| b.0),
        posix_mount,
    };
    // mdtest writes a file in the loop that creates it (its "File
    // creation"): the file is closed after the write, not the create.
    let phases = app.md_steps();
    let at = |k: Option<usize>| k.and_then(|k| phases.get(k)).copied();
    let written_next = at(Some(call as usize + 1)) == Some(MdStep::Write) && p.size > 0;
    let after_create = at((call as usize).checked_sub(1)) == Some(MdStep::Create);
    let phase = phases.get(call as usize).copied();
    let names_anything = match phase {
        Some(MdStep::Close) | None => false,
        // mdtest writes in its create loop: the names are still known.
        Some(MdStep::Write) => p.size > 0 && !after_create,
        Some(_) => true,
    };
    if names_anything {
        let directory = match phase {
            Some(MdStep::Mktestdir | MdStep::Rmtestdir) => MetaTarget::Parent,
            _ => MetaTarget::Dir,
        };
        p.lookup(directory, steps);
    }
    match phase {
        Some(MdStep::Mktestdir) => {
            p.lookup(MetaTarget::Dir, steps);
            steps.meta(MetaOp::Mkdir, MetaTarget::Dir);
        }
        Some(MdStep::Create) => {
            for file in p.file_indices() {
                let f = MetaTarget::File(file);
                p.lookup(f, steps);
                steps.meta(MetaOp::Create, f);
                if posix_mount && !written_next {
                    steps.close(file, SmallVec::new());
                }
            }
        }
        // Through the mount, the lookup is the stat.
        Some(MdStep::Stat) => p.files().for_each(|f| steps.meta(MetaOp::Getattr, f)),
        Some(MdStep::Write) if p.size > 0 => p.write(after_create, steps),
        Some(MdStep::Readdir) => steps.meta(MetaOp::Readdir, MetaTarget::Dir),
        Some(MdStep::Read) if p.size > 0 => p.read(steps),
        Some(MdStep::Read) => p.files().for_each(|f| steps.meta(MetaOp::Getattr, f)),
        // PVFS2 has no close request: the phase only synchronizes.
        Some(MdStep::Close) => {}
        Some(MdStep::Rm) => {
            for f in p.files() {
                p.lookup(f, steps);
                steps.meta(MetaOp::Remove, f);
            }
        }
        Some(MdStep::Rmtestdir) => {
            p.lookup(MetaTarget::Dir, steps);
            steps.meta(MetaOp::Rmdir, MetaTarget::Dir);
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
    fn lookup(&self, target: MetaTarget, steps: &mut Steps) {
        if self.posix_mount {
            steps.meta(MetaOp::Getattr, target);
        }
    }

    /// Each item's whole content from the start; through the mount opened
    /// first unless the create just did, and closed after.
    fn write(&self, after_create: bool, steps: &mut Steps) {
        for file in self.file_indices() {
            let f = MetaTarget::File(file);
            let written = Access::one(file, 0, self.size);
            if self.posix_mount && !after_create {
                // open(O_WRONLY) of a name not seen: the lookup, then the open.
                self.lookup(f, steps);
                self.lookup(f, steps);
            }
            if self.posix_mount {
                steps.data(DataOp::Write, written.clone());
                steps.close(file, written.extents);
            } else {
                steps.data(DataOp::Write, written);
            }
        }
    }

    /// Each item's whole content, after its lookup and open.
    fn read(&self, steps: &mut Steps) {
        for file in self.file_indices() {
            let f = MetaTarget::File(file);
            self.lookup(f, steps);
            self.lookup(f, steps);
            steps.data(DataOp::Read, Access::one(file, 0, self.size));
        }
    }
}

/// One md-test phase: the items every process handled and how long the
/// phase took from its start to its last reply (mdtest's rate is the same
/// quotient).
#[derive(Clone, Debug, Serialize)]
pub struct MdPhase {
    pub phase: MdStep,
    /// The row of mdtest's summary it counts under ("File creation"), if any.
    pub operation: Option<&'static str>,
    pub items: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
}

/// An mdtest run's phases as mdtest reports them: items and rate.
fn mdtest_phases(spec: &AppSpec, completions: &[f64]) -> Vec<MdPhase> {
    // Directory phases handle one item per process.
    let items = spec.items.unwrap_or(1) as u64 * spec.processes as u64;
    spec.md_steps()
        .iter()
        .zip(completions)
        .map(|(&phase, &seconds)| {
            let items = match phase {
                MdStep::Mktestdir | MdStep::Rmtestdir | MdStep::Readdir => spec.processes as u64,
                _ => items,
            };
            MdPhase {
                phase,
                operation: phase.mdtest_operation(),
                items,
                seconds,
                ops_per_s: if seconds > 0.0 {
                    items as f64 / seconds
                } else {
                    0.0
                },
            }
        })
        .collect()
}
