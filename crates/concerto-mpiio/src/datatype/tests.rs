use super::combiner::*;
use super::*;
use proptest::prelude::*;

/// A predefined type of `size` bytes.
fn named(size: i64) -> Vec<i64> {
    vec![NAMED, 0, size, size]
}

/// A derived type's description; lb and extent as given.
fn node(
    kind: i64,
    lb: i64,
    extent: i64,
    ints: &[i64],
    addrs: &[i64],
    children: &[Vec<i64>],
) -> Vec<i64> {
    let mut d = vec![
        kind,
        lb,
        extent,
        ints.len() as i64,
        addrs.len() as i64,
        children.len() as i64,
    ];
    d.extend_from_slice(ints);
    d.extend_from_slice(addrs);
    for c in children {
        d.extend_from_slice(c);
    }
    d
}

fn blocks(map: &Typemap) -> Vec<(i64, u64)> {
    map.blocks.iter().map(|b| (b.disp, b.len)).collect()
}

#[test]
fn vector_of_ints_is_its_strided_blocks() {
    // MPI_Type_vector(3, 2, 4, MPI_INT)
    let map = Typemap::decode(&node(VECTOR, 0, 40, &[3, 2, 4], &[], &[named(4)])).unwrap();
    assert_eq!(blocks(&map), vec![(0, 8), (16, 8), (32, 8)]);
    assert_eq!(map.size, 24);
}

#[test]
fn hvector_and_hindexed_take_their_strides_in_bytes() {
    let map = Typemap::decode(&node(HVECTOR, 0, 23, &[2, 1], &[20], &[named(3)])).unwrap();
    assert_eq!(blocks(&map), vec![(0, 3), (20, 3)]);
    let map = Typemap::decode(&node(HINDEXED, 0, 0, &[2, 1, 2], &[30, 5], &[named(2)])).unwrap();
    // type-map order is the order given, not ascending
    assert_eq!(blocks(&map), vec![(30, 2), (5, 4)]);
}

#[test]
fn indexed_and_indexed_block_count_displacements_in_child_extents() {
    let map = Typemap::decode(&node(INDEXED, 0, 0, &[2, 1, 2, 5, 0], &[], &[named(8)])).unwrap();
    assert_eq!(blocks(&map), vec![(40, 8), (0, 16)]);
    let map = Typemap::decode(&node(INDEXED_BLOCK, 0, 0, &[2, 2, 1, 4], &[], &[named(4)])).unwrap();
    assert_eq!(blocks(&map), vec![(4, 8), (16, 8)]);
}

#[test]
fn adjacent_blocks_are_joined_and_contiguous_types_are_one_block() {
    let map = Typemap::decode(&node(CONTIGUOUS, 0, 400, &[100], &[], &[named(4)])).unwrap();
    assert_eq!(blocks(&map), vec![(0, 400)]);
    assert!(map.is_contiguous());
    // a vector whose stride equals its block length is contiguous too
    let map = Typemap::decode(&node(VECTOR, 0, 24, &[3, 2, 2], &[], &[named(4)])).unwrap();
    assert_eq!(blocks(&map), vec![(0, 24)]);
}

#[test]
fn struct_places_each_member_at_its_displacement_and_resized_keeps_blocks() {
    // {int at 0, double x2 at 8}, resized to extent 32
    let st = node(STRUCT, 0, 24, &[2, 1, 2], &[0, 8], &[named(4), named(8)]);
    let map = Typemap::decode(&node(
        RESIZED,
        0,
        32,
        &[],
        &[0, 32],
        std::slice::from_ref(&st),
    ))
    .unwrap();
    assert_eq!(blocks(&map), vec![(0, 4), (8, 16)]);
    assert_eq!((map.lb, map.extent, map.size), (0, 32, 20));
    // two of the resized struct, contiguously: the second 32 bytes on
    let resized = node(RESIZED, 0, 32, &[], &[0, 32], &[st]);
    let map = Typemap::decode(&node(CONTIGUOUS, 0, 64, &[2], &[], &[resized])).unwrap();
    assert_eq!(blocks(&map), vec![(0, 4), (8, 16), (32, 4), (40, 16)]);
}

#[test]
fn subarray_in_c_and_fortran_order() {
    // 4x6 array of bytes, 2x3 starting at (1, 2)
    let c = node(SUBARRAY, 0, 24, &[2, 4, 6, 2, 3, 1, 2, 0], &[], &[named(1)]);
    assert_eq!(blocks(&Typemap::decode(&c).unwrap()), vec![(8, 3), (14, 3)]);
    let f = node(SUBARRAY, 0, 24, &[2, 4, 6, 2, 3, 1, 2, 1], &[], &[named(1)]);
    assert_eq!(
        blocks(&Typemap::decode(&f).unwrap()),
        vec![(9, 2), (13, 2), (17, 2)]
    );
}

#[test]
fn subarray_that_does_not_fit_is_refused_naming_the_dimension() {
    let bad = node(SUBARRAY, 0, 24, &[2, 4, 6, 2, 3, 3, 2, 0], &[], &[named(1)]);
    let e = Typemap::decode(&bad).unwrap_err();
    assert!(e.contains("dimension 0"), "{e}");
}

#[test]
fn darray_block_and_cyclic_distributions() {
    // 4x4 bytes on a 2x2 grid, block x block, rank 3 = coordinates (1, 1)
    let d = node(
        DARRAY,
        0,
        16,
        &[4, 3, 2, 4, 4, 0, 0, -1, -1, 2, 2, 0],
        &[],
        &[named(1)],
    );
    assert_eq!(
        blocks(&Typemap::decode(&d).unwrap()),
        vec![(10, 2), (14, 2)]
    );
    // 1-D, 8 elements cyclic(2) over 2 processes, rank 1: 2,3 and 6,7
    let d = node(DARRAY, 0, 8, &[2, 1, 1, 8, 1, 2, 2, 0], &[], &[named(1)]);
    assert_eq!(blocks(&Typemap::decode(&d).unwrap()), vec![(2, 2), (6, 2)]);
    // a grid that does not hold the processes
    let d = node(DARRAY, 0, 8, &[3, 1, 1, 8, 1, 2, 2, 0], &[], &[named(1)]);
    assert!(Typemap::decode(&d).unwrap_err().contains("process grid"));
}

#[test]
fn a_truncated_or_unknown_description_is_an_error_not_a_panic() {
    let full = node(VECTOR, 0, 40, &[3, 2, 4], &[], &[named(4)]);
    for cut in 0..full.len() {
        assert!(Typemap::decode(&full[..cut]).is_err(), "cut at {cut}");
    }
    assert!(Typemap::decode(&node(99, 0, 1, &[], &[], &[]))
        .unwrap_err()
        .contains("99"));
    assert!(
        Typemap::decode(&node(CONTIGUOUS, 0, 1, &[-3], &[], &[named(1)]))
            .unwrap_err()
            .contains("negative")
    );
}

/// Every element of an array of `sizes` bytes in C order, kept when inside
/// the box: the definition, element by element.
fn naive_subarray(sizes: &[u64], subsizes: &[u64], starts: &[u64]) -> Vec<(i64, u64)> {
    let total: u64 = sizes.iter().product();
    let mut out: Vec<(i64, u64)> = Vec::new();
    for linear in 0..total {
        let mut rest = linear;
        let mut inside = true;
        for d in (0..sizes.len()).rev() {
            let i = rest % sizes[d];
            rest /= sizes[d];
            inside &= i >= starts[d] && i < starts[d] + subsizes[d];
        }
        if inside {
            match out.last_mut() {
                Some(l) if l.0 + l.1 as i64 == linear as i64 => l.1 += 1,
                _ => out.push((linear as i64, 1)),
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn subarray_matches_the_element_by_element_definition(
        dims in prop::collection::vec((1u64..6, 0u64..6, 0u64..6), 1..4)
    ) {
        let sizes: Vec<u64> = dims.iter().map(|d| d.0).collect();
        let starts: Vec<u64> = dims.iter().map(|d| d.1 % d.0).collect();
        let subsizes: Vec<u64> = dims.iter().zip(&starts).map(|(d, s)| 1 + d.2 % (d.0 - s)).collect();
        let nd = sizes.len() as i64;
        let mut ints = vec![nd];
        ints.extend(sizes.iter().map(|&v| v as i64));
        ints.extend(subsizes.iter().map(|&v| v as i64));
        ints.extend(starts.iter().map(|&v| v as i64));
        ints.push(0);
        let total = sizes.iter().product::<u64>() as i64;
        let map = Typemap::decode(&node(SUBARRAY, 0, total, &ints, &[], &[named(1)])).unwrap();
        prop_assert_eq!(blocks(&map), naive_subarray(&sizes, &subsizes, &starts));
    }

    #[test]
    fn darray_processes_own_every_element_exactly_once(
        g in 1u64..9, h in 1u64..9, p in 1u64..4, q in 1u64..4, cyclic in any::<bool>(), darg in -1i64..3
    ) {
        let darg = if darg == 0 { 1 } else { darg };
        let distrib = i64::from(cyclic);
        // a block distribution needs darg * p >= g
        let darg_ok = |n: u64, procs: u64| cyclic || darg < 0 || darg as u64 * procs >= n;
        prop_assume!(darg_ok(g, p) && darg_ok(h, q));
        let mut seen = vec![0u32; (g * h) as usize];
        for rank in 0..p * q {
            let ints = [(p * q) as i64, rank as i64, 2, g as i64, h as i64, distrib, distrib, darg, darg, p as i64, q as i64, 0];
            let map = Typemap::decode(&node(DARRAY, 0, (g * h) as i64, &ints, &[], &[named(1)])).unwrap();
            for b in &map.blocks {
                for i in b.disp..b.disp + b.len as i64 {
                    seen[i as usize] += 1;
                }
            }
            // ascending within one process (C order over its owned indices)
            prop_assert!(map.blocks.windows(2).all(|w| w[0].disp + (w[0].len as i64) < w[1].disp + 1));
        }
        prop_assert!(seen.iter().all(|&n| n == 1), "{:?}", seen);
    }
}
