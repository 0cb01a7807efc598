//! Concerto's servers: data and metadata servers whose scheduling loop runs
//! concerto-core's `Driver` around a `RequestQueue` policy, unchanged, on
//! real bytes.
//!
//! ```text
//! client ──frames──► connection task ─► scheduling loop (Driver)
//!   (connection: handshake,                  │ D in flight
//!    frames, limits)                         ▼
//!                          storage executor: data role (object files)
//!                                            metadata role (namespace)
//! ```
//!
//! The crate is cut by role: [`connection`] (handshake, frames, limits),
//! [`schedule`] (the loop around the policy), [`data`] and [`storage`] (the
//! data role and its object files), [`metadata`] (the namespace, sizes and
//! removal of removed files' objects), [`members`] (the cluster map and
//! connections to the other servers); around them the device throttle,
//! statistics and the metrics port, QoS [`rules`], and service reports to
//! peers. The `concerto-server` binary runs one server from a server
//! file; [`local::LocalCluster`] runs a whole cluster in one process for
//! tests and benchmarks.

mod commands;
pub mod config;
mod connection;
pub mod coordinator;
mod data;
mod intake;
pub mod keys;
pub mod local;
pub mod members;
pub mod metadata;
mod metrics;
mod peers;
mod prometheus;
mod refusals;
mod report_bounds;
pub mod rules;
mod schedule;
pub mod server;
pub mod stats;
pub mod storage;
pub mod throttle;
