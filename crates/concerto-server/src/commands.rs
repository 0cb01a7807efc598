//! What a request asks the scheduling loop to do: whose it is (the user
//! its key charges it to and acts as on files), and the command, for the
//! policy's queue or the server itself.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use concerto_core::{AppId, Extent, MetaOp, Nid, ObjectId, Op, Request, RequestId, Time};
use concerto_proto::auth::{Grant, Key, Principal};
use concerto_proto::{ErrorKind, Message, MetaRequest, Tags};

use crate::coordinator::PhaseCommand;
use crate::data::ObjectOp;
use crate::rules::parse_rules;
use crate::schedule::{Action, Command, Job, Reply};

/// The command a request asks for; `Err(close)` when it was answered here
/// (and whether the connection must close).
pub(crate) fn command(
    message: Message,
    key: &Key,
    who: &(Arc<Principal>, Arc<str>),
    (conn, from): (u64, IpAddr),
    reply: Reply,
) -> Result<Command, bool> {
    match storage_command(message, key, who, (conn, from), reply) {
        Ok(cmd) => Ok(cmd),
        Err(given_back) => {
            let (message, reply) = *given_back;
            control_command(message, key, from, reply)
        }
    }
}

/// Whose a request is: the user its scheduling is charged to (`None`
/// for the administrator's own) and who it acts as on files.
///
/// A tenant's requests weigh what the administrator set for its key,
/// and are its key's user's; only the administrator's own requests may
/// carry a weight. A node key's request is the user's its capability
/// was issued to (data) or that it names (namespace, checked against
/// the key's users before it came here).
fn acting_as(
    key: &Key,
    message: &Message,
    principal: &Arc<Principal>,
) -> (Option<u32>, Arc<Principal>) {
    let user = match key.grant {
        Grant::Admin => None,
        Grant::Node { .. } => match message {
            Message::Meta { user, .. } => user.as_ref().map(|p| p.uid),
            other => other.capability().map(|c| c.uid),
        },
        _ => key.user,
    };
    let principal = match message {
        Message::Meta {
            user: named @ Some(_),
            ..
        } => Arc::new(
            key.acting_for(named.as_ref())
                .unwrap_or_else(|_| Principal::nobody()),
        ),
        _ => principal.clone(),
    };
    (user, principal)
}

/// A data or metadata request's command, for the policy's queue (or
/// served at once: an existence check); anything else given back.
fn storage_command(
    message: Message,
    key: &Key,
    (principal, key_id): &(Arc<Principal>, Arc<str>),
    (conn, from): (u64, IpAddr),
    reply: Reply,
) -> Result<Command, Box<(Message, Reply)>> {
    let (user, principal) = acting_as(key, &message, principal);
    let who = |tags: &Tags| match key.grant {
        Grant::Admin => (tags.weight, None),
        _ => (key.weight, user),
    };
    // What QoS expressions may match besides the user: the user's primary
    // group, and the client's address (the connection's, not a claim).
    let group = user.map(|_| principal.gid);
    let nid = Nid::of_peer(from);
    let req = |tags: &Tags, op: Op, object: u64, extents: &[Extent]| {
        request(*tags, who(tags), (group, nid), op, object, extents)
    };
    let job = |req: Request, action: Action, reply| Job {
        req,
        action,
        reply,
        conn,
        who: principal.clone(),
        key_id: key_id.clone(),
    };
    Ok(match message {
        Message::Write {
            tags,
            object,
            extents,
            data,
            ..
        } => {
            let r = req(&tags, Op::Write, object, &extents);
            Command::Submit(job(
                r,
                Action::Object(ObjectOp::Write { extents, data }),
                reply,
            ))
        }
        Message::Read {
            tags,
            object,
            extents,
            ..
        } => {
            let r = req(&tags, Op::Read, object, &extents);
            Command::Submit(job(r, Action::Object(ObjectOp::Read { extents }), reply))
        }
        // The policy sees a zero-length write: it moves no bytes but takes
        // its turn (and, in the SFQ kinds, a small request's cost).
        Message::Fsync { tags, object, .. } => {
            let r = req(&tags, Op::Write, object, &[]);
            Command::Submit(job(r, Action::Object(ObjectOp::Fsync), reply))
        }
        // Object-level metadata on a data server, as PVFS2's datafile getattr/setattr/remove.
        Message::ObjectSize { tags, object, .. } => {
            let r = req(&tags, Op::Meta(MetaOp::Getattr), object, &[]);
            Command::Submit(job(r, Action::Object(ObjectOp::Size), reply))
        }
        Message::Truncate {
            tags, object, size, ..
        } => {
            let r = req(&tags, Op::Meta(MetaOp::Setattr), object, &[]);
            Command::Submit(job(r, Action::Object(ObjectOp::Truncate(size)), reply))
        }
        Message::RemoveObjects { tags, objects } => {
            let r = req(&tags, Op::Meta(MetaOp::Remove), 0, &[]);
            Command::Submit(job(r, Action::Object(ObjectOp::Remove(objects)), reply))
        }
        Message::Meta {
            tags,
            op: op @ MetaRequest::Exists { .. },
            ..
        } => Command::Direct(job(
            req(&tags, Op::Meta(op.kind()), 0, &[]),
            Action::Meta(op),
            reply,
        )),
        Message::Meta { tags, op, .. } => {
            let r = req(&tags, Op::Meta(op.kind()), 0, &[]);
            Command::Submit(job(r, Action::Meta(op), reply))
        }
        // Boxed: only control requests, which are rare, take this way.
        other => return Err(Box::new((other, reply))),
    })
}

/// A request to the server itself (policy, rules, cluster, coordinator,
/// statistics); `Err(close)` when it was answered here.
fn control_command(
    message: Message,
    key: &Key,
    from: IpAddr,
    reply: Reply,
) -> Result<Command, bool> {
    let refuse = |reply: Reply, kind, message: String| {
        reply.send(Message::Error { kind, message });
    };
    Ok(match message {
        Message::Ping => Command::Ping { reply },
        Message::Space => Command::Space { reply },
        Message::SetPolicy { policy } => Command::SetPolicy { policy, reply },
        // A peer key's reports are held to what its servers could serve
        // (the administrator's are not).
        Message::ServiceReport(report) => Command::Absorb {
            report,
            from: (from, key.grant == Grant::Peer),
            reply,
        },
        Message::SetCluster { servers } => Command::SetCluster { servers, reply },
        Message::SetRules { rules, apply } => match parse_rules(&rules) {
            Ok(rules) => Command::SetRules {
                rules,
                apply,
                reply,
            },
            Err(message) => {
                refuse(reply, ErrorKind::Invalid, message);
                return Err(false);
            }
        },
        Message::GetRules => Command::GetRules { reply },
        // The application is the one the key allows (`refusal` checked a
        // tenant's against its job), as for data.
        Message::BeginPhase { tags, wait_ms } => Command::Phase(PhaseCommand::Begin {
            app: tags.app,
            wait: Duration::from_millis(u64::from(wait_ms)),
            reply,
        }),
        Message::EndPhase { tags } => Command::Phase(PhaseCommand::End {
            app: tags.app,
            reply,
        }),
        Message::SetGrants { grants } => Command::SetGrants { grants, reply },
        Message::SetSets { sets } => match crate::coordinator::parse_sets(&sets) {
            Ok(rule) => Command::Phase(PhaseCommand::Switch { rule, reply }),
            Err(message) => {
                refuse(reply, ErrorKind::Invalid, message);
                return Err(false);
            }
        },
        Message::Arrivals { after } => Command::Arrivals { after, reply },
        Message::Stats => {
            let (tx, rx) = oneshot::channel();
            tokio::spawn(async move {
                if let Ok(stats) = rx.await {
                    reply.send(Message::StatsReply(Box::new(stats)));
                }
            });
            Command::Stats { reply: tx }
        }
        _ => {
            refuse(
                reply,
                ErrorKind::Protocol,
                "a reply is not a request".into(),
            );
            return Err(true);
        }
    })
}

/// The request a frame asks for, as the policy sees it: its tags, the
/// weight and user its key gives, and the object extents it covers.
fn request(
    tags: Tags,
    (weight, user): (Option<f64>, Option<u32>),
    (group, nid): (Option<u32>, Option<Nid>),
    op: Op,
    object: u64,
    extents: &[Extent],
) -> Request {
    Request {
        id: RequestId(0),
        app: AppId(tags.app),
        rank: tags.rank,
        issue_time: Time::from_nanos(tags.issue_ns),
        op,
        object: ObjectId(object),
        offset: extents.first().map_or(0, |e| e.offset),
        len: extents.iter().map(|e| e.len).sum(),
        segments: if extents.len() > 1 {
            extents.to_vec()
        } else {
            Vec::new()
        },
        weight,
        user,
        group,
        nid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concerto_proto::auth::{self, Secret};
    use concerto_proto::capability::{self, Capability};

    fn key(grant: Grant, user: Option<u32>) -> Key {
        Key {
            id: "k".into(),
            grant,
            weight: None,
            user,
            groups: Vec::new(),
            secret: Secret::generate().unwrap(),
        }
    }

    /// The job `message` becomes on a connection of `key`.
    fn job_of(key: &Key, message: Message) -> Job {
        let who = (Arc::new(key.principal()), Arc::<str>::from("k"));
        let reply = Reply {
            id: 1,
            out: None,
            permit: None,
        };
        match command(message, key, &who, (1, IpAddr::from([127, 0, 0, 1])), reply) {
            Ok(Command::Submit(job)) => job,
            _ => panic!("not a job for the queue"),
        }
    }

    #[test]
    fn a_node_keys_requests_are_the_users_its_capabilities_and_requests_name() {
        let node = key(
            Grant::Node {
                first_user: 1000,
                last_user: 1999,
            },
            None,
        );
        let tags = Tags {
            app: 7,
            rank: 0,
            issue_ns: 0,
            weight: Some(50.0),
        };
        let cap = Capability {
            inode: 3,
            rights: capability::READ,
            uid: 1002,
            expires_s: 0,
            mac: [0; 32],
        };
        let read = Message::Read {
            tags,
            object: 3,
            cap: Some(cap),
            extents: vec![Extent::new(0, 10)],
        };
        let job = job_of(&node, read.clone());
        // The user QoS rules see is the capability's; the weight is not
        // the request's to claim.
        assert_eq!(
            (job.req.user, job.req.weight, job.req.app),
            (Some(1002), None, AppId(7))
        );
        let meta = |user| Message::Meta {
            tags,
            op: MetaRequest::Lookup { path: "/a".into() },
            user,
        };
        let job = job_of(&node, meta(Some(Principal::user(1001, 100, &[]))));
        assert_eq!(
            (job.req.user, job.who.uid, job.who.gid),
            (Some(1001), 1001, 100)
        );
        let job = job_of(&node, meta(None));
        assert_eq!((job.req.user, job.who.uid), (None, auth::NOBODY));
        // A tenant's are its key's user's, whatever its capability names.
        let tenant = key(Grant::Tenant { job: 7 }, Some(1005));
        let job = job_of(&tenant, read);
        assert_eq!((job.req.user, job.who.uid), (Some(1005), 1005));
    }
}
