//! Resonant I/O (resonant-io.txt, Section 3): every I/O server's data is
//! requested in ascending offsets, by one process.

use super::extents::{bytes_of, normalize, subtract};
use super::{
    by_server, first_overlap, own_lists, pack, Batch, CollectivePlan, Direction, Exchange,
    PlanError, Planner,
};
use crate::layout::StripeLayout;
use crate::request::Extent;
use crate::time::Time;

/// Section 3.3: each I/O server's access set (the requested data it holds)
/// is accessed by one agent, the process that requests the most data from
/// it and is not yet an agent (ties: the lowest rank; once every process
/// with data there is an agent, the one serving the fewest servers so
/// far), in ascending offsets, as
/// list I/O of at most `max_segments` extents per request. With
/// `agents_per_server` > 1 the access set is cut into that many
/// consecutive parts, whose agents send one after the other. In a write
/// the owners first send their data to the agents, round by round of
/// `cb_buffer_size` bytes (the agent's buffer, as ROMIO's). In a read there is no
/// exchange: the agents send their requests first, and once all have
/// been sent (and `group_delay` later, the synchronization that makes
/// the agents' requests arrive first) every process reads directly what
/// it still needs, which the servers then find in their caches (the
/// prefetch arrangement).
///
/// Section 3.4: when the processes' data is ordered by rank (each process's
/// offsets below the next one's), no agents are needed. The processes are
/// placed in sets that share no server; in each set they go by rank in
/// groups of at most n (n = servers in the layout), each group sending
/// `group_delay` after the previous one has sent, and every process
/// accesses its own data. The paper puts process i of a set in group i/n;
/// a group here also ends where the next process shares a server with
/// one already in it, since within a group nothing orders the arrivals
/// (with the paper's rule, two processes reading one server in one call
/// would race, as in mpi-io-test with segments below the stripe unit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resonant {
    pub max_segments: usize,
    pub agents_per_server: u32,
    pub group_delay: Time,
    /// A write's agent holds at most this much of the data at once.
    pub cb_buffer_size: u64,
}

impl Default for Resonant {
    fn default() -> Resonant {
        Resonant {
            max_segments: 64,
            agents_per_server: 1,
            group_delay: Time::from_micros(500),
            cb_buffer_size: 16 << 20,
        }
    }
}

/// Whether each process's data lies below the next one's (processes with
/// nothing requested do not count).
pub fn non_overlapping(own: &[Vec<Extent>]) -> bool {
    let mut below = 0u64;
    let mut any = 0;
    for extents in own.iter().filter(|e| !e.is_empty()) {
        if any > 0 && extents[0].offset < below {
            return false;
        }
        below = extents[extents.len() - 1].end();
        any += 1;
    }
    any > 1
}

impl Planner for Resonant {
    fn name(&self) -> &'static str {
        "resonant"
    }

    fn plan(
        &self,
        direction: Direction,
        accesses: &[Vec<Extent>],
        layout: &StripeLayout,
    ) -> Result<CollectivePlan, PlanError> {
        if self.agents_per_server == 0 {
            return Err(PlanError::Invalid("agents_per_server must be > 0".into()));
        }
        // Processes' writes may not overlap: ordered by rank they cannot,
        // and the agents' arrangement checks each server's access set (one
        // union per server instead of one of the whole call).
        let own = own_lists(accesses)?;
        if non_overlapping(&own) {
            Ok(self.timed_groups(direction, &own, layout))
        } else {
            self.agents(direction, &own, layout)
        }
    }
}

impl Resonant {
    fn timed_groups(
        &self,
        direction: Direction,
        own: &[Vec<Extent>],
        layout: &StripeLayout,
    ) -> CollectivePlan {
        let per_server = by_server(own, layout);
        let n = layout.stripe_count().max(1) as usize;
        let sets = sharing_sets(&per_server, own);
        // The servers each process uses.
        let mut uses: Vec<Vec<usize>> = vec![Vec::new(); own.len()];
        for (server, ranks) in per_server.iter().enumerate() {
            for (rank, extents) in ranks.iter().enumerate() {
                if !extents.is_empty() {
                    uses[rank].push(server);
                }
            }
        }
        let mut processes: Vec<Vec<Batch>> = vec![Vec::new(); own.len()];
        let mut groups = 0;
        for set in &sets {
            // Groups in rank order, each of at most n processes that share
            // no server (so that within a group the order of arrival does
            // not matter), each sending after the previous one has sent.
            let mut group: Vec<u32> = Vec::new();
            let mut previous: Vec<u32> = Vec::new();
            let mut busy: Vec<usize> = Vec::new();
            for &rank in set {
                let shares = uses[rank as usize].iter().any(|s| busy.contains(s));
                if shares || group.len() == n {
                    previous = std::mem::take(&mut group);
                    busy.clear();
                    groups += 1;
                }
                busy.extend_from_slice(&uses[rank as usize]);
                group.push(rank);
                processes[rank as usize].push(Batch {
                    requests: pack(&own[rank as usize], self.max_segments),
                    after_sent: previous.iter().map(|&r| (r, 0)).collect(),
                    delay: if previous.is_empty() {
                        Time::ZERO
                    } else {
                        self.group_delay
                    },
                    ..Batch::default()
                });
            }
            groups += 1;
        }
        CollectivePlan {
            direction,
            processes,
            exchanges: Vec::new(),
            agents: Vec::new(),
            arrangement: format!(
                "timed groups (data ordered by rank): {} set(s) of processes sharing servers, {groups} group(s) of at most {n} sharing no server, {} apart",
                sets.len(),
                self.group_delay
            ),
        }
    }

    fn agents(
        &self,
        direction: Direction,
        own: &[Vec<Extent>],
        layout: &StripeLayout,
    ) -> Result<CollectivePlan, PlanError> {
        let per_server = by_server(own, layout);
        let assignments = self.assign_agents(direction, own, &per_server, layout)?;
        let (mut processes, exchanges) =
            self.agent_batches(direction, own.len(), &per_server, &assignments);
        if direction == Direction::Read {
            self.read_the_rest(own, &mut processes);
        }
        let agents: Vec<(u32, Vec<u32>)> = assignments
            .into_iter()
            .map(|(s, a)| (s, a.into_iter().map(|(r, _)| r).collect()))
            .collect();
        Ok(CollectivePlan {
            direction,
            processes,
            exchanges,
            arrangement: format!(
                "one agent per server's data ({} per server at most)",
                self.agents_per_server
            ),
            agents,
        })
    }

    /// Each server's agents, in order, with the part of its access set
    /// each accesses: (server, agents).
    fn assign_agents(
        &self,
        direction: Direction,
        own: &[Vec<Extent>],
        per_server: &[Vec<Vec<Extent>>],
        layout: &StripeLayout,
    ) -> Result<Vec<(u32, Vec<AgentPart>)>, PlanError> {
        let p = own.len();
        let k = (self.agents_per_server as usize).min(p);
        // How many servers each process is an agent for.
        let mut agent_of = vec![0u32; p];
        let mut assignments: Vec<(u32, Vec<AgentPart>)> = Vec::new();
        for &server in layout.servers() {
            let ranks = &per_server[server as usize];
            let access_set = normalize(&ranks.concat());
            if access_set.is_empty() {
                continue;
            }
            if direction == Direction::Write
                && bytes_of(&access_set) < ranks.iter().map(|e| bytes_of(e)).sum::<u64>()
            {
                first_overlap(own)?;
            }
            // Candidates: first the processes with data here that are not
            // yet agents (most data first, ties to the lowest rank), as the
            // paper picks them; then, when there are fewer processes than
            // servers (the paper does not say), those with data here that
            // serve the fewest servers so far; a process with no data here
            // only when more agents are asked for than processes have data.
            let mut candidates: Vec<(u32, u64, u32)> = ranks
                .iter()
                .enumerate()
                .map(|(r, e)| (r as u32, bytes_of(e), agent_of[r]))
                .collect();
            candidates.sort_unstable_by_key(|&(r, bytes, serving)| {
                (
                    bytes == 0,
                    serving > 0,
                    serving,
                    std::cmp::Reverse(bytes),
                    r,
                )
            });
            let chosen: Vec<u32> = candidates.iter().take(k).map(|&(r, _, _)| r).collect();
            for &r in &chosen {
                agent_of[r as usize] += 1;
            }
            let parts = split_bytes(&access_set, chosen.len());
            assignments.push((server, chosen.into_iter().zip(parts).collect()));
        }
        Ok(assignments)
    }

    /// The agents' batches and, in a write, the owners' exchanges to them.
    ///
    /// A read's agent sends everything at once (it only prefetches for
    /// the others); a write's agent holds the others' data, so it works,
    /// like ROMIO's aggregators, in rounds of `cb_buffer_size` bytes, the
    /// owners sending their data for each round before it.
    fn agent_batches(
        &self,
        direction: Direction,
        p: usize,
        per_server: &[Vec<Vec<Extent>>],
        assignments: &[(u32, Vec<AgentPart>)],
    ) -> (Vec<Vec<Batch>>, Vec<Exchange>) {
        // Per agent, the parts it accesses (server, extents), in order, and
        // the agents whose first batch it waits for.
        let mut parts: Vec<Vec<(u32, Vec<Extent>)>> = vec![Vec::new(); p];
        let mut waits: Vec<Vec<(u32, u32)>> = vec![Vec::new(); p];
        for (server, agents) in assignments {
            for (j, (agent, part)) in agents.iter().enumerate() {
                parts[*agent as usize].push((*server, part.clone()));
                if j > 0 {
                    // Several agents of one server send one after the other.
                    let previous = agents[j - 1].0;
                    let w = &mut waits[*agent as usize];
                    if previous != *agent && !w.contains(&(previous, 0)) {
                        w.push((previous, 0));
                    }
                }
            }
        }
        let round_bytes = match direction {
            Direction::Read => u64::MAX,
            Direction::Write => self.cb_buffer_size.max(1),
        };
        let mut processes: Vec<Vec<Batch>> = vec![Vec::new(); p];
        let mut exchanges = Vec::new();
        for (agent, agent_parts) in parts.iter().enumerate() {
            for (r, round) in rounds(agent_parts, round_bytes).into_iter().enumerate() {
                let mut batch = Batch {
                    after_previous: r > 0,
                    ..Batch::default()
                };
                if r == 0 && !waits[agent].is_empty() {
                    batch.after_sent = waits[agent].clone();
                    batch.delay = self.group_delay;
                }
                for (server, extents) in &round {
                    batch.requests.extend(pack(extents, self.max_segments));
                    if direction == Direction::Write {
                        let owners = &per_server[*server as usize];
                        exchanges.extend(owners_to_agent(owners, extents, agent, r));
                    }
                }
                processes[agent].push(batch);
            }
        }
        (processes, exchanges)
    }

    /// In a read, what the agents did not read for a process it reads
    /// itself, after the agents' synchronization, so that their requests
    /// reach the servers first.
    fn read_the_rest(&self, own: &[Vec<Extent>], processes: &mut [Vec<Batch>]) {
        let agents: Vec<(u32, u32)> = (0..processes.len() as u32)
            .filter(|&r| !processes[r as usize].is_empty())
            .map(|r| (r, 0))
            .collect();
        for (rank, batches) in processes.iter_mut().enumerate() {
            let read: Vec<Extent> = normalize(
                &batches
                    .iter()
                    .flat_map(|b| b.requests.iter().flat_map(|r| r.extents.iter().copied()))
                    .collect::<Vec<_>>(),
            );
            let rest = subtract(&own[rank], &read);
            if !rest.is_empty() {
                batches.push(Batch {
                    requests: pack(&rest, self.max_segments),
                    after_sent: agents.clone(),
                    delay: self.group_delay,
                    ..Batch::default()
                });
            }
        }
    }
}

/// What the owners of a server's data send `agent` for its round `round`
/// of `extents` there.
fn owners_to_agent(
    owners: &[Vec<Extent>],
    extents: &[Extent],
    agent: usize,
    round: usize,
) -> Vec<Exchange> {
    owners
        .iter()
        .enumerate()
        .filter(|&(owner, _)| owner != agent)
        .filter_map(|(owner, owned)| {
            let moved = super::extents::intersect(owned, extents);
            (!moved.is_empty()).then(|| Exchange {
                from: owner as u32,
                to: agent as u32,
                batch: round as u32,
                bytes: bytes_of(&moved),
                extents: moved.into(),
            })
        })
        .collect()
}

/// The processes with data, in sets of those that share a server directly
/// or through others (union-find), each set in rank order, the sets in
/// the order of their lowest rank.
fn sharing_sets(per_server: &[Vec<Vec<Extent>>], own: &[Vec<Extent>]) -> Vec<Vec<u32>> {
    let mut parent: Vec<usize> = (0..own.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for ranks in per_server {
        let mut first = None;
        for (rank, extents) in ranks.iter().enumerate() {
            if extents.is_empty() {
                continue;
            }
            match first {
                None => first = Some(rank),
                Some(f) => {
                    let (a, b) = (root(&mut parent, f), root(&mut parent, rank));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let mut sets: Vec<Vec<u32>> = Vec::new();
    let mut set_of = vec![usize::MAX; own.len()];
    for (rank, extents) in own.iter().enumerate() {
        if extents.is_empty() {
            continue;
        }
        let r = root(&mut parent, rank);
        if set_of[r] == usize::MAX {
            set_of[r] = sets.len();
            sets.push(Vec::new());
        }
        sets[set_of[r]].push(rank as u32);
    }
    sets
}

/// An agent's parts cut, in order, into rounds of at most `limit` bytes.
fn rounds(parts: &[(u32, Vec<Extent>)], limit: u64) -> Vec<Vec<(u32, Vec<Extent>)>> {
    let mut out: Vec<Vec<(u32, Vec<Extent>)>> = Vec::new();
    let mut room = 0u64;
    for (server, extents) in parts {
        for &e in extents {
            let mut e = e;
            while e.len > 0 {
                if room == 0 {
                    out.push(Vec::new());
                    room = limit;
                }
                let take = e.len.min(room);
                let round = out.last_mut().expect("a round was just opened");
                match round.last_mut() {
                    Some((s, list)) if s == server => list.push(Extent::new(e.offset, take)),
                    _ => round.push((*server, vec![Extent::new(e.offset, take)])),
                }
                room -= take;
                e = Extent::new(e.offset + take, e.len - take);
            }
        }
    }
    out
}

/// An agent and the part of its server's access set it accesses.
type AgentPart = (u32, Vec<Extent>);

/// `extents` (normalized) cut into `parts` consecutive pieces of nearly
/// equal bytes.
fn split_bytes(extents: &[Extent], parts: usize) -> Vec<Vec<Extent>> {
    let total = bytes_of(extents);
    let parts = parts.max(1);
    let mut out = vec![Vec::new(); parts];
    let mut before = 0u64;
    for &e in extents {
        let mut e = e;
        while e.len > 0 {
            let part = ((before * parts as u64) / total.max(1)) as usize;
            let part_end = (total * (part as u64 + 1)).div_ceil(parts as u64);
            let take = e.len.min(part_end - before).max(1).min(e.len);
            out[part.min(parts - 1)].push(Extent::new(e.offset, take));
            e = Extent::new(e.offset + take, e.len - take);
            before += take;
        }
    }
    out
}
