//! A real data server on loopback: bytes written come back exact under
//! every kind of policy, a live policy switch loses nothing, malformed
//! frames are answered and cut off without disturbing other clients, and a
//! silent server gives a timeout that names it.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use concerto_client::Identity;
use concerto_core::emulation::EmulationConfig;
use concerto_core::units::Bandwidth;
use concerto_core::{Extent, Time};
use concerto_proto::auth::{self, Credential, KeyRing};
use concerto_proto::connection::{ClientError, ServerConnection};
use concerto_proto::{Envelope, ErrorKind, Message, Tags, MAX_FRAME};
use concerto_server::rules::parse_policy;
use concerto_server::server::{self, ServerConfig, ServerHandle};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A server and its admin key.
async fn start(dir: &std::path::Path, policy: &str) -> (ServerHandle, Credential) {
    let cfg = ServerConfig {
        depth: 4,
        capacity: Bandwidth(1e9),
        ..ServerConfig::data(dir.to_path_buf(), parse_policy(policy).unwrap())
    };
    let key = cfg.admin_credential().unwrap();
    (server::start(cfg).await.unwrap(), key)
}

/// Tags of a request of application `app` issued now.
fn who(app: u32) -> Tags {
    Identity::new(app, 0).tags()
}

/// Several applications write random ranges of their own objects at once,
/// then read everything back and compare with what they wrote.
async fn random_ranges_round_trip(addr: SocketAddr, key: Credential, seed: u64) {
    let mut tasks = Vec::new();
    for app in 0..4u32 {
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let conn = ServerConnection::connect(addr, TIMEOUT, &key)
                .await
                .unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(seed + app as u64);
            let object = 100 + app as u64;
            let mut model = vec![0u8; 1 << 20];
            let mut end = 0usize;
            for _ in 0..40 {
                let offset = rng.gen_range(0..(1 << 20) - 70_000);
                let len = rng.gen_range(1..70_000);
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                model[offset..offset + len].copy_from_slice(&data);
                end = end.max(offset + len);
                conn.write(
                    who(app),
                    object,
                    vec![Extent::new(offset as u64, data.len() as u64)],
                    data.into(),
                )
                .await
                .unwrap();
            }
            conn.fsync(who(app), object).await.unwrap();
            let back = conn
                .read(who(app), object, vec![Extent::new(0, 1 << 20)])
                .await
                .unwrap();
            assert_eq!(back.len(), end, "the object ends at the last byte written");
            assert!(back == model[..end], "app {app}: bytes differ");
            // Reading past the end gives a short (here empty) reply.
            assert!(conn
                .read(who(app), object, vec![Extent::new(end as u64 + 10, 100)])
                .await
                .unwrap()
                .is_empty());
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_round_trip_under_every_policy() {
    for (i, policy) in [
        "kind = \"fifo\"",
        "kind = \"coordinated\"\nwindow = \"5ms\"",
        "kind = \"sfq-d-plus\"\ndepth = 4",
        "kind = \"service-sync\"",
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let (s, key) = start(dir.path(), policy).await;
        random_ranges_round_trip(s.addr, key, i as u64 * 10).await;
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_policy_switch_under_load_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A slow device, so that requests are in service or queued while the writers run.
    let cfg = ServerConfig {
        depth: 2,
        throttle: Some(EmulationConfig {
            bandwidth: Bandwidth(10e6),
            latency: Time::from_micros(500),
            seek: Time::ZERO,
            segment: Time::ZERO,
            parallelism: 1,
        }),
        ..ServerConfig::data(
            dir.path().to_path_buf(),
            parse_policy("kind = \"fifo\"").unwrap(),
        )
    };
    let key = cfg.admin_credential().unwrap();
    let s = server::start(cfg).await.unwrap();
    let addr = s.addr;
    let writers = tokio::spawn(random_ranges_round_trip(addr, key.clone(), 99));
    let admin = ServerConnection::connect(addr, TIMEOUT, &key)
        .await
        .unwrap();
    for policy in [
        "kind = \"sfq-d-plus\"",
        "kind = \"coordinated\"",
        "kind = \"fifo\"",
    ] {
        // The switch must find work under the old policy, or it tests nothing:
        // switch (again) until the reply says the retiring policy held requests.
        loop {
            let retiring = admin.set_policy(policy).await.unwrap();
            assert_eq!(
                admin.ping().await.unwrap().0,
                parse_policy(policy).unwrap().name()
            );
            if retiring > 0 {
                break;
            }
            assert!(
                !writers.is_finished(),
                "the writers finished before a switch to {policy} found requests to hand over"
            );
            tokio::task::yield_now().await;
        }
    }
    writers.await.unwrap();
    match admin
        .set_policy("kind = \"sfq-d-plus\"\nlarge_slots = 0")
        .await
    {
        Err(ClientError::Server {
            kind: ErrorKind::Invalid,
            message,
            ..
        }) => {
            assert!(
                message.contains("policy.large_slots: must be > 0"),
                "{message}"
            )
        }
        other => panic!("a bad policy was accepted: {other:?}"),
    }
    s.shutdown().await;
}

/// The client's side of the handshake on a raw socket.
async fn handshake(sock: &mut tokio::net::TcpStream, key: &Credential) {
    let nonce = auth::random().unwrap();
    send_frame(
        sock,
        Message::Hello {
            key_id: key.id.clone(),
            nonce,
            integrity: false,
        },
    )
    .await;
    let Some(Envelope {
        message: Message::Challenge { nonce: theirs },
        ..
    }) = read_frame(sock).await
    else {
        panic!("no challenge");
    };
    let mac = common::client_proof(key, &nonce, &theirs);
    send_frame(sock, Message::Proof { mac }).await;
    assert!(matches!(
        read_frame(sock).await,
        Some(Envelope {
            message: Message::Welcome { .. },
            ..
        })
    ));
}

async fn send_frame(sock: &mut tokio::net::TcpStream, message: Message) {
    let body = Envelope::new(0, message).encode();
    sock.write_all(&[&(body.len() as u32).to_be_bytes()[..], &body].concat())
        .await
        .unwrap();
}

/// Reads one reply frame from a raw socket.
async fn read_frame(sock: &mut tokio::net::TcpStream) -> Option<Envelope> {
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).await.ok()?;
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    sock.read_exact(&mut buf).await.ok()?;
    Envelope::decode(buf.into()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_are_answered_and_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let (s, key) = start(dir.path(), "kind = \"fifo\"").await;
    let good = Arc::new(
        ServerConnection::connect(s.addr, TIMEOUT, &key)
            .await
            .unwrap(),
    );
    good.write(
        who(1),
        1,
        vec![Extent::new(0, 4)],
        bytes::Bytes::from_static(b"kept"),
    )
    .await
    .unwrap();
    // Each with what the server answers before the handshake (where a
    // frame that decodes but is no hello is a refused handshake) and after.
    let reply_frame = {
        let body = Envelope::new(3, Message::Done).encode();
        [&(body.len() as u32).to_be_bytes()[..], &body].concat()
    };
    let garbage: Vec<(Vec<u8>, ErrorKind, ErrorKind)> = vec![
        (
            [&5u32.to_be_bytes()[..], b"hello"].concat(),
            ErrorKind::Protocol,
            ErrorKind::Protocol,
        ),
        // A length prefix over the limit: refused before the body is read.
        (
            ((MAX_FRAME as u32) + 1).to_be_bytes().to_vec(),
            ErrorKind::Protocol,
            ErrorKind::Protocol,
        ),
        // A valid envelope of a reply where a request belongs.
        (reply_frame, ErrorKind::Denied, ErrorKind::Protocol),
    ];
    for (bytes, authenticated, expected) in garbage
        .into_iter()
        .flat_map(|(g, before, after)| [(g.clone(), false, before), (g, true, after)])
    {
        let mut sock = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        if authenticated {
            handshake(&mut sock, &key).await;
        }
        sock.write_all(&bytes).await.unwrap();
        let reply = tokio::time::timeout(TIMEOUT, read_frame(&mut sock))
            .await
            .unwrap()
            .expect("an error reply");
        assert!(
            matches!(reply.message, Message::Error { kind, .. } if kind == expected),
            "authenticated: {authenticated}, {reply:?}"
        );
        // Then the server closes this connection.
        let mut rest = [0u8; 1];
        let n = tokio::time::timeout(TIMEOUT, sock.read(&mut rest))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0, "connection closed");
        // Everyone else is still served.
        assert_eq!(
            good.read(who(1), 1, vec![Extent::new(0, 4)]).await.unwrap(),
            &b"kept"[..]
        );
    }
    s.shutdown().await;
}

#[tokio::test]
async fn a_silent_server_times_out_with_its_address() {
    // A socket that accepts connections but never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let key = KeyRing::generate().unwrap().keys()[0].credential();
    // The handshake is what goes unanswered.
    let e = ServerConnection::connect(addr, Duration::from_millis(200), &key)
        .await
        .err()
        .unwrap();
    assert!(matches!(e, ClientError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
    drop(silent);
    // Nobody listening: the error names the server too.
    let e = ServerConnection::connect(addr, Duration::from_millis(200), &key)
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
}
