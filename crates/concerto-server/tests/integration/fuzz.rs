//! The protocol fuzzed against a live server process (the data and the
//! metadata role in one `concerto-server`), as a tenant with a legitimate
//! key would: every connection authenticates (a twentieth of them with a
//! fuzzed handshake instead), makes itself a file and holds a capability
//! for it, then sends frames one at a time, each a valid request of some
//! kind (data, list I/O, every namespace operation, statistics, the
//! administrator's and the peers' messages) mutated or not. A frame the
//! server cannot decode closes the connection, and the fuzzer opens the
//! next one, so every frame reaches the decoder after a good handshake
//! and the valid ones reach the handlers behind it.
//!
//! Throughout, the test checks that the server answers every frame or
//! closes the connection within a deadline (no hang), that every reply it
//! sends decodes, that it neither dies nor logs a panic, that its memory
//! stays bounded, and that a well-behaved tenant using the client library
//! on the same server is served correctly all along. An eighth of the
//! frames ask by inode number (`Getattr`, `Renew`, `Close`), half of them
//! about the well-behaved tenant's file in its private (0700) directory,
//! the rest about any inode: none about that file may be answered (its
//! path would not be searchable; the directory's own attributes are, as
//! `stat` of a 0700 directory is).
//!
//! `make test` runs a bounded count (`FRAMES`); `make fuzz` runs ten
//! million (`CONCERTO_FUZZ_FRAMES`, seed `CONCERTO_FUZZ_SEED`).

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::process::{write_ring, ServerProcess};
use concerto_client::{FsClient, Identity};
use concerto_core::server::ServiceReport;
use concerto_core::Extent;
use concerto_proto::auth::{self, Credential, Grant, KeyRing};
use concerto_proto::capability::Capability;
use concerto_proto::cluster::{ClusterFile, ClusterSection, ServerEntry};
use concerto_proto::{
    Closed, Envelope, LayoutRequest, Member, Message, MetaReply, MetaRequest, Role, Tags,
};

/// The well-behaved tenant's directory, its own (mode 0700).
const PRIVATE: &str = "/private";

/// Frames one `make test` run sends.
const FRAMES: u64 = 30_000;
/// Connections fuzzing at once.
const WORKERS: u64 = 3;
/// Longest the server may take to answer a frame (or close the connection).
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);
/// The server's `frame_timeout`: a frame whose length prefix promised more
/// than was sent is closed after it.
const FRAME_TIMEOUT: &str = "1s";
/// Most the server's resident memory may grow over the run.
const MEMORY_BOUND_KB: u64 = 256 * 1024;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

/// The key ring: the admin, the peer key (capabilities are derived from
/// it), the fuzzing tenant (user 1001) and the well-behaved one (1002).
fn ring() -> KeyRing {
    let mut ring = KeyRing::generate().unwrap();
    for (id, job, user) in [("fuzz", 1, 1001), ("good", 2, 1002)] {
        ring.add(common::tenant_key(id, job, Some(user))).unwrap();
    }
    ring
}

/// Starts `concerto-server` with the data and metadata roles.
fn start(dir: &Path, ring: &KeyRing) -> ServerProcess {
    let keys = write_ring(dir, ring);
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\nroles = [\"data\", \"metadata\"]\n\
         keys = \"{}\"\nframe_timeout = \"{FRAME_TIMEOUT}\"\n[metadata]\ndata_servers = [0]\n",
        dir.join("data").display(),
        keys.display()
    );
    ServerProcess::start(dir, &config, 4096)
}

/// The cluster file of the one server.
fn cluster(addr: SocketAddr) -> ClusterFile {
    ClusterFile {
        cluster: ClusterSection {
            timeout: concerto_core::Time::from_secs(30),
            credential: None,
            integrity: Default::default(),
        },
        servers: vec![ServerEntry {
            id: 0,
            address: addr,
            roles: vec![Role::Data, Role::Metadata],
            metrics: None,
            pid: None,
            config: None,
        }],
    }
}

fn tags() -> Tags {
    Identity::new(1, 0).tags()
}

/// The body of one frame (what follows the length prefix).
fn body(id: u64, message: Message) -> Vec<u8> {
    Envelope::new(id, message).encode()
}

/// One connection's side of the fuzz: a socket and what the server said.
struct Conn {
    sock: TcpStream,
}

/// How the server answered a frame (one at a time: its size is no matter).
#[allow(clippy::large_enum_variant)]
enum Answer {
    /// A reply (that decoded).
    Reply(Message),
    /// It closed the connection.
    Closed,
}

impl Conn {
    async fn send_raw(&mut self, prefix: u32, body: &[u8]) -> bool {
        let frame = [&prefix.to_be_bytes()[..], body].concat();
        self.sock.write_all(&frame).await.is_ok()
    }

    async fn send(&mut self, body: &[u8]) -> bool {
        self.send_raw(body.len() as u32, body).await
    }

    /// The next reply, or the connection's end; `Err` describes a reply
    /// that does not decode, or no answer within the deadline.
    async fn answer(&mut self) -> Result<Answer, String> {
        let read = async {
            let mut len = [0u8; 4];
            if self.sock.read_exact(&mut len).await.is_err() {
                return Ok(Answer::Closed);
            }
            let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
            if self.sock.read_exact(&mut buf).await.is_err() {
                return Ok(Answer::Closed);
            }
            Envelope::decode(buf.into())
                .map(|e| Answer::Reply(e.message))
                .map_err(|e| format!("the server sent a reply that does not decode: {e}"))
        };
        tokio::time::timeout(ANSWER_DEADLINE, read)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {ANSWER_DEADLINE:?}")))
    }
}

/// A fresh connection that proved `key`.
async fn handshake(addr: SocketAddr, key: &Credential) -> Conn {
    let mut c = Conn {
        sock: TcpStream::connect(addr).await.expect("connect"),
    };
    let nonce = auth::random().unwrap();
    c.send(&body(
        0,
        Message::Hello {
            key_id: key.id.clone(),
            nonce,
            integrity: false,
        },
    ))
    .await;
    let Ok(Answer::Reply(Message::Challenge { nonce: theirs })) = c.answer().await else {
        panic!("no challenge")
    };
    let mac = common::client_proof(key, &nonce, &theirs);
    c.send(&body(0, Message::Proof { mac })).await;
    match c.answer().await {
        Ok(Answer::Reply(Message::Welcome { .. })) => c,
        _ => panic!("the fuzzing tenant's handshake failed"),
    }
}

/// A valid request of every kind a client can send, about the worker's
/// own file (`inode`, with the capability `cap`) under `dir`.
fn templates(dir: &str, inode: u64, cap: Capability) -> Vec<Message> {
    let t = tags();
    let meta = |op| Message::Meta {
        tags: t,
        op,
        user: None,
    };
    let p = |name: &str| format!("{dir}/{name}");
    let data = Bytes::from(vec![0x5a; 4096]);
    vec![
        Message::Ping,
        Message::Stats,
        Message::Space,
        Message::GetRules,
        Message::Arrivals { after: 0 },
        Message::Write {
            tags: t,
            object: inode,
            cap: Some(cap),
            extents: vec![Extent::new(0, 4096)],
            data: data.clone(),
        },
        Message::Write {
            tags: t,
            object: inode,
            cap: Some(cap),
            extents: vec![Extent::new(0, 1024), Extent::new(8192, 3072)],
            data: data.clone(),
        },
        Message::Read {
            tags: t,
            object: inode,
            cap: Some(cap),
            extents: vec![Extent::new(0, 4096)],
        },
        Message::Read {
            tags: t,
            object: inode,
            cap: Some(cap),
            extents: vec![
                Extent::new(0, 512),
                Extent::new(4096, 512),
                Extent::new(1 << 20, 512),
            ],
        },
        Message::Fsync {
            tags: t,
            object: inode,
            cap: Some(cap),
        },
        Message::ObjectSize {
            tags: t,
            object: inode,
            cap: Some(cap),
        },
        Message::Truncate {
            tags: t,
            object: inode,
            cap: Some(cap),
            size: 8192,
        },
        // An object id without a capability, and the peers' removal.
        Message::Write {
            tags: t,
            object: 1,
            cap: None,
            extents: vec![Extent::new(0, 16)],
            data: Bytes::from_static(b"sixteen bytes!!!"),
        },
        Message::RemoveObjects {
            tags: t,
            objects: vec![inode],
        },
        meta(MetaRequest::Mkdir {
            path: p("d"),
            mode: 0o755,
        }),
        meta(MetaRequest::Create {
            path: p("d/f"),
            layout: LayoutRequest::default(),
            exclusive: true,
            mode: 0o644,
        }),
        meta(MetaRequest::Create {
            path: p("s"),
            layout: LayoutRequest {
                unit: Some(65536),
                count: Some(1),
            },
            exclusive: false,
            mode: 0o600,
        }),
        meta(MetaRequest::SetAttr {
            path: p("file"),
            mode: Some(0o640),
            uid: None,
            gid: Some(1001),
        }),
        meta(MetaRequest::Access {
            path: p("file"),
            mask: 6,
        }),
        meta(MetaRequest::Lookup { path: p("file") }),
        meta(MetaRequest::Open {
            path: p("file"),
            write: true,
        }),
        meta(MetaRequest::Getattr { inode }),
        meta(MetaRequest::Renew { inode, write: true }),
        meta(MetaRequest::Close {
            files: vec![Closed {
                inode,
                written_end: 4096,
            }],
        }),
        meta(MetaRequest::Sync),
        meta(MetaRequest::Exists { inode }),
        meta(MetaRequest::Readdir {
            path: dir.into(),
            after: Some("a".into()),
            attrs: true,
        }),
        meta(MetaRequest::Unlink { path: p("d/f") }),
        meta(MetaRequest::Rmdir { path: p("d") }),
        meta(MetaRequest::Rename {
            from: p("s"),
            to: p("t"),
        }),
        meta(MetaRequest::Truncate {
            path: p("file"),
            size: 4096,
        }),
        meta(MetaRequest::SetStripe {
            path: dir.into(),
            layout: LayoutRequest {
                unit: Some(1 << 20),
                count: None,
            },
        }),
        meta(MetaRequest::Statfs),
        // A user named by a key that is no node key.
        Message::Meta {
            tags: t,
            op: MetaRequest::Lookup { path: p("file") },
            user: Some(auth::Principal::user(1002, 100, &[100, 400])),
        },
        // What a tenant may not send: the coordinator's, the
        // administrator's and the peers' messages, and replies.
        Message::BeginPhase {
            tags: t,
            wait_ms: 10,
        },
        Message::EndPhase { tags: t },
        Message::SetSets {
            sets: "kind = \"set10\"".into(),
        },
        Message::SetGrants {
            grants: vec![(1, 2.0), (2, 1.0)],
        },
        Message::SetPolicy {
            policy: "kind = \"fifo\"".into(),
        },
        Message::SetRules {
            rules: "[[rule]]\napp = 1\niops = 10\n".into(),
            apply: false,
        },
        Message::ServiceReport(ServiceReport {
            served: vec![concerto_core::server::Served {
                bytes: 1 << 20,
                requests: 16,
                reserved_bytes: 1 << 19,
                reserved_requests: 8,
                ..concerto_core::server::Served::none(concerto_core::AppId(1), 1.0)
            }],
        }),
        Message::SetCluster {
            servers: vec![Member {
                id: 0,
                address: "127.0.0.1:9".parse().unwrap(),
                roles: vec![Role::Data],
            }],
        },
        Message::Hello {
            key_id: "fuzz".into(),
            nonce: [1; 32],
            integrity: false,
        },
        Message::Done,
        Message::MetaReply {
            reply: MetaReply::Done,
            changes: 1,
            durable: 1,
        },
    ]
}

/// Integers a field is most likely to mishandle.
const INTERESTING: [u64; 10] = [
    0,
    1,
    0x7f,
    0xff,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    i64::MAX as u64,
    u64::MAX,
    u64::MAX - 1,
];

/// One to three mutations of `bytes`: bit flips, bytes set, integers
/// overwritten (as bincode writes them, little-endian), bytes inserted,
/// deleted or duplicated, a cut, or the tail of another frame spliced in.
fn mutate(rng: &mut ChaCha8Rng, bytes: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..rng.gen_range(1..=3) {
        let len = bytes.len();
        let at = rng.gen_range(0..len.max(1));
        match rng.gen_range(0..8) {
            0 if len > 0 => bytes[at] ^= 1 << rng.gen_range(0..8),
            1 if len > 0 => bytes[at] = [0, 0xff, 0x7f, 0x80, rng.gen()][rng.gen_range(0..5)],
            2 => {
                let v = INTERESTING[rng.gen_range(0..INTERESTING.len())];
                let width = [1, 2, 4, 8][rng.gen_range(0..4)];
                for (i, b) in v.to_le_bytes()[..width].iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(at + i) {
                        *slot = *b;
                    }
                }
            }
            3 => {
                let n = rng.gen_range(1..=16);
                let junk: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                bytes.splice(at.min(len)..at.min(len), junk);
            }
            4 if len > 0 => {
                let end = (at + rng.gen_range(1..=16)).min(len);
                bytes.drain(at..end);
            }
            5 => bytes.truncate(at),
            6 if len > 0 => {
                let end = (at + rng.gen_range(1..=16)).min(len);
                let copy = bytes[at..end].to_vec();
                bytes.splice(end..end, copy);
            }
            _ => {
                let from = rng.gen_range(0..other.len().max(1)).min(other.len());
                bytes.truncate(at);
                bytes.extend_from_slice(&other[from..]);
            }
        }
    }
}

/// What the workers counted.
#[derive(Default)]
struct Counts {
    frames: AtomicU64,
    mutated: AtomicU64,
    replies: AtomicU64,
    /// Replies that only a handler behind the checks gives: data read
    /// through a capability, and a namespace operation's answer.
    data_replies: AtomicU64,
    meta_replies: AtomicU64,
    closed: AtomicU64,
    handshakes_fuzzed: AtomicU64,
    /// Requests by inode number sent unmutated.
    by_inode: AtomicU64,
}

/// A worker's own file, made on its first connection and again every
/// minute (a capability lasts ten): the templates about it.
struct Own {
    corpus: Vec<Vec<u8>>,
    made: Instant,
}

/// Makes `dir` and `dir/file` on `c` (valid frames) and returns the
/// templates about the file, or `None` when a fuzzed frame of this
/// worker's (a chmod of the directory, say) left it unable to.
async fn own_file(c: &mut Conn, dir: &str, next_id: &mut u64) -> Result<Option<Own>, String> {
    let ops = [
        MetaRequest::Mkdir {
            path: dir.into(),
            mode: 0o755,
        },
        MetaRequest::Create {
            path: format!("{dir}/file"),
            layout: LayoutRequest::default(),
            exclusive: false,
            mode: 0o644,
        },
    ];
    let mut last = Answer::Closed;
    for op in ops {
        *next_id += 1;
        let meta = Message::Meta {
            tags: tags(),
            op,
            user: None,
        };
        c.send(&body(*next_id, meta)).await;
        last = c.answer().await?;
    }
    match last {
        Answer::Reply(Message::MetaReply {
            reply: MetaReply::Attr(attr),
            ..
        }) => match attr.capability {
            Some(cap) => Ok(Some(Own {
                corpus: templates(dir, attr.inode, cap)
                    .into_iter()
                    .map(|m| body(0, m))
                    .collect(),
                made: Instant::now(),
            })),
            None => Err("a tenant's create gave no capability".into()),
        },
        Answer::Reply(_) => Ok(None),
        Answer::Closed => Err("the server closed a valid create".into()),
    }
}

/// Sends `frame` under a length prefix that promises more than it holds
/// and checks that the server closes the connection (its frame timeout)
/// rather than hold it; on its own task, so the worker goes on.
async fn lying_prefix(mut c: Conn, frame: Vec<u8>, more: u32) -> Result<(), String> {
    if !c.send_raw(frame.len() as u32 + more, &frame).await {
        return Ok(());
    }
    loop {
        match c.answer().await? {
            Answer::Closed => return Ok(()),
            Answer::Reply(_) => {}
        }
    }
}

/// One fuzzing worker, over as many connections as it takes, until the
/// workers together have sent `frames` frames.
/// A request by inode number about `inode`, as a fuzzing tenant would
/// walk the inode numbers: its attributes, a capability, or a close.
fn by_inode(rng: &mut ChaCha8Rng, inode: u64) -> Message {
    let op = match rng.gen_range(0..3) {
        0 => MetaRequest::Getattr { inode },
        1 => MetaRequest::Renew {
            inode,
            write: rng.gen(),
        },
        _ => MetaRequest::Close {
            files: vec![Closed {
                inode,
                written_end: rng.gen_range(0..1 << 20),
            }],
        },
    };
    Message::Meta {
        tags: tags(),
        op,
        user: None,
    }
}

/// Whether `answer` to `asked` told the asker something about the inode:
/// its attributes or a capability for it.
fn answered_about(asked: &Message, answer: &Message) -> bool {
    let Message::Meta { op, .. } = asked else {
        return false;
    };
    matches!(op, MetaRequest::Getattr { .. } | MetaRequest::Renew { .. })
        && matches!(answer, Message::MetaReply { .. })
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    addr: SocketAddr,
    key: Credential,
    seed: u64,
    number: u64,
    frames: u64,
    counts: Arc<Counts>,
    private: Arc<[u64]>,
) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(number));
    let mut generation = 0u64;
    let mut own: Option<Own> = None;
    let mut lies = Vec::new();
    let mut next_id = 1u64;
    while counts.frames.load(Ordering::Relaxed) < frames {
        // A twentieth of the connections fuzz the handshake itself.
        if rng.gen_ratio(1, 20) {
            fuzz_handshake(addr, &key, &mut rng).await?;
            counts.handshakes_fuzzed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let mut c = handshake(addr, &key).await;
        if own
            .as_ref()
            .is_none_or(|o| o.made.elapsed() > Duration::from_secs(60))
        {
            // A fresh directory each time: the fuzzed frames may have
            // made the last one unusable (a chmod to 0, a rename).
            generation += 1;
            counts.frames.fetch_add(2, Ordering::Relaxed);
            let dir = format!("/fuzz{number}.{generation}");
            match own_file(&mut c, &dir, &mut next_id).await? {
                Some(fresh) => own = Some(fresh),
                None => {
                    if let Some(o) = own.as_mut() {
                        o.made = Instant::now();
                    }
                }
            }
        }
        let Some(corpus) = own.as_ref().map(|o| &o.corpus) else {
            continue;
        };
        while counts.frames.fetch_add(1, Ordering::Relaxed) < frames {
            if rng.gen_ratio(1, 8) {
                let inode = if rng.gen() {
                    private[rng.gen_range(0..private.len())]
                } else {
                    rng.gen_range(1..=8192)
                };
                next_id += 1;
                let asked = by_inode(&mut rng, inode);
                if !c.send(&body(next_id, asked.clone())).await {
                    counts.closed.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                counts.by_inode.fetch_add(1, Ordering::Relaxed);
                match c.answer().await? {
                    Answer::Reply(answer) => {
                        counts.replies.fetch_add(1, Ordering::Relaxed);
                        if private.contains(&inode) && answered_about(&asked, &answer) {
                            return Err(format!(
                                "the fuzzing tenant was answered about the other tenant's private inode {inode}: {asked:?} -> {answer:?}"
                            ));
                        }
                    }
                    Answer::Closed => {
                        counts.closed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
                continue;
            }
            let mut frame = corpus[rng.gen_range(0..corpus.len())].clone();
            // The id follows the header length (4 bytes) and the version (2).
            next_id += 1;
            frame[6..14].copy_from_slice(&next_id.to_le_bytes());
            let mutated = rng.gen_ratio(3, 4);
            if mutated {
                let other = &corpus[rng.gen_range(0..corpus.len())];
                mutate(&mut rng, &mut frame, other);
                counts.mutated.fetch_add(1, Ordering::Relaxed);
            }
            // One mutated frame in a hundred has a length prefix that lies:
            // more than is sent (the server's frame timeout closes it,
            // checked on the side) or less (the rest is read as the next
            // frame).
            let ok = if mutated && rng.gen_ratio(1, 100) {
                let by = rng.gen_range(1..64u32);
                if rng.gen() {
                    lies.push(tokio::spawn(lying_prefix(c, frame, by)));
                    break;
                }
                c.send_raw((frame.len() as u32).saturating_sub(by), &frame)
                    .await
            } else {
                c.send(&frame).await
            };
            if !ok {
                counts.closed.fetch_add(1, Ordering::Relaxed);
                break;
            }
            match c
                .answer()
                .await
                .map_err(|e| format!("{e} (frame {})", hex(&frame)))?
            {
                Answer::Reply(reply) => {
                    counts.replies.fetch_add(1, Ordering::Relaxed);
                    match reply {
                        Message::Data { .. } => counts.data_replies.fetch_add(1, Ordering::Relaxed),
                        Message::MetaReply { .. } => {
                            counts.meta_replies.fetch_add(1, Ordering::Relaxed)
                        }
                        _ => 0,
                    };
                }
                Answer::Closed => {
                    counts.closed.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
    for lie in lies {
        lie.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// A connection whose hello or proof is mutated: the server refuses it or,
/// rarely, the mutation left it valid; it never hangs.
async fn fuzz_handshake(
    addr: SocketAddr,
    key: &Credential,
    rng: &mut ChaCha8Rng,
) -> Result<(), String> {
    let mut c = Conn {
        sock: TcpStream::connect(addr).await.map_err(|e| e.to_string())?,
    };
    let nonce = auth::random().unwrap();
    let mut hello = body(
        0,
        Message::Hello {
            key_id: key.id.clone(),
            nonce,
            integrity: false,
        },
    );
    let proof_only: bool = rng.gen();
    if !proof_only {
        let other = hello.clone();
        mutate(rng, &mut hello, &other);
    }
    c.send(&hello).await;
    let theirs = match c.answer().await? {
        Answer::Reply(Message::Challenge { nonce }) => nonce,
        _ => return Ok(()),
    };
    let mac = common::client_proof(key, &nonce, &theirs);
    let mut proof = body(0, Message::Proof { mac });
    let other = proof.clone();
    mutate(rng, &mut proof, &other);
    c.send(&proof).await;
    let _ = c.answer().await?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The well-behaved tenant: writes 64 KiB, reads it back and checks it,
/// a round every 10 ms (a steady client, not a second load) until `done`;
/// every round within the deadline. Returns the rounds it completed.
async fn well_behaved(client: FsClient, done: Arc<AtomicBool>) -> Result<u64, String> {
    let file = format!("{PRIVATE}/good");
    let mut rounds = 0u64;
    let mut pace = tokio::time::interval(Duration::from_millis(10));
    while !done.load(Ordering::Relaxed) || rounds == 0 {
        pace.tick().await;
        let round = async {
            let data: Vec<u8> = (0..65536u32).map(|i| (i as u64 + rounds) as u8).collect();
            let f = client
                .create(&file, LayoutRequest::default(), false)
                .await
                .map_err(|e| format!("create: {e}"))?;
            client
                .write(&f, 0, &data)
                .await
                .map_err(|e| format!("write: {e}"))?;
            let back = client
                .read(&f, 0, data.len() as u64)
                .await
                .map_err(|e| format!("read: {e}"))?;
            client.close(&f).await.map_err(|e| format!("close: {e}"))?;
            if back[..] != data[..] {
                return Err(format!("round {rounds}: the data read back differs"));
            }
            client.stat(&file).await.map_err(|e| format!("stat: {e}"))?;
            Ok::<(), String>(())
        };
        tokio::time::timeout(ANSWER_DEADLINE, round)
            .await
            .map_err(|_| format!("round {rounds} took over {ANSWER_DEADLINE:?}"))??;
        rounds += 1;
    }
    Ok(rounds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_frames_after_a_good_handshake_never_crash_hang_or_grow_the_server_and_a_tenant_is_served_throughout(
) {
    let frames = env_u64("CONCERTO_FUZZ_FRAMES", FRAMES);
    let seed = env_u64("CONCERTO_FUZZ_SEED", 1);
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let mut server = start(dir.path(), &ring);
    let admin = ring.with_grant(Grant::Admin).unwrap().credential();
    let files = cluster(server.addr);
    FsClient::new(files.clone(), Identity::new(9, 0), admin)
        .introduce_cluster()
        .await
        .unwrap();
    let good = FsClient::new(
        files,
        Identity::new(2, 0),
        ring.get("good").unwrap().credential(),
    );
    // Warm up (the objects exist, the allocator has seen the sizes) before
    // the baseline is read.
    let done = Arc::new(AtomicBool::new(true));
    let dir = good.mkdir_mode(PRIVATE, 0o700).await.unwrap();
    well_behaved(good.clone(), done.clone()).await.unwrap();
    let file = good.stat(&format!("{PRIVATE}/good")).await.unwrap();
    assert_ne!(dir.inode, file.inode);
    let private: Arc<[u64]> = Arc::from([file.inode]);
    let baseline_kb = server.status_kb("VmRSS:");
    done.store(false, Ordering::Relaxed);

    let started = Instant::now();
    let served = tokio::spawn(well_behaved(good, done.clone()));
    let counts = Arc::new(Counts::default());
    let fuzz = ring.get("fuzz").unwrap().credential();
    let workers: Vec<_> = (0..WORKERS)
        .map(|n| {
            tokio::spawn(worker(
                server.addr,
                fuzz.clone(),
                seed,
                n,
                frames,
                counts.clone(),
                private.clone(),
            ))
        })
        .collect();
    let mut failures = Vec::new();
    for w in workers {
        if let Err(e) = w.await.unwrap() {
            failures.push(e);
        }
    }
    done.store(true, Ordering::Relaxed);
    let rounds = served.await.unwrap();
    let elapsed = started.elapsed();
    server.assert_alive();
    let peak_kb = server.status_kb("VmHWM:");
    let rss_kb = server.status_kb("VmRSS:");
    let c = &counts;
    eprintln!(
        "fuzz: seed {seed}: {} frames after a handshake ({} mutated) and {} fuzzed handshakes in {:.1} s; \
         {} replies ({} with data, {} namespace answers), {} requests by inode number, {} connections closed by the server; server memory {} MB at the start, {} MB at the end, \
         {} MB at its peak; the well-behaved tenant completed {:?} rounds",
        c.frames.load(Ordering::Relaxed),
        c.mutated.load(Ordering::Relaxed),
        c.handshakes_fuzzed.load(Ordering::Relaxed),
        elapsed.as_secs_f64(),
        c.replies.load(Ordering::Relaxed),
        c.data_replies.load(Ordering::Relaxed),
        c.meta_replies.load(Ordering::Relaxed),
        c.by_inode.load(Ordering::Relaxed),
        c.closed.load(Ordering::Relaxed),
        baseline_kb / 1024,
        rss_kb / 1024,
        peak_kb / 1024,
        rounds,
    );
    assert!(failures.is_empty(), "{failures:#?}\n{}", server.log());
    let rounds =
        rounds.unwrap_or_else(|e| panic!("the well-behaved tenant: {e}\n{}", server.log()));
    assert!(rounds >= 1);
    let log = server.log();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    assert!(
        rss_kb.saturating_sub(baseline_kb) < MEMORY_BOUND_KB,
        "the server grew from {baseline_kb} kB to {rss_kb} kB"
    );
    // Both kinds of answer happened: valid frames were served (the
    // handlers were reached), broken ones closed their connection.
    assert!(c.replies.load(Ordering::Relaxed) > frames / 10);
    assert!(c.data_replies.load(Ordering::Relaxed) > frames / 1000);
    assert!(c.meta_replies.load(Ordering::Relaxed) > frames / 100);
    assert!(c.closed.load(Ordering::Relaxed) > frames / 100);
    assert!(c.by_inode.load(Ordering::Relaxed) > frames / 20);
}
