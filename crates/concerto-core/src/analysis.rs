//! Closed-form results the simulator is checked against.
//!
//! The coordination paper's model (Section 3.2): `m` applications each put
//! one piece of service time `t` on each of `n` servers, all at once.

/// Formula (1): expected average completion time without coordination, when
/// every server serves the `m` pieces in an independent uniformly random
/// order. `E[max of n uniform positions in 1..=m] · t = (m − Σ_{k<m} (k/m)^n) · t`.
/// (The paper writes the sum as `t/mⁿ Σ kⁿ`; the form here cannot overflow.)
pub fn fifo_expected_completion(m: u32, n: u32, t: f64) -> f64 {
    if m == 0 {
        return 0.0;
    }
    let mf = m as f64;
    let tail: f64 = (1..m).map(|k| (k as f64 / mf).powi(n as i32)).sum();
    (mf - tail) * t
}

/// Formula (2): with coordination all servers serve the applications in the
/// same order, so they finish at `t, 2t, …, mt`: the average is `(m+1)/2 · t`.
pub fn coordinated_expected_completion(m: u32, t: f64) -> f64 {
    (m as f64 + 1.0) / 2.0 * t
}

/// Formula (3): the expected reduction, formula (1) minus formula (2).
pub fn expected_reduction(m: u32, n: u32, t: f64) -> f64 {
    fifo_expected_completion(m, n, t) - coordinated_expected_completion(m, t)
}

/// Figures 3 and 5's MAX/MIN when every server serves the `m` pieces in an
/// independent uniformly random order: the expected ratio of an
/// application's last to its first finish position over `n` servers. With
/// positions iid uniform in `1..=m`, `P(min ≥ a, max ≤ b) = ((b−a+1)/m)ⁿ`;
/// inclusion–exclusion gives `P(min = a, max = b)`. This is the spread
/// servers that share no order produce; arrivals correlated across servers
/// (clients issuing in the same order) give less.
pub fn independent_order_spread(m: u32, n: u32) -> f64 {
    if m == 0 || n == 0 {
        return 1.0;
    }
    let inside = |a: u32, b: u32| -> f64 {
        if b < a {
            0.0
        } else {
            ((b - a + 1) as f64 / m as f64).powi(n as i32)
        }
    };
    let mut expected = 0.0;
    for a in 1..=m {
        for b in a..=m {
            let p = inside(a, b) - inside(a + 1, b) - inside(a, b - 1) + inside(a + 1, b - 1);
            expected += p * b as f64 / a as f64;
        }
    }
    expected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server_needs_no_coordination() {
        for m in 1..20 {
            assert!(
                (fifo_expected_completion(m, 1, 1.0) - coordinated_expected_completion(m, 1.0))
                    .abs()
                    < 1e-12
            );
        }
    }

    #[test]
    fn many_servers_approach_mt() {
        assert!((fifo_expected_completion(4, 200, 1.0) - 4.0).abs() < 1e-9);
        // The reduction rate tends to (m-1)/(2m).
        let m = 10;
        let rate = expected_reduction(m, 500, 1.0) / fifo_expected_completion(m, 500, 1.0);
        assert!((rate - 0.45).abs() < 1e-6);
    }

    #[test]
    fn matches_the_papers_summation_form() {
        // m t − t/mⁿ Σ kⁿ computed directly for small values.
        for (m, n) in [(2u32, 2u32), (3, 4), (5, 3)] {
            let direct = m as f64
                - (1..m).map(|k| (k as f64).powi(n as i32)).sum::<f64>()
                    / (m as f64).powi(n as i32);
            assert!((fifo_expected_completion(m, n, 1.0) - direct).abs() < 1e-12);
        }
        // The paper's worked example in Figure 2 (m = 3, n = 4 but orders chosen by hand) is an
        // instance, not an expectation; the expectation for m = 3, n = 4 is 3 − (1+16)/81.
        assert!((fifo_expected_completion(3, 4, 1.0) - (3.0 - 17.0 / 81.0)).abs() < 1e-12);
    }

    #[test]
    fn independent_orders_spread_as_counted_by_hand() {
        // One server, or one application: every finish is the same.
        assert!((independent_order_spread(10, 1) - 1.0).abs() < 1e-12);
        assert!((independent_order_spread(1, 8) - 1.0).abs() < 1e-12);
        // m = 2, n = 2: positions (1,1), (1,2), (2,1), (2,2) give 1, 2, 2, 1.
        assert!((independent_order_spread(2, 2) - 1.5).abs() < 1e-12);
        // Many servers: some server serves it first, another last, so m.
        assert!((independent_order_spread(4, 400) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn independent_orders_spread_matches_enumeration() {
        // Every assignment of positions for m = 3, n = 3.
        let (m, n) = (3u32, 3u32);
        let mut total = 0.0;
        let count = m.pow(n);
        for code in 0..count {
            let pos: Vec<u32> = (0..n).map(|i| code / m.pow(i) % m + 1).collect();
            total += *pos.iter().max().unwrap() as f64 / *pos.iter().min().unwrap() as f64;
        }
        assert!((independent_order_spread(m, n) - total / count as f64).abs() < 1e-12);
    }
}
