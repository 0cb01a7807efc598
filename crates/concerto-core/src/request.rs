//! A request and the tags it carries from client to server.
//!
//! These are PVFS2's hints made first-class: every request, simulated or on
//! the wire, says which application and rank sent it and when the client
//! issued it, so that a server can order its queue without talking to the
//! other servers.

use serde::{Deserialize, Serialize};

use crate::time::Time;

/// The application a request belongs to. All processes of one application
/// share it. The coordination paper draws it at random in `[0, 32767]`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct AppId(pub u32);

/// An object (a file's part on one server) in that server's namespace.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ObjectId(pub u64);

/// Identifies a request to whoever owns the queue (the simulator, a server).
/// Queues never interpret it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct RequestId(pub u64);

/// Metadata operations, scheduled like data (their cost model comes with the
/// proportional-share policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetaOp {
    Mkdir,
    Create,
    Getattr,
    Readdir,
    Remove,
    Rmdir,
    /// Moves a name; one transaction on the metadata store.
    Rename,
    /// Changes attributes: truncate, a directory's default layout.
    Setattr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Read,
    Write,
    Meta(MetaOp),
}

impl Op {
    pub fn is_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }

    /// The operation's name as configuration and results spell it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Meta(m) => m.name(),
        }
    }
}

impl MetaOp {
    pub fn name(self) -> &'static str {
        match self {
            MetaOp::Mkdir => "mkdir",
            MetaOp::Create => "create",
            MetaOp::Getattr => "getattr",
            MetaOp::Readdir => "readdir",
            MetaOp::Remove => "remove",
            MetaOp::Rmdir => "rmdir",
            MetaOp::Rename => "rename",
            MetaOp::Setattr => "setattr",
        }
    }
}

/// A contiguous byte range.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

impl Extent {
    pub const fn new(offset: u64, len: u64) -> Extent {
        Extent { offset, len }
    }
    pub const fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

/// One request as a server's queue sees it: a piece of an application's I/O
/// on one object of one server.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub app: AppId,
    pub rank: u32,
    /// When the client issued the operation this request is part of.
    pub issue_time: Time,
    pub op: Op,
    pub object: ObjectId,
    /// Offset of the first byte in the object.
    pub offset: u64,
    /// Total bytes moved (the sum of `segments` when there are several).
    pub len: u64,
    /// List I/O: the object extents, ascending. Empty when the request is the
    /// single contiguous range `[offset, offset + len)`.
    pub segments: Vec<Extent>,
    /// Optional proportional-share weight hint; `None` means the server's default.
    pub weight: Option<f64>,
    /// The user it is for, when known: a real server takes it from the
    /// connection's key, the simulator from the application. QoS rules may
    /// match on it.
    pub user: Option<u32>,
    /// The user's group, when known: a real server takes the key's
    /// principal's primary group, the simulator the application's `gid`.
    pub group: Option<u32>,
    /// The client's network id, when known: a real server takes the
    /// peer's address, the simulator the rank's node.
    pub nid: Option<crate::server::Nid>,
}

impl Request {
    /// A contiguous data request with no weight hint.
    #[allow(clippy::too_many_arguments)] // one per request field, named at every call
    pub fn data(
        id: u64,
        app: u32,
        rank: u32,
        issue_time: Time,
        op: Op,
        object: u64,
        offset: u64,
        len: u64,
    ) -> Request {
        Request {
            id: RequestId(id),
            app: AppId(app),
            rank,
            issue_time,
            op,
            object: ObjectId(object),
            offset,
            len,
            segments: Vec::new(),
            weight: None,
            user: None,
            group: None,
            nid: None,
        }
    }
}
