//! The wire protocol's tests: round trips of every message, and every
//! bound refused by name.

use super::*;
use concerto_core::server::Served;
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
        (path(), proptest::option::of("[a-z]{1,8}"), any::<bool>())
            .prop_map(|(path, after, attrs)| MetaRequest::Readdir { path, after, attrs }),
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
        (tags(), any::<u64>(), cap(), 0u64..=MAX_OBJECT_END).prop_map(
            |(tags, object, cap, size)| {
                Message::Truncate {
                    tags,
                    object,
                    cap,
                    size,
                }
            }
        ),
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
        proptest::collection::vec(
            (
                any::<u32>(),
                any::<u64>(),
                any::<u32>(),
                0.0f64..=1.0,
                0.01f64..100.0
            ),
            0..8
        )
        .prop_map(|served| Message::ServiceReport(ServiceReport {
            served: served
                .into_iter()
                .map(|(app, bytes, requests, reserved, w)| Served {
                    bytes,
                    requests: requests as u64,
                    reserved_bytes: (bytes as f64 * reserved) as u64,
                    reserved_requests: (requests as f64 * reserved) as u64,
                    ..Served::none(concerto_core::AppId(app), w)
                })
                .collect()
        })),
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
    let attr = (any::<u64>(), any::<u64>(), cap()).prop_map(|(inode, size, capability)| MetaAttr {
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
        change: inode ^ size,
        written_elsewhere: size % 2 == 0,
    });
    let stats =
        (proptest::collection::vec(0.0f64..1.0, 0..6), any::<u64>()).prop_map(|(samples, app)| {
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
        });
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
                attrs: Vec::new(),
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
        (any::<u64>(), any::<u64>()).prop_map(|(size, mtime_ns)| Message::Size { size, mtime_ns }),
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
                served: vec![Served {
                    bytes: 10,
                    requests: 1,
                    ..Served::none(concerto_core::AppId(7), w)
                }],
            }),
        );
        let err = Envelope::decode(env.encode().into()).unwrap_err();
        assert!(err.to_string().contains("application 7"), "{err}");
    }
}

#[test]
fn a_report_with_more_reserved_than_served_is_refused() {
    let over = |bytes: u64, reserved_bytes, requests: u64, reserved_requests| {
        let env = Envelope::new(
            1,
            Message::ServiceReport(ServiceReport {
                served: vec![Served {
                    bytes,
                    reserved_bytes,
                    requests,
                    reserved_requests,
                    ..Served::none(concerto_core::AppId(7), 1.0)
                }],
            }),
        );
        Envelope::decode(env.encode().into())
            .err()
            .map(|e| e.to_string())
    };
    for refused in [over(10, 11, 1, 0), over(10, 10, 1, 2)] {
        let err = refused.expect("more reserved than served was accepted");
        assert!(
            err.contains("application 7: more served by reservations than served"),
            "{err}"
        );
    }
    assert_eq!(over(10, 10, 1, 1), None);
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
    // The server's bound on an object, not the local file system's.
    assert!(read(MAX_OBJECT_END - 4096, 4096).validate().is_ok());
    let past = read(MAX_OBJECT_END - 4096, 4097).validate().unwrap_err();
    assert!(
        matches!(&past, ProtocolError::Field { field: "offset", message } if message.contains("bound")),
        "{past:?}"
    );
    let truncate = |size| {
        Envelope::new(
            1,
            Message::Truncate {
                tags: t,
                object: 0,
                cap: None,
                size,
            },
        )
    };
    assert!(truncate(MAX_OBJECT_END).validate().is_ok());
    assert!(matches!(
        truncate(MAX_OBJECT_END + 1).validate(),
        Err(ProtocolError::Field { field: "size", .. })
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
