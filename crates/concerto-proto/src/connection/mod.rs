//! A connection to one server: requests are sent with the caller's tags and
//! matched with their replies by id, so many can be outstanding on one
//! connection. Every request has a timeout whose error names the server:
//! it counts the time the connection makes no progress — nothing of the
//! request sent, nothing received — not the time the request takes, so a
//! large request over a slow link is not cut off while its bytes flow, and
//! a partitioned link or a silent server is still found.
//! The client library and the servers (service reports to peers) both use it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Buf;
use futures::StreamExt;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

mod calls;
mod handshake;

use handshake::handshake;

use crate::auth::{self, Credential, Grant};
use crate::capability::Capability;
use crate::integrity::{Ask, Sealer, Session};
use crate::{frame_codec, Envelope, ErrorKind, Message};

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("server {server}: cannot connect: {source}")]
    Connect {
        server: SocketAddr,
        source: std::io::Error,
    },
    #[error("server {server} did not answer within {timeout:?}")]
    Timeout {
        server: SocketAddr,
        timeout: Duration,
    },
    #[error("server {server} closed the connection")]
    Closed { server: SocketAddr },
    /// The connection ended for a reason one side said: a frame that
    /// failed its integrity check (the server's, or this client's check of
    /// a reply), or the server's error for the connection as a whole.
    #[error("server {server}: the connection ended: {why}")]
    Ended { server: SocketAddr, why: String },
    #[error("{message}")]
    Server {
        server: SocketAddr,
        kind: ErrorKind,
        message: String,
    },
    #[error("server {server} sent an unexpected reply")]
    Unexpected { server: SocketAddr },
    /// The handshake failed: the key was refused, or the server could not
    /// prove that it holds the key.
    #[error("server {server}: authentication failed: {message}")]
    Auth { server: SocketAddr, message: String },
    /// A problem found on the client before anything was sent.
    #[error("{0}")]
    Invalid(String),
    /// A write the caller was told was done (written behind) failed
    /// afterwards; the next call on the file says so, with the error's kind.
    #[error("an earlier write failed: {message}")]
    Deferred {
        kind: Option<ErrorKind>,
        message: String,
    },
}

impl ClientError {
    /// The server-side error kind, when the server answered with an error.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Server { kind, .. } => Some(*kind),
            ClientError::Deferred { kind, .. } => *kind,
            _ => None,
        }
    }

    /// True when the server said it takes no more from this client now
    /// (worth trying again later).
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            ClientError::Server {
                kind: ErrorKind::Busy,
                ..
            }
        )
    }

    /// True when the server could not be reached or stopped answering.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::Timeout { .. }
                | ClientError::Closed { .. }
                | ClientError::Ended { .. }
        )
    }
}

/// The first pause before a handshake the server answered `Busy` is tried
/// again, and the longest (the pause doubles between).
const BUSY_FIRST_PAUSE: Duration = Duration::from_millis(5);
const BUSY_LONGEST_PAUSE: Duration = Duration::from_millis(500);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Message>>>>;

/// When a connection last received bytes: microseconds since its epoch.
#[derive(Clone)]
struct LastHeard {
    epoch: Instant,
    micros: Arc<AtomicU64>,
}

impl LastHeard {
    fn new() -> LastHeard {
        LastHeard {
            epoch: Instant::now(),
            micros: Arc::default(),
        }
    }

    fn stamp(&self) {
        let now = self.epoch.elapsed().as_micros() as u64;
        self.micros.fetch_max(now, Ordering::Relaxed);
    }

    fn at(&self) -> Instant {
        self.epoch + Duration::from_micros(self.micros.load(Ordering::Relaxed))
    }
}

/// The read half of a connection, noting when bytes arrive: a reply still
/// arriving over a slow link is progress, not silence.
struct StampedRead {
    inner: OwnedReadHalf,
    heard: LastHeard,
}

impl AsyncRead for StampedRead {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.heard.stamp();
        }
        polled
    }
}

/// A request is sent in pieces of this size, each of which must go within
/// the timeout: the send is timed by its progress.
const SEND_PIECE: usize = 256 << 10;

/// An object as a data request names it: its id and, for a tenant key,
/// the capability the metadata service gave for it. An admin or peer key
/// needs none (`object.into()` from a bare id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Object {
    pub id: u64,
    pub cap: Option<Capability>,
}

impl From<u64> for Object {
    fn from(id: u64) -> Object {
        Object { id, cap: None }
    }
}

pub struct ServerConnection {
    server: SocketAddr,
    /// Requests are written whole by the caller's task, one at a time
    /// (and sealed in the order they leave, when frames carry MACs).
    writer: tokio::sync::Mutex<(OwnedWriteHalf, Option<Sealer>)>,
    /// Set when a frame was left half-written: the stream is out of step for good.
    broken: AtomicBool,
    pending: Pending,
    next_id: AtomicU64,
    /// How long the connection may make no progress while a request waits.
    timeout: Duration,
    heard: LastHeard,
    /// What the server said the key grants.
    grant: Grant,
    reader: tokio::task::JoinHandle<()>,
    /// Why the reader stopped, when a side said: what the waiters are told.
    ended: Arc<std::sync::Mutex<Option<String>>>,
}

impl Drop for ServerConnection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl ServerConnection {
    /// Connects and authenticates with `credential` (the handshake of
    /// [`crate::auth`]), all within `timeout`. A server that answers
    /// `Busy`, or closes the connection before the handshake is done, is
    /// tried again after a growing pause until `timeout`; then its last
    /// answer is the error. (A server that cannot be reached is not.)
    pub async fn connect(
        server: SocketAddr,
        timeout: Duration,
        credential: &Credential,
    ) -> Result<ServerConnection, ClientError> {
        Self::connect_asking(server, timeout, credential, Ask::default()).await
    }

    /// [`connect`](Self::connect), asking for integrity on the wire as
    /// `ask` says (a server on another host, by default).
    pub async fn connect_asking(
        server: SocketAddr,
        timeout: Duration,
        credential: &Credential,
        ask: Ask,
    ) -> Result<ServerConnection, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut pause = BUSY_FIRST_PAUSE;
        let mut last_busy = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match Self::connect_once(server, left, timeout, (credential, ask)).await {
                // The server's last word says more than the time running out.
                Err(ClientError::Timeout { server, .. }) => {
                    return Err(last_busy.unwrap_or(ClientError::Timeout { server, timeout }))
                }
                // Busy, or closed in the middle of the handshake: the
                // server closes the oldest of too many handshakes from one
                // address, saying so, but its words can be lost to the
                // reset of a socket closed with our next frame unread.
                Err(e) if e.is_busy() || matches!(e, ClientError::Closed { .. }) => {
                    // Clients that were closed together should not all
                    // come back together: a random part of the pause.
                    let jitter = auth::random().map_or(0, |r| u64::from(r[0]));
                    let wait = pause.mul_f64(0.5 + jitter as f64 / 510.0);
                    if Instant::now() + wait >= deadline {
                        return Err(e);
                    }
                    if e.is_busy() {
                        last_busy = Some(e);
                    }
                    tokio::time::sleep(wait).await;
                    pause = (pause * 2).min(BUSY_LONGEST_PAUSE);
                }
                done => return done,
            }
        }
    }

    /// One attempt, within `left`; the connection's requests then time
    /// out after `timeout` (the caller's, not what was left of it).
    async fn connect_once(
        server: SocketAddr,
        left: Duration,
        timeout: Duration,
        (credential, ask): (&Credential, Ask),
    ) -> Result<ServerConnection, ClientError> {
        let heard = LastHeard::new();
        let opened = async {
            let stream = TcpStream::connect(server)
                .await
                .map_err(|source| ClientError::Connect { server, source })?;
            let _ = stream.set_nodelay(true);
            let (read, mut writer) = stream.into_split();
            let read = StampedRead {
                inner: read,
                heard: heard.clone(),
            };
            let mut frames = FramedRead::new(read, frame_codec());
            let (grant, session) =
                handshake(server, &mut frames, &mut writer, (credential, ask)).await?;
            Ok::<_, ClientError>((frames, writer, grant, session))
        };
        let (mut frames, writer, grant, session) = tokio::time::timeout(left, opened)
            .await
            .map_err(|_| ClientError::Timeout { server, timeout })??;
        let pending: Pending = Arc::default();
        let map = pending.clone();
        let ended: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let why_ended = ended.clone();
        let end = move |why: String| {
            if let Ok(mut e) = why_ended.lock() {
                *e = Some(why);
            }
        };
        let (sealer, mut opener) = match session {
            Some(Session { seal, open }) => (Some(seal), Some(open)),
            None => (None, None),
        };
        let reader = tokio::spawn(async move {
            while let Some(Ok(frame)) = frames.next().await {
                let frame = match &mut opener {
                    // A frame that fails its check ends the connection:
                    // what follows cannot be trusted either.
                    Some(o) => {
                        match o.open(frame.freeze()) {
                            Ok(frame) => frame,
                            Err(e) => {
                                end(format!("a reply failed its integrity check ({e}); this client closed it"));
                                break;
                            }
                        }
                    }
                    None => frame.freeze(),
                };
                let Ok(env) = Envelope::decode(frame) else {
                    break;
                };
                if let Some(tx) = map.lock().ok().and_then(|mut m| m.remove(&env.id)) {
                    let _ = tx.send(env.message);
                } else if let Message::Error { message, .. } = env.message {
                    // A protocol error for the connection as a whole (a
                    // frame of ours that failed the server's integrity
                    // check, say): fail everyone waiting, with its words.
                    end(message);
                    break;
                }
            }
            // Dropping the senders wakes every waiter with "closed".
            if let Ok(mut m) = map.lock() {
                m.clear();
            }
        });
        Ok(ServerConnection {
            server,
            writer: tokio::sync::Mutex::new((writer, sealer)),
            broken: AtomicBool::new(false),
            pending,
            next_id: AtomicU64::new(1),
            timeout,
            heard,
            grant,
            reader,
            ended,
        })
    }

    /// The error of a request whose reply will not come: why the
    /// connection ended, if a side said, else that it closed.
    fn closed(&self) -> ClientError {
        let server = self.server;
        match self.ended.lock().ok().and_then(|e| e.clone()) {
            Some(why) => ClientError::Ended { server, why },
            None => ClientError::Closed { server },
        }
    }

    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// What the server said this connection's key grants.
    pub fn grant(&self) -> Grant {
        self.grant
    }

    /// True once the server closed the connection or a send broke off (it must be reopened).
    pub fn is_closed(&self) -> bool {
        self.broken.load(Ordering::Relaxed) || self.reader.is_finished()
    }

    /// Gives the connection up: later calls fail at once, waiting ones wake with "closed".
    fn give_up(&self) {
        self.broken.store(true, Ordering::Relaxed);
        self.reader.abort();
        if let Ok(mut m) = self.pending.lock() {
            m.clear();
        }
    }

    /// Writes one frame; if that fails or is cancelled (a timeout) part-way, the connection is given up.
    async fn send(&self, envelope: &Envelope) -> Result<(), ClientError> {
        struct GiveUpUnlessSent<'a>(&'a ServerConnection, bool);
        impl Drop for GiveUpUnlessSent<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.give_up();
                }
            }
        }
        let mut writer = self.writer.lock().await;
        if self.is_closed() {
            return Err(ClientError::Closed {
                server: self.server,
            });
        }
        let mut guard = GiveUpUnlessSent(self, false);
        let (writer, sealer) = &mut *writer;
        let (head, mut payload, mac) = envelope.frame(sealer.as_mut());
        // The head goes with the first piece (one vectored write for a small request).
        // The MAC goes with the last piece.
        let first = payload.split_to(payload.len().min(SEND_PIECE));
        let mut mac = Some(mac);
        let tail = if payload.is_empty() { mac.take() } else { None };
        self.within(writer.write_all_buf(&mut head.chain(first).chain(tail.unwrap_or_default())))
            .await?;
        while !payload.is_empty() {
            let piece = payload.split_to(payload.len().min(SEND_PIECE));
            let tail = if payload.is_empty() { mac.take() } else { None };
            self.within(writer.write_all_buf(&mut piece.chain(tail.unwrap_or_default())))
                .await?;
        }
        guard.1 = true;
        Ok(())
    }

    /// One piece of a request written, within the timeout.
    async fn within(
        &self,
        written: impl std::future::Future<Output = std::io::Result<()>>,
    ) -> Result<(), ClientError> {
        let (server, timeout) = (self.server, self.timeout);
        match tokio::time::timeout(timeout, written).await {
            Err(_) => Err(ClientError::Timeout { server, timeout }),
            Ok(Err(_)) => Err(ClientError::Closed { server }),
            Ok(Ok(())) => Ok(()),
        }
    }

    /// Waits for a reply until the connection has been silent for the
    /// timeout since `sent` (the request's last byte left) or since its
    /// last received byte, whichever is later.
    async fn reply(
        &self,
        mut rx: oneshot::Receiver<Message>,
        sent: Instant,
    ) -> Result<Message, ClientError> {
        let server = self.server;
        loop {
            let quiet_since = sent.max(self.heard.at());
            let deadline = quiet_since + self.timeout;
            match tokio::time::timeout_at(deadline.into(), &mut rx).await {
                Ok(reply) => return reply.map_err(|_| self.closed()),
                Err(_) if self.heard.at() <= quiet_since => {
                    return Err(ClientError::Timeout {
                        server,
                        timeout: self.timeout,
                    })
                }
                Err(_) => continue,
            }
        }
    }

    /// Sends one request and waits for its reply.
    pub async fn call(&self, message: Message) -> Result<Message, ClientError> {
        let server = self.server;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut m) = self.pending.lock() {
            m.insert(id, tx);
        }
        let envelope = Envelope::new(id, message);
        let exchange = async {
            self.send(&envelope).await?;
            self.reply(rx, Instant::now()).await
        };
        let reply = exchange.await;
        if let Ok(mut m) = self.pending.lock() {
            m.remove(&id);
        }
        match reply? {
            Message::Error { kind, message } => {
                // Namespace errors name the path already; others say which server failed.
                let message = match kind {
                    ErrorKind::NotFound
                    | ErrorKind::Exists
                    | ErrorKind::NotEmpty
                    | ErrorKind::NotADirectory
                    | ErrorKind::IsADirectory => message,
                    _ => format!("server {server}: {message}"),
                };
                Err(ClientError::Server {
                    server,
                    kind,
                    message,
                })
            }
            other => Ok(other),
        }
    }

    fn unexpected<T>(&self) -> Result<T, ClientError> {
        Err(ClientError::Unexpected {
            server: self.server,
        })
    }
}

/// The metadata service's change counts, as a reply reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub made: u64,
    pub durable: u64,
}

/// The coordinator's answer to a request to begin an I/O phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PhaseAnswer {
    /// Go ahead at this priority; renew within `lease`.
    Granted { priority: f64, lease: Duration },
    /// Still waiting behind `ahead` others of set `set`; ask again within `lease`.
    Queued {
        set: i64,
        ahead: u32,
        lease: Duration,
    },
}

/// What a data server's `Space` reply says of the file system holding its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    /// Same for servers that share one file system (see `Message::SpaceReply`).
    pub disk: u64,
}

/// Connections to a cluster's servers by id, each opened on first use with
/// one credential and opened again after it failed: what the client library
/// keeps for its cluster, and what a server keeps for the others (the
/// metadata server for its data servers and back).
pub struct ServerPool {
    servers: Vec<(u32, SocketAddr)>,
    timeout: Duration,
    credential: Credential,
    ask: Ask,
    slots: Vec<tokio::sync::Mutex<Option<Arc<ServerConnection>>>>,
}

impl ServerPool {
    pub fn new(
        servers: Vec<(u32, SocketAddr)>,
        timeout: Duration,
        credential: Credential,
        ask: Ask,
    ) -> ServerPool {
        let slots = servers
            .iter()
            .map(|_| tokio::sync::Mutex::new(None))
            .collect();
        ServerPool {
            servers,
            timeout,
            credential,
            ask,
            slots,
        }
    }

    /// The connection to server `id`, opened (or opened again) if needed.
    pub async fn get(&self, id: u32) -> Result<Arc<ServerConnection>, ClientError> {
        let index = self
            .servers
            .iter()
            .position(|&(s, _)| s == id)
            .ok_or_else(|| ClientError::Invalid(format!("server id {id} is not in the cluster")))?;
        let mut slot = self.slots[index].lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(
            ServerConnection::connect_asking(
                self.servers[index].1,
                self.timeout,
                &self.credential,
                self.ask,
            )
            .await?,
        );
        *slot = Some(c.clone());
        Ok(c)
    }

    /// The address of server `id`.
    pub fn address(&self, id: u32) -> Option<SocketAddr> {
        self.servers
            .iter()
            .find(|&&(s, _)| s == id)
            .map(|&(_, a)| a)
    }
}
