//! A server: connection tasks decode frames and hand requests to one
//! scheduling loop, which owns the `RequestQueue` and keeps up to D requests
//! in flight on the storage executor (blocking positioned I/O and metadata
//! transactions on tokio's blocking pool). Data and metadata requests go
//! through the same queue, so a policy's metadata cost model applies.
//!
//! Time for the policy is the Unix-epoch clock the clients stamp their
//! issue times with, advanced monotonically from the server's start, so
//! "now" and "issued at" are comparable and never go backwards.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use concerto_core::emulation::EmulationConfig;
use concerto_core::server::{DeviceClass, DeviceDefaults, Driver, QosRules, ServiceReport, Ticket};
use concerto_core::units::Bandwidth;
use concerto_core::{AppId, Extent, MetaOp, ObjectId, Op, PolicyConfig, Request, RequestId, Time};

use crate::keys::{refusal, Keys};
use crate::metadata::{MetadataConfig, MetadataStore};
use crate::peers::PeerLink;
use crate::stats::{Recorder, ServerStats};
use crate::storage::ObjectStore;
use crate::throttle::Throttle;
use concerto_proto::auth::{self, Credential, Grant, Key, KeyRing};
use concerto_proto::{
    frame_codec, Envelope, ErrorKind, Message, MetaRequest, ProtocolError, Role, Tags, MAX_FRAME,
};

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub policy: PolicyConfig,
    /// Requests in flight on the storage when the policy sets no depth of its own.
    pub depth: u32,
    /// What `capped` shares out when its policy does not say.
    pub capacity: Bandwidth,
    /// Data objects are served when this holds [`Role::Data`]; the namespace when it holds [`Role::Metadata`].
    pub roles: Vec<Role>,
    /// Required with the metadata role.
    pub metadata: Option<MetadataConfig>,
    /// Emulate a slower device class.
    pub throttle: Option<EmulationConfig>,
    /// Where to serve Prometheus metrics over HTTP.
    pub metrics: Option<SocketAddr>,
    /// The other data servers, which a `service-sync` policy sends its service reports to.
    pub peers: Vec<SocketAddr>,
    /// The keys connections authenticate with.
    pub keys: Arc<Keys>,
    /// How far before its arrival a request's issue time may be: an older
    /// (or zero) issue time counts as arrival minus this, so a client's
    /// clock buys it at most this much precedence under `coordinated`.
    pub issue_skew: Time,
    /// What one client may hold of the server.
    pub limits: ConnectionLimits,
}

/// Bounds on what clients hold of a server, so that no client (however it
/// behaves) can exhaust its memory, connections or time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnectionLimits {
    /// Connections open at once from one IP address; more are closed as
    /// they arrive.
    pub per_client: u32,
    /// Bytes one connection's requests may hold at once (write data
    /// received, read data to send back): past it the server stops reading
    /// the connection until replies leave (backpressure), so a client that
    /// does not read its replies holds at most this much.
    pub memory: u64,
    /// A frame begun must be complete within about this long (between one
    /// and two of it); an idle connection, between frames, is not timed.
    pub frame_timeout: Time,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            per_client: 256,
            memory: 64 << 20,
            frame_timeout: Time::from_millis(30_000),
        }
    }
}

/// The default [`ServerConfig::issue_skew`].
pub const DEFAULT_ISSUE_SKEW: Time = Time::from_millis(100);

impl ServerConfig {
    /// The device facts the policy's unset parameters default to: the
    /// throttle's device class when there is one, else a disk's.
    pub fn device_defaults(&self) -> DeviceDefaults {
        DeviceDefaults {
            class: self
                .throttle
                .as_ref()
                .map_or(DeviceClass::Rotational, |t| t.class()),
            depth: self.depth,
            capacity: self.capacity,
        }
    }
}

impl ServerConfig {
    /// A data server on loopback with the given policy, for tests and tools.
    pub fn data(data_dir: PathBuf, policy: PolicyConfig) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            policy,
            depth: 8,
            capacity: Bandwidth(100e6),
            roles: vec![Role::Data],
            metadata: None,
            throttle: None,
            metrics: None,
            peers: Vec::new(),
            keys: Arc::new(Keys::fixed(
                KeyRing::generate().expect("the system gives random bytes"),
            )),
            issue_skew: DEFAULT_ISSUE_SKEW,
            limits: ConnectionLimits::default(),
        }
    }

    /// A credential for this server's admin key (tests and tools).
    pub fn admin_credential(&self) -> Option<Credential> {
        self.keys
            .ring()
            .with_grant(Grant::Admin)
            .map(|k| k.credential())
    }
}

/// A running server; dropping it does not stop it, [`ServerHandle::shutdown`] does.
pub struct ServerHandle {
    pub addr: SocketAddr,
    /// Where Prometheus metrics are served, when configured.
    pub metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// What the storage executor works on.
struct Backend {
    objects: Option<ObjectStore>,
    metadata: Option<MetadataStore>,
    throttle: Option<Throttle>,
}

fn other(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Opens the stores, binds, then serves until shut down.
pub async fn start(cfg: ServerConfig) -> io::Result<ServerHandle> {
    if cfg.roles.is_empty() {
        return Err(other(
            "a server needs the data role, the metadata role, or both".into(),
        ));
    }
    let objects = if cfg.roles.contains(&Role::Data) {
        Some(ObjectStore::open(&cfg.data_dir)?)
    } else {
        None
    };
    let metadata = match (cfg.roles.contains(&Role::Metadata), &cfg.metadata) {
        (false, _) => None,
        (true, None) => {
            return Err(other(
                "the metadata role needs the metadata settings (data servers, default layout)"
                    .into(),
            ))
        }
        (true, Some(m)) => {
            Some(MetadataStore::open(&cfg.data_dir, m.clone()).map_err(|e| other(e.to_string()))?)
        }
    };
    if let Some(t) = &cfg.throttle {
        t.validate()
            .map_err(|(field, msg)| other(format!("throttle.{field}: {msg}")))?;
    }
    let throttle = cfg.throttle.clone().map(Throttle::new);
    let rules = load_rules(&cfg.data_dir)?;
    let backend = Backend {
        objects,
        metadata,
        throttle,
    };
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {}: {e}", cfg.listen)))?;
    let addr = listener.local_addr()?;
    let metrics_listener =
        match cfg.metrics {
            Some(at) => Some(TcpListener::bind(at).await.map_err(|e| {
                io::Error::new(e.kind(), format!("cannot serve metrics on {at}: {e}"))
            })?),
            None => None,
        };
    let metrics_addr = metrics_listener
        .as_ref()
        .map(|l| l.local_addr())
        .transpose()?;
    let (stop, mut stopped) = watch::channel(false);
    let (sched_tx, sched_rx) = mpsc::channel(1024);
    let scheduler = tokio::spawn(schedule(
        cfg.clone(),
        addr,
        backend,
        rules,
        sched_rx,
        stop.subscribe(),
    ));
    if let Some(l) = metrics_listener {
        tokio::spawn(crate::metrics::serve(l, sched_tx.clone(), stop.subscribe()));
    }
    let keys = cfg.keys.clone();
    let limits = cfg.limits;
    let task = tokio::spawn(async move {
        let open = OpenConnections::default();
        // Accepting fails when the process is out of file descriptors; the
        // next attempt would fail at once, so wait (longer each time)
        // rather than spin.
        let mut backoff = std::time::Duration::ZERO;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, from)) => {
                        backoff = std::time::Duration::ZERO;
                        let Some(slot) = open.take(from, limits.per_client) else {
                            eprintln!("concerto-server: connection from {from} refused: {} connections from {} already", limits.per_client, from.ip());
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(connection(stream, from, keys.clone(), limits, slot, sched_tx.clone(), stopped.clone()));
                    }
                    Err(e) => {
                        backoff = (backoff * 2).clamp(std::time::Duration::from_millis(10), std::time::Duration::from_secs(1));
                        eprintln!("concerto-server: cannot accept a connection ({e}); trying again in {backoff:?}");
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = stopped.changed() => break,
                        }
                    }
                },
                _ = stopped.changed() => break,
            }
        }
        let _ = scheduler.await;
    });
    Ok(ServerHandle {
        addr,
        metrics_addr,
        stop,
        task,
    })
}

/// What the scheduling loop is asked to do.
pub(crate) enum Command {
    Submit(Job),
    SetPolicy {
        policy: String,
        reply: Reply,
    },
    Ping {
        reply: Reply,
    },
    Space {
        reply: Reply,
    },
    Stats {
        reply: oneshot::Sender<ServerStats>,
    },
    /// A peer's service report, to charge to the policy.
    Absorb {
        report: ServiceReport,
        reply: Reply,
    },
    SetPeers {
        peers: Vec<SocketAddr>,
        reply: Reply,
    },
    /// QoS rules, checked already; put in force (and saved) when `apply`.
    SetRules {
        rules: QosRules,
        apply: bool,
        reply: Reply,
    },
    GetRules {
        reply: Reply,
    },
}

/// A request as the policy sees it, what the storage does for it, and where the answer goes.
pub(crate) struct Job {
    req: Request,
    action: Action,
    reply: Reply,
}

/// Where a request's answer goes: straight onto its connection's outgoing
/// frames under the request's id, from whichever thread finishes it. One
/// dropped unanswered (the server stopping) answers that it was not done.
pub(crate) struct Reply {
    id: u64,
    out: Option<mpsc::UnboundedSender<Outgoing>>,
    /// The request's share of its connection's memory budget, given back
    /// once the reply is written.
    permit: Option<OwnedSemaphorePermit>,
}

/// A frame for a connection's writer, with the budget it gives back once
/// written.
type Outgoing = (Envelope, Option<OwnedSemaphorePermit>);

impl Reply {
    fn send(mut self, message: Message) {
        if let Some(out) = self.out.take() {
            let _ = out.send((Envelope::new(self.id, message), self.permit.take()));
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            let error = Message::Error {
                kind: ErrorKind::Io,
                message: "server is shutting down".into(),
            };
            let _ = out.send((Envelope::new(self.id, error), self.permit.take()));
        }
    }
}

/// The storage executor's side of a request.
enum Action {
    Object(ObjectOp),
    Meta(MetaRequest),
}

/// What a request does to an object file.
enum ObjectOp {
    Write { extents: Vec<Extent>, data: Bytes },
    Read { extents: Vec<Extent> },
    Fsync,
    Size,
    Truncate(u64),
    Remove,
}

impl ObjectOp {
    /// Reads and writes move data at the throttle's bandwidth; the rest cost a metadata operation.
    fn moves_data(&self) -> bool {
        matches!(self, ObjectOp::Write { .. } | ObjectOp::Read { .. })
    }

    fn run(&self, objects: &ObjectStore, object: u64) -> io::Result<Message> {
        Ok(match self {
            ObjectOp::Write { extents, data } => objects
                .write(object, extents, data)
                .map(|_| Message::Done)?,
            ObjectOp::Read { extents } => Message::Data {
                data: objects.read(object, extents)?.into(),
            },
            ObjectOp::Fsync => objects.fsync(object).map(|_| Message::Done)?,
            ObjectOp::Size => {
                let (size, mtime_ns) = objects.size(object)?;
                Message::Size { size, mtime_ns }
            }
            ObjectOp::Truncate(size) => objects.truncate(object, *size).map(|_| Message::Done)?,
            ObjectOp::Remove => objects.remove(object).map(|_| Message::Done)?,
        })
    }
}

/// Where a dispatched request sits on its object, for the throttle.
#[derive(Clone, Copy)]
struct Placement {
    object: u64,
    offset: u64,
    len: u64,
    segments: usize,
}

impl Action {
    /// Runs on the storage executor, at the throttle's pace when there is one.
    fn execute(self, backend: &Backend, at: Placement, now_ns: u64) -> Message {
        let paced = |data: bool, f: &mut dyn FnMut() -> Message| match (&backend.throttle, data) {
            (Some(t), true) => t.data(at.object, at.offset, at.len, at.segments, f),
            (Some(t), false) => t.metadata(f),
            (None, _) => f(),
        };
        let invalid = |message: &str| Message::Error {
            kind: ErrorKind::Invalid,
            message: message.into(),
        };
        match self {
            Action::Meta(op) => match &backend.metadata {
                None => invalid("this server has no metadata role"),
                Some(store) => paced(false, &mut || match store.apply(&op, now_ns) {
                    Ok(reply) => Message::MetaReply(reply),
                    Err(e) => Message::Error {
                        kind: e.kind(),
                        message: e.to_string(),
                    },
                }),
            },
            Action::Object(op) => match &backend.objects {
                None => invalid("this server has no data role"),
                Some(objects) => paced(op.moves_data(), &mut || {
                    op.run(objects, at.object)
                        .unwrap_or_else(|e| Message::Error {
                            kind: crate::storage::error_kind(&e),
                            message: e.to_string(),
                        })
                }),
            },
        }
    }
}

/// Connections open per client address.
#[derive(Clone, Default)]
struct OpenConnections(Arc<std::sync::Mutex<HashMap<std::net::IpAddr, u32>>>);

/// One open connection's place in [`OpenConnections`], given back on drop.
struct Slot {
    open: OpenConnections,
    ip: std::net::IpAddr,
}

impl OpenConnections {
    fn take(&self, from: SocketAddr, cap: u32) -> Option<Slot> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(from.ip()).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            open: self.clone(),
            ip: from.ip(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self.open.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// Largest frame before a connection has authenticated: a hello or a
/// proof is well under this, and nobody unauthenticated makes the server
/// buffer more.
const HANDSHAKE_MAX_FRAME: usize = 4096;

/// What a request holds of its connection's memory budget, in KiB (the
/// semaphore's unit): its data in, the data its reply carries out, and a
/// kibibyte for the rest.
fn cost_kib(message: &Message) -> u32 {
    let bytes = match message {
        Message::Write { data, .. } => data.len() as u64,
        Message::Read { extents, .. } => extents.iter().map(|e| e.len).sum(),
        _ => 0,
    };
    (bytes.div_ceil(1024) + 1).min(u32::MAX as u64) as u32
}

/// The connection's next frame; `None` once it closed, the server stops,
/// or a frame begun is not complete within one to two `frame_timeout`s
/// (a client trickling a frame, or gone silent half-way, would otherwise
/// hold its buffer for ever). Waiting between frames is not timed.
async fn next_frame(
    frames: &mut Frames,
    frame_timeout: Time,
    stopped: &mut watch::Receiver<bool>,
    from: SocketAddr,
) -> Option<Result<bytes::BytesMut, io::Error>> {
    let window = std::time::Duration::from_nanos(frame_timeout.as_nanos().max(1));
    let mut partial = false;
    loop {
        tokio::select! {
            f = tokio::time::timeout(window, frames.next()) => match f {
                Ok(f) => return f,
                Err(_) if frames.read_buffer().is_empty() => partial = false,
                Err(_) if partial => {
                    eprintln!("concerto-server: connection from {from} closed: a frame was begun and not finished within {window:?}");
                    return None;
                }
                Err(_) => partial = true,
            },
            _ = stopped.changed() => return None,
        }
    }
}

/// Longest a connection may take to authenticate.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

type Frames = FramedRead<OwnedReadHalf, LengthDelimitedCodec>;

/// Why a handshake failed: what the client is told, and the reason logged.
type Refused = (ErrorKind, String);

/// The next frame as a validated message; a frame that does not decode is
/// a protocol error, told as such.
async fn next_message(frames: &mut Frames) -> Result<Message, Refused> {
    let protocol = |e: ProtocolError| (ErrorKind::Protocol, e.to_string());
    match frames.next().await {
        None => Err((ErrorKind::Denied, "the connection closed".into())),
        Some(Err(e)) => Err(protocol(ProtocolError::Decode(e.to_string()))),
        Some(Ok(frame)) => Envelope::decode(frame.freeze())
            .map(|e| e.message)
            .map_err(protocol),
    }
}

/// The server's side of the handshake ([`concerto_proto::auth`]): the key
/// the connection proved it holds, or why it did not.
async fn authenticate(
    frames: &mut Frames,
    out: &mpsc::UnboundedSender<Outgoing>,
    keys: &Keys,
) -> Result<Key, Refused> {
    let denied = |why: String| (ErrorKind::Denied, why);
    let Message::Hello {
        key_id,
        nonce: client,
    } = next_message(frames).await?
    else {
        return Err(denied(
            "the first message was not a hello: authenticate first".into(),
        ));
    };
    let ring = keys.ring();
    let server = auth::random().map_err(denied)?;
    let _ = out.send((Envelope::new(0, Message::Challenge { nonce: server }), None));
    let Message::Proof { mac } = next_message(frames).await? else {
        return Err(denied(format!(
            "key {key_id:?}: the second message was not a proof"
        )));
    };
    // An unknown key is challenged like a known one and refused only here,
    // with the same words, so that the answers do not tell which ids exist.
    match ring.get(&key_id) {
        Some(key)
            if auth::verify(
                auth::Side::Client,
                &key.secret,
                &key_id,
                &client,
                &server,
                &mac,
            ) =>
        {
            let _ = out.send((
                Envelope::new(
                    0,
                    Message::Welcome {
                        grant: key.grant,
                        mac: auth::proof(
                            auth::Side::Server,
                            &key.secret,
                            &key_id,
                            &client,
                            &server,
                        ),
                    },
                ),
                None,
            ));
            Ok(key.clone())
        }
        _ => Err(denied(format!(
            "key {key_id:?}: unknown key or wrong proof"
        ))),
    }
}

/// One connection: the handshake, then frames in and replies out (in
/// completion order, matched by id).
#[allow(clippy::too_many_arguments)]
async fn connection(
    stream: TcpStream,
    from: SocketAddr,
    keys: Arc<Keys>,
    limits: ConnectionLimits,
    _slot: Slot,
    sched: mpsc::Sender<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, frame_codec());
    frames
        .decoder_mut()
        .set_max_frame_length(HANDSHAKE_MAX_FRAME);
    // Every reply after the handshake carries its request's share of the
    // connection's memory budget, and gives it back once written: the
    // queue is unbounded in type but bounded by the budget.
    let budget_kib = (limits.memory / 1024).clamp(1, Semaphore::MAX_PERMITS as u64) as u32;
    let budget = Arc::new(Semaphore::new(budget_kib as usize));
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Outgoing>();
    let writer = tokio::spawn(async move {
        // Small replies that are ready together leave in one write; a
        // payload larger than the buffer goes straight to the socket.
        let mut out = BufWriter::with_capacity(64 * 1024, write);
        while let Some((env, permit)) = out_rx.recv().await {
            if env.write_to(&mut out).await.is_err() {
                break;
            }
            if out_rx.is_empty() && out.flush().await.is_err() {
                break;
            }
            drop(permit);
        }
    });
    let key =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, authenticate(&mut frames, &out_tx, &keys))
            .await
            .unwrap_or_else(|_| {
                Err((
                    ErrorKind::Denied,
                    format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
                ))
            }) {
            Ok(key) => Some(key),
            Err((kind, why)) => {
                eprintln!("concerto-server: connection from {from} refused: {why}");
                // A protocol error says what was wrong with the frame; a refused
                // key learns only that it was refused.
                let message = match kind {
                    ErrorKind::Protocol => why,
                    _ => "authentication failed".into(),
                };
                let _ = out_tx.send((Envelope::new(0, Message::Error { kind, message }), None));
                None
            }
        };
    frames.decoder_mut().set_max_frame_length(MAX_FRAME);
    // A tenant's requests weigh what the administrator set for its key,
    // and are its key's user's; only the administrator's own requests may
    // carry a weight.
    let who = |tags: &Tags| match &key {
        Some(k) if k.grant == Grant::Admin => (tags.weight, None),
        Some(k) => (k.weight, k.user),
        None => (None, None),
    };
    while let Some(key) = &key {
        let Some(frame) = next_frame(&mut frames, limits.frame_timeout, &mut stopped, from).await
        else {
            break;
        };
        let env = match frame
            .map_err(|e| ProtocolError::Decode(e.to_string()))
            .and_then(|b| Envelope::decode(b.freeze()))
        {
            Ok(env) => env,
            Err(e) => {
                // Answer, then close: the stream may be out of step; other connections carry on.
                let error = Message::Error {
                    kind: ErrorKind::Protocol,
                    message: e.to_string(),
                };
                let _ = out_tx.send((Envelope::new(0, error), None));
                break;
            }
        };
        // The request's share of the budget; while replies hold it all,
        // this waits and the connection is not read (backpressure).
        let cost = cost_kib(&env.message).min(budget_kib);
        let permit = tokio::select! {
            p = budget.clone().acquire_many_owned(cost) => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = stopped.changed() => break,
        };
        if let Some(why) = refusal(key, &env.message) {
            let denied = Message::Error {
                kind: ErrorKind::Denied,
                message: why,
            };
            let _ = out_tx.send((Envelope::new(env.id, denied), Some(permit)));
            continue;
        }
        let id = env.id;
        let reply = Reply {
            id,
            out: Some(out_tx.clone()),
            permit: Some(permit),
        };
        let submit =
            |req: Request, action: Action, reply| Command::Submit(Job { req, action, reply });
        let cmd = match env.message {
            Message::Write {
                tags,
                object,
                extents,
                data,
            } => submit(
                request(tags, who(&tags), Op::Write, object, &extents),
                Action::Object(ObjectOp::Write { extents, data }),
                reply,
            ),
            Message::Read {
                tags,
                object,
                extents,
            } => submit(
                request(tags, who(&tags), Op::Read, object, &extents),
                Action::Object(ObjectOp::Read { extents }),
                reply,
            ),
            Message::Fsync { tags, object } => {
                // The policy sees a zero-length write: it moves no bytes but
                // takes its turn (and, in the SFQ kinds, a small request's cost).
                submit(
                    request(tags, who(&tags), Op::Write, object, &[]),
                    Action::Object(ObjectOp::Fsync),
                    reply,
                )
            }
            // Object-level metadata on a data server, as PVFS2's datafile getattr/setattr/remove.
            Message::ObjectSize { tags, object } => submit(
                request(tags, who(&tags), Op::Meta(MetaOp::Getattr), object, &[]),
                Action::Object(ObjectOp::Size),
                reply,
            ),
            Message::Truncate { tags, object, size } => submit(
                request(tags, who(&tags), Op::Meta(MetaOp::Setattr), object, &[]),
                Action::Object(ObjectOp::Truncate(size)),
                reply,
            ),
            Message::Remove { tags, object } => submit(
                request(tags, who(&tags), Op::Meta(MetaOp::Remove), object, &[]),
                Action::Object(ObjectOp::Remove),
                reply,
            ),
            Message::Meta { tags, op } => submit(
                request(tags, who(&tags), Op::Meta(op.kind()), 0, &[]),
                Action::Meta(op),
                reply,
            ),
            Message::Ping => Command::Ping { reply },
            Message::Space => Command::Space { reply },
            Message::SetPolicy { policy } => Command::SetPolicy { policy, reply },
            Message::ServiceReport(report) => Command::Absorb { report, reply },
            Message::SetPeers { peers } => Command::SetPeers { peers, reply },
            Message::SetRules { rules, apply } => match parse_rules(&rules) {
                Ok(rules) => Command::SetRules {
                    rules,
                    apply,
                    reply,
                },
                Err(message) => {
                    reply.send(Message::Error {
                        kind: ErrorKind::Invalid,
                        message,
                    });
                    continue;
                }
            },
            Message::GetRules => Command::GetRules { reply },
            Message::Stats => {
                let (tx, rx) = oneshot::channel();
                tokio::spawn(async move {
                    if let Ok(stats) = rx.await {
                        reply.send(Message::StatsReply(Box::new(stats)));
                    }
                });
                Command::Stats { reply: tx }
            }
            _ => {
                reply.send(Message::Error {
                    kind: ErrorKind::Protocol,
                    message: "a reply is not a request".into(),
                });
                break;
            }
        };
        if sched.send(cmd).await.is_err() {
            break;
        }
    }
    drop(out_tx);
    let _ = writer.await;
}

/// The request as the policy sees it: its tags, the weight it is granted,
/// and the object extents it covers.
/// The request a frame asks for, with the weight and user its key gives.
fn request(
    tags: Tags,
    (weight, user): (Option<f64>, Option<u32>),
    op: Op,
    object: u64,
    extents: &[Extent],
) -> Request {
    Request {
        id: RequestId(0),
        app: AppId(tags.app),
        rank: tags.rank,
        issue_time: Time::from_nanos(tags.issue_ns),
        op,
        object: ObjectId(object),
        offset: extents.first().map_or(0, |e| e.offset),
        len: extents.iter().map(|e| e.len).sum(),
        segments: if extents.len() > 1 {
            extents.to_vec()
        } else {
            Vec::new()
        },
        weight,
        user,
    }
}

/// Epoch-aligned monotonic clock.
struct Clock {
    epoch_at_start: u64,
    start: Instant,
}

impl Clock {
    fn new() -> Clock {
        let epoch_at_start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            epoch_at_start,
            start: Instant::now(),
        }
    }
    fn now(&self) -> Time {
        Time::from_nanos(self.epoch_at_start + self.start.elapsed().as_nanos() as u64)
    }
}

/// A request on the storage (its reply already travels with the work).
struct InFlight {
    req: Request,
    ticket: Ticket,
    arrived: Time,
}

/// A request in the policy's queue: what to do once dispatched.
struct Waiting {
    action: Action,
    reply: Reply,
    arrived: Time,
}

/// A request the storage finished: which, and the bytes it moved.
struct Finished {
    id: u64,
    moved: u64,
}

/// The scheduling loop: core's [`Driver`] decides what runs and when; this
/// loop carries requests to the storage executor and back, moves service
/// reports to and from the peers, and keeps the statistics.
async fn schedule(
    cfg: ServerConfig,
    addr: SocketAddr,
    backend: Backend,
    mut rules: QosRules,
    mut rx: mpsc::Receiver<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    let clock = Clock::new();
    let backend = Arc::new(backend);
    let mut driver = Driver::new(&cfg.policy, cfg.device_defaults());
    driver.set_rules(&rules, clock.now());
    let peers = PeerLink::start(addr, cfg.peers.clone(), cfg.keys.clone());
    let mut waiting: HashMap<u64, Waiting> = HashMap::new();
    let mut in_flight: HashMap<u64, InFlight> = HashMap::new();
    let mut recorder = Recorder::new(clock.now());
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Finished>();
    let mut next_id = 0u64;
    let mut started = Vec::new();
    loop {
        let now = clock.now();
        recorder.advance(now);
        started.clear();
        driver.dispatch(now, &mut started);
        for (req, ticket) in started.drain(..) {
            recorder.dispatched(req.app.0);
            let id = req.id.0;
            let Some(w) = waiting.remove(&id) else {
                continue;
            };
            let (backend, done) = (backend.clone(), done_tx.clone());
            let at = Placement {
                object: req.object.0,
                offset: req.offset,
                len: req.len,
                segments: req.segments.len().max(1),
            };
            let now_ns = now.as_nanos();
            let writes = req.op == Op::Write;
            in_flight.insert(
                id,
                InFlight {
                    req,
                    ticket,
                    arrived: w.arrived,
                },
            );
            let (action, reply) = (w.action, w.reply);
            tokio::task::spawn_blocking(move || {
                let message = action.execute(&backend, at, now_ns);
                let moved = match &message {
                    Message::Data { data } => data.len() as u64,
                    Message::Done if writes => at.len,
                    _ => 0,
                };
                // Bookkeeping first: once the client has its answer it may
                // ask for statistics, and those must already count this
                // request (the loop drains completions before commands).
                let _ = done.send(Finished { id, moved });
                reply.send(message);
            });
        }
        recorder.set_free_slots(driver.waiting_with_free_slots());
        let sleep = driver
            .next_wakeup(now)
            .map(|at| std::time::Duration::from_nanos((at.saturating_sub(clock.now())).as_nanos()));
        tokio::select! {
            // Completions before commands: a command that follows a reply
            // (statistics, a policy switch) sees that request finished.
            biased;
            Some(Finished { id, moved }) = done_rx.recv() => {
                if let Some(f) = in_flight.remove(&id) {
                    let now = clock.now();
                    if let Some(report) = driver.complete(&f.req, f.ticket, now) {
                        recorder.report_sent();
                        peers.send(report);
                    }
                    recorder.completed(f.req.app.0, f.req.op, moved, now.saturating_sub(f.arrived));
                }
            }
            cmd = rx.recv() => match cmd {
                None => break,
                Some(Command::Submit(mut job)) => {
                    next_id += 1;
                    job.req.id = RequestId(next_id);
                    let arrived = clock.now();
                    // The client's clock is its word only within the skew allowed.
                    job.req.issue_time = job.req.issue_time.clamp(arrived.saturating_sub(cfg.issue_skew), arrived);
                    recorder.advance(arrived);
                    recorder.enqueued(job.req.app.0);
                    waiting.insert(next_id, Waiting { action: job.action, reply: job.reply, arrived });
                    driver.enqueue(job.req, arrived);
                }
                Some(Command::Space { reply }) => {
                    let (total, free) = backend.objects.as_ref().and_then(|o| o.space().ok()).unwrap_or((0, 0));
                    reply.send(Message::SpaceReply { total, free });
                }
                Some(Command::Ping { reply }) => {
                    reply.send(Message::Pong { policy: driver.policy().name().to_string(), roles: cfg.roles.clone() });
                }
                Some(Command::SetPolicy { policy, reply }) => {
                    reply.send(match parse_policy(&policy) {
                        Ok(p) => Message::Switched { retiring: driver.switch(&p) },
                        Err(message) => Message::Error { kind: ErrorKind::Invalid, message },
                    });
                }
                Some(Command::Absorb { report, reply }) => {
                    driver.absorb(&report);
                    recorder.report_received();
                    reply.send(Message::Done);
                }
                Some(Command::SetRules { rules: new, apply, reply }) => {
                    if !apply {
                        reply.send(Message::Done);
                        continue;
                    }
                    // Saved first: rules in force that a restart would lose
                    // would be a surprise.
                    reply.send(match save_rules(&cfg.data_dir, &new) {
                        Ok(()) => {
                            driver.set_rules(&new, clock.now());
                            rules = new;
                            Message::Done
                        }
                        Err(e) => Message::Error { kind: ErrorKind::Io, message: e.to_string() },
                    });
                }
                Some(Command::GetRules { reply }) => {
                    reply.send(Message::RulesReply { rules: rules_toml(&rules) });
                }
                Some(Command::SetPeers { peers: list, reply }) => {
                    peers.set(list);
                    reply.send(Message::Done);
                }
                Some(Command::Stats { reply }) => {
                    let now = clock.now();
                    recorder.advance(now);
                    let (space_total, space_free) = backend.objects.as_ref().and_then(|o| o.space().ok()).unwrap_or((0, 0));
                    let _ = reply.send(ServerStats {
                        address: addr.to_string(),
                        roles: cfg.roles.clone(),
                        policy: driver.policy().name().to_string(),
                        throttle: backend.throttle.as_ref().map(|t| t.describe()),
                        uptime_s: recorder.uptime_s(now),
                        queued: driver.queued() as u64,
                        in_flight: in_flight.len() as u64,
                        apps: recorder.apps(),
                        retired: recorder.retired(),
                        latency: recorder.latency(),
                        reports: recorder.reports(),
                        space_total,
                        space_free,
                    });
                }
            },
            _ = tokio::time::sleep(sleep.unwrap_or_default()), if sleep.is_some() => {}
            _ = stopped.changed() => break,
        }
    }
}

/// Where a server keeps its QoS rules, in its data directory.
pub const RULES_FILE: &str = "rules.toml";

/// QoS rules from TOML text (`[[rules]]` tables, `work_conserving`),
/// validated; an error names the key (`rules[0].bandwidth: ...`).
pub fn parse_rules(text: &str) -> Result<QosRules, String> {
    let r: QosRules = concerto_toml::parse(text)?;
    r.validate()
        .map_err(|(field, msg)| format!("{field}: {msg}"))?;
    Ok(r)
}

fn rules_toml(rules: &QosRules) -> String {
    toml::to_string(rules).unwrap_or_default()
}

/// Writes the rules to the data directory, replacing the file atomically.
fn save_rules(dir: &std::path::Path, rules: &QosRules) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{RULES_FILE}.tmp"));
    std::fs::write(&tmp, rules_toml(rules))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(RULES_FILE))
}

/// The rules a server saved, if any; an error names the file.
fn load_rules(dir: &std::path::Path) -> io::Result<QosRules> {
    let path = dir.join(RULES_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_rules(&text).map_err(|e| other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(QosRules::default()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// A policy from TOML text (`kind = "sfq-d-plus"`, `depth = 8`, ...), validated.
pub fn parse_policy(text: &str) -> Result<PolicyConfig, String> {
    let p: PolicyConfig = concerto_toml::parse(text).map_err(|e| format!("policy: {e}"))?;
    p.validate()
        .map_err(|(field, msg)| format!("policy.{field}: {msg}"))?;
    Ok(p)
}
