//! Sets of bytes as sorted, disjoint extent lists.

use crate::request::Extent;

/// The extents sorted, with overlapping and adjacent ones merged; empty
/// ones dropped.
pub fn normalize(extents: &[Extent]) -> Vec<Extent> {
    let mut v: Vec<Extent> = extents.iter().copied().filter(|e| e.len > 0).collect();
    // A process's list is usually ascending already: checking costs a
    // pass, sorting a million extents 15 times that. (The stable sort,
    // which merges ascending runs, was slower on the union of a call's
    // lists than this one: 50 against 34 ms for 1,024 runs of 1,024.)
    if !v.windows(2).all(|w| w[0].offset <= w[1].offset) {
        v.sort_unstable_by_key(|e| e.offset);
    }
    let mut out: Vec<Extent> = Vec::with_capacity(v.len());
    for e in v {
        match out.last_mut() {
            Some(last) if e.offset <= last.end() => {
                let end = last.end().max(e.end());
                last.len = end - last.offset;
            }
            _ => out.push(e),
        }
    }
    out
}

pub fn bytes_of(extents: &[Extent]) -> u64 {
    extents.iter().map(|e| e.len).sum()
}

/// `a` without `b` (both normalized).
pub fn subtract(a: &[Extent], b: &[Extent]) -> Vec<Extent> {
    let mut out = Vec::new();
    let mut j = 0;
    for &e in a {
        let mut start = e.offset;
        while j < b.len() && b[j].end() <= start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].offset < e.end() {
            if b[k].offset > start {
                out.push(Extent::new(start, b[k].offset - start));
            }
            start = start.max(b[k].end());
            k += 1;
        }
        if start < e.end() {
            out.push(Extent::new(start, e.end() - start));
        }
    }
    out
}

/// The bytes in both `a` and `b` (both normalized).
pub fn intersect(a: &[Extent], b: &[Extent]) -> Vec<Extent> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let start = a[i].offset.max(b[j].offset);
        let end = a[i].end().min(b[j].end());
        if start < end {
            out.push(Extent::new(start, end - start));
        }
        if a[i].end() < b[j].end() {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The parts of `a` (normalized) inside `[start, end)`.
pub fn window(a: &[Extent], start: u64, end: u64) -> Vec<Extent> {
    if start >= end {
        return Vec::new();
    }
    let from = a.partition_point(|e| e.end() <= start);
    a[from..]
        .iter()
        .take_while(|e| e.offset < end)
        .map(|e| {
            let s = e.offset.max(start);
            Extent::new(s, e.end().min(end) - s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(v: &[(u64, u64)]) -> Vec<Extent> {
        v.iter().map(|&(o, l)| Extent::new(o, l)).collect()
    }

    #[test]
    fn set_operations() {
        assert_eq!(
            normalize(&x(&[(10, 5), (0, 10), (20, 0), (14, 4)])),
            x(&[(0, 18)])
        );
        let a = x(&[(0, 10), (20, 10)]);
        let b = x(&[(5, 20)]);
        assert_eq!(subtract(&a, &b), x(&[(0, 5), (25, 5)]));
        assert_eq!(intersect(&a, &b), x(&[(5, 5), (20, 5)]));
        assert_eq!(window(&a, 5, 25), x(&[(5, 5), (20, 5)]));
        assert_eq!(window(&a, 5, 5), x(&[]));
        assert_eq!(bytes_of(&a), 20);
    }
}
