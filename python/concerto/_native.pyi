"""Types of ``concerto._native``, the PyO3 module built from
``crates/concerto-python`` (thin: no logic of its own).

What crosses the boundary: the files users write (scenarios, cluster
files, key rings, workload files, set rules) go in as text; everything
else goes both ways as Python objects, whose shapes are the ``TypedDict``s
below -- the one schema of what the module returns and takes. A shape
named after a Rust type is that type's serde form (``RunSet`` is
``concerto_sim::results::RunSet``); its nested parts are typed here where
Python reads them and left ``dict[str, Any]`` where the Rust type's own
documentation is the reference. Non-finite floats come back as ``None``
and map keys as strings, as JSON gives them.

Kept in step with the Rust side by ``tests/test_native_stub.py``: every
name the module exports is declared here with the same parameters, and the
objects a call returns have the keys its shape declares (the file-system
calls are checked against a running cluster in ``tests/test_fs.py``)."""

import os
from typing import Any, Callable, Literal, NotRequired, TypedDict


# Shapes: the file system.

class Layout(TypedDict):
    unit: int
    servers: list[int]

class DefaultLayout(TypedDict):
    unit: int
    count: int

class Stat(TypedDict):
    inode: int
    kind: Literal["file", "directory"]
    size: int
    ctime_ns: int
    mtime_ns: int
    layout: Layout | None
    default_layout: DefaultLayout | None
    entries: int
    uid: int
    gid: int
    mode: int

class DirEntry(TypedDict):
    name: str
    inode: int
    kind: Literal["file", "directory"]

class Statfs(TypedDict):
    """concerto_proto::FsCounts."""
    files: int
    directories: int
    inodes_free: int
    data_servers: list[int]
    default_layout: list[int]

class Arrival(TypedDict):
    """concerto_proto::stats::Arrival: one request as it reached a server's queue."""
    seq: int
    at_ns: int
    app: int
    rank: int
    issue_ns: int
    op: Literal["read", "write", "sync", "metadata"]
    object: int
    offset: int
    bytes: int
    started: int  # the order the policy started it, from 1; 0 while it waits

class ServerError(TypedDict):
    """A server that did not answer, in a per-server list."""
    error: str

class Ping(TypedDict):
    policy: str
    roles: list[Literal["data", "metadata", "coordinator"]]

class LatencyHistogram(TypedDict):
    """concerto_proto::stats::LatencyHistogram, with its p50 and p99 bucket bounds."""
    op: str
    bounds_s: list[float]
    counts: list[int]
    sum_s: float
    count: int
    p50_s: float | None
    p99_s: float | None

class ServerStats(TypedDict):
    """concerto_proto::stats::ServerStats."""
    address: str
    roles: list[Literal["data", "metadata", "coordinator"]]
    policy: str
    throttle: str | None
    uptime_s: float
    queued: int
    in_flight: int
    apps: list[dict[str, Any]]
    retired: dict[str, Any]
    latency: list[LatencyHistogram]
    reports: dict[str, Any]
    connections: dict[str, Any]
    space_total: int
    space_free: int
    grants: list[list[float]]
    coordinator: dict[str, Any] | None

class ClusterSection(TypedDict):
    timeout: str
    credential: NotRequired[str]
    integrity: NotRequired[str]

class ServerEntry(TypedDict):
    id: int
    address: str
    roles: list[Literal["data", "metadata", "coordinator"]]
    metrics: NotRequired[str]
    pid: NotRequired[int]
    config: NotRequired[str]

class ClusterFile(TypedDict):
    """concerto_proto::cluster::ClusterFile, defaults filled in."""
    cluster: ClusterSection
    servers: list[ServerEntry]

class KeyInfo(TypedDict):
    """One key of a ring, never its secret."""
    id: str
    role: Literal["admin", "peer", "tenant", "node"]
    job: int | None
    weight: float | None
    user: int | None
    groups: list[int]
    users: list[int] | None

class EmulationPreset(TypedDict):
    bandwidth_Bps: float
    latency_ns: int
    seek_ns: int
    parallelism: int
    metadata_ns: int

# Shapes: the simulator.

class Scenario(TypedDict):
    """concerto_sim::Scenario, validated, defaults filled in."""
    name: str
    seed: int
    cluster: dict[str, Any]
    policy: dict[str, Any]
    apps: list[dict[str, Any]]
    app_ids: list[int]
    output: dict[str, Any]

class Spread(TypedDict):
    mean: float
    sd: float
    min: float
    max: float

class Summary(TypedDict):
    makespan_s: float
    avg_completion_s: float
    p95_completion_s: float
    aggregate_bandwidth_Bps: float
    finish_spread: float | None
    bytes: int
    requests: int
    operations: int
    events: int

class RunResult(TypedDict):
    """concerto_sim::results::RunResult: one repetition."""
    concerto_version: str
    scenario: str
    seed: int
    policy: dict[str, Any]
    summary: Summary
    apps: list[dict[str, Any]]
    servers: list[dict[str, Any]]
    job: NotRequired[dict[str, Any]]

class RunSet(TypedDict):
    """concerto_sim::results::RunSet: every repetition and their aggregate."""
    concerto_version: str
    config: Scenario
    policy: dict[str, Any]
    seeds: list[int]
    aggregate: dict[str, Spread]
    runs: list[RunResult]

# Shapes: job level (fluid mode).

class WindowMetrics(TypedDict):
    """concerto_sim::fluid::WindowMetrics (io-sets.txt's metrics over a window)."""
    utilization: float
    max_stretch: float
    stretch: list[float]
    io_slowdown: float
    alone_bandwidth: float

class FluidPhase(TypedDict):
    """An I/O phase as a fluid run let it go, with the set the rule put its application in."""
    app: str
    phase: int
    request_s: float
    start_s: float
    end_s: float
    bytes: float
    priority: float
    set: int

class FluidRun(TypedDict):
    metrics: WindowMetrics
    app_end_s: list[float]
    events: int
    phases: list[FluidPhase]
    apps: list[str]

class RanPhase(TypedDict):
    """An I/O phase that ran elsewhere (the real cluster), as fluid_phase_metrics takes it."""
    app: int
    phase: int
    request_s: float
    start_s: float
    end_s: float
    bytes: float
    priority: NotRequired[float]

class RuleOutcome(TypedDict):
    """concerto_sim::fluid::RuleOutcome: one rule's window metrics in a sweep."""
    utilization: float
    max_stretch: float
    mean_stretch: float
    io_slowdown: float
    group_max_stretch: list[float]
    sets: int
    events: int

# Shapes: the client side.

class ScheduleEntry(TypedDict):
    name: str
    length: int
    valid: bool
    steps: list[list[list[int]]] | None

class TransferPlan(TypedDict):
    clients: int
    servers: int
    transfers: int
    delta: int
    unit: int
    load_bound: int | None
    schedules: list[ScheduleEntry]

class CollectivePlanSteps(TypedDict):
    """concerto_core::client::collective::CollectivePlan."""
    direction: str
    arrangement: Any
    agents: list[Any]
    processes: list[Any]
    exchanges: list[Any]

class CollectivePlan(TypedDict):
    strategy: str
    procs: int
    servers: int
    stripe: int
    requested_bytes: int
    io_bytes: int
    exchanged_bytes: int
    plan: CollectivePlanSteps
    touches: list[list[list[list[list[int]]]]]

# Shapes: profiles.

class ProfileSpec(TypedDict, total=False):
    """concerto_core::profile::ProfileSpec; missing fields take their defaults."""
    sizes: list[int | str]
    depths: list[int]
    count: int
    saturation: float
    large_size: int | str

class Profile(TypedDict):
    """concerto_core::profile::Profile."""
    spec: dict[str, Any]
    overhead_s: float
    sizes: list[dict[str, Any]]
    recommendation: dict[str, Any]

class ProbeInfo(TypedDict):
    kind: Literal["directory", "server"]
    path: NotRequired[str]
    direct: NotRequired[bool]
    address: NotRequired[str]
    id: NotRequired[int]

class ProbedProfile(Profile):
    """A profile of real storage, with what was profiled."""
    probe: ProbeInfo

# The module.

__version__: str

class ConfigError(ValueError):
    """A scenario or option is invalid; the message names the key."""

class Progress:
    """Operations completed by a running simulation; poll it from another thread."""
    def __init__(self) -> None: ...
    @property
    def done(self) -> int: ...
    @property
    def total(self) -> int: ...

class FsFile:
    """An open file of a cluster."""
    @property
    def path(self) -> str: ...
    @property
    def inode(self) -> int: ...
    @property
    def stripe_unit(self) -> int: ...
    @property
    def servers(self) -> list[int]: ...

class FsClientHandle:
    """A client of a running cluster (the native client library)."""
    def __init__(self, cluster: str, path: str | os.PathLike[str], app: int | None = None, rank: int | None = None,
                 weight: float | None = None, transfers: str | None = None) -> None: ...
    @property
    def app(self) -> int: ...
    @property
    def rank(self) -> int: ...
    def mkdir(self, path: str, mode: int = 0o755) -> None: ...
    def set_attr(self, path: str, mode: int | None = None, uid: int | None = None, gid: int | None = None) -> Stat: ...
    def access(self, path: str, mask: int) -> None: ...
    def rmdir(self, path: str) -> None: ...
    def unlink(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def truncate(self, path: str, size: int) -> None: ...
    def setstripe(self, path: str, unit: int | None = None, count: int | None = None) -> None: ...
    def create(self, path: str, unit: int | None = None, count: int | None = None, exclusive: bool = True) -> FsFile: ...
    def open(self, path: str, write: bool = False) -> FsFile: ...
    def close(self, file: FsFile) -> None: ...
    def object_sizes(self, file: FsFile) -> list[int]: ...
    def write(self, file: FsFile, offset: int, data: bytes) -> None: ...
    def read(self, file: FsFile, offset: int, len: int) -> bytes: ...
    def write_list(self, file: FsFile, extents_: list[tuple[int, int]], data: bytes) -> None: ...
    def read_list(self, file: FsFile, extents_: list[tuple[int, int]]) -> bytes: ...
    def fsync(self, file: FsFile) -> None: ...
    def copy_in(self, file: FsFile, path: str | os.PathLike[str], chunk: int,
                on_progress: Callable[[int], object] | None = None) -> int: ...
    def copy_out(self, file: FsFile, path: str | os.PathLike[str], size: int, chunk: int,
                 on_progress: Callable[[int], object] | None = None) -> int: ...
    def stat(self, path: str) -> Stat: ...
    def fstat(self, file: FsFile) -> Stat: ...
    def readdir(self, path: str) -> list[DirEntry]: ...
    def statfs(self) -> Statfs: ...
    def arrivals(self, after: int) -> list[list[Arrival] | ServerError]: ...
    def stats(self) -> list[ServerStats | ServerError]: ...
    def begin_phase(self) -> float | None: ...
    def set_sets(self, sets: str) -> None: ...
    def end_phase(self) -> None: ...
    def ping(self) -> list[Ping | ServerError]: ...
    def set_policy(self, policy: str) -> list[int]: ...
    def set_rules(self, rules: str) -> None: ...
    def rules(self) -> list[tuple[int, str]]: ...
    def introduce_cluster(self) -> None: ...

# Scenarios and the simulator.
def load_scenario(text: str, table: str | None = None, overrides: list[str] = ...) -> Scenario: ...
def scenario_warnings(text: str, table: str | None = None, overrides: list[str] = ...) -> list[str]: ...
def simulate(text: str, table: str | None = None, overrides: list[str] = ..., seed: int | None = None, reps: int = 1,
             progress: Progress | None = None, detail_csv: str | os.PathLike[str] | None = None) -> RunSet: ...
def policy_names() -> list[str]: ...
def policy_keys(name: str) -> list[str]: ...
def replay_policy(policy: dict[str, Any], requests: list[tuple[int, int, str, int, int, int]], held: int) -> list[int]: ...
def policy_warnings(table: dict[str, Any]) -> list[str]: ...
def check_qos_rule(rule: dict[str, Any]) -> tuple[str, str] | None: ...
def stripe_unit_warning(bytes: int, written: str) -> str | None: ...
def parse_size(text: str) -> int: ...
def parse_duration(text: str) -> float: ...
def mdtest_row(step: str) -> str | None: ...
def parse_bandwidth(text: str) -> float: ...

# Job level (IO-SETS, fluid mode).
def fluid_generate(spec: str, seed: int) -> str: ...
def fluid_run(workload: str, rule: str, window_begin: float, window_end: float) -> FluidRun: ...
def fluid_phase_metrics(workload: dict[str, Any], phases: list[RanPhase], window_begin: float,
                        window_end: float) -> WindowMetrics: ...
def fluid_measure(text: str, table: str | None, overrides: list[str], seed: int, rules: list[str], window_begin: float,
                  window_end: float, check_only: bool = False) -> list[RuleOutcome]: ...

# Client side: transfer scheduling and collective plans.
def parse_transfer_matrix(text: str) -> list[list[int]]: ...
def random_transfer_matrix(clients: int, servers: int, density: float, max_per_pair: int, seed: int) -> list[list[int]]: ...
def regular_transfer_matrix(n: int, degree: int, seed: int) -> list[list[int]]: ...
def skewed_transfer_matrix(clients: int, servers: int, per_client: int, exponent: float,
                           seed: int) -> list[list[int]]: ...
def plan_transfers(rows: list[list[int]], unit: int = 0, seed: int = 1, passes: int = 3,
                   show: str | None = None) -> TransferPlan: ...
def plan_collective(pattern: str, procs: int, servers: int, stripe: int, strategy: str, write: bool = False,
                    call: int = 0, max_segments: int | None = None, cb_nodes: int | None = None,
                    cb_buffer_size: int | None = None, align: bool = False, agents_per_server: int | None = None,
                    group_delay_us: int | None = None) -> CollectivePlan: ...

# Analysis (the papers' formulas) and metrics.
def jain_index(service: list[float], weights: list[float]) -> float: ...
def fifo_expected_completion(m: int, n: int, t: float) -> float: ...
def coordinated_expected_completion(m: int, t: float) -> float: ...
def independent_order_spread(m: int, n: int) -> float: ...
def expected_reduction_rate(m: int, n: int) -> float: ...

# Profiling (devices, directories, running servers).
def profile_device(device: str, spec: ProfileSpec | None = None, seed: int = 1) -> Profile: ...
def profile_directory(dir: str | os.PathLike[str], working_set: int, spec: ProfileSpec | None = None,
                      seed: int = 1) -> ProbedProfile: ...
def profile_server(cluster: str, path: str | os.PathLike[str], server: str, working_set: int,
                   spec: ProfileSpec | None = None, seed: int = 1) -> ProbedProfile: ...

# The real file system: cluster files, keys, layouts.
def check_cluster_file(text: str) -> ClusterFile: ...
def generate_keys() -> tuple[str, str]: ...
def issue_key(ring: str, id: str, job: int, weight: float | None = None, user: int | None = None, groups: list[int] = ...) -> tuple[str, str]: ...
def issue_node_key(ring: str, id: str, first_user: int, last_user: int) -> tuple[str, str]: ...
def revoke_key(ring: str, id: str) -> str: ...
def list_keys(ring: str) -> list[KeyInfo]: ...
def emulation_preset(name: str) -> EmulationPreset: ...
def stripe_map(unit: int, servers: list[int], size: int, stripes: int) -> list[tuple[int, int, int, int, int]]: ...
