//! Edge colouring of a bipartite multigraph with exactly Δ colours (König's
//! theorem): the optimal schedule of unit transfers, one colour per step.
//!
//! Written here rather than taken from a crate: none of the graph crates
//! colours bipartite multigraphs' edges, and this is the product's optimum.
//!
//! The method is the divide-and-conquer of Gabow and of Cole and Hopcroft,
//! with Goel, Kapralov and Khanna's random-walk matching for odd degrees:
//! 1. Pack each side's vertices into bins of total degree at most Δ and
//!    pad with dummy edges until every bin has degree Δ: a Δ-regular
//!    bipartite multigraph with about E / Δ vertices per side. A proper
//!    colouring of it is a proper colouring of the original graph (two
//!    edges that share a vertex share its bin).
//! 2. A d-regular graph with d even splits along Euler circuits into two
//!    (d/2)-regular halves, coloured apart with d/2 colours each.
//! 3. With d odd, a perfect matching (which a regular bipartite graph
//!    always has) takes one colour and leaves a (d−1)-regular graph. It is
//!    found by random walks in O(n log n) expected time, independent of d.
//!
//! Each level of the recursion touches every edge once: O(E log Δ) in all,
//! plus the matchings. Edges are partitioned in place, so memory stays at
//! the edge list and a few arrays of its length. The two halves of a large
//! split are coloured in parallel; the walks draw from seeds fixed by their
//! place in the recursion, so the same graph always gets the same
//! colouring, whatever the threads do.

use std::sync::atomic::{AtomicU32, Ordering};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NONE: u32 = u32::MAX;
/// The random walks' seed ("konig"), mixed with the first colour of the
/// subgraph being matched.
const WALK_SEED: u64 = 0x006b_6f6e_6967;

/// One edge of the padded regular graph: its bins and, for a real edge,
/// its index in the input (`NONE` for padding).
#[derive(Clone, Copy, Debug)]
struct Edge {
    left: u32,
    right: u32,
    id: u32,
}

/// Colours the edges `(left, right)` of a bipartite multigraph with `left`
/// and `right` vertices: returns Δ and each edge's colour in `0..Δ`, no two
/// edges at one vertex sharing a colour.
pub fn colour_edges(left: u32, right: u32, edges: &[(u32, u32)]) -> (u32, Vec<u32>) {
    let colours: Vec<AtomicU32> = (0..edges.len()).map(|_| AtomicU32::new(NONE)).collect();
    let done = |colours: Vec<AtomicU32>| colours.into_iter().map(AtomicU32::into_inner).collect();
    let mut deg_l = vec![0u32; left as usize];
    let mut deg_r = vec![0u32; right as usize];
    for &(u, v) in edges {
        deg_l[u as usize] += 1;
        deg_r[v as usize] += 1;
    }
    let delta = deg_l.iter().chain(&deg_r).copied().max().unwrap_or(0);
    if delta == 0 {
        return (0, done(colours));
    }
    let (bin_l, load_l) = pack(&deg_l, delta);
    let (bin_r, load_r) = pack(&deg_r, delta);
    let n = load_l.len().max(load_r.len());
    let mut graph: Vec<Edge> = Vec::with_capacity(n * delta as usize);
    graph.extend(edges.iter().enumerate().map(|(i, &(u, v))| Edge {
        left: bin_l[u as usize],
        right: bin_r[v as usize],
        id: i as u32,
    }));
    // Padding: pair the bins' deficits in order, left against right.
    let deficit = |load: &[u32], i: usize| delta - load.get(i).copied().unwrap_or(0);
    let (mut i, mut j) = (0usize, 0usize);
    let (mut need_l, mut need_r) = (deficit(&load_l, 0), deficit(&load_r, 0));
    while i < n && j < n {
        let k = need_l.min(need_r);
        graph.extend((0..k).map(|_| Edge {
            left: i as u32,
            right: j as u32,
            id: NONE,
        }));
        need_l -= k;
        need_r -= k;
        if need_l == 0 {
            i += 1;
            if i < n {
                need_l = deficit(&load_l, i);
            }
        }
        if need_r == 0 {
            j += 1;
            if j < n {
                need_r = deficit(&load_r, j);
            }
        }
    }
    debug_assert_eq!(graph.len(), n * delta as usize);
    // Sorted, parallel edges sit side by side (see `euler_split`).
    graph.sort_unstable_by_key(|e| (e.left, e.right));
    let mut work = Work::new(n);
    colour_regular(&mut graph, delta, 0, &mut work, &colours);
    (delta, done(colours))
}

/// Consecutive vertices into bins of total degree at most `cap`: each
/// vertex's bin, and each bin's degree.
fn pack(degrees: &[u32], cap: u32) -> (Vec<u32>, Vec<u32>) {
    let mut bin = Vec::with_capacity(degrees.len());
    let mut load: Vec<u32> = vec![0];
    for &d in degrees {
        let last = load.len() - 1;
        if load[last] + d > cap {
            load.push(d);
        } else {
            load[last] += d;
        }
        bin.push((load.len() - 1) as u32);
    }
    (bin, load)
}

/// Scratch space reused across the recursion.
struct Work {
    /// Per vertex (left then right): the edge waiting for a partner, or
    /// the vertex's place on the walk.
    mark: Vec<u32>,
    partner_l: Vec<u32>,
    partner_r: Vec<u32>,
    side: Vec<u8>,
    start: Vec<u32>,
    adjacent: Vec<u32>,
    mate_l: Vec<u32>,
    mate_r: Vec<u32>,
    walk: Vec<(u32, u32)>,
    spill: Vec<Edge>,
}

impl Work {
    fn new(n: usize) -> Work {
        Work {
            mark: vec![NONE; 2 * n],
            partner_l: Vec::new(),
            partner_r: Vec::new(),
            side: Vec::new(),
            start: vec![0; n + 1],
            adjacent: Vec::new(),
            mate_l: vec![NONE; n],
            mate_r: vec![NONE; n],
            walk: Vec::new(),
            spill: Vec::new(),
        }
    }
}

/// Colours a `d`-regular slice with colours `first..first + d`.
/// The two halves of an Euler split are coloured on two threads (rayon)
/// when they are at least this many edges.
const PARALLEL_EDGES: usize = 1 << 16;

/// Colours a `d`-regular slice with colours `first..first + d`.
fn colour_regular(es: &mut [Edge], d: u32, first: u32, work: &mut Work, out: &[AtomicU32]) {
    match d {
        0 => {}
        1 => paint(es, first, out),
        _ if d % 2 == 1 => {
            // The walks' seed depends only on where they are in the
            // recursion, not on which thread runs them.
            let rest = perfect_matching(es, d, work, first);
            let (rest, m) = es.split_at_mut(rest);
            paint(m, first, out);
            colour_regular(rest, d - 1, first + 1, work, out);
        }
        _ => {
            let half = euler_split(es, work);
            let (a, b) = es.split_at_mut(half);
            if half >= PARALLEL_EDGES {
                let n = work.mate_l.len();
                rayon::join(
                    || colour_regular(a, d / 2, first, work, out),
                    || colour_regular(b, d / 2, first + d / 2, &mut Work::new(n), out),
                );
            } else {
                colour_regular(a, d / 2, first, work, out);
                colour_regular(b, d / 2, first + d / 2, work, out);
            }
        }
    }
}

fn paint(es: &[Edge], colour: u32, out: &[AtomicU32]) {
    for e in es {
        if e.id != NONE {
            // Each edge is painted once, by whichever thread holds its slice.
            out[e.id as usize].store(colour, Ordering::Relaxed);
        }
    }
}

/// Splits a regular slice of even degree into two halves of half the
/// degree, in place; returns the first half's length. At every vertex the
/// edges are paired; following the pairs alternately at right and left
/// ends traces closed trails of even length, whose edges go alternately to
/// the two halves, so each pair is split between them.
fn euler_split(es: &mut [Edge], work: &mut Work) -> usize {
    let m = es.len();
    let n = work.mate_l.len();
    let (mark_l, mark_r) = work.mark.split_at_mut(n);
    work.partner_l.resize(m, NONE);
    work.partner_r.resize(m, NONE);
    work.side.clear();
    work.side.resize(m, 2);
    let mut i = 0;
    while i < m {
        let e = es[i];
        // The slice is sorted by (left, right): two parallel edges in a row
        // are paired at both ends, a closed trail of two, split at once.
        if i + 1 < m && (es[i + 1].left, es[i + 1].right) == (e.left, e.right) {
            work.side[i] = 0;
            work.side[i + 1] = 1;
            i += 2;
            continue;
        }
        for (mark, partner, v) in [
            (&mut *mark_l, &mut work.partner_l, e.left),
            (&mut *mark_r, &mut work.partner_r, e.right),
        ] {
            let waiting = &mut mark[v as usize];
            if *waiting == NONE {
                *waiting = i as u32;
            } else {
                partner[i] = *waiting;
                partner[*waiting as usize] = i as u32;
                *waiting = NONE;
            }
        }
        i += 1;
    }
    // Every degree is even, so every mark is back to NONE.
    for start in 0..m {
        if work.side[start] != 2 {
            continue;
        }
        let mut e = start;
        loop {
            work.side[e] = 0;
            let p = work.partner_r[e] as usize;
            work.side[p] = 1;
            e = work.partner_l[p] as usize;
            if e == start {
                break;
            }
        }
    }
    partition(es, &work.side[..m], &mut work.spill)
}

/// Moves the edges whose flag is 0 to the front, keeping the order of
/// both groups (so both stay sorted by (left, right)); returns how many.
fn partition(es: &mut [Edge], flags: &[u8], spill: &mut Vec<Edge>) -> usize {
    spill.clear();
    let mut k = 0;
    for i in 0..es.len() {
        if flags[i] == 0 {
            es[k] = es[i];
            k += 1;
        } else {
            spill.push(es[i]);
        }
    }
    es[k..].copy_from_slice(spill);
    k
}

/// A perfect matching of a `d`-regular slice (d ≥ 2) on all the bins,
/// moved to its end; returns where it starts.
/// Goel, Kapralov and Khanna: from each free left vertex, walk at random —
/// from a left vertex along one of its unmatched edges, from a matched
/// right vertex back along its matched edge — until a free right vertex;
/// cut the walk's cycles as they form and flip the path that remains.
fn perfect_matching(es: &mut [Edge], d: u32, work: &mut Work, seed: u32) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(WALK_SEED ^ u64::from(seed));
    let n = work.mate_l.len();
    // Left adjacency (indices into es), by counting sort.
    let start = &mut work.start;
    start.iter_mut().for_each(|s| *s = 0);
    for e in es.iter() {
        start[e.left as usize + 1] += 1;
    }
    for v in 0..n {
        start[v + 1] += start[v];
    }
    work.adjacent.resize(es.len(), 0);
    {
        let fill = &mut work.mark[..n];
        fill.copy_from_slice(&start[..n]);
        for (i, e) in es.iter().enumerate() {
            let slot = &mut fill[e.left as usize];
            work.adjacent[*slot as usize] = i as u32;
            *slot += 1;
        }
        fill.iter_mut().for_each(|f| *f = NONE);
    }
    work.mate_l.iter_mut().for_each(|m| *m = NONE);
    work.mate_r.iter_mut().for_each(|m| *m = NONE);
    let on_walk = &mut work.mark[..n];
    // Padding made every bin's degree Δ, so every vertex has d edges here.
    for root in 0..n {
        work.walk.clear();
        let mut u = root as u32;
        loop {
            // A random edge of u that is not its matched one.
            let base = start[u as usize] as usize;
            let e = loop {
                let e = work.adjacent[base + rng.gen_range(0..d as usize)];
                if e != work.mate_l[u as usize] {
                    break e;
                }
            };
            // A cycle back to u: drop it.
            let seen = on_walk[u as usize];
            if seen != NONE {
                for &(w, _) in &work.walk[seen as usize..] {
                    on_walk[w as usize] = NONE;
                }
                work.walk.truncate(seen as usize);
            }
            on_walk[u as usize] = work.walk.len() as u32;
            work.walk.push((u, e));
            let v = es[e as usize].right as usize;
            let held = work.mate_r[v];
            if held == NONE {
                break;
            }
            u = es[held as usize].left;
        }
        for &(w, e) in &work.walk {
            on_walk[w as usize] = NONE;
            work.mate_l[w as usize] = e;
            work.mate_r[es[e as usize].right as usize] = e;
        }
    }
    // The matching goes last, so that only it is spilled.
    work.side.clear();
    work.side.extend(
        es.iter()
            .enumerate()
            .map(|(i, e)| u8::from(work.mate_l[e.left as usize] == i as u32)),
    );
    partition(es, &work.side, &mut work.spill)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(left: u32, right: u32, edges: &[(u32, u32)]) {
        let (delta, colours) = colour_edges(left, right, edges);
        let mut seen = std::collections::HashSet::new();
        for (&(u, v), &c) in edges.iter().zip(&colours) {
            assert!(c < delta, "colour {c} of {delta}");
            assert!(seen.insert((0, u, c)), "client {u} has colour {c} twice");
            assert!(seen.insert((1, v, c)), "server {v} has colour {c} twice");
        }
    }

    #[test]
    fn parallel_edges_and_odd_degrees() {
        // Three parallel edges, a star, and an isolated vertex on each side.
        check(
            4,
            4,
            &[(0, 0), (0, 0), (0, 0), (1, 1), (1, 2), (1, 3), (2, 1)],
        );
    }

    #[test]
    fn complete_graphs_of_every_small_size() {
        for n in 1..=9u32 {
            let edges: Vec<(u32, u32)> = (0..n).flat_map(|u| (0..n).map(move |v| (u, v))).collect();
            check(n, n, &edges);
        }
    }

    #[test]
    fn large_graphs_split_on_two_threads_and_colour_the_same_every_time() {
        // 300 x 300 pairs, 1 to 3 transfers each: the first halves are past
        // the parallel threshold.
        let edges: Vec<(u32, u32)> = (0..300u32)
            .flat_map(|u| {
                (0..300u32).flat_map(move |v| (0..1 + (u * 7 + v * 13) % 3).map(move |_| (u, v)))
            })
            .collect();
        assert!(edges.len() > 2 * PARALLEL_EDGES);
        check(300, 300, &edges);
        assert_eq!(
            colour_edges(300, 300, &edges),
            colour_edges(300, 300, &edges)
        );
    }

    proptest! {
        #[test]
        fn random_multigraphs_get_delta_colours(
            left in 1u32..12,
            right in 1u32..12,
            raw in proptest::collection::vec((0u32..12, 0u32..12), 0..200),
        ) {
            let edges: Vec<(u32, u32)> = raw.into_iter().map(|(u, v)| (u % left, v % right)).collect();
            check(left, right, &edges);
        }
    }
}
