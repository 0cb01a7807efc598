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
//! Around it: the wire protocol, the metadata service (on redb), the
//! striping client library, and a FUSE mount over that client for
//! unmodified programs.

pub mod client;
pub mod config;
pub mod fuse;
pub mod local;
pub mod metadata;
mod metrics;
pub mod namespace;
mod peers;
pub mod protocol;
pub mod server;
pub mod stats;
pub mod storage;
pub mod throttle;
