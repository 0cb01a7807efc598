//! Building a simulation from a scenario: servers, devices, files and their
//! layouts, applications and their processes, ids and seeds.

use super::*;
use crate::scenario::AppSpec;

impl<'a> Simulation<'a> {
    /// Sets up a run of a validated scenario with `seed`.
    pub fn new(sc: &'a Scenario, seed: u64, progress: Option<&'a Progress>) -> Simulation<'a> {
        let cl = &sc.cluster;
        let mut setup = rng(seed, STREAM_SETUP);
        let n_instances: usize = sc.apps.iter().map(|a| a.instances as usize).sum();

        let (servers, meta_servers) = build_servers(sc, n_instances);
        let ids = assign_app_ids(sc, n_instances, &mut setup);
        let (apps, ranks, files) = build_applications(sc, &ids, &meta_servers, &mut setup);
        let nodes = ranks.last().map_or(0, |r| r.nic as usize + 1);
        let clients = vec![Nic::default(); nodes];
        let net = Network::new(cl.network.clone());
        let shared = sharing::SharedNetwork::new(&net, nodes, servers.len());
        let servers_count = servers.len();
        Simulation {
            sc,
            seed,
            events: EventQueue::new(),
            net,
            rng_net: rng(seed, STREAM_NETWORK),
            rng_dev: rng(seed, STREAM_DEVICE),
            rng_tie: rng(seed, STREAM_TIES),
            rng_client: rng(seed, STREAM_CLIENT),
            kernel_locks: FxHashMap::default(),
            apps,
            ranks,
            clients,
            shared,
            files,
            servers,
            pieces: Vec::new(),
            free_pieces: Vec::new(),
            fetches: Vec::new(),
            dispatched: Vec::new(),
            finishes: Vec::new(),
            detail: sc.output.detail.then(Vec::new),
            progress,
            reports: Vec::new(),
            sends: Vec::new(),
            split: Vec::new(),
            reapers: std::iter::repeat_with(Default::default)
                .take(servers_count)
                .collect(),
            page_caches: page_cache::PageCaches::new(nodes),
            kicks: Vec::new(),
            arbiter: sc.job.as_ref().map(|j| Sets::new(j.rule.clone())),
            phases: Vec::new(),
            patterns: sc.apps.iter().map(|a| a.access_pattern()).collect(),
            planners: sc
                .apps
                .iter()
                .map(|a| a.workload.workload().planner(a))
                .collect(),
        }
    }
}

/// The servers of the cluster (data servers first, then dedicated metadata
/// servers) and which of them serve metadata.
fn build_servers(sc: &Scenario, n_instances: usize) -> (Vec<ServerState>, Vec<u32>) {
    let cl = &sc.cluster;
    let md = &cl.metadata;
    let n_meta = cl.metadata_servers();
    let meta_servers: Vec<u32> = match md.placement {
        // Spread evenly over the data servers.
        MetadataPlacement::CoLocated => (0..n_meta)
            .map(|i| (i as u64 * cl.servers as u64 / n_meta as u64) as u32)
            .collect(),
        MetadataPlacement::Dedicated => (cl.servers..cl.servers + n_meta).collect(),
    };
    let roles: Vec<ServerRole> = match md.placement {
        MetadataPlacement::CoLocated => (0..cl.servers)
            .map(|i| {
                if meta_servers.contains(&i) {
                    ServerRole::DataAndMetadata
                } else {
                    ServerRole::Data
                }
            })
            .collect(),
        MetadataPlacement::Dedicated => (0..cl.servers)
            .map(|_| ServerRole::Data)
            .chain((0..n_meta).map(|_| ServerRole::Metadata))
            .collect(),
    };
    let servers = roles
        .iter()
        .map(|&role| ServerState {
            role,
            driver: {
                let mut d = Driver::new(
                    &sc.policy,
                    sc.device_defaults(if role == ServerRole::Metadata {
                        md.depth.unwrap_or(cl.depth)
                    } else {
                        cl.depth
                    }),
                );
                d.set_rules(&sc.qos, Time::ZERO);
                d
            },
            device: Device::new(match (role, &md.device) {
                (ServerRole::Metadata, Some(d)) => d,
                _ => &cl.device,
            }),
            nic: Nic::default(),
            kick_pending: false,
            wakeup: None,
            requests: 0,
            metadata_ops: 0,
            bytes: 0,
            busy: Time::ZERO,
            device_free: Time::ZERO,
            max_queue: 0,
            finish: FxHashMap::default(),
            timeline: sc
                .output
                .timeline
                .filter(|_| sc.output.server_timeline)
                .map(|w| (0..n_instances).map(|_| Backlog::new(w)).collect()),
            reports_sent: 0,
            elevator: role != ServerRole::Metadata
                && cl.device.kind().elevator_deadline().is_some(),
            disk_waiting: Vec::new(),
            disk_busy: false,
        })
        .collect();
    (servers, meta_servers)
}

/// Every application instance with its processes and files (each file's
/// layout and metadata server), given the instances' ids; file placement
/// draws from `setup`.
fn build_applications(
    sc: &Scenario,
    ids: &[u32],
    meta_servers: &[u32],
    setup: &mut ChaCha8Rng,
) -> (Vec<AppState>, Vec<RankState>, Vec<FileState>) {
    let cl = &sc.cluster;
    let mut apps = Vec::with_capacity(ids.len());
    let mut ranks = Vec::new();
    let mut files = Vec::new();
    for (spec_idx, spec) in sc.apps.iter().enumerate() {
        // Operations an instance completes: barrier-wide, or per process.
        let operations = if spec.barrier {
            spec.calls() as usize
        } else {
            (0..spec.processes).map(|r| spec.calls_of(r) as usize).sum()
        };
        for instance in 0..spec.instances {
            let app_idx = apps.len() as u32;
            let first_rank = ranks.len() as u32;
            let mut app_files = Vec::new();
            let files_before = files.len() as u32;
            let present = if cl.read_ahead {
                data_present(spec, &cl.metadata)
            } else {
                Vec::new()
            };
            for f in 0..workload::files_per_instance(spec) {
                let idx = files.len() as u32;
                let placed = place_file(sc, spec, (f, files_before + f), setup);
                let first = spec.first_server.unwrap_or(placed);
                let count = spec.stripe_count.unwrap_or(cl.stripe_count());
                let layout = StripeLayout::round_robin(cl.stripe_unit.0, count, first, cl.servers)
                    .expect("validated: stripe unit > 0 and stripe count within the servers");
                files.push(FileState {
                    layout,
                    meta_server: meta_servers[idx as usize % meta_servers.len()],
                    writes: (cl.write_behind.0 > 0).then(|| {
                        use concerto_core::client::write_behind::{FileWrites, WriteBehindConfig};
                        FileWrites::new(WriteBehindConfig::bounded(cl.write_behind.0))
                    }),
                    flush_at: None,
                    written_end: present.get(f as usize).copied().unwrap_or(0),
                });
                app_files.push(idx);
            }
            push_ranks(&mut ranks, spec, app_idx, meta_servers);
            apps.push(AppState {
                spec: spec_idx,
                instance,
                app_id: ids[app_idx as usize],
                first_rank,
                files: app_files,
                next_call: 0,
                ranks_pending: 0,
                ranks_finished: 0,
                op_issue: Time::ZERO,
                // One entry per operation (reserved: growing the
                // vectors of thousands of applications was measurable).
                completions: Vec::with_capacity(operations),
                spreads: Vec::with_capacity(if spec.barrier { operations } else { 0 }),
                op_servers: Vec::new(),
                bytes: 0,
                pieces: 0,
                metadata_ops: 0,
                start: spec.start,
                timeline: sc.output.timeline.map(Bins::new),
                end: spec.start,
                weight: spec.weight,
                phase_start: Time::ZERO,
                phase_priority: 1.0,
                collective: None,
                plan_cache: None,
            });
        }
    }
    (apps, ranks, files)
}

fn assign_app_ids(sc: &Scenario, n: usize, rng: &mut ChaCha8Rng) -> Vec<u32> {
    match &sc.app_ids {
        AppIdRule::Random { min, max } => {
            let mut used = HashSet::new();
            (0..n)
                .map(|_| loop {
                    let id = rng.gen_range(*min..=*max);
                    if used.insert(id) {
                        break id;
                    }
                })
                .collect()
        }
        AppIdRule::Sequential { start } => (0..n as u32).map(|i| start + i).collect(),
        AppIdRule::Explicit => sc
            .apps
            .iter()
            .flat_map(|a| (0..a.instances).map(move |i| a.app_id.unwrap_or(0) + i))
            .collect(),
    }
}

/// The server file `f` of an instance of `spec` starts on, `index` its
/// number among every file of the run.
fn place_file(
    sc: &Scenario,
    spec: &AppSpec,
    (f, index): (u32, u32),
    setup: &mut ChaCha8Rng,
) -> u32 {
    let cl = &sc.cluster;
    match cl.placement {
        // Concerto's metadata server places a file by its inode, that is
        // in the order files are created.
        Placement::RoundRobin if cl.metadata.posix_mount => {
            let made = spec.workload.workload().creation_order(spec, f);
            (index - f + made) % cl.servers
        }
        Placement::RoundRobin => index % cl.servers,
        Placement::Random => setup.gen_range(0..cl.servers),
    }
}

/// An instance's processes. Nodes are numbered across instances: an
/// instance's processes never share a NIC with another's.
/// Per file of one instance of `spec`, the data it holds when the run
/// starts: a file the run only reads holds what its reads cover (IOR's
/// `-r` reads a file an earlier run wrote); one it writes starts empty.
/// Read-ahead needs it, as it stops where the data ends.
fn data_present(spec: &AppSpec, metadata: &crate::scenario::MetadataConfig) -> Vec<u64> {
    let n = workload::files_per_instance(spec) as usize;
    let (mut read_end, mut written) = (vec![0u64; n], vec![false; n]);
    let mut steps = Vec::new();
    for rank in 0..spec.processes {
        for call in 0..spec.calls_of(rank) {
            steps.clear();
            workload::call_steps(spec, rank, call, metadata, &mut steps);
            for step in &steps {
                let workload::Step::Data { op, access } = step else {
                    continue;
                };
                let f = access.file as usize;
                if f >= n {
                    continue;
                }
                match op {
                    DataOp::Write => written[f] = true,
                    DataOp::Read => {
                        let end = access.extents.last().map_or(0, Extent::end);
                        read_end[f] = read_end[f].max(end);
                    }
                }
            }
        }
    }
    read_end
        .into_iter()
        .zip(written)
        .map(|(end, w)| if w { 0 } else { end })
        .collect()
}

fn push_ranks(ranks: &mut Vec<RankState>, spec: &AppSpec, app: u32, meta_servers: &[u32]) {
    let first_node = ranks.last().map_or(0, |r: &RankState| r.nic + 1);
    for rank in 0..spec.processes {
        let dir_server = meta_servers[ranks.len() % meta_servers.len()];
        ranks.push(RankState {
            app,
            rank,
            pending: 0,
            call: 0,
            issue: Time::ZERO,
            steps: Vec::new(),
            dir_server,
            blocks: Vec::new(),
            holds: None,
            held_for_change: false,
            nic: first_node + rank / spec.processes_per_node,
            behind: 0,
            behind_bytes: 0,
            behind_wait: super::write_behind::Wait::Nothing,
            streams: Default::default(),
        });
    }
}
