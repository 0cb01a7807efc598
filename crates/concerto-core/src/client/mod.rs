//! The client side of scheduling: what shapes the requests a client sends,
//! the same in the real client and in the simulator's. The data path:
//! `readahead` (when a stream is sequential, how far ahead, in which
//! chunks) and `write_behind` (what a client holds, how adjacent writes
//! merge, when they must be sent). How a client (or a group of clients)
//! orders and plans its transfers to the I/O servers: `ordering` is the
//! order one client sends its blocks in (Clusterfile's first-, random- and
//! hash-IOS, Section 6); `transfers` is the parallel I/O scheduling problem
//! of Clusterfile's Section 2, with its heuristics and an optimal schedule
//! by `colouring`, the bipartite edge colouring with Δ colours.

pub mod collective;
pub mod colouring;
pub mod ordering;
pub mod readahead;
pub mod transfers;
pub mod write_behind;
