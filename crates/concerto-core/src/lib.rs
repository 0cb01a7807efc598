//! Concerto's core: the vocabulary shared by the simulator and the real file
//! system (time, requests, striping layouts, units), the per-server scheduling
//! policies behind [`server::RequestQueue`], and the metrics users compare.
//!
//! Everything here is pure: no clock, no I/O, no async, no unseeded
//! randomness. Whoever drives a policy passes `now` in, which is what lets the
//! same code run inside the discrete-event simulator and inside a real server.

pub mod analysis;
pub mod client;
pub mod emulation;
mod field_error;
pub mod job;
pub mod layout;
pub mod metrics;
pub mod profile;
pub mod request;
pub mod server;
pub mod time;
pub mod traps;
pub mod units;

pub use field_error::FieldError;
pub use layout::{
    BufferPart, Chunk, LayoutError, RequestLimits, ServerPiece, ServerRequest, StripeLayout,
};
pub use request::{AppId, Extent, MetaOp, ObjectId, Op, Request, RequestId};
pub use server::{Nid, PolicyConfig, RequestQueue, TimeSource};
pub use time::Time;
