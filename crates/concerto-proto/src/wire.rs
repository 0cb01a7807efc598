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

use crate::auth;
pub use crate::capability::Capability;
use crate::integrity::{Sealer, TAG_LEN};
use crate::namespace;
use crate::stats::{Arrival, ServerStats};

/// Bumped on any incompatible change; a server answers other versions with an error.
pub const VERSION: u16 = 13;
/// Largest data payload of one request or reply.
pub const MAX_IO: u64 = 16 << 20;
/// Largest frame: the payload plus headroom for the envelope.
pub const MAX_FRAME: usize = MAX_IO as usize + 64 * 1024;
/// Most extents one list-I/O request may carry.
pub const MAX_SEGMENTS: usize = 4096;
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

/// A stripe unit a file or directory may have; the message says why not.
pub fn check_stripe_unit(unit: u64) -> Result<(), String> {
    if !(MIN_STRIPE_UNIT..=MAX_STRIPE_UNIT).contains(&unit) || unit % MIN_STRIPE_UNIT != 0 {
        return Err(format!(
            "stripe unit {unit}: must be a multiple of {MIN_STRIPE_UNIT} bytes (4 KiB), from 4 KiB to 1 GiB{}",
            decimal_unit_hint(unit)
        ));
    }
    Ok(())
}

/// When `bytes` is a whole number of a decimal unit (`4000` is 4 KB), the
/// size probably meant: written in that unit, it was read as powers of 1000.
fn decimal_unit_hint(bytes: u64) -> String {
    concerto_core::units::as_decimal(bytes).map_or(String::new(), |(n, decimal, binary)| {
        format!(" ({n}{decimal} is {bytes} bytes, since KB, MB and GB are powers of 1000; write {n}{binary} for a power of two)")
    })
}

/// A layout a client may ask for: a valid stripe unit, a count above 0.
pub fn check_layout_request(l: &LayoutRequest) -> Result<(), String> {
    if let Some(u) = l.unit {
        check_stripe_unit(u)?;
    }
    if l.count == Some(0) {
        return Err("stripe count 0: must be at least 1".into());
    }
    Ok(())
}

/// The permission bits a file may have: rwx for owner, group and others,
/// set-user-id, set-group-id and sticky (`07777`).
pub const MAX_MODE: u32 = 0o7777;

/// A mode a client may give: permission bits only (no file type).
pub fn check_mode_bits(mode: u32) -> Result<(), String> {
    if mode > MAX_MODE {
        return Err(format!(
            "mode {mode:#o} has bits beyond the permission bits {MAX_MODE:#o}"
        ));
    }
    Ok(())
}

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
    /// Up to [`MAX_ENTRIES`] entries whose names sort after `after`.
    Readdir {
        path: String,
        after: Option<String>,
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

fn field<T>(field: &'static str, message: String) -> Result<T, ProtocolError> {
    Err(ProtocolError::Field { field, message })
}

fn check_tags(t: &Tags) -> Result<(), ProtocolError> {
    match t.weight {
        Some(w) if !(w.is_finite() && w > 0.0) => {
            field("tags.weight", format!("{w} is not a number > 0"))
        }
        _ => Ok(()),
    }
}

/// Extents of one request: at least one, at most [`MAX_SEGMENTS`], ascending
/// and disjoint, at most [`MAX_IO`] bytes in all, none overflowing. Returns the total.
pub fn check_extents(extents: &[Extent]) -> Result<u64, ProtocolError> {
    if extents.is_empty() {
        return field("extents", "a request needs at least one extent".into());
    }
    if extents.len() > MAX_SEGMENTS {
        return field(
            "extents",
            format!(
                "{} extents is over the limit of {MAX_SEGMENTS}",
                extents.len()
            ),
        );
    }
    let total = ordered_total(extents)
        .map_err(|(f, message)| ProtocolError::Field { field: f, message })?;
    if total > MAX_IO {
        return field(
            "len",
            format!("{total} bytes is over the {MAX_IO}-byte limit per request"),
        );
    }
    Ok(total)
}

/// Extents ascending, disjoint and none overflowing (what the client checks
/// of a caller's list too): their total length, or the field at fault and why.
pub fn ordered_total(extents: &[Extent]) -> Result<u64, (&'static str, String)> {
    let mut total = 0u64;
    let mut end = 0u64;
    for (i, e) in extents.iter().enumerate() {
        let e_end = e.offset.checked_add(e.len).ok_or_else(|| {
            (
                "offset",
                format!("extent {i}: {} + {} overflows", e.offset, e.len),
            )
        })?;
        if i > 0 && e.offset < end {
            return Err((
                "extents",
                format!("extent {i}: extents must be ascending and must not overlap"),
            ));
        }
        end = e_end;
        // Ascending ends that do not overflow bound the sum.
        total += e.len;
    }
    Ok(total)
}

fn check_layout(l: &LayoutRequest) -> Result<(), ProtocolError> {
    check_layout_request(l).map_err(|message| ProtocolError::Field {
        field: "layout",
        message,
    })
}

fn check_mode(mode: u32) -> Result<(), ProtocolError> {
    check_mode_bits(mode).map_err(|message| ProtocolError::Field {
        field: "mode",
        message,
    })
}

fn check_text(name: &'static str, text: &str) -> Result<(), ProtocolError> {
    if text.len() > MAX_TEXT {
        return field(
            name,
            format!(
                "text of {} bytes is over the {MAX_TEXT}-byte limit",
                text.len()
            ),
        );
    }
    Ok(())
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

    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        if self.version != VERSION {
            return Err(ProtocolError::Version { got: self.version });
        }
        match &self.message {
            Message::Write {
                tags,
                extents,
                data,
                ..
            } => {
                check_tags(tags)?;
                let total = check_extents(extents)?;
                if total != data.len() as u64 {
                    return field(
                        "data",
                        format!("{} bytes of data for extents of {total} bytes", data.len()),
                    );
                }
                Ok(())
            }
            Message::Read { tags, extents, .. } => {
                check_tags(tags)?;
                check_extents(extents).map(|_| ())
            }
            Message::Fsync { tags, .. } | Message::ObjectSize { tags, .. } => check_tags(tags),
            Message::RemoveObjects { tags, objects } => {
                check_tags(tags)?;
                if objects.len() > MAX_REMOVE {
                    return field(
                        "objects",
                        format!(
                            "{} objects is over the limit of {MAX_REMOVE}",
                            objects.len()
                        ),
                    );
                }
                Ok(())
            }
            Message::Truncate { tags, size, .. } => {
                check_tags(tags)?;
                if *size > i64::MAX as u64 {
                    return field("size", format!("{size} is larger than a file can be"));
                }
                Ok(())
            }
            Message::Meta { tags, op, user } => {
                check_tags(tags)?;
                if let Some(u) = user {
                    if u.groups.len() > auth::MAX_GROUPS {
                        return field(
                            "user",
                            format!(
                                "{} groups is over the limit of {}",
                                u.groups.len(),
                                auth::MAX_GROUPS
                            ),
                        );
                    }
                }
                for path in op.paths() {
                    namespace::components(path).map_err(|message| ProtocolError::Field {
                        field: "path",
                        message,
                    })?;
                }
                match op {
                    MetaRequest::Create { layout, mode, .. } => {
                        check_mode(*mode)?;
                        check_layout(layout)
                    }
                    MetaRequest::SetStripe { layout, .. } => check_layout(layout),
                    MetaRequest::Mkdir { mode, .. }
                    | MetaRequest::SetAttr {
                        mode: Some(mode), ..
                    } => check_mode(*mode),
                    MetaRequest::Access { mask, .. } if *mask > 7 => field(
                        "mask",
                        format!(
                            "{mask} is not a combination of read (4), write (2) and search (1)"
                        ),
                    ),
                    MetaRequest::Readdir {
                        after: Some(name), ..
                    } => check_text("after", name),
                    MetaRequest::Truncate { size, .. } if *size > i64::MAX as u64 => {
                        field("size", format!("{size} is larger than a file can be"))
                    }
                    MetaRequest::Close { files } if files.len() > MAX_CLOSES => field(
                        "files",
                        format!("{} closes is over the limit of {MAX_CLOSES}", files.len()),
                    ),
                    MetaRequest::Close { files } => {
                        match files.iter().find(|c| c.written_end > i64::MAX as u64) {
                            Some(c) => field(
                                "written_end",
                                format!("{} is larger than a file can be", c.written_end),
                            ),
                            None => Ok(()),
                        }
                    }
                    _ => Ok(()),
                }
            }
            Message::SetPolicy { policy } => check_text("policy", policy),
            Message::SetSets { sets } => check_text("sets", sets),
            Message::SetRules { rules, .. } | Message::RulesReply { rules } => {
                check_text("rules", rules)
            }
            Message::Hello { key_id, .. } => {
                auth::check_key_id(key_id).map_err(|message| ProtocolError::Field {
                    field: "key_id",
                    message,
                })
            }
            Message::ServiceReport(report) => {
                if report.served.len() > MAX_REPORT_APPS {
                    return field(
                        "served",
                        format!("more than {MAX_REPORT_APPS} applications"),
                    );
                }
                if let Some((app, _, w)) = report
                    .served
                    .iter()
                    .find(|(_, _, w)| !(w.is_finite() && *w > 0.0))
                {
                    return field(
                        "served",
                        format!("application {}: weight {w} is not > 0", app.0),
                    );
                }
                Ok(())
            }
            Message::BeginPhase { tags, wait_ms } => {
                check_tags(tags)?;
                if *wait_ms > MAX_PHASE_WAIT_MS {
                    return field("wait_ms", format!("{wait_ms}: at most {MAX_PHASE_WAIT_MS}"));
                }
                Ok(())
            }
            Message::EndPhase { tags } => check_tags(tags),
            Message::SetGrants { grants } => {
                if grants.len() > MAX_REPORT_APPS {
                    return field(
                        "grants",
                        format!("more than {MAX_REPORT_APPS} applications"),
                    );
                }
                match grants.iter().find(|(_, p)| !(p.is_finite() && *p > 0.0)) {
                    Some((app, p)) => field(
                        "grants",
                        format!("application {app}: priority {p} is not > 0"),
                    ),
                    None => Ok(()),
                }
            }
            Message::Granted { priority, .. } if !(priority.is_finite() && *priority > 0.0) => {
                field("priority", format!("{priority} is not > 0"))
            }
            Message::SetCluster { servers } if servers.len() > MAX_PEERS => {
                field("servers", format!("more than {MAX_PEERS} servers"))
            }
            Message::Error { message, .. } => check_text("message", message),
            Message::Data { data } if data.len() as u64 > MAX_IO => {
                field("data", "over the size limit".into())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tags() -> impl Strategy<Value = Tags> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            proptest::option::of(0.01f64..100.0),
        )
            .prop_map(|(app, rank, issue_ns, weight)| Tags {
                app,
                rank,
                issue_ns,
                weight,
            })
    }

    /// Ascending, disjoint extents within the per-request limit.
    fn extents() -> impl Strategy<Value = Vec<Extent>> {
        proptest::collection::vec((0u64..1 << 20, 1u64..64 << 10), 1..8).prop_map(|gaps| {
            let mut at = 0;
            gaps.into_iter()
                .map(|(gap, len)| {
                    at += gap;
                    let e = Extent::new(at, len);
                    at += len;
                    e
                })
                .collect()
        })
    }

    fn path() -> impl Strategy<Value = String> {
        proptest::collection::vec("[a-z0-9_.-]{1,12}", 0..4).prop_map(|parts| {
            format!(
                "/{}",
                parts
                    .into_iter()
                    .filter(|p| p != "." && p != "..")
                    .collect::<Vec<_>>()
                    .join("/")
            )
        })
    }

    #[test]
    fn a_mode_beyond_the_permission_bits_or_a_bad_access_mask_is_a_field_error() {
        let t = Tags {
            app: 1,
            rank: 0,
            issue_ns: 0,
            weight: None,
        };
        let check = |op: MetaRequest| {
            Envelope::new(
                1,
                Message::Meta {
                    tags: t,
                    op,
                    user: None,
                },
            )
            .validate()
        };
        let bad = [
            MetaRequest::Mkdir {
                path: "/d".into(),
                mode: 0o10000,
            },
            MetaRequest::SetAttr {
                path: "/d".into(),
                mode: Some(0o170755),
                uid: None,
                gid: None,
            },
        ];
        for op in bad {
            match check(op) {
                Err(ProtocolError::Field {
                    field: "mode",
                    message,
                }) => {
                    assert!(message.contains("beyond the permission bits"), "{message}")
                }
                other => panic!("{other:?}"),
            }
        }
        let mask = MetaRequest::Access {
            path: "/d".into(),
            mask: 8,
        };
        assert!(matches!(
            check(mask),
            Err(ProtocolError::Field { field: "mask", .. })
        ));
        let fine = MetaRequest::Mkdir {
            path: "/d".into(),
            mode: 0o7777,
        };
        assert!(check(fine).is_ok());
    }

    fn cap() -> impl Strategy<Value = Option<Capability>> {
        proptest::option::of(
            (
                any::<u64>(),
                0u8..4,
                any::<u32>(),
                any::<u64>(),
                any::<[u8; 32]>(),
            )
                .prop_map(|(inode, rights, uid, expires_s, mac)| Capability {
                    inode,
                    rights,
                    uid,
                    expires_s,
                    mac,
                }),
        )
    }

    fn meta() -> impl Strategy<Value = MetaRequest> {
        let layout = (
            proptest::option::of((1u64..1 << 12).prop_map(|k| k * MIN_STRIPE_UNIT)),
            proptest::option::of(1u32..64),
        )
            .prop_map(|(unit, count)| LayoutRequest { unit, count });
        prop_oneof![
            (path(), 0u32..=MAX_MODE).prop_map(|(path, mode)| MetaRequest::Mkdir { path, mode }),
            (path(), layout, any::<bool>(), 0u32..=MAX_MODE).prop_map(
                |(path, layout, exclusive, mode)| MetaRequest::Create {
                    path,
                    layout,
                    exclusive,
                    mode,
                }
            ),
            (
                path(),
                proptest::option::of(0u32..=MAX_MODE),
                proptest::option::of(any::<u32>()),
                proptest::option::of(any::<u32>())
            )
                .prop_map(|(path, mode, uid, gid)| MetaRequest::SetAttr {
                    path,
                    mode,
                    uid,
                    gid
                }),
            (path(), 0u32..8).prop_map(|(path, mask)| MetaRequest::Access { path, mask }),
            path().prop_map(|path| MetaRequest::Lookup { path }),
            (path(), proptest::option::of("[a-z]{1,8}"))
                .prop_map(|(path, after)| MetaRequest::Readdir { path, after }),
            (path(), path()).prop_map(|(from, to)| MetaRequest::Rename { from, to }),
            Just(MetaRequest::Statfs),
        ]
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (
                tags(),
                any::<u64>(),
                cap(),
                0u64..1 << 40,
                proptest::collection::vec(any::<u8>(), 0..512)
            )
                .prop_map(|(tags, object, cap, offset, data)| {
                    let extents = vec![Extent::new(offset, data.len() as u64)];
                    Message::Write {
                        tags,
                        object,
                        cap,
                        extents,
                        data: data.into(),
                    }
                }),
            (tags(), any::<u64>(), cap(), extents()).prop_map(|(tags, object, cap, extents)| {
                Message::Read {
                    tags,
                    object,
                    cap,
                    extents,
                }
            }),
            (tags(), any::<u64>(), cap()).prop_map(|(tags, object, cap)| Message::Fsync {
                tags,
                object,
                cap
            }),
            (tags(), any::<u64>(), cap(), 0u64..1 << 50).prop_map(|(tags, object, cap, size)| {
                Message::Truncate {
                    tags,
                    object,
                    cap,
                    size,
                }
            }),
            (
                tags(),
                meta(),
                proptest::option::of((
                    1u32..100_000,
                    1u32..100_000,
                    proptest::collection::vec(any::<u32>(), 0..4)
                ))
            )
                .prop_map(|(tags, op, user)| Message::Meta {
                    tags,
                    op,
                    user: user.map(|(uid, gid, groups)| auth::Principal::user(uid, gid, &groups)),
                }),
            Just(Message::Ping),
            Just(Message::Stats),
            any::<u64>().prop_map(|after| Message::Arrivals { after }),
            ".{0,40}".prop_map(|policy| Message::SetPolicy { policy }),
            proptest::collection::vec((any::<u32>(), any::<u64>(), 0.01f64..100.0), 0..8).prop_map(
                |served| Message::ServiceReport(ServiceReport {
                    served: served
                        .into_iter()
                        .map(|(app, bytes, w)| (concerto_core::AppId(app), bytes, w))
                        .collect()
                })
            ),
            any::<u64>().prop_map(|retiring| Message::Switched { retiring }),
            (tags(), 0..=MAX_PHASE_WAIT_MS)
                .prop_map(|(tags, wait_ms)| Message::BeginPhase { tags, wait_ms }),
            tags().prop_map(|tags| Message::EndPhase { tags }),
            proptest::collection::vec((any::<u32>(), 1e-6f64..1e6), 0..8)
                .prop_map(|grants| Message::SetGrants { grants }),
            (1e-6f64..1e6, any::<u64>())
                .prop_map(|(priority, lease_ms)| Message::Granted { priority, lease_ms }),
            (any::<i64>(), any::<u32>(), any::<u64>()).prop_map(|(set, ahead, lease_ms)| {
                Message::Queued {
                    set,
                    ahead,
                    lease_ms,
                }
            }),
        ]
    }

    /// The replies a client decodes from a server, of every kind, with
    /// what they carry (statistics with histograms, directory entries,
    /// attributes with a layout and a capability, counts).
    fn reply() -> impl Strategy<Value = Message> {
        use crate::stats::{AppStats, LatencyHistogram, ServerStats};
        let attr =
            (any::<u64>(), any::<u64>(), cap()).prop_map(|(inode, size, capability)| MetaAttr {
                inode,
                kind: FileKind::File,
                size: Some(size),
                ctime_ns: 1,
                mtime_ns: 2,
                layout: Some(WireLayout {
                    unit: 65536,
                    servers: vec![0, 1],
                }),
                default_layout: None,
                entries: 0,
                uid: 1001,
                gid: 100,
                mode: 0o640,
                capability,
            });
        let stats = (proptest::collection::vec(0.0f64..1.0, 0..6), any::<u64>()).prop_map(
            |(samples, app)| {
                let mut latency = LatencyHistogram::new("read");
                for s in samples {
                    latency.record(s);
                }
                Message::StatsReply(Box::new(ServerStats {
                    address: "127.0.0.1:1".into(),
                    roles: vec![Role::Data],
                    policy: "fifo".into(),
                    throttle: None,
                    uptime_s: 1.0,
                    queued: 0,
                    in_flight: 0,
                    apps: vec![AppStats {
                        app: app as u32,
                        read_bytes: app,
                        ..AppStats::default()
                    }],
                    retired: Default::default(),
                    latency: vec![latency],
                    reports: Default::default(),
                    connections: Default::default(),
                    space_total: 1,
                    space_free: 1,
                    grants: vec![(1, 1.0)],
                    coordinator: None,
                }))
            },
        );
        prop_oneof![
            stats,
            attr.prop_map(|a| Message::MetaReply {
                reply: MetaReply::Attr(a),
                changes: 3,
                durable: 2,
            }),
            proptest::collection::vec("[a-z]{1,8}", 0..5).prop_map(|names| Message::MetaReply {
                reply: MetaReply::Entries {
                    entries: names
                        .into_iter()
                        .enumerate()
                        .map(|(i, name)| DirEntry {
                            name,
                            inode: i as u64,
                            kind: FileKind::File,
                        })
                        .collect(),
                    more: true,
                },
                changes: 1,
                durable: 1,
            }),
            Just(Message::MetaReply {
                reply: MetaReply::Statfs(FsCounts {
                    files: 1,
                    directories: 1,
                    inodes_free: 9,
                    data_servers: vec![0, 1],
                    default_layout: (65536, 2),
                }),
                changes: 0,
                durable: 0,
            }),
            proptest::collection::vec(any::<u8>(), 0..256)
                .prop_map(|d| Message::Data { data: d.into() }),
            (any::<u64>(), any::<u64>())
                .prop_map(|(size, mtime_ns)| Message::Size { size, mtime_ns }),
            ".{0,40}".prop_map(|message| Message::Error {
                kind: ErrorKind::Denied,
                message,
            }),
            Just(Message::Pong {
                policy: "sfq-d".into(),
                roles: vec![Role::Data, Role::Metadata],
            }),
            (any::<[u8; 32]>(), any::<[u8; 32]>()).prop_map(|(nonce, mac)| {
                if nonce[0] % 2 == 0 {
                    Message::Challenge { nonce }
                } else {
                    Message::Welcome {
                        grant: auth::Grant::Tenant { job: 3 },
                        integrity: nonce[1] % 2 == 0,
                        mac,
                    }
                }
            }),
            Just(Message::SpaceReply {
                total: 10,
                free: 5,
                available: 4,
                disk: 1,
            }),
        ]
    }

    proptest! {
        /// What a client reads from a server goes through the same
        /// decoder: a reply damaged anywhere (a byte set, bytes cut or
        /// added) is refused or decodes to something valid, and what a
        /// client computes from a statistics reply (latency quantiles)
        /// does not panic whatever its counts.
        #[test]
        fn damaged_replies_are_caught_and_what_decodes_is_usable(
            m in reply(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            how in 0u8..3,
        ) {
            let mut bytes = Envelope::new(7, m.clone()).encode();
            prop_assert_eq!(Envelope::decode(bytes.clone().into()).map(|e| e.message), Ok(m));
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = byte,
                1 => bytes.truncate(i),
                _ => bytes.insert(i, byte),
            }
            if let Ok(env) = Envelope::decode(bytes.into()) {
                prop_assert!(env.validate().is_ok());
                if let Message::StatsReply(stats) = env.message {
                    for h in &stats.latency {
                        let _ = (h.quantile(0.5), h.quantile(0.99));
                    }
                }
            }
        }
    }

    #[test]
    fn a_frames_version_is_read_before_it_decodes() {
        let frame = Envelope::new(9, Message::Ping).encode();
        assert_eq!(Envelope::peek_version(&frame), Some(VERSION));
        let mut other = frame.clone();
        other[4..6].copy_from_slice(&(VERSION - 1).to_le_bytes());
        assert_eq!(Envelope::peek_version(&other), Some(VERSION - 1));
        assert_eq!(
            Envelope::decode(other.into()),
            Err(ProtocolError::Version { got: VERSION - 1 })
        );
        assert_eq!(Envelope::peek_version(&frame[..5]), None);
    }

    #[test]
    fn a_latency_histogram_from_the_wire_with_counts_that_overflow_still_answers() {
        let mut h = crate::stats::LatencyHistogram::new("read");
        h.counts[0] = u64::MAX - 1;
        h.counts[1] = 5;
        h.count = u64::MAX;
        // The running sum passes u64::MAX at the second bucket.
        assert_eq!(h.quantile(1.0), Some(h.bounds_s[1]));
    }

    #[test]
    fn a_report_with_a_weight_that_is_not_positive_is_refused() {
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let env = Envelope::new(
                1,
                Message::ServiceReport(ServiceReport {
                    served: vec![(concerto_core::AppId(7), 10, w)],
                }),
            );
            let err = Envelope::decode(env.encode().into()).unwrap_err();
            assert!(err.to_string().contains("application 7"), "{err}");
        }
    }

    #[test]
    fn phase_requests_and_grants_out_of_bounds_are_refused_naming_the_field() {
        let refused = |m: Message| {
            Envelope::decode(Envelope::new(1, m).encode().into())
                .unwrap_err()
                .to_string()
        };
        let tags = Tags {
            app: 1,
            rank: 0,
            issue_ns: 0,
            weight: None,
        };
        let e = refused(Message::BeginPhase {
            tags,
            wait_ms: MAX_PHASE_WAIT_MS + 1,
        });
        assert!(e.contains("wait_ms") && e.contains("at most"), "{e}");
        let e = refused(Message::SetGrants {
            grants: vec![(3, 1.0), (4, 0.0)],
        });
        assert!(e.contains("grants") && e.contains("application 4"), "{e}");
        let e = refused(Message::SetGrants {
            grants: vec![(5, 1.0); MAX_REPORT_APPS + 1],
        });
        assert!(e.contains("more than"), "{e}");
        let e = refused(Message::Granted {
            priority: f64::NAN,
            lease_ms: 1,
        });
        assert!(e.contains("priority"), "{e}");
    }

    proptest! {
        #[test]
        fn valid_envelopes_round_trip(id in any::<u64>(), m in message()) {
            let env = Envelope::new(id, m);
            prop_assert_eq!(Envelope::decode(env.encode().into()), Ok(env));
        }

        /// The decoder is the server's first line: arbitrary bytes give an
        /// error or a validated envelope, never a panic or a huge allocation.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(env) = Envelope::decode(bytes.into()) {
                prop_assert!(env.validate().is_ok());
            }
        }

        /// Flipping bytes of a valid frame is caught or still decodes to something valid.
        #[test]
        fn corrupted_frames_are_caught(m in message(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut bytes = Envelope::new(7, m).encode();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            if let Ok(env) = Envelope::decode(bytes.into()) {
                prop_assert!(env.validate().is_ok());
            }
        }
    }

    #[test]
    fn out_of_bounds_fields_are_named() {
        let t = Tags {
            app: 1,
            rank: 0,
            issue_ns: 0,
            weight: None,
        };
        let read = |offset, len| {
            Envelope::new(
                1,
                Message::Read {
                    tags: t,
                    object: 0,
                    cap: None,
                    extents: vec![Extent::new(offset, len)],
                },
            )
        };
        assert!(matches!(
            read(0, MAX_IO + 1).validate(),
            Err(ProtocolError::Field { field: "len", .. })
        ));
        assert!(matches!(
            read(u64::MAX, 2).validate(),
            Err(ProtocolError::Field {
                field: "offset",
                ..
            })
        ));
        let list = |extents: Vec<Extent>| {
            Envelope::new(
                1,
                Message::Read {
                    tags: t,
                    object: 0,
                    cap: None,
                    extents,
                },
            )
        };
        let overlapping = list(vec![Extent::new(0, 10), Extent::new(5, 10)]);
        assert!(matches!(
            overlapping.validate(),
            Err(ProtocolError::Field {
                field: "extents",
                ..
            })
        ));
        assert!(matches!(
            list(vec![]).validate(),
            Err(ProtocolError::Field {
                field: "extents",
                ..
            })
        ));
        let short_data = Message::Write {
            tags: t,
            object: 0,
            cap: None,
            extents: vec![Extent::new(0, 10)],
            data: vec![0; 9].into(),
        };
        assert!(matches!(
            Envelope::new(1, short_data).validate(),
            Err(ProtocolError::Field { field: "data", .. })
        ));
        let meta = |path: &str| {
            Envelope::new(
                1,
                Message::Meta {
                    tags: t,
                    op: MetaRequest::Lookup { path: path.into() },
                    user: None,
                },
            )
        };
        for bad in ["/a\0b".to_string(), format!("/{}", "x".repeat(5000))] {
            assert!(
                matches!(
                    meta(&bad).validate(),
                    Err(ProtocolError::Field { field: "path", .. })
                ),
                "{bad:?}"
            );
        }
        let zero_unit = MetaRequest::Create {
            path: "/f".into(),
            layout: LayoutRequest {
                unit: Some(0),
                count: None,
            },
            exclusive: true,
            mode: 0o644,
        };
        assert!(matches!(
            Envelope::new(
                1,
                Message::Meta {
                    tags: t,
                    op: zero_unit,
                    user: None,
                }
            )
            .validate(),
            Err(ProtocolError::Field {
                field: "layout",
                ..
            })
        ));
        let bad_weight = Envelope::new(
            1,
            Message::Fsync {
                tags: Tags {
                    weight: Some(-1.0),
                    ..t
                },
                object: 0,
                cap: None,
            },
        );
        assert!(matches!(
            bad_weight.validate(),
            Err(ProtocolError::Field {
                field: "tags.weight",
                ..
            })
        ));
        let mut old = Envelope::new(1, Message::Ping);
        old.version = 0;
        assert_eq!(
            Envelope::decode(old.encode().into()),
            Err(ProtocolError::Version { got: 0 })
        );
        // A length field claiming more than the limit is refused before allocating.
        let mut huge = Envelope::new(
            1,
            Message::SetPolicy {
                policy: String::new(),
            },
        )
        .encode();
        let n = huge.len();
        huge[n - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Envelope::decode(huge.into()),
            Err(ProtocolError::Decode(_))
        ));
        // A header longer than its frame, and data on a message that takes none.
        let mut long_header = Envelope::new(1, Message::Ping).encode();
        long_header[..4].copy_from_slice(&1000u32.to_be_bytes());
        assert!(matches!(
            Envelope::decode(long_header.into()),
            Err(ProtocolError::Decode(m)) if m.contains("header of 1000 bytes")
        ));
        let mut stray = Envelope::new(1, Message::Ping).encode();
        stray.extend_from_slice(b"xyz");
        assert!(matches!(
            Envelope::decode(stray.into()),
            Err(ProtocolError::Decode(m)) if m.contains("3 bytes of payload")
        ));
        assert!(matches!(
            Envelope::decode(vec![0u8, 0].into()),
            Err(ProtocolError::Decode(_))
        ));
    }
}
