//! ThemisIO (Karrels et al., "ThemisIO: Fair and Efficient I/O Scheduling
//! for HPC", SC 2023): fairness by **statistical tokens**. Each time the
//! server may start a request it draws a token, seeded, among the jobs
//! that have requests waiting, each with the probability its share gives
//! it; the job drawn sends its oldest request. Only jobs with requests
//! waiting take part, so a share left unused goes to the others
//! (opportunity fairness), and over many draws each job's service follows
//! its share.
//!
//! The shares (`fairness`):
//! - `job`: every job the same;
//! - `user`: every user the same, a user's share split evenly among its
//!   jobs;
//! - `size`: in proportion to the job's node count (`jobs` table; a job
//!   not listed counts one node);
//! - `group-user`: every group the same (`groups` table; a user in none
//!   is a group of its own), a group's share split evenly among its users,
//!   a user's among its jobs.
//!
//! Where the paper leaves it open, and what is chosen: a token is one
//! request (requests of one size share bytes the same way); node counts
//! and groups are the administrator's (a request's claims are not
//! trusted), and a request with no user counts as a user of its own job.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{positive, PolicySpec, RequestQueue, DEFAULT_DEPTH};
use crate::request::{AppId, Request};
use crate::time::Time;
use crate::FieldError;

/// How ThemisIO shares the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fairness {
    #[default]
    Job,
    User,
    Size,
    GroupUser,
}

/// A job's node count, for `size` fairness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobNodes {
    pub app: u32,
    pub nodes: u32,
}

/// A group's users, for `group-user` fairness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupUsers {
    pub group: u32,
    pub users: Vec<u32>,
}

/// `kind = "themisio"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThemisConfig {
    pub fairness: Fairness,
    pub depth: u32,
    /// Seeds the token draws: the same arrivals and calls, the same order.
    pub seed: u64,
    pub jobs: Vec<JobNodes>,
    pub groups: Vec<GroupUsers>,
}

impl Default for ThemisConfig {
    fn default() -> ThemisConfig {
        ThemisConfig {
            fairness: Fairness::Job,
            depth: DEFAULT_DEPTH,
            seed: 0,
            jobs: Vec::new(),
            groups: Vec::new(),
        }
    }
}

impl PolicySpec for ThemisConfig {
    const NAME: &'static str = "themisio";

    fn build(&self, _default_window: Time) -> Box<dyn RequestQueue> {
        Box::new(Themis::new(self))
    }

    fn validate(&self) -> Result<(), FieldError> {
        positive("depth", self.depth as u64)?;
        let mut apps = BTreeSet::new();
        for (i, j) in self.jobs.iter().enumerate() {
            positive("nodes", j.nodes as u64)
                .map_err(|e| FieldError::new(format!("jobs[{i}].{}", e.field), e.message))?;
            if !apps.insert(j.app) {
                return Err(FieldError::new(
                    format!("jobs[{i}].app"),
                    format!("job {} has two entries", j.app),
                ));
            }
        }
        let mut users = BTreeMap::new();
        for (i, g) in self.groups.iter().enumerate() {
            for &u in &g.users {
                if let Some(other) = users.insert(u, g.group) {
                    return Err(FieldError::new(
                        format!("groups[{i}].users"),
                        format!("user {u} is in group {other} already"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One level of the share tree: a group, a user or a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Group(u32),
    /// A group of one user who is in no group.
    Ungrouped(u32),
    User(u32),
    /// The user of a job whose requests name none.
    JobsOwnUser(AppId),
    Job(AppId),
}

pub struct Themis {
    fairness: Fairness,
    depth: u32,
    nodes: BTreeMap<AppId, u32>,
    group_of: BTreeMap<u32, u32>,
    rng: ChaCha8Rng,
    /// Each job's waiting requests, and the user its latest request named.
    jobs: BTreeMap<AppId, (VecDeque<Request>, Option<u32>)>,
    in_flight: u32,
    waiting: usize,
}

impl Themis {
    pub fn new(config: &ThemisConfig) -> Themis {
        Themis {
            fairness: config.fairness,
            depth: config.depth.max(1),
            nodes: config
                .jobs
                .iter()
                .map(|j| (AppId(j.app), j.nodes.max(1)))
                .collect(),
            group_of: config
                .groups
                .iter()
                .flat_map(|g| g.users.iter().map(move |&u| (u, g.group)))
                .collect(),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            jobs: BTreeMap::new(),
            in_flight: 0,
            waiting: 0,
        }
    }

    /// A job's place in the share tree, from the top level down.
    fn path(&self, app: AppId, user: Option<u32>) -> Vec<Node> {
        let user_node = user.map_or(Node::JobsOwnUser(app), Node::User);
        match self.fairness {
            Fairness::Job | Fairness::Size => vec![Node::Job(app)],
            Fairness::User => vec![user_node, Node::Job(app)],
            Fairness::GroupUser => {
                let group = match user {
                    Some(u) => self
                        .group_of
                        .get(&u)
                        .map_or(Node::Ungrouped(u), |&g| Node::Group(g)),
                    None => Node::JobsOwnUser(app),
                };
                vec![group, user_node, Node::Job(app)]
            }
        }
    }

    /// The weight of a job among its siblings: its node count under `size`.
    fn job_weight(&self, app: AppId) -> f64 {
        match self.fairness {
            Fairness::Size => self.nodes.get(&app).copied().unwrap_or(1) as f64,
            _ => 1.0,
        }
    }

    /// Each job with requests waiting and the share the policy gives it
    /// among them (the shares add up to 1).
    pub fn shares(&self) -> BTreeMap<AppId, f64> {
        let active: Vec<(Vec<Node>, AppId)> = self
            .jobs
            .iter()
            .filter(|(_, (q, _))| !q.is_empty())
            .map(|(&app, (_, user))| (self.path(app, *user), app))
            .collect();
        let mut shares = BTreeMap::new();
        self.split(&active, 0, 1.0, &mut shares);
        shares
    }

    /// Splits `share` among the distinct nodes at `level` of `active`:
    /// evenly above the jobs, by weight among jobs.
    fn split(
        &self,
        active: &[(Vec<Node>, AppId)],
        level: usize,
        share: f64,
        out: &mut BTreeMap<AppId, f64>,
    ) {
        let children: BTreeSet<Node> = active.iter().map(|(p, _)| p[level]).collect();
        let weight = |n: &Node| match n {
            Node::Job(app) => self.job_weight(*app),
            _ => 1.0,
        };
        let total: f64 = children.iter().map(weight).sum();
        for child in children {
            let part = share * weight(&child) / total;
            let below: Vec<(Vec<Node>, AppId)> = active
                .iter()
                .filter(|(p, _)| p[level] == child)
                .cloned()
                .collect();
            match child {
                Node::Job(app) => {
                    out.insert(app, part);
                }
                _ => self.split(&below, level + 1, part, out),
            }
        }
    }

    /// Draws the job whose request goes next: a token among the jobs with
    /// requests waiting, by their shares.
    fn draw(&mut self) -> Option<AppId> {
        let shares = self.shares();
        let mut token = self.rng.gen::<f64>();
        let mut last = None;
        for (app, share) in shares {
            last = Some(app);
            if token < share {
                return Some(app);
            }
            token -= share;
        }
        // Rounding left the token past the last share: the last job.
        last
    }
}

impl RequestQueue for Themis {
    fn name(&self) -> &'static str {
        "themisio"
    }

    fn enqueue(&mut self, req: Request, _now: Time) {
        let (queue, user) = self.jobs.entry(req.app).or_default();
        *user = req.user;
        queue.push_back(req);
        self.waiting += 1;
    }

    fn dispatch(&mut self, _now: Time, free_slots: u32, out: &mut Vec<Request>) {
        let mut free = free_slots.min(self.depth.saturating_sub(self.in_flight));
        while free > 0 && self.waiting > 0 {
            let Some(app) = self.draw() else {
                return;
            };
            let Some((queue, _)) = self.jobs.get_mut(&app) else {
                return;
            };
            let Some(req) = queue.pop_front() else {
                return;
            };
            if queue.is_empty() {
                self.jobs.remove(&app);
            }
            self.waiting -= 1;
            self.in_flight += 1;
            free -= 1;
            out.push(req);
        }
    }

    fn complete(&mut self, _req: &Request, _now: Time) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    fn depth(&self) -> Option<u32> {
        Some(self.depth)
    }

    fn len(&self) -> usize {
        self.waiting
    }
}

#[cfg(test)]
mod tests;
