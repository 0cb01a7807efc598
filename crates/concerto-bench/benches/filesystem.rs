//! The real file system against the local file system, side by side in one
//! run: 1 MiB sequential writes and reads through the client library on a
//! loopback cluster of four servers (256 KiB stripes, so every 1 MiB call
//! goes to all four at once) and the same I/O with `pwrite`/`pread` on one
//! local file; the same writes made durable (fsync at the end) both ways;
//! the ceiling loopback TCP itself sets (the same bytes through one socket,
//! no file system); the same I/O through the FUSE mount; 4 KiB latency both
//! ways; metadata operations; and what opening an authenticated connection
//! costs against a bare TCP connection. (What scheduling costs is measured by the
//! `policy_cost` benchmark, which interleaves the policies.) Every server
//! and the local file sit in the same temporary directory, so both sides use
//! the same disk and page cache.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use concerto_proto::connection::ServerConnection;
use concerto_proto::LayoutRequest;

const MIB: u64 = 1 << 20;
/// Bytes one iteration moves: 32 calls of 1 MiB.
const FILE: u64 = 32 * MIB;

fn filesystem(c: &mut Criterion) {
    let rt = concerto_bench::runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let (cluster, client) = concerto_bench::loopback_cluster(&rt, &dir.path().join("cluster"));
    let file = rt
        .block_on(client.create("/seq", LayoutRequest::default(), true))
        .expect("create");
    let local = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(false)
        .open(dir.path().join("local"))
        .expect("local file");
    let block = vec![7u8; MIB as usize];

    let mut g = c.benchmark_group("sequential_1MiB");
    g.throughput(Throughput::Bytes(FILE));
    g.bench_function("write/local", |b| {
        b.iter(|| {
            for k in 0..FILE / MIB {
                local.write_all_at(&block, k * MIB).expect("local write");
            }
        })
    });
    g.bench_function("write/concerto", |b| {
        b.iter(|| {
            rt.block_on(async {
                for k in 0..FILE / MIB {
                    client.write(&file, k * MIB, &block).await.expect("write");
                }
            })
        })
    });
    let mut buf = vec![0u8; MIB as usize];
    g.bench_function("read/local", |b| {
        b.iter(|| {
            for k in 0..FILE / MIB {
                local.read_exact_at(&mut buf, k * MIB).expect("local read");
            }
        })
    });
    g.bench_function("read/concerto", |b| {
        b.iter(|| {
            rt.block_on(async {
                for k in 0..FILE / MIB {
                    let data = client.read(&file, k * MIB, MIB).await.expect("read");
                    assert_eq!(data.len() as u64, MIB);
                }
            })
        })
    });
    g.finish();

    // Durable: the writes, then fsync, so both sides wait for the disk.
    let mut g = c.benchmark_group("sequential_1MiB_fsync");
    g.throughput(Throughput::Bytes(FILE));
    g.bench_function("write/local", |b| {
        b.iter(|| {
            for k in 0..FILE / MIB {
                local.write_all_at(&block, k * MIB).expect("local write");
            }
            local.sync_all().expect("local fsync");
        })
    });
    g.bench_function("write/concerto", |b| {
        b.iter(|| {
            rt.block_on(async {
                for k in 0..FILE / MIB {
                    client.write(&file, k * MIB, &block).await.expect("write");
                }
                client.fsync(&file).await.expect("fsync");
            })
        })
    });
    g.finish();

    // What loopback TCP itself allows on this host: the same bytes, 1 MiB
    // at a time, from one thread to another through one socket that a
    // reader drains and acknowledges per MiB (as a server does), no file system.
    let mut g = c.benchmark_group("loopback_tcp_1MiB");
    g.throughput(Throughput::Bytes(FILE));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut sender = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (mut receiver, _) = listener.accept().expect("accept");
    sender.set_nodelay(true).expect("nodelay");
    receiver.set_nodelay(true).expect("nodelay");
    let sink = std::thread::spawn(move || {
        let mut chunk = vec![0u8; MIB as usize];
        while receiver.read_exact(&mut chunk).is_ok() {
            if receiver.write_all(&[1]).is_err() {
                break;
            }
        }
    });
    let mut ack = [0u8; 1];
    g.bench_function("send_ack", |b| {
        b.iter(|| {
            for _ in 0..FILE / MIB {
                sender.write_all(&block).expect("send");
                sender.read_exact(&mut ack).expect("ack");
            }
        })
    });
    g.finish();
    drop(sender);
    sink.join().expect("sink thread");

    // The same 1 MiB writes and reads by a POSIX program through the FUSE
    // mount: the kernel cuts them into FUSE requests, the mount sends each
    // through the client library.
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mount point");
    let mounted = concerto_fuse::mount(
        client.with_identity(client.identity()),
        &mnt,
        rt.handle().clone(),
        concerto_fuse::MountOptions::default(),
    )
    .expect("mount (needs /dev/fuse and root)");
    let posix = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(false)
        .open(mnt.join("posix"))
        .expect("file on the mount");
    let mut g = c.benchmark_group("fuse_mount_1MiB");
    g.throughput(Throughput::Bytes(FILE));
    g.bench_function("write", |b| {
        b.iter(|| {
            for k in 0..FILE / MIB {
                posix.write_all_at(&block, k * MIB).expect("write");
            }
        })
    });
    g.bench_function("read", |b| {
        b.iter(|| {
            for k in 0..FILE / MIB {
                posix.read_exact_at(&mut buf, k * MIB).expect("read");
            }
        })
    });
    g.finish();
    drop(posix);
    drop(mounted);

    let mut g = c.benchmark_group("small_io_4KiB");
    let small = vec![1u8; 4096];
    g.bench_function("write/local", |b| {
        b.iter(|| local.write_all_at(&small, 4096).expect("local write"))
    });
    g.bench_function("write/concerto", |b| {
        b.iter(|| {
            rt.block_on(client.write(&file, 4096, &small))
                .expect("write")
        })
    });
    let mut sbuf = vec![0u8; 4096];
    g.bench_function("read/local", |b| {
        b.iter(|| local.read_exact_at(&mut sbuf, 4096).expect("local read"))
    });
    g.bench_function("read/concerto", |b| {
        b.iter(|| rt.block_on(client.read(&file, 4096, 4096)).expect("read"))
    });
    g.finish();

    let mut g = c.benchmark_group("metadata");
    g.throughput(Throughput::Elements(1));
    g.bench_function("stat", |b| {
        b.iter(|| rt.block_on(client.stat("/seq")).expect("stat"))
    });
    let next = AtomicU64::new(0);
    g.bench_function("create_unlink", |b| {
        b.iter(|| {
            let name = format!("/m{}", next.fetch_add(1, Ordering::Relaxed));
            rt.block_on(async {
                client
                    .create(&name, LayoutRequest::default(), true)
                    .await
                    .expect("create");
                client.unlink(&name).await.expect("unlink");
            })
        })
    });
    g.finish();

    // What a connection costs: a TCP connection alone, against one that
    // also authenticates (the handshake: two round trips, three HMACs).
    let mut g = c.benchmark_group("connection");
    let addr = cluster.cluster.servers[0].address;
    g.bench_function("tcp_connect", |b| {
        b.iter(|| {
            rt.block_on(tokio::net::TcpStream::connect(addr))
                .expect("connect")
        })
    });
    g.bench_function("connect_and_authenticate", |b| {
        b.iter(|| {
            rt.block_on(ServerConnection::connect(
                addr,
                std::time::Duration::from_secs(10),
                &cluster.admin,
            ))
            .expect("authenticated connection")
        })
    });
    g.finish();

    // What a tenant's data request pays for its capability on the data
    // server: one HMAC-SHA256 over ~60 bytes (checked before scheduling).
    let mut g = c.benchmark_group("capability");
    let ring = concerto_proto::auth::KeyRing::generate().expect("ring");
    let key = concerto_proto::capability::CapabilityKey::from_ring(&ring).expect("peer key");
    let now = concerto_proto::capability::now_s();
    let cap = key.issue("job-4242", 42, concerto_proto::capability::READ, 1001, now);
    g.bench_function("verify", |b| {
        b.iter(|| {
            key.refusal(
                Some(&cap),
                "job-4242",
                42,
                concerto_proto::capability::READ,
                now,
            )
        })
    });
    g.bench_function("issue", |b| {
        b.iter(|| key.issue("job-4242", 42, concerto_proto::capability::READ, 1001, now))
    });
    g.finish();

    rt.block_on(cluster.shutdown());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = filesystem
}
criterion_main!(benches);
