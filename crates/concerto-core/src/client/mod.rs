//! The client side of scheduling: how a client (or a group of clients)
//! orders and plans its transfers to the I/O servers. `transfers` is the
//! parallel I/O scheduling problem of Clusterfile's Section 2, with its
//! heuristics and an optimal schedule.

pub mod transfers;
