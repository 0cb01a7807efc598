//! The wire protocol between clients and servers.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes (tokio-util's
//! `LengthDelimitedCodec`, which refuses frames over [`MAX_FRAME`] before
//! reading them). The bytes are a 4-byte big-endian header length, the
//! header, and the payload. The header is a bincode-encoded [`Envelope`]:
//! protocol version, a request id the reply echoes, and the message. The
//! payload is the data of a write or of a read's reply, raw: it is never
//! re-encoded, so the bytes go from the socket buffer to the object file
//! (and back) without being copied again. Decoding is bounded (bincode's
//! size limit, no trailing bytes) and every field is checked by
//! [`Envelope::validate`] before a server acts on it, so a malformed frame
//! becomes a [`ProtocolError`], never a panic or an unbounded allocation.
//!
//! Every data request carries Concerto's tags ([`Tags`]): the application,
//! the rank, and the client's issue time, which is what lets a server's
//! policy order its queue without talking to the other servers.

use bincode::Options;
use bytes::{Buf, Bytes};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_util::codec::LengthDelimitedCodec;

use std::net::SocketAddr;

use concerto_core::server::ServiceReport;
use concerto_core::{Extent, MetaOp};

mod bounds;

use crate::auth;
pub use crate::capability::Capability;
use crate::integrity::{Sealer, TAG_LEN};
use crate::stats::{Arrival, ServerStats};
pub use bounds::{
    check_extents, check_layout_request, check_mode_bits, check_stripe_unit, ordered_total,
};

/// Bumped on any incompatible change; a server answers other versions with an error.
pub const VERSION: u16 = 18;
/// Largest data payload of one request or reply.
pub const MAX_IO: u64 = 16 << 20;
/// Largest frame: the payload plus headroom for the envelope.
pub const MAX_FRAME: usize = MAX_IO as usize + 64 * 1024;
/// Most extents one list-I/O request may carry.
pub const MAX_SEGMENTS: usize = 4096;
/// The furthest byte of an object a data request may reach (writes, reads,
/// truncations): 16 TiB less 1 MiB, under ext4's largest file with 4 KiB
/// blocks (16 TiB less a block: a write ending at 16 TiB failed there
/// with EFBIG). The server bounds what a capability lets a client do to
/// its objects by its own rule, whatever the local file system allows (a
/// write far past it made a sparse object as large as the disk's file
/// system let it). A file striped over n servers reaches n times as far.
pub const MAX_OBJECT_END: u64 = (1 << 44) - (1 << 20);
/// Longest string field (policy text, error messages).
pub const MAX_TEXT: usize = 64 * 1024;
/// Most entries one readdir reply carries; larger directories are read in pages.
pub const MAX_ENTRIES: usize = 1024;
/// Most applications one service report names, and most servers a cluster map lists.
pub const MAX_REPORT_APPS: usize = 64 * 1024;
pub const MAX_PEERS: usize = 4096;
/// Longest a `BeginPhase` may wait at the coordinator for its grant
/// before it is answered `Queued` (and asked again).
pub const MAX_PHASE_WAIT_MS: u32 = 30_000;
/// Most objects one removal names.
pub const MAX_REMOVE: usize = 4096;
/// Largest stripe unit a layout may ask for.
pub const MAX_STRIPE_UNIT: u64 = 1 << 30;
/// Stripe units are whole multiples of this (a page), so that every
/// object access starts page-aligned on the servers.
pub const MIN_STRIPE_UNIT: u64 = 4096;

/// The permission bits a file may have: rwx for owner, group and others,
/// set-user-id, set-group-id and sticky (`07777`).
pub const MAX_MODE: u32 = 0o7777;

/// The length-delimited codec both ends read frames with, refusing frames over the limit before reading them.
pub fn frame_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME + TAG_LEN)
        .new_codec()
}

/// Who sent a request and when: PVFS2's hints made first-class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tags {
    pub app: u32,
    pub rank: u32,
    /// The client's issue time of the operation, nanoseconds since the Unix epoch.
    pub issue_ns: u64,
    /// Proportional-share weight; `None` is the server's default.
    pub weight: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// Write `data` to the object's `extents` (ascending, disjoint; list I/O when more than one).
    Write {
        tags: Tags,
        object: u64,
        /// A tenant's right to the object ([`crate::capability`]).
        cap: Option<Capability>,
        extents: Vec<Extent>,
        /// Travels as the frame's payload.
        #[serde(skip)]
        data: Bytes,
    },
    /// Read the object's `extents`; the reply is their bytes concatenated,
    /// short when the object ends before the last extent does.
    Read {
        tags: Tags,
        object: u64,
        cap: Option<Capability>,
        extents: Vec<Extent>,
    },
    /// Make everything written to `object` durable.
    Fsync {
        tags: Tags,
        object: u64,
        cap: Option<Capability>,
    },
    /// The object's length and modification time (0 and 0 for an object never written).
    ObjectSize {
        tags: Tags,
        object: u64,
        cap: Option<Capability>,
    },
    /// Cut or extend the object to `size` bytes.
    Truncate {
        tags: Tags,
        object: u64,
        cap: Option<Capability>,
        size: u64,
    },
    /// Delete the objects of files that are gone (the metadata service's
    /// removal, after an unlink; a peer or admin key only).
    RemoveObjects {
        tags: Tags,
        objects: Vec<u64>,
    },
    /// A metadata operation, for a server with the metadata role.
    Meta {
        tags: Tags,
        op: MetaRequest,
        /// The user it is done as, from a node's mount serving many
        /// users (a node key only; any other key acts as its own user).
        user: Option<auth::Principal>,
    },
    /// Ask the coordinator to begin an I/O phase, or keep the turn asked
    /// for: asking again while granted or queued changes nothing but
    /// renews the lease. The answer is `Granted`, or `Queued` once
    /// `wait_ms` passed without a grant.
    BeginPhase {
        tags: Tags,
        wait_ms: u32,
    },
    /// The I/O phase ends (or a queued application gives up its turn).
    EndPhase {
        tags: Tags,
    },
    /// Replaces the coordinator's set rule (TOML: `kind = "set10"` ...),
    /// live; an admin key only.
    SetSets {
        sets: String,
    },
    /// The coordinator's grants, for a data server: the applications doing
    /// I/O now and their priorities (replaces the table; a peer or admin
    /// key only).
    SetGrants {
        grants: Vec<(u32, f64)>,
    },
    /// The handshake (see [`crate::auth`]): a client names its key and a nonce,
    /// and whether it asks for integrity on the wire ([`crate::integrity`]),
    Hello {
        key_id: String,
        nonce: auth::Nonce,
        integrity: bool,
    },
    /// the server answers with its own nonce,
    Challenge {
        nonce: auth::Nonce,
    },
    /// the client proves it holds the key,
    Proof {
        mac: auth::Proof,
    },
    /// and the server says what the key grants, whether frames carry MACs
    /// from here on, and proves it holds the key too.
    Welcome {
        grant: auth::Grant,
        integrity: bool,
        mac: auth::Proof,
    },
    /// Liveness check; the reply names the server's policy and roles.
    Ping,
    /// Replace the scheduling policy, given as TOML (`kind = "sfq-d-plus"` ...), without a restart.
    SetPolicy {
        policy: String,
    },
    /// Checks the QoS rules in `rules` (TOML, a `[qos]` table's body)
    /// and, when `apply`, puts them in force and saves them (they survive
    /// a restart). Checking first on every server and applying only when
    /// all agree is how `concerto cluster rule` changes them together.
    SetRules {
        rules: String,
        apply: bool,
    },
    /// The QoS rules in force, as TOML (the reply is `RulesReply`).
    GetRules,
    RulesReply {
        rules: String,
    },
    /// The space of the file system a data server keeps its objects on
    /// (what `df` on a mount adds up); any key may ask.
    Space,
    SpaceReply {
        total: u64,
        /// Free bytes, the superuser's reserve included.
        free: u64,
        /// Free bytes an unprivileged user may take.
        available: u64,
        /// Which file system this is (its id and its machine's): servers
        /// that share one report the same, so `df` counts it once.
        disk: u64,
    },
    /// The server's statistics.
    Stats,
    /// The server's arrival log from request `after` + 1 on (what it
    /// still holds of it).
    Arrivals {
        after: u64,
    },
    /// Another data server's service report (total-service sharing, `service-sync`).
    ServiceReport(ServiceReport),
    /// Every server of the cluster (replaces what the server knew): the
    /// data servers a `service-sync` policy sends its service reports to,
    /// the metadata server a data server asks before it creates an object,
    /// the data servers the metadata server removes objects from.
    SetCluster {
        servers: Vec<Member>,
    },
    /// Replies.
    Done,
    /// The policy was switched; the previous policies still hold `retiring`
    /// requests (queued or in service), which they finish before they go.
    Switched {
        retiring: u64,
    },
    Data {
        /// Travels as the frame's payload.
        #[serde(skip)]
        data: Bytes,
    },
    Size {
        size: u64,
        mtime_ns: u64,
    },
    /// A metadata request's answer, with how many namespace changes the
    /// service has made and how many of them are durable (a client whose
    /// `fsync` follows changes it saw that are not yet durable asks for
    /// `Sync`).
    MetaReply {
        reply: MetaReply,
        changes: u64,
        durable: u64,
    },
    Pong {
        policy: String,
        roles: Vec<Role>,
    },
    /// Go ahead with the phase at this priority; the grant lapses unless
    /// renewed (`BeginPhase` again) within `lease_ms`.
    Granted {
        priority: f64,
        lease_ms: u64,
    },
    /// Still waiting: `ahead` applications of the same set go first. Ask
    /// again within the lease to keep the place.
    Queued {
        set: i64,
        ahead: u32,
        lease_ms: u64,
    },
    StatsReply(Box<ServerStats>),
    ArrivalLog {
        arrivals: Vec<Arrival>,
    },
    Error {
        kind: ErrorKind,
        message: String,
    },
}

impl Message {
    /// The capability a data request carries.
    pub fn capability(&self) -> Option<&Capability> {
        match self {
            Message::Write { cap, .. }
            | Message::Read { cap, .. }
            | Message::Fsync { cap, .. }
            | Message::ObjectSize { cap, .. }
            | Message::Truncate { cap, .. } => cap.as_ref(),
            _ => None,
        }
    }

    /// A data or namespace request's tags (who asks, and when).
    pub fn tags(&self) -> Option<&Tags> {
        match self {
            Message::Write { tags, .. }
            | Message::Read { tags, .. }
            | Message::Fsync { tags, .. }
            | Message::ObjectSize { tags, .. }
            | Message::Truncate { tags, .. }
            | Message::RemoveObjects { tags, .. }
            | Message::Meta { tags, .. }
            | Message::BeginPhase { tags, .. }
            | Message::EndPhase { tags } => Some(tags),
            _ => None,
        }
    }
}

/// What a server instance does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Data,
    Metadata,
    /// The job-level arbiter (IO-SETS): who may do I/O now, at what priority.
    Coordinator,
}

impl Role {
    /// As the files spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Role::Data => "data",
            Role::Metadata => "metadata",
            Role::Coordinator => "coordinator",
        }
    }
}

/// Object ids from here up belong to no file (inode numbers never get
/// this far): the administrator's scratch objects, such as the one
/// `concerto profile --server` measures a data server with. Only the admin
/// key may write them; a data server creates them without asking the
/// metadata service.
pub const SCRATCH_OBJECTS: u64 = 1 << 63;

/// A descriptor open for writing that was closed, and the furthest byte
/// its client wrote to the file since it opened it or last truncated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closed {
    pub inode: u64,
    pub written_end: u64,
}

/// Most closes one `Close` carries.
pub const MAX_CLOSES: usize = 4096;

/// A server as the cluster map names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: u32,
    pub address: SocketAddr,
    pub roles: Vec<Role>,
}

/// A stripe layout as the client asks for it; unset fields come from the directory's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutRequest {
    pub unit: Option<u64>,
    pub count: Option<u32>,
}

/// Metadata operations; paths are absolute (`/a/b`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MetaRequest {
    /// Makes a directory with permission bits `mode` (the caller's umask
    /// applied; at most [`MAX_MODE`]), owned by the key's user.
    Mkdir {
        path: String,
        mode: u32,
    },
    /// Creates a file with its layout fixed from `layout` or the
    /// directory's default, and opens it for writing (see `Open`);
    /// `mode` as for `Mkdir`.
    Create {
        path: String,
        layout: LayoutRequest,
        exclusive: bool,
        mode: u32,
    },
    /// chmod (`mode`), chown (`uid`: the administrator only) and chgrp
    /// (`gid`: the owner, to a group it is in); the new attributes.
    SetAttr {
        path: String,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    },
    /// Whether the key's user may read (4), write (2) or search/execute
    /// (1) `path`, as access(2): `Done`, or `Denied` naming why.
    Access {
        path: String,
        mask: u32,
    },
    /// A file's or directory's attributes (stat).
    Lookup {
        path: String,
    },
    /// A file's attributes, for a descriptor: with `write`, the file counts
    /// as open for writing by this connection until `Close` (or until the
    /// connection closes), so the service asks the data servers for its
    /// size meanwhile.
    Open {
        path: String,
        write: bool,
    },
    /// The attributes of the file or directory with this inode number
    /// (`NotFound` once it is removed): a descriptor's `fstat`.
    Getattr {
        inode: u64,
    },
    /// A fresh capability for an open descriptor's file, by inode (its
    /// name may have moved), checked against the file's mode now: how a
    /// client renews before its capability expires.
    Renew {
        inode: u64,
        write: bool,
    },
    /// Descriptors opened for writing (`Open { write: true }`, `Create`)
    /// are closed (at most [`MAX_CLOSES`] at once: a client sends the
    /// closes of a few milliseconds together).
    Close {
        files: Vec<Closed>,
    },
    /// Makes every namespace change made so far durable.
    Sync,
    /// Whether a file with this inode number exists: what a data server
    /// asks before it creates one of its objects (a peer or admin key only).
    Exists {
        inode: u64,
    },
    /// Up to [`MAX_ENTRIES`] entries whose names sort after `after`; with
    /// `attrs`, each entry's attributes too (a FUSE mount's readdirplus,
    /// which `ls -l` then needs no lookup after).
    Readdir {
        path: String,
        after: Option<String>,
        attrs: bool,
    },
    /// Removes a file's name; its objects are removed by the service.
    Unlink {
        path: String,
    },
    Rmdir {
        path: String,
    },
    /// Moves `from` to `to`, replacing a file at `to` (whose objects the service removes).
    Rename {
        from: String,
        to: String,
    },
    /// Records a truncate to `size` (the client resizes the objects) and
    /// returns the file's attributes.
    Truncate {
        path: String,
        size: u64,
    },
    /// Sets a directory's default layout for files created in it from now on.
    SetStripe {
        path: String,
        layout: LayoutRequest,
    },
    Statfs,
}

impl MetaRequest {
    /// The operation kind a policy's cost model sees.
    pub fn kind(&self) -> MetaOp {
        match self {
            MetaRequest::Mkdir { .. } => MetaOp::Mkdir,
            MetaRequest::Create { .. } => MetaOp::Create,
            MetaRequest::Lookup { .. }
            | MetaRequest::Access { .. }
            | MetaRequest::Open { .. }
            | MetaRequest::Getattr { .. }
            | MetaRequest::Renew { .. }
            | MetaRequest::Exists { .. }
            | MetaRequest::Statfs => MetaOp::Getattr,
            MetaRequest::Readdir { .. } => MetaOp::Readdir,
            MetaRequest::Unlink { .. } => MetaOp::Remove,
            MetaRequest::Rmdir { .. } => MetaOp::Rmdir,
            MetaRequest::Rename { .. } => MetaOp::Rename,
            MetaRequest::Truncate { .. }
            | MetaRequest::SetStripe { .. }
            | MetaRequest::SetAttr { .. }
            | MetaRequest::Close { .. }
            | MetaRequest::Sync => MetaOp::Setattr,
        }
    }

    pub fn paths(&self) -> Vec<&str> {
        match self {
            MetaRequest::Mkdir { path, .. }
            | MetaRequest::Create { path, .. }
            | MetaRequest::SetAttr { path, .. }
            | MetaRequest::Access { path, .. }
            | MetaRequest::Lookup { path }
            | MetaRequest::Open { path, .. }
            | MetaRequest::Readdir { path, .. }
            | MetaRequest::Unlink { path }
            | MetaRequest::Rmdir { path }
            | MetaRequest::Truncate { path, .. }
            | MetaRequest::SetStripe { path, .. } => vec![path],
            MetaRequest::Rename { from, to } => vec![from, to],
            MetaRequest::Statfs
            | MetaRequest::Getattr { .. }
            | MetaRequest::Renew { .. }
            | MetaRequest::Close { .. }
            | MetaRequest::Sync
            | MetaRequest::Exists { .. } => vec![],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    File,
    Directory,
}

/// How a file is striped: `unit` bytes dealt round-robin over `servers` (server ids).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLayout {
    pub unit: u64,
    pub servers: Vec<u32>,
}

/// What the metadata service knows of a file or directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetaAttr {
    pub inode: u64,
    pub kind: FileKind,
    /// A file's size: the furthest byte any of its objects holds (0 for a
    /// directory); `None` where the service did not need to learn it (an
    /// open, an unlink).
    pub size: Option<u64>,
    pub ctime_ns: u64,
    pub mtime_ns: u64,
    /// A file's layout.
    pub layout: Option<WireLayout>,
    /// A directory's default layout for new files (unit, count).
    pub default_layout: Option<(u64, u32)>,
    /// Entries in a directory.
    pub entries: u64,
    /// The owner, the group and the permission bits (with set-group-id
    /// and sticky, as `st_mode & 07777`).
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    /// The right to the file's objects an open, a create, a truncate or a
    /// renewal gives (to a tenant key; none elsewhere).
    pub capability: Option<Capability>,
    /// In an open's or a create's reply: a value that differs from every
    /// earlier one the service gave the asker's connection for the file
    /// once another connection may have changed its data (opened it for
    /// writing, closed it, truncated it, or was lost while writing): what
    /// a client's cache of the file is checked against (close-to-open; its
    /// own writes are in its cache). 0 in other replies.
    pub change: u64,
    /// In an open's or a create's reply: whether a connection other than
    /// the asker's holds the file open for writing (its data may be
    /// changing: nothing of it may be cached).
    pub written_elsewhere: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub inode: u64,
    pub kind: FileKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsCounts {
    pub files: u64,
    pub directories: u64,
    /// How many more files and directories the metadata store's disk has
    /// room for (its free space over what one takes).
    pub inodes_free: u64,
    pub data_servers: Vec<u32>,
    pub default_layout: (u64, u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MetaReply {
    Attr(MetaAttr),
    /// A rename's reply: the file it replaced, if any.
    Replaced(Option<MetaAttr>),
    Entries {
        entries: Vec<DirEntry>,
        more: bool,
        /// When asked (`Readdir::attrs`): each entry's attributes, in the
        /// same order (`None` where the service has none; a size it would
        /// have to ask the data servers for is left out); else empty.
        attrs: Vec<Option<MetaAttr>>,
    },
    Statfs(FsCounts),
    /// `Exists`'s answer.
    Exists(bool),
    /// `Close` and `Sync` are done.
    Done,
}

/// What went wrong, for the client to turn into the right exception.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The frame could not be decoded or a field is out of bounds; the connection is closed.
    Protocol,
    /// The request was well formed but is not acceptable (a bad policy, say).
    Invalid,
    /// The storage failed.
    Io,
    /// No such file or directory (ENOENT).
    NotFound,
    /// The name exists already (EEXIST).
    Exists,
    /// The directory is not empty (ENOTEMPTY).
    NotEmpty,
    /// A path component is a file (ENOTDIR).
    NotADirectory,
    /// The operation wants a file and found a directory (EISDIR).
    IsADirectory,
    /// The connection did not authenticate, or its key does not allow this
    /// (EACCES).
    Denied,
    /// The server's storage is full (ENOSPC).
    NoSpace,
    /// The object belonged to a file that has been removed (ESTALE): a
    /// write or read through a descriptor opened before the unlink.
    Stale,
    /// The client's address has as many connections as the server takes
    /// from one address (EAGAIN: try again once one closes).
    Busy,
    /// Only the file's owner (or root) may do this, whatever the modes say
    /// (EPERM): chmod, chown and chgrp of another's file, an unlink or
    /// rename of another's entry in a sticky directory.
    NotPermitted,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub version: u16,
    /// Chosen by the client; the reply carries the same id.
    pub id: u64,
    pub message: Message,
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ProtocolError {
    #[error("undecodable frame: {0}")]
    Decode(String),
    #[error("protocol version {got} is not supported (this server speaks {VERSION})")]
    Version { got: u16 },
    #[error("{field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
    /// A frame's MAC is wrong ([`crate::integrity`]).
    #[error("{0}")]
    Integrity(String),
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_FRAME as u64)
        .with_fixint_encoding()
        .reject_trailing_bytes()
}

impl Envelope {
    pub fn new(id: u64, message: Message) -> Envelope {
        Envelope {
            version: VERSION,
            id,
            message,
        }
    }

    /// The frame's data payload: a write's data or a read's reply, else nothing.
    pub fn payload(&self) -> Bytes {
        match &self.message {
            Message::Write { data, .. } | Message::Data { data } => data.clone(),
            _ => Bytes::new(),
        }
    }

    fn header(&self) -> Vec<u8> {
        // Serializing these plain types into a Vec cannot fail; a size over
        // the limit is caught when the peer decodes it.
        codec().serialize(self).unwrap_or_default()
    }

    /// The frame's bytes after the length prefix: header length, header, payload.
    pub fn encode(&self) -> Vec<u8> {
        let header = self.header();
        let payload = self.payload();
        let mut out = Vec::with_capacity(4 + header.len() + payload.len());
        out.extend_from_slice(&(header.len() as u32).to_be_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&payload);
        out
    }

    /// Writes the whole frame, length prefix included (and its MAC when
    /// `seal` is given): the header is assembled, the payload goes to the
    /// socket as it is (vectored write).
    pub async fn write_to<W: AsyncWrite + Unpin>(
        &self,
        w: &mut W,
        seal: Option<&mut Sealer>,
    ) -> std::io::Result<()> {
        let (head, payload, mac) = self.frame(seal);
        w.write_all_buf(&mut head.chain(payload).chain(mac)).await
    }

    /// The frame as sent: its length prefix, header length and header; the
    /// payload; and, when `seal` is given, its MAC (else nothing).
    pub fn frame(&self, seal: Option<&mut Sealer>) -> (Bytes, Bytes, Bytes) {
        let header = self.header();
        let payload = self.payload();
        let mac_len = if seal.is_some() { TAG_LEN } else { 0 };
        let mut head = Vec::with_capacity(8 + header.len());
        head.extend_from_slice(
            &((4 + header.len() + payload.len() + mac_len) as u32).to_be_bytes(),
        );
        head.extend_from_slice(&(header.len() as u32).to_be_bytes());
        head.extend_from_slice(&header);
        let mac = match seal {
            Some(s) => Bytes::copy_from_slice(&s.seal(&[&head[4..], &payload])),
            None => Bytes::new(),
        };
        (Bytes::from(head), payload, mac)
    }

    /// The wire version a frame's bytes (after the length prefix) say they
    /// are, read before anything else: a frame of another version may not
    /// decode at all, and its sender should still be told the versions.
    pub fn peek_version(frame: &[u8]) -> Option<u16> {
        let version = frame.get(4..6)?;
        Some(u16::from_le_bytes([version[0], version[1]]))
    }

    /// Decodes and validates one frame's bytes (after the length prefix).
    /// The payload is kept as a slice of `frame`, not copied.
    pub fn decode(frame: Bytes) -> Result<Envelope, ProtocolError> {
        if frame.len() > MAX_FRAME {
            return Err(ProtocolError::Decode(format!(
                "frame of {} bytes is over the {MAX_FRAME}-byte limit",
                frame.len()
            )));
        }
        let Some((len, rest)) = frame.split_first_chunk::<4>() else {
            return Err(ProtocolError::Decode(format!(
                "frame of {} bytes has no header length",
                frame.len()
            )));
        };
        let header_len = u32::from_be_bytes(*len) as usize;
        if header_len > rest.len() {
            return Err(ProtocolError::Decode(format!(
                "header of {header_len} bytes in a frame of {} bytes",
                frame.len()
            )));
        }
        let mut env: Envelope = codec()
            .deserialize(&rest[..header_len])
            .map_err(|e| ProtocolError::Decode(e.to_string()))?;
        let payload = frame.slice(4 + header_len..);
        match &mut env.message {
            Message::Write { data, .. } | Message::Data { data } => *data = payload,
            _ if !payload.is_empty() => {
                return Err(ProtocolError::Decode(format!(
                    "{} bytes of payload on a message that carries no data",
                    payload.len()
                )))
            }
            _ => {}
        }
        env.validate()?;
        Ok(env)
    }
}

#[cfg(test)]
mod tests;
