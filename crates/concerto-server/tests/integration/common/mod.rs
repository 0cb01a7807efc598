//! What several of the server's integration tests share.

#[allow(dead_code)]
pub mod process;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concerto_proto::auth::{self, Credential, Grant, Key, Principal, Secret};
use concerto_proto::{Message, MetaRequest, Tags};
use concerto_server::members::Members;
use concerto_server::metadata::{Caller, MetadataConfig, MetadataService, Outcome};

/// Polls `ready` every 10 ms until it holds; panics naming `what` after
/// 10 s. For what the servers do in the background (the metadata service
/// removing a removed file's objects, say): the test waits on the
/// condition, never on a fixed sleep.
#[allow(dead_code)]
pub async fn eventually<F: Future<Output = bool>>(what: &str, mut ready: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ready().await {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A metadata service on its own in `dir` (one data server it never talks
/// to), committing at most every `commit_interval`; with what keeps it
/// running (drop it to stop the reaper).
#[allow(dead_code)]
pub fn metadata_service(
    dir: &Path,
    commit_interval: Duration,
    rt: &tokio::runtime::Runtime,
) -> (Arc<MetadataService>, tokio::sync::watch::Sender<bool>) {
    let keys = Arc::new(concerto_server::keys::Keys::fixed(
        concerto_proto::auth::KeyRing::generate().unwrap(),
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let service = MetadataService::open(
        dir,
        MetadataConfig {
            data_servers: vec![0],
            default_unit: 65536,
            default_count: 1,
            commit_interval,
        },
        Arc::new(Members::new("127.0.0.1:1".parse().unwrap(), keys)),
        rt.handle().clone(),
        stopped,
    )
    .unwrap();
    (service, stop)
}

/// One request to the service as root (the admin key), answered now (it
/// must not wait on data servers).
#[allow(dead_code)]
pub fn apply(service: &Arc<MetadataService>, op: MetaRequest) -> Message {
    apply_as(service, op, Principal::root())
}

/// [`apply`] as `who`.
#[allow(dead_code)]
pub fn apply_as(service: &Arc<MetadataService>, op: MetaRequest, who: Principal) -> Message {
    apply_on(service, op, who, 1, 1)
}

/// [`apply`] as `who`, on connection `conn`, at `now_ns`.
#[allow(dead_code)]
pub fn apply_on(
    service: &Arc<MetadataService>,
    op: MetaRequest,
    who: Principal,
    conn: u64,
    now_ns: u64,
) -> Message {
    let caller = Caller {
        conn,
        tags: Tags {
            app: 1,
            rank: 0,
            issue_ns: 0,
            weight: None,
        },
        who: Arc::new(who),
        key_id: "admin".into(),
    };
    match service.apply(&op, caller, now_ns) {
        Outcome::Now(m) => m,
        Outcome::Later(_) => panic!("{op:?} waited on data servers"),
    }
}

/// A tenant key for `job`, acting as `user` (in the user's own group).
#[allow(dead_code)]
pub fn tenant_key(id: &str, job: u32, user: Option<u32>) -> Key {
    Key {
        id: id.into(),
        grant: Grant::Tenant { job },
        weight: None,
        user,
        groups: Vec::new(),
        secret: Secret::generate().unwrap(),
    }
}

/// A client's proof in a handshake spoken by hand (no integrity asked).
#[allow(dead_code)]
pub fn client_proof(key: &Credential, client: &auth::Nonce, server: &auth::Nonce) -> auth::Proof {
    auth::proof(
        auth::Side::Client,
        &key.secret,
        auth::Exchange {
            key_id: &key.id,
            client,
            server,
            integrity: false,
        },
    )
}
