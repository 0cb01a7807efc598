//! The `[[apps]]` tables: each application's keys, those every
//! application has and those of its workload kind (`crate::workload`), and
//! their validation.

use super::*;
pub use crate::workload::WorkloadKind;

/// How applications get their ids (the coordination paper orders by them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AppIdRule {
    /// Seeded random ids in `[min, max]`, distinct (the paper draws from [0, 32767]).
    Random {
        #[serde(default)]
        min: u32,
        #[serde(default = "default_max_app_id")]
        max: u32,
    },
    /// `start`, `start + 1`, ... in the order applications are listed.
    Sequential {
        #[serde(default)]
        start: u32,
    },
    /// Every `[[apps]]` entry gives `app_id`; instances count up from it.
    Explicit,
}

pub(crate) fn default_max_app_id() -> u32 {
    32767
}

impl Default for AppIdRule {
    fn default() -> AppIdRule {
        AppIdRule::Random {
            min: 0,
            max: default_max_app_id(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataOp {
    #[default]
    Read,
    Write,
}

impl DataOp {
    /// The direction of a collective call that reads or writes.
    pub fn direction(self) -> concerto_core::client::collective::Direction {
        match self {
            DataOp::Read => concerto_core::client::collective::Direction::Read,
            DataOp::Write => concerto_core::client::collective::Direction::Write,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Each process owns a contiguous block and walks it (IOR segmented,
    /// PIO-bench "sequential").
    #[default]
    Contiguous,
    /// Call `k` of process `r` lands at `(k * processes + r) * request_size`
    /// (IOR strided, PIO-bench "simple strided").
    Strided,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BtioSubtype {
    /// Independent I/O: every cell is its own small request.
    #[default]
    Simple,
    /// Collective buffering: a step's cells go out as one request.
    Full,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileMode {
    /// N-to-1: all processes share one file.
    #[default]
    Shared,
    /// N-to-N: a file per process.
    PerProcess,
}

/// One kind of application; `instances` copies of it run concurrently.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "one")]
    pub instances: u32,
    #[serde(default = "one")]
    pub processes: u32,
    pub workload: WorkloadKind,
    #[serde(default)]
    pub op: DataOp,
    /// Operations (I/O calls) per process.
    #[serde(default = "one")]
    pub requests: u32,
    /// Bytes per call (ior, pio-bench).
    #[serde(default)]
    pub request_size: Option<Bytes>,
    #[serde(default)]
    pub pattern: Option<Pattern>,
    #[serde(default)]
    pub file: Option<FileMode>,
    /// Process grid `[px, py]` (mpi-tile-io); `px * py` must equal `processes`.
    #[serde(default)]
    pub grid: Option<[u32; 2]>,
    /// Tile size in elements `[x, y]` (mpi-tile-io).
    #[serde(default)]
    pub tile: Option<[u32; 2]>,
    /// Element size (mpi-tile-io, noncontig).
    #[serde(default)]
    pub element_size: Option<Bytes>,
    /// Elements per call (noncontig; btio simple: I/Os per step).
    #[serde(default)]
    pub elements: Option<u32>,
    /// Getattr requests before each I/O (wrf).
    #[serde(default)]
    pub getattrs: Option<u32>,
    /// Files per process (md-test).
    #[serde(default)]
    pub items: Option<u32>,
    /// BTIO subtype (btio).
    #[serde(default)]
    pub subtype: Option<BtioSubtype>,
    /// A barrier across the application's processes after every call, so
    /// each call is one synchronized operation.
    #[serde(default = "yes")]
    pub barrier: bool,
    /// Time between an operation's completion and the next call.
    #[serde(default)]
    pub compute_time: Time,
    /// How many of an instance's processes share one node and so one
    /// client NIC (processes r, r+1, ... in blocks of this many); default
    /// 1, a NIC per process.
    #[serde(default = "one")]
    pub processes_per_node: u32,
    /// When the application issues its first call.
    #[serde(default)]
    pub start: Time,
    #[serde(default)]
    pub app_id: Option<u32>,
    /// Proportional-share weight carried by every request (SFQ family).
    #[serde(default = "unit_weight")]
    pub weight: f64,
    /// The user (numeric id) the application runs as, which QoS rules can
    /// match; none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
    /// The Unix group (numeric id) the application runs as, which QoS
    /// rules' expressions can match (`gid={...}`); none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// Servers each of this application's files is striped over (default: cluster.stripe_count).
    #[serde(default)]
    pub stripe_count: Option<u32>,
    /// Server holding the first stripe of this application's files (default: cluster.placement).
    #[serde(default)]
    pub first_server: Option<u32>,
    /// Workload "phases": `[compute seconds, bytes]` per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Vec<[f64; 2]>>,
    /// What a job-level arbiter knows of the application: its
    /// characteristic time (what `set10` maps) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_iter: Option<Time>,
    /// ... and the group it belongs to with the group's characteristic
    /// time (what `clairvoyant` maps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_w_iter: Option<Time>,
    /// mpi-tile-io: with `planes`, the dataset is 3-D, `planes` planes of
    /// the 2-D one, and each process holds its tile in every plane (BTIO's
    /// view: strides nested two deep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<u32>,
    /// Clusterfile's client-side ordering: each data access is split into
    /// blocks of at most `schedule_block` bytes of one server's data, sent
    /// one at a time in this order (see `concerto_core::client::ordering`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<Ordering>,
    /// The schedule block `b` (default: the stripe unit); needs `ordering`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_block: Option<Bytes>,
    /// Collective I/O: what each process asks for per call, as a pattern
    /// of `concerto_core::client::collective::patterns`
    /// (`"demo:segment=64KiB"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// Collective I/O: the planner and its options (default: two-phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<PlannerChoice>,
    /// IOR's own layout (ior only; IOR's -b): each call is then one whole
    /// IOR operation, in which every process moves `segments` blocks of
    /// this size in transfers of `request_size` (-t), one at a time; block
    /// `s` of process `r` sits at `(s · processes + r) · block_size` of the
    /// shared file, or at `s · block_size` of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<Bytes>,
    /// With `block_size`: IOR's segment count (-s, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<u32>,
    /// With `block_size`: the operations, in order, a barrier between
    /// (IOR's -w and -r; default `[op]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<DataOp>>,
    /// md-test: the phases to run, in order (default: all eight, as
    /// `workload::MDTEST_PHASES`); mdtest's -C, -T, -E and -r choose some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md_steps: Option<Vec<MdStep>>,
    /// Workload "trace": the trace file (JSON, docs/workloads.md), a path
    /// absolute or relative to the directory the simulator runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Workload "trace": which of the file's applications (default: its only one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_app: Option<String>,
    /// The trace's application, read when the scenario is loaded.
    #[serde(skip)]
    pub trace_data: Option<std::sync::Arc<crate::trace::TraceApp>>,
}

/// One md-test phase: every process does it for each of its `items` files
/// (or its directory), then the processes meet at a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MdStep {
    /// Make the process's directory.
    Mktestdir,
    /// Create the files.
    Create,
    /// Write `request_size` bytes to each file (nothing without it).
    Write,
    /// List the directory.
    Readdir,
    /// Read `request_size` bytes of each file (a getattr without it).
    Read,
    /// A getattr of each file (mdtest's stat phase).
    Stat,
    /// PVFS2 has no close request: the phase only synchronizes.
    Close,
    /// Remove the files.
    Rm,
    /// Remove the directory.
    Rmtestdir,
}

impl MdStep {
    /// The row of mdtest's summary this phase counts under: mdtest creates,
    /// writes and closes each file in one loop, its "File creation", so
    /// `create` and `write` share that row; `readdir` and `close` have no
    /// row of their own.
    pub fn mdtest_operation(self) -> Option<&'static str> {
        match self {
            MdStep::Mktestdir => Some("Tree creation"),
            MdStep::Create | MdStep::Write => Some("File creation"),
            MdStep::Stat => Some("File stat"),
            MdStep::Read => Some("File read"),
            MdStep::Rm => Some("File removal"),
            MdStep::Rmtestdir => Some("Tree removal"),
            MdStep::Readdir | MdStep::Close => None,
        }
    }
}

pub(crate) fn unit_weight() -> f64 {
    1.0
}

pub(crate) fn one() -> u32 {
    1
}

pub(crate) fn yes() -> bool {
    true
}

impl AppSpec {
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.workload_name().to_string())
    }

    pub fn workload_name(&self) -> &'static str {
        self.workload.name()
    }

    /// The compute time before call `call`: after the previous call (or the
    /// start), `compute_time` between calls, or the phase's own.
    /// When process `rank` may issue call `call`, its previous call having
    /// completed (or the application started) at `done`: after the
    /// compute time, and for a trace no earlier than its recorded time.
    pub fn issue_time(&self, rank: u32, call: u32, done: Time) -> Time {
        let traced = self
            .trace_data
            .as_ref()
            .and_then(|t| t.ranks.get(rank as usize)?.get(call as usize));
        match traced {
            Some(q) => q.issue_at(self.start, done),
            None if call == 0 => done,
            None => done + self.compute_before(call),
        }
    }

    /// Calls process `rank` makes (a trace's ranks differ).
    pub fn calls_of(&self, rank: u32) -> u32 {
        match &self.trace_data {
            Some(t) => t.ranks.get(rank as usize).map_or(0, |r| r.len() as u32),
            None => self.calls(),
        }
    }

    pub fn compute_before(&self, call: u32) -> Time {
        match &self.phases {
            Some(p) => Time::from_secs_f64(p[call as usize][0]),
            None if call == 0 => Time::ZERO,
            None => self.compute_time,
        }
    }

    /// The bytes all of one instance's processes move in call `call`.
    pub fn bytes_of_call(&self, call: u32) -> u64 {
        self.workload.workload().bytes_of_call(self, call)
    }

    /// A collective workload's access pattern (validated: `access` parses).
    pub fn access_pattern(&self) -> Option<AccessPattern> {
        AccessPattern::parse(self.access.as_deref()?).ok()
    }

    /// What the application tells a job-level arbiter.
    pub fn phase_info(&self) -> concerto_core::job::PhaseInfo {
        concerto_core::job::PhaseInfo {
            w_iter: self.w_iter,
            group: self
                .group
                .map(|g| (g, self.group_w_iter.unwrap_or(Time::ZERO))),
        }
    }

    /// md-test's phases, in order.
    pub fn md_steps(&self) -> &[MdStep] {
        self.md_steps
            .as_deref()
            .unwrap_or(&crate::workload::MDTEST_PHASES)
    }

    /// The operations of an IOR-layout application, in order.
    pub fn ior_operations(&self) -> Vec<DataOp> {
        self.operations.clone().unwrap_or_else(|| vec![self.op])
    }

    /// Calls each process makes (md-test: one per phase; btio: output then
    /// verification; ior with `block_size`: one per operation).
    pub fn calls(&self) -> u32 {
        self.workload.workload().calls(self)
    }

    /// Bytes one process moves per call (md-test: in its write phase).
    pub fn bytes_per_call(&self) -> u64 {
        self.workload.workload().bytes_per_call(self)
    }
}

/// A phase's bytes as a whole number (the file gives them as a number, as
/// the fluid mode's workload files do).
pub fn phase_bytes(bytes: f64) -> u64 {
    bytes.round() as u64
}

pub(crate) fn validate_app(at: &str, app: &AppSpec, rule: &AppIdRule) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    positive(&key("instances"), app.instances as u64)?;
    positive(&key("processes"), app.processes as u64)?;
    positive(&key("processes_per_node"), app.processes_per_node as u64)?;
    positive(&key("requests"), app.requests as u64)?;
    if let Some(name) = &app.name {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ConfigError::at(
                key("name"),
                "use letters, digits, '-', '_' or '.'",
            ));
        }
    }
    check_keys_apply(at, app)?;
    if let Some(b) = app.schedule_block {
        if app.ordering.is_none() {
            return Err(ConfigError::at(
                key("schedule_block"),
                "needs ordering (\"first-ios\", \"random-ios\" or \"hash-ios\")",
            ));
        }
        positive(&key("schedule_block"), b.0)?;
    }
    for (field, present) in [
        ("segments", app.segments.is_some()),
        ("operations", app.operations.is_some()),
    ] {
        if present && app.block_size.is_none() {
            return Err(ConfigError::at(
                key(field),
                "goes with block_size (IOR's layout)",
            ));
        }
    }
    app.workload.workload().check(at, app)?;
    if app.group.is_some() != app.group_w_iter.is_some() {
        return Err(ConfigError::at(
            key(if app.group.is_some() {
                "group_w_iter"
            } else {
                "group"
            }),
            "group and group_w_iter go together (the group and its characteristic time)",
        ));
    }
    if app
        .bytes_per_call()
        .checked_mul(app.calls() as u64)
        .and_then(|b| b.checked_mul(app.processes as u64))
        .is_none_or(|b| b > 1 << 50)
    {
        return Err(ConfigError::at(
            at,
            "moves more than 1 PiB; reduce requests or sizes",
        ));
    }
    check_app_id(at, app, rule)
}

/// An application's `app_id`: given exactly when the rule is explicit.
fn check_app_id(at: &str, app: &AppSpec, rule: &AppIdRule) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    match (rule, app.app_id) {
        (AppIdRule::Explicit, None) => Err(ConfigError::at(
            key("app_id"),
            "required when app_ids.rule = \"explicit\"",
        )),
        (AppIdRule::Explicit, Some(id)) if id as u64 + app.instances as u64 > u32::MAX as u64 => {
            Err(ConfigError::at(
                key("app_id"),
                "too large for the number of instances",
            ))
        }
        (AppIdRule::Random { .. } | AppIdRule::Sequential { .. }, Some(_)) => Err(ConfigError::at(
            key("app_id"),
            "only used when app_ids.rule = \"explicit\"",
        )),
        _ => Ok(()),
    }
}

impl AppSpec {
    /// Every key some kinds take and others do not, with whether it is set,
    /// in the order they are checked.
    fn kind_keys_set(&self) -> [(&'static str, bool); 18] {
        [
            ("request_size", self.request_size.is_some()),
            ("phases", self.phases.is_some()),
            ("pattern", self.pattern.is_some()),
            ("file", self.file.is_some()),
            ("grid", self.grid.is_some()),
            ("tile", self.tile.is_some()),
            ("planes", self.planes.is_some()),
            ("element_size", self.element_size.is_some()),
            ("elements", self.elements.is_some()),
            ("getattrs", self.getattrs.is_some()),
            ("access", self.access.is_some()),
            ("collective", self.collective.is_some()),
            ("items", self.items.is_some()),
            ("subtype", self.subtype.is_some()),
            ("block_size", self.block_size.is_some()),
            ("md_steps", self.md_steps.is_some()),
            ("trace", self.trace.is_some()),
            ("trace_app", self.trace_app.is_some()),
        ]
    }
}

/// A key set for a kind that does not take it is an error naming the kind.
pub(crate) fn check_keys_apply(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let taken = app.workload.workload().keys();
    for (key, set) in app.kind_keys_set() {
        if set && !taken.contains(&key) {
            return Err(ConfigError::at(
                format!("{at}.{key}"),
                format!("does not apply to workload \"{}\"", app.workload_name()),
            ));
        }
    }
    Ok(())
}
