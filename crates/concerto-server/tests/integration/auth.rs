//! Who may do what on a real server: connections authenticate before
//! anything is served (no key, a wrong secret, an unknown key and a
//! replayed handshake are refused), a tenant acts only as its own job and
//! cannot administer, and a client's clock buys it no precedence beyond
//! the allowed skew.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use concerto_client::Identity;
use concerto_core::emulation::EmulationConfig;
use concerto_core::server::ServiceReport;
use concerto_core::units::Bandwidth;
use concerto_core::{Extent, Time};
use concerto_proto::auth::{self, Credential, Grant, KeyRing, Secret};
use concerto_proto::capability::{self, CapabilityKey};
use concerto_proto::connection::{ClientError, Object, ServerConnection};
use concerto_proto::{Envelope, ErrorKind, Message, Tags, VERSION};
use concerto_server::keys::Keys;
use concerto_server::rules::parse_policy;
use concerto_server::server::{self, ServerConfig, ServerHandle, DEFAULT_ISSUE_SKEW};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A ring with an admin key and a tenant key for job 7.
fn ring() -> KeyRing {
    let mut ring = KeyRing::generate().unwrap();
    ring.add(common::tenant_key("job-7", 7, None)).unwrap();
    ring
}

fn credential(ring: &KeyRing, id: &str) -> Credential {
    ring.get(id).unwrap().credential()
}

async fn start(dir: &std::path::Path, ring: &KeyRing) -> ServerHandle {
    let cfg = ServerConfig {
        keys: std::sync::Arc::new(Keys::fixed(ring.clone())),
        ..ServerConfig::data(dir.to_path_buf(), parse_policy("kind = \"fifo\"").unwrap())
    };
    server::start(cfg).await.unwrap()
}

/// Tags of a request of application `app` issued now.
fn tags(app: u32) -> Tags {
    Identity::new(app, 0).tags()
}

async fn send(sock: &mut TcpStream, message: Message) {
    let body = Envelope::new(1, message).encode();
    sock.write_all(&[&(body.len() as u32).to_be_bytes()[..], &body].concat())
        .await
        .unwrap();
}

async fn receive(sock: &mut TcpStream) -> Option<Message> {
    let mut len = [0u8; 4];
    tokio::time::timeout(TIMEOUT, sock.read_exact(&mut len))
        .await
        .ok()?
        .ok()?;
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    sock.read_exact(&mut buf).await.ok()?;
    Envelope::decode(buf.into()).ok().map(|e| e.message)
}

/// After a refusal the server closes the connection.
async fn assert_closed(sock: &mut TcpStream) {
    let mut rest = [0u8; 1];
    let n = tokio::time::timeout(TIMEOUT, sock.read(&mut rest))
        .await
        .expect("the server closes a refused connection")
        .unwrap_or(0);
    assert_eq!(n, 0, "connection closed");
}

fn is_denied(m: &Option<Message>) -> bool {
    matches!(
        m,
        Some(Message::Error {
            kind: ErrorKind::Denied,
            ..
        })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_handshake_is_refused_and_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let s = start(dir.path(), &ring).await;
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    send(
        &mut sock,
        Message::Read {
            tags: tags(7),
            object: 1,
            cap: None,
            extents: vec![Extent::new(0, 4)],
        },
    )
    .await;
    assert!(is_denied(&receive(&mut sock).await));
    assert_closed(&mut sock).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_or_an_unknown_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let s = start(dir.path(), &ring).await;
    let forged = Credential {
        secret: Secret::generate().unwrap(),
        ..credential(&ring, "job-7")
    };
    let unknown = Credential {
        id: "job-8".into(),
        ..forged.clone()
    };
    for c in [forged, unknown] {
        match ServerConnection::connect(s.addr, TIMEOUT, &c).await {
            Err(e @ ClientError::Auth { .. }) => {
                let text = e.to_string();
                // Said once, with what happened (not "authentication failed: authentication failed").
                assert!(
                    text.ends_with(": authentication failed: the key was refused"),
                    "{text}"
                );
            }
            Err(e) => panic!("{}: {e}", c.id),
            Ok(_) => panic!("{}: accepted", c.id),
        }
    }
    // The right key still gets in.
    let c = ServerConnection::connect(s.addr, TIMEOUT, &credential(&ring, "job-7"))
        .await
        .unwrap();
    assert_eq!(c.grant(), Grant::Tenant { job: 7 });
    s.shutdown().await;
}

/// A handshake recorded on the wire and played again on a new connection
/// is refused: the server's nonce differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_handshake_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let s = start(dir.path(), &ring).await;
    let key = credential(&ring, "job-7");
    let nonce = auth::random().unwrap();
    let hello = Message::Hello {
        key_id: key.id.clone(),
        nonce,
        integrity: false,
    };
    let mut first = TcpStream::connect(s.addr).await.unwrap();
    send(&mut first, hello.clone()).await;
    let Some(Message::Challenge { nonce: theirs }) = receive(&mut first).await else {
        panic!("no challenge")
    };
    let proof = Message::Proof {
        mac: common::client_proof(&key, &nonce, &theirs),
    };
    send(&mut first, proof.clone()).await;
    assert!(matches!(
        receive(&mut first).await,
        Some(Message::Welcome { .. })
    ));
    // The eavesdropper replays both messages.
    let mut replay = TcpStream::connect(s.addr).await.unwrap();
    send(&mut replay, hello).await;
    assert!(matches!(
        receive(&mut replay).await,
        Some(Message::Challenge { .. })
    ));
    send(&mut replay, proof).await;
    assert!(is_denied(&receive(&mut replay).await));
    assert_closed(&mut replay).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_wire_version_is_told_both_versions() {
    // An older client's hello: its version, and a message this server's
    // types cannot decode (an enum tag past the last).
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &ring()).await;
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    let old = VERSION - 6;
    let mut frame = Envelope::new(0, Message::Ping).encode();
    frame[4..6].copy_from_slice(&old.to_le_bytes());
    let tag = 4 + 2 + 8; // header length, version, id: then the message's tag
    frame[tag..tag + 4].copy_from_slice(&999u32.to_le_bytes());
    sock.write_all(&(frame.len() as u32).to_be_bytes())
        .await
        .unwrap();
    sock.write_all(&frame).await.unwrap();
    match receive(&mut sock).await {
        Some(Message::Error { kind, message }) => {
            assert_eq!(kind, ErrorKind::Protocol);
            let says =
                format!("protocol version {old} is not supported (this server speaks {VERSION})");
            assert!(message.contains(&says), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_closed(&mut sock).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_of_another_wire_version_is_named_with_both_versions() {
    // A server one version on: it answers the hello with an error in its
    // own version, which this client cannot decode.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let _hello = receive(&mut sock).await;
        let error = Message::Error {
            kind: ErrorKind::Protocol,
            message: "version".into(),
        };
        let mut frame = Envelope::new(0, error).encode();
        frame[4..6].copy_from_slice(&(VERSION + 1).to_le_bytes());
        sock.write_all(&(frame.len() as u32).to_be_bytes())
            .await
            .unwrap();
        sock.write_all(&frame).await.unwrap();
        let _ = sock.read(&mut [0u8; 1]).await;
    });
    let Err(e) = ServerConnection::connect(addr, TIMEOUT, &credential(&ring(), "admin")).await
    else {
        panic!("a handshake with a server of another version succeeded");
    };
    let says = format!("speaks wire version {}, this client {VERSION}", VERSION + 1);
    assert!(e.to_string().contains(&says), "{e}");
    drop(e);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_loses_its_open_connections_within_seconds() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let path = dir.path().join("keys.toml");
    std::fs::write(&path, ring.to_toml()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = ServerConfig {
        keys: std::sync::Arc::new(Keys::from_file(&path).unwrap()),
        ..ServerConfig::data(
            dir.path().join("data"),
            parse_policy("kind = \"fifo\"").unwrap(),
        )
    };
    let s = server::start(cfg).await.unwrap();
    let tenant = ServerConnection::connect(s.addr, TIMEOUT, &credential(&ring, "job-7"))
        .await
        .unwrap();
    let admin = ServerConnection::connect(s.addr, TIMEOUT, &credential(&ring, "admin"))
        .await
        .unwrap();
    tenant.ping().await.unwrap();
    // `concerto auth revoke job-7`: the ring file without it.
    let mut kept = KeyRing::default();
    for k in ring.keys().iter().filter(|k| k.id != "job-7") {
        kept.add(k.clone()).unwrap();
    }
    std::fs::write(&path, kept.to_toml()).unwrap();
    // Its open connection is refused at a request within seconds (the
    // server looks its key up again every 5 s) and closed; the admin's,
    // whose key stays, is served throughout.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let refusal = loop {
        match tenant.ping().await {
            Ok(_) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "still served 20 s after revocation"
                );
                admin.ping().await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(refusal.kind(), Some(ErrorKind::Denied), "{refusal}");
    assert!(
        refusal.to_string().contains("key \"job-7\" was revoked"),
        "{refusal}"
    );
    assert!(tenant.ping().await.is_err(), "the connection is closed");
    admin.ping().await.unwrap();
    s.shutdown().await;
}

async fn denied<T: std::fmt::Debug>(r: Result<T, ClientError>) -> String {
    match r {
        Err(ClientError::Server {
            kind: ErrorKind::Denied,
            message,
            ..
        }) => message,
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_acts_only_as_its_job_and_cannot_administer() {
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let s = start(dir.path(), &ring).await;
    let tenant = ServerConnection::connect(s.addr, TIMEOUT, &credential(&ring, "job-7"))
        .await
        .unwrap();
    let data = Bytes::from_static(b"mine");
    let one = object(&ring, "job-7", 1);
    tenant
        .write(tags(7), one, vec![Extent::new(0, 4)], data.clone())
        .await
        .unwrap();
    // Another application's id: its reads, writes and removals are refused.
    let m = denied(tenant.read(tags(8), one, vec![Extent::new(0, 4)]).await).await;
    assert!(m.contains("acts as application 7, not 8"), "{m}");
    denied(
        tenant
            .write(tags(8), one, vec![Extent::new(0, 4)], data)
            .await,
    )
    .await;
    // The servers' own business: removing objects, asking whether a file
    // exists, under its own job's tags or not.
    let m = denied(tenant.remove_objects(tags(7), vec![1]).await).await;
    assert!(m.contains("not a server's peer key"), "{m}");
    denied(
        tenant
            .meta(tags(7), concerto_proto::MetaRequest::Exists { inode: 1 })
            .await,
    )
    .await;
    // Administration.
    let m = denied(tenant.set_policy("kind = \"sfq-d-plus\"").await).await;
    assert!(m.contains("needs an admin key"), "{m}");
    denied(tenant.stats().await).await;
    // The arrival log shows every tenant's requests.
    let m = denied(tenant.arrivals(0).await).await;
    assert!(
        m.contains("reading the arrival log needs an admin key"),
        "{m}"
    );
    denied(tenant.rules().await).await;
    denied(tenant.set_rules("", true).await).await;
    let m = denied(
        tenant
            .set_cluster(vec![concerto_proto::Member {
                id: 0,
                address: SocketAddr::from(([127, 0, 0, 1], 9)),
                roles: vec![concerto_proto::Role::Data],
            }])
            .await,
    )
    .await;
    assert!(
        m.contains("setting the cluster map needs an admin key"),
        "{m}"
    );
    let report = ServiceReport { served: vec![] };
    denied(tenant.call(Message::ServiceReport(report)).await).await;
    // The coordinator's business: grants for the data servers come from
    // the coordinator (a peer), set rules from the administrator, and a
    // phase is asked for as the tenant's own job only.
    let m = denied(
        tenant
            .call(Message::SetGrants {
                grants: vec![(7, 1000.0)],
            })
            .await,
    )
    .await;
    assert!(m.contains("not a server's peer key"), "{m}");
    let m = denied(tenant.set_sets("kind = \"fair-share\"").await).await;
    assert!(m.contains("set rule needs an admin key"), "{m}");
    let m = denied(tenant.begin_phase(tags(8), std::time::Duration::ZERO).await).await;
    assert!(m.contains("acts as application 7, not 8"), "{m}");
    // The connection is still served, and the policy did not change.
    assert_eq!(tenant.ping().await.unwrap().0, "fifo");
    let admin = ServerConnection::connect(s.addr, TIMEOUT, &credential(&ring, "admin"))
        .await
        .unwrap();
    assert_eq!(
        admin
            .read(tags(7), 1, vec![Extent::new(0, 4)])
            .await
            .unwrap(),
        &b"mine"[..]
    );
    // The administrator's view of the arrivals: the tenant's write and the
    // admin's read, numbered in arrival order, and only those after a mark.
    let log = admin.arrivals(0).await.unwrap();
    let seen: Vec<_> = log
        .iter()
        .map(|a| (a.app, a.op, a.object, a.bytes))
        .collect();
    use concerto_proto::stats::ArrivalOp;
    assert_eq!(
        seen,
        [(7, ArrivalOp::Write, 1, 4), (7, ArrivalOp::Read, 1, 4)]
    );
    assert!(log
        .windows(2)
        .all(|w| w[0].seq + 1 == w[1].seq && w[0].at_ns <= w[1].at_ns));
    assert_eq!(admin.arrivals(log[0].seq).await.unwrap(), log[1..]);
    s.shutdown().await;
}

/// Polls the server's statistics until `done` holds (or fails the test
/// after the deadline).
async fn until(admin: &ServerConnection, what: &str, done: impl Fn(u64, u64) -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let st = admin.stats().await.unwrap();
        if done(st.queued, st.in_flight) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never {what}");
        tokio::task::yield_now().await;
    }
}

/// A server whose device takes one request at a time at 10 MB/s, so that
/// requests queue behind a long write and the order the policy serves
/// them in can be read back (see [`write_from`]).
async fn one_slot_server(
    dir: &std::path::Path,
    ring: &KeyRing,
    policy: &str,
    issue_skew: Time,
) -> ServerHandle {
    let cfg = ServerConfig {
        keys: std::sync::Arc::new(Keys::fixed(ring.clone())),
        depth: 1,
        issue_skew,
        throttle: Some(EmulationConfig {
            bandwidth: Bandwidth(10e6),
            latency: Time::from_micros(100),
            seek: Time::ZERO,
            segment: Time::ZERO,
            parallelism: 1,
        }),
        ..ServerConfig::data(dir.to_path_buf(), parse_policy(policy).unwrap())
    };
    server::start(cfg).await.unwrap()
}

/// One write of `len` bytes of `byte` to `object`, on a connection of its
/// own with `key`. Two writes to the same bytes of one object tell, by
/// whose bytes stay, which the server served last.
/// `object` with a capability to read and write it issued to `key`, as
/// the metadata service would issue it at open.
fn object(ring: &KeyRing, key: &str, object: u64) -> Object {
    let caps = CapabilityKey::from_ring(ring).unwrap();
    Object {
        id: object,
        cap: Some(caps.issue(
            key,
            object,
            capability::READ | capability::WRITE,
            1001,
            capability::now_s(),
        )),
    }
}

fn write_from(
    addr: SocketAddr,
    key: Credential,
    t: Tags,
    object: impl Into<Object> + Send + 'static,
    len: u64,
    byte: u8,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let c = ServerConnection::connect(addr, TIMEOUT, &key)
            .await
            .unwrap();
        let data = Bytes::from(vec![byte; len as usize]);
        c.write(t, object, vec![Extent::new(0, len)], data)
            .await
            .unwrap();
    })
}

/// The first byte of `object`: whose write was served last.
async fn last_writer(admin: &ServerConnection, object: u64) -> u8 {
    admin
        .read(tags(1), object, vec![Extent::new(0, 1)])
        .await
        .unwrap()[0]
}

/// Under `coordinated`, a request stamped with issue time 0 would sort
/// before everything queued (window 0). The server counts an issue time
/// older than its arrival minus the skew (here 0) as that, so the victim,
/// queued first, is served first, and the attacker's bytes stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_issue_time_buys_no_precedence_under_coordinated() {
    let dir = tempfile::tempdir().unwrap();
    let ring = ring();
    let s = one_slot_server(dir.path(), &ring, "kind = \"coordinated\"", Time::ZERO).await;
    let key = credential(&ring, "admin");
    let admin = ServerConnection::connect(s.addr, TIMEOUT, &key)
        .await
        .unwrap();
    const SHARED: u64 = 42;
    // A long write holds the one slot (0.8 s) while the others queue.
    let blocker = write_from(s.addr, key.clone(), tags(5), 5, 8 << 20, 0);
    until(&admin, "the blocker in service", |_, in_flight| {
        in_flight == 1
    })
    .await;
    let victim = write_from(s.addr, key.clone(), tags(1), SHARED, 4096, b'v');
    until(&admin, "the victim queued", |queued, _| queued == 1).await;
    let zero = Tags {
        issue_ns: 0,
        ..tags(9)
    };
    let attacker = write_from(s.addr, key.clone(), zero, SHARED, 4096, b'a');
    until(&admin, "the attacker queued", |queued, _| queued == 2).await;
    for t in [blocker, victim, attacker] {
        t.await.unwrap();
    }
    assert_eq!(
        last_writer(&admin, SHARED).await,
        b'a',
        "the attacker was served before the victim queued ahead of it"
    );
    s.shutdown().await;
}

/// Under `sfq` on a one-slot server, after a blocker: the victim (job 1)
/// queues two writes, then the abuser (job 2) three, with `abuser_tags`,
/// under the QoS `rules` (TOML). The victim's second write and the
/// abuser's third share their bytes; returns whose stay (served last).
async fn sfq_last_writer(rules: &str, abuser_tags: Tags) -> u8 {
    let dir = tempfile::tempdir().unwrap();
    let mut ring = ring();
    for (id, job, user) in [("victim", 1, 41), ("abuser", 2, 42)] {
        ring.add(common::tenant_key(id, job, Some(user))).unwrap();
    }
    let s = one_slot_server(dir.path(), &ring, "kind = \"sfq\"", DEFAULT_ISSUE_SKEW).await;
    let admin = ServerConnection::connect(s.addr, TIMEOUT, &credential(&ring, "admin"))
        .await
        .unwrap();
    admin.set_rules(rules, true).await.unwrap();
    const SHARED: u64 = 42;
    let mut tasks = vec![write_from(
        s.addr,
        credential(&ring, "admin"),
        tags(5),
        5,
        8 << 20,
        0,
    )];
    until(&admin, "the blocker in service", |_, in_flight| {
        in_flight == 1
    })
    .await;
    let writes = [
        ("victim", tags(1), 101, b'v'),
        ("victim", tags(1), SHARED, b'v'),
        ("abuser", abuser_tags, 201, b'a'),
        ("abuser", abuser_tags, 202, b'a'),
        ("abuser", abuser_tags, SHARED, b'a'),
    ];
    for (queued, (key, t, object, byte)) in (1..).zip(writes) {
        tasks.push(write_from(
            s.addr,
            credential(&ring, key),
            t,
            self::object(&ring, key, object),
            4096,
            byte,
        ));
        until(&admin, "the writes queued in order", |q, _| q == queued).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let last = last_writer(&admin, SHARED).await;
    s.shutdown().await;
    last
}

/// Under `sfq`, a tenant that claims weight 1000 in its requests would
/// have its third request's start tag at 8 bytes of virtual time instead of
/// 8,192, ahead of the victim's second (4,096). The server weighs a
/// tenant's requests with its key's weight, so the claim moves nothing:
/// the abuser's third write is served last and its bytes stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_weight_buys_a_tenant_nothing_under_sfq() {
    let greedy = Tags {
        weight: Some(1000.0),
        ..tags(2)
    };
    assert_eq!(
        sfq_last_writer("", greedy).await,
        b'a',
        "the abuser's claimed weight put its write ahead of the victim's"
    );
}

/// What the claim could not do, the administrator's rule does: with a rule
/// giving job 2 weight 1000, its third write goes ahead of the victim's
/// second, so the victim's bytes stay. (With the rule on job 1 instead,
/// nothing changes: the victim is ahead anyway.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_rule_decides_what_a_claim_cannot_under_sfq() {
    let rule = "[[rules]]\nname = \"favour-2\"\njob = 2\nweight = 1000.0\n";
    assert_eq!(sfq_last_writer(rule, tags(2)).await, b'v');
    let rule = rule.replace("job = 2", "job = 1");
    assert_eq!(sfq_last_writer(&rule, tags(2)).await, b'a');
}

/// A rule may name a user instead of a job: the victim's key runs as
/// user 41, the abuser's as 42. A rule giving user 42 weight 1000 puts the
/// abuser's write ahead (the victim's bytes stay); one for user 41 leaves
/// the victim ahead anyway; one for a user nobody is changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_rule_weighs_the_jobs_whose_keys_name_the_user() {
    let rule = |user: u32| format!("[[rules]]\nname = \"u\"\nuser = {user}\nweight = 1000.0\n");
    assert_eq!(sfq_last_writer(&rule(42), tags(2)).await, b'v');
    assert_eq!(sfq_last_writer(&rule(41), tags(2)).await, b'a');
    assert_eq!(sfq_last_writer(&rule(7), tags(2)).await, b'a');
}

/// Lustre's expressions on a real server match what the server knows, not
/// what a request claims: the user and group of the key (the abuser's key
/// runs as user 42, whose group is 42), and the client's NID, the
/// connection's address (127.0.0.1 here). A rule for another address
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expression_matches_the_keys_user_and_group_and_the_clients_address() {
    let rule =
        |expr: &str| format!("[[rules]]\nname = \"x\"\nmatch = \"{expr}\"\nweight = 1000.0\n");
    assert_eq!(sfq_last_writer(&rule("uid={42}"), tags(2)).await, b'v');
    assert_eq!(
        sfq_last_writer(&rule("gid={42-50}&opcode={write}"), tags(2)).await,
        b'v'
    );
    assert_eq!(
        sfq_last_writer(&rule("nid={127.0.0.[1-9]@tcp}&jobid={2}"), tags(2)).await,
        b'v'
    );
    assert_eq!(
        sfq_last_writer(&rule("nid={10.9.9.9@tcp}&jobid={2}"), tags(2)).await,
        b'a'
    );
}

/// A peer key is held to its role: what a (compromised) server reports of
/// its service is charged here only up to what the servers at its address
/// could have served, and at weights this server knows of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_keys_service_reports_are_held_to_what_its_servers_could_serve() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = concerto_server::local::LocalCluster::start(
        dir.path(),
        concerto_server::local::LocalClusterSpec::fifo(2),
    )
    .await
    .unwrap();
    let peer = cluster
        .keys
        .ring()
        .with_grant(Grant::Peer)
        .unwrap()
        .credential();
    let at = cluster.cluster.servers[0].address;
    let c = ServerConnection::connect(at, TIMEOUT, &peer).await.unwrap();
    let report = |bytes, weight| {
        Message::ServiceReport(ServiceReport {
            served: vec![concerto_core::server::Served {
                bytes,
                requests: 1,
                ..concerto_core::server::Served::none(concerto_core::AppId(1), weight)
            }],
        })
    };
    // An honest report: 1 MB at weight 1.
    assert!(matches!(
        c.call(report(1_000_000, 1.0)).await,
        Ok(Message::Done)
    ));
    // A lie: a terabyte at a weight of 1e-9, from the address where the
    // cluster map lists both servers (100 MB/s each by default: a burst of
    // 10 s, 2 GB, less the megabyte already charged).
    assert!(matches!(
        c.call(report(1_000_000_000_000, 1e-9)).await,
        Ok(Message::Done)
    ));
    let admin = ServerConnection::connect(at, TIMEOUT, &cluster.admin)
        .await
        .unwrap();
    let reports = admin.stats().await.unwrap().reports;
    assert_eq!(reports.received, 2);
    assert_eq!(reports.clamped_weights, 1);
    let kept = 1_000_000_000_000 - reports.trimmed_bytes;
    // (Plus what refilled at 200 MB/s in the milliseconds between: 0.5 s
    // would be 100 MB.)
    assert!(kept <= 2_100_000_000, "kept {kept} bytes of the lie");
    assert!(
        kept >= 1_000_000_000,
        "kept only {kept} bytes: the burst is 2 GB"
    );
    // The administrator's own reports are not held (it is root).
    assert!(matches!(
        admin.call(report(1_000_000_000_000, 1e-9)).await,
        Ok(Message::Done)
    ));
    let after = admin.stats().await.unwrap().reports;
    assert_eq!(
        (after.trimmed_bytes, after.clamped_weights),
        (reports.trimmed_bytes, reports.clamped_weights)
    );
    cluster.shutdown().await;
}
