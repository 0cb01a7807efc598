//! IOR and PIO-bench: one transfer of `request_size` per call, each
//! process's region contiguous (IOR segmented, PIO-bench "sequential") or
//! strided, in a shared file or a file per process; IOR with `block_size`
//! follows IOR's own layout (segments of blocks, one operation per call).

use serde::Serialize;

use concerto_core::{Extent, MetaOp};
use smallvec::SmallVec;

use super::{required, Access, KindReport, MetaTarget, Steps, Workload};
use crate::scenario::{
    positive, AppSpec, ConfigError, DataOp, FileMode, Pattern, MAX_IOR_TRANSFERS,
};

pub struct Ior;
pub struct PioBench;

impl Workload for Ior {
    fn keys(&self) -> &'static [&'static str] {
        &["request_size", "pattern", "file", "block_size"]
    }

    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        check_transfers(at, app)?;
        match app.block_size {
            Some(_) => check_layout(at, app),
            None => Ok(()),
        }
    }

    fn calls(&self, app: &AppSpec) -> u32 {
        match app.block_size {
            Some(_) => app.ior_operations().len() as u32,
            None => app.requests,
        }
    }

    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        match app.block_size {
            Some(block) => block.0 * app.segments.unwrap_or(1) as u64,
            None => app.request_size.map_or(0, |b| b.0),
        }
    }

    fn files_per_instance(&self, app: &AppSpec) -> u32 {
        files(app)
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        match app.block_size {
            Some(_) => ior_operation(app, rank, call, steps),
            None => steps.data(app.op, access(app, rank, call)),
        }
    }

    /// IOR's layout (`block_size`): each operation as IOR reports it.
    fn report(&self, app: &AppSpec, completions: &[f64]) -> Option<KindReport> {
        app.block_size?;
        let moved = self.bytes_per_call(app) * app.processes as u64;
        Some(KindReport::Ior(
            app.ior_operations()
                .iter()
                .zip(completions)
                .map(|(op, &s)| IorOperation::new(*op == DataOp::Read, moved, s))
                .collect(),
        ))
    }
}

impl Workload for PioBench {
    fn keys(&self) -> &'static [&'static str] {
        &["request_size", "pattern", "file"]
    }

    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        check_transfers(at, app)
    }

    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        app.request_size.map_or(0, |b| b.0)
    }

    fn files_per_instance(&self, app: &AppSpec) -> u32 {
        files(app)
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        steps.data(app.op, access(app, rank, call));
    }
}

/// A file per process, or one shared.
fn files(app: &AppSpec) -> u32 {
    match app.file.unwrap_or_default() {
        FileMode::PerProcess => app.processes,
        FileMode::Shared => 1,
    }
}

/// A transfer size.
fn check_transfers(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    required(at, app, "request_size", app.request_size.is_some())?;
    positive(
        &format!("{at}.request_size"),
        app.request_size.map_or(0, |b| b.0),
    )
}

/// IOR's layout (`block_size`): whole transfers per block, a barrier
/// between operations, the calls its operations.
fn check_layout(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let transfer = app.request_size.map_or(0, |b| b.0);
    let block = app.block_size.map_or(0, |b| b.0);
    positive(&key("block_size"), block)?;
    if block % transfer != 0 {
        return Err(ConfigError::at(
            key("block_size"),
            format!("{block} bytes is not a whole number of transfers (request_size = {transfer})"),
        ));
    }
    if !app.barrier {
        return Err(ConfigError::at(
            key("barrier"),
            "IOR's layout has a barrier between its operations",
        ));
    }
    if app.pattern.is_some() || app.requests != 1 {
        return Err(ConfigError::at(
            key(if app.pattern.is_some() {
                "pattern"
            } else {
                "requests"
            }),
            "block_size gives IOR's layout: the calls are its operations",
        ));
    }
    positive(&key("segments"), app.segments.unwrap_or(1) as u64)?;
    if app.operations.as_ref().is_some_and(Vec::is_empty) {
        return Err(ConfigError::at(
            key("operations"),
            "needs at least one operation",
        ));
    }
    let transfers = block / transfer * app.segments.unwrap_or(1) as u64;
    if transfers > MAX_IOR_TRANSFERS {
        return Err(ConfigError::at(
            key("block_size"),
            format!("{transfers} transfers per process and operation is over {MAX_IOR_TRANSFERS}"),
        ));
    }
    Ok(())
}

/// IOR's layout (`block_size`): call `call` is the application's
/// `call`-th operation; process `rank` moves each of its `segments`
/// blocks in transfers of `request_size`, in order, one at a time.
///
/// With `posix_mount`, the operation also opens and closes its file as
/// IOR does through Concerto's mount, and IOR's time counts them: the
/// kernel's lookup of a name it has not seen (the page cache is dropped
/// before a read, the file is new to a write), then the create (a write's
/// `O_CREAT`) or the open; at the end a written file's fsync and close
/// (`Step::Close`: a sync at each data server written and the namespace's
/// sync, waited for, then the release's notice), a read file's release.
fn ior_operation(app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
    let Some(&op) = app.ior_operations().get(call as usize) else {
        return;
    };
    let block = app.block_size.map_or(0, |b| b.0);
    let transfer = app.request_size.map_or(block, |b| b.0).max(1);
    let (r, procs) = (rank as u64, app.processes as u64);
    let per_process = app.file.unwrap_or_default() == FileMode::PerProcess;
    let file = if per_process { rank } else { 0 };
    let target = MetaTarget::File(file);
    if steps.posix_mount {
        steps.meta(MetaOp::Getattr, target);
        let open = match op {
            DataOp::Write => MetaOp::Create,
            DataOp::Read => MetaOp::Getattr,
        };
        steps.meta(open, target);
    }
    let mut written: SmallVec<[Extent; 1]> = SmallVec::new();
    for s in 0..app.segments.unwrap_or(1) as u64 {
        let start = if per_process {
            s * block
        } else {
            (s * procs + r) * block
        };
        for j in 0..block / transfer {
            steps.data(op, Access::one(file, start + j * transfer, transfer));
        }
        if op == DataOp::Write {
            match written.last_mut() {
                Some(e) if e.offset + e.len == start => e.len += block,
                _ => written.push(Extent::new(start, block)),
            }
        }
    }
    if steps.posix_mount {
        steps.close(file, written);
    }
}

/// The one transfer of process `rank` (of `app.processes`) in call `call`.
pub(super) fn access(app: &AppSpec, rank: u32, call: u32) -> Access {
    let (r, k, procs) = (rank as u64, call as u64, app.processes as u64);
    let size = app.request_size.map_or(0, |b| b.0);
    let calls = app.requests as u64;
    match app.file.unwrap_or_default() {
        FileMode::PerProcess => Access::one(rank, k * size, size),
        FileMode::Shared => {
            let offset = match app.pattern.unwrap_or_default() {
                Pattern::Contiguous => (r * calls + k) * size,
                Pattern::Strided => (k * procs + r) * size,
            };
            Access::one(0, offset, size)
        }
    }
}

/// One IOR operation: what every process moved, and how long it took from
/// its start to its last reply (IOR's bandwidth is the same quotient).
#[derive(Clone, Debug, Serialize)]
pub struct IorOperation {
    pub access: &'static str,
    pub bytes: u64,
    pub seconds: f64,
    #[serde(rename = "bandwidth_MiBps")]
    pub bandwidth_mibps: f64,
}

impl IorOperation {
    pub fn new(read: bool, bytes: u64, seconds: f64) -> IorOperation {
        IorOperation {
            access: if read { "read" } else { "write" },
            bytes,
            seconds,
            bandwidth_mibps: if seconds > 0.0 {
                bytes as f64 / seconds / (1u64 << 20) as f64
            } else {
                0.0
            },
        }
    }
}
