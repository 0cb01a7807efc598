//! In what order a client sends an access's pieces to the servers. By
//! default every server's part goes at once, one request each (the
//! fastest here: see docs/filesystem.md). With a [`TransferOrder`] the
//! access is cut into blocks of at most `block` bytes of one server's data
//! and sent in the order of Clusterfile's heuristics — first-IOS,
//! random-IOS, hash-IOS — at most `in_flight` blocks at a time (1 is the
//! paper's one transfer at a time). The cut and the order are
//! concerto-core's `client::ordering`, the simulator's own.

use std::future::Future;

use futures::stream::{FuturesUnordered, StreamExt};

pub use concerto_core::client::ordering::Ordering;
use concerto_core::client::ordering::{self, Block};
use concerto_core::{Extent, RequestLimits};

use crate::{ClientError, FileHandle, FsClient, LIMITS};

/// Clusterfile's transfer ordering, as a client applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferOrder {
    pub ordering: Ordering,
    /// Most bytes of one server's data in one block (the paper's b); None:
    /// the file's stripe unit, as the simulator's default.
    pub block: Option<u64>,
    /// Blocks in flight at once; 1 is the paper's model.
    pub in_flight: usize,
    /// Draws random-IOS's order (with the client's rank).
    pub seed: u64,
}

/// The variable a process may name its transfer order in (the syntax of
/// [`TransferOrder::parse`]), for programs that cannot pass it otherwise.
pub const TRANSFERS_VAR: &str = "CONCERTO_TRANSFERS";

impl TransferOrder {
    /// One transfer at a time in `ordering`, blocks of a stripe unit.
    pub fn new(ordering: Ordering) -> TransferOrder {
        TransferOrder {
            ordering,
            block: None,
            in_flight: 1,
            seed: 0,
        }
    }

    /// `ORDERING[,block=SIZE][,in-flight=N][,seed=N]`, ORDERING one of
    /// `first-ios`, `random-ios`, `hash-ios` (`hash-ios,block=64KiB`);
    /// the error names the part that is wrong.
    pub fn parse(text: &str) -> Result<TransferOrder, String> {
        let mut parts = text.split(',').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let ordering = match name {
            "first-ios" => Ordering::FirstIos,
            "random-ios" => Ordering::RandomIos,
            "hash-ios" => Ordering::HashIos,
            _ => {
                return Err(format!(
                    "{name:?} is not a transfer ordering (first-ios, random-ios or hash-ios)"
                ))
            }
        };
        let mut order = TransferOrder::new(ordering);
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not KEY=VALUE (block, in-flight, seed)"))?;
            let bad = |e: String| format!("{key}={value}: {e}");
            match key.trim() {
                "block" => {
                    let b = concerto_core::units::parse_size(value.trim()).map_err(bad)?;
                    if b == 0 {
                        return Err(bad("a block holds at least 1 byte".into()));
                    }
                    order.block = Some(b);
                }
                "in-flight" => {
                    order.in_flight = match value.trim().parse::<usize>() {
                        Ok(n) if n >= 1 => n,
                        _ => return Err(bad("not a whole number of at least 1".into())),
                    }
                }
                "seed" => {
                    order.seed = value
                        .trim()
                        .parse()
                        .map_err(|_| bad("not a whole number".into()))?
                }
                other => return Err(format!("{other:?}: unknown key (block, in-flight, seed)")),
            }
        }
        Ok(order)
    }
}

/// An access's blocks, in sending order, and how many may be in flight.
pub(crate) struct Plan {
    pub blocks: Vec<Block>,
    pub in_flight: usize,
}

impl FsClient {
    /// How this client sends the access `extents` of `file`: one block per
    /// server (within the wire's limits), all at once; or, with a transfer
    /// order, blocks of its size in its order, its number at a time. Client
    /// `i` of hash-IOS is this client's rank; the servers are the file's.
    pub(crate) fn plan(&self, file: &FileHandle, extents: &[Extent]) -> Plan {
        let Some(t) = self.shared.transfer_order else {
            let blocks = ordering::blocks_within(&file.layout, extents, LIMITS);
            let in_flight = blocks.len().max(1);
            return Plan { blocks, in_flight };
        };
        let limits = RequestLimits {
            max_bytes: t.block.unwrap_or(file.layout.unit()).min(LIMITS.max_bytes),
            ..LIMITS
        };
        let mut blocks = ordering::blocks_within(&file.layout, extents, limits);
        let servers = file.layout.servers().len() as u32;
        let sequence = ordering::order(&blocks, self.identity.rank, servers, t.ordering, t.seed);
        let mut slots: Vec<Option<Block>> = blocks.drain(..).map(Some).collect();
        let blocks = sequence
            .into_iter()
            .filter_map(|i| slots[i].take())
            .collect();
        Plan {
            blocks,
            in_flight: t.in_flight,
        }
    }

    /// The same client sending large accesses in `order` (None: every
    /// server's part at once); call it on a new client, before any I/O.
    pub fn with_transfer_order(mut self, order: Option<TransferOrder>) -> FsClient {
        if let Some(shared) = std::sync::Arc::get_mut(&mut self.shared) {
            shared.transfer_order = order;
        }
        self
    }

    pub fn transfer_order(&self) -> Option<TransferOrder> {
        self.shared.transfer_order
    }
}

/// Runs `tasks` (in sending order) with at most `limit` at once, each
/// started as soon as one before it is done; their results in the tasks'
/// order, or the first error (the rest are dropped, as `try_join_all`
/// drops them).
pub(crate) async fn in_order<T, F>(
    tasks: impl IntoIterator<Item = F>,
    limit: usize,
) -> Result<Vec<T>, ClientError>
where
    F: Future<Output = Result<T, ClientError>>,
{
    // Made first, so that what is held across the awaits is the futures
    // alone, not the iterator that makes them (whose closure would have to
    // be Send for every lifetime).
    let tasks: Vec<F> = tasks.into_iter().collect();
    let mut tasks = tasks.into_iter().enumerate();
    let mut running = FuturesUnordered::new();
    let mut done: Vec<Option<T>> = Vec::new();
    loop {
        while running.len() < limit.max(1) {
            let Some((i, task)) = tasks.next() else { break };
            running.push(async move { (i, task.await) });
        }
        let Some((i, result)) = running.next().await else {
            break;
        };
        if done.len() <= i {
            done.resize_with(i + 1, || None);
        }
        done[i] = Some(result?);
    }
    Ok(done.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_order_is_read_with_its_defaults_and_each_mistake_named() {
        assert_eq!(
            TransferOrder::parse("hash-ios").unwrap(),
            TransferOrder::new(Ordering::HashIos)
        );
        let t = TransferOrder::parse("random-ios, block=64KiB ,in-flight=4,seed=7").unwrap();
        assert_eq!(
            (t.ordering, t.block, t.in_flight, t.seed),
            (Ordering::RandomIos, Some(65536), 4, 7)
        );
        for (text, names) in [
            ("hash", "\"hash\" is not a transfer ordering"),
            ("first-ios,block", "\"block\" is not KEY=VALUE"),
            (
                "first-ios,block=0",
                "block=0: a block holds at least 1 byte",
            ),
            ("first-ios,block=lots", "block=lots:"),
            (
                "first-ios,in-flight=0",
                "in-flight=0: not a whole number of at least 1",
            ),
            ("first-ios,seed=-1", "seed=-1: not a whole number"),
            ("first-ios,depth=2", "\"depth\": unknown key"),
        ] {
            let e = TransferOrder::parse(text).unwrap_err();
            assert!(e.contains(names), "{text}: {e}");
        }
    }

    #[tokio::test]
    async fn tasks_run_at_most_limit_at_once_started_in_order() {
        use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
        use std::sync::Mutex;
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let started = Mutex::new(Vec::new());
        let tasks = (0..10).map(|i| {
            let (running, most, started) = (&running, &most, &started);
            async move {
                started.lock().unwrap().push(i);
                let now = running.fetch_add(1, AtomicOrdering::SeqCst) + 1;
                most.fetch_max(now, AtomicOrdering::SeqCst);
                tokio::task::yield_now().await;
                running.fetch_sub(1, AtomicOrdering::SeqCst);
                Ok::<_, ClientError>(i * 10)
            }
        });
        let out = in_order(tasks, 3).await.unwrap();
        assert_eq!(out, (0..10).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(most.load(AtomicOrdering::SeqCst), 3);
        assert_eq!(*started.lock().unwrap(), (0..10).collect::<Vec<_>>());
        let failing = (0..4).map(|i| async move {
            if i == 2 {
                Err(ClientError::Invalid("third".into()))
            } else {
                Ok(i)
            }
        });
        assert!(matches!(in_order(failing, 2).await, Err(ClientError::Invalid(m)) if m == "third"));
    }
}
