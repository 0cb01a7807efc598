//! Connections: the accept loop, the handshake, frames in and replies out,
//! and the bounds on what one client holds of the server (handshakes and
//! authenticated connections per address, memory per connection, time per
//! frame). A request that passes
//! becomes a [`Command`] for the scheduling loop; its reply goes straight
//! back on the connection's writer, matched by id, in completion order.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio_io_timeout::TimeoutWriter;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use concerto_proto::auth::{self, Key};
use concerto_proto::capability::{self, CapabilityKey};
use concerto_proto::integrity::{Opener, Sealer, Session};
use concerto_proto::{frame_codec, Envelope, ErrorKind, Message, ProtocolError, VERSION};

use crate::commands::command;
use crate::intake::{kib, next_request, Budgets, Next};
use crate::keys::{capability_refusal, refusal, Keys};
use crate::refusals::{source_of, Refusal};
use crate::schedule::{Command, Held, Outgoing, Reply};
use crate::server::{ConnectionLimits, Integrity};
use crate::stats::ConnectionCounters;

/// Accepts connections until the server stops; each gets its own task.
pub(crate) async fn accept(
    listener: TcpListener,
    (keys, counters): (Arc<Keys>, Arc<ConnectionCounters>),
    limits: ConnectionLimits,
    sched: mpsc::Sender<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    let open = OpenConnections::default();
    let ids = AtomicU64::new(0);
    let server_budget = Arc::new(Semaphore::new(kib(limits.server_memory) as usize));
    // Accepting fails when the process is out of file descriptors; the
    // next attempt would fail at once, so wait (longer each time) rather
    // than spin.
    let mut backoff = Duration::ZERO;
    let interval = Duration::from_nanos(limits.refusal_log_interval.as_nanos());
    let mut summaries = tokio::time::interval(interval);
    summaries.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let log_refusals = || {
        if let Some(line) = counters.refusals.summary(interval) {
            eprintln!("concerto-server: {line}");
        }
    };
    loop {
        tokio::select! {
            _ = summaries.tick() => log_refusals(),
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    backoff = Duration::ZERO;
                    let conn = ids.fetch_add(1, Ordering::Relaxed) + 1;
                    let Some((slot, evicted)) = open.arrive(from, conn, kib(limits.address_memory)) else {
                        let why = format!("{PENDING_TOTAL} handshakes in progress already, most of them from this source");
                        counters.refusals.record(Refusal::PoolFull, from.ip(), &why);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let peer = Peer { from, conn, slot, server_budget: server_budget.clone(), counters: counters.clone() };
                    tokio::spawn(connection(stream, peer, evicted, keys.clone(), limits, sched.clone(), stopped.clone()));
                }
                Err(e) => {
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
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
    log_refusals();
}

/// Handshakes in progress from one address at once. A new connection past
/// this closes the address's oldest handshake rather than being refused:
/// whoever holds idle unauthenticated connections cannot keep out a client
/// of the same address (every job on a compute node shares it), whose
/// handshake is the newest and done in a few round trips. The closed one
/// is told `Busy` and its client tries again. As many as a compute node
/// has cores, so that every rank of a job starting at once handshakes
/// without being closed (with 16, two jobs of 24 processes together on
/// one node had handshakes closed, and before clients retried, failed).
const PENDING_PER_ADDRESS: usize = 128;
/// Handshakes in progress at once from every address. Past it the pool is
/// shared fairly among sources (an IPv4 address, an IPv6 /64): a new
/// connection from a source with fewer handshakes than the most
/// represented one closes that source's oldest handshake and takes its
/// place; one from the most represented source is closed at once. So
/// idle handshakes from a few sources cannot keep another client out.
const PENDING_TOTAL: usize = 1024;

/// Why a handshake in progress was closed before it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Evicted {
    /// [`PENDING_PER_ADDRESS`] newer ones from its address came in.
    ByItsAddress,
    /// The pool was full and its source had the most handshakes in it.
    ByAFullPool,
}

impl Evicted {
    /// What the closed handshake of `ip` is told.
    fn reason(self, ip: IpAddr) -> String {
        match self {
            Evicted::ByItsAddress => format!(
                "{PENDING_PER_ADDRESS} newer handshakes from {ip} came in before it finished"
            ),
            Evicted::ByAFullPool => format!(
                "the server's {PENDING_TOTAL} handshakes in progress were full, most of them from {}",
                source_of(ip)
            ),
        }
    }
}

/// What one address holds of the server: connections that authenticated
/// (at most the per-client cap), of them each key's (at most the per-key
/// cap), and handshakes in progress, oldest first, each with the way to
/// close it.
struct Address {
    authenticated: u32,
    per_key: HashMap<Arc<str>, u32>,
    pending: VecDeque<(u64, oneshot::Sender<Evicted>)>,
    /// What the requests of all its connections may hold (KiB).
    budget: Arc<Semaphore>,
}

#[derive(Default)]
struct Open {
    addresses: HashMap<IpAddr, Address>,
    /// What the requests of each key's connections may hold (KiB), for the
    /// keys with a connection open or a request still holding some.
    keys: HashMap<Arc<str>, Arc<Semaphore>>,
    pending: usize,
    /// Handshakes in progress per source (`refusals::source_of`).
    per_source: HashMap<IpAddr, usize>,
}

impl Open {
    /// Connection `conn` of `ip` is no longer a handshake in progress (if
    /// a newer one did not close it already).
    fn forget_handshake(&mut self, ip: IpAddr, conn: u64) {
        let Some(address) = self.addresses.get_mut(&ip) else {
            return;
        };
        if let Some(i) = address.pending.iter().position(|(c, _)| *c == conn) {
            address.pending.remove(i);
            self.left_pool(ip);
        }
    }

    fn joined_pool(&mut self, ip: IpAddr) {
        self.pending += 1;
        *self.per_source.entry(source_of(ip)).or_insert(0) += 1;
    }

    fn left_pool(&mut self, ip: IpAddr) {
        self.pending -= 1;
        let source = source_of(ip);
        if let Some(n) = self.per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }

    /// Makes room in a full pool for a handshake from `ip`'s source:
    /// closes the oldest handshake of the most represented source, unless
    /// that is `ip`'s own (or one as large): then false.
    fn room_for(&mut self, ip: IpAddr) -> bool {
        let mine = self.per_source.get(&source_of(ip)).copied().unwrap_or(0);
        let Some((largest, n)) = self
            .per_source
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(s, n)| (*s, *n))
        else {
            return false;
        };
        if mine + 1 >= n {
            return false;
        }
        // Its oldest handshake: the smallest connection number among its addresses'.
        let oldest = self
            .addresses
            .iter()
            .filter(|(a, _)| source_of(**a) == largest)
            .filter_map(|(a, address)| address.pending.front().map(|(c, _)| (*c, *a)))
            .min();
        let Some((_, at)) = oldest else {
            return false;
        };
        if let Some((_, close)) = self
            .addresses
            .get_mut(&at)
            .and_then(|a| a.pending.pop_front())
        {
            self.left_pool(at);
            let _ = close.send(Evicted::ByAFullPool);
        }
        true
    }
}

/// Connections per client address, and handshakes in progress.
#[derive(Clone, Default)]
struct OpenConnections(Arc<std::sync::Mutex<Open>>);

/// One connection's place in [`OpenConnections`], given back on drop.
struct Slot {
    open: OpenConnections,
    ip: IpAddr,
    conn: u64,
    /// The key it authenticated with, once it has.
    key: Option<Arc<str>>,
    /// Its address's memory budget.
    budget: Arc<Semaphore>,
    /// Its key's memory budget, once it authenticated.
    key_budget: Option<Arc<Semaphore>>,
}

impl OpenConnections {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection's place among its address's handshakes, and what
    /// tells it that a newer one closed it; `None` when the server has
    /// [`PENDING_TOTAL`] handshakes in progress.
    fn arrive(
        &self,
        from: SocketAddr,
        conn: u64,
        budget_kib: u32,
    ) -> Option<(Slot, oneshot::Receiver<Evicted>)> {
        let mut open = self.lock();
        if open.pending >= PENDING_TOTAL && !open.room_for(from.ip()) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let address = open.addresses.entry(from.ip()).or_insert_with(|| Address {
            authenticated: 0,
            per_key: HashMap::new(),
            pending: VecDeque::new(),
            budget: Arc::new(Semaphore::new(budget_kib as usize)),
        });
        let budget = address.budget.clone();
        let evicted = if address.pending.len() >= PENDING_PER_ADDRESS {
            address.pending.pop_front()
        } else {
            None
        };
        address.pending.push_back((conn, tx));
        open.joined_pool(from.ip());
        if let Some((_, close)) = evicted {
            open.left_pool(from.ip());
            let _ = close.send(Evicted::ByItsAddress);
        }
        let slot = Slot {
            open: self.clone(),
            ip: from.ip(),
            conn,
            key: None,
            budget,
            key_budget: None,
        };
        Some((slot, rx))
    }
}

impl Slot {
    /// The handshake with `key` succeeded: the connection counts among its
    /// address's authenticated ones, unless the address has `caps.0`
    /// already or this key `caps.1` of them (so that one job cannot take
    /// every place of a node the others share).
    fn authenticate(
        &mut self,
        (cap, key_cap, key_kib): (u32, u32, u32),
        key: &str,
    ) -> Result<(), String> {
        let mut open = self.open.lock();
        open.forget_handshake(self.ip, self.conn);
        let Some(address) = open.addresses.get_mut(&self.ip) else {
            return Err(format!("{} is not known (a server fault)", self.ip));
        };
        if address.authenticated >= cap {
            return Err(format!("{cap} connections from {} already", self.ip));
        }
        let key: Arc<str> = Arc::from(key);
        let of_key = address.per_key.entry(key.clone()).or_insert(0);
        if *of_key >= key_cap {
            return Err(format!(
                "{key_cap} connections of key {key:?} from {} already",
                self.ip
            ));
        }
        *of_key += 1;
        address.authenticated += 1;
        let budget = open
            .keys
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(key_kib as usize)));
        self.key_budget = Some(budget.clone());
        self.key = Some(key);
        Ok(())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if self.key.is_none() {
            open.forget_handshake(self.ip, self.conn);
        }
        let Some(address) = open.addresses.get_mut(&self.ip) else {
            return;
        };
        if let Some(key) = &self.key {
            address.authenticated -= 1;
            if let Some(n) = address.per_key.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    address.per_key.remove(key);
                }
            }
        }
        if address.authenticated == 0 && address.pending.is_empty() {
            open.addresses.remove(&self.ip);
        }
        // The key's budget is forgotten with its last connection, unless a
        // request (its unread reply) still holds some of it: a new
        // connection of the key must find what that one holds counted.
        if let (Some(key), Some(budget)) = (&self.key, self.key_budget.take()) {
            // The map's reference and this one: nobody else holds it.
            if Arc::strong_count(&budget) == 2 {
                open.keys.remove(key);
            }
        }
    }
}

/// Who is on the other end: its address, the connection's number (what
/// the metadata role knows it by), and its place among its address's
/// connections.
struct Peer {
    from: SocketAddr,
    conn: u64,
    slot: Slot,
    /// What every connection's requests may hold together (KiB).
    server_budget: Arc<Semaphore>,
    counters: Arc<ConnectionCounters>,
}

/// Largest frame before a connection has authenticated: a hello or a
/// proof is well under this, and nobody unauthenticated makes the server
/// buffer more.
const HANDSHAKE_MAX_FRAME: usize = 4096;

/// How often an open connection's key is looked up in the ring again (at
/// its next request): how long a revoked key's open connections live on.
const KEY_RECHECK: Duration = Duration::from_secs(5);

/// Longest a connection may take to authenticate.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

type Frames = FramedRead<OwnedReadHalf, LengthDelimitedCodec>;

/// Why a handshake failed: what the client is told, and the reason logged.
type Refused = (ErrorKind, String);

/// The next frame as a validated message; a frame that does not decode is
/// a protocol error, told as such. A client of another wire version is
/// told both versions before its frame is decoded: its messages may not
/// decode at all ("tag for enum is not valid" says nothing to its user).
async fn next_message(frames: &mut Frames) -> Result<Message, Refused> {
    let protocol = |e: ProtocolError| (ErrorKind::Protocol, e.to_string());
    match frames.next().await {
        None => Err((ErrorKind::Denied, "the connection closed".into())),
        Some(Err(e)) => Err(protocol(ProtocolError::Decode(e.to_string()))),
        Some(Ok(frame)) => match Envelope::peek_version(&frame) {
            Some(got) if got != VERSION => Err(protocol(ProtocolError::Version { got })),
            _ => Envelope::decode(frame.freeze())
                .map(|e| e.message)
                .map_err(protocol),
        },
    }
}

/// How a handshake ends: the frames it sends (the welcome leaves unsealed,
/// what follows sealed when integrity is on), who is let in, and where.
struct Handshake<'a> {
    out: &'a mpsc::UnboundedSender<Outgoing>,
    /// The writer's sealer, given before the welcome is queued.
    sealer: oneshot::Sender<Sealer>,
    from: IpAddr,
    integrity: Integrity,
}

/// The server's side of the handshake ([`concerto_proto::auth`]): the key
/// the connection proved it holds (and the opener of its frames, when they
/// carry MACs), or why it did not. A proven key is welcomed only if
/// `admit` lets the connection in (its address's cap).
async fn authenticate(
    frames: &mut Frames,
    h: Handshake<'_>,
    keys: &Keys,
    admit: impl FnOnce(&str) -> Result<(), Refused>,
) -> Result<(Key, Option<Opener>), Refused> {
    let out = h.out;
    let denied = |why: String| (ErrorKind::Denied, why);
    let Message::Hello {
        key_id,
        nonce: client,
        integrity: asked,
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
    let exchange = |integrity| auth::Exchange {
        key_id: &key_id,
        client: &client,
        server: &server,
        integrity,
    };
    match ring.get(&key_id) {
        Some(key) if auth::verify(auth::Side::Client, &key.secret, exchange(asked), &mac) => {
            admit(&key_id)?;
            let integrity = h.integrity.required(h.from, asked);
            let welcome = Message::Welcome {
                grant: key.grant,
                integrity,
                mac: auth::proof(auth::Side::Server, &key.secret, exchange(integrity)),
            };
            let opener = if integrity {
                let session = Session::server(&key.secret, &key_id, &client, &server);
                let _ = h.sealer.send(session.seal);
                Some(session.open)
            } else {
                None
            };
            let _ = out.send((Envelope::new(0, welcome), None));
            Ok((key.clone(), opener))
        }
        _ => Err(denied(format!(
            "key {key_id:?}: unknown key or wrong proof"
        ))),
    }
}

/// The writer of a connection's replies: small replies that are ready
/// together leave in one write; a payload larger than the buffer goes
/// straight to the socket. Frames after the welcome are sealed when the
/// handshake gave a sealer. It stops at the first failed write: a socket
/// that takes none of a reply's bytes for `stall` fails with `TimedOut`
/// (a client that never reads its replies would otherwise hold its share
/// of the budgets for as long as it keeps the connection open). Replies
/// still queued are dropped with what they hold.
async fn write_replies(
    write: tokio::net::tcp::OwnedWriteHalf,
    mut out_rx: mpsc::UnboundedReceiver<Outgoing>,
    mut sealer: oneshot::Receiver<Sealer>,
    stall: Duration,
) -> std::io::Result<()> {
    let mut write = TimeoutWriter::new(write);
    write.set_timeout(Some(stall));
    let mut out = BufWriter::with_capacity(64 * 1024, Box::pin(write));
    let mut seal = None;
    while let Some((env, permit)) = out_rx.recv().await {
        env.write_to(&mut out, seal.as_mut()).await?;
        if matches!(env.message, Message::Welcome { .. }) {
            // Given before the welcome was queued, if at all.
            seal = sealer.try_recv().ok();
        }
        if out_rx.is_empty() {
            out.flush().await?;
        }
        drop(permit);
    }
    Ok(())
}

/// One connection: the handshake, then frames in and replies out (in
/// completion order, matched by id).
async fn connection(
    stream: TcpStream,
    mut peer: Peer,
    mut evicted: oneshot::Receiver<Evicted>,
    keys: Arc<Keys>,
    limits: ConnectionLimits,
    sched: mpsc::Sender<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    let from = peer.from;
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, frame_codec());
    frames
        .decoder_mut()
        .set_max_frame_length(HANDSHAKE_MAX_FRAME);
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Outgoing>();
    let (sealer, sealer_rx) = oneshot::channel();
    let stall = Duration::from_nanos(limits.frame_timeout.as_nanos().max(1));
    let writer = tokio::spawn(write_replies(write, out_rx, sealer_rx, stall));
    let caps = (limits.per_client, limits.per_key, kib(limits.key_memory));
    let slot = &mut peer.slot;
    // Authenticated, it takes its place among its address's connections.
    let admit = move |key: &str| {
        slot.authenticate(caps, key)
            .map_err(|why| (ErrorKind::Busy, why))
    };
    let handshake = Handshake {
        out: &out_tx,
        sealer,
        from: from.ip(),
        integrity: limits.integrity,
    };
    let mut full_pool = false;
    let handshake = tokio::select! {
        done = tokio::time::timeout(HANDSHAKE_TIMEOUT, authenticate(&mut frames, handshake, &keys, admit)) => {
            done.unwrap_or_else(|_| {
                // Not a key's failure: the protocol wants the handshake in time.
                Err((
                    ErrorKind::Protocol,
                    format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
                ))
            })
        }
        // Not a key's failure either: the client may try again (and does).
        Ok(why) = &mut evicted => {
            full_pool = why == Evicted::ByAFullPool;
            Err((ErrorKind::Busy, why.reason(from.ip())))
        }
    };

    match handshake {
        Ok((key, mut opener)) => {
            peer.counters.authenticated(opener.is_some());
            // From here on frames are read one by one, each charged to the
            // budgets as it begins (what the handshake's reader had read
            // ahead, if anything, first). Small frames come out of one
            // buffer (a read from the socket serves many); a large body
            // bypasses it.
            let ahead = frames.read_buffer_mut().split().freeze();
            let mut reader = tokio::io::BufReader::with_capacity(
                64 << 10,
                std::io::Cursor::new(ahead).chain(frames.into_inner()),
            );
            let capabilities = CapabilityKey::from_ring(&keys.ring());
            serve(
                &mut reader,
                opener.as_mut(),
                &peer,
                (&key, capabilities.as_ref(), &keys),
                limits,
                &out_tx,
                &sched,
                &mut stopped,
            )
            .await;
            // What the connection held (files open for writing) is let go.
            let _ = sched.send(Command::ConnectionClosed(peer.conn)).await;
        }
        Err((kind, why)) => refuse_handshake(kind, why, full_pool, &peer, &out_tx),
    }
    // Its place goes back before the socket closes, so that a client that
    // saw it close finds the place free.
    let counters = peer.counters.clone();
    drop(peer);
    drop(out_tx);
    if let Ok(Err(e)) = writer.await {
        if e.kind() == std::io::ErrorKind::TimedOut {
            let why = format!("{from}: its replies were not read for {stall:?}");
            counters.refusals.record(Refusal::Stalled, from.ip(), &why);
        }
    }
}

/// A handshake that failed: counted by cause (not logged one by one), and
/// the client told why, as much as it may know.
fn refuse_handshake(
    kind: ErrorKind,
    why: String,
    full_pool: bool,
    peer: &Peer,
    out_tx: &mpsc::UnboundedSender<Outgoing>,
) {
    let cause = match kind {
        ErrorKind::Protocol => Refusal::Protocol,
        ErrorKind::Busy if full_pool => Refusal::PoolFull,
        ErrorKind::Busy => Refusal::Busy,
        _ => Refusal::KeyRefused,
    };
    peer.counters.refusals.record(cause, peer.from.ip(), &why);
    // A protocol error says what was wrong with the frame; a refused key
    // learns only that it was refused.
    let message = match kind {
        ErrorKind::Protocol | ErrorKind::Busy => why,
        // The same words for an unknown key and a wrong proof.
        _ => "the key was refused".into(),
    };
    let _ = out_tx.send((Envelope::new(0, Message::Error { kind, message }), None));
}

/// An authenticated connection's requests, until it closes, breaks the
/// protocol, or the server stops. Each holds its share of the memory
/// budgets from its frame's first bytes until its reply is written (see
/// [`crate::intake`]): while replies hold a budget whole, the connection is
/// not read (backpressure).
#[allow(clippy::too_many_arguments)]
async fn serve<R: AsyncRead + Unpin>(
    reader: &mut R,
    mut opener: Option<&mut Opener>,
    peer: &Peer,
    (key, capabilities, keys): (&Key, Option<&CapabilityKey>, &Keys),
    limits: ConnectionLimits,
    out_tx: &mpsc::UnboundedSender<Outgoing>,
    sched: &mpsc::Sender<Command>,
    stopped: &mut watch::Receiver<bool>,
) {
    // Who the key is on files, once for all its requests.
    let who = (Arc::new(key.principal()), Arc::<str>::from(key.id.as_str()));
    let Some(key_budget) = peer.slot.key_budget.clone() else {
        return;
    };
    let budgets = Budgets::new(
        limits.memory,
        [
            peer.slot.budget.clone(),
            key_budget,
            peer.server_budget.clone(),
        ],
    );
    let mut key_checked = Instant::now();
    loop {
        let next = next_request(
            reader,
            opener.as_deref_mut(),
            &budgets,
            limits.frame_timeout,
            stopped,
            peer.from,
        );
        let next = tokio::select! {
            next = next => next,
            // The writer stopped (its socket took no reply in time): the
            // connection closes, whatever its client sends.
            _ = out_tx.closed() => return,
        };
        let Some((env, permit)) = accepted(next, peer, out_tx) else {
            return;
        };
        // A key revoked (or its secret replaced) since the handshake ends
        // its open connections too, within KEY_RECHECK of their next request.
        if key_checked.elapsed() >= KEY_RECHECK {
            key_checked = Instant::now();
            if keys.ring().get(&key.id) != Some(key) {
                let why = format!("key {:?} was revoked", key.id);
                peer.counters
                    .refusals
                    .record(Refusal::Revoked, peer.from.ip(), &why);
                let revoked = Message::Error {
                    kind: ErrorKind::Denied,
                    message: why,
                };
                let _ = out_tx.send((Envelope::new(env.id, revoked), Some(permit)));
                return;
            }
        }
        let refused = refusal(key, &env.message)
            .or_else(|| capability_refusal(key, capabilities, &env.message, capability::now_s()));
        if let Some(why) = refused {
            let denied = Message::Error {
                kind: ErrorKind::Denied,
                message: why,
            };
            let _ = out_tx.send((Envelope::new(env.id, denied), Some(permit)));
            continue;
        }
        let reply = Reply {
            id: env.id,
            out: Some(out_tx.clone()),
            permit: Some(permit),
        };
        let cmd = match command(env.message, key, &who, (peer.conn, peer.from.ip()), reply) {
            Ok(cmd) => cmd,
            Err(close) => {
                if close {
                    return;
                }
                continue;
            }
        };
        if sched.send(cmd).await.is_err() {
            return;
        }
    }
}

/// The request a read gave, or `None` when the connection ends: closed,
/// or out of step (answered with the reason first; other connections
/// carry on).
fn accepted(
    next: Next,
    peer: &Peer,
    out_tx: &mpsc::UnboundedSender<Outgoing>,
) -> Option<(Envelope, Held)> {
    let message = match next {
        Next::Request(env, permit) => return Some((env, permit)),
        Next::Closed => return None,
        Next::Stalled(why) => {
            peer.counters
                .refusals
                .record(Refusal::Stalled, peer.from.ip(), &why);
            return None;
        }
        Next::Broken(message) => message,
        Next::Tampered(message) => {
            peer.counters.integrity_failed();
            peer.counters
                .refusals
                .record(Refusal::Tampered, peer.from.ip(), &message);
            message
        }
    };
    let error = Message::Error {
        kind: ErrorKind::Protocol,
        message,
    };
    let _ = out_tx.send((Envelope::new(0, error), None));
    None
}
