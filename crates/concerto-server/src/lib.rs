//! Concerto's servers: data and metadata servers whose scheduling loop runs
//! concerto-core's `Driver` around a `RequestQueue` policy, unchanged, on
//! real bytes.
//!
//! ```text
//! client ──frames──► server: connection task ─► scheduling loop (Driver)
//!                                                   │ D in flight
//!                                                   ▼
//!                                             storage executor (object files)
//! ```
//!
//! Around the loop: the metadata service (on redb), the object store, the
//! device throttle, statistics and the metrics port, and service reports
//! to peers. The `concerto-server` binary runs one server from a server
//! file; [`local::LocalCluster`] runs a whole cluster in one process for
//! tests and benchmarks.

pub mod config;
pub mod keys;
pub mod local;
pub mod metadata;
mod metrics;
mod peers;
pub mod server;
pub mod stats;
pub mod storage;
pub mod throttle;
