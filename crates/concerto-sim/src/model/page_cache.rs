//! The kernel's page cache on a client node (`cluster.page_cache`): what a
//! node's processes wrote or read through the mount stays in its memory,
//! and a later read of those bytes on that node is served from there, at
//! the page cache's copy rate, without a request to any server. So IOR's
//! and mdtest's read of what their tasks just wrote on one node (measured
//! through Concerto's mount: IOR 4.0.0's read at 2.8 GB/s on four HDD-class
//! servers, mdtest's File read at 2,626 files per second,
//! `tests/data/twin/`) is simulated as the node's memory, not the disks.
//!
//! Coherence is the mount's close-to-open: a node's open sees the file's
//! latest change by another node, and keeps its pages only when that came
//! before them. Without opens in the model, the check is made at the read:
//! a node's bytes of a file held since some point are dropped when another
//! node wrote the file after that point (its own writes keep them). So one
//! node's tasks read back a shared file they wrote, and tasks on several
//! nodes writing one file read it from the servers. The cache holds all a
//! run touches (no eviction): the nodes are taken to have the memory.

use std::collections::BTreeMap;

use concerto_core::request::Extent;
use concerto_core::Time;

use super::{Class, Event, Simulation};

/// Every node's cache, and when each node last wrote each file.
#[derive(Default)]
pub(super) struct PageCaches {
    nodes: Vec<NodeCache>,
    /// Writes counted in order: a write's place.
    writes: u64,
    /// Per file, per node, the place of its latest write.
    last_write: BTreeMap<u32, BTreeMap<usize, u64>>,
}

/// One node's bytes of each file, as ascending disjoint ranges, since the
/// place (in `PageCaches::writes`) it began holding them.
#[derive(Default)]
struct NodeCache {
    files: BTreeMap<u32, (u64, Vec<(u64, u64)>)>,
}

impl PageCaches {
    pub(super) fn new(nodes: usize) -> PageCaches {
        PageCaches {
            nodes: std::iter::repeat_with(NodeCache::default)
                .take(nodes)
                .collect(),
            ..PageCaches::default()
        }
    }

    /// Whether `node` holds every byte of `extents` of `file`, after
    /// dropping what another node's later write made stale.
    fn holds(&mut self, node: usize, file: u32, extents: &[Extent]) -> bool {
        let Some(&(since, _)) = self.nodes[node].files.get(&file) else {
            return false;
        };
        let stale = self
            .last_write
            .get(&file)
            .is_some_and(|w| w.iter().any(|(&other, &at)| other != node && at > since));
        if stale {
            self.nodes[node].files.remove(&file);
            return false;
        }
        let ranges = &self.nodes[node].files[&file].1;
        extents.iter().all(|e| {
            e.len == 0
                || ranges
                    .iter()
                    .any(|&(lo, hi)| lo <= e.offset && e.offset + e.len <= hi)
        })
    }

    /// `node` holds `extents` of `file` too (it wrote or read them).
    fn add(&mut self, node: usize, file: u32, extents: &[Extent], write: bool) {
        if write {
            self.writes += 1;
            self.last_write
                .entry(file)
                .or_default()
                .insert(node, self.writes);
        }
        let (_, ranges) = self.nodes[node]
            .files
            .entry(file)
            .or_insert((self.writes, Vec::new()));
        for e in extents.iter().filter(|e| e.len > 0) {
            ranges.push((e.offset, e.offset + e.len));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for &(lo, hi) in ranges.iter() {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        *ranges = merged;
    }
}

impl Simulation<'_> {
    /// A read by `rank` of `extents` of `file` at `now`: true, with the
    /// step's end scheduled, when its node holds them all.
    pub(super) fn read_from_page_cache(
        &mut self,
        rank: u32,
        file: u32,
        extents: &[Extent],
        now: Time,
    ) -> bool {
        let Some(rate) = self.sc.cluster.page_cache else {
            return false;
        };
        let node = self.ranks[rank as usize].nic as usize;
        if !self.page_caches.holds(node, file, extents) {
            return false;
        }
        let bytes: u64 = extents.iter().map(|e| e.len).sum();
        let a = &mut self.apps[self.ranks[rank as usize].app as usize];
        a.bytes += bytes;
        self.events.schedule(
            now + rate.transfer_time(bytes),
            Class::Normal,
            0,
            Event::StepDone { rank },
        );
        true
    }

    /// `rank`'s node now holds `extents` of `file` (it wrote or read them).
    pub(super) fn page_cache_keeps(
        &mut self,
        rank: u32,
        file: u32,
        extents: &[Extent],
        write: bool,
    ) {
        if self.sc.cluster.page_cache.is_none() {
            return;
        }
        let node = self.ranks[rank as usize].nic as usize;
        self.page_caches.add(node, file, extents, write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_holds_what_it_added_merged_and_nothing_else() {
        let mut c = PageCaches::new(2);
        c.add(0, 1, &[Extent::new(0, 100), Extent::new(200, 50)], true);
        c.add(0, 1, &[Extent::new(100, 100)], true);
        assert!(c.holds(0, 1, &[Extent::new(0, 250)]));
        assert!(!c.holds(0, 1, &[Extent::new(240, 20)]));
        assert!(!c.holds(0, 2, &[Extent::new(0, 1)]));
        assert!(
            !c.holds(1, 1, &[Extent::new(0, 1)]),
            "another node holds nothing"
        );
    }

    #[test]
    fn another_nodes_later_write_makes_a_nodes_bytes_stale_its_own_do_not() {
        let mut c = PageCaches::new(2);
        c.add(0, 1, &[Extent::new(0, 100)], true);
        c.add(1, 1, &[Extent::new(100, 100)], true);
        c.add(0, 1, &[Extent::new(200, 100)], true);
        assert!(
            !c.holds(0, 1, &[Extent::new(200, 100)]),
            "node 1 wrote after node 0 began"
        );
        assert!(
            !c.holds(1, 1, &[Extent::new(100, 100)]),
            "node 0 wrote after node 1 began"
        );
        // Read again, then held until someone else writes.
        c.add(0, 1, &[Extent::new(0, 300)], false);
        assert!(c.holds(0, 1, &[Extent::new(0, 300)]));
        c.add(0, 1, &[Extent::new(300, 10)], true);
        assert!(
            c.holds(0, 1, &[Extent::new(0, 310)]),
            "its own write keeps them"
        );
    }
}
