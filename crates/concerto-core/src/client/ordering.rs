//! In what order a client sends its data to the I/O servers: the
//! Clusterfile paper's heuristics (Section 6). A client's request is split,
//! per server, into blocks of at most `b` bytes of that server's data
//! ([`blocks`]); an [`Ordering`] then decides the sending order. Each client
//! decides alone: there is no central point.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::layout::{BufferPart, RequestLimits, StripeLayout};
use crate::request::Extent;

/// One block: up to `b` bytes of the client's data held by one server,
/// as that server's object extents (ascending), where its first byte lies
/// in the file, and where its bytes sit in the caller's buffer (the real
/// client copies a write's payload from there and puts a read's reply
/// there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub server: u32,
    pub extents: Vec<Extent>,
    pub bytes: u64,
    pub file_offset: u64,
    /// The block's bytes in object order, with their buffer places.
    pub parts: Vec<BufferPart>,
}

impl Block {
    /// Where the block starts in the file.
    pub fn offset(&self) -> u64 {
        self.file_offset
    }
}

/// The blocks of a client's request (file `extents`, ascending) under
/// `layout`, each at most `b` bytes of one server's data: per server, in
/// offset order, servers in the order of the layout.
pub fn blocks(layout: &StripeLayout, extents: &[Extent], b: u64) -> Vec<Block> {
    let limits = RequestLimits {
        max_bytes: b,
        max_extents: usize::MAX,
    };
    blocks_within(layout, extents, limits)
}

/// [`blocks`] of at most `limits.max_bytes` bytes that also name at most
/// `limits.max_extents` object extents (a wire protocol's bound): the
/// per-server requests of [`StripeLayout::requests`], each placed in the
/// file.
pub fn blocks_within(
    layout: &StripeLayout,
    extents: &[Extent],
    limits: RequestLimits,
) -> Vec<Block> {
    layout
        .requests(extents, limits)
        .into_iter()
        .map(|r| Block {
            server: r.server,
            file_offset: r
                .extents
                .first()
                .map_or(0, |e| layout.file_offset(r.slot, e.offset)),
            extents: r.extents,
            bytes: r.bytes,
            parts: r.parts,
        })
        .collect()
}

/// The sending orders of Section 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ordering {
    /// first-IOS: in file-offset order (all clients may hit one server at once).
    FirstIos,
    /// random-IOS: each next block goes to a server chosen at random among
    /// those the client still has data for (seeded).
    RandomIos,
    /// hash-IOS: at step j, client i sends to server (i + j) mod servers,
    /// skipping servers it has nothing more for.
    HashIos,
}

/// The order (indices into `blocks`) in which client `client` sends its
/// blocks to `servers` servers; each server's blocks keep their offset
/// order. `seed` drives random-IOS.
pub fn order(
    blocks: &[Block],
    client: u32,
    servers: u32,
    ordering: Ordering,
    seed: u64,
) -> Vec<usize> {
    let servers = servers.max(1) as usize;
    // Each server's blocks in offset order.
    let mut queues: Vec<std::collections::VecDeque<usize>> = vec![Default::default(); servers];
    let mut by_offset: Vec<usize> = (0..blocks.len()).collect();
    by_offset.sort_by_key(|&i| (blocks[i].offset(), i));
    for &i in &by_offset {
        queues[blocks[i].server as usize % servers].push_back(i);
    }
    match ordering {
        Ordering::FirstIos => by_offset,
        Ordering::RandomIos => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (u64::from(client) << 32));
            let mut out = Vec::with_capacity(blocks.len());
            let mut open: Vec<usize> = (0..servers).filter(|&s| !queues[s].is_empty()).collect();
            while !open.is_empty() {
                let k = rng.gen_range(0..open.len());
                let s = open[k];
                out.extend(queues[s].pop_front());
                if queues[s].is_empty() {
                    open.swap_remove(k);
                }
            }
            out
        }
        Ordering::HashIos => {
            let mut out = Vec::with_capacity(blocks.len());
            let mut step = 0usize;
            while out.len() < blocks.len() {
                let s = (client as usize + step) % servers;
                out.extend(queues[s].pop_front());
                step += 1;
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(servers: u32, unit: u64) -> StripeLayout {
        StripeLayout::round_robin(unit, servers, 0, servers).unwrap()
    }

    #[test]
    fn blocks_hold_at_most_b_bytes_of_one_server() {
        // 4 servers, 64 KiB stripes; a 1 MiB request in blocks of 128 KiB:
        // each server holds 256 KiB of it, in two blocks.
        let bl = blocks(&layout(4, 65536), &[Extent::new(0, 1 << 20)], 131072);
        assert_eq!(bl.len(), 8);
        assert!(bl.iter().all(|b| b.bytes == 131072 && b.extents.len() == 1));
        // Server 1's second block holds file bytes from 512 KiB + 64 KiB on.
        let second = bl.iter().filter(|b| b.server == 1).nth(1).unwrap();
        assert_eq!(
            (second.extents[0], second.file_offset),
            (Extent::new(131072, 131072), 589824)
        );
        // Smaller than a stripe unit: one block per b.
        let small = blocks(&layout(4, 65536), &[Extent::new(0, 65536)], 4096);
        assert_eq!(small.len(), 16);
    }

    #[test]
    fn the_papers_example_first_ios_collides_hash_ios_does_not() {
        // Two clients, two servers, each client's data in four blocks, two per server.
        let l = layout(2, 65536);
        let per_client: Vec<Vec<Block>> = (0..2u64)
            .map(|c| blocks(&l, &[Extent::new(c * 262144, 262144)], 65536))
            .collect();
        let first: Vec<Vec<u32>> = (0..2)
            .map(|c| {
                order(&per_client[c], c as u32, 2, Ordering::FirstIos, 0)
                    .iter()
                    .map(|&i| per_client[c][i].server)
                    .collect()
            })
            .collect();
        // In offset order both clients start with server 0.
        assert_eq!(first[0][0], first[1][0]);
        let hash: Vec<Vec<u32>> = (0..2)
            .map(|c| {
                order(&per_client[c], c as u32, 2, Ordering::HashIos, 0)
                    .iter()
                    .map(|&i| per_client[c][i].server)
                    .collect()
            })
            .collect();
        assert!(
            hash[0].iter().zip(&hash[1]).all(|(a, b)| a != b),
            "{hash:?}"
        );
    }

    proptest! {
        #[test]
        fn every_ordering_sends_every_block_once_keeping_each_servers_offsets(
            servers in 1u32..8, unit_k in 1u64..8, len in 1u64..(1 << 20), b_k in 1u64..64,
            client in 0u32..16, seed in any::<u64>(),
        ) {
            let bl = blocks(&layout(servers, unit_k * 4096), &[Extent::new(12345, len)], b_k * 1024);
            prop_assert_eq!(bl.iter().map(|b| b.bytes).sum::<u64>(), len);
            for o in [Ordering::FirstIos, Ordering::RandomIos, Ordering::HashIos] {
                let ord = order(&bl, client, servers, o, seed);
                let mut sorted = ord.clone();
                sorted.sort_unstable();
                prop_assert_eq!(sorted, (0..bl.len()).collect::<Vec<_>>());
                for s in 0..servers {
                    let offs: Vec<u64> = ord.iter().filter(|&&i| bl[i].server == s).map(|&i| bl[i].offset()).collect();
                    prop_assert!(offs.windows(2).all(|w| w[0] < w[1]));
                }
            }
            prop_assert_eq!(order(&bl, client, servers, Ordering::RandomIos, seed),
                            order(&bl, client, servers, Ordering::RandomIos, seed));
        }

        #[test]
        fn hash_ios_is_conflict_free_when_clients_equal_servers(n in 1u32..9, rounds in 1u64..6) {
            // Every client has `rounds` blocks for every server.
            let l = layout(n, 4096);
            let per_client: Vec<Vec<Block>> = (0..n as u64)
                .map(|c| blocks(&l, &[Extent::new(c * 4096 * n as u64 * rounds, 4096 * n as u64 * rounds)], 4096))
                .collect();
            let orders: Vec<Vec<u32>> = (0..n as usize)
                .map(|c| order(&per_client[c], c as u32, n, Ordering::HashIos, 0).iter().map(|&i| per_client[c][i].server).collect())
                .collect();
            for step in 0..orders[0].len() {
                let mut at: Vec<u32> = orders.iter().map(|o| o[step]).collect();
                at.sort_unstable();
                at.dedup();
                prop_assert_eq!(at.len(), n as usize, "two clients sent to one server at step {}", step);
            }
        }
    }
}
