//! Resonant I/O (resonant-io.txt, Section 3): every I/O server's data is
//! requested in ascending offsets, by one process.

use super::extents::{bytes_of, normalize, subtract};
use super::{
    by_server, pack, prepare, Batch, CollectivePlan, Direction, Exchange, PlanError, Planner,
};
use crate::layout::StripeLayout;
use crate::request::Extent;
use crate::time::Time;

/// Section 3.3: each I/O server's access set (the requested data it holds)
/// is accessed by one agent, the process that requests the most data from
/// it and is not yet an agent (ties: the lowest rank; once every process
/// is an agent, agents serve several servers), in ascending offsets, as
/// list I/O of at most `max_segments` extents per request. With
/// `agents_per_server` > 1 the access set is cut into that many
/// consecutive parts, whose agents send one after the other. In a write
/// the owners first send their data to the agents. In a read there is no
/// exchange: the agents send their requests first, and once all have
/// been sent every process reads directly what it still needs, which the
/// servers then find in their caches (the prefetch arrangement).
///
/// Section 3.4: when the processes' data is ordered by rank (each process's
/// offsets below the next one's), no agents are needed. The processes are
/// placed in sets that share no server; in each set they go in groups of n
/// (n = servers in the layout) by rank, each group sending `group_delay`
/// after the previous one has sent, and every process accesses its own data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resonant {
    pub max_segments: usize,
    pub agents_per_server: u32,
    pub group_delay: Time,
}

impl Default for Resonant {
    fn default() -> Resonant {
        Resonant {
            max_segments: 64,
            agents_per_server: 1,
            group_delay: Time::from_micros(500),
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
        let own = prepare(direction, accesses, false)?.own;
        if non_overlapping(&own) {
            Ok(self.timed_groups(direction, &own, layout))
        } else {
            Ok(self.agents(direction, &own, layout))
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
        // Processes that share a server are in one set (union-find).
        let mut parent: Vec<usize> = (0..own.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        for ranks in &per_server {
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
        let n = layout.stripe_count().max(1) as usize;
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
        let mut processes: Vec<Vec<Batch>> = vec![Vec::new(); own.len()];
        for set in &sets {
            for (i, &rank) in set.iter().enumerate() {
                let group = i / n;
                let previous = if group == 0 {
                    &[][..]
                } else {
                    &set[(group - 1) * n..group * n]
                };
                processes[rank as usize].push(Batch {
                    requests: pack(&own[rank as usize], self.max_segments),
                    after_sent: previous.iter().map(|&r| (r, 0)).collect(),
                    delay: if group == 0 {
                        Time::ZERO
                    } else {
                        self.group_delay
                    },
                    ..Batch::default()
                });
            }
        }
        CollectivePlan {
            direction,
            processes,
            exchanges: Vec::new(),
            agents: Vec::new(),
            arrangement: format!(
                "timed groups (data ordered by rank): {} set(s) of processes sharing servers, groups of {n}, {} apart",
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
    ) -> CollectivePlan {
        let per_server = by_server(own, layout);
        let p = own.len();
        let k = (self.agents_per_server as usize).min(p);
        let mut is_agent = vec![false; p];
        // (server, agents in order, each agent's part of the access set).
        let mut assignments: Vec<(u32, Vec<AgentPart>)> = Vec::new();
        for &server in layout.servers() {
            let ranks = &per_server[server as usize];
            let access_set = normalize(&ranks.concat());
            if access_set.is_empty() {
                continue;
            }
            let mut by_bytes: Vec<(u64, u32)> = ranks
                .iter()
                .enumerate()
                .map(|(r, e)| (bytes_of(e), r as u32))
                .collect();
            by_bytes.sort_unstable_by_key(|&(b, r)| (std::cmp::Reverse(b), r));
            let fresh = by_bytes.iter().filter(|&&(_, r)| !is_agent[r as usize]);
            let again = by_bytes.iter().filter(|&&(_, r)| is_agent[r as usize]);
            let chosen: Vec<u32> = fresh.chain(again).take(k).map(|&(_, r)| r).collect();
            for &r in &chosen {
                is_agent[r as usize] = true;
            }
            let parts = split_bytes(&access_set, chosen.len());
            assignments.push((server, chosen.into_iter().zip(parts).collect()));
        }
        let mut processes: Vec<Vec<Batch>> = vec![Vec::new(); p];
        for (_, agents) in &assignments {
            for (j, (agent, part)) in agents.iter().enumerate() {
                let batches = &mut processes[*agent as usize];
                if batches.is_empty() {
                    batches.push(Batch::default());
                }
                batches[0].requests.extend(pack(part, self.max_segments));
                if j > 0 {
                    // Several agents of one server send one after the other.
                    let previous = agents[j - 1].0;
                    if previous != *agent && !batches[0].after_sent.contains(&(previous, 0)) {
                        batches[0].after_sent.push((previous, 0));
                        batches[0].delay = self.group_delay;
                    }
                }
            }
        }
        let mut exchanges = Vec::new();
        match direction {
            Direction::Write => {
                for (server, agents) in &assignments {
                    for (owner, extents) in per_server[*server as usize].iter().enumerate() {
                        for (agent, part) in agents {
                            if *agent as usize == owner {
                                continue;
                            }
                            let moved = super::extents::intersect(extents, part);
                            if !moved.is_empty() {
                                exchanges.push(Exchange {
                                    from: owner as u32,
                                    to: *agent,
                                    batch: 0,
                                    bytes: bytes_of(&moved),
                                    extents: moved,
                                });
                            }
                        }
                    }
                }
            }
            Direction::Read => {
                let agents: Vec<(u32, u32)> = (0..p as u32)
                    .filter(|&r| !processes[r as usize].is_empty())
                    .map(|r| (r, 0))
                    .collect();
                for rank in 0..p {
                    let read: Vec<Extent> = normalize(
                        &processes[rank]
                            .iter()
                            .flat_map(|b| b.requests.iter().flat_map(|r| r.extents.iter().copied()))
                            .collect::<Vec<_>>(),
                    );
                    let rest = subtract(&own[rank], &read);
                    if !rest.is_empty() {
                        processes[rank].push(Batch {
                            requests: pack(&rest, self.max_segments),
                            after_sent: agents.clone(),
                            ..Batch::default()
                        });
                    }
                }
            }
        }
        let agents: Vec<(u32, Vec<u32>)> = assignments
            .into_iter()
            .map(|(s, a)| (s, a.into_iter().map(|(r, _)| r).collect()))
            .collect();
        CollectivePlan {
            direction,
            processes,
            exchanges,
            arrangement: format!(
                "one agent per server's data ({} per server at most)",
                self.agents_per_server
            ),
            agents,
        }
    }
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
