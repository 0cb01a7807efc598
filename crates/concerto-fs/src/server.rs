//! A data server: connection tasks decode frames and hand requests to one
//! scheduling loop, which owns the `RequestQueue` and keeps up to D requests
//! in flight on the storage executor (blocking positioned I/O on tokio's
//! blocking pool).
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
use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use concerto_core::server::default_window;
use concerto_core::units::Bandwidth;
use concerto_core::{AppId, ObjectId, Op, PolicyConfig, Request, RequestId, RequestQueue, Time};

use crate::protocol::{Envelope, ErrorKind, Message, ProtocolError, Tags, MAX_FRAME};
use crate::storage::ObjectStore;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub policy: PolicyConfig,
    /// Requests in flight on the storage when the policy sets no depth of its own.
    pub depth: u32,
    /// What `capped` shares out when its policy does not say.
    pub capacity: Bandwidth,
}

/// The length-delimited codec both ends use, refusing frames over the limit before reading them.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().max_frame_length(MAX_FRAME).new_codec()
}

/// A running server; dropping it does not stop it, [`ServerHandle::shutdown`] does.
pub struct ServerHandle {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Binds, then serves until shut down.
pub async fn start(cfg: ServerConfig) -> io::Result<ServerHandle> {
    let store = ObjectStore::open(&cfg.data_dir)?;
    let listener = TcpListener::bind(cfg.listen).await?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = watch::channel(false);
    let (sched_tx, sched_rx) = mpsc::channel(1024);
    let scheduler = tokio::spawn(schedule(cfg.clone(), store, sched_rx, stop.subscribe()));
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((stream, _)) = accepted {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(connection(stream, sched_tx.clone(), stopped.clone()));
                    }
                }
                _ = stopped.changed() => break,
            }
        }
        let _ = scheduler.await;
    });
    Ok(ServerHandle { addr, stop, task })
}

/// What the scheduling loop is asked to do.
enum Command {
    Submit(Job),
    SetPolicy { policy: String, reply: oneshot::Sender<Message> },
    Ping { reply: oneshot::Sender<Message> },
}

/// A request as the policy sees it, what the storage does for it, and where the answer goes.
struct Job {
    req: Request,
    action: Action,
    reply: oneshot::Sender<Message>,
}

/// The storage executor's side of a request.
enum Action {
    Write(Vec<u8>),
    Read,
    Fsync,
}

impl Action {
    fn run(self, store: &ObjectStore, object: u64, offset: u64, len: u64) -> Message {
        let result = match self {
            Action::Write(data) => store.write(object, offset, &data).map(|_| Message::Done),
            Action::Read => store.read(object, offset, len).map(|data| Message::Data { data }),
            Action::Fsync => store.fsync(object).map(|_| Message::Done),
        };
        result.unwrap_or_else(|e| Message::Error { kind: ErrorKind::Io, message: e.to_string() })
    }
}

/// One connection: frames in, replies out (in completion order, matched by id).
async fn connection(stream: TcpStream, sched: mpsc::Sender<Command>, mut stopped: watch::Receiver<bool>) {
    let (mut sink, mut frames) = Framed::new(stream, codec()).split();
    let (out_tx, mut out_rx) = mpsc::channel::<Envelope>(256);
    let writer = tokio::spawn(async move {
        while let Some(env) = out_rx.recv().await {
            if sink.send(Bytes::from(env.encode())).await.is_err() {
                break;
            }
        }
    });
    loop {
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = stopped.changed() => break,
        };
        let Some(frame) = frame else { break };
        let env = match frame.map_err(|e| ProtocolError::Decode(e.to_string())).and_then(|b| Envelope::decode(&b)) {
            Ok(env) => env,
            Err(e) => {
                // Answer, then close: the stream may be out of step; other connections carry on.
                let _ = out_tx.send(Envelope::new(0, Message::Error { kind: ErrorKind::Protocol, message: e.to_string() })).await;
                break;
            }
        };
        let id = env.id;
        let (reply, answer) = oneshot::channel();
        let cmd = match env.message {
            Message::Write { tags, object, offset, data } => {
                let req = request(tags, Op::Write, object, offset, data.len() as u64);
                Command::Submit(Job { req, action: Action::Write(data), reply })
            }
            Message::Read { tags, object, offset, len } => {
                Command::Submit(Job { req: request(tags, Op::Read, object, offset, len), action: Action::Read, reply })
            }
            Message::Fsync { tags, object } => {
                // The policy sees a zero-length write: it moves no bytes but
                // takes its turn (and, in the SFQ kinds, a small request's cost).
                Command::Submit(Job { req: request(tags, Op::Write, object, 0, 0), action: Action::Fsync, reply })
            }
            Message::Ping => Command::Ping { reply },
            Message::SetPolicy { policy } => Command::SetPolicy { policy, reply },
            _ => {
                let message = "a reply is not a request".to_string();
                let _ = out_tx.send(Envelope::new(id, Message::Error { kind: ErrorKind::Protocol, message })).await;
                break;
            }
        };
        if sched.send(cmd).await.is_err() {
            break;
        }
        let out = out_tx.clone();
        tokio::spawn(async move {
            let message = answer.await.unwrap_or(Message::Error { kind: ErrorKind::Io, message: "server is shutting down".into() });
            let _ = out.send(Envelope::new(id, message)).await;
        });
    }
    drop(out_tx);
    let _ = writer.await;
}

fn request(tags: Tags, op: Op, object: u64, offset: u64, len: u64) -> Request {
    Request {
        id: RequestId(0),
        app: AppId(tags.app),
        rank: tags.rank,
        issue_time: Time::from_nanos(tags.issue_ns),
        op,
        object: ObjectId(object),
        offset,
        len,
        segments: Vec::new(),
        weight: tags.weight,
    }
}

/// Epoch-aligned monotonic clock.
struct Clock {
    epoch_at_start: u64,
    start: Instant,
}

impl Clock {
    fn new() -> Clock {
        let epoch_at_start = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Clock { epoch_at_start, start: Instant::now() }
    }
    fn now(&self) -> Time {
        Time::from_nanos(self.epoch_at_start + self.start.elapsed().as_nanos() as u64)
    }
}

/// A policy and the requests it dispatched that are still in flight. After
/// a live switch the old one keeps serving what it holds until it drains.
struct Generation {
    queue: Box<dyn RequestQueue>,
    depth: u32,
    in_flight: u32,
    slots_used: u32,
}

struct InFlight {
    generation: usize,
    reply: oneshot::Sender<Message>,
    req: Request,
}

async fn schedule(cfg: ServerConfig, store: ObjectStore, mut rx: mpsc::Receiver<Command>, mut stopped: watch::Receiver<bool>) {
    let clock = Clock::new();
    let store = Arc::new(store);
    let build = |p: &PolicyConfig| -> Generation {
        let mut p = p.clone();
        p.resolve(default_window::HDD, cfg.capacity);
        let queue = p.build(default_window::HDD);
        let depth = queue.depth().unwrap_or(cfg.depth).max(1);
        Generation { queue, depth, in_flight: 0, slots_used: 0 }
    };
    let mut generations: Vec<Generation> = vec![build(&cfg.policy)];
    let mut policy_name = cfg.policy.name().to_string();
    let mut waiting: HashMap<u64, (Action, oneshot::Sender<Message>)> = HashMap::new();
    let mut in_flight: HashMap<u64, InFlight> = HashMap::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u64, Message)>();
    let mut next_id = 0u64;
    let mut out = Vec::new();
    loop {
        // Start whatever fits, oldest generation first so a retiring policy drains.
        let now = clock.now();
        let mut wakeup: Option<Time> = None;
        for (gi, g) in generations.iter_mut().enumerate() {
            let free = g.depth.saturating_sub(g.slots_used);
            if free > 0 && !g.queue.is_empty() {
                out.clear();
                g.queue.dispatch(now, free, &mut out);
                for req in out.drain(..) {
                    g.slots_used += g.queue.slot_cost(&req);
                    g.in_flight += 1;
                    let id = req.id.0;
                    let Some((action, reply)) = waiting.remove(&id) else { continue };
                    let (store, done) = (store.clone(), done_tx.clone());
                    let (object, offset, len) = (req.object.0, req.offset, req.len);
                    in_flight.insert(id, InFlight { generation: gi, reply, req });
                    tokio::task::spawn_blocking(move || {
                        let _ = done.send((id, action.run(&store, object, offset, len)));
                    });
                }
            }
            if let Some(at) = g.queue.next_wakeup(now) {
                wakeup = Some(wakeup.map_or(at, |w: Time| w.min(at)));
            }
        }
        // Drop retired generations that have nothing left.
        while generations.len() > 1 && generations[0].queue.is_empty() && generations[0].in_flight == 0 {
            generations.remove(0);
            for f in in_flight.values_mut() {
                f.generation -= 1;
            }
        }
        let sleep = wakeup.map(|at| std::time::Duration::from_nanos((at - clock.now()).as_nanos()));
        tokio::select! {
            cmd = rx.recv() => match cmd {
                None => break,
                Some(Command::Submit(mut job)) => {
                    next_id += 1;
                    job.req.id = RequestId(next_id);
                    waiting.insert(next_id, (job.action, job.reply));
                    let current = generations.len() - 1;
                    generations[current].queue.enqueue(job.req, clock.now());
                }
                Some(Command::Ping { reply }) => {
                    let _ = reply.send(Message::Pong { policy: policy_name.clone() });
                }
                Some(Command::SetPolicy { policy, reply }) => {
                    let answer = match parse_policy(&policy) {
                        Ok(p) => {
                            policy_name = p.name().to_string();
                            generations.push(build(&p));
                            Message::Done
                        }
                        Err(message) => Message::Error { kind: ErrorKind::Invalid, message },
                    };
                    let _ = reply.send(answer);
                }
            },
            Some((id, message)) = done_rx.recv() => {
                if let Some(f) = in_flight.remove(&id) {
                    let g = &mut generations[f.generation];
                    g.slots_used = g.slots_used.saturating_sub(g.queue.slot_cost(&f.req));
                    g.in_flight -= 1;
                    g.queue.complete(&f.req, clock.now());
                    let _ = f.reply.send(message);
                }
            }
            _ = tokio::time::sleep(sleep.unwrap_or_default()), if sleep.is_some() => {}
            _ = stopped.changed() => break,
        }
    }
}

/// A policy from TOML text (`kind = "sfq-d-plus"`, `depth = 8`, ...), validated.
pub fn parse_policy(text: &str) -> Result<PolicyConfig, String> {
    let p: PolicyConfig = toml::from_str(text).map_err(|e| format!("policy: {}", e.message().trim()))?;
    p.validate().map_err(|(field, msg)| format!("policy.{field}: {msg}"))?;
    Ok(p)
}
