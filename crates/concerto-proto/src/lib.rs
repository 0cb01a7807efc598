//! Concerto's wire protocol: frames, messages and their validation, the
//! cluster file clients connect with, and a connection that speaks the
//! protocol. Everything that talks to a Concerto server links this crate;
//! it knows nothing of how servers store or schedule.

pub mod auth;
pub mod capability;
pub mod cluster;
pub mod connection;
pub mod integrity;
pub mod namespace;
pub mod process;
pub mod stats;
mod wire;

pub use wire::*;
