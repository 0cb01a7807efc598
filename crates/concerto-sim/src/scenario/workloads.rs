//! What each workload kind takes: its own keys (beyond those every
//! application has) and the checks of their values. A new kind adds its
//! keys to [`WorkloadKind::keys`] and its checks here.

use super::*;

impl WorkloadKind {
    /// The keys of `[[apps]]` this kind takes beyond those every
    /// application has (`processes`, `requests`, `op`, `barrier`, ...).
    pub fn keys(self) -> &'static [&'static str] {
        use WorkloadKind::*;
        match self {
            Ior => &["request_size", "pattern", "file", "block_size"],
            PioBench => &["request_size", "pattern", "file"],
            MpiTileIo => &["grid", "tile", "planes", "element_size"],
            Noncontig => &["element_size", "elements"],
            Btio => &["element_size", "elements", "subtype"],
            Wrf => &["request_size", "getattrs"],
            MdTest => &["request_size", "items", "md_steps"],
            Phases => &["request_size", "phases"],
            Collective => &["access", "collective"],
            Trace => &["trace", "trace_app"],
        }
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
    let taken = app.workload.keys();
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

/// The checks of the kind's own keys.
pub(crate) fn check_kind(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    use WorkloadKind::*;
    match app.workload {
        Ior | PioBench => check_ior(at, app),
        MpiTileIo => check_tile(at, app),
        Noncontig | Btio => check_elements(at, app),
        Trace => check_trace(at, app),
        Wrf => check_wrf(at, app),
        MdTest => check_md_test(at, app),
        Collective => check_collective(at, app),
        Phases => check_phases(at, app),
    }
}

/// A check that `field`, which the kind needs, is set.
fn required<'a>(
    at: &'a str,
    app: &'a AppSpec,
) -> impl Fn(&str, bool) -> Result<(), ConfigError> + 'a {
    move |field: &str, present: bool| {
        if !present {
            return Err(ConfigError::at(
                format!("{at}.{field}"),
                format!("required for workload \"{}\"", app.workload_name()),
            ));
        }
        Ok(())
    }
}

/// IOR and PIO-bench: a transfer size; with `block_size`, IOR's own layout
/// (segments of blocks, one operation per call).
fn check_ior(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    required("request_size", app.request_size.is_some())?;
    let transfer = app.request_size.map_or(0, |b| b.0);
    positive(&key("request_size"), transfer)?;
    if let Some(block) = app.block_size {
        positive(&key("block_size"), block.0)?;
        if block.0 % transfer != 0 {
            return Err(ConfigError::at(
                key("block_size"),
                format!(
                    "{} bytes is not a whole number of transfers (request_size = {transfer})",
                    block.0
                ),
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
        let transfers = block.0 / transfer * app.segments.unwrap_or(1) as u64;
        if transfers > MAX_IOR_TRANSFERS {
            return Err(ConfigError::at(
                key("block_size"),
                format!(
                    "{transfers} transfers per process and operation is over {MAX_IOR_TRANSFERS}"
                ),
            ));
        }
    }
    Ok(())
}

/// MPI-TILE-IO: a grid of processes, each with one tile of elements.
fn check_tile(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    if let Some(planes) = app.planes {
        positive(&key("planes"), planes as u64)?;
    }
    required("grid", app.grid.is_some())?;
    required("tile", app.tile.is_some())?;
    required("element_size", app.element_size.is_some())?;
    let [px, py] = app.grid.unwrap_or_default();
    let [tx, ty] = app.tile.unwrap_or_default();
    for (name, v) in [("grid", px), ("grid", py), ("tile", tx), ("tile", ty)] {
        positive(&key(name), v as u64)?;
    }
    positive(&key("element_size"), app.element_size.map_or(0, |b| b.0))?;
    if px as u64 * py as u64 != app.processes as u64 {
        return Err(ConfigError::at(
            key("grid"),
            format!(
                "{px} x {py} tiles does not match processes = {}",
                app.processes
            ),
        ));
    }
    Ok(())
}

/// noncontig and BTIO: a vector of elements per process and call.
fn check_elements(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    required("elements", app.elements.is_some())?;
    required("element_size", app.element_size.is_some())?;
    positive(&key("elements"), app.elements.unwrap_or(0) as u64)?;
    positive(&key("element_size"), app.element_size.map_or(0, |b| b.0))?;
    Ok(())
}

/// A trace: its file, whose requests are the calls.
fn check_trace(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    required("trace", app.trace.is_some())?;
    if app.requests != 1 {
        return Err(ConfigError::at(
            key("requests"),
            "does not apply to workload \"trace\" (its calls are the trace's requests)",
        ));
    }
    Ok(())
}

/// WRF: the size of each process's small write.
fn check_wrf(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    required("request_size", app.request_size.is_some())?;
    positive(&key("request_size"), app.request_size.map_or(0, |b| b.0))?;
    Ok(())
}

/// md-test: files per process, and a size for its write and read phases.
fn check_md_test(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    if app.md_steps.as_ref().is_some_and(Vec::is_empty) {
        return Err(ConfigError::at(key("md_steps"), "needs at least one phase"));
    }
    required("items", app.items.is_some())?;
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
    Ok(())
}

/// Collective I/O: an access pattern the planner can plan, and a barrier.
fn check_collective(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    required("access", app.access.is_some())?;
    AccessPattern::parse(app.access.as_deref().unwrap_or_default())
        .map_err(|e| ConfigError::at(key("access"), e))?;
    let choice = app.collective.clone().unwrap_or_default();
    choice
        .validate()
        .map_err(|e| ConfigError::at(key(&format!("collective.{}", e.option)), e.to_string()))?;
    // Whether the processes' writes overlap does not depend on the
    // layout or the call: plan the first call once, here.
    if let (Some(pattern), Ok(planner)) = (app.access_pattern(), choice.planner()) {
        let layout = concerto_core::StripeLayout::round_robin(1 << 16, 1, 0, 1)
            .expect("one server, a non-zero unit");
        planner
            .plan(
                app.op.direction(),
                &pattern.accesses(app.processes, 0),
                &layout,
            )
            .map_err(|e| ConfigError::at(key("access"), e.to_string()))?;
    }
    if !app.barrier {
        return Err(ConfigError::at(
                key("barrier"),
                "must be true for workload \"collective\" (a collective call synchronizes its processes)",
            ));
    }
    if app.ordering.is_some() {
        return Err(ConfigError::at(
            key("ordering"),
            "does not apply to workload \"collective\" (its planner orders the requests)",
        ));
    }
    Ok(())
}

/// Phases: each `[compute seconds, bytes]` finite and not negative.
fn check_phases(at: &str, app: &AppSpec) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{at}.{k}");
    let required = required(at, app);
    required("phases", app.phases.is_some())?;
    let phases = app.phases.as_deref().unwrap_or(&[]);
    if phases.is_empty() {
        return Err(ConfigError::at(key("phases"), "needs at least one phase"));
    }
    for (k, [compute, bytes]) in phases.iter().enumerate() {
        for (j, v) in [(0, compute), (1, bytes)] {
            if !(v.is_finite() && *v >= 0.0) {
                return Err(ConfigError::at(
                    format!("{at}.phases[{k}][{j}]"),
                    format!("{v} must be a finite number >= 0"),
                ));
            }
        }
    }
    if !app.barrier {
        return Err(ConfigError::at(
            key("barrier"),
            "must be true for workload \"phases\" (each phase is one operation)",
        ));
    }
    if let Some(size) = app.request_size {
        positive(&key("request_size"), size.0)?;
    }
    Ok(())
}
