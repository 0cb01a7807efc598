//! The key ring, the handshake's proofs and the identities a key grants.

#[test]
fn a_key_ring_or_credential_others_may_read_is_refused_naming_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keys.toml");
    let generated = KeyRing::generate().unwrap();
    std::fs::write(&ring, generated.to_toml()).unwrap();
    let cred = dir.path().join("admin.key");
    let admin = generated.with_grant(Grant::Admin).unwrap().credential();
    std::fs::write(&cred, admin.to_toml()).unwrap();
    for mode in [0o644, 0o640, 0o604, 0o620] {
        std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = KeyRing::load(&ring).unwrap_err();
        assert!(
            e.contains(&format!("mode {mode:04o} lets others")) && e.contains("chmod 600"),
            "{e}"
        );
        std::fs::set_permissions(&cred, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = Credential::load(&cred).unwrap_err();
        assert!(
            e.starts_with("credential ") && e.contains("chmod 600"),
            "{e}"
        );
    }
    for mode in [0o600, 0o400] {
        std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(KeyRing::load(&ring).unwrap(), generated);
        std::fs::set_permissions(&cred, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(Credential::load(&cred).unwrap(), admin);
    }
}

#[test]
fn a_tenant_key_acts_as_its_user_and_groups_and_root_is_the_admin_key_alone() {
    let tenant = |user, groups: &[u32]| Key {
        id: "t".into(),
        grant: Grant::Tenant { job: 1 },
        weight: None,
        user,
        groups: groups.to_vec(),
        secret: Secret::generate().unwrap(),
    };
    let p = tenant(Some(1001), &[]).principal();
    assert_eq!((p.uid, p.gid, p.groups), (1001, 1001, vec![1001]));
    let p = tenant(Some(1001), &[100, 200, 100]).principal();
    assert_eq!((p.uid, p.gid, p.groups), (1001, 100, vec![100, 200]));
    assert_eq!(tenant(None, &[]).principal(), Principal::nobody());
    let admin = KeyRing::generate().unwrap();
    assert!(admin
        .with_grant(Grant::Admin)
        .unwrap()
        .principal()
        .is_root());
    assert_eq!(
        admin.with_grant(Grant::Peer).unwrap().principal(),
        Principal::nobody()
    );
    let ring = |entry: &str| {
        KeyRing::parse(&format!(
            "[[keys]]\nid = \"t\"\nrole = \"tenant\"\njob = 1\n{entry}\nsecret = \"{}\"\n",
            "ab".repeat(32)
        ))
    };
    let e = ring("user = 0").unwrap_err();
    assert!(e.starts_with("keys[0].user: 0 is root"), "{e}");
    let e = ring("groups = [100]").unwrap_err();
    assert!(e.starts_with("keys[0].groups: groups need a user"), "{e}");
    assert_eq!(
        ring("user = 5\ngroups = [7, 8]").unwrap().keys()[0].groups,
        vec![7, 8]
    );
}
#[test]
fn a_node_key_acts_for_the_users_of_its_range_and_squashes_root() {
    let ring = |entry: &str| {
        KeyRing::parse(&format!(
            "[[keys]]\nid = \"n1\"\nrole = \"node\"\n{entry}\nsecret = \"{}\"\n",
            "ab".repeat(32)
        ))
    };
    let ring_ok = ring("users = [1000, 1999]").unwrap();
    let node = &ring_ok.keys()[0];
    assert_eq!(
        node.grant,
        Grant::Node {
            first_user: 1000,
            last_user: 1999
        }
    );
    assert_eq!(KeyRing::parse(&ring_ok.to_toml()).unwrap(), ring_ok);
    for (entry, says) in [
        ("", "keys[0].users: a node key needs the users"),
        ("users = [0, 10]", "keys[0].users: [0, 10] holds 0, root"),
        (
            "users = [20, 10]",
            "keys[0].users: [20, 10]: the first is above the last",
        ),
        ("users = [1, 2]\njob = 3", "keys[0].job: only a tenant key"),
        (
            "users = [1, 2]\nuser = 3",
            "keys[0].user: only a tenant key",
        ),
    ] {
        let e = ring(entry).unwrap_err();
        assert!(e.starts_with(says), "{entry:?}: {e}");
    }
    let e = KeyRing::parse(&format!(
        "[[keys]]\nid = \"t\"\nrole = \"tenant\"\njob = 1\nusers = [1, 2]\nsecret = \"{}\"\n",
        "ab".repeat(32)
    ))
    .unwrap_err();
    assert!(e.starts_with("keys[0].users: only a node key"), "{e}");

    let user = |uid, gid, groups: &[u32]| Principal::user(uid, gid, groups);
    assert_eq!(
        node.acting_for(Some(&user(1001, 100, &[100, 400]))),
        Ok(user(1001, 100, &[400]))
    );
    let e = node.acting_for(Some(&user(2000, 100, &[]))).unwrap_err();
    assert_eq!(e, "key \"n1\" acts for users 1000-1999, not 2000");
    // Root on the node, and root's group, are nobody on the servers.
    assert_eq!(
        node.acting_for(Some(&user(0, 0, &[]))),
        Ok(Principal::nobody())
    );
    assert_eq!(
        node.acting_for(Some(&user(1001, 0, &[0, 100]))),
        Ok(user(1001, NOBODY, &[100]))
    );
    assert_eq!(node.acting_for(None), Ok(Principal::nobody()));
    // Any other key is its own user and names none.
    let generated = KeyRing::generate().unwrap();
    let admin = generated.with_grant(Grant::Admin).unwrap();
    let e = admin.acting_for(Some(&user(1001, 100, &[]))).unwrap_err();
    assert!(e.contains("is not a node key"), "{e}");
    assert!(admin.acting_for(None).unwrap().is_root());
}

use super::*;

fn ring_text() -> String {
    let s = Secret::generate().unwrap().to_hex();
    format!(
        "[[keys]]\nid = \"admin\"\nrole = \"admin\"\nsecret = \"{s}\"\n\
         [[keys]]\nid = \"job-7\"\nrole = \"tenant\"\njob = 7\nweight = 2.0\nsecret = \"{s}\"\n"
    )
}

#[test]
fn key_rings_round_trip_and_name_the_bad_key() {
    let ring = KeyRing::parse(&ring_text()).unwrap();
    assert_eq!(ring.get("job-7").unwrap().grant, Grant::Tenant { job: 7 });
    assert_eq!(ring.get("job-7").unwrap().weight, Some(2.0));
    assert_eq!(KeyRing::parse(&ring.to_toml()).unwrap(), ring);
    let bad = |from: &str, to: &str| KeyRing::parse(&ring_text().replace(from, to)).unwrap_err();
    assert!(bad("job = 7\n", "").starts_with("keys[1].job: a tenant key needs one"));
    assert!(
        bad("role = \"admin\"", "role = \"admin\"\njob = 1").contains("keys[0].job: only a tenant")
    );
    assert!(bad("weight = 2.0", "weight = -1.0").contains("keys[1].weight: -1 is not a number > 0"));
    assert!(bad("\"job-7\"", "\"admin\"").contains("keys[1].id: \"admin\" appears twice"));
    assert!(bad("\"job-7\"", "\"a b\"").contains("keys[1].id: \"a b\": only letters"));
    assert!(bad("role = \"admin\"", "role = \"root\"").contains("keys[0].role"));
    let e =
        KeyRing::parse("[[keys]]\nid = \"a\"\nrole = \"admin\"\nsecret = \"abc\"\n").unwrap_err();
    assert!(
        e.contains("keys[0].secret: must be 64 hexadecimal digits"),
        "{e}"
    );
}

#[test]
fn credentials_round_trip_and_never_print_their_secret() {
    let ring = KeyRing::parse(&ring_text()).unwrap();
    let c = ring.get("job-7").unwrap().credential();
    assert_eq!(c.job, Some(7));
    assert_eq!(Credential::parse(&c.to_toml()).unwrap(), c);
    assert!(!format!("{c:?}").contains(&c.secret.to_hex()));
}

#[test]
fn proofs_hold_only_for_the_same_secret_id_nonces_and_integrity() {
    let (a, b) = (Secret::generate().unwrap(), Secret::generate().unwrap());
    let (nc, ns) = (random().unwrap(), random().unwrap());
    let x = |key_id, server, integrity| Exchange {
        key_id,
        client: &nc,
        server,
        integrity,
    };
    let p = proof(Side::Client, &a, x("k", &ns, false));
    assert!(verify(Side::Client, &a, x("k", &ns, false), &p));
    assert!(
        !verify(Side::Client, &b, x("k", &ns, false), &p),
        "another secret"
    );
    assert!(
        !verify(Side::Client, &a, x("k2", &ns, false), &p),
        "another key id"
    );
    let replayed = random().unwrap();
    assert!(
        !verify(Side::Client, &a, x("k", &replayed, false), &p),
        "a replay"
    );
    // Integrity asked for or granted is part of the proof: a man in
    // the middle cannot turn it off or on.
    assert!(
        !verify(Side::Client, &a, x("k", &ns, true), &p),
        "integrity flipped"
    );
    // The client's proof is not the server's (no reflection).
    assert!(!verify(Side::Server, &a, x("k", &ns, false), &p));
    let theirs = proof(Side::Server, &a, x("k", &ns, true));
    assert!(verify(Side::Server, &a, x("k", &ns, true), &theirs));
    assert!(!verify(Side::Server, &a, x("k", &ns, false), &theirs));
}
