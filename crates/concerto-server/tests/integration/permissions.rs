//! Owners and modes on a loopback cluster, through the client library with
//! tenant keys bound to users: what one user's key may do to another's
//! files is what POSIX permissions say, decided by the key's user (never a
//! request's claim), with errors that name the operation and the file.

use std::time::Duration;

use bytes::Bytes;
use concerto_client::{FsClient, Identity, Stat};
use concerto_core::Extent;
use concerto_proto::auth::{Grant, Key, KeyRing, Principal, Secret, NOBODY};
use concerto_proto::capability::{self, Capability};
use concerto_proto::connection::{ClientError, Object, ServerConnection};
use concerto_proto::{ErrorKind, LayoutRequest, MetaReply, MetaRequest, Tags};
use concerto_server::local::{LocalCluster, LocalClusterSpec};

use crate::common;

/// Alice (1001) and Bob (1002) share group 100; Carol (1003) is alone in
/// 300; `anon`'s key names no user.
const USERS: [(&str, u32, Option<u32>, &[u32]); 4] = [
    ("alice", 1, Some(1001), &[100]),
    ("bob", 2, Some(1002), &[100, 400]),
    ("carol", 3, Some(1003), &[300]),
    ("anon", 4, None, &[]),
];

struct Users {
    cluster: LocalCluster,
    ring: KeyRing,
    _dir: tempfile::TempDir,
}

impl Users {
    async fn start() -> Users {
        let dir = tempfile::tempdir().unwrap();
        let mut ring = KeyRing::generate().unwrap();
        for (id, job, user, groups) in USERS {
            ring.add(Key {
                id: id.into(),
                grant: Grant::Tenant { job },
                weight: None,
                user,
                groups: groups.to_vec(),
                secret: Secret::generate().unwrap(),
            })
            .unwrap();
        }
        // A node's mount, serving users 1000-1999.
        ring.add(Key {
            id: "node1".into(),
            grant: Grant::Node {
                first_user: 1000,
                last_user: 1999,
            },
            weight: None,
            user: None,
            groups: Vec::new(),
            secret: Secret::generate().unwrap(),
        })
        .unwrap();
        let cluster =
            LocalCluster::start_with_keys(dir.path(), LocalClusterSpec::fifo(2), ring.clone())
                .await
                .unwrap();
        Users {
            cluster,
            ring,
            _dir: dir,
        }
    }

    fn client(&self, id: &str) -> FsClient {
        let key = self.ring.get(id).unwrap();
        let app = match key.grant {
            Grant::Tenant { job } => job,
            _ => 9,
        };
        FsClient::new(
            self.cluster.cluster.clone(),
            Identity::new(app, 0),
            key.credential(),
        )
    }

    fn admin(&self) -> FsClient {
        FsClient::new(
            self.cluster.cluster.clone(),
            Identity::new(9, 0),
            self.cluster.admin.clone(),
        )
    }
}

/// A file of `mode` written by `c`.
async fn file(c: &FsClient, path: &str, mode: u32) -> Stat {
    let (f, stat) = c
        .create_stat(path, LayoutRequest::default(), true, mode)
        .await
        .unwrap();
    c.write(&f, 0, b"secret data").await.unwrap();
    c.close(&f).await.unwrap();
    stat
}

/// The refusal's kind and message: `Denied`, naming the operation and the path.
fn denied<T: std::fmt::Debug>(r: Result<T, ClientError>, operation: &str, path: &str) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Denied), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("{operation} {path}: permission denied")),
        "{text}"
    );
    text
}

/// What only the owner or root may do, refused: `NotPermitted` (EPERM, as
/// POSIX gives for chmod, chown and a sticky directory's entries), naming
/// the operation and the path.
fn not_permitted<T: std::fmt::Debug>(
    r: Result<T, ClientError>,
    operation: &str,
    path: &str,
) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::NotPermitted), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("{operation} {path}: operation not permitted")),
        "{text}"
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_belongs_to_the_user_its_key_names_with_the_mode_asked_for() {
    let u = Users::start().await;
    let alice = u.client("alice");
    let s = file(&alice, "/a", 0o640).await;
    assert_eq!((s.uid, s.gid, s.mode), (1001, 100, 0o640));
    alice.mkdir_mode("/d", 0o750).await.unwrap();
    let d = alice.stat("/d").await.unwrap();
    assert_eq!((d.uid, d.gid, d.mode), (1001, 100, 0o750));
    // The root is shared scratch: sticky and open to all, owned by root.
    let root = alice.stat("/").await.unwrap();
    assert_eq!((root.uid, root.gid, root.mode), (0, 0, 0o1777));
    // A key that names no user acts as nobody.
    let n = file(&u.client("anon"), "/n", 0o600).await;
    assert_eq!((n.uid, n.gid), (NOBODY, NOBODY));
    u.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_user_cannot_read_write_truncate_or_remove_a_private_file() {
    let u = Users::start().await;
    let (alice, carol) = (u.client("alice"), u.client("carol"));
    file(&alice, "/private", 0o600).await;
    denied(
        carol.open("/private", false).await,
        "open for reading",
        "/private",
    );
    denied(
        carol.open("/private", true).await,
        "open for writing",
        "/private",
    );
    denied(carol.truncate("/private", 0).await, "truncate", "/private");
    denied(
        carol
            .create("/private", LayoutRequest::default(), false)
            .await,
        "open for writing",
        "/private",
    );
    // The root is sticky: only the owner (or root) removes or renames.
    let why = not_permitted(carol.unlink("/private").await, "unlink", "/private");
    assert!(why.contains("sticky"), "{why}");
    not_permitted(
        carol.rename("/private", "/mine").await,
        "rename",
        "/private",
    );
    // Nor can a file of Carol's replace it.
    file(&carol, "/c", 0o644).await;
    not_permitted(carol.rename("/c", "/private").await, "rename", "/private");
    not_permitted(
        carol.set_attr("/private", Some(0o666), None, None).await,
        "chmod",
        "/private",
    );
    // Alice's own file is hers; the data is intact.
    let f = alice.open("/private", false).await.unwrap();
    assert_eq!(&alice.read(&f, 0, 11).await.unwrap()[..], b"secret data");
    alice.unlink("/private").await.unwrap();
    u.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_and_other_bits_decide_for_members_and_others() {
    let u = Users::start().await;
    let (alice, bob, carol) = (u.client("alice"), u.client("bob"), u.client("carol"));
    file(&alice, "/g", 0o640).await;
    // Bob is in group 100: he reads, but may not write.
    bob.open("/g", false).await.unwrap();
    denied(bob.open("/g", true).await, "open for writing", "/g");
    denied(carol.open("/g", false).await, "open for reading", "/g");
    alice.set_attr("/g", Some(0o664), None, None).await.unwrap();
    let f = bob.open("/g", true).await.unwrap();
    bob.close(&f).await.unwrap();
    alice.set_attr("/g", Some(0o604), None, None).await.unwrap();
    // Others' bits now let Carol read; the group's deny Bob, as POSIX says.
    carol.open("/g", false).await.unwrap();
    denied(bob.open("/g", false).await, "open for reading", "/g");
    // access(2) answers the same.
    carol.access("/g", 4).await.unwrap();
    denied(carol.access("/g", 2).await, "access", "/g");
    u.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_without_search_or_read_permission_hides_its_files() {
    let u = Users::start().await;
    let (alice, carol) = (u.client("alice"), u.client("carol"));
    alice.mkdir_mode("/home", 0o700).await.unwrap();
    file(&alice, "/home/f", 0o644).await;
    denied(carol.stat("/home/f").await, "search", "/home");
    denied(carol.readdir("/home").await, "list", "/home");
    denied(
        carol
            .create("/home/x", LayoutRequest::default(), true)
            .await,
        "search",
        "/home",
    );
    // Search without read: names known are reachable, the list is not.
    alice
        .set_attr("/home", Some(0o711), None, None)
        .await
        .unwrap();
    assert_eq!(carol.stat("/home/f").await.unwrap().uid, 1001);
    denied(carol.readdir("/home").await, "list", "/home");
    denied(
        carol
            .create("/home/x", LayoutRequest::default(), true)
            .await,
        "create",
        "/home/x",
    );
    denied(carol.mkdir("/home/sub").await, "mkdir", "/home/sub");
    u.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_admin_key_gives_files_away_and_owners_change_groups_they_are_in() {
    let u = Users::start().await;
    let (alice, bob, admin) = (u.client("alice"), u.client("bob"), u.admin());
    file(&bob, "/b", 0o644).await;
    not_permitted(
        bob.set_attr("/b", None, Some(1001), None).await,
        "chown",
        "/b",
    );
    not_permitted(
        bob.set_attr("/b", None, None, Some(300)).await,
        "chgrp",
        "/b",
    );
    let s = bob.set_attr("/b", None, None, Some(400)).await.unwrap();
    assert_eq!((s.uid, s.gid), (1002, 400));
    not_permitted(
        alice.set_attr("/b", None, None, Some(100)).await,
        "chgrp",
        "/b",
    );
    let s = admin
        .set_attr("/b", Some(0o600), Some(1001), Some(100))
        .await
        .unwrap();
    assert_eq!((s.uid, s.gid, s.mode), (1001, 100, 0o600));
    // Now Alice's, and private: Bob lost it.
    alice.open("/b", true).await.unwrap();
    denied(bob.open("/b", false).await, "open for reading", "/b");
    // The admin key is root: it reads anything, and can close the root.
    admin.open("/b", false).await.unwrap();
    admin.set_attr("/", Some(0o755), None, None).await.unwrap();
    denied(
        alice.create("/new", LayoutRequest::default(), true).await,
        "create",
        "/new",
    );
    u.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_group_id_project_directory_shares_its_group_with_new_files() {
    let u = Users::start().await;
    let (admin, alice, bob) = (u.admin(), u.client("alice"), u.client("bob"));
    admin.mkdir_mode("/project", 0o2770).await.unwrap();
    admin
        .set_attr("/project", None, None, Some(100))
        .await
        .unwrap();
    let s = file(&alice, "/project/data", 0o660).await;
    assert_eq!((s.uid, s.gid), (1001, 100));
    let f = bob.open("/project/data", true).await.unwrap();
    bob.close(&f).await.unwrap();
    let d = bob.mkdir_mode("/project/sub", 0o770).await.unwrap();
    assert_eq!((d.gid, d.mode), (100, 0o2770));
    denied(
        u.client("carol").stat("/project/data").await,
        "search",
        "/project",
    );
    u.cluster.shutdown().await;
}

/// A raw connection to data server `id` with `key`'s credential.
async fn raw(u: &Users, id: usize, key: &str) -> ServerConnection {
    let cred = u.ring.get(key).unwrap().credential();
    ServerConnection::connect(u.cluster.servers[id].addr, Duration::from_secs(10), &cred)
        .await
        .unwrap()
}

fn tags(app: u32) -> Tags {
    Identity::new(app, 0).tags()
}

fn refused<T: std::fmt::Debug>(r: Result<T, ClientError>, why: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Denied), "{e}");
    assert!(e.to_string().contains(why), "{e}");
}

/// Object ids alone are worth nothing: Carol, going around the library
/// with a raw connection, can neither read, write, truncate nor create an
/// object of Alice's file by its id; a capability Alice was given does not
/// work on Carol's key, nor one altered to grant more or last longer, nor
/// one for another object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_id_without_a_capability_is_worth_nothing() {
    let u = Users::start().await;
    let alice = u.client("alice");
    file(&alice, "/private", 0o600).await;
    let f = alice.open("/private", false).await.unwrap();
    let ino = f.inode;
    let at = vec![Extent::new(0, 11)];
    // The server holding the file's first stripe (all 11 bytes).
    let first = f.layout.servers()[0] as usize;
    let carol = raw(&u, first, "carol").await;
    refused(carol.read(tags(3), ino, at.clone()).await, "no capability");
    let junk = Bytes::from_static(b"overwritten");
    refused(
        carol.write(tags(3), ino, at.clone(), junk.clone()).await,
        "no capability",
    );
    refused(carol.truncate(tags(3), ino, 1 << 40).await, "no capability");
    refused(
        carol
            .write(tags(3), ino + 1000, at.clone(), junk.clone())
            .await,
        "no capability",
    );
    // Alice's capability, as the metadata service (server 0) gave it for
    // her read.
    let meta = raw(&u, 0, "alice").await;
    let a = raw(&u, first, "alice").await;
    let open = meta
        .meta(
            tags(1),
            MetaRequest::Open {
                path: "/private".into(),
                write: false,
            },
        )
        .await
        .unwrap();
    let MetaReply::Attr(attr) = open else {
        panic!("{open:?}")
    };
    let cap = attr.capability.expect("an open gives a capability");
    assert_eq!(cap.rights, capability::READ);
    let theirs = Object {
        id: ino,
        cap: Some(cap),
    };
    refused(carol.read(tags(3), theirs, at.clone()).await, "another key");
    // On Alice's own key it reads, but does not write.
    assert_eq!(
        &a.read(tags(1), theirs, at.clone()).await.unwrap()[..],
        b"secret data"
    );
    refused(
        a.write(tags(1), theirs, at.clone(), junk.clone()).await,
        "grants reading where writing",
    );
    for altered in [
        Capability {
            rights: capability::READ | capability::WRITE,
            ..cap
        },
        Capability {
            expires_s: cap.expires_s + 3600,
            ..cap
        },
        Capability { uid: 1002, ..cap },
    ] {
        let o = Object {
            id: ino,
            cap: Some(altered),
        };
        refused(
            a.write(tags(1), o, at.clone(), junk.clone()).await,
            "forged",
        );
    }
    let elsewhere = Object {
        id: ino + 1,
        cap: Some(cap),
    };
    refused(
        a.read(tags(1), elsewhere, at.clone()).await,
        "is for object",
    );
    // The data is as Alice wrote it.
    assert_eq!(&alice.read(&f, 0, 11).await.unwrap()[..], b"secret data");
    u.cluster.shutdown().await;
}

/// A descriptor's capability is renewed by inode against the file's mode
/// now: after Alice takes the group's read right away, Bob's renewal is
/// refused (his open descriptor loses the file within a capability's
/// lifetime), while Alice's own is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_is_refused_once_a_chmod_takes_the_right_away() {
    let u = Users::start().await;
    let alice = u.client("alice");
    let s = file(&alice, "/shared", 0o640).await;
    let renew = |write| MetaRequest::Renew {
        inode: s.inode,
        write,
    };
    let bob = raw(&u, 0, "bob").await;
    match bob.meta(tags(2), renew(false)).await.unwrap() {
        MetaReply::Attr(a) => assert_eq!(a.capability.unwrap().rights, capability::READ),
        other => panic!("{other:?}"),
    }
    refused(bob.meta(tags(2), renew(true)).await, "renew for writing");
    alice
        .set_attr("/shared", Some(0o600), None, None)
        .await
        .unwrap();
    refused(bob.meta(tags(2), renew(false)).await, "renew for reading");
    let a = raw(&u, 0, "alice").await;
    match a.meta(tags(1), renew(true)).await.unwrap() {
        MetaReply::Attr(a) => assert_eq!(
            a.capability.unwrap().rights,
            capability::READ | capability::WRITE
        ),
        other => panic!("{other:?}"),
    }
    u.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_key_acts_for_each_user_of_its_range_as_that_user_and_for_no_other() {
    let u = Users::start().await;
    let node = u.client("node1");
    let user = |uid, gid, groups: &[u32]| node.as_user(Principal::user(uid, gid, groups));
    let (alice, bob, carol) = (
        user(1001, 100, &[]),
        user(1002, 100, &[400]),
        user(1003, 300, &[]),
    );
    // One client, one set of connections, three users: each owns what it
    // makes and is checked as itself (group read for bob, nothing for carol).
    let s = file(&alice, "/a", 0o640).await;
    assert_eq!((s.uid, s.gid, s.mode), (1001, 100, 0o640));
    let f = bob.open("/a", false).await.unwrap();
    assert_eq!(&bob.read(&f, 0, 64).await.unwrap()[..], b"secret data");
    bob.close(&f).await.unwrap();
    denied(bob.open("/a", true).await, "open for writing", "/a");
    denied(carol.open("/a", false).await, "open for reading", "/a");
    let c = file(&carol, "/c", 0o600).await;
    assert_eq!((c.uid, c.gid), (1003, 300));
    // Outside the key's range: refused, naming the key and the user.
    let e = user(2500, 2500, &[]).stat("/a").await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::Denied), "{e}");
    assert!(
        e.to_string()
            .contains("key \"node1\" acts for users 1000-1999, not 2500"),
        "{e}"
    );
    // Root on the node is nobody here, and so is the mount itself.
    denied(
        user(0, 0, &[]).open("/c", false).await,
        "open for reading",
        "/c",
    );
    let n = file(&user(0, 0, &[]), "/n", 0o644).await;
    assert_eq!((n.uid, n.gid), (NOBODY, NOBODY));
    let m = file(&node, "/m", 0o644).await;
    assert_eq!((m.uid, m.gid), (NOBODY, NOBODY));
    // A key that is no node key may not name a user.
    let e = u
        .client("alice")
        .as_user(Principal::user(1002, 100, &[]))
        .stat("/a")
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("key \"alice\" is not a node key"),
        "{e}"
    );
    u.cluster.shutdown().await;
}

/// The attributes a reply carries (the test's request must have succeeded).
fn attr_of(m: concerto_proto::Message) -> concerto_proto::MetaAttr {
    match m {
        concerto_proto::Message::MetaReply {
            reply: MetaReply::Attr(a),
            ..
        } => a,
        other => panic!("not attributes: {other:?}"),
    }
}

/// A close names inode numbers, which anyone can count through: a close
/// from a connection that does not hold the file open for writing leaves
/// it as it was, its modification time included; the writer's own close
/// still sets it.
#[test]
fn a_close_of_a_file_the_connection_never_opened_leaves_it_untouched() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (service, _stop) = common::metadata_service(dir.path(), Duration::ZERO, &rt);
    let alice = Principal::user(1001, 1001, &[]);
    let bob = Principal::user(1002, 1002, &[]);
    let create = MetaRequest::Create {
        path: "/private".into(),
        layout: LayoutRequest::default(),
        exclusive: true,
        mode: 0o600,
    };
    let made = attr_of(common::apply_on(&service, create, alice.clone(), 1, 1_000));
    let close = |inode| MetaRequest::Close {
        files: vec![concerto_proto::Closed {
            inode,
            written_end: 4096,
        }],
    };
    let stat = |who: &Principal| {
        let lookup = MetaRequest::Lookup {
            path: "/private".into(),
        };
        attr_of(common::apply_on(&service, lookup, who.clone(), 9, 3_000))
    };
    assert_eq!(made.mtime_ns, 1_000);
    common::apply_on(&service, close(made.inode), alice.clone(), 1, 1_500);
    assert_eq!(
        stat(&alice).mtime_ns,
        1_500,
        "the writer's own close sets it"
    );
    common::apply_on(&service, close(made.inode), bob, 2, 2_000);
    let after = stat(&alice);
    assert_eq!(after.mtime_ns, 1_500, "bob's close touched it");
    assert_eq!(after.size, Some(4096), "bob's close changed its size");
}

/// Requests that name an inode, not a path, are answered as a lookup of
/// its path would be: bob, counting through inode numbers, learns nothing
/// of a file inside alice's private directory (no attributes, no read or
/// write capability), though its own mode would let him read and write it;
/// moved out to a public directory, it answers him.
#[test]
fn an_inode_number_gives_nothing_its_path_would_not() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (service, _stop) = common::metadata_service(dir.path(), Duration::ZERO, &rt);
    let alice = Principal::user(1001, 1001, &[]);
    let bob = Principal::user(1002, 1002, &[]);
    let as_alice = |op| common::apply_on(&service, op, alice.clone(), 1, 1_000);
    as_alice(MetaRequest::Mkdir {
        path: "/alice".into(),
        mode: 0o700,
    });
    let inside = attr_of(as_alice(MetaRequest::Create {
        path: "/alice/open-to-all".into(),
        layout: LayoutRequest::default(),
        exclusive: true,
        mode: 0o666,
    }));
    as_alice(MetaRequest::Close {
        files: vec![concerto_proto::Closed {
            inode: inside.inode,
            written_end: 0,
        }],
    });
    let as_bob = |op| common::apply_on(&service, op, bob.clone(), 2, 2_000);
    let mut answered = Vec::new();
    for inode in 1..=inside.inode + 10 {
        for op in [
            MetaRequest::Getattr { inode },
            MetaRequest::Renew {
                inode,
                write: false,
            },
            MetaRequest::Renew { inode, write: true },
        ] {
            if let concerto_proto::Message::MetaReply { reply, .. } = as_bob(op.clone()) {
                answered.push((op, reply));
            }
        }
    }
    // The root, which anyone may search, and alice's directory itself (as
    // `stat /alice` answers): nothing inside it.
    assert!(
        answered.iter().all(|(op, _)| matches!(op,
            MetaRequest::Getattr { inode } if *inode != inside.inode)),
        "bob was answered: {answered:?}"
    );
    match as_bob(MetaRequest::Getattr {
        inode: inside.inode,
    }) {
        concerto_proto::Message::Error { kind, message } => {
            assert_eq!(kind, ErrorKind::Denied, "{message}");
            assert!(message.contains("a directory above inode"), "{message}");
        }
        other => panic!("answered: {other:?}"),
    }
    // Alice, who may search her directory, is answered.
    assert_eq!(
        attr_of(as_alice(MetaRequest::Getattr {
            inode: inside.inode
        }))
        .inode,
        inside.inode
    );
    // Moved to the root, the file is bob's to see and read, by number too.
    as_alice(MetaRequest::Rename {
        from: "/alice/open-to-all".into(),
        to: "/moved".into(),
    });
    let renewed = attr_of(as_bob(MetaRequest::Renew {
        inode: inside.inode,
        write: false,
    }));
    assert_eq!(renewed.inode, inside.inode);
}

/// In a sticky directory (the root, 1777) bob may not remove alice's
/// directory, and is told so before he is told whether it is empty: an
/// answer of "not empty" would tell him what is inside (Linux checks the
/// sticky bit first too).
#[test]
fn another_users_directory_under_a_sticky_one_is_refused_before_its_emptiness_is_told() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (service, _stop) = common::metadata_service(dir.path(), Duration::ZERO, &rt);
    let alice = Principal::user(1001, 1001, &[]);
    let bob = Principal::user(1002, 1002, &[]);
    for path in ["/alice", "/alice/inside"] {
        let made = common::apply_on(
            &service,
            MetaRequest::Mkdir {
                path: path.into(),
                mode: 0o777,
            },
            alice.clone(),
            1,
            1_000,
        );
        attr_of(made);
    }
    let rmdir = MetaRequest::Rmdir {
        path: "/alice".into(),
    };
    match common::apply_on(&service, rmdir.clone(), bob, 2, 2_000) {
        concerto_proto::Message::Error { kind, message } => {
            // EPERM, as Linux's may_delete: only the owner may, whatever the modes.
            assert_eq!(kind, ErrorKind::NotPermitted, "{message}");
        }
        other => panic!("{other:?}"),
    }
    match common::apply_on(&service, rmdir, alice, 1, 3_000) {
        concerto_proto::Message::Error { kind, .. } => assert_eq!(kind, ErrorKind::NotEmpty),
        other => panic!("{other:?}"),
    }
}
