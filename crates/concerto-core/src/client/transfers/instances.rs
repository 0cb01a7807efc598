//! Instances of the transfer problem: a matrix of transfer counts read
//! from text, sizes split into units, the load bound, and the random,
//! regular and skewed generators the experiments draw from.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::TransferError;

/// Reads a matrix: one row per client, one number per server, separated by
/// commas or blanks; blank lines and `#` comments are skipped. Rows and
/// columns in errors count from 1, as an editor shows them.
pub fn parse_counts(text: &str) -> Result<Vec<Vec<u64>>, TransferError> {
    let mut rows = Vec::new();
    for (line, raw) in text.lines().enumerate() {
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let row = content
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|x| !x.is_empty())
            .enumerate()
            .map(|(column, x)| {
                x.parse::<u64>().map_err(|_| TransferError::BadEntry {
                    row: line + 1,
                    column: column + 1,
                    text: x.to_string(),
                })
            })
            .collect::<Result<Vec<u64>, _>>()?;
        rows.push(row);
    }
    let width = rows.first().map_or(0, Vec::len);
    if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != width) {
        return Err(TransferError::Ragged {
            row: row + 1,
            got: r.len(),
            expected: width,
        });
    }
    Ok(rows)
}

/// Sizes (bytes) as unit transfers of `unit` bytes each (the last of a
/// pair rounded up): what the colouring of weighted transfers schedules.
pub fn split_sizes(rows: &[Vec<u64>], unit: u64) -> Vec<Vec<u64>> {
    let unit = unit.max(1);
    rows.iter()
        .map(|r| r.iter().map(|&b| b.div_ceil(unit)).collect())
        .collect()
}

/// Transfers of different sizes (bytes): no schedule of least makespan is
/// known in polynomial time (open shop), so this is the bound every
/// schedule must meet: the largest total any one client or server moves.
pub fn load_bound(rows: &[Vec<u64>]) -> u64 {
    let clients = rows
        .iter()
        .map(|r| r.iter().sum::<u64>())
        .max()
        .unwrap_or(0);
    let width = rows.first().map_or(0, Vec::len);
    let servers = (0..width)
        .map(|s| {
            rows.iter()
                .map(|r| r.get(s).copied().unwrap_or(0))
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0);
    clients.max(servers)
}

/// A random instance: with probability `density` a (client, server) pair
/// gets a count drawn from 1..=`max_per_pair`, else 0; seeded.
pub fn random_counts(
    clients: u32,
    servers: u32,
    density: f64,
    max_per_pair: u64,
    seed: u64,
) -> Vec<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..clients)
        .map(|_| {
            (0..servers)
                .map(|_| {
                    if rng.gen_bool(density.clamp(0.0, 1.0)) {
                        rng.gen_range(1..=max_per_pair.max(1))
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect()
}

/// A `degree`-regular bipartite multigraph on `n` clients and `n` servers:
/// the sum of `degree` seeded random permutation matrices, so every client
/// and every server has exactly `degree` transfers and Δ = `degree`. On
/// these graphs every node ties on degree, which is where the degree-based
/// heuristics (HDF, HCDF) have least to go on.
pub fn regular_counts(n: u32, degree: u32, seed: u64) -> Vec<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut counts = vec![vec![0u64; n as usize]; n as usize];
    let mut servers: Vec<usize> = (0..n as usize).collect();
    for _ in 0..degree {
        servers.shuffle(&mut rng);
        for (client, &server) in servers.iter().enumerate() {
            counts[client][server] += 1;
        }
    }
    counts
}

/// Skewed destinations: each of `clients` clients sends `per_client`
/// transfers, each to a server drawn with weight `1 / (k + 1)^exponent`
/// (server 0 hottest), as when most clients want the same few servers.
/// The hot servers' degrees set Δ; the clients' are all `per_client`.
pub fn skewed_counts(
    clients: u32,
    servers: u32,
    per_client: u32,
    exponent: f64,
    seed: u64,
) -> Vec<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let weights: Vec<f64> = (0..servers)
        .map(|k| (k as f64 + 1.0).powf(-exponent))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut counts = vec![vec![0u64; servers as usize]; clients as usize];
    for row in counts.iter_mut() {
        for _ in 0..per_client {
            let mut pick = rng.gen::<f64>() * total;
            let mut server = weights.len() - 1;
            for (k, w) in weights.iter().enumerate() {
                if pick < *w {
                    server = k;
                    break;
                }
                pick -= w;
            }
            row[server] += 1;
        }
    }
    counts
}
