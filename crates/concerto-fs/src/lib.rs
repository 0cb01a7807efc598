//! Concerto's real striped file system: servers whose scheduling loop runs
//! concerto-core's `RequestQueue` policies, unchanged, on real bytes.
//!
//! ```text
//! client ──frames──► server: connection task ─► scheduling loop (RequestQueue)
//!                                                   │ D in flight
//!                                                   ▼
//!                                             storage executor (object files)
//! ```
//!
//! This first part holds the wire protocol, the data server and a client for
//! it; the metadata service, the striping client and the command line build
//! on them.

pub mod client;
pub mod config;
pub mod local;
pub mod metadata;
mod metrics;
pub mod namespace;
pub mod protocol;
pub mod server;
pub mod stats;
pub mod storage;
pub mod throttle;
